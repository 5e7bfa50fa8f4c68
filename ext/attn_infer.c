/* attn_infer.c -- inference for the SQL functions: one text through the model with its tokens,
 * probabilities and attention (attn_text_read: attn_probs, attn_weights, the heatmaps), the
 * cursor of the table-valued functions over one text (attn_text_cursor: attn_probs,
 * attn_weights, attn_explain), and many texts at once (attn_classify_texts: attn_classify,
 * attn_evaluate, attn_confusion).
 *
 * Batched prediction runs on the connection's thread pool (engine/pool.c, created on first use,
 * see attn_conn_pool): the texts are split into one share per pool thread (at least one batch
 * a share); each thread encodes its share and runs it through the model in batches of
 * ATTN_BATCH texts (ATTN_BATCH_DEVICE on a GPU) with its own workspace (the model is shared
 * read-only). A NULL text gives class -1. Results are per text: they do not depend on how texts
 * are grouped.
 *
 * A forward pass does not look at sqlite3_interrupt, and a share of long texts through a large
 * model can take minutes. So a thread stops after the batch that takes its share past
 * ATTN_SLICE_SECONDS, the calling thread checks for an interrupt, and the threads go on from
 * where they stopped: an interrupt is seen within a slice or one batch, and a pass holds at most
 * ATTN_BATCH_TOKENS tokens of max_len (fewer rows for max_len above 1,024). Fast models finish a
 * share within one slice, as before.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_ext.h"
#include "compat.h" /* nn_os_seconds */

#define ATTN_BATCH 256 /* texts per forward pass on the CPU */
/* on a GPU: a forward pass launches a few kernels per time step whatever its rows, so 256-row
 * batches left an H200 launch-bound (attn_classify 350,000 rows/s, slower than the same
 * machine's 16 cores); 4096-row batches from fewer threads keep it busy */
#define ATTN_BATCH_DEVICE 4096
#define ATTN_MAX_THREADS 64            /* threads of a pool at most (nn_pool_create) */
#define ATTN_SLICE_SECONDS 0.05        /* a thread's work between two interrupt checks, at least */
#define ATTN_BATCH_TOKENS (256 * 1024) /* rows x max_len of a pass on the CPU, at most */

/* ------------------------------------------------------------------ read one text */

static int attn_text_reading_reserve(attn_text_reading *reading, int T, int C) {
  if (T > reading->cap_tokens) {
    nn_token *tokens = sqlite3_realloc64(reading->tokens, (sqlite3_uint64)T * sizeof *tokens);
    if (tokens) reading->tokens = tokens;
    int *ids = sqlite3_realloc64(reading->ids, (sqlite3_uint64)T * sizeof *ids);
    if (ids) reading->ids = ids;
    float *weights = sqlite3_realloc64(reading->weights, (sqlite3_uint64)T * sizeof *weights);
    if (weights) reading->weights = weights;
    char **text = sqlite3_realloc64(reading->token_text, (sqlite3_uint64)T * sizeof *text);
    if (text) {
      for (int i = reading->cap_tokens; i < T; i++) text[i] = NULL;
      reading->token_text = text;
    }
    if (!tokens || !ids || !weights || !text) return SQLITE_NOMEM;
    reading->cap_tokens = T;
  }
  if (C > reading->cap_classes) {
    float *probs = sqlite3_realloc64(reading->probs, (sqlite3_uint64)C * sizeof *probs);
    if (!probs) return SQLITE_NOMEM;
    reading->probs = probs;
    reading->cap_classes = C;
  }
  return SQLITE_OK;
}

void attn_text_reading_free(attn_text_reading *reading) {
  for (int i = 0; reading->token_text && i < reading->cap_tokens; i++)
    sqlite3_free(reading->token_text[i]);
  sqlite3_free(reading->token_text);
  sqlite3_free(reading->tokens);
  sqlite3_free(reading->ids);
  sqlite3_free(reading->weights);
  sqlite3_free(reading->probs);
  sqlite3_free(reading->occlusion);
  sqlite3_free(reading->loo_ids);
  sqlite3_free(reading->loo_lengths);
  sqlite3_free(reading->loo_logits);
  sqlite3_free(reading->loo_attn);
  memset(reading, 0, sizeof *reading);
}

typedef struct attn_token_collect {
  attn_text_reading *reading;
  int count, max, nomem;
} attn_token_collect;

static void attn_collect_token(void *ctx, const char *tok, int tok_len, int start, int end) {
  attn_token_collect *tc = ctx;
  if (tc->count >= tc->max) {
    tc->count++;
    return;
  }
  char *copy = sqlite3_malloc64((sqlite3_uint64)tok_len + 1);
  if (!copy) {
    tc->nomem = 1;
  } else {
    memcpy(copy, tok, (size_t)tok_len);
    copy[tok_len] = 0;
  }
  sqlite3_free(tc->reading->token_text[tc->count]);
  tc->reading->token_text[tc->count++] = copy;
}

int attn_text_ids(int *ids, nn_token *tokens, const nn_model *nn, const char *text, int len) {
  const nn_config *cfg = nn_model_config(nn);
  int T = cfg->max_len > 0 ? cfg->max_len : 1;
  int n = nn_text_encode(tokens, text ? text : "", text ? len : 0, cfg, nn_model_vocab(nn));
  if (n < 1) n = 1, tokens[0].id = NN_UNK, tokens[0].start = tokens[0].end = -1;
  if (n > T) n = T;
  for (int i = 0; i < n; i++) ids[i] = tokens[i].id;
  return n;
}

#define ATTN_STACK_TOKENS 256

int attn_forward_text(nn_model *nn, nn_workspace *ws, const char *text, int len, float *logits,
                      float *pooled, char *err) {
  const nn_config *cfg = nn_model_config(nn);
  int T = cfg->max_len > 0 ? cfg->max_len : 1;
  nn_token stack_tokens[ATTN_STACK_TOKENS], *tokens = stack_tokens;
  int stack_ids[ATTN_STACK_TOKENS], *ids = stack_ids;
  void *heap = NULL;
  if (T > ATTN_STACK_TOKENS) {
    heap = sqlite3_malloc64((sqlite3_uint64)T * (sizeof *tokens + sizeof *ids));
    if (!heap) {
      snprintf(err, NN_ERR_LEN, "out of memory for the tokens of a text");
      return NN_NOMEM;
    }
    tokens = heap;
    ids = (int *)(tokens + T);
  }
  int n = attn_text_ids(ids, tokens, nn, text, len);
  nn_batch batch = {ids, &n, NULL, 1, n};
  int st = pooled ? nn_model_forward_pooled(nn, ws, &batch, logits, pooled, err)
                  : nn_model_forward(nn, ws, &batch, 0, NULL, logits, NULL, err);
  sqlite3_free(heap);
  return st;
}

/* Preprocess and encode text into reading->tokens / reading->ids (reading->n >= 1: an empty text
 * is one <UNK>, at most max_len). */
static int attn_text_reading_encode(attn_text_reading *reading, nn_model *nn, const char *text,
                                    int len, const char *fn, char **errmsg) {
  const nn_config *cfg = nn_model_config(nn);
  int C = nn_model_num_classes(nn), T = cfg->max_len > 0 ? cfg->max_len : 1;
  if (attn_text_reading_reserve(reading, T, C) != SQLITE_OK) {
    *errmsg = sqlite3_mprintf("%s: out of memory", fn);
    return SQLITE_NOMEM;
  }
  reading->n = attn_text_ids(reading->ids, reading->tokens, nn, text, len);
  return SQLITE_OK;
}

/* The cleaned token strings of reading's tokens into reading->token_text. */
static int attn_text_reading_token_texts(attn_text_reading *reading, nn_model *nn, const char *text,
                                         int len, const char *fn, char **errmsg) {
  int n = reading->n;
  attn_token_collect tc = {reading, 0, n, 0};
  nn_text_tokenize(text ? text : "", text ? len : 0, nn_model_config(nn), attn_collect_token, &tc,
                   &attn_mem);
  if (tc.nomem) {
    *errmsg = sqlite3_mprintf("%s: out of memory", fn);
    return SQLITE_NOMEM;
  }
  /* Tokens the tokenizer did not give (a text with no tokens: one <UNK>): the vocabulary's. */
  for (int i = tc.count < n ? tc.count : n; i < n; i++) {
    int tl = 0;
    const char *t = nn_vocab_token(nn_model_vocab(nn), reading->ids[i], &tl);
    sqlite3_free(reading->token_text[i]);
    reading->token_text[i] = t ? sqlite3_mprintf("%.*s", tl, t) : sqlite3_mprintf("");
    if (!reading->token_text[i]) {
      *errmsg = sqlite3_mprintf("%s: out of memory", fn);
      return SQLITE_NOMEM;
    }
  }
  return SQLITE_OK;
}

int attn_text_read(attn_text_reading *reading, attn_model *model, nn_workspace *ws,
                   const char *text, int len, int want_tokens, const char *fn, char **errmsg) {
  nn_model *nn = model->nn;
  char err[NN_ERR_LEN] = "";
  int rc = attn_text_reading_encode(reading, nn, text, len, fn, errmsg);
  if (rc != SQLITE_OK) return rc;
  nn_batch batch = {reading->ids, &reading->n, NULL, 1, reading->n};
  int st = nn_model_forward(nn, ws, &batch, 0, NULL, reading->probs, reading->weights, err);
  if (st != NN_OK) {
    return attn_nn_error(st, fn, err, errmsg);
  }
  nn_softmax_rows(reading->probs, reading->probs, 1, nn_model_num_classes(nn));
  return want_tokens ? attn_text_reading_token_texts(reading, nn, text, len, fn, errmsg)
                     : SQLITE_OK;
}

/* ------------------------------------------------------------------ leave-one-out occlusion */

/* Grow the leave-one-out scratch to rows sequences of T tokens (n <= cap_tokens rows of
 * results) with C classes. */
static int attn_loo_reserve(attn_text_reading *reading, int rows, int T, int C) {
  if (reading->cap_tokens + 1 > reading->cap_loo_rows || C > reading->cap_loo_classes) {
    int cap = reading->cap_tokens + 1; /* the full sequence and one per token */
    float *occlusion =
        sqlite3_realloc64(reading->occlusion, (sqlite3_uint64)cap * sizeof *occlusion);
    if (occlusion) reading->occlusion = occlusion;
    int *lengths = sqlite3_realloc64(reading->loo_lengths, (sqlite3_uint64)cap * sizeof *lengths);
    if (lengths) reading->loo_lengths = lengths;
    float *logits =
        sqlite3_realloc64(reading->loo_logits, (sqlite3_uint64)cap * C * sizeof *logits);
    if (logits) reading->loo_logits = logits;
    if (!occlusion || !lengths || !logits) return SQLITE_NOMEM;
    reading->cap_loo_rows = cap;
    reading->cap_loo_classes = C;
  }
  if ((size_t)rows * T > reading->cap_loo_ids) {
    int *ids = sqlite3_realloc64(reading->loo_ids, (sqlite3_uint64)rows * T * sizeof *ids);
    if (ids) reading->loo_ids = ids;
    float *attn = sqlite3_realloc64(reading->loo_attn, (sqlite3_uint64)rows * T * sizeof *attn);
    if (attn) reading->loo_attn = attn;
    if (!ids || !attn) return SQLITE_NOMEM;
    reading->cap_loo_ids = (size_t)rows * T;
  }
  return SQLITE_OK;
}

int attn_text_occlusion(attn_text_reading *reading, attn_model *model, nn_workspace *ws,
                        attn_interrupt *it, const char *text, int len, const char *fn,
                        char **errmsg) {
  nn_model *nn = model->nn;
  int C = nn_model_num_classes(nn);
  char err[NN_ERR_LEN] = "";
  int rc = attn_text_reading_encode(reading, nn, text, len, fn, errmsg);
  if (rc == SQLITE_OK) rc = attn_text_reading_token_texts(reading, nn, text, len, fn, errmsg);
  if (rc != SQLITE_OK) return rc;
  /* Sequence 0: the text; sequence 1 + i: the text without token i (one <UNK> when that leaves
   * nothing), n - 1 tokens padded to the batch's T = n. */
  int n = reading->n, T = n, total = n + 1;
  int rows = ATTN_LOO_TOKENS / T; /* sequences per pass */
  if (rows < 2) rows = 2;
  if (rows > total) rows = total;
  if (attn_loo_reserve(reading, rows, T, C) != SQLITE_OK) {
    *errmsg = sqlite3_mprintf("%s: out of memory", fn);
    return SQLITE_NOMEM;
  }
  for (int first = 0; first < total; first += rows) {
    int B = total - first < rows ? total - first : rows;
    if (first > 0 && it && attn_interrupted(it, 1)) {
      *errmsg = sqlite3_mprintf("%s: interrupted", fn);
      return SQLITE_INTERRUPT;
    }
    for (int b = 0; b < B; b++) {
      int seq = first + b, *row = reading->loo_ids + (size_t)b * T;
      if (seq == 0) {
        memcpy(row, reading->ids, sizeof *row * (size_t)n);
        reading->loo_lengths[b] = n;
      } else if (n == 1) {
        row[0] = NN_UNK;
        reading->loo_lengths[b] = 1;
      } else {
        int skip = seq - 1;
        memcpy(row, reading->ids, sizeof *row * (size_t)skip);
        memcpy(row + skip, reading->ids + skip + 1, sizeof *row * (size_t)(n - 1 - skip));
        row[n - 1] = NN_PAD;
        reading->loo_lengths[b] = n - 1;
      }
    }
    nn_batch batch = {reading->loo_ids, reading->loo_lengths, NULL, B, T};
    int st = nn_model_forward(nn, ws, &batch, 0, NULL, reading->loo_logits,
                              first == 0 ? reading->loo_attn : NULL, err);
    if (st != NN_OK) {
      return attn_nn_error(st, fn, err, errmsg);
    }
    nn_softmax_rows(reading->loo_logits, reading->loo_logits, B, C);
    int b0 = 0;
    if (first == 0) { /* the text itself: its probabilities, prediction and attention */
      memcpy(reading->probs, reading->loo_logits, sizeof *reading->probs * (size_t)C);
      memcpy(reading->weights, reading->loo_attn, sizeof *reading->weights * (size_t)n);
      reading->pred = 0;
      for (int c = 1; c < C; c++)
        if (reading->probs[c] > reading->probs[reading->pred]) reading->pred = c;
      b0 = 1;
    }
    for (int b = b0; b < B; b++)
      reading->occlusion[first + b - 1] =
          reading->probs[reading->pred] - reading->loo_logits[(size_t)b * C + reading->pred];
  }
  return SQLITE_OK;
}

/* ------------------------------------------------------------------ a cursor over one text */

int attn_text_cursor_begin(attn_text_cursor *cur, attn_conn *conn, const char *fn, int argc,
                           sqlite3_value **argv, char **errmsg) {
  const char *name = NULL;
  cur->text = NULL;
  cur->len = 0;
  cur->nrows = cur->row = 0;
  attn_model_release(cur->model);
  cur->model = NULL;
  cur->interrupt.db = attn_conn_db(conn);
  int rc = attn_name_value(fn, argc > 0 ? argv[0] : NULL, &name, errmsg);
  if (rc != SQLITE_OK) return rc;
  rc = attn_model_acquire(conn, fn, name, &cur->model, errmsg);
  if (rc != SQLITE_OK) return rc;
  if (argc < 2 || sqlite3_value_type(argv[1]) == SQLITE_NULL) return SQLITE_OK; /* no rows */
  cur->ws = attn_conn_workspace(conn, errmsg);
  if (!cur->ws) return SQLITE_NOMEM;
  cur->text = (const char *)sqlite3_value_text(argv[1]);
  cur->len = sqlite3_value_bytes(argv[1]);
  return SQLITE_OK;
}

int attn_text_cursor_close(sqlite3_vtab_cursor *base) {
  attn_text_cursor *cur = (attn_text_cursor *)base;
  attn_text_reading_free(&cur->reading);
  attn_model_release(cur->model);
  attn_interrupt_end(&cur->interrupt);
  sqlite3_free(cur->order);
  sqlite3_free(cur);
  return SQLITE_OK;
}

int attn_text_cursor_next(sqlite3_vtab_cursor *base) {
  ((attn_text_cursor *)base)->row++;
  return SQLITE_OK;
}

int attn_text_cursor_eof(sqlite3_vtab_cursor *base) {
  attn_text_cursor *cur = (attn_text_cursor *)base;
  return cur->row >= cur->nrows;
}

int attn_text_cursor_rowid(sqlite3_vtab_cursor *base, sqlite_int64 *rowid) {
  *rowid = ((attn_text_cursor *)base)->row + 1;
  return SQLITE_OK;
}

void attn_text_cursor_token(sqlite3_context *ctx, const attn_text_cursor *cur, int what) {
  int i = cur->row;
  const nn_token *t = &cur->reading.tokens[i];
  switch (what) {
  case ATTN_TOKEN_POSITION: sqlite3_result_int(ctx, i); break;
  case ATTN_TOKEN_TEXT:
    sqlite3_result_text(ctx, cur->reading.token_text[i] ? cur->reading.token_text[i] : "", -1,
                        SQLITE_TRANSIENT);
    break;
  case ATTN_TOKEN_ATTENTION: sqlite3_result_double(ctx, cur->reading.weights[i]); break;
  case ATTN_TOKEN_OCCLUSION: sqlite3_result_double(ctx, cur->reading.occlusion[i]); break;
  case ATTN_TOKEN_START:
    if (t->start >= 0) sqlite3_result_int(ctx, t->start);
    break;
  case ATTN_TOKEN_END:
    if (t->start >= 0) sqlite3_result_int(ctx, t->end);
    break;
  default: break;
  }
}

int attn_top_class(const float *logits, int C, float *prob) {
  int best = 0;
  for (int c = 1; c < C; c++)
    if (logits[c] > logits[best]) best = c;
  if (!prob) return best;
  double sum = 0; /* softmax of the best class, in double: 1 / sum_c exp(z_c - z_best) */
  for (int c = 0; c < C; c++) sum += exp((double)logits[c] - logits[best]);
  *prob = (float)(1.0 / sum);
  return best;
}

/* ------------------------------------------------------------------ batched prediction on the pool */

/* One task's share of the rows: [begin, end), with the workspace of the pool thread running it. */
typedef struct attn_classify_job {
  nn_model *nn;
  nn_workspace *ws;
  int begin, end;
  int next; /* the first text not yet done: end when the share is done */
  int status;
  char err[NN_ERR_LEN];
} attn_classify_job;

/* What nn_pool_run hands every task: the texts, the results and one job per task. */
typedef struct attn_classify_batch {
  const char *const *texts;
  const int *lens;
  int *pred;
  float *prob;
  float *probs;  /* (n, C) every class's probability, or NULL */
  float *pooled; /* (n, nn_model_pooled_dim) every row's attention context, or NULL */
  int batch;     /* texts per forward pass: ATTN_BATCH, or ATTN_BATCH_DEVICE on a GPU */
  attn_classify_job *jobs;
} attn_classify_batch;

static void attn_classify_run(attn_classify_job *job, const attn_classify_batch *all) {
  job->status = NN_OK;
  if (job->next >= job->end) return; /* done in an earlier slice */
  nn_model *nn = job->nn;
  const nn_config *cfg = nn_model_config(nn);
  int T = cfg->max_len > 0 ? cfg->max_len : 1, C = nn_model_num_classes(nn), batch = all->batch;
  nn_token *tokens = malloc(sizeof *tokens * (size_t)T);
  int *ids = malloc(sizeof *ids * (size_t)batch * T);
  int *lengths = malloc(sizeof *lengths * (size_t)batch);
  int *rows = malloc(sizeof *rows * (size_t)batch);
  int *ids_row = malloc(sizeof *ids_row * (size_t)batch * T);
  float *logits = malloc(sizeof *logits * (size_t)batch * C);
  int PD = all->pooled ? nn_model_pooled_dim(nn) : 0;
  float *pooled = PD ? malloc(sizeof *pooled * (size_t)batch * PD) : NULL;
  if (!tokens || !ids || !lengths || !rows || !ids_row || !logits || (PD && !pooled)) {
    job->status = NN_NOMEM;
    snprintf(job->err, NN_ERR_LEN, "out of memory");
    goto done;
  }
  double start = nn_os_seconds();
  int i = job->next;
  while (i < job->end && job->status == NN_OK) {
    if (i > job->next && nn_os_seconds() - start > ATTN_SLICE_SECONDS) break;
    /* Encode up to batch non-NULL texts; ids_row keeps each text's ids at stride T. */
    int B = 0, Tmax = 1;
    for (; i < job->end && B < batch; i++) {
      if (!all->texts[i]) {
        all->pred[i] = -1;
        if (all->prob) all->prob[i] = 0;
        if (all->probs) memset(all->probs + (size_t)i * C, 0, sizeof *all->probs * (size_t)C);
        if (PD) memset(all->pooled + (size_t)i * PD, 0, sizeof *all->pooled * (size_t)PD);
        continue;
      }
      int n = attn_text_ids(ids_row + (size_t)B * T, tokens, nn, all->texts[i], all->lens[i]);
      lengths[B] = n;
      rows[B] = i;
      if (n > Tmax) Tmax = n;
      B++;
    }
    if (B == 0) continue;
    /* Pack to (B, Tmax). */
    for (int b = 0; b < B; b++) {
      memcpy(ids + (size_t)b * Tmax, ids_row + (size_t)b * T, sizeof *ids * (size_t)lengths[b]);
      for (int t = lengths[b]; t < Tmax; t++) ids[(size_t)b * Tmax + t] = NN_PAD;
    }
    nn_batch batch = {ids, lengths, NULL, B, Tmax};
    job->status = PD ? nn_model_forward_pooled(nn, job->ws, &batch, logits, pooled, job->err)
                     : nn_model_forward(nn, job->ws, &batch, 0, NULL, logits, NULL, job->err);
    if (job->status != NN_OK) break;
    for (int b = 0; b < B; b++) {
      const float *z = logits + (size_t)b * C;
      all->pred[rows[b]] = attn_top_class(z, C, all->prob ? all->prob + rows[b] : NULL);
      if (all->probs) nn_softmax_rows(all->probs + (size_t)rows[b] * C, z, 1, C);
      if (PD)
        memcpy(all->pooled + (size_t)rows[b] * PD, pooled + (size_t)b * PD,
               sizeof *pooled * (size_t)PD);
    }
  }
  job->next = i;
done:
  free(tokens);
  free(ids);
  free(lengths);
  free(rows);
  free(ids_row);
  free(logits);
  free(pooled);
}

static void attn_classify_task(void *ctx, int task) {
  attn_classify_batch *all = ctx;
  attn_classify_run(&all->jobs[task], all);
}

static int attn_classify_batched(attn_conn *conn, attn_model *model, const char *const *texts,
                                 const int *lens, int n, int *pred, float *prob, float *probs,
                                 float *pooled, const char *fn, char **errmsg) {
  nn_pool *pool = NULL;
  nn_workspace **ws = NULL;
  if (n <= 0) return SQLITE_OK;
  int rc = attn_conn_pool(conn, &pool, &ws, errmsg);
  if (rc != SQLITE_OK) {
    if (rc == SQLITE_NOMEM && !*errmsg) *errmsg = sqlite3_mprintf("%s: out of memory", fn);
    return rc;
  }
  int threads = nn_pool_threads(pool);
  int batch = ATTN_BATCH;
  if (nn_model_device_memory(model->nn) > 0) {   /* on a GPU: larger, ids arrays <= 1 MiB each */
    int T = nn_model_config(model->nn)->max_len; /* (from max_len 1024 on, 256 rows as the CPU) */
    batch = T > 0 && ATTN_BATCH_DEVICE * T > (1 << 18) ? (1 << 18) / T : ATTN_BATCH_DEVICE;
    if (batch < ATTN_BATCH) batch = ATTN_BATCH;
  } else {
    int T = nn_model_config(model->nn)->max_len;
    if (T > 0 && batch * T > ATTN_BATCH_TOKENS)
      batch = ATTN_BATCH_TOKENS / T > 1 ? ATTN_BATCH_TOKENS / T : 1;
  }
  attn_interrupt it = {attn_conn_db(conn), NULL, 0};
  for (;;) {
    int per = (n + threads - 1) / threads;
    if (per < batch) per = batch;    /* small inputs: fewer tasks */
    int tasks = (n + per - 1) / per; /* <= threads: one task per pool thread */
    attn_classify_job jobs[ATTN_MAX_THREADS];
    for (int t = 0; t < tasks; t++) {
      attn_classify_job *job = &jobs[t];
      memset(job, 0, sizeof *job);
      job->nn = model->nn;
      job->ws = ws[t];
      job->begin = job->next = t * per;
      job->end = (t + 1) * per < n ? (t + 1) * per : n;
    }
    attn_classify_batch all = {texts, lens, pred, prob, probs, pooled, batch, jobs};
    int failed = -1, short_of_memory = 0, left = 1;
    while (failed < 0 && left) {
      nn_pool_run(pool, attn_classify_task, &all, tasks);
      left = 0;
      for (int t = 0; t < tasks; t++) {
        if (jobs[t].status != NN_OK && failed < 0) failed = t;
        if (jobs[t].status == NN_NOMEM) short_of_memory = 1;
        if (jobs[t].next < jobs[t].end) left = 1;
      }
      if (failed < 0 && left && attn_interrupted(&it, 1)) {
        attn_interrupt_end(&it);
        *errmsg = sqlite3_mprintf("%s: interrupted", fn);
        return SQLITE_INTERRUPT;
      }
    }
    if (failed < 0) {
      attn_interrupt_end(&it);
      return SQLITE_OK;
    }
    /* a GPU short of memory for the larger passes (several threads' workspaces at once): all
     * again in the CPU's 256-row passes (each text's result does not depend on its pass) */
    if (short_of_memory && batch > ATTN_BATCH) {
      batch = ATTN_BATCH;
      continue;
    }
    attn_interrupt_end(&it);
    return attn_nn_error(jobs[failed].status, fn, jobs[failed].err, errmsg);
  }
}

int attn_classify_texts(attn_conn *conn, attn_model *model, const char *const *texts,
                        const int *lens, int n, int *pred, float *prob, const char *fn,
                        char **errmsg) {
  return attn_classify_batched(conn, model, texts, lens, n, pred, prob, NULL, NULL, fn, errmsg);
}

int attn_classify_probs(attn_conn *conn, attn_model *model, const char *const *texts,
                        const int *lens, int n, int *pred, float *probs, const char *fn,
                        char **errmsg) {
  return attn_classify_batched(conn, model, texts, lens, n, pred, NULL, probs, NULL, fn, errmsg);
}

int attn_classify_pooled(attn_conn *conn, attn_model *model, const char *const *texts,
                         const int *lens, int n, int *pred, float *probs, float *pooled,
                         const char *fn, char **errmsg) {
  return attn_classify_batched(conn, model, texts, lens, n, pred, NULL, probs, pooled, fn, errmsg);
}
