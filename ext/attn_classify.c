/* attn_classify.c -- the table-valued function attn_classify: batched prediction over the rows
 * of a query, many texts per forward pass, split across the cores.
 *
 *   SELECT * FROM attn_classify('news', 'SELECT id, title FROM headlines');
 *   --  id | label | probability       in the query's order; id is the query's first column
 *   SELECT * FROM attn_classify('news', 'SELECT id, title FROM headlines', 0.8, 'unknown');
 *   --  a label whose probability is below 0.8 reads 'unknown' (NULL without the 4th argument)
 *
 * The query (one read-only statement, columns id and text) is read in chunks of ATTN_CHUNK_ROWS
 * rows, each classified by attn_classify_texts (attn_infer.c: the connection's thread pool).
 * A NULL text gives a NULL label and probability. With min_probability (a number from 0 to 1,
 * as attn_predict's), a row whose probability is below it gets the fallback value (NULL when
 * none is given) as its label; its probability is still reported.
 */
#include <string.h>

#include "attn_ext.h"

typedef struct attn_classify_cursor {
  sqlite3_vtab_cursor base;
  attn_model *model;
  sqlite3_stmt *stmt;
  attn_rows rows;
  int *pred;
  float *prob;
  int cap, i, query_done;
  sqlite3_int64 rowid;
  int thresholded; /* min_probability given */
  double min_probability;
  sqlite3_value *fallback; /* its copy, or NULL */
} attn_classify_cursor;

/* Columns; the arguments are the hidden columns at the end. */
enum {
  ATTN_CLASSIFY_COL_ID,
  ATTN_CLASSIFY_COL_LABEL,
  ATTN_CLASSIFY_COL_PROBABILITY,
  ATTN_CLASSIFY_COL_ARG_NAME,
  ATTN_CLASSIFY_COL_ARG_QUERY,
  ATTN_CLASSIFY_COL_ARG_MIN_PROBABILITY,
  ATTN_CLASSIFY_COL_ARG_FALLBACK
};
static const char attn_classify_schema[] =
    "CREATE TABLE x(id, label TEXT, probability REAL, arg_name HIDDEN, arg_query HIDDEN, "
    "arg_min_probability HIDDEN, arg_fallback HIDDEN)";

static int attn_classify_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                                 sqlite3_vtab **out, char **errmsg) {
  return attn_vtab_connect(db, attn_classify_schema, SQLITE_VTAB_DIRECTONLY, /* runs a query */
                           aux, 0, sizeof(attn_classify_cursor), out);
}

static int attn_classify_best_index(sqlite3_vtab *vtab, sqlite3_index_info *info) {
  return attn_vtab_best_index(vtab, info, ATTN_CLASSIFY_COL_ARG_NAME, 4, 2,
                              "attn_classify: expected 2 to 4 arguments: attn_classify(name, "
                              "query[, min_probability[, fallback]])");
}

static void attn_classify_reset(attn_classify_cursor *cur) {
  sqlite3_finalize(cur->stmt);
  cur->stmt = NULL;
  attn_model_release(cur->model);
  cur->model = NULL;
  attn_rows_free(&cur->rows);
  cur->i = 0;
  cur->query_done = 1;
  sqlite3_value_free(cur->fallback);
  cur->fallback = NULL;
  cur->thresholded = 0;
}

static int attn_classify_close(sqlite3_vtab_cursor *base) {
  attn_classify_cursor *cur = (attn_classify_cursor *)base;
  attn_classify_reset(cur);
  sqlite3_free(cur->pred);
  sqlite3_free(cur->prob);
  sqlite3_free(cur);
  return SQLITE_OK;
}

/* Read and classify the next chunk of the query. */
static int attn_classify_chunk(attn_classify_cursor *cur, char **msg) {
  const char *fn = "attn_classify";
  int max_rows = ATTN_CHUNK_ROWS;
  attn_conn *conn = ((attn_vtab *)cur->base.pVtab)->conn;
  attn_conn_query_begin(conn, fn);
  int rc =
      attn_rows_read(&cur->rows, cur->stmt, ATTN_ROWS_ID_TEXT, max_rows, &cur->query_done, fn, msg);
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
  return attn_classify_texts(conn, cur->model, cur->rows.texts, cur->rows.lens, cur->rows.n,
                             cur->pred, cur->prob, fn, msg);
}

static int attn_classify_filter(sqlite3_vtab_cursor *base, int idx_num, const char *idx_str,
                                int argc, sqlite3_value **argv) {
  attn_classify_cursor *cur = (attn_classify_cursor *)base;
  attn_vtab *vtab = (attn_vtab *)base->pVtab;
  const char *fn = "attn_classify";
  char *msg = NULL;
  int rc;
  attn_classify_reset(cur);
  cur->rowid = 0;
  const char *name = NULL;
  rc = attn_name_value(fn, argc > 0 ? argv[0] : NULL, &name, &msg);
  if (rc != SQLITE_OK) goto done;
  /* argv: the arguments given, in column order (idx_num: which; attn_vtab_best_index) */
  int k = 2;
  if (attn_arg_given(idx_num, 2)) {
    rc = attn_probability_value(fn, "min_probability", argv[k++], &cur->min_probability, &msg);
    if (rc != SQLITE_OK) goto done;
    cur->thresholded = 1;
  }
  if (attn_arg_given(idx_num, 3)) {
    if (!cur->thresholded) { /* only through a named hidden column: arg_fallback = ... */
      msg = sqlite3_mprintf("%s: fallback needs min_probability: attn_classify(name, query, "
                            "min_probability, fallback)",
                            fn);
      rc = SQLITE_ERROR;
      goto done;
    }
    cur->fallback = sqlite3_value_dup(argv[k++]);
    if (!cur->fallback) {
      rc = SQLITE_NOMEM;
      goto done;
    }
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
    return attn_vtab_fail(base->pVtab, rc, msg, fn);
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
    return attn_vtab_fail(base->pVtab, rc, msg, "attn_classify");
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
  case ATTN_CLASSIFY_COL_ID: sqlite3_result_value(ctx, cur->rows.keys[i]); break;
  case ATTN_CLASSIFY_COL_LABEL:
    if (c < 0) break;                                                          /* a NULL text */
    if (cur->thresholded && !((double)cur->prob[i] >= cur->min_probability)) { /* NaN too */
      if (cur->fallback) sqlite3_result_value(ctx, cur->fallback);
      break;
    }
    sqlite3_result_text(ctx, nn_model_label(cur->model->nn, c), -1, SQLITE_TRANSIENT);
    break;
  case ATTN_CLASSIFY_COL_PROBABILITY:
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

const sqlite3_module attn_classify_module = {
    .iVersion = 0,
    .xCreate = NULL, /* eponymous only */
    .xConnect = attn_classify_connect,
    .xBestIndex = attn_classify_best_index,
    .xDisconnect = attn_vtab_disconnect,
    .xOpen = attn_vtab_open,
    .xClose = attn_classify_close,
    .xFilter = attn_classify_filter,
    .xNext = attn_classify_next,
    .xEof = attn_classify_eof,
    .xColumn = attn_classify_column,
    .xRowid = attn_classify_rowid,
};
