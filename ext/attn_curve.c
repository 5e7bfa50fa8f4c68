/* attn_curve.c -- ROC and precision-recall curves of the deployed model on a labelled query,
 * one class against the rest (BigQuery ML's ML.ROC_CURVE, per class): the table-valued
 * function attn_curve and its picture, attn_curve_svg.
 *
 *   SELECT * FROM attn_curve('news', 'SELECT title, category FROM test_headlines');
 *   --  label | threshold | recall | false_positive_rate | precision | f1 | true_positives |
 *   --  false_positives | true_negatives | false_negatives
 *   SELECT * FROM attn_curve('news', 'SELECT title, category FROM test_headlines', '[0.5, 0.9]');
 *   SELECT writefile('curve.svg', attn_curve_svg('news', 'SELECT title, category FROM t'));
 *
 * For each class of the model (in the model's label order) one row per distinct probability
 * of that class over the query's rows, highest first (engine/curve.c: the points of
 * scikit-learn's roc_curve and precision_recall_curve), or one row per threshold given (a
 * number or a JSON array of numbers from 0 to 1, in the order given). At threshold t the class
 * is predicted for the rows whose probability of it is >= t. The probabilities are the batched
 * inference's (attn_classify_probs), as attn_metrics'. Every label of the query must be one of
 * the model's (an error names the first that is not). Memory: (rows x classes) floats and one
 * curve point per row. Both run a query given as text: direct-only.
 */
#include <math.h>
#include <string.h>

#include "attn_ext.h"
#include "json.h"

#define CURVE_MAX_THRESHOLDS 10000

/* ------------------------------------------------------------------ the probabilities */

typedef struct curve_data {
  attn_model *model;
  int C;
  int64_t N;
  int *y_true;            /* (N) */
  float *probs;           /* (N, C) */
  nn_curve_point *points; /* (N) the current class's points */
  int64_t npoints, positives;
} curve_data;

static void curve_data_free(curve_data *d) {
  attn_model_release(d->model);
  sqlite3_free(d->y_true);
  sqlite3_free(d->probs);
  sqlite3_free(d->points);
  memset(d, 0, sizeof *d);
}

/* The model, every row's true class and probabilities. */
static int curve_read(curve_data *d, attn_conn *conn, attn_interrupt *interrupt, const char *fn,
                      sqlite3_value *name_arg, sqlite3_value *query_arg, char **msg) {
  attn_labelled q;
  int rc = attn_labelled_open(&q, conn, interrupt, fn, ATTN_LABELLED_KNOWN | ATTN_LABELLED_PROBS,
                              name_arg, query_arg, msg);
  if (rc == SQLITE_OK) rc = attn_labelled_read_all(&q, msg);
  if (rc == SQLITE_OK) {
    d->model = q.model, d->y_true = q.y_true, d->probs = q.probs; /* taken */
    q.model = NULL, q.y_true = NULL, q.probs = NULL;
    d->C = nn_model_num_classes(d->model->nn);
    d->N = q.N;
    d->points = sqlite3_malloc64((sqlite3_uint64)d->N * sizeof *d->points);
    if (!d->points) rc = SQLITE_NOMEM;
  }
  attn_labelled_free(&q);
  return rc;
}

/* The points of class c into d->points. */
static int curve_class(curve_data *d, int c, attn_interrupt *interrupt, const char *fn,
                       char **msg) {
  char err[NN_ERR_LEN] = "";
  if (attn_interrupted(interrupt, 1)) {
    *msg = sqlite3_mprintf("%s: interrupted", fn);
    return SQLITE_INTERRUPT;
  }
  int st = nn_curve_class(d->points, &d->npoints, &d->positives, d->probs, d->y_true, d->N, d->C, c,
                          err);
  if (st != NN_OK) return attn_nn_error(st, fn, err, msg);
  return SQLITE_OK;
}

/* The thresholds argument: a number, or a JSON array of 1..CURVE_MAX_THRESHOLDS numbers, each
 * from 0 to 1. *out (sqlite3_malloc'd) and *n. */
static int curve_thresholds(const char *fn, sqlite3_value *v, double **out, int *n, char **msg) {
  const char *usage = "thresholds must be a number from 0 to 1 or a JSON array of them";
  int type = sqlite3_value_numeric_type(v);
  nn_json *doc = NULL;
  char err[NN_ERR_LEN];
  *out = NULL;
  *n = 0;
  if (type == SQLITE_INTEGER || type == SQLITE_FLOAT) {
    double t = sqlite3_value_double(v);
    if (!(t >= 0 && t <= 1)) {
      char got[32];
      *msg = sqlite3_mprintf("%s: %s, got %s", fn, usage, attn_number_text(got, t));
      return SQLITE_ERROR;
    }
    *out = sqlite3_malloc64(sizeof **out);
    if (!*out) return SQLITE_NOMEM;
    **out = t == 0 ? 0.0 : t; /* -0.0 is 0: the threshold column never says -0.0 */
    *n = 1;
    return SQLITE_OK;
  }
  if (type != SQLITE_TEXT) {
    *msg = sqlite3_mprintf("%s: %s, got %s", fn, usage, type == SQLITE_NULL ? "NULL" : "a BLOB");
    return SQLITE_ERROR;
  }
  const char *text = (const char *)sqlite3_value_text(v);
  int len = sqlite3_value_bytes(v);
  if (!text) return SQLITE_NOMEM;
  if (len > CURVE_MAX_THRESHOLDS * 64) { /* not parsed: the parser's memory grows with it */
    *msg = sqlite3_mprintf("%s: thresholds must hold 1 to %d numbers, got a text of %d bytes", fn,
                           CURVE_MAX_THRESHOLDS, len);
    return SQLITE_ERROR;
  }
  int st = nn_json_parse(&doc, text, (size_t)len, &attn_mem, err);
  if (st == NN_NOMEM) return SQLITE_NOMEM;
  if (st != NN_OK || doc->type != NN_JSON_ARRAY) {
    int cut = attn_svg_prefix_bytes(text, len, 40);
    *msg = sqlite3_mprintf("%s: %s, got '%.*s%s'", fn, usage, cut, text, cut < len ? "..." : "");
    nn_json_free(doc);
    return SQLITE_ERROR;
  }
  size_t count = nn_json_count(doc);
  if (count < 1 || count > CURVE_MAX_THRESHOLDS) {
    *msg = sqlite3_mprintf("%s: thresholds must hold 1 to %d numbers, got %lld", fn,
                           CURVE_MAX_THRESHOLDS, (long long)count);
    nn_json_free(doc);
    return SQLITE_ERROR;
  }
  *out = sqlite3_malloc64(count * sizeof **out);
  if (!*out) {
    nn_json_free(doc);
    return SQLITE_NOMEM;
  }
  for (size_t i = 0; i < count; i++) {
    const nn_json *item = nn_json_at(doc, i);
    if (item->type != NN_JSON_NUMBER || !(item->number >= 0 && item->number <= 1)) {
      char got[32];
      if (item->type == NN_JSON_NUMBER)
        *msg = sqlite3_mprintf("%s: %s, got %s (item %lld)", fn, usage,
                               attn_number_text(got, item->number), (long long)i + 1);
      else
        *msg = sqlite3_mprintf("%s: %s, got a JSON %s (item %lld)", fn, usage,
                               nn_json_type_name(item->type), (long long)i + 1);
      sqlite3_free(*out);
      *out = NULL;
      nn_json_free(doc);
      return SQLITE_ERROR;
    }
    (*out)[i] = item->number == 0 ? 0.0 : item->number;
  }
  *n = (int)count;
  nn_json_free(doc);
  return SQLITE_OK;
}

/* ------------------------------------------------------------------ attn_curve (table) */

typedef struct attn_curve_cursor {
  sqlite3_vtab_cursor base;
  curve_data d;
  attn_interrupt interrupt;
  double *thresholds; /* given, or NULL: every point */
  int nthresholds;
  int c;              /* the class of the current row; C at the end */
  int64_t row, nrows; /* in the class */
  int64_t rowid;
  int64_t tp, fp; /* at the current row */
  double threshold;
} attn_curve_cursor;

/* Columns; the arguments are the hidden columns at the end. */
enum {
  ATTN_CURVE_COL_LABEL,
  ATTN_CURVE_COL_THRESHOLD,
  ATTN_CURVE_COL_RECALL,
  ATTN_CURVE_COL_FALSE_POSITIVE_RATE,
  ATTN_CURVE_COL_PRECISION,
  ATTN_CURVE_COL_F1,
  ATTN_CURVE_COL_TRUE_POSITIVES,
  ATTN_CURVE_COL_FALSE_POSITIVES,
  ATTN_CURVE_COL_TRUE_NEGATIVES,
  ATTN_CURVE_COL_FALSE_NEGATIVES,
  ATTN_CURVE_COL_ARG_NAME,
  ATTN_CURVE_COL_ARG_QUERY,
  ATTN_CURVE_COL_ARG_THRESHOLDS
};
static const char attn_curve_schema[] =
    "CREATE TABLE x(label TEXT, threshold REAL, recall REAL, false_positive_rate REAL, "
    "precision REAL, f1 REAL, true_positives INTEGER, false_positives INTEGER, "
    "true_negatives INTEGER, false_negatives INTEGER, arg_name HIDDEN, arg_query HIDDEN, "
    "arg_thresholds HIDDEN)";

static int attn_curve_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                              sqlite3_vtab **out, char **errmsg) {
  return attn_vtab_connect(db, attn_curve_schema, SQLITE_VTAB_DIRECTONLY, /* runs a query */
                           aux, 0, sizeof(attn_curve_cursor), out);
}

static int attn_curve_best_index(sqlite3_vtab *vtab, sqlite3_index_info *info) {
  return attn_vtab_best_index(vtab, info, ATTN_CURVE_COL_ARG_NAME, 3, 2,
                              "attn_curve: expected 2 or 3 arguments: attn_curve(name, query[, "
                              "thresholds])");
}

static void attn_curve_reset(attn_curve_cursor *cur) {
  curve_data_free(&cur->d);
  attn_interrupt_end(&cur->interrupt);
  sqlite3_free(cur->thresholds);
  cur->thresholds = NULL;
  cur->nthresholds = 0;
  cur->c = 0;
  cur->row = cur->nrows = cur->rowid = 0;
}

static int attn_curve_close(sqlite3_vtab_cursor *base) {
  attn_curve_reset((attn_curve_cursor *)base);
  sqlite3_free(base);
  return SQLITE_OK;
}

/* The counts of the current row. */
static void attn_curve_point(attn_curve_cursor *cur) {
  if (cur->thresholds) {
    cur->threshold = cur->thresholds[cur->row];
    nn_curve_at(cur->d.points, cur->d.npoints, cur->threshold, &cur->tp, &cur->fp);
  } else {
    const nn_curve_point *p = &cur->d.points[cur->row];
    cur->threshold = p->threshold, cur->tp = p->tp, cur->fp = p->fp;
  }
}

/* Enter class c (its points and rows), or the end when c == C. */
static int attn_curve_enter(attn_curve_cursor *cur, int c, char **msg) {
  cur->c = c;
  cur->row = cur->nrows = 0;
  if (c >= cur->d.C) return SQLITE_OK;
  int rc = curve_class(&cur->d, c, &cur->interrupt, "attn_curve", msg);
  if (rc != SQLITE_OK) return rc;
  cur->nrows = cur->thresholds ? cur->nthresholds : cur->d.npoints;
  if (cur->nrows > 0) attn_curve_point(cur);
  return SQLITE_OK;
}

static int attn_curve_filter(sqlite3_vtab_cursor *base, int idx_num, const char *idx_str, int argc,
                             sqlite3_value **argv) {
  attn_curve_cursor *cur = (attn_curve_cursor *)base;
  attn_vtab *vtab = (attn_vtab *)base->pVtab;
  const char *fn = "attn_curve";
  char *msg = NULL;
  attn_curve_reset(cur);
  cur->interrupt.db = attn_conn_db(vtab->conn);
  int rc = SQLITE_OK;
  if (attn_arg_given(idx_num, 2))
    rc = curve_thresholds(fn, argv[argc - 1], &cur->thresholds, &cur->nthresholds, &msg);
  if (rc == SQLITE_OK)
    rc = curve_read(&cur->d, vtab->conn, &cur->interrupt, fn, argc > 0 ? argv[0] : NULL,
                    argc > 1 ? argv[1] : NULL, &msg);
  if (rc == SQLITE_OK) rc = attn_curve_enter(cur, 0, &msg);
  if (rc != SQLITE_OK) {
    attn_curve_reset(cur);
    return attn_vtab_fail(base->pVtab, rc, msg, fn);
  }
  return SQLITE_OK;
}

static int attn_curve_next(sqlite3_vtab_cursor *base) {
  attn_curve_cursor *cur = (attn_curve_cursor *)base;
  char *msg = NULL;
  cur->rowid++;
  if (++cur->row < cur->nrows) {
    attn_curve_point(cur);
    return SQLITE_OK;
  }
  int rc = attn_curve_enter(cur, cur->c + 1, &msg);
  if (rc != SQLITE_OK) {
    cur->c = cur->d.C; /* at the end */
    return attn_vtab_fail(base->pVtab, rc, msg, "attn_curve");
  }
  return SQLITE_OK;
}

static int attn_curve_eof(sqlite3_vtab_cursor *base) {
  attn_curve_cursor *cur = (attn_curve_cursor *)base;
  return cur->c >= cur->d.C || cur->row >= cur->nrows;
}

static void result_ratio(sqlite3_context *ctx, int64_t numerator, int64_t denominator) {
  if (denominator > 0) sqlite3_result_double(ctx, (double)numerator / (double)denominator);
  /* else NULL: undefined */
}

static int attn_curve_column(sqlite3_vtab_cursor *base, sqlite3_context *ctx, int col) {
  attn_curve_cursor *cur = (attn_curve_cursor *)base;
  int64_t tp = cur->tp, fp = cur->fp, positives = cur->d.positives;
  int64_t negatives = cur->d.N - positives, fn = positives - tp, tn = negatives - fp;
  switch (col) {
  case ATTN_CURVE_COL_LABEL:
    sqlite3_result_text(ctx, nn_model_label(cur->d.model->nn, cur->c), -1, SQLITE_TRANSIENT);
    break;
  case ATTN_CURVE_COL_THRESHOLD: sqlite3_result_double(ctx, cur->threshold); break;
  case ATTN_CURVE_COL_RECALL: result_ratio(ctx, tp, positives); break;
  case ATTN_CURVE_COL_FALSE_POSITIVE_RATE: result_ratio(ctx, fp, negatives); break;
  case ATTN_CURVE_COL_PRECISION: result_ratio(ctx, tp, tp + fp); break;
  case ATTN_CURVE_COL_F1: /* 2 P R / (P + R) = 2 tp / (2 tp + fp + fn) */
    if (positives > 0) result_ratio(ctx, 2 * tp, 2 * tp + fp + fn);
    break;
  case ATTN_CURVE_COL_TRUE_POSITIVES: sqlite3_result_int64(ctx, tp); break;
  case ATTN_CURVE_COL_FALSE_POSITIVES: sqlite3_result_int64(ctx, fp); break;
  case ATTN_CURVE_COL_TRUE_NEGATIVES: sqlite3_result_int64(ctx, tn); break;
  case ATTN_CURVE_COL_FALSE_NEGATIVES: sqlite3_result_int64(ctx, fn); break;
  default: break;
  }
  return SQLITE_OK;
}

static int attn_curve_rowid(sqlite3_vtab_cursor *base, sqlite_int64 *rowid) {
  *rowid = ((attn_curve_cursor *)base)->rowid + 1;
  return SQLITE_OK;
}

const sqlite3_module attn_curve_module = {
    .iVersion = 0,
    .xCreate = NULL, /* eponymous only */
    .xConnect = attn_curve_connect,
    .xBestIndex = attn_curve_best_index,
    .xDisconnect = attn_vtab_disconnect,
    .xOpen = attn_vtab_open,
    .xClose = attn_curve_close,
    .xFilter = attn_curve_filter,
    .xNext = attn_curve_next,
    .xEof = attn_curve_eof,
    .xColumn = attn_curve_column,
    .xRowid = attn_curve_rowid,
};

/* ------------------------------------------------------------------ attn_curve_svg */

#define CURVE_SVG_MAX_CLASSES 20
#define CURVE_LABEL_CHARS 24

/* Ten distinct colours (Tableau 10); classes past ten are dashed. */
static const char *const curve_colors[10] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                             "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

typedef struct curve_panel {
  double x, y, w, h;
} curve_panel;

static void curve_axes(sqlite3_str *out, const curve_panel *p, const char *title,
                       const char *xlabel, const char *ylabel) {
  sqlite3_str_appendf(out,
                      "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                      "fill=\"#fafafa\" stroke=\"#888888\"/>\n",
                      p->x, p->y, p->w, p->h);
  for (int i = 0; i <= 5; i++) {
    double v = i / 5.0, xx = p->x + v * p->w, yy = p->y + p->h - v * p->h;
    sqlite3_str_appendf(out,
                        "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" "
                        "stroke=\"#e0e0e0\"/><text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" "
                        "text-anchor=\"end\" fill=\"#333333\">%.1f</text>\n",
                        p->x, p->x + p->w, yy, yy, p->x - 5, yy + 4, v);
    sqlite3_str_appendf(out,
                        "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" "
                        "stroke=\"#888888\"/><text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" "
                        "text-anchor=\"middle\" fill=\"#333333\">%.1f</text>\n",
                        xx, xx, p->y + p->h, p->y + p->h + 4, xx, p->y + p->h + 16, v);
  }
  sqlite3_str_appendf(out,
                      "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\" "
                      "fill=\"#333333\">%s</text>\n",
                      p->x + p->w / 2, p->y + p->h + 32, xlabel);
  sqlite3_str_appendf(out,
                      "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" font-weight=\"bold\" "
                      "fill=\"#1a1a1a\">%s</text>\n",
                      p->x, p->y - 8, title);
  sqlite3_str_appendf(out,
                      "<text transform=\"translate(%.1f %.1f) rotate(-90)\" font-size=\"12\" "
                      "text-anchor=\"middle\" fill=\"#333333\">%s</text>\n",
                      p->x - 38, p->y + p->h / 2, ylabel);
}

/* A polyline through (x, y) in [0, 1]^2 that keeps, of the points falling in one pixel column,
 * the first, the lowest, the highest and the last (in their order): the same picture to a
 * pixel with at most 4 points a column, whatever the number of rows. */
typedef struct curve_xy {
  double x, y;
} curve_xy;
typedef struct curve_line {
  sqlite3_str *out;
  const curve_panel *p;
  int column, in_column; /* the pixel column gathered, and whether one is */
  curve_xy first, low, high, last;
  int low_before_high;
  double last_x, last_y; /* the last point written */
  int points;
} curve_line;

static void curve_line_begin(curve_line *l, sqlite3_str *out, const curve_panel *p,
                             const char *color, int dashed) {
  memset(l, 0, sizeof *l);
  l->out = out, l->p = p;
  sqlite3_str_appendf(out,
                      "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\"%s "
                      "points=\"",
                      color, dashed ? " stroke-dasharray=\"6,3\"" : "");
}

static void curve_line_write(curve_line *l, curve_xy q) {
  double px = round(q.x * 10) / 10, py = round(q.y * 10) / 10;
  if (l->points > 0 && px == l->last_x && py == l->last_y) return;
  sqlite3_str_appendf(l->out, "%s%.1f,%.1f", l->points ? " " : "", px, py);
  l->last_x = px, l->last_y = py;
  l->points++;
}

static void curve_line_flush(curve_line *l) {
  if (!l->in_column) return;
  curve_line_write(l, l->first);
  curve_line_write(l, l->low_before_high ? l->low : l->high);
  curve_line_write(l, l->low_before_high ? l->high : l->low);
  curve_line_write(l, l->last);
  l->in_column = 0;
}

static void curve_line_to(curve_line *l, double x, double y) {
  curve_xy q = {l->p->x + x * l->p->w, l->p->y + l->p->h - y * l->p->h};
  int column = (int)floor(q.x);
  if (l->in_column && column == l->column) {
    if (q.y < l->low.y) l->low = q, l->low_before_high = 0; /* screen y: low is up */
    if (q.y > l->high.y) l->high = q, l->low_before_high = 1;
    l->last = q;
    return;
  }
  curve_line_flush(l);
  l->in_column = 1, l->column = column;
  l->first = l->low = l->high = l->last = q;
  l->low_before_high = 1;
}

static void curve_line_end(curve_line *l) {
  curve_line_flush(l);
  sqlite3_str_appendall(l->out, "\"/>\n");
}

void attn_curve_svg_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  const char *fn = "attn_curve_svg";
  attn_conn *conn = sqlite3_user_data(ctx);
  curve_data d;
  attn_interrupt interrupt = {attn_conn_db(conn), NULL, 0};
  char *msg = NULL;
  memset(&d, 0, sizeof d);
  int rc = curve_read(&d, conn, &interrupt, fn, argv[0], argv[1], &msg);
  if (rc != SQLITE_OK) goto error;
  int C = d.C, shown = C < CURVE_SVG_MAX_CLASSES ? C : CURVE_SVG_MAX_CLASSES;
  const int W = 960, legend_rows = (shown + 1) / 2;
  const int H = 430 + 18 * legend_rows;
  curve_panel roc = {80, 80, 340, 300}, pr = {560, 80, 340, 300};
  sqlite3_str *out = sqlite3_str_new(NULL);
  char *title = sqlite3_mprintf("ROC and precision-recall curves of model %s version %lld",
                                d.model->name, (long long)d.model->version);
  attn_svg_begin(out, W, H, title, title ? -1 : 0);
  sqlite3_free(title);
  sqlite3_str_appendall(out, "<text x=\"20\" y=\"30\" font-size=\"18\" font-weight=\"bold\" "
                             "fill=\"#1a1a1a\">Curves of model ");
  attn_svg_text(out, d.model->name, (int)strlen(d.model->name), 40);
  sqlite3_str_appendf(out, " version %lld on %lld rows</text>\n", (long long)d.model->version,
                      (long long)d.N);
  sqlite3_str_appendf(out,
                      "<text x=\"20\" y=\"50\" font-size=\"12\" fill=\"#555555\">each class "
                      "against the rest, over every threshold of its probability%s</text>\n",
                      shown < C ? "; the first 20 classes" : "");
  curve_axes(out, &roc, "ROC", "false positive rate", "true positive rate (recall)");
  curve_axes(out, &pr, "Precision-recall", "recall", "precision");
  sqlite3_str_appendf(out,
                      "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                      "stroke=\"#bbbbbb\" stroke-dasharray=\"3,3\"/>\n",
                      roc.x, roc.y + roc.h, roc.x + roc.w, roc.y);
  for (int c = 0; c < shown; c++) {
    rc = curve_class(&d, c, &interrupt, fn, &msg);
    if (rc != SQLITE_OK) {
      sqlite3_free(sqlite3_str_finish(out));
      goto error;
    }
    const char *color = curve_colors[c % 10];
    int dashed = c >= 10;
    double P = (double)d.positives, Nn = (double)(d.N - d.positives);
    curve_line line;
    if (P > 0 && Nn > 0) { /* ROC from (0, 0), as roc_curve */
      curve_line_begin(&line, out, &roc, color, dashed);
      curve_line_to(&line, 0, 0);
      for (int64_t k = 0; k < d.npoints; k++)
        curve_line_to(&line, d.points[k].fp / Nn, d.points[k].tp / P);
      curve_line_end(&line);
    }
    if (P > 0) { /* precision-recall to (0, 1) at the top threshold, as precision_recall_curve */
      curve_line_begin(&line, out, &pr, color, dashed);
      for (int64_t k = d.npoints - 1; k >= 0; k--)
        curve_line_to(&line, d.points[k].tp / P,
                      (double)d.points[k].tp / (double)(d.points[k].tp + d.points[k].fp));
      curve_line_to(&line, 0, 1);
      curve_line_end(&line);
    }
    double auc = nn_curve_roc_auc(d.points, d.npoints);
    double ap = nn_curve_average_precision(d.points, d.npoints);
    double lx = 80 + 480 * (c % 2), ly = 440 + 18 * (c / 2);
    sqlite3_str_appendf(out,
                        "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" "
                        "stroke=\"%s\" stroke-width=\"2\"%s/><text x=\"%.1f\" y=\"%.1f\" "
                        "font-size=\"11\" fill=\"#333333\">",
                        lx, lx + 20, ly, ly, color, dashed ? " stroke-dasharray=\"6,3\"" : "",
                        lx + 25, ly + 4);
    const char *label = nn_model_label(d.model->nn, c);
    attn_svg_text(out, label, (int)strlen(label), CURVE_LABEL_CHARS);
    if (isfinite(auc)) sqlite3_str_appendf(out, ": AUC %.4f", auc);
    else sqlite3_str_appendall(out, ": AUC undefined");
    if (isfinite(ap)) sqlite3_str_appendf(out, ", average precision %.4f", ap);
    else sqlite3_str_appendall(out, ", no rows of the class");
    sqlite3_str_appendf(out, " (%lld rows)</text>\n", (long long)d.positives);
  }
  curve_data_free(&d);
  attn_interrupt_end(&interrupt);
  attn_svg_result(ctx, out);
  return;
error:
  curve_data_free(&d);
  attn_interrupt_end(&interrupt);
  attn_result_error(ctx, rc, msg, fn);
}
