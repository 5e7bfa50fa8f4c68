/* attn_classify.c -- batched prediction: many texts per forward pass, split across the cores.
 *
 *   SELECT * FROM attn_classify('news', 'SELECT id, title FROM headlines');
 *   --  id | label | probability       in the query's order; id is the query's first column
 *
 * The query (one read-only statement, columns id and text) is read in chunks of
 * ATTN_CHUNK_PER_THREAD rows per thread; each thread encodes its share and runs it through the
 * model in batches of ATTN_BATCH texts with its own workspace (the model is shared read-only).
 * attn_classify_texts_ws is also what attn_evaluate and attn_confusion use.
 * A NULL text gives a NULL label and probability.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attn_ext.h"

#define ATTN_BATCH 256            /* texts per forward pass */
#define ATTN_CHUNK_PER_THREAD 1024 /* rows read from the query per thread and chunk */
#define ATTN_MAX_THREADS 64

/* ------------------------------------------------------------------ the batched predictor */

typedef struct attn_classify_job {
  nn_model *nn;
  nn_workspace *ws;
  const char *const *texts;
  const int *lens;
  int begin, end;
  int *pred;
  float *prob;
  int status;
  char err[NN_ERR_LEN];
} attn_classify_job;

static void *attn_classify_run(void *arg) {
  attn_classify_job *job = arg;
  nn_model *nn = job->nn;
  const nn_config *cfg = nn_model_config(nn);
  int T = cfg->max_len > 0 ? cfg->max_len : 1, C = nn_model_num_classes(nn);
  nn_token *tokens = malloc(sizeof *tokens * (size_t)T);
  int *ids = malloc(sizeof *ids * (size_t)ATTN_BATCH * T);
  int *lengths = malloc(sizeof *lengths * ATTN_BATCH);
  int *rows = malloc(sizeof *rows * ATTN_BATCH);
  int *ids_row = malloc(sizeof *ids_row * (size_t)ATTN_BATCH * T);
  float *logits = malloc(sizeof *logits * (size_t)ATTN_BATCH * C);
  job->status = NN_OK;
  if (!tokens || !ids || !lengths || !rows || !ids_row || !logits) {
    job->status = NN_NOMEM;
    snprintf(job->err, NN_ERR_LEN, "out of memory");
    goto done;
  }
  for (int i = job->begin; i < job->end && job->status == NN_OK;) {
    /* Encode up to ATTN_BATCH non-NULL texts; ids_row keeps each text's ids at stride T. */
    int B = 0, Tmax = 1;
    for (; i < job->end && B < ATTN_BATCH; i++) {
      if (!job->texts[i]) {
        job->pred[i] = -1;
        if (job->prob) job->prob[i] = 0;
        continue;
      }
      int n = nn_text_encode(tokens, job->texts[i], job->lens[i], cfg, nn_model_vocab(nn));
      if (n < 1) n = 1, tokens[0].id = NN_UNK;
      if (n > T) n = T;
      for (int t = 0; t < n; t++) ids_row[(size_t)B * T + t] = tokens[t].id;
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
    job->status = nn_model_forward(nn, job->ws, &batch, 0, NULL, logits, NULL, job->err);
    if (job->status != NN_OK) break;
    for (int b = 0; b < B; b++) {
      const float *z = logits + (size_t)b * C;
      int best = 0;
      for (int c = 1; c < C; c++)
        if (z[c] > z[best]) best = c;
      job->pred[rows[b]] = best;
      if (job->prob) { /* softmax probability of the best class */
        double sum = 0;
        for (int c = 0; c < C; c++) sum += exp((double)z[c] - z[best]);
        job->prob[rows[b]] = (float)(1.0 / sum);
      }
    }
  }
done:
  free(tokens);
  free(ids);
  free(lengths);
  free(rows);
  free(ids_row);
  free(logits);
  return NULL;
}

int attn_workers_threads(void) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores < 1) cores = 1;
  if (cores > ATTN_MAX_THREADS) cores = ATTN_MAX_THREADS;
  return (int)cores;
}

void attn_workers_free(attn_workers *w) {
  for (int t = 0; t < w->n; t++) nn_workspace_free(w->ws[t]);
  sqlite3_free(w->ws);
  memset(w, 0, sizeof *w);
}

int attn_classify_texts_ws(attn_model *model, attn_workers *workers, const char *const *texts,
                           const int *lens, int n, int *pred, float *prob, const char *fn,
                           char **errmsg) {
  attn_workers local = {0, NULL};
  attn_workers *w = workers ? workers : &local;
  char err[NN_ERR_LEN] = "";
  int rc = SQLITE_OK;
  if (n <= 0) return SQLITE_OK;
  int threads = attn_workers_threads();
  int per = (n + threads - 1) / threads;
  if (per < ATTN_BATCH) per = ATTN_BATCH; /* small inputs: fewer threads */
  threads = (n + per - 1) / per;
  if (w->n < threads) {
    nn_workspace **ws = sqlite3_realloc64(w->ws, sizeof *ws * (sqlite3_uint64)threads);
    if (!ws) {
      rc = SQLITE_NOMEM;
      goto done;
    }
    w->ws = ws;
    for (; w->n < threads; w->n++) {
      if (nn_workspace_create(&w->ws[w->n], err) != NN_OK) {
        *errmsg = sqlite3_mprintf("%s: %s", fn, err);
        rc = SQLITE_NOMEM;
        goto done;
      }
    }
  }
  attn_classify_job jobs[ATTN_MAX_THREADS];
  pthread_t tids[ATTN_MAX_THREADS];
  int started[ATTN_MAX_THREADS];
  for (int t = 0; t < threads; t++) {
    attn_classify_job *job = &jobs[t];
    memset(job, 0, sizeof *job);
    job->nn = model->nn;
    job->ws = w->ws[t];
    job->texts = texts;
    job->lens = lens;
    job->begin = t * per;
    job->end = (t + 1) * per < n ? (t + 1) * per : n;
    job->pred = pred;
    job->prob = prob;
    started[t] = 0;
  }
  /* Thread 0's share runs on the calling thread. */
  for (int t = 1; t < threads; t++)
    started[t] = pthread_create(&tids[t], NULL, attn_classify_run, &jobs[t]) == 0;
  attn_classify_run(&jobs[0]);
  for (int t = 1; t < threads; t++) {
    if (started[t])
      pthread_join(tids[t], NULL);
    else
      attn_classify_run(&jobs[t]); /* could not start a thread: do it here */
  }
  for (int t = 0; t < threads; t++) {
    if (jobs[t].status != NN_OK) {
      *errmsg = sqlite3_mprintf("%s: %s", fn, jobs[t].err);
      rc = jobs[t].status == NN_NOMEM ? SQLITE_NOMEM : SQLITE_ERROR;
      break;
    }
  }
done:
  if (!workers) attn_workers_free(&local);
  if (rc == SQLITE_NOMEM && !*errmsg) *errmsg = sqlite3_mprintf("%s: out of memory", fn);
  return rc;
}

/* ------------------------------------------------------------------ rows of texts from a query */

void attn_rows_free(attn_rows *r) {
  for (int i = 0; i < r->n; i++) sqlite3_value_free(r->keys ? r->keys[i] : NULL);
  sqlite3_free(r->keys);
  sqlite3_free(r->data);
  sqlite3_free(r->offsets);
  sqlite3_free(r->texts);
  sqlite3_free(r->lens);
  sqlite3_free(r->labels);
  sqlite3_free(r->label_lens);
  memset(r, 0, sizeof *r);
}

/* Append a copy of (p, len) to r->data; returns its offset or -1 on OOM. */
static sqlite3_int64 attn_rows_append(attn_rows *r, const char *p, int len) {
  sqlite3_uint64 need = r->used + (sqlite3_uint64)len + 1;
  if (need > r->cap) {
    sqlite3_uint64 cap = r->cap ? 2 * r->cap : 65536;
    while (cap < need) cap *= 2;
    char *data = sqlite3_realloc64(r->data, cap);
    if (!data) return -1;
    r->data = data;
    r->cap = cap;
  }
  sqlite3_int64 off = (sqlite3_int64)r->used;
  if (len) memcpy(r->data + r->used, p, (size_t)len);
  r->used += (sqlite3_uint64)len;
  r->data[r->used++] = 0;
  return off;
}

int attn_rows_read(attn_rows *r, sqlite3_stmt *stmt, int mode, int max_rows, int *done,
                   const char *fn, char **errmsg) {
  sqlite3 *db = sqlite3_db_handle(stmt);
  int text_col = mode == ATTN_ROWS_ID_TEXT ? 1 : 0, rc;
  /* reset the chunk (keep buffers) */
  for (int i = 0; i < r->n; i++) sqlite3_value_free(r->keys ? r->keys[i] : NULL);
  r->n = 0;
  r->used = 0;
  *done = 0;
  while (r->n < max_rows) {
    rc = sqlite3_step(stmt);
    if (rc == SQLITE_DONE) {
      *done = 1;
      break;
    }
    if (rc != SQLITE_ROW) {
      *errmsg = sqlite3_mprintf("%s: the query failed: %s", fn, sqlite3_errmsg(db));
      return rc;
    }
    if (r->n == r->cap_rows) {
      int cap = r->cap_rows ? 2 * r->cap_rows : 1024;
      attn_span *offsets = sqlite3_realloc64(r->offsets, sizeof *offsets * 2 * (sqlite3_uint64)cap);
      if (offsets) r->offsets = offsets;
      if (!offsets) return SQLITE_NOMEM;
      if (mode == ATTN_ROWS_ID_TEXT) {
        sqlite3_value **keys = sqlite3_realloc64(r->keys, sizeof *keys * (sqlite3_uint64)cap);
        if (!keys) return SQLITE_NOMEM;
        r->keys = keys;
      }
      r->cap_rows = cap;
    }
    int i = r->n;
    if (mode == ATTN_ROWS_ID_TEXT) {
      r->keys[i] = sqlite3_value_dup(sqlite3_column_value(stmt, 0));
      if (!r->keys[i]) return SQLITE_NOMEM;
    }
    r->n++;
    const char *text = (const char *)sqlite3_column_text(stmt, text_col);
    int len = sqlite3_column_bytes(stmt, text_col);
    if (sqlite3_column_type(stmt, text_col) == SQLITE_NULL) {
      if (mode == ATTN_ROWS_TEXT_LABEL) {
        *errmsg = sqlite3_mprintf("%s: row %d of the query has a NULL text", fn,
                                  r->first_row + i + 1);
        return SQLITE_ERROR;
      }
      r->offsets[2 * i].offset = -1;
    } else {
      if (!text) return SQLITE_NOMEM;
      if ((r->offsets[2 * i].offset = attn_rows_append(r, text, len)) < 0) return SQLITE_NOMEM;
      r->offsets[2 * i].len = len;
    }
    r->offsets[2 * i + 1].offset = -1;
    if (mode == ATTN_ROWS_TEXT_LABEL) {
      if (sqlite3_column_type(stmt, 1) == SQLITE_NULL) {
        *errmsg = sqlite3_mprintf("%s: row %d of the query has a NULL label", fn,
                                  r->first_row + i + 1);
        return SQLITE_ERROR;
      }
      const char *label = (const char *)sqlite3_column_text(stmt, 1);
      int label_len = sqlite3_column_bytes(stmt, 1);
      if (!label) return SQLITE_NOMEM;
      if ((r->offsets[2 * i + 1].offset = attn_rows_append(r, label, label_len)) < 0)
        return SQLITE_NOMEM;
      r->offsets[2 * i + 1].len = label_len;
    }
  }
  /* Pointers into data (stable now that the chunk is read). */
  sqlite3_uint64 n = (sqlite3_uint64)(r->n ? r->n : 1);
  const char **texts = sqlite3_realloc64((void *)r->texts, sizeof *texts * n);
  if (texts) r->texts = texts;
  int *lens = sqlite3_realloc64(r->lens, sizeof *lens * n);
  if (lens) r->lens = lens;
  const char **labels = sqlite3_realloc64((void *)r->labels, sizeof *labels * n);
  if (labels) r->labels = labels;
  int *label_lens = sqlite3_realloc64(r->label_lens, sizeof *label_lens * n);
  if (label_lens) r->label_lens = label_lens;
  if (!texts || !lens || !labels || !label_lens) return SQLITE_NOMEM;
  for (int i = 0; i < r->n; i++) {
    const attn_span *t = &r->offsets[2 * i], *l = &r->offsets[2 * i + 1];
    r->texts[i] = t->offset >= 0 ? r->data + t->offset : NULL;
    r->lens[i] = t->offset >= 0 ? t->len : 0;
    r->labels[i] = l->offset >= 0 ? r->data + l->offset : NULL;
    r->label_lens[i] = l->offset >= 0 ? l->len : 0;
  }
  r->first_row += r->n;
  return SQLITE_OK;
}

/* ------------------------------------------------------------------ attn_classify */

#define ATTN_CLASSIFY_FIRST_ARG 3

typedef struct attn_classify_vtab {
  sqlite3_vtab base;
  attn_conn *conn;
} attn_classify_vtab;

typedef struct attn_classify_cursor {
  sqlite3_vtab_cursor base;
  attn_model *model;
  sqlite3_stmt *stmt;
  attn_rows rows;
  attn_workers workers;
  int *pred;
  float *prob;
  int cap, i, query_done;
  sqlite3_int64 rowid;
} attn_classify_cursor;

static int attn_classify_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                                 sqlite3_vtab **out, char **errmsg) {
  int rc = attn_vtab_connect(
      db, "CREATE TABLE x(id, label TEXT, probability REAL, arg_name HIDDEN, arg_query HIDDEN)",
      sizeof(attn_classify_vtab), SQLITE_VTAB_DIRECTONLY, out); /* it runs a query as text */
  if (rc == SQLITE_OK) ((attn_classify_vtab *)*out)->conn = aux;
  return rc;
}

static int attn_classify_best_index(sqlite3_vtab *vtab, sqlite3_index_info *info) {
  return attn_vtab_best_index(vtab, info, ATTN_CLASSIFY_FIRST_ARG, 2, 2,
                              "attn_classify: expected 2 arguments: attn_classify(name, query)");
}

static int attn_classify_open(sqlite3_vtab *vtab, sqlite3_vtab_cursor **out) {
  return attn_vtab_cursor_new(sizeof(attn_classify_cursor), out);
}

static void attn_classify_reset(attn_classify_cursor *cur) {
  sqlite3_finalize(cur->stmt);
  cur->stmt = NULL;
  attn_model_release(cur->model);
  cur->model = NULL;
  attn_rows_free(&cur->rows);
  cur->i = 0;
  cur->query_done = 1;
}

static int attn_classify_close(sqlite3_vtab_cursor *base) {
  attn_classify_cursor *cur = (attn_classify_cursor *)base;
  attn_classify_reset(cur);
  attn_workers_free(&cur->workers);
  sqlite3_free(cur->pred);
  sqlite3_free(cur->prob);
  sqlite3_free(cur);
  return SQLITE_OK;
}

/* Read and classify the next chunk of the query. */
static int attn_classify_chunk(attn_classify_cursor *cur, char **msg) {
  const char *fn = "attn_classify";
  int max_rows = ATTN_CHUNK_PER_THREAD * attn_workers_threads();
  attn_conn *conn = ((attn_classify_vtab *)cur->base.pVtab)->conn;
  attn_conn_query_begin(conn, fn);
  int rc = attn_rows_read(&cur->rows, cur->stmt, ATTN_ROWS_ID_TEXT, max_rows, &cur->query_done,
                          fn, msg);
  attn_conn_query_end(conn);
  cur->i = 0;
  if (rc != SQLITE_OK) return rc;
  if (cur->rows.n > cur->cap) {
    int *pred = sqlite3_realloc64(cur->pred, sizeof *pred * (sqlite3_uint64)cur->rows.n);
    if (pred) cur->pred = pred;
    float *prob = sqlite3_realloc64(cur->prob, sizeof *prob * (sqlite3_uint64)cur->rows.n);
    if (prob) cur->prob = prob;
    if (!pred || !prob) return SQLITE_NOMEM;
    cur->cap = cur->rows.n;
  }
  return attn_classify_texts_ws(cur->model, &cur->workers, cur->rows.texts, cur->rows.lens,
                                cur->rows.n, cur->pred, cur->prob, fn, msg);
}

static int attn_classify_filter(sqlite3_vtab_cursor *base, int idx_num, const char *idx_str,
                                int argc, sqlite3_value **argv) {
  attn_classify_cursor *cur = (attn_classify_cursor *)base;
  attn_classify_vtab *vtab = (attn_classify_vtab *)base->pVtab;
  const char *fn = "attn_classify";
  char *msg = NULL;
  int rc;
  attn_classify_reset(cur);
  cur->rowid = 0;
  const char *name = argc > 0 ? (const char *)sqlite3_value_text(argv[0]) : NULL;
  if (!name || !*name) {
    msg = sqlite3_mprintf("%s: the model name must be a non-empty text, got %s", fn,
                          name ? "''" : "NULL");
    rc = SQLITE_ERROR;
    goto done;
  }
  rc = attn_model_acquire(vtab->conn, fn, name, &cur->model, &msg);
  if (rc != SQLITE_OK) goto done;
  rc = attn_prepare_query(attn_conn_db(vtab->conn), fn,
                          argc > 1 ? (const char *)sqlite3_value_text(argv[1]) : NULL, 2,
                          "(id, text)", &cur->stmt, &msg);
  if (rc != SQLITE_OK) goto done;
  cur->query_done = 0;
  rc = attn_classify_chunk(cur, &msg);
done:
  if (rc != SQLITE_OK) {
    cur->query_done = 1;
    attn_rows_free(&cur->rows); /* frees the id values read so far */
    attn_vtab_error(base->pVtab, msg ? msg : sqlite3_mprintf("%s: out of memory", fn));
  }
  return rc;
}

static int attn_classify_next(sqlite3_vtab_cursor *base) {
  attn_classify_cursor *cur = (attn_classify_cursor *)base;
  char *msg = NULL;
  cur->i++;
  cur->rowid++;
  if (cur->i < cur->rows.n || cur->query_done) return SQLITE_OK;
  int rc = attn_classify_chunk(cur, &msg);
  if (rc != SQLITE_OK) {
    cur->query_done = 1;
    attn_rows_free(&cur->rows); /* frees the id values read so far */
    attn_vtab_error(base->pVtab, msg ? msg : sqlite3_mprintf("attn_classify: out of memory"));
  }
  return rc;
}

static int attn_classify_eof(sqlite3_vtab_cursor *base) {
  attn_classify_cursor *cur = (attn_classify_cursor *)base;
  return cur->i >= cur->rows.n;
}

static int attn_classify_column(sqlite3_vtab_cursor *base, sqlite3_context *ctx, int col) {
  attn_classify_cursor *cur = (attn_classify_cursor *)base;
  int i = cur->i, c = cur->pred[i];
  switch (col) {
  case 0: sqlite3_result_value(ctx, cur->rows.keys[i]); break;
  case 1:
    if (c >= 0) sqlite3_result_text(ctx, nn_model_label(cur->model->nn, c), -1, SQLITE_TRANSIENT);
    break;
  case 2:
    if (c >= 0) sqlite3_result_double(ctx, cur->prob[i]);
    break;
  default: break;
  }
  return SQLITE_OK;
}

static int attn_classify_rowid(sqlite3_vtab_cursor *base, sqlite_int64 *rowid) {
  *rowid = ((attn_classify_cursor *)base)->rowid + 1;
  return SQLITE_OK;
}

static const sqlite3_module attn_classify_module = {
    .iVersion = 0,
    .xCreate = NULL, /* eponymous only */
    .xConnect = attn_classify_connect,
    .xBestIndex = attn_classify_best_index,
    .xDisconnect = attn_vtab_disconnect,
    .xOpen = attn_classify_open,
    .xClose = attn_classify_close,
    .xFilter = attn_classify_filter,
    .xNext = attn_classify_next,
    .xEof = attn_classify_eof,
    .xColumn = attn_classify_column,
    .xRowid = attn_classify_rowid,
};

int attn_classify_register(sqlite3 *db, attn_conn *conn) {
  return attn_create_module(db, conn, "attn_classify", &attn_classify_module);
}
