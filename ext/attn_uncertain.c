/* attn_uncertain.c -- the table-valued function attn_uncertain: which texts to label next.
 *
 *   SELECT id, label, margin FROM attn_uncertain('news',
 *       'SELECT rowid, title FROM headlines WHERE category IS NULL') LIMIT 100;
 *   --  id | label | probability | margin | entropy      the least sure first
 *
 * Uncertainty sampling, the usual first step of active learning: the model is least sure of a
 * text whose two most probable labels are nearly tied, and labelling such texts teaches it more
 * than labelling texts it already gets right. Each row of the query (one read-only statement,
 * columns id and text, as attn_classify's) is classified (attn_classify_probs, in chunks on the
 * connection's threads); the rows come back ordered by margin, the top probability less the
 * second, ascending (ties: the higher entropy first, then the query's order). Every row must be
 * seen before the first is returned, so the query is read whole: its ids and four numbers a
 * row stay in memory (SQLite's allocator, so the heap limit holds), the texts only a chunk at a
 * time. A NULL id or text is an error naming the row: a row the user cannot find again, or a
 * text with nothing to classify, is no suggestion.
 *
 * The options {"diverse": n} ask for one round of n rows spread out rather than the whole
 * order: margin sampling alone spends a round on near-duplicates of one confusing kind. Among the
 * "candidates" (default 2n) least sure rows, spherical k-means on the rows' attn_embed vectors
 * (cosine; seeded farthest-point from the least sure row, at most ATTN_UNCERTAIN_KMEANS_ITERS
 * Lloyd steps) makes n clusters, and the least sure row of each is returned, least sure first.
 * Only the candidates are kept (a max-heap as the rows stream by: a row's vector is computed,
 * one more forward pass on the calling thread, when it enters it), so memory is candidates x
 * (D + a few) floats whatever the query's size. In a query of N rows in no particular order
 * about candidates x (1 + ln(N / candidates)) rows enter (3,500 of a million for 400); in the
 * worst order, every row. The clustering costs candidates x n x D multiply-adds a step, at most
 * 11 (10 Lloyd steps and the seeding): at the bounds (1,000 of 16,000, D 128) 2e10 in all,
 * seconds; 100 of 400, a millisecond. The interrupt is checked between chunks of rows and every
 * 256 rows of a step. The same rows and model give the same answer: every tie goes to the
 * earlier row.
 *
 *   SELECT id FROM attn_uncertain('news', 'SELECT rowid, title FROM headlines
 *                                          WHERE category IS NULL', '{"diverse": 100}');
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn_ext.h"
#include "json.h"

/* The bounds of the options: n x candidates x D multiply-adds a k-means step. */
#define ATTN_UNCERTAIN_MAX_DIVERSE 1000
#define ATTN_UNCERTAIN_MAX_FACTOR 16 /* candidates <= 16 x diverse */
#define ATTN_UNCERTAIN_KMEANS_ITERS 10

typedef struct attn_uncertain_row {
  sqlite3_value *id;
  int label;
  float probability, margin, entropy;
  sqlite3_int64 order; /* in the query */
  int slot;            /* "diverse": its vector, vectors + slot * D */
} attn_uncertain_row;

typedef struct attn_uncertain_cursor {
  sqlite3_vtab_cursor base;
  attn_model *model;
  attn_uncertain_row *rows; /* "diverse": a max-heap of the candidates until the query is read */
  sqlite3_int64 n, cap, i;
  int diverse, candidates; /* the options; 0: every row, least sure first */
  int D;
  float *vectors; /* (candidates, D) "diverse": the rows' attn_embed vectors */
} attn_uncertain_cursor;

/* Columns; the arguments are the hidden columns at the end. */
enum {
  ATTN_UNCERTAIN_COL_ID,
  ATTN_UNCERTAIN_COL_LABEL,
  ATTN_UNCERTAIN_COL_PROBABILITY,
  ATTN_UNCERTAIN_COL_MARGIN,
  ATTN_UNCERTAIN_COL_ENTROPY,
  ATTN_UNCERTAIN_COL_ARG_NAME,
  ATTN_UNCERTAIN_COL_ARG_QUERY,
  ATTN_UNCERTAIN_COL_ARG_OPTIONS
};
static const char attn_uncertain_schema[] =
    "CREATE TABLE x(id, label TEXT, probability REAL, margin REAL, entropy REAL, arg_name HIDDEN, "
    "arg_query HIDDEN, arg_options HIDDEN)";

static int attn_uncertain_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                                  sqlite3_vtab **out, char **errmsg) {
  return attn_vtab_connect(db, attn_uncertain_schema, SQLITE_VTAB_DIRECTONLY, /* runs a query */
                           aux, 0, sizeof(attn_uncertain_cursor), out);
}

static int attn_uncertain_best_index(sqlite3_vtab *vtab, sqlite3_index_info *info) {
  return attn_vtab_best_index(vtab, info, ATTN_UNCERTAIN_COL_ARG_NAME, 3, 2,
                              "attn_uncertain: expected 2 or 3 arguments: attn_uncertain(name, "
                              "query) or attn_uncertain(name, query, options)");
}

static void attn_uncertain_reset(attn_uncertain_cursor *cur) {
  for (sqlite3_int64 i = 0; i < cur->n; i++) sqlite3_value_free(cur->rows[i].id);
  cur->n = cur->i = 0;
  attn_model_release(cur->model);
  cur->model = NULL;
  sqlite3_free(cur->vectors);
  cur->vectors = NULL;
  cur->diverse = cur->candidates = cur->D = 0;
}

static int attn_uncertain_close(sqlite3_vtab_cursor *base) {
  attn_uncertain_cursor *cur = (attn_uncertain_cursor *)base;
  attn_uncertain_reset(cur);
  sqlite3_free(cur->rows);
  sqlite3_free(cur);
  return SQLITE_OK;
}

/* The least sure first: margin ascending, entropy descending, then the query's order. */
static int attn_uncertain_cmp(const void *pa, const void *pb) {
  const attn_uncertain_row *a = pa, *b = pb;
  if (a->margin != b->margin) return a->margin < b->margin ? -1 : 1;
  if (a->entropy != b->entropy) return a->entropy > b->entropy ? -1 : 1;
  return a->order < b->order ? -1 : a->order > b->order;
}

#define QUOTE(m) ((m)->type == NN_JSON_STRING ? "\"" : "")

/* The options: NULL or '{}' for every row in order, else {"diverse": n, "candidates": m}. */
static int attn_uncertain_options(sqlite3_value *arg, int *diverse, int *candidates, char **msg) {
  static const char usage[] = "attn_uncertain: the options must be a JSON object as text, e.g. "
                              "'{\"diverse\":100}'";
  *diverse = *candidates = 0;
  if (!arg || sqlite3_value_type(arg) == SQLITE_NULL) return SQLITE_OK;
  if (sqlite3_value_type(arg) != SQLITE_TEXT) {
    *msg = sqlite3_mprintf("%s", usage);
    return SQLITE_ERROR;
  }
  const char *text = (const char *)sqlite3_value_text(arg);
  if (!text) return SQLITE_NOMEM;
  char err[NN_ERR_LEN] = "";
  nn_json *doc = NULL;
  int st = nn_json_parse(&doc, text, (size_t)sqlite3_value_bytes(arg), &attn_mem, err);
  if (st == NN_NOMEM) return SQLITE_NOMEM;
  if (st != NN_OK || doc->type != NN_JSON_OBJECT) {
    nn_json_free(doc);
    *msg = sqlite3_mprintf("%s", usage);
    return SQLITE_ERROR;
  }
  const nn_json *given_candidates = NULL;
  int rc = SQLITE_OK;
  for (size_t i = 0; rc == SQLITE_OK && i < doc->count; i++) {
    const nn_json *m = &doc->items[i];
    int is_diverse = strcmp(m->key, "diverse") == 0;
    if (!is_diverse && strcmp(m->key, "candidates") != 0) {
      *msg = sqlite3_mprintf("attn_uncertain: unknown option \"%s\" (expected \"diverse\" or "
                             "\"candidates\")",
                             m->key);
      rc = SQLITE_ERROR;
    } else if (is_diverse) {
      if (m->type != NN_JSON_NUMBER || !m->is_integer || m->integer < 1 ||
          m->integer > ATTN_UNCERTAIN_MAX_DIVERSE) {
        char *got = attn_option_value(text, m);
        if (got)
          *msg = sqlite3_mprintf("attn_uncertain: option \"diverse\" must be an integer from 1 "
                                 "to %d (the rows to return), got %s%s%s",
                                 ATTN_UNCERTAIN_MAX_DIVERSE, QUOTE(m), got, QUOTE(m));
        sqlite3_free(got);
        rc = got ? SQLITE_ERROR : SQLITE_NOMEM;
      } else {
        *diverse = (int)m->integer;
      }
    } else {
      given_candidates = m;
    }
  }
  if (rc == SQLITE_OK && given_candidates) {
    const nn_json *m = given_candidates;
    int most = *diverse * ATTN_UNCERTAIN_MAX_FACTOR;
    if (!*diverse) {
      *msg = sqlite3_mprintf("attn_uncertain: option \"candidates\" needs \"diverse\" (the rows "
                             "to return, spread out among the candidates)");
      rc = SQLITE_ERROR;
    } else if (m->type != NN_JSON_NUMBER || !m->is_integer || m->integer < *diverse ||
               m->integer > most) {
      char *got = attn_option_value(text, m);
      if (got)
        *msg = sqlite3_mprintf("attn_uncertain: option \"candidates\" must be an integer from %d "
                               "to %d (\"diverse\" to %d times it), got %s%s%s",
                               *diverse, most, ATTN_UNCERTAIN_MAX_FACTOR, QUOTE(m), got, QUOTE(m));
      sqlite3_free(got);
      rc = got ? SQLITE_ERROR : SQLITE_NOMEM;
    } else {
      *candidates = (int)m->integer;
    }
  }
  /* 2n: on AG News and Debian's descriptions (tests/bench/RESULTS.md) 4n spread the round too
   * far from the least sure rows on one corpus of the two */
  if (rc == SQLITE_OK && *diverse && !*candidates) *candidates = 2 * *diverse;
  nn_json_free(doc);
  return rc;
}
#undef QUOTE

/* The max-heap of the candidates, the least sure row's opposite on top: a row enters when it is
 * less sure than the top (attn_uncertain_cmp), which it then replaces. */
static void attn_uncertain_sift_down(attn_uncertain_row *heap, sqlite3_int64 n, sqlite3_int64 i) {
  for (;;) {
    sqlite3_int64 big = i, l = 2 * i + 1, r = l + 1;
    if (l < n && attn_uncertain_cmp(&heap[l], &heap[big]) > 0) big = l;
    if (r < n && attn_uncertain_cmp(&heap[r], &heap[big]) > 0) big = r;
    if (big == i) return;
    attn_uncertain_row t = heap[i];
    heap[i] = heap[big];
    heap[big] = t;
    i = big;
  }
}

static void attn_uncertain_sift_up(attn_uncertain_row *heap, sqlite3_int64 i) {
  while (i > 0) {
    sqlite3_int64 up = (i - 1) / 2;
    if (attn_uncertain_cmp(&heap[i], &heap[up]) <= 0) return;
    attn_uncertain_row t = heap[i];
    heap[i] = heap[up];
    heap[up] = t;
    i = up;
  }
}

/* Row r of the chunk (text, len) offered to the candidates: kept (its vector computed, *r's id
 * taken) when the heap has room or r is less sure than its top. */
static int attn_uncertain_offer(attn_uncertain_cursor *cur, attn_conn *conn, attn_uncertain_row *r,
                                const char *text, int len, char **msg) {
  int D = cur->D;
  sqlite3_int64 at;
  if (cur->n < cur->candidates) {
    at = cur->n;
    r->slot = (int)cur->n;
  } else if (attn_uncertain_cmp(r, &cur->rows[0]) < 0) {
    at = 0;
    r->slot = cur->rows[0].slot;
  } else {
    return SQLITE_OK; /* the id stays with the chunk, freed with it */
  }
  nn_workspace *ws = attn_conn_workspace(conn, msg);
  if (!ws) return SQLITE_NOMEM;
  int C = nn_model_num_classes(cur->model->nn);
  float logits_stack[64], *logits = logits_stack;
  if (C > 64 && !(logits = sqlite3_malloc64(sizeof *logits * (sqlite3_uint64)C)))
    return SQLITE_NOMEM;
  char err[NN_ERR_LEN] = "";
  int st = attn_forward_text(cur->model->nn, ws, text, len, logits,
                             cur->vectors + (size_t)r->slot * D, err);
  if (logits != logits_stack) sqlite3_free(logits);
  if (st != NN_OK) return attn_nn_error(st, "attn_uncertain", err, msg);
  /* unit length, so that a dot product is the cosine */
  float *v = cur->vectors + (size_t)r->slot * D;
  double norm = 0.0;
  for (int d = 0; d < D; d++) norm += (double)v[d] * v[d];
  if (norm > 0.0)
    for (int d = 0; d < D; d++) v[d] = (float)(v[d] / sqrt(norm));
  if (at == 0 && cur->n == cur->candidates) {
    sqlite3_value_free(cur->rows[0].id);
    cur->rows[0] = *r;
    attn_uncertain_sift_down(cur->rows, cur->n, 0);
  } else {
    cur->rows[cur->n] = *r;
    attn_uncertain_sift_up(cur->rows, cur->n);
    cur->n++;
  }
  r->id = NULL; /* the heap's now */
  return SQLITE_OK;
}

/* The index of the centroid nearest (largest dot product) to vector x; ties: the first. */
static int attn_uncertain_nearest(const float *x, const float *centroids, int k, int D) {
  int best = 0;
  double best_dot = -2.0;
  for (int c = 0; c < k; c++) {
    const float *m = centroids + (size_t)c * D;
    double dot = 0.0;
    for (int d = 0; d < D; d++) dot += (double)x[d] * m[d];
    if (dot > best_dot) best_dot = dot, best = c;
  }
  return best;
}

/* "diverse": cur->rows (sorted, least sure first) cut to the least sure row of each of `diverse`
 * clusters of their vectors, still least sure first. */
static int attn_uncertain_spread(attn_uncertain_cursor *cur, attn_interrupt *interrupt,
                                 char **msg) {
  int n = (int)cur->n, k = cur->diverse, D = cur->D, rc = SQLITE_OK;
  if (n <= k) return SQLITE_OK;
  float *centroids = sqlite3_malloc64(sizeof(float) * (sqlite3_uint64)k * D);
  double *far = sqlite3_malloc64(sizeof(double) * (sqlite3_uint64)n);
  double *sum = sqlite3_malloc64(sizeof(double) * (sqlite3_uint64)D);
  int *cluster = sqlite3_malloc64(sizeof(int) * (sqlite3_uint64)n);
  int *pick = sqlite3_malloc64(sizeof(int) * (sqlite3_uint64)k);
  unsigned char *taken = sqlite3_malloc64((sqlite3_uint64)n);
  if (!centroids || !far || !sum || !cluster || !pick || !taken) {
    rc = SQLITE_NOMEM;
    goto done;
  }
#define VEC(i) (cur->vectors + (size_t)cur->rows[i].slot * D)
  /* Farthest-point seeding from the least sure row: each next centre is the row farthest (in
   * cosine distance) from every centre so far. */
  memcpy(centroids, VEC(0), sizeof(float) * D);
  for (int i = 0; i < n; i++) {
    double dot = 0.0;
    for (int d = 0; d < D; d++) dot += (double)VEC(i)[d] * centroids[d];
    far[i] = 1.0 - dot;
  }
  for (int c = 1; c < k; c++) {
    int j = 0;
    for (int i = 1; i < n; i++)
      if (far[i] > far[j]) j = i;
    memcpy(centroids + (size_t)c * D, VEC(j), sizeof(float) * D);
    for (int i = 0; i < n; i++) {
      double dot = 0.0;
      for (int d = 0; d < D; d++) dot += (double)VEC(i)[d] * VEC(j)[d];
      if (1.0 - dot < far[i]) far[i] = 1.0 - dot;
    }
    far[j] = -1.0; /* a centre already */
    if (attn_interrupted(interrupt, 64)) goto interrupted;
  }
  /* Lloyd's steps: each row to its nearest centre, each centre the mean direction of its rows
   * (an empty cluster keeps its centre), until nothing moves. */
  for (int i = 0; i < n; i++) cluster[i] = -1;
  for (int iter = 0; iter <= ATTN_UNCERTAIN_KMEANS_ITERS; iter++) {
    int moved = 0;
    for (int i = 0; i < n; i++) {
      int c = attn_uncertain_nearest(VEC(i), centroids, k, D);
      moved += c != cluster[i];
      cluster[i] = c;
      if (attn_interrupted(interrupt, 256)) goto interrupted; /* 256 x k x D multiply-adds */
    }
    if (!moved || iter == ATTN_UNCERTAIN_KMEANS_ITERS) break;
    for (int c = 0; c < k; c++) {
      int members = 0;
      memset(sum, 0, sizeof(double) * D);
      for (int i = 0; i < n; i++)
        if (cluster[i] == c) {
          members++;
          for (int d = 0; d < D; d++) sum[d] += VEC(i)[d];
        }
      double norm = 0.0;
      for (int d = 0; d < D; d++) norm += sum[d] * sum[d];
      if (members && norm > 0.0)
        for (int d = 0; d < D; d++) centroids[(size_t)c * D + d] = (float)(sum[d] / sqrt(norm));
    }
  }
#undef VEC
  /* The least sure row of each cluster (the rows are in that order); an empty cluster's turn
   * goes to the least sure row not taken. */
  for (int c = 0; c < k; c++) pick[c] = -1;
  for (int i = 0; i < n; i++) {
    taken[i] = pick[cluster[i]] < 0;
    if (taken[i]) pick[cluster[i]] = i;
  }
  for (int c = 0, i = 0; c < k; c++)
    if (pick[c] < 0) {
      while (taken[i]) i++;
      taken[i] = 1;
    }
  sqlite3_int64 kept = 0;
  for (int i = 0; i < n; i++) {
    if (taken[i]) cur->rows[kept++] = cur->rows[i];
    else sqlite3_value_free(cur->rows[i].id);
  }
  cur->n = kept;
  goto done;
interrupted:
  *msg = sqlite3_mprintf("attn_uncertain: interrupted");
  rc = SQLITE_INTERRUPT;
done:
  sqlite3_free(centroids);
  sqlite3_free(far);
  sqlite3_free(sum);
  sqlite3_free(cluster);
  sqlite3_free(pick);
  sqlite3_free(taken);
  return rc;
}

/* Classify one chunk of rows (read by attn_rows_read) into cur->rows. */
static int attn_uncertain_chunk(attn_uncertain_cursor *cur, attn_conn *conn, attn_rows *rows,
                                sqlite3_int64 first, int **pred, float **probs, int *cap,
                                char **msg) {
  const char *fn = "attn_uncertain";
  int C = nn_model_num_classes(cur->model->nn), n = rows->n;
  for (int i = 0; i < n; i++) {
    const char *what = sqlite3_value_type(rows->keys[i]) == SQLITE_NULL ? "id"
                       : !rows->texts[i]                                ? "text"
                                                                        : NULL;
    if (what) {
      *msg = sqlite3_mprintf("%s: row %lld of the query has a NULL %s", fn,
                             (long long)(first + i + 1), what);
      return SQLITE_ERROR;
    }
  }
  if (n > *cap) {
    int *p = sqlite3_realloc64(*pred, sizeof **pred * (sqlite3_uint64)n);
    if (p) *pred = p;
    float *q = sqlite3_realloc64(*probs, sizeof **probs * (sqlite3_uint64)n * (sqlite3_uint64)C);
    if (q) *probs = q;
    if (!p || !q) return SQLITE_NOMEM;
    *cap = n;
  }
  if (!cur->diverse && cur->n + n > cur->cap) {
    sqlite3_int64 grown = cur->cap ? 2 * cur->cap : 1024;
    while (grown < cur->n + n) grown *= 2;
    attn_uncertain_row *more = sqlite3_realloc64(cur->rows, sizeof *more * (sqlite3_uint64)grown);
    if (!more) return SQLITE_NOMEM;
    cur->rows = more;
    cur->cap = grown;
  }
  int rc =
      attn_classify_probs(conn, cur->model, rows->texts, rows->lens, n, *pred, *probs, fn, msg);
  if (rc != SQLITE_OK) return rc;
  for (int i = 0; i < n; i++) {
    const float *p = *probs + (size_t)i * C;
    float top = -1.0f, second = 0.0f;
    double entropy = 0.0;
    for (int c = 0; c < C; c++) {
      if (p[c] > top) second = top < 0.0f ? 0.0f : top, top = p[c];
      else if (p[c] > second) second = p[c];
      if (p[c] > 0.0f) entropy -= (double)p[c] * log((double)p[c]);
    }
    attn_uncertain_row row = {.id = rows->keys[i],
                              .label = (*pred)[i],
                              .probability = top,
                              .margin = top - second,
                              .entropy = (float)entropy,
                              .order = first + i};
    if (cur->diverse) {
      rc = attn_uncertain_offer(cur, conn, &row, rows->texts[i], rows->lens[i], msg);
      if (rc != SQLITE_OK) return rc;
      if (!row.id) rows->keys[i] = NULL; /* taken */
      continue;
    }
    cur->rows[cur->n++] = row; /* the id the cursor's now */
    rows->keys[i] = NULL;
  }
  return SQLITE_OK;
}

static int attn_uncertain_filter(sqlite3_vtab_cursor *base, int idx_num, const char *idx_str,
                                 int argc, sqlite3_value **argv) {
  attn_uncertain_cursor *cur = (attn_uncertain_cursor *)base;
  attn_vtab *vtab = (attn_vtab *)base->pVtab;
  attn_conn *conn = vtab->conn;
  const char *fn = "attn_uncertain";
  char *msg = NULL;
  sqlite3_stmt *stmt = NULL;
  attn_rows rows;
  attn_interrupt interrupt = {attn_conn_db(conn), NULL, 0};
  int *pred = NULL, cap = 0, done = 0, rc;
  float *probs = NULL;
  sqlite3_int64 read = 0;
  memset(&rows, 0, sizeof rows);
  attn_uncertain_reset(cur);
  const char *name = NULL;
  rc = attn_name_value(fn, argc > 0 ? argv[0] : NULL, &name, &msg);
  if (rc != SQLITE_OK) goto done;
  rc = attn_uncertain_options(argc > 2 ? argv[2] : NULL, &cur->diverse, &cur->candidates, &msg);
  if (rc != SQLITE_OK) goto done;
  rc = attn_model_acquire(conn, fn, name, &cur->model, &msg);
  if (rc != SQLITE_OK) goto done;
  if (cur->diverse) { /* the candidates and their vectors, allocated once */
    cur->D = nn_model_pooled_dim(cur->model->nn);
    if (cur->cap < cur->candidates) {
      attn_uncertain_row *more =
          sqlite3_realloc64(cur->rows, sizeof *more * (sqlite3_uint64)cur->candidates);
      if (!more) {
        rc = SQLITE_NOMEM;
        goto done;
      }
      cur->rows = more;
      cur->cap = cur->candidates;
    }
    cur->vectors =
        sqlite3_malloc64(sizeof *cur->vectors * (sqlite3_uint64)cur->candidates * cur->D);
    if (!cur->vectors) {
      rc = SQLITE_NOMEM;
      goto done;
    }
  }
  rc = attn_prepare_query(attn_conn_db(conn), fn,
                          argc > 1 ? (const char *)sqlite3_value_text(argv[1]) : NULL, 2,
                          "(id, text)", &stmt, &msg);
  if (rc != SQLITE_OK) goto done;
  while (!done) {
    attn_conn_query_begin(conn, fn);
    rc = attn_rows_read(&rows, stmt, ATTN_ROWS_ID_TEXT, ATTN_CHUNK_ROWS, &done, fn, &msg);
    attn_conn_query_end(conn);
    if (rc != SQLITE_OK) goto done;
    rc = attn_uncertain_chunk(cur, conn, &rows, read, &pred, &probs, &cap, &msg);
    if (rc != SQLITE_OK) goto done;
    read += rows.n;
    if (!done && attn_interrupted(&interrupt, 1)) {
      msg = sqlite3_mprintf("%s: interrupted", fn);
      rc = SQLITE_INTERRUPT;
      goto done;
    }
  }
  if (cur->n > 1) qsort(cur->rows, (size_t)cur->n, sizeof *cur->rows, attn_uncertain_cmp);
  if (cur->diverse) rc = attn_uncertain_spread(cur, &interrupt, &msg);
done:
  attn_interrupt_end(&interrupt);
  sqlite3_finalize(stmt);
  attn_rows_free(&rows); /* the ids not handed to cur->rows */
  sqlite3_free(pred);
  sqlite3_free(probs);
  if (rc != SQLITE_OK) {
    attn_uncertain_reset(cur);
    return attn_vtab_fail(base->pVtab, rc, msg, fn);
  }
  return rc;
}

static int attn_uncertain_next(sqlite3_vtab_cursor *base) {
  ((attn_uncertain_cursor *)base)->i++;
  return SQLITE_OK;
}

static int attn_uncertain_eof(sqlite3_vtab_cursor *base) {
  attn_uncertain_cursor *cur = (attn_uncertain_cursor *)base;
  return cur->i >= cur->n;
}

static int attn_uncertain_column(sqlite3_vtab_cursor *base, sqlite3_context *ctx, int col) {
  attn_uncertain_cursor *cur = (attn_uncertain_cursor *)base;
  const attn_uncertain_row *r = &cur->rows[cur->i];
  switch (col) {
  case ATTN_UNCERTAIN_COL_ID: sqlite3_result_value(ctx, r->id); break;
  case ATTN_UNCERTAIN_COL_LABEL:
    sqlite3_result_text(ctx, nn_model_label(cur->model->nn, r->label), -1, SQLITE_TRANSIENT);
    break;
  case ATTN_UNCERTAIN_COL_PROBABILITY: sqlite3_result_double(ctx, r->probability); break;
  case ATTN_UNCERTAIN_COL_MARGIN: sqlite3_result_double(ctx, r->margin); break;
  case ATTN_UNCERTAIN_COL_ENTROPY: sqlite3_result_double(ctx, r->entropy); break;
  default: break;
  }
  return SQLITE_OK;
}

static int attn_uncertain_rowid(sqlite3_vtab_cursor *base, sqlite_int64 *rowid) {
  *rowid = ((attn_uncertain_cursor *)base)->i + 1;
  return SQLITE_OK;
}

const sqlite3_module attn_uncertain_module = {
    .iVersion = 0,
    .xCreate = NULL, /* eponymous only */
    .xConnect = attn_uncertain_connect,
    .xBestIndex = attn_uncertain_best_index,
    .xDisconnect = attn_vtab_disconnect,
    .xOpen = attn_vtab_open,
    .xClose = attn_uncertain_close,
    .xFilter = attn_uncertain_filter,
    .xNext = attn_uncertain_next,
    .xEof = attn_uncertain_eof,
    .xColumn = attn_uncertain_column,
    .xRowid = attn_uncertain_rowid,
};
