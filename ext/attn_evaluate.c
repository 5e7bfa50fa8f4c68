/* attn_evaluate.c -- quality of the deployed model on a labelled query: per-class metrics and
 * the confusion matrix.
 *
 *   SELECT * FROM attn_evaluate('news', 'SELECT title, category FROM test_headlines');
 *   --  label | precision | recall | f1 | support    one row per class (sorted), then 'overall'
 *   --                                                with support-weighted averages (sklearn's
 *   --                                                classification_report "weighted avg")
 *   SELECT * FROM attn_confusion('news', 'SELECT title, category FROM test_headlines');
 *   --  actual | predicted | count                   every (actual, predicted) pair, zeros too
 *
 * The query: one read-only statement, columns text and label (labels compared as text; a NULL
 * text or label is an error naming the row). The classes are the union of the model's labels
 * and the labels found in the query, sorted by their bytes as sklearn sorts them; predicted
 * labels are always the model's. Prediction is batched across the cores (attn_classify.c).
 */
#include <stdlib.h>
#include <string.h>

#include "attn_ext.h"

enum { ATTN_EVALUATE = 0, ATTN_CONFUSION = 1 };

typedef struct attn_eval_vtab {
  sqlite3_vtab base;
  attn_conn *conn;
  int mode;
} attn_eval_vtab;

typedef struct attn_eval_cursor {
  sqlite3_vtab_cursor base;
  int K;               /* classes: model labels + labels only in the query */
  char **labels;       /* (K) sorted */
  int *is_model;       /* (K) 1 if the model can predict it */
  int64_t *confusion;  /* (K, K) row = actual, column = predicted, in sorted order */
  nn_class_metrics *metrics; /* (K + 1): per class, then weighted */
  int *pairs;          /* confusion rows: (npairs) actual * K + predicted */
  int nrows, row;
} attn_eval_cursor;

static int attn_eval_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                             sqlite3_vtab **out, char **errmsg, int mode) {
  int rc = attn_vtab_connect(
      db, mode == ATTN_EVALUATE
              ? "CREATE TABLE x(label TEXT, precision REAL, recall REAL, f1 REAL, "
                "support INTEGER, arg_name HIDDEN, arg_query HIDDEN)"
              : "CREATE TABLE x(actual TEXT, predicted TEXT, count INTEGER, arg_name HIDDEN, "
                "arg_query HIDDEN)",
      sizeof(attn_eval_vtab), SQLITE_VTAB_DIRECTONLY, out); /* it runs a query as text */
  if (rc != SQLITE_OK) return rc;
  attn_eval_vtab *vtab = (attn_eval_vtab *)*out;
  vtab->conn = aux;
  vtab->mode = mode;
  return SQLITE_OK;
}

static int attn_evaluate_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                                 sqlite3_vtab **out, char **errmsg) {
  return attn_eval_connect(db, aux, argc, argv, out, errmsg, ATTN_EVALUATE);
}

static int attn_confusion_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                                  sqlite3_vtab **out, char **errmsg) {
  return attn_eval_connect(db, aux, argc, argv, out, errmsg, ATTN_CONFUSION);
}

static int attn_eval_best_index(sqlite3_vtab *base, sqlite3_index_info *info) {
  if (((attn_eval_vtab *)base)->mode == ATTN_EVALUATE)
    return attn_vtab_best_index(base, info, 5, 2, 2,
                                "attn_evaluate: expected 2 arguments: attn_evaluate(name, query)");
  return attn_vtab_best_index(base, info, 3, 2, 2,
                              "attn_confusion: expected 2 arguments: attn_confusion(name, query)");
}

static int attn_eval_open(sqlite3_vtab *vtab, sqlite3_vtab_cursor **out) {
  return attn_vtab_cursor_new(sizeof(attn_eval_cursor), out);
}

static void attn_eval_reset(attn_eval_cursor *cur) {
  for (int k = 0; cur->labels && k < cur->K; k++) sqlite3_free(cur->labels[k]);
  sqlite3_free(cur->labels);
  sqlite3_free(cur->is_model);
  sqlite3_free(cur->confusion);
  sqlite3_free(cur->metrics);
  sqlite3_free(cur->pairs);
  cur->labels = NULL;
  cur->is_model = NULL;
  cur->confusion = NULL;
  cur->metrics = NULL;
  cur->pairs = NULL;
  cur->K = cur->nrows = cur->row = 0;
}

static int attn_eval_close(sqlite3_vtab_cursor *base) {
  attn_eval_reset((attn_eval_cursor *)base);
  sqlite3_free(base);
  return SQLITE_OK;
}

/* Byte order, then length: as Python sorts str (UTF-8 byte order = code point order). */
static int attn_label_cmp(const char *a, const char *b) {
  return strcmp(a, b);
}

/* Counts gathered in query order: classes 0..C-1 are the model's, C.. the query's others. */
typedef struct attn_eval_counts {
  int K, cap;
  char **labels;  /* (K) */
  int64_t *count; /* (cap, cap) */
} attn_eval_counts;

/* Labels of the query that the model does not know, at most: the matrix is (K, K). */
#define ATTN_EVAL_MAX_UNKNOWN 1000

/* The class of a label: >= 0, -1 when out of memory, -2 past ATTN_EVAL_MAX_UNKNOWN. */
static int attn_eval_class(attn_eval_counts *ec, const nn_model *nn, const char *label, int len) {
  int c = nn_model_label_lookup(nn, label, len);
  if (c >= 0) return c;
  int C = nn_model_num_classes(nn);
  for (int k = C; k < ec->K; k++)
    if ((int)strlen(ec->labels[k]) == len && memcmp(ec->labels[k], label, (size_t)len) == 0)
      return k;
  if (ec->K - C >= ATTN_EVAL_MAX_UNKNOWN) return -2;
  if (ec->K == ec->cap) { /* grow the matrix */
    int cap = 2 * ec->cap;
    int64_t *count = sqlite3_malloc64(sizeof *count * (sqlite3_uint64)cap * cap);
    char **labels = sqlite3_realloc64(ec->labels, sizeof *labels * (sqlite3_uint64)cap);
    if (labels) ec->labels = labels;
    if (!count || !labels) {
      sqlite3_free(count);
      return -1;
    }
    memset(count, 0, sizeof *count * (size_t)cap * cap);
    for (int i = 0; i < ec->K; i++)
      for (int j = 0; j < ec->K; j++) count[(size_t)i * cap + j] = ec->count[(size_t)i * ec->cap + j];
    sqlite3_free(ec->count);
    ec->count = count;
    ec->cap = cap;
  }
  ec->labels[ec->K] = sqlite3_mprintf("%.*s", len, label);
  if (!ec->labels[ec->K]) return -1;
  return ec->K++;
}

static int attn_eval_filter(sqlite3_vtab_cursor *base, int idx_num, const char *idx_str, int argc,
                            sqlite3_value **argv) {
  attn_eval_cursor *cur = (attn_eval_cursor *)base;
  attn_eval_vtab *vtab = (attn_eval_vtab *)base->pVtab;
  const char *fn = vtab->mode == ATTN_EVALUATE ? "attn_evaluate" : "attn_confusion";
  char *msg = NULL;
  attn_model *model = NULL;
  sqlite3_stmt *stmt = NULL;
  attn_rows rows;
  attn_workers workers = {0, NULL};
  attn_eval_counts ec = {0, 0, NULL, NULL};
  int *pred = NULL, cap_pred = 0, *order = NULL, *rank = NULL, rc;
  memset(&rows, 0, sizeof rows);
  attn_eval_reset(cur);
  const char *name = argc > 0 ? (const char *)sqlite3_value_text(argv[0]) : NULL;
  if (!name || !*name) {
    msg = sqlite3_mprintf("%s: the model name must be a non-empty text, got %s", fn,
                          name ? "''" : "NULL");
    rc = SQLITE_ERROR;
    goto done;
  }
  rc = attn_model_acquire(vtab->conn, fn, name, &model, &msg);
  if (rc != SQLITE_OK) goto done;
  rc = attn_prepare_query(attn_conn_db(vtab->conn), fn,
                          argc > 1 ? (const char *)sqlite3_value_text(argv[1]) : NULL, 2,
                          "(text, label)", &stmt, &msg);
  if (rc != SQLITE_OK) goto done;

  const nn_model *nn = model->nn;
  int C = nn_model_num_classes(nn);
  ec.cap = C + 4;
  ec.labels = sqlite3_malloc64(sizeof *ec.labels * (sqlite3_uint64)ec.cap);
  ec.count = sqlite3_malloc64(sizeof *ec.count * (sqlite3_uint64)ec.cap * ec.cap);
  if (!ec.labels || !ec.count) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  memset(ec.count, 0, sizeof *ec.count * (size_t)ec.cap * ec.cap);
  for (int c = 0; c < C; c++) {
    ec.labels[c] = sqlite3_mprintf("%s", nn_model_label(nn, c));
    if (!ec.labels[c]) {
      rc = SQLITE_NOMEM;
      goto done;
    }
    ec.K++;
  }
  int query_done = 0;
  int chunk = 1024 * attn_workers_threads();
  while (!query_done) {
    attn_conn_query_begin(vtab->conn, fn);
    rc = attn_rows_read(&rows, stmt, ATTN_ROWS_TEXT_LABEL, chunk, &query_done, fn, &msg);
    attn_conn_query_end(vtab->conn);
    if (rc != SQLITE_OK) goto done;
    if (rows.n > cap_pred) {
      sqlite3_free(pred);
      cap_pred = rows.n;
      pred = sqlite3_malloc64(sizeof *pred * (sqlite3_uint64)cap_pred);
      if (!pred) {
        rc = SQLITE_NOMEM;
        goto done;
      }
    }
    rc = attn_classify_texts_ws(model, &workers, rows.texts, rows.lens, rows.n, pred, NULL, fn,
                                &msg);
    if (rc != SQLITE_OK) goto done;
    for (int i = 0; i < rows.n; i++) {
      int a = attn_eval_class(&ec, nn, rows.labels[i], rows.label_lens[i]);
      if (a == -2) {
        msg = sqlite3_mprintf("%s: the query has more than %d labels that model '%s' does not "
                              "know (row %d)",
                              fn, ATTN_EVAL_MAX_UNKNOWN, name, rows.first_row - rows.n + i + 1);
        rc = SQLITE_ERROR;
        goto done;
      }
      if (a < 0) {
        rc = SQLITE_NOMEM;
        goto done;
      }
      ec.count[(size_t)a * ec.cap + pred[i]]++;
    }
  }

  /* Sorted classes. */
  int K = ec.K;
  order = sqlite3_malloc64(sizeof *order * (sqlite3_uint64)K);
  rank = sqlite3_malloc64(sizeof *rank * (sqlite3_uint64)K);
  cur->labels = sqlite3_malloc64(sizeof *cur->labels * (sqlite3_uint64)K);
  cur->is_model = sqlite3_malloc64(sizeof *cur->is_model * (sqlite3_uint64)K);
  cur->confusion = sqlite3_malloc64(sizeof *cur->confusion * (sqlite3_uint64)K * K);
  cur->metrics = sqlite3_malloc64(sizeof *cur->metrics * (sqlite3_uint64)(K + 1));
  cur->pairs = sqlite3_malloc64(sizeof *cur->pairs * (sqlite3_uint64)K * K);
  if (!order || !rank || !cur->labels || !cur->is_model || !cur->confusion || !cur->metrics ||
      !cur->pairs) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  for (int k = 0; k < K; k++) { /* insertion sort of class ids by label */
    int j = k;
    while (j > 0 && attn_label_cmp(ec.labels[order[j - 1]], ec.labels[k]) > 0) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = k;
  }
  for (int s = 0; s < K; s++) rank[order[s]] = s;
  for (int s = 0; s < K; s++) {
    cur->labels[s] = ec.labels[order[s]];
    ec.labels[order[s]] = NULL;
    cur->is_model[s] = order[s] < C;
  }
  cur->K = K;
  for (int a = 0; a < K; a++)
    for (int p = 0; p < K; p++)
      cur->confusion[(size_t)rank[a] * K + rank[p]] = ec.count[(size_t)a * ec.cap + p];
  double accuracy = 0;
  nn_metrics_from_confusion(cur->metrics, &cur->metrics[K], &accuracy, cur->confusion, K);
  if (vtab->mode == ATTN_EVALUATE) {
    cur->nrows = K + 1;
  } else {
    cur->nrows = 0;
    for (int a = 0; a < K; a++)
      for (int p = 0; p < K; p++)
        if (cur->is_model[p]) cur->pairs[cur->nrows++] = a * K + p;
  }
  rc = SQLITE_OK;
done:
  sqlite3_finalize(stmt);
  attn_rows_free(&rows);
  attn_workers_free(&workers);
  attn_model_release(model);
  for (int k = 0; ec.labels && k < ec.K; k++) sqlite3_free(ec.labels[k]);
  sqlite3_free(ec.labels);
  sqlite3_free(ec.count);
  sqlite3_free(pred);
  sqlite3_free(order);
  sqlite3_free(rank);
  if (rc != SQLITE_OK) {
    attn_eval_reset(cur);
    attn_vtab_error(base->pVtab, msg ? msg : sqlite3_mprintf("%s: out of memory", fn));
  }
  return rc;
}

static int attn_eval_next(sqlite3_vtab_cursor *base) {
  ((attn_eval_cursor *)base)->row++;
  return SQLITE_OK;
}

static int attn_eval_eof(sqlite3_vtab_cursor *base) {
  attn_eval_cursor *cur = (attn_eval_cursor *)base;
  return cur->row >= cur->nrows;
}

static int attn_eval_column(sqlite3_vtab_cursor *base, sqlite3_context *ctx, int col) {
  attn_eval_cursor *cur = (attn_eval_cursor *)base;
  attn_eval_vtab *vtab = (attn_eval_vtab *)base->pVtab;
  int i = cur->row, K = cur->K;
  if (vtab->mode == ATTN_EVALUATE) {
    const nn_class_metrics *m = &cur->metrics[i];
    switch (col) {
    case 0: sqlite3_result_text(ctx, i < K ? cur->labels[i] : "overall", -1, SQLITE_TRANSIENT); break;
    case 1: sqlite3_result_double(ctx, m->precision); break;
    case 2: sqlite3_result_double(ctx, m->recall); break;
    case 3: sqlite3_result_double(ctx, m->f1); break;
    case 4: sqlite3_result_int64(ctx, m->support); break;
    default: break;
    }
    return SQLITE_OK;
  }
  int a = cur->pairs[i] / K, p = cur->pairs[i] % K;
  switch (col) {
  case 0: sqlite3_result_text(ctx, cur->labels[a], -1, SQLITE_TRANSIENT); break;
  case 1: sqlite3_result_text(ctx, cur->labels[p], -1, SQLITE_TRANSIENT); break;
  case 2: sqlite3_result_int64(ctx, cur->confusion[(size_t)a * K + p]); break;
  default: break;
  }
  return SQLITE_OK;
}

static int attn_eval_rowid(sqlite3_vtab_cursor *base, sqlite_int64 *rowid) {
  *rowid = ((attn_eval_cursor *)base)->row + 1;
  return SQLITE_OK;
}

#define ATTN_EVAL_MODULE(connect)                                                    \
  {                                                                                  \
    .iVersion = 0, .xCreate = NULL, .xConnect = connect,                             \
    .xBestIndex = attn_eval_best_index, .xDisconnect = attn_vtab_disconnect,         \
    .xOpen = attn_eval_open, .xClose = attn_eval_close, .xFilter = attn_eval_filter, \
    .xNext = attn_eval_next, .xEof = attn_eval_eof, .xColumn = attn_eval_column,     \
    .xRowid = attn_eval_rowid                                                        \
  }

static const sqlite3_module attn_evaluate_module = ATTN_EVAL_MODULE(attn_evaluate_connect);
static const sqlite3_module attn_confusion_module = ATTN_EVAL_MODULE(attn_confusion_connect);

int attn_evaluate_register(sqlite3 *db, attn_conn *conn) {
  int rc = attn_create_module(db, conn, "attn_evaluate", &attn_evaluate_module);
  if (rc == SQLITE_OK) rc = attn_create_module(db, conn, "attn_confusion", &attn_confusion_module);
  return rc;
}
