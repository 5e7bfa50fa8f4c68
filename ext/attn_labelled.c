/* attn_labelled.c -- a labelled query (text, label) through the deployed model, in chunks: the
 * row loop of attn_evaluate and attn_confusion (attn_evaluate.c), attn_metrics (attn_metrics.c)
 * and attn_curve (attn_curve.c), written once.
 *
 *   SELECT * FROM attn_metrics('news', 'SELECT title, category FROM test_headlines');
 *
 * Each chunk of ATTN_CHUNK_ROWS rows is read with the store open to the query's own functions
 * (attn_conn_query_begin .. end), predicted on the connection's thread pool (attn_infer.c) and
 * followed by an interrupt check. With ATTN_LABELLED_KNOWN every label is looked up among the
 * model's before the chunk is predicted (an unknown label fails with its row); with
 * ATTN_LABELLED_PROBS every row's probabilities are kept, (rows x classes) floats.
 */
#include <string.h>

#include "attn_ext.h"

/* Grow *buf to hold n elements of size bytes (contents kept). 0, or -1 when out of memory. */
static int attn_labelled_reserve(void **buf, int64_t *cap, int64_t n, size_t size) {
  if (n <= *cap) return 0;
  int64_t want = *cap ? 2 * *cap : 4096;
  while (want < n) want *= 2;
  void *p = sqlite3_realloc64(*buf, (sqlite3_uint64)want * size);
  if (!p) return -1;
  *buf = p;
  *cap = want;
  return 0;
}

int attn_labelled_open(attn_labelled *q, attn_conn *conn, attn_interrupt *interrupt, const char *fn,
                       int flags, sqlite3_value *name_arg, sqlite3_value *query_arg,
                       char **errmsg) {
  memset(q, 0, sizeof *q);
  q->conn = conn;
  q->interrupt = interrupt;
  q->fn = fn;
  q->flags = flags;
  int rc = attn_name_value(fn, name_arg, &q->name, errmsg);
  if (rc == SQLITE_OK) rc = attn_model_acquire(conn, fn, q->name, &q->model, errmsg);
  if (rc == SQLITE_OK)
    rc = attn_prepare_query(attn_conn_db(conn), fn,
                            query_arg ? (const char *)sqlite3_value_text(query_arg) : NULL, 2,
                            "(text, label)", &q->stmt, errmsg);
  return rc;
}

int attn_labelled_next(attn_labelled *q, char **errmsg) {
  const char *fn = q->fn;
  attn_rows *rows = &q->rows;
  int rc;
  do { /* a chunk of no rows (the end of the query) is skipped */
    if (q->done) return SQLITE_DONE;
    attn_conn_query_begin(q->conn, fn);
    rc = attn_rows_read(rows, q->stmt, ATTN_ROWS_TEXT_LABEL, ATTN_CHUNK_ROWS, &q->done, fn, errmsg);
    attn_conn_query_end(q->conn);
    if (rc != SQLITE_OK) return rc;
  } while (rows->n == 0);
  const nn_model *nn = q->model->nn;
  int C = nn_model_num_classes(nn);
  int64_t N = q->N;
  if (attn_labelled_reserve((void **)&q->pred, &q->cap_pred, rows->n, sizeof *q->pred) ||
      ((q->flags & ATTN_LABELLED_KNOWN) &&
       attn_labelled_reserve((void **)&q->y_true, &q->cap_y_true, N + rows->n,
                             sizeof *q->y_true)) ||
      ((q->flags & ATTN_LABELLED_PROBS) &&
       attn_labelled_reserve((void **)&q->probs, &q->cap_probs, (N + rows->n) * C,
                             sizeof *q->probs)))
    return SQLITE_NOMEM;
  if (q->flags & ATTN_LABELLED_KNOWN)
    for (int i = 0; i < rows->n; i++) {
      int c = nn_model_label_lookup(nn, rows->labels[i], rows->label_lens[i]);
      if (c < 0) {
        *errmsg = sqlite3_mprintf("%s: label '%.*s' of row %d is not one of the %d labels of "
                                  "model '%s'",
                                  fn, rows->label_lens[i], rows->labels[i],
                                  rows->first_row - rows->n + i + 1, C, q->model->name);
        return SQLITE_ERROR;
      }
      q->y_true[N + i] = c;
    }
  if (q->flags & ATTN_LABELLED_PROBS)
    rc = attn_classify_probs(q->conn, q->model, rows->texts, rows->lens, rows->n, q->pred,
                             q->probs + N * C, fn, errmsg);
  else
    rc = attn_classify_texts(q->conn, q->model, rows->texts, rows->lens, rows->n, q->pred, NULL, fn,
                             errmsg);
  if (rc != SQLITE_OK) return rc;
  q->N = N + rows->n;
  if (attn_interrupted(q->interrupt, 1)) {
    *errmsg = sqlite3_mprintf("%s: interrupted", fn);
    return SQLITE_INTERRUPT;
  }
  return SQLITE_ROW;
}

int attn_labelled_read_all(attn_labelled *q, char **errmsg) {
  int rc;
  while ((rc = attn_labelled_next(q, errmsg)) == SQLITE_ROW) {
  }
  if (rc != SQLITE_DONE) return rc;
  if (q->N == 0) {
    *errmsg = sqlite3_mprintf("%s: the query returned no rows", q->fn);
    return SQLITE_ERROR;
  }
  return SQLITE_OK;
}

void attn_labelled_free(attn_labelled *q) {
  sqlite3_finalize(q->stmt);
  attn_rows_free(&q->rows);
  attn_model_release(q->model);
  sqlite3_free(q->pred);
  sqlite3_free(q->y_true);
  sqlite3_free(q->probs);
  memset(q, 0, sizeof *q);
}
