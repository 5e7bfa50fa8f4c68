/* recurrent.c -- the RNN / GRU / LSTM encoder over packed sequences: nn_recurrent_forward and
 * nn_recurrent_backward (BPTT), layers stacked, uni- or bidirectional, as torch.nn.RNN/GRU/LSTM
 * with batch_first packed input. Per direction:
 *   pre (P, G*H) = x W_ih^T + b_ih (+ b_hh for rnn and lstm)       one GEMM for all steps
 *   for each step t: pre[t] += h[t-1] W_hh^T (gru: hw[t] = h[t-1] W_hh^T + b_hh), cell kernel
 * Backward runs the steps in reverse, then forms dW_ih and dW_hh with one GEMM each over all
 * steps. The reverse direction is the same recurrence on rows permuted by rev (model.h). */
#include <string.h>

#include "model.h"

/* out (n, GH) = h_prev (n, H) W_hh^T + beta out, through the transposed copy when inference has
 * one (model.h: one-row products then read it row by row) */
static void recurrent_product(const nn_backend *be, float *out, float beta, const float *h_prev,
                              const float *w_hh, const float *w_hh_t, int n, int H, int GH) {
  if (w_hh_t) be->sgemm(0, 0, n, GH, H, 1.0f, h_prev, H, w_hh_t, GH, beta, out, GH);
  else be->sgemm(0, 1, n, GH, H, 1.0f, h_prev, H, w_hh, H, beta, out, GH);
}

/* Run one direction's recurrence. x: (P, in) in step order, or NULL when the input projection
 * is looked up in the folded table `fold` (V, G*H) by `ids` (P), and step 1's recurrent product
 * in `step1` (V, G*H) by the ids of step 0 (model.h). h: (P, H) out. */
static void direction_forward(const nn_model *m, const nn_workspace *ws, const nn_rnn_params *w,
                              const float *w_hh_t, const float *x, int in, const float *fold,
                              const float *step1, const int *ids, nn_rnn_acts *a) {
  const nn_backend *be = m->be;
  const float *p = m->params;
  int H = m->H, GH = m->G * H, P = ws->P;
  if (fold) {
    be->gather_rows(a->pre, GH, fold, GH, ids, P, GH);
  } else {
    be->sgemm(0, 1, P, GH, in, 1.0f, x, in, p + w->w_ih, in, 0.0f, a->pre, GH);
    be->add_bias(a->pre, GH, p + w->b_ih, P, GH);
    if (m->cfg.cell != NN_CELL_GRU) be->add_bias(a->pre, GH, p + w->b_hh, P, GH);
  }
  for (int t = 0; t < ws->Tmax; t++) {
    int r0 = ws->off[t], n = ws->nstep[t];
    const float *h_prev = t > 0 ? a->h + (size_t)ws->off[t - 1] * H : NULL;
    float *pre = a->pre + (size_t)r0 * GH, *h = a->h + (size_t)r0 * H;
    switch (m->cfg.cell) {
    case NN_CELL_RNN:
      if (t == 1 && step1) be->gather_add_rows(pre, GH, step1, GH, ids, n, GH); /* model.h */
      else if (h_prev) recurrent_product(be, pre, 1.0f, h_prev, p + w->w_hh, w_hh_t, n, H, GH);
      be->rnn_step_forward(h, pre, n, H);
      break;
    case NN_CELL_GRU: {
      float *hw = a->hw + (size_t)r0 * GH;
      if (t == 1 && step1) be->gather_rows(hw, GH, step1, GH, ids, n, GH);
      else if (h_prev) recurrent_product(be, hw, 0.0f, h_prev, p + w->w_hh, w_hh_t, n, H, GH);
      else be->zero(hw, (size_t)n * GH);
      be->add_bias(hw, GH, p + w->b_hh, n, GH);
      be->gru_step_forward(h, pre, hw, h_prev, n, H);
      break;
    }
    case NN_CELL_LSTM: {
      const float *c_prev = t > 0 ? a->c + (size_t)ws->off[t - 1] * H : NULL;
      if (t == 1 && step1) be->gather_add_rows(pre, GH, step1, GH, ids, n, GH);
      else if (h_prev) recurrent_product(be, pre, 1.0f, h_prev, p + w->w_hh, w_hh_t, n, H, GH);
      be->lstm_step_forward(h, a->c + (size_t)r0 * H, pre, c_prev, n, H);
      break;
    }
    }
  }
}

void nn_recurrent_forward(const nn_model *m, nn_workspace *ws) {
  const nn_backend *be = m->be;
  int H = m->H, D = m->D, P = ws->P;
  for (int l = 0; l < m->L; l++) {
    const float *x = l == 0 ? ws->x0 : ws->y[l - 1]; /* (P, in) position order */
    int in = l == 0 ? m->E : D;
    int folded = l == 0 && !ws->training && m->fold[0];
    for (int d = 0; d < m->dirs; d++) {
      nn_rnn_acts *a = &ws->acts[l][d];
      const float *xd = x;
      const float *w_hh_t = ws->training ? NULL : m->w_hh_t[l][d];
      if (folded) {
        direction_forward(m, ws, &m->rnn[l][d], w_hh_t, NULL, in, m->fold[d], m->step1[d],
                          d ? ws->ids_rev : ws->ids, a);
      } else {
        if (d == 1) { /* reverse: step s of sample j reads position len_j - 1 - s */
          be->gather_rows(a->x, in, x, in, ws->rev, P, in);
          xd = a->x;
        }
        direction_forward(m, ws, &m->rnn[l][d], w_hh_t, xd, in, NULL, NULL, NULL, a);
      }
      /* y[:, d*H:(d+1)*H] in position order */
      be->gather_rows(ws->y[l] + d * H, D, a->h, H, d ? ws->rev : NULL, P, H);
    }
  }
}

/* One direction's BPTT. dh: (P, H) in step order, consumed. Writes dx (P, in) (=) and
 * accumulates the direction's parameter gradients. */
static void direction_backward(const nn_model *m, nn_workspace *ws, const nn_rnn_params *w,
                               const float *x, int in, const nn_rnn_acts *a, float *dx) {
  const nn_backend *be = m->be;
  const float *p = m->params;
  float *g = ws->grads;
  int H = m->H, GH = m->G * H, P = ws->P;
  float *dh = ws->d_h, *dpre = ws->d_pre;
  nn_cell cell = m->cfg.cell;
  float *dhw = cell == NN_CELL_GRU ? ws->d_hw : dpre; /* gradient of the h_prev W_hh^T part */
  if (cell == NN_CELL_LSTM) be->zero(ws->d_c, (size_t)P * H);
  for (int t = ws->Tmax - 1; t >= 0; t--) {
    int r0 = ws->off[t], n = ws->nstep[t], rp = t > 0 ? ws->off[t - 1] : 0;
    const float *h_prev = t > 0 ? a->h + (size_t)rp * H : NULL;
    float *dh_t = dh + (size_t)r0 * H, *dpre_t = dpre + (size_t)r0 * GH;
    switch (cell) {
    case NN_CELL_RNN: be->rnn_step_backward(dpre_t, dh_t, a->h + (size_t)r0 * H, n, H); break;
    case NN_CELL_GRU:
      be->gru_step_backward(dpre_t, dhw + (size_t)r0 * GH, h_prev ? dh + (size_t)rp * H : NULL,
                            dh_t, a->pre + (size_t)r0 * GH, a->hw + (size_t)r0 * GH, h_prev, n, H);
      break;
    case NN_CELL_LSTM:
      be->lstm_step_backward(dpre_t, t > 0 ? ws->d_c + (size_t)rp * H : NULL, dh_t,
                             ws->d_c + (size_t)r0 * H, a->pre + (size_t)r0 * GH,
                             a->c + (size_t)r0 * H, t > 0 ? a->c + (size_t)rp * H : NULL, n, H);
      break;
    }
    if (h_prev) /* dh[t-1] += dhw[t] W_hh */
      be->sgemm(0, 0, n, H, GH, 1.0f, dhw + (size_t)r0 * GH, GH, p + w->w_hh, H, 1.0f,
                dh + (size_t)rp * H, H);
  }
  /* input weights over all steps at once */
  be->sgemm(1, 0, GH, in, P, 1.0f, dpre, GH, x, in, 1.0f, g + w->w_ih, in);
  be->bias_grad(g + w->b_ih, dpre, GH, P, GH);
  be->bias_grad(g + w->b_hh, dhw, GH, P, GH);
  /* recurrent weights: rows of steps >= 1 against their previous hidden state */
  int r1 = ws->Tmax > 1 ? ws->off[1] : P;
  for (int t = 1; t < ws->Tmax; t++)
    be->gather_rows(ws->h_prev + (size_t)ws->off[t] * H, H, a->h + (size_t)ws->off[t - 1] * H, H,
                    NULL, ws->nstep[t], H);
  if (P > r1)
    be->sgemm(1, 0, GH, H, P - r1, 1.0f, dhw + (size_t)r1 * GH, GH, ws->h_prev + (size_t)r1 * H, H,
              1.0f, g + w->w_hh, H);
  be->sgemm(0, 0, P, in, GH, 1.0f, dpre, GH, p + w->w_ih, in, 0.0f, dx, in);
}

void nn_recurrent_backward(const nn_model *m, nn_workspace *ws) {
  const nn_backend *be = m->be;
  int H = m->H, D = m->D, P = ws->P;
  float *dy = ws->d_y, *dx = ws->d_x; /* (P, D) in, (P, in) out; swapped per layer */
  for (int l = m->L - 1; l >= 0; l--) {
    const float *x = l == 0 ? ws->x0 : ws->y[l - 1];
    int in = l == 0 ? m->E : D;
    for (int d = 0; d < m->dirs; d++) {
      const nn_rnn_acts *a = &ws->acts[l][d];
      /* this direction's slice of dy, in its step order */
      be->gather_rows(ws->d_h, H, dy + d * H, D, d ? ws->rev : NULL, P, H);
      if (d == 0) {
        direction_backward(m, ws, &m->rnn[l][d], x, in, a, dx);
      } else {
        direction_backward(m, ws, &m->rnn[l][d], a->x, in, a, ws->d_xdir);
        be->scatter_add_rows(dx, in, ws->d_xdir, in, ws->rev, P, in);
      }
    }
    float *tmp = dy;
    dy = dx;
    dx = tmp;
  }
  ws->d_x = dy; /* gradient of the embeddings' output (P, E) */
  ws->d_y = dx;
}
