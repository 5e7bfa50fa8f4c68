/* attn_evaluate.c -- quality of the deployed model on a labelled query: per-class metrics and
 * the confusion matrix.
 *
 *   SELECT * FROM attn_evaluate('news', 'SELECT title, category FROM test_headlines');
 *   --  label | precision | recall | f1 | support    one row per class (sorted), then 'overall'
 *   --                                                with support-weighted averages (sklearn's
 *   --                                                classification_report "weighted avg")
 *   SELECT * FROM attn_confusion('news', 'SELECT title, category FROM test_headlines');
 *   --  actual | predicted | count                   every pair of the labels that occur in the
 *   --                                               rows (as actual or predicted), zeros too
 *   SELECT * FROM attn_confusion('news', 'SELECT ...', '{"all_labels":true}');
 *   --                                               every label of the model and of the rows
 *
 * Memory: per class a few counters; the confusion counts are kept sparse (the pairs seen), so a
 * model of many classes costs no K x K matrix. Its rows are bounded by the rows read: at most
 * (2n)^2 for n rows (their labels and predictions); with "all_labels" a 10,000-class model has
 * 10^8, made one at a time.
 *
 * The query: one read-only statement, columns text and label (labels compared as text; a NULL
 * text or label is an error naming the row). The classes are the union of the model's labels
 * and the labels found in the query, sorted by their bytes as sklearn sorts them; predicted
 * labels are always the model's. Prediction is batched across the cores (attn_classify_texts,
 * attn_infer.c; the rows read by attn_labelled.c).
 */
#include <stdlib.h>
#include <string.h>

#include "attn_ext.h"
#include "json.h"

enum { ATTN_EVALUATE = 0, ATTN_CONFUSION = 1 }; /* the mode: which of the two names was called */

/* A nonzero cell of the confusion matrix: key = actual << 32 | predicted (class ids). */
typedef struct attn_eval_cell {
  uint64_t key;
  int64_t count;
} attn_eval_cell;

typedef struct attn_eval_cursor {
  sqlite3_vtab_cursor base;
  int K;                     /* classes: model labels + labels only in the query */
  char **labels;             /* (K) sorted */
  nn_class_metrics *metrics; /* (K + 1): per class, then weighted */
  /* attn_confusion: rows are (actual, predicted) for every class and every model class, in
   * sorted order; the counts are kept sparse (a 16,000-class model is not 16,000^2 cells) */
  int *model_ranks; /* (C) sorted positions of the predicted column's classes, ascending */
  int C;
  int *actual_ranks; /* (A) sorted positions of the actual column's classes, ascending */
  int A;
  attn_eval_cell *cells; /* (ncells) keys in sorted positions, ascending */
  int64_t ncells;
  int64_t nrows, row;
} attn_eval_cursor;

/* Columns of attn_evaluate and of attn_confusion; the arguments are the hidden columns at the
 * end. */
enum {
  ATTN_EVALUATE_COL_LABEL,
  ATTN_EVALUATE_COL_PRECISION,
  ATTN_EVALUATE_COL_RECALL,
  ATTN_EVALUATE_COL_F1,
  ATTN_EVALUATE_COL_SUPPORT,
  ATTN_EVALUATE_COL_ARG_NAME,
  ATTN_EVALUATE_COL_ARG_QUERY
};
static const char attn_evaluate_schema[] =
    "CREATE TABLE x(label TEXT, precision REAL, recall REAL, f1 REAL, support INTEGER, "
    "arg_name HIDDEN, arg_query HIDDEN)";
enum {
  ATTN_CONFUSION_COL_ACTUAL,
  ATTN_CONFUSION_COL_PREDICTED,
  ATTN_CONFUSION_COL_COUNT,
  ATTN_CONFUSION_COL_ARG_NAME,
  ATTN_CONFUSION_COL_ARG_QUERY,
  ATTN_CONFUSION_COL_ARG_OPTIONS
};
static const char attn_confusion_schema[] =
    "CREATE TABLE x(actual TEXT, predicted TEXT, count INTEGER, arg_name HIDDEN, arg_query HIDDEN, "
    "arg_options HIDDEN)";

/* One module under two names: argv[0] is the name it was called by. Direct-only: it runs a query
 * given as text. */
static int attn_eval_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                             sqlite3_vtab **out, char **errmsg) {
  int mode = strcmp(argv[0], "attn_evaluate") == 0 ? ATTN_EVALUATE : ATTN_CONFUSION;
  return attn_vtab_connect(db, mode == ATTN_EVALUATE ? attn_evaluate_schema : attn_confusion_schema,
                           SQLITE_VTAB_DIRECTONLY, aux, mode, sizeof(attn_eval_cursor), out);
}

static int attn_eval_best_index(sqlite3_vtab *base, sqlite3_index_info *info) {
  if (((attn_vtab *)base)->mode == ATTN_EVALUATE)
    return attn_vtab_best_index(base, info, ATTN_EVALUATE_COL_ARG_NAME, 2, 2,
                                "attn_evaluate: expected 2 arguments: attn_evaluate(name, query)");
  return attn_vtab_best_index(base, info, ATTN_CONFUSION_COL_ARG_NAME, 3, 2,
                              "attn_confusion: expected 2 or 3 arguments: attn_confusion(name, "
                              "query) or attn_confusion(name, query, options)");
}

static void attn_eval_reset(attn_eval_cursor *cur) {
  for (int k = 0; cur->labels && k < cur->K; k++) sqlite3_free(cur->labels[k]);
  sqlite3_free(cur->labels);
  sqlite3_free(cur->metrics);
  sqlite3_free(cur->model_ranks);
  sqlite3_free(cur->actual_ranks);
  sqlite3_free(cur->cells);
  cur->labels = NULL;
  cur->metrics = NULL;
  cur->model_ranks = NULL;
  cur->actual_ranks = NULL;
  cur->cells = NULL;
  cur->K = cur->C = cur->A = 0;
  cur->ncells = cur->nrows = cur->row = 0;
}

static int attn_eval_close(sqlite3_vtab_cursor *base) {
  attn_eval_reset((attn_eval_cursor *)base);
  sqlite3_free(base);
  return SQLITE_OK;
}

/* Counts gathered in query order: classes 0..C-1 are the model's, C.. the query's others. */
typedef struct attn_eval_counts {
  int K, cap;
  char **labels;      /* (K) */
  int64_t *support;   /* (cap) rows of the class */
  int64_t *predicted; /* (cap) rows predicted as the class */
  int64_t *correct;   /* (cap) rows of the class predicted as it */
  /* attn_confusion: one cell per row appended, merged (sorted, equal keys summed) whenever
   * the buffer is full, so it holds at most the distinct pairs seen plus one chunk */
  attn_eval_cell *cells;
  int64_t ncells, cap_cells;
} attn_eval_counts;

/* Labels of the query that the model does not know, at most. */
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
  if (ec->K == ec->cap) { /* grow the per-class arrays */
    int cap = 2 * ec->cap;
    char **labels = sqlite3_realloc64(ec->labels, sizeof *labels * (sqlite3_uint64)cap);
    if (labels) ec->labels = labels;
    int64_t **arrays[3] = {&ec->support, &ec->predicted, &ec->correct};
    for (int i = 0; i < 3; i++) {
      int64_t *a = sqlite3_realloc64(*arrays[i], sizeof *a * (sqlite3_uint64)cap);
      if (!a) return -1;
      memset(a + ec->cap, 0, sizeof *a * (size_t)(cap - ec->cap));
      *arrays[i] = a;
    }
    if (!labels) return -1;
    ec->cap = cap;
  }
  ec->labels[ec->K] = sqlite3_mprintf("%.*s", len, label);
  if (!ec->labels[ec->K]) return -1;
  return ec->K++;
}

static int attn_eval_cell_cmp(const void *a, const void *b) {
  uint64_t x = ((const attn_eval_cell *)a)->key, y = ((const attn_eval_cell *)b)->key;
  return x < y ? -1 : x > y;
}

/* Sort the cells and sum those of equal keys. */
static void attn_eval_merge(attn_eval_cell *cells, int64_t *n) {
  if (*n < 2) return;
  qsort(cells, (size_t)*n, sizeof *cells, attn_eval_cell_cmp);
  int64_t out = 0;
  for (int64_t i = 1; i < *n; i++) {
    if (cells[i].key == cells[out].key) cells[out].count += cells[i].count;
    else cells[++out] = cells[i];
  }
  *n = out + 1;
}

/* Count one (actual, predicted) pair of the confusion matrix. 0, or -1 when out of memory. */
static int attn_eval_add_cell(attn_eval_counts *ec, int actual, int predicted) {
  if (ec->ncells == ec->cap_cells) {
    attn_eval_merge(ec->cells, &ec->ncells);
    if (ec->cap_cells == 0 || ec->ncells > ec->cap_cells / 2) { /* mostly distinct pairs: grow */
      int64_t cap = ec->cap_cells ? 2 * ec->cap_cells : 4096;
      attn_eval_cell *cells = sqlite3_realloc64(ec->cells, sizeof *cells * (sqlite3_uint64)cap);
      if (!cells) return -1;
      ec->cells = cells;
      ec->cap_cells = cap;
    }
  }
  ec->cells[ec->ncells].key = (uint64_t)actual << 32 | (uint32_t)predicted;
  ec->cells[ec->ncells++].count = 1;
  return 0;
}

typedef struct attn_eval_order {
  const char *label;
  int id;
} attn_eval_order;

/* Byte order (as Python sorts str: UTF-8 byte order = code point order), then class id. */
static int attn_eval_order_cmp(const void *a, const void *b) {
  const attn_eval_order *x = a, *y = b;
  int c = strcmp(x->label, y->label);
  return c ? c : (x->id > y->id) - (x->id < y->id);
}

/* attn_confusion's options: {"all_labels": true} for every label of the model and of the rows;
 * NULL, {} or false for the labels that occur. SQLITE_OK or an error with *msg. */
static int attn_confusion_options(sqlite3_value *arg, int *all_labels, char **msg) {
  static const char usage[] = "attn_confusion: the options must be a JSON object as text, e.g. "
                              "'{\"all_labels\":true}'";
  *all_labels = 0;
  if (!arg || sqlite3_value_type(arg) == SQLITE_NULL) return SQLITE_OK;
  if (sqlite3_value_type(arg) != SQLITE_TEXT) {
    *msg = sqlite3_mprintf("%s", usage);
    return SQLITE_ERROR;
  }
  const char *text = (const char *)sqlite3_value_text(arg);
  char err[NN_ERR_LEN] = "";
  nn_json *doc = NULL;
  int st = nn_json_parse(&doc, text, (size_t)sqlite3_value_bytes(arg), &attn_mem, err);
  if (st == NN_NOMEM) return SQLITE_NOMEM;
  int rc = SQLITE_OK;
  if (st != NN_OK || doc->type != NN_JSON_OBJECT) {
    *msg = sqlite3_mprintf("%s", usage);
    rc = SQLITE_ERROR;
  }
  for (size_t i = 0; rc == SQLITE_OK && i < doc->count; i++) {
    const nn_json *m = &doc->items[i];
    if (!nn_json_key_is(m, "all_labels")) {
      char key[160];
      nn_json_quote_for_message(key, sizeof key, m->key, m->key_len);
      *msg = sqlite3_mprintf("attn_confusion: unknown option %s (expected \"all_labels\")", key);
      rc = SQLITE_ERROR;
    } else if (m->type != NN_JSON_TRUE && m->type != NN_JSON_FALSE) {
      *msg = sqlite3_mprintf("attn_confusion: option \"all_labels\" must be true or false, got "
                             "%s",
                             nn_json_type_name(m->type));
      rc = SQLITE_ERROR;
    } else {
      *all_labels = m->type == NN_JSON_TRUE;
    }
  }
  nn_json_free(doc);
  return rc;
}

/* Room for the model's C classes and a few unknown labels in ec, zero counts, the model's labels
 * copied (ec->K = C). SQLITE_OK or SQLITE_NOMEM; the caller frees ec also on error. */
static int attn_eval_counts_init(attn_eval_counts *ec, const nn_model *nn) {
  int C = nn_model_num_classes(nn);
  ec->cap = C + 4;
  ec->labels = sqlite3_malloc64(sizeof *ec->labels * (sqlite3_uint64)ec->cap);
  ec->support = sqlite3_malloc64(sizeof *ec->support * (sqlite3_uint64)ec->cap);
  ec->predicted = sqlite3_malloc64(sizeof *ec->predicted * (sqlite3_uint64)ec->cap);
  ec->correct = sqlite3_malloc64(sizeof *ec->correct * (sqlite3_uint64)ec->cap);
  if (!ec->labels || !ec->support || !ec->predicted || !ec->correct) return SQLITE_NOMEM;
  memset(ec->support, 0, sizeof *ec->support * (size_t)ec->cap);
  memset(ec->predicted, 0, sizeof *ec->predicted * (size_t)ec->cap);
  memset(ec->correct, 0, sizeof *ec->correct * (size_t)ec->cap);
  for (int c = 0; c < C; c++) {
    ec->labels[c] = sqlite3_mprintf("%s", nn_model_label(nn, c));
    if (!ec->labels[c]) return SQLITE_NOMEM;
    ec->K++;
  }
  return SQLITE_OK;
}

/* Every row of the query q into ec's counts (and its cells for attn_confusion). Returns
 * SQLITE_DONE after the last row, else an error with *msg. */
static int attn_eval_count_rows(attn_eval_counts *ec, attn_labelled *q, int mode, const char *fn,
                                char **msg) {
  const nn_model *nn = q->model->nn;
  const attn_rows *rows = &q->rows;
  int rc;
  while ((rc = attn_labelled_next(q, msg)) == SQLITE_ROW) {
    for (int i = 0; i < rows->n; i++) {
      int a = attn_eval_class(ec, nn, rows->labels[i], rows->label_lens[i]);
      if (a == -2) {
        *msg =
            sqlite3_mprintf("%s: the query has more than %d labels that model '%s' does not "
                            "know (row %d)",
                            fn, ATTN_EVAL_MAX_UNKNOWN, q->name, rows->first_row - rows->n + i + 1);
        return SQLITE_ERROR;
      }
      if (a < 0) return SQLITE_NOMEM;
      int p = q->pred[i];
      ec->support[a]++;
      ec->predicted[p]++;
      if (a == p) ec->correct[a]++;
      if (mode == ATTN_CONFUSION && attn_eval_add_cell(ec, a, p) < 0) return SQLITE_NOMEM;
    }
  }
  return rc;
}

/* The cursor's rows from the counts: the classes sorted by label (their labels moved from ec to
 * cur), their metrics and the averages; for attn_confusion the cells (moved from ec) keyed by
 * sorted positions and the classes that get a row and a column (all_labels: every class). C:
 * the model's classes. SQLITE_OK or SQLITE_NOMEM. */
static int attn_eval_sort(attn_eval_cursor *cur, attn_eval_counts *ec, int C, int all_labels,
                          int mode) {
  int K = ec->K, rc = SQLITE_NOMEM;
  /* Sorted classes: rank[id] = position. */
  attn_eval_order *order = sqlite3_malloc64(sizeof *order * (sqlite3_uint64)K);
  int *rank = sqlite3_malloc64(sizeof *rank * (sqlite3_uint64)K);
  int64_t *sorted_counts = sqlite3_malloc64(sizeof *sorted_counts * 3 * (sqlite3_uint64)K);
  cur->labels = sqlite3_malloc64(sizeof *cur->labels * (sqlite3_uint64)K);
  cur->metrics = sqlite3_malloc64(sizeof *cur->metrics * (sqlite3_uint64)(K + 1));
  cur->model_ranks = sqlite3_malloc64(sizeof *cur->model_ranks * (sqlite3_uint64)(C ? C : 1));
  cur->actual_ranks = sqlite3_malloc64(sizeof *cur->actual_ranks * (sqlite3_uint64)K);
  if (!order || !rank || !sorted_counts || !cur->labels || !cur->metrics || !cur->model_ranks ||
      !cur->actual_ranks)
    goto done;
  for (int k = 0; k < K; k++) order[k] = (attn_eval_order){ec->labels[k], k};
  qsort(order, (size_t)K, sizeof *order, attn_eval_order_cmp);
  int64_t *tp = sorted_counts, *predicted = tp + K, *support = predicted + K;
  int m = 0, a = 0;
  for (int s = 0; s < K; s++) {
    int id = order[s].id;
    rank[id] = s;
    cur->labels[s] = ec->labels[id];
    ec->labels[id] = NULL;
    tp[s] = ec->correct[id];
    predicted[s] = ec->predicted[id];
    support[s] = ec->support[id];
    /* the confusion matrix: the labels that occur in the rows, as actual or predicted (so its
     * size follows the rows read, not the model), or with "all_labels" every class */
    int occurs = all_labels || ec->support[id] > 0 || ec->predicted[id] > 0;
    if (occurs) cur->actual_ranks[a++] = s;
    if (occurs && id < C) cur->model_ranks[m++] = s;
  }
  cur->K = K;
  cur->C = m;
  cur->A = a;
  double accuracy = 0;
  nn_metrics_from_counts(cur->metrics, &cur->metrics[K], &accuracy, tp, predicted, support, K);
  if (mode == ATTN_EVALUATE) {
    cur->nrows = K + 1;
  } else {
    attn_eval_merge(ec->cells, &ec->ncells); /* class ids -> sorted positions, sorted again */
    for (int64_t i = 0; i < ec->ncells; i++) {
      int a = (int)(ec->cells[i].key >> 32), p = (int)(uint32_t)ec->cells[i].key;
      ec->cells[i].key = (uint64_t)rank[a] << 32 | (uint32_t)rank[p];
    }
    if (ec->ncells > 1) qsort(ec->cells, (size_t)ec->ncells, sizeof *ec->cells, attn_eval_cell_cmp);
    cur->cells = ec->cells;
    cur->ncells = ec->ncells;
    ec->cells = NULL;
    cur->nrows = (int64_t)a * m;
  }
  rc = SQLITE_OK;
done:
  sqlite3_free(order);
  sqlite3_free(rank);
  sqlite3_free(sorted_counts);
  return rc;
}

static int attn_eval_filter(sqlite3_vtab_cursor *base, int idx_num, const char *idx_str, int argc,
                            sqlite3_value **argv) {
  attn_eval_cursor *cur = (attn_eval_cursor *)base;
  attn_vtab *vtab = (attn_vtab *)base->pVtab;
  const char *fn = vtab->mode == ATTN_EVALUATE ? "attn_evaluate" : "attn_confusion";
  char *msg = NULL;
  attn_labelled q;
  attn_eval_counts ec;
  attn_interrupt interrupt = {attn_conn_db(vtab->conn), NULL, 0};
  int rc;
  memset(&ec, 0, sizeof ec);
  memset(&q, 0, sizeof q); /* freed at done: also when the options are refused */
  attn_eval_reset(cur);
  int all_labels = 0;
  if (vtab->mode == ATTN_CONFUSION) {
    rc = attn_confusion_options(argc > 2 ? argv[2] : NULL, &all_labels, &msg);
    if (rc != SQLITE_OK) goto done;
  }
  rc = attn_labelled_open(&q, vtab->conn, &interrupt, fn, 0, argc > 0 ? argv[0] : NULL,
                          argc > 1 ? argv[1] : NULL, &msg);
  if (rc != SQLITE_OK) goto done;
  rc = attn_eval_counts_init(&ec, q.model->nn);
  if (rc != SQLITE_OK) goto done;
  rc = attn_eval_count_rows(&ec, &q, vtab->mode, fn, &msg);
  if (rc != SQLITE_DONE) goto done;
  if (q.N == 0) {
    /* as attn_metrics and attn_curve: figures of no rows would read as a model that is always
     * wrong, not as an empty query */
    msg = sqlite3_mprintf("%s: the query returned no rows", fn);
    rc = SQLITE_ERROR;
    goto done;
  }
  rc = attn_eval_sort(cur, &ec, nn_model_num_classes(q.model->nn), all_labels, vtab->mode);
done:
  attn_labelled_free(&q);
  attn_interrupt_end(&interrupt);
  for (int k = 0; ec.labels && k < ec.K; k++) sqlite3_free(ec.labels[k]);
  sqlite3_free(ec.labels);
  sqlite3_free(ec.support);
  sqlite3_free(ec.predicted);
  sqlite3_free(ec.correct);
  sqlite3_free(ec.cells);
  if (rc != SQLITE_OK) {
    attn_eval_reset(cur);
    return attn_vtab_fail(base->pVtab, rc, msg, fn);
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

/* The count of cell (actual, predicted) in sorted positions: 0 when not seen. */
static int64_t attn_eval_count(const attn_eval_cursor *cur, int a, int p) {
  uint64_t key = (uint64_t)a << 32 | (uint32_t)p;
  int64_t lo = 0, hi = cur->ncells;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (cur->cells[mid].key < key) lo = mid + 1;
    else hi = mid;
  }
  return lo < cur->ncells && cur->cells[lo].key == key ? cur->cells[lo].count : 0;
}

static int attn_eval_column(sqlite3_vtab_cursor *base, sqlite3_context *ctx, int col) {
  attn_eval_cursor *cur = (attn_eval_cursor *)base;
  attn_vtab *vtab = (attn_vtab *)base->pVtab;
  int K = cur->K;
  if (vtab->mode == ATTN_EVALUATE) {
    int i = (int)cur->row;
    const nn_class_metrics *m = &cur->metrics[i];
    switch (col) {
    case ATTN_EVALUATE_COL_LABEL:
      sqlite3_result_text(ctx, i < K ? cur->labels[i] : "overall", -1, SQLITE_TRANSIENT);
      break;
    case ATTN_EVALUATE_COL_PRECISION: sqlite3_result_double(ctx, m->precision); break;
    case ATTN_EVALUATE_COL_RECALL: sqlite3_result_double(ctx, m->recall); break;
    case ATTN_EVALUATE_COL_F1: sqlite3_result_double(ctx, m->f1); break;
    case ATTN_EVALUATE_COL_SUPPORT: sqlite3_result_int64(ctx, m->support); break;
    default: break;
    }
    return SQLITE_OK;
  }
  int a = cur->actual_ranks[cur->row / cur->C], p = cur->model_ranks[cur->row % cur->C];
  switch (col) {
  case ATTN_CONFUSION_COL_ACTUAL:
    sqlite3_result_text(ctx, cur->labels[a], -1, SQLITE_TRANSIENT);
    break;
  case ATTN_CONFUSION_COL_PREDICTED:
    sqlite3_result_text(ctx, cur->labels[p], -1, SQLITE_TRANSIENT);
    break;
  case ATTN_CONFUSION_COL_COUNT: sqlite3_result_int64(ctx, attn_eval_count(cur, a, p)); break;
  default: break;
  }
  return SQLITE_OK;
}

static int attn_eval_rowid(sqlite3_vtab_cursor *base, sqlite_int64 *rowid) {
  *rowid = ((attn_eval_cursor *)base)->row + 1;
  return SQLITE_OK;
}

const sqlite3_module attn_eval_module = {
    .iVersion = 0,
    .xCreate = NULL, /* eponymous only */
    .xConnect = attn_eval_connect,
    .xBestIndex = attn_eval_best_index,
    .xDisconnect = attn_vtab_disconnect,
    .xOpen = attn_vtab_open,
    .xClose = attn_eval_close,
    .xFilter = attn_eval_filter,
    .xNext = attn_eval_next,
    .xEof = attn_eval_eof,
    .xColumn = attn_eval_column,
    .xRowid = attn_eval_rowid,
};
