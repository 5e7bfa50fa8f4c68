/* pretrain.c -- word vectors learnt from the table's own texts before the classifier trains.
 *
 * A person labelling texts has a few hundred labels and thousands of texts without one. The
 * texts alone say which words occur together: skip-gram with negative sampling (word2vec, as
 * fastText's `skipgram` with subwords) over the token ids of the training split and the
 * unlabelled rows learns, for each word, a vector that predicts its neighbours. A word's input
 * vector is the classifier's own: the mean of its embedding row and its subword rows (model.h),
 * so the tables the classifier starts from are exactly the ones learnt here, and a word no
 * label ever reached still lands near the words it is used like.
 *
 *   SELECT attn_fit('news', 'SELECT title, category FROM headlines');  -- NULL categories too
 *   -> {"pretrain_epochs": 34, "unlabelled_rows": 9500, ...}
 *
 * One thread and one random stream, so the vectors are the same bits at any thread count.
 * The validation rows are not read: their texts stay unseen, as the test's. Per pass over the
 * rows: each kept token (frequent words subsampled, t = 1e-4) predicts the tokens within a
 * window of 1..5 on each side, against 5 negatives drawn from the unigram distribution to the
 * power 0.75; plain SGD with a learning rate falling linearly from 0.05 to 0 over all passes.
 * The output vectors are dropped at the end; the input tables are scaled so that the words'
 * vectors have elements of mean square 1, the scale of the classifier's N(0, 1) initialisation
 * that its learning rate and dropouts were chosen for. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h" /* nn_os_seconds */
#include "model.h"
#include "nn_internal.h"
#include "nn_mem.h"
#include "train.h"

#define PRETRAIN_WINDOW 5
#define PRETRAIN_NEGATIVES 5
#define PRETRAIN_LR 0.05
#define PRETRAIN_SAMPLE 1e-4
#define SEED_PRETRAIN 0x5052455400000005ull /* "PRET" */
#define PRETRAIN_REPORT 256 /* rows between progress calls (an interrupt is answered there) */
/* ... and pair updates x E between them at most: 256 rows of 64 tokens at E = 100 took 0.1 s on
 * two shared cores, 256 rows of 4,096 tokens at E = 300 would take 16 s; 2^24 took 20 ms. */
#define PRETRAIN_ASK_WORK ((int64_t)1 << 24)

/* The table rows of word w: w itself, then its subword rows (none for <PAD>, <UNK>). */
static int word_rows(const nn_model *m, int w, const int **subs) {
  if (!m->S || !m->sub_start) {
    *subs = NULL;
    return 0;
  }
  *subs = m->sub_rows + m->sub_start[w];
  return m->sub_start[w + 1] - m->sub_start[w];
}

/* A draw from the unigram^0.75 distribution: the first word whose cumulative weight exceeds
 * u * total (cum ascending, (V) doubles). */
static int draw_negative(const double *cum, int V, nn_rng *rng) {
  double x = nn_rng_uniform(rng) * cum[V - 1];
  int lo = 0, hi = V - 1;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (cum[mid] > x) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

static float sigmoid(float x) {
  if (x > 20.0f) return 1.0f;
  if (x < -20.0f) return 0.0f;
  return 1.0f / (1.0f + expf(-x));
}

double nn_skipgram_pair(const float *u, float *o, float *grad, int E, float label, float lr) {
  float dot = 0.0f;
  for (int e = 0; e < E; e++) dot += u[e] * o[e];
  float p = sigmoid(dot);
  float g = lr * (label - p); /* -lr dL/d(u.o) */
  for (int e = 0; e < E; e++) {
    grad[e] += g * o[e];
    o[e] += g * u[e];
  }
  return -log(label > 0.0f ? fmax(p, 1e-7) : fmax(1.0 - p, 1e-7));
}

/* The rows a pass reads into rows (the training split, then the unlabelled rows) and each
 * word's count over them into count (V, zeroed); returns the words counted (<PAD> and <UNK> are
 * not). */
static int64_t pretrain_count(const nn_trainer *tr, int *rows, int nrows, int64_t *count) {
  int k = 0;
  for (int i = 0; i < tr->data.n; i++)
    if (!nn_train_is_val(&tr->data, i)) rows[k++] = i;
  for (int i = tr->data.n; i < tr->data.n + tr->data.n_unlab; i++) rows[k++] = i;
  int64_t total = 0;
  for (int r = 0; r < nrows; r++) {
    const void *ids = nn_train_row_ids(&tr->data, rows[r]);
    for (int t = 0; t < tr->data.row_length[rows[r]]; t++) {
      int w = tr->data.ids16 ? ((const uint16_t *)ids)[t] : ((const int32_t *)ids)[t];
      if (w > NN_UNK) count[w]++, total++;
    }
  }
  return total;
}

/* What one pass's updates share: the tables, the negatives' distribution, the stream and the
 * loss so far. */
typedef struct skipgram {
  const nn_model *m;
  float *table;      /* (V + S, E) member 0's word rows, then its subword rows */
  float *out;        /* (V, E) output vectors */
  float *u, *grad;   /* (E) each: the word's input vector and its gradient */
  const double *cum; /* (V) unigram^0.75, cumulative */
  int V, E;
  nn_rng *rng;
  double loss_sum;
  int64_t loss_n;
} skipgram;

/* Word t of the n kept words of a row predicts its neighbours within a window drawn from
 * 1..PRETRAIN_WINDOW, each against PRETRAIN_NEGATIVES negatives, at learning rate lr: the
 * output vectors move at once, the word's rows by the gradient of their mean. */
static void skipgram_word(skipgram *sg, const int *kept, int n, int t, float lr) {
  int E = sg->E, w = kept[t];
  float *u = sg->u, *grad = sg->grad, *table = sg->table;
  const int *subs;
  int nsub = word_rows(sg->m, w, &subs);
  float inv = 1.0f / (float)(1 + nsub);
  /* u = the mean of the word's rows */
  memcpy(u, table + (size_t)w * E, (size_t)E * sizeof *u);
  for (int s = 0; s < nsub; s++) {
    const float *row = table + (size_t)subs[s] * E;
    for (int e = 0; e < E; e++) u[e] += row[e];
  }
  for (int e = 0; e < E; e++) u[e] *= inv;
  int b = 1 + (int)(nn_rng_uniform(sg->rng) * PRETRAIN_WINDOW);
  if (b > PRETRAIN_WINDOW) b = PRETRAIN_WINDOW;
  memset(grad, 0, (size_t)E * sizeof *grad);
  for (int c = t - b; c <= t + b; c++) {
    if (c < 0 || c >= n || c == t) continue;
    for (int j = 0; j <= PRETRAIN_NEGATIVES; j++) {
      int target = kept[c];
      float label = 1.0f;
      if (j > 0) {
        target = draw_negative(sg->cum, sg->V, sg->rng);
        if (target == kept[c]) continue;
        label = 0.0f;
      }
      sg->loss_sum += nn_skipgram_pair(u, sg->out + (size_t)target * E, grad, E, label, lr);
      sg->loss_n++;
    }
  }
  /* the gradient of the mean reaches each of its rows divided by their count */
  for (int e = 0; e < E; e++) grad[e] *= inv;
  float *row = table + (size_t)w * E;
  for (int e = 0; e < E; e++) row[e] += grad[e];
  for (int s = 0; s < nsub; s++) {
    row = table + (size_t)subs[s] * E;
    for (int e = 0; e < E; e++) row[e] += grad[e];
  }
}

/* Scale the learnt tables (R rows of E) so that the words' input vectors (means of their rows)
 * get elements of mean square 1, and give every member of the ensemble the same ones. u: (E)
 * scratch. */
static void pretrain_scale(nn_trainer *tr, float *table, size_t R, float *u) {
  nn_model *m = tr->model;
  int V = m->V, E = m->E;
  double sq = 0.0;
  int64_t words = 0;
  for (int w = NN_UNK + 1; w < V; w++) {
    const int *subs;
    int nsub = word_rows(m, w, &subs);
    memcpy(u, table + (size_t)w * E, (size_t)E * sizeof *u);
    for (int s = 0; s < nsub; s++)
      for (int e = 0; e < E; e++) u[e] += table[(size_t)subs[s] * E + e];
    for (int e = 0; e < E; e++) {
      double x = u[e] / (1 + nsub);
      sq += x * x;
    }
    words++;
  }
  float scale = words && sq > 0.0 ? (float)(1.0 / sqrt(sq / ((double)words * E))) : 1.0f;
  for (size_t i = 0; i < R * (size_t)E; i++) table[i] *= scale;
  float *params = nn_model_params(m);
  for (int j = 1; j < tr->K; j++) /* every member starts from the same vectors */
    memcpy(params + nn_model_member(m, j)->emb, table, R * (size_t)E * sizeof *table);
}

/* fn asked with the progress of row r of pass epoch (P passes of nrows rows), in rows of all
 * passes scaled to fit an int (10 million rows x 1000 passes); non-zero: interrupted. */
static int pretrain_ask(nn_progress_fn fn, void *ctx, int epoch, int r, int nrows, int P,
                        const skipgram *sg) {
  int64_t done_rows = (int64_t)epoch * nrows + r, all_rows = (int64_t)P * nrows;
  int64_t unit = all_rows / INT_MAX + 1;
  return fn(ctx, (int)(done_rows / unit), (int)(all_rows / unit),
            sg->loss_n ? sg->loss_sum / (double)sg->loss_n : 0.0, 0);
}

int nn_train_pretrain(nn_trainer *tr, nn_progress_fn fn, void *ctx, char *err) {
  if (tr->pretrain_done) return NN_OK;
  tr->pretrain_done = 1;
  int P = tr->cfg.pretrain_epochs;
  if (P <= 0 || !tr->model || tr->warm_start || tr->pretrained_words ||
      tr->data.pretrain_tokens <= 0)
    return NN_OK;
  double start = nn_os_seconds();
  nn_model *m = tr->model;
  int V = m->V, E = m->E, status = NN_OK;
  size_t R = (size_t)V + (size_t)m->S;
  int nrows = tr->data.n_train + tr->data.n_unlab;
  int *rows = nn_mem_alloc(tr->mem, (size_t)(nrows ? nrows : 1) * sizeof *rows);
  int64_t *count = nn_mem_calloc(tr->mem, (size_t)V, sizeof *count);
  double *cum = nn_mem_alloc(tr->mem, (size_t)V * sizeof *cum);
  float *keep = nn_mem_alloc(tr->mem, (size_t)V * sizeof *keep);
  float *out = nn_mem_calloc(tr->mem, (size_t)V * (size_t)E, sizeof *out); /* output vectors */
  float *u = nn_mem_alloc(tr->mem, (size_t)E * 2 * sizeof *u), *grad = u ? u + E : NULL;
  int *kept = nn_mem_alloc(tr->mem, (size_t)tr->cfg.max_len * sizeof *kept);
  if (!rows || !count || !cum || !keep || !out || !u || !kept) {
    snprintf(err, NN_ERR_LEN, "out of memory pretraining %d words over %d rows", V, nrows);
    status = NN_NOMEM;
    goto done;
  }
  int64_t total = pretrain_count(tr, rows, nrows, count);
  if (total == 0) goto done;
  double acc = 0.0;
  for (int w = 0; w < V; w++) {
    acc += w > NN_UNK && count[w] ? pow((double)count[w], 0.75) : 0.0;
    cum[w] = acc;
    double f = (double)count[w] / (double)total;
    keep[w] = count[w] ? (float)fmin(1.0, sqrt(PRETRAIN_SAMPLE / f) + PRETRAIN_SAMPLE / f) : 0.0f;
  }

  nn_rng rng;
  nn_rng_seed(&rng, tr->cfg.seed ^ SEED_PRETRAIN);
  float *table = nn_model_params(m) + m->emb; /* member 0's V word rows, then its S subword rows */
  for (size_t i = 0; i < R * (size_t)E; i++)  /* fastText's initialisation */
    table[i] = (float)((2.0 * nn_rng_uniform(&rng) - 1.0) / E);

  skipgram sg = {m, table, out, u, grad, cum, V, E, &rng, 0.0, 0};
  int64_t seen = 0, planned = (int64_t)P * total, work = 0; /* work: since fn was asked */
  for (int epoch = 0; epoch < P; epoch++) {
    nn_train_shuffle(rows, nrows, &rng);
    for (int r = 0; r < nrows; r++) {
      if (fn && r % PRETRAIN_REPORT == 0) {
        work = 0;
        if (pretrain_ask(fn, ctx, epoch, r, nrows, P, &sg)) goto interrupted;
      }
      /* the row's words, frequent ones subsampled */
      const void *ids = nn_train_row_ids(&tr->data, rows[r]);
      int len = tr->data.row_length[rows[r]], n = 0;
      for (int t = 0; t < len; t++) {
        int w = tr->data.ids16 ? ((const uint16_t *)ids)[t] : ((const int32_t *)ids)[t];
        if (w <= NN_UNK) continue;
        seen++;
        if (nn_rng_uniform(&rng) < keep[w]) kept[n++] = w;
      }
      for (int t = 0; t < n; t++) {
        if (fn && work >= PRETRAIN_ASK_WORK) { /* a long row: asked within it too */
          work = 0;
          if (pretrain_ask(fn, ctx, epoch, r, nrows, P, &sg)) goto interrupted;
        }
        float lr = (float)(PRETRAIN_LR * (1.0 - (double)seen / (double)(planned + 1)));
        int64_t pairs = sg.loss_n;
        skipgram_word(&sg, kept, n, t, lr);
        work += (sg.loss_n - pairs + 1) * E;
      }
    }
  }
  pretrain_scale(tr, table, R, u);
  tr->pretrain_loss = sg.loss_n ? sg.loss_sum / (double)sg.loss_n : 0.0;
  goto done;
interrupted:
  snprintf(err, NN_ERR_LEN, "interrupted");
  status = NN_INTERRUPTED;
done:
  tr->pretrain_seconds = nn_os_seconds() - start;
  nn_mem_free(tr->mem, rows);
  nn_mem_free(tr->mem, count);
  nn_mem_free(tr->mem, cum);
  nn_mem_free(tr->mem, keep);
  nn_mem_free(tr->mem, out);
  nn_mem_free(tr->mem, u);
  nn_mem_free(tr->mem, kept);
  return status;
}
