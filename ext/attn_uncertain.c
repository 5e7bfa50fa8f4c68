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
 * time. An integer id (a rowid, the usual case) is kept in the row itself, 32 bytes a row in
 * all; any other id as a copy of its value besides (about 80 bytes more: over 1 million rows
 * the process's peak grew by 123 MB with every id a copy, by 47 MB with them inline, the
 * array's doubling included). A NULL id or text is an error naming the row: a row the user
 * cannot find again, or a text with nothing to classify, is no suggestion. A model whose
 * probabilities are not numbers (weights so large that the logits overflow) gives NULL
 * probability, margin and entropy, as attn_classify and attn_probs give NULL: such rows come
 * first, the model being surest of nothing there.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn_ext.h"

typedef struct attn_uncertain_row {
  union {
    sqlite3_int64 integer; /* boxed == 0 */
    sqlite3_value *value;  /* boxed == 1: a copy the cursor owns */
  } id;
  sqlite3_int64 order;                /* in the query */
  float probability, margin, entropy; /* NaN: the model gave no probabilities (NULL) */
  unsigned label : 31, boxed : 1;
} attn_uncertain_row;

typedef struct attn_uncertain_cursor {
  sqlite3_vtab_cursor base;
  attn_model *model;
  attn_uncertain_row *rows;
  sqlite3_int64 n, cap, i;
} attn_uncertain_cursor;

/* Columns; the arguments are the hidden columns at the end. */
enum {
  ATTN_UNCERTAIN_COL_ID,
  ATTN_UNCERTAIN_COL_LABEL,
  ATTN_UNCERTAIN_COL_PROBABILITY,
  ATTN_UNCERTAIN_COL_MARGIN,
  ATTN_UNCERTAIN_COL_ENTROPY,
  ATTN_UNCERTAIN_COL_ARG_NAME,
  ATTN_UNCERTAIN_COL_ARG_QUERY
};
static const char attn_uncertain_schema[] =
    "CREATE TABLE x(id, label TEXT, probability REAL, margin REAL, entropy REAL, arg_name HIDDEN, "
    "arg_query HIDDEN)";

static int attn_uncertain_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                                  sqlite3_vtab **out, char **errmsg) {
  return attn_vtab_connect(db, attn_uncertain_schema, SQLITE_VTAB_DIRECTONLY, /* runs a query */
                           aux, 0, sizeof(attn_uncertain_cursor), out);
}

static int attn_uncertain_best_index(sqlite3_vtab *vtab, sqlite3_index_info *info) {
  return attn_vtab_best_index(vtab, info, ATTN_UNCERTAIN_COL_ARG_NAME, 2, 2,
                              "attn_uncertain: expected 2 arguments: attn_uncertain(name, query)");
}

static void attn_uncertain_reset(attn_uncertain_cursor *cur) {
  for (sqlite3_int64 i = 0; i < cur->n; i++)
    if (cur->rows[i].boxed) sqlite3_value_free(cur->rows[i].id.value);
  cur->n = cur->i = 0;
  attn_model_release(cur->model);
  cur->model = NULL;
}

static int attn_uncertain_close(sqlite3_vtab_cursor *base) {
  attn_uncertain_cursor *cur = (attn_uncertain_cursor *)base;
  attn_uncertain_reset(cur);
  sqlite3_free(cur->rows);
  sqlite3_free(cur);
  return SQLITE_OK;
}

/* The least sure first: no probabilities (NaN) first, then margin ascending, entropy
 * descending, then the query's order: a total order, whatever the numbers (qsort may misbehave
 * with one that is not). */
static int attn_uncertain_cmp(const void *pa, const void *pb) {
  const attn_uncertain_row *a = pa, *b = pb;
  int a_nan = isnan(a->margin), b_nan = isnan(b->margin);
  if (a_nan != b_nan) return a_nan ? -1 : 1;
  if (!a_nan) {
    if (a->margin != b->margin) return a->margin < b->margin ? -1 : 1;
    if (a->entropy != b->entropy) return a->entropy > b->entropy ? -1 : 1;
  }
  return a->order < b->order ? -1 : a->order > b->order;
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
  if (cur->n + n > cur->cap) {
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
    int finite = 1;
    for (int c = 0; c < C; c++) {
      if (!isfinite(p[c])) finite = 0;
      if (p[c] > top) second = top < 0.0f ? 0.0f : top, top = p[c];
      else if (p[c] > second) second = p[c];
      if (p[c] > 0.0f) entropy -= (double)p[c] * log((double)p[c]);
    }
    attn_uncertain_row *r = &cur->rows[cur->n];
    sqlite3_value *id = rows->keys[i];
    rows->keys[i] = NULL;
    /* an integer without a subtype is its number; anything else keeps the copy (the cursor's) */
    r->boxed = sqlite3_value_type(id) != SQLITE_INTEGER || sqlite3_value_subtype(id) != 0;
    if (r->boxed) {
      r->id.value = id;
    } else {
      r->id.integer = sqlite3_value_int64(id);
      sqlite3_value_free(id);
    }
    r->label = (unsigned)(*pred)[i];
    r->probability = finite ? top : NAN;
    r->margin = finite ? top - second : NAN;
    r->entropy = finite ? (float)entropy : NAN;
    r->order = first + i;
    cur->n++;
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
  int *pred = NULL, cap = 0, done = 0, rc;
  float *probs = NULL;
  memset(&rows, 0, sizeof rows);
  attn_uncertain_reset(cur);
  const char *name = NULL;
  rc = attn_name_value(fn, argc > 0 ? argv[0] : NULL, &name, &msg);
  if (rc != SQLITE_OK) goto done;
  rc = attn_model_acquire(conn, fn, name, &cur->model, &msg);
  if (rc != SQLITE_OK) goto done;
  rc = attn_prepare_query(attn_conn_db(conn), fn,
                          argc > 1 ? (const char *)sqlite3_value_text(argv[1]) : NULL, 2,
                          "(id, text)", &stmt, &msg);
  if (rc != SQLITE_OK) goto done;
  while (!done) {
    sqlite3_int64 first = cur->n;
    attn_conn_query_begin(conn, fn);
    rc = attn_rows_read(&rows, stmt, ATTN_ROWS_ID_TEXT, ATTN_CHUNK_ROWS, &done, fn, &msg);
    attn_conn_query_end(conn);
    if (rc != SQLITE_OK) goto done;
    rc = attn_uncertain_chunk(cur, conn, &rows, first, &pred, &probs, &cap, &msg);
    if (rc != SQLITE_OK) goto done;
  }
  if (cur->n > 1) qsort(cur->rows, (size_t)cur->n, sizeof *cur->rows, attn_uncertain_cmp);
done:
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

static void attn_uncertain_result(sqlite3_context *ctx, float v) {
  if (isnan(v)) sqlite3_result_null(ctx);
  else sqlite3_result_double(ctx, v);
}

static int attn_uncertain_column(sqlite3_vtab_cursor *base, sqlite3_context *ctx, int col) {
  attn_uncertain_cursor *cur = (attn_uncertain_cursor *)base;
  const attn_uncertain_row *r = &cur->rows[cur->i];
  switch (col) {
  case ATTN_UNCERTAIN_COL_ID:
    if (r->boxed) sqlite3_result_value(ctx, r->id.value);
    else sqlite3_result_int64(ctx, r->id.integer);
    break;
  case ATTN_UNCERTAIN_COL_LABEL:
    sqlite3_result_text(ctx, nn_model_label(cur->model->nn, r->label), -1, SQLITE_TRANSIENT);
    break;
  /* NaN: SQLite gives NULL, but say so rather than rely on it */
  case ATTN_UNCERTAIN_COL_PROBABILITY: attn_uncertain_result(ctx, r->probability); break;
  case ATTN_UNCERTAIN_COL_MARGIN: attn_uncertain_result(ctx, r->margin); break;
  case ATTN_UNCERTAIN_COL_ENTROPY: attn_uncertain_result(ctx, r->entropy); break;
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
