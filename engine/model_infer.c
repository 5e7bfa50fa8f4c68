/* model_infer.c -- the inference tables of a model whose weights are final
 * (nn_model_prepare_inference, model.h): W_hh transposed for one-row products on the host, the
 * folded head fc2 . fc1, the first layer's input projection folded into a (V, G*H) table per
 * direction and the step-1 table beside it; nn_model_drop_inference frees them whenever the
 * weights may change and when the model is freed (this file alone builds and frees them).
 * Results are the same with or without any of them: each is a speed-up, built within a memory
 * budget proportional to the parameters (nn_model_table_budget).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "nn_mem.h"

static int on_device(const nn_model *m) { return m->be->device_memory; }

void nn_model_drop_inference(nn_model *m) {
  for (int k = 0; k < NN_MAX_MEMBERS; k++)
    if (m->member[k]) nn_model_drop_inference(m->member[k]);
  for (int d = 0; d < 2; d++) {
    nn_backend_free(m->mem, m->be, m->fold[d]);
    m->fold[d] = NULL;
    nn_backend_free(m->mem, m->be, m->step1[d]);
    m->step1[d] = NULL;
  }
  nn_mem_free_aligned(m->mem, m->transposed);
  m->transposed = NULL;
  memset(m->w_hh_t, 0, sizeof m->w_hh_t);
  nn_backend_free(m->mem, m->be, m->head_buf);
  m->head_buf = NULL;
  m->head_w = m->head_b = NULL;
}

/* dst (cols, rows) = src (rows, cols)^T */
static void transpose(float *dst, const float *src, int rows, int cols) {
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < cols; j++) dst[(size_t)j * rows + i] = src[(size_t)i * cols + j];
}

/* The transposed weights of inference (host memory only; see model.h). Misaligned rows cost a
 * one-row product ~30%: every 64-byte load would straddle two cache lines. */
static int prepare_transposed(nn_model *m) {
  if (m->be->device_memory) return NN_OK;
  int GH = m->G * m->H;
  size_t piece = nn_aligned_floats((size_t)m->H * GH);
  float *t = nn_mem_alloc_aligned(m->mem, (size_t)m->L * m->dirs * piece * sizeof(float));
  if (!t) return NN_NOMEM;
  m->transposed = t;
  for (int l = 0; l < m->L; l++)
    for (int d = 0; d < m->dirs; d++) {
      transpose(t, m->params + m->rnn[l][d].w_hh, GH, m->H);
      m->w_hh_t[l][d] = t;
      t += piece;
    }
  return NN_OK;
}

/* The folded head of inference (model.h), with the backend's own operations: one-row inference
 * then multiplies D x C weights instead of D x F + F x C, and reads 2 KB instead of 51 KB for
 * the lesson's model. Only when it is no larger than fc1 and fc2 (a narrow fc1 between many
 * classes and a wide encoder would make C x D far larger than the file): else inference runs
 * fc1 and fc2 (head_w NULL). */
static int prepare_head(nn_model *m) {
  const nn_backend *be = m->be;
  const float *p = m->params;
  int C = m->C, D = m->D, F = m->F;
  if (F == 0) {
    m->head_w = p + m->fc2_w;
    m->head_b = p + m->fc2_b;
    return NN_OK;
  }
  if ((uint64_t)C * D > (uint64_t)F * ((uint64_t)C + D)) return NN_OK;
  size_t nw = nn_aligned_floats((size_t)C * D);
  float *buf = nn_backend_alloc(m->mem, be, (nw + (size_t)C) * sizeof(float));
  if (!buf) return NN_NOMEM;
  m->head_buf = buf;
  /* head_w (C, D) = W2 (C, F) W1 (F, D); head_b (1, C) = b1 (1, F) W2^T + b2 */
  be->sgemm(0, 0, C, D, F, 1.0f, p + m->fc2_w, F, p + m->fc1_w, D, 0.0f, buf, D);
  be->sgemm(0, 1, 1, C, F, 1.0f, p + m->fc1_b, F, p + m->fc2_w, F, 0.0f, buf + nw, C);
  be->add_bias(buf + nw, C, p + m->fc2_b, 1, C);
  m->head_w = buf;
  m->head_b = buf + nw;
  return NN_OK;
}

/* m->step1[d] (model.h) from m->fold[d]: step 0 of every token at once, as direction_forward
 * runs it (h_prev = 0, c_prev = 0; gru: h_prev W_hh^T = 0, + b_hh), then one GEMM. (rnn's
 * tanh over V * H values may take libmvec's vector or scalar tanhf for a value where the runtime
 * step took the other: h_0 can differ in its last bit, as the GEMM orders already do.)
 * NN_NOMEM when a buffer cannot be had: the caller then runs without the table. */
static int prepare_step1(nn_model *m, int d) {
  const nn_backend *be = m->be;
  const nn_rnn_params *w = &m->rnn[0][d];
  size_t V = (size_t)m->V;
  int H = m->H, GH = m->G * m->H;
  nn_cell cell = m->cfg.cell;
  float *pre = nn_backend_alloc(m->mem, be, V * GH * sizeof(float)),
        *h0 = nn_backend_alloc(m->mem, be, V * H * sizeof(float));
  float *extra =
      cell == NN_CELL_RNN
          ? NULL
          : nn_backend_alloc(m->mem, be,
                             V * (cell == NN_CELL_GRU ? GH : H) * sizeof(float)); /* hw or c */
  float *t = nn_backend_alloc(m->mem, be, V * GH * sizeof(float));
  int ok = pre && h0 && t && (cell == NN_CELL_RNN || extra);
  if (ok) {
    be->gather_rows(pre, GH, m->fold[d], GH, NULL, (int)V, GH); /* the cells overwrite pre */
    switch (cell) {
    case NN_CELL_RNN: be->rnn_step_forward(h0, pre, (int)V, H); break;
    case NN_CELL_GRU:
      be->zero(extra, V * GH);
      be->add_bias(extra, GH, m->params + w->b_hh, (int)V, GH);
      be->gru_step_forward(h0, pre, extra, NULL, (int)V, H);
      break;
    case NN_CELL_LSTM: be->lstm_step_forward(h0, extra, pre, NULL, (int)V, H); break;
    }
    be->sgemm(0, 1, (int)V, GH, H, 1.0f, h0, H, m->params + w->w_hh, H, 0.0f, t, GH);
    m->step1[d] = t;
  } else {
    nn_backend_free(m->mem, be, t);
  }
  nn_backend_free(m->mem, be, pre);
  nn_backend_free(m->mem, be, h0);
  nn_backend_free(m->mem, be, extra);
  return ok ? NN_OK : NN_NOMEM;
}

/* The composed input vector of every vocabulary word (model.h: the mean of its embedding row and
 * its subword rows), (V, E) in backend memory, computed on the host in the order of
 * subwords_forward (model.c), so that a folded word equals a composed one to float rounding;
 * NULL when out of memory. */
static float *composed_vectors(const nn_model *m) {
  const nn_backend *be = m->be;
  size_t V = (size_t)m->V, E = (size_t)m->E, rows = V + (size_t)m->S;
  float *table = nn_mem_alloc(m->mem, rows * E * sizeof(float));
  float *out = nn_mem_alloc(m->mem, V * E * sizeof(float));
  float *dev = NULL;
  if (!table || !out) goto done;
  be->download(table, m->params + m->emb, rows * E * sizeof(float));
  for (size_t v = 0; v < V; v++) {
    float *x = out + v * E;
    memcpy(x, table + v * E, E * sizeof(float));
    int a = m->sub_start[v], b = m->sub_start[v + 1];
    for (int i = a; i < b; i++) {
      const float *s = table + (size_t)m->sub_rows[i] * E;
      for (size_t e = 0; e < E; e++) x[e] += s[e];
    }
    float scale = 1.0f / (float)(1 + b - a);
    for (size_t e = 0; e < E; e++) x[e] *= scale;
  }
  dev = nn_backend_alloc(m->mem, be, V * E * sizeof(float));
  if (dev) be->upload(dev, out, V * E * sizeof(float));
done:
  nn_mem_free(m->mem, table);
  nn_mem_free(m->mem, out);
  return dev;
}

int nn_model_prepare_inference(nn_model *m, char *err) {
  nn_model_drop_inference(m);
  int rc = nn_model_sync(m, err);
  if (rc != NN_OK) return rc;
  if (on_device(m) && m->params_state == NN_PARAMS_HOST_NEWER) /* uploaded: the weights are */
    m->params_state = NN_PARAMS_SYNCED;                        /* final, the copies equal */
  if (m->K > 1) { /* an ensemble: each member's tables (the members run the forwards) */
    for (int k = 0; k < m->K; k++) {
      rc = nn_model_prepare_inference(m->member[k], err);
      if (rc != NN_OK) {
        nn_model_drop_inference(m);
        return rc;
      }
    }
    return NN_OK;
  }
  const nn_backend *be = m->be;
  int GH = m->G * m->H, E = m->E;
  if (prepare_transposed(m) != NN_OK || prepare_head(m) != NN_OK) {
    nn_model_drop_inference(m);
    if (nn_backend_check(be, "preparing the weights for inference", err) == NN_OK)
      snprintf(err, NN_ERR_LEN, "out of memory preparing the weights for inference");
    return NN_NOMEM;
  }
  /* The tables are a speed-up, built within a budget proportional to the parameters (so to the
   * model's file: a model cannot take memory out of proportion to its BLOB), else skipped:
   * the same results either way (model.h). */
  double budget = nn_model_table_budget(m);
  double fold_bytes = (double)m->V * GH * m->dirs * sizeof(float);
  double step1_bytes = fold_bytes; /* + its scratch, one direction at a time: */
  double step1_scratch = (double)m->V * (2.0 * GH + m->H) * sizeof(float);
  if ((double)m->V * GH * m->dirs > 64.0 * 1024 * 1024 || fold_bytes > budget) { /* keep GEMMs */
    rc = nn_backend_check(be, "preparing the weights for inference", err); /* the head's ops */
    if (rc != NN_OK) nn_model_drop_inference(m);
    return rc;
  }
  /* with subwords, each word's input vector is the mean of its rows (model.h): composed once */
  float *composed = m->S > 0 ? composed_vectors(m) : NULL;
  if (m->S > 0 && !composed) {
    nn_model_drop_inference(m);
    snprintf(err, NN_ERR_LEN, "out of memory folding the input projection");
    return NN_NOMEM;
  }
  const float *input = composed ? composed : m->params + m->emb;
  for (int d = 0; d < m->dirs; d++) {
    const nn_rnn_params *w = &m->rnn[0][d];
    float *t = nn_backend_alloc(m->mem, be, (size_t)m->V * GH * sizeof(float));
    if (!t) {
      nn_backend_free(m->mem, be, composed);
      nn_model_drop_inference(m);
      snprintf(err, NN_ERR_LEN, "out of memory folding the input projection");
      return NN_NOMEM;
    }
    /* t (V, GH) = emb (V, E) W_ih^T + b_ih (+ b_hh for rnn and lstm, as direction_forward) */
    be->sgemm(0, 1, m->V, GH, E, 1.0f, input, E, m->params + w->w_ih, E, 0.0f, t, GH);
    be->add_bias(t, GH, m->params + w->b_ih, m->V, GH);
    if (m->cfg.cell != NN_CELL_GRU) be->add_bias(t, GH, m->params + w->b_hh, m->V, GH);
    m->fold[d] = t;
    rc = nn_backend_check(be, "folding the input projection", err);
    if (rc != NN_OK) {
      nn_backend_free(m->mem, be, composed);
      nn_model_drop_inference(m);
      return rc;
    }
    /* the step-1 table doubles the memory: only while both stay under the same 256 MB */
    int room = (double)m->V * GH * m->dirs * 2 <= 64.0 * 1024 * 1024 &&
               fold_bytes + step1_bytes + step1_scratch <= budget;
    if (room && prepare_step1(m, d) != NN_OK && be->error)
      be->error(NULL, 0); /* an optimisation: out of memory (its only error), run without it */
  }
  nn_backend_free(m->mem, be, composed);
  rc = nn_backend_check(be, "folding the input projection", err);
  if (rc != NN_OK) nn_model_drop_inference(m);
  return rc;
}

double nn_model_table_budget(const nn_model *m) {
  /* a member's share of the ensemble's parameters */
  double n = m->owner ? (double)m->owner->nparams / m->owner->K : (double)m->nparams;
  return NN_INFER_TABLES_FACTOR * n * sizeof(float) + NN_INFER_TABLES_SLACK;
}
