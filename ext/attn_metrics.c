/* attn_metrics.c -- every figure of BigQuery ML's ML.EVALUATE for the deployed model on a
 * labelled query, one row per figure.
 *
 *   SELECT * FROM attn_metrics('news', 'SELECT title, category FROM test_headlines');
 *   --  metric             | value
 *   --  accuracy           | 0.8725
 *   --  macro_precision    | ...     macro_recall, macro_f1, weighted_precision,
 *   --  ...                          weighted_recall, weighted_f1, log_loss,
 *   --  roc_auc            | 0.9662  (one-vs-rest, macro; NULL when no class has an AUC)
 *
 * Each figure is scikit-learn's function on the same probabilities (nn_metrics_evaluate in
 * engine/nn.h says which function and how; tests/test_metrics_sql.py compares them to 1e-6 on
 * the probabilities of attn_probs). The probabilities come from the batched inference of the
 * core (attn_classify_probs, attn_infer.c; the rows read by attn_labelled.c); the predicted
 * class is the most probable one.
 *
 * The query: one read-only statement, columns text and label (labels compared as text; a NULL
 * text or label is an error naming the row). Every label must be one of the model's: a label it
 * does not know is an error naming it and its row -- log_loss and roc_auc need the model's
 * probability of the true class, which it has none for (attn_evaluate, which needs no
 * probability, counts such labels as a class never predicted, as sklearn would). Memory: the
 * probabilities of every row, (rows x classes) floats.
 */
#include <math.h>
#include <string.h>

#include "attn_ext.h"

typedef struct attn_metrics_cursor {
  sqlite3_vtab_cursor base;
  nn_evaluation eval;
  int row;  /* index into attn_metrics_names */
  int rows; /* 0 before a successful xFilter */
} attn_metrics_cursor;

/* The figures, in the order of the rows. */
enum {
  ATTN_METRICS_ACCURACY,
  ATTN_METRICS_MACRO_PRECISION,
  ATTN_METRICS_MACRO_RECALL,
  ATTN_METRICS_MACRO_F1,
  ATTN_METRICS_WEIGHTED_PRECISION,
  ATTN_METRICS_WEIGHTED_RECALL,
  ATTN_METRICS_WEIGHTED_F1,
  ATTN_METRICS_LOG_LOSS,
  ATTN_METRICS_ROC_AUC,
  ATTN_METRICS_COUNT
};
static const char *const attn_metrics_names[ATTN_METRICS_COUNT] = {
    "accuracy",        "macro_precision", "macro_recall", "macro_f1", "weighted_precision",
    "weighted_recall", "weighted_f1",     "log_loss",     "roc_auc",
};

/* Columns; the arguments are the hidden columns at the end. */
enum {
  ATTN_METRICS_COL_METRIC,
  ATTN_METRICS_COL_VALUE,
  ATTN_METRICS_COL_ARG_NAME,
  ATTN_METRICS_COL_ARG_QUERY
};
static const char attn_metrics_schema[] =
    "CREATE TABLE x(metric TEXT, value REAL, arg_name HIDDEN, arg_query HIDDEN)";

/* Direct-only: it runs a query given as text. */
static int attn_metrics_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                                sqlite3_vtab **out, char **errmsg) {
  return attn_vtab_connect(db, attn_metrics_schema, SQLITE_VTAB_DIRECTONLY, aux, 0,
                           sizeof(attn_metrics_cursor), out);
}

static int attn_metrics_best_index(sqlite3_vtab *vtab, sqlite3_index_info *info) {
  return attn_vtab_best_index(vtab, info, ATTN_METRICS_COL_ARG_NAME, 2, 2,
                              "attn_metrics: expected 2 arguments: attn_metrics(name, query)");
}

static int attn_metrics_close(sqlite3_vtab_cursor *base) {
  sqlite3_free(base);
  return SQLITE_OK;
}

static int attn_metrics_filter(sqlite3_vtab_cursor *base, int idx_num, const char *idx_str,
                               int argc, sqlite3_value **argv) {
  attn_metrics_cursor *cur = (attn_metrics_cursor *)base;
  attn_vtab *vtab = (attn_vtab *)base->pVtab;
  const char *fn = "attn_metrics";
  char err[NN_ERR_LEN] = "", *msg = NULL;
  attn_labelled q;
  attn_interrupt interrupt = {attn_conn_db(vtab->conn), NULL, 0};
  cur->rows = cur->row = 0;
  int rc =
      attn_labelled_open(&q, vtab->conn, &interrupt, fn, ATTN_LABELLED_KNOWN | ATTN_LABELLED_PROBS,
                         argc > 0 ? argv[0] : NULL, argc > 1 ? argv[1] : NULL, &msg);
  if (rc != SQLITE_OK) goto done;
  int C = nn_model_num_classes(q.model->nn);
  if (C < 2) {
    msg = sqlite3_mprintf("%s: model '%s' has %d class; the metrics need at least 2", fn,
                          q.model->name, C);
    rc = SQLITE_ERROR;
    goto done;
  }
  rc = attn_labelled_read_all(&q, &msg);
  if (rc != SQLITE_OK) goto done;
  int st = nn_metrics_evaluate(&cur->eval, q.y_true, q.probs, q.N, C, attn_interrupt_check,
                               &interrupt, &attn_mem, err);
  if (st != NN_OK) {
    rc = attn_nn_error(st, fn, err, &msg);
    goto done;
  }
  cur->rows = ATTN_METRICS_COUNT;
  rc = SQLITE_OK;
done:
  attn_labelled_free(&q);
  attn_interrupt_end(&interrupt);
  if (rc != SQLITE_OK) {
    cur->rows = 0;
    return attn_vtab_fail(base->pVtab, rc, msg, fn);
  }
  return rc;
}

static int attn_metrics_next(sqlite3_vtab_cursor *base) {
  ((attn_metrics_cursor *)base)->row++;
  return SQLITE_OK;
}

static int attn_metrics_eof(sqlite3_vtab_cursor *base) {
  attn_metrics_cursor *cur = (attn_metrics_cursor *)base;
  return cur->row >= cur->rows;
}

/* The figure of row `row`. */
static double attn_metrics_value(const nn_evaluation *e, int row) {
  switch (row) {
  case ATTN_METRICS_ACCURACY: return e->accuracy;
  case ATTN_METRICS_MACRO_PRECISION: return e->macro_precision;
  case ATTN_METRICS_MACRO_RECALL: return e->macro_recall;
  case ATTN_METRICS_MACRO_F1: return e->macro_f1;
  case ATTN_METRICS_WEIGHTED_PRECISION: return e->weighted_precision;
  case ATTN_METRICS_WEIGHTED_RECALL: return e->weighted_recall;
  case ATTN_METRICS_WEIGHTED_F1: return e->weighted_f1;
  case ATTN_METRICS_LOG_LOSS: return e->log_loss;
  case ATTN_METRICS_ROC_AUC: return e->roc_auc;
  default: return NAN;
  }
}

static int attn_metrics_column(sqlite3_vtab_cursor *base, sqlite3_context *ctx, int col) {
  attn_metrics_cursor *cur = (attn_metrics_cursor *)base;
  switch (col) {
  case ATTN_METRICS_COL_METRIC:
    sqlite3_result_text(ctx, attn_metrics_names[cur->row], -1, SQLITE_STATIC);
    break;
  case ATTN_METRICS_COL_VALUE: {
    double v = attn_metrics_value(&cur->eval, cur->row);
    if (isfinite(v)) sqlite3_result_double(ctx, v);
    else sqlite3_result_null(ctx); /* undefined (roc_auc with one class in the rows) */
    break;
  }
  default: break;
  }
  return SQLITE_OK;
}

static int attn_metrics_rowid(sqlite3_vtab_cursor *base, sqlite_int64 *rowid) {
  *rowid = ((attn_metrics_cursor *)base)->row + 1;
  return SQLITE_OK;
}

const sqlite3_module attn_metrics_module = {
    .iVersion = 0,
    .xCreate = NULL, /* eponymous only */
    .xConnect = attn_metrics_connect,
    .xBestIndex = attn_metrics_best_index,
    .xDisconnect = attn_vtab_disconnect,
    .xOpen = attn_vtab_open,
    .xClose = attn_metrics_close,
    .xFilter = attn_metrics_filter,
    .xNext = attn_metrics_next,
    .xEof = attn_metrics_eof,
    .xColumn = attn_metrics_column,
    .xRowid = attn_metrics_rowid,
};
