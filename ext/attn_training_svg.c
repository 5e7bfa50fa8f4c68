/* attn_training_svg.c -- the training curves of a model version as an SVG picture: the SQL
 * function attn_training_svg (not to be confused with attn_curve, the ROC and precision-recall
 * points of attn_curve.c).
 *
 *   SELECT writefile('training.svg', attn_training_svg('news'));      -- the deployed version
 *   SELECT writefile('training.svg', attn_training_svg('news', 2));   -- version 2
 *   SELECT writefile('training.svg', attn_training_svg('news@2'));    -- the same
 *   -- train and validation loss, validation accuracy and F1 per epoch (attn_training_log),
 *   -- learning-rate drops marked, the kept epoch circled on the figure that chose it
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn_ext.h"
#include "json.h"

/* ------------------------------------------------------------------ training curves */

typedef struct curve_point {
  double epoch, train_loss, val_loss, val_accuracy, val_f1, lr;
} curve_point;

/* Round numbers for an axis from lo to hi: first tick, step, count. */
static void nice_ticks(double lo, double hi, double *first, double *step, int *count) {
  double range = hi - lo;
  if (!(range > 0)) range = fabs(hi) > 0 ? fabs(hi) : 1;
  double raw = range / 5, mag = pow(10, floor(log10(raw))), f = raw / mag;
  double s = (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
  *first = ceil(lo / s - 1e-9) * s;
  *step = s;
  *count = (int)floor((hi - *first) / s + 1e-9) + 1;
  if (*count < 1) *count = 1;
  if (*count > 12) *count = 12;
}

typedef struct panel {
  double x, y, w, h;     /* plot area */
  double x0, x1, y0, y1; /* data range */
} panel;

static double px(const panel *p, double v) { return p->x + (v - p->x0) / (p->x1 - p->x0) * p->w; }
static double py(const panel *p, double v) {
  return p->y + p->h - (v - p->y0) / (p->y1 - p->y0) * p->h;
}

static void draw_axes(sqlite3_str *out, const panel *p, const char *title, const char *ylabel) {
  double first, step;
  int count;
  sqlite3_str_appendf(out,
                      "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                      "fill=\"#fafafa\" stroke=\"#888888\"/>\n",
                      p->x, p->y, p->w, p->h);
  nice_ticks(p->y0, p->y1, &first, &step, &count);
  for (int i = 0; i < count; i++) {
    double v = first + i * step, yy = py(p, v);
    if (yy < p->y - 0.5 || yy > p->y + p->h + 0.5) continue;
    sqlite3_str_appendf(out,
                        "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" "
                        "stroke=\"#e0e0e0\"/><text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" "
                        "text-anchor=\"end\" fill=\"#333333\">%g</text>\n",
                        p->x, p->x + p->w, yy, yy, p->x - 5, yy + 4,
                        fabs(v) < step * 1e-6 ? 0.0 : v);
  }
  nice_ticks(p->x0, p->x1, &first, &step, &count);
  if (step < 1) step = 1, first = ceil(p->x0), count = (int)(p->x1 - first) + 1;
  for (int i = 0; i < count && i < 30; i++) {
    double v = first + i * step, xx = px(p, v);
    if (xx < p->x - 0.5 || xx > p->x + p->w + 0.5) continue;
    sqlite3_str_appendf(out,
                        "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" "
                        "stroke=\"#888888\"/><text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" "
                        "text-anchor=\"middle\" fill=\"#333333\">%g</text>\n",
                        xx, xx, p->y + p->h, p->y + p->h + 4, xx, p->y + p->h + 16, v);
  }
  sqlite3_str_appendf(out,
                      "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\" "
                      "fill=\"#333333\">epoch</text>\n",
                      p->x + p->w / 2, p->y + p->h + 32);
  sqlite3_str_appendf(out,
                      "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" font-weight=\"bold\" "
                      "fill=\"#1a1a1a\">%s</text>\n",
                      p->x, p->y - 8, title);
  sqlite3_str_appendf(out,
                      "<text transform=\"translate(%.1f %.1f) rotate(-90)\" font-size=\"12\" "
                      "text-anchor=\"middle\" fill=\"#333333\">%s</text>\n",
                      p->x - 44, p->y + p->h / 2, ylabel);
}

/* A polyline (segments broken at missing values) with dots; field: offset into curve_point. */
static void draw_series(sqlite3_str *out, const panel *p, const curve_point *pts, int n,
                        size_t field, const char *color, const char *dash) {
  int open = 0;
  for (int i = 0; i < n; i++) {
    double v = *(const double *)((const char *)&pts[i] + field);
    if (!isfinite(v)) {
      if (open) sqlite3_str_appendall(out, "\"/>\n");
      open = 0;
      continue;
    }
    if (!open)
      sqlite3_str_appendf(out,
                          "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s%s%s "
                          "points=\"",
                          color, dash ? " stroke-dasharray=\"" : "", dash ? dash : "",
                          dash ? "\"" : "");
    sqlite3_str_appendf(out, "%s%.1f,%.1f", open ? " " : "", px(p, pts[i].epoch), py(p, v));
    open = 1;
  }
  if (open) sqlite3_str_appendall(out, "\"/>\n");
  if (n <= 60)
    for (int i = 0; i < n; i++) {
      double v = *(const double *)((const char *)&pts[i] + field);
      if (isfinite(v))
        sqlite3_str_appendf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>\n",
                            px(p, pts[i].epoch), py(p, v), color);
    }
}

static void legend_entry(sqlite3_str *out, double x, double y, const char *color, const char *dash,
                         const char *text) {
  sqlite3_str_appendf(out,
                      "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                      "stroke-width=\"2\"%s%s%s/><text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" "
                      "fill=\"#333333\">%s</text>\n",
                      x, x + 20, y, y, color, dash ? " stroke-dasharray=\"" : "", dash ? dash : "",
                      dash ? "\"" : "", x + 25, y + 4, text);
}

static void range_of(const curve_point *pts, int n, size_t f1, size_t f2, double *lo, double *hi) {
  *lo = INFINITY, *hi = -INFINITY;
  for (int i = 0; i < n; i++) {
    double a = *(const double *)((const char *)&pts[i] + f1);
    double b = *(const double *)((const char *)&pts[i] + f2);
    if (isfinite(a)) *lo = fmin(*lo, a), *hi = fmax(*hi, a);
    if (isfinite(b)) *lo = fmin(*lo, b), *hi = fmax(*hi, b);
  }
  if (!isfinite(*lo)) *lo = 0, *hi = 1;
  if (*hi - *lo < 1e-9) *lo -= 0.5, *hi += 0.5;
}

/* A value of the log to draw, NaN (left out) when it is NULL, not a number, or so large that the
 * axes' arithmetic would overflow (a log this extension wrote never comes near). */
#define CURVES_MAX_ABS 1e15
static double column_or_nan(sqlite3_stmt *stmt, int col) {
  int type = sqlite3_column_type(stmt, col);
  if (type != SQLITE_INTEGER && type != SQLITE_FLOAT) return NAN;
  double v = sqlite3_column_double(stmt, col);
  return isfinite(v) && fabs(v) <= CURVES_MAX_ABS ? v : NAN;
}

#define CURVES_MAX_EPOCHS 100000

/* The kept epoch of a version and the figure that chose it, from its summary (0: unknown). */
typedef struct curves_kept {
  double epoch;
  char monitor[16];
} curves_kept;

static void kept_read(curves_kept *kept, const char *metrics) {
  nn_json *doc = NULL;
  char err[NN_ERR_LEN];
  if (nn_json_parse(&doc, metrics, strlen(metrics), &attn_mem, err) != NN_OK) return;
  const nn_json *v = nn_json_get(doc, "best_epoch");
  if (v && v->type == NN_JSON_NUMBER && v->number > 0) kept->epoch = v->number;
  v = nn_json_get(doc, "monitor");
  if (v && v->type == NN_JSON_STRING) {
    const char *known[] = {"val_loss", "val_f1", "val_accuracy"};
    for (int i = 0; i < 3; i++)
      if (!strcmp(v->str, known[i])) strcpy(kept->monitor, known[i]);
  }
  nn_json_free(doc);
}

/* The version of `name` to draw into *version: `ref_version` (from 'name@version') or the second
 * argument, checked to exist, else the deployed one (the newest when none is). Errors:
 * SQLITE_ERROR with *msg. */
static int training_version(attn_conn *conn, const char *fn, const char *name, int64_t ref_version,
                            int argc, sqlite3_value **argv, sqlite3_int64 *version, char **msg) {
  sqlite3 *db = attn_conn_db(conn);
  sqlite3_stmt *stmt = NULL;
  int rc = SQLITE_ERROR;
  *version = ref_version;
  if (*version >= 0 || (argc > 1 && sqlite3_value_type(argv[1]) != SQLITE_NULL)) {
    if (*version < 0 && sqlite3_value_numeric_type(argv[1]) != SQLITE_INTEGER) {
      *msg = sqlite3_mprintf("%s: the version must be an integer, got '%s'", fn,
                             sqlite3_value_text(argv[1]));
      goto done;
    }
    if (*version < 0) *version = sqlite3_value_int64(argv[1]);
    if (sqlite3_prepare_v2(db, "SELECT 1 FROM main.attn_models WHERE name = ?1 AND version = ?2",
                           -1, &stmt, NULL) != SQLITE_OK) {
      *msg =
          sqlite3_mprintf("%s: no model named '%s' (this database has no model store)", fn, name);
      goto done;
    }
    sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(stmt, 2, *version);
    if (sqlite3_step(stmt) != SQLITE_ROW) {
      *msg = sqlite3_mprintf("%s: model '%s' has no version %lld", fn, name, (long long)*version);
      goto done;
    }
  } else {
    if (sqlite3_prepare_v2(db,
                           "SELECT version FROM main.attn_models WHERE name = ?1 "
                           "ORDER BY deployed DESC, version DESC LIMIT 1",
                           -1, &stmt, NULL) != SQLITE_OK) {
      *msg =
          sqlite3_mprintf("%s: no model named '%s' (this database has no model store)", fn, name);
      goto done;
    }
    sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
    if (sqlite3_step(stmt) != SQLITE_ROW) {
      char *hint = attn_conn_suggest_name(conn, name);
      *msg = sqlite3_mprintf("%s: no model named '%s'%s", fn, name, hint ? hint : "");
      sqlite3_free(hint);
      goto done;
    }
    *version = sqlite3_column_int64(stmt, 0);
  }
  rc = SQLITE_OK;
done:
  sqlite3_finalize(stmt);
  return rc;
}

/* The epoch the training kept, and by which figure, from the version's summary
 * (attn_models.metrics); kept stays as it is when there is none. */
static void training_kept(sqlite3 *db, const char *name, sqlite3_int64 version, curves_kept *kept) {
  sqlite3_stmt *stmt = NULL;
  if (sqlite3_prepare_v2(db,
                         "SELECT metrics FROM main.attn_models WHERE name = ?1 AND version = ?2",
                         -1, &stmt, NULL) == SQLITE_OK) {
    sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(stmt, 2, version);
    if (sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_type(stmt, 0) == SQLITE_TEXT)
      kept_read(kept, (const char *)sqlite3_column_text(stmt, 0));
  }
  sqlite3_finalize(stmt);
}

/* The version's rows of attn_training_log, by epoch, into *pts (sqlite3_malloc'd, the caller
 * frees it, also on error) and *n: at most CURVES_MAX_EPOCHS, rows without an epoch left out.
 * Errors: SQLite code, *msg (NULL when out of memory). */
static int training_log_read(sqlite3 *db, const char *fn, const char *name, sqlite3_int64 version,
                             curve_point **pts, int *n, char **msg) {
  sqlite3_stmt *stmt = NULL;
  int rc, cap = 0;
  if (sqlite3_prepare_v2(db,
                         "SELECT epoch, train_loss, val_loss, val_accuracy, val_f1, lr "
                         "FROM main.attn_training_log WHERE name = ?1 AND version = ?2 "
                         "ORDER BY epoch",
                         -1, &stmt, NULL) != SQLITE_OK) {
    *msg = sqlite3_mprintf("%s: cannot read attn_training_log: %s", fn, sqlite3_errmsg(db));
    return SQLITE_ERROR;
  }
  sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
  sqlite3_bind_int64(stmt, 2, version);
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    if (*n == CURVES_MAX_EPOCHS) break;
    if (*n == cap) {
      cap = cap ? 2 * cap : 64;
      curve_point *p = sqlite3_realloc64(*pts, (sqlite3_uint64)cap * sizeof *p);
      if (!p) {
        sqlite3_finalize(stmt);
        return SQLITE_NOMEM;
      }
      *pts = p;
    }
    curve_point *p = &(*pts)[(*n)++];
    p->epoch = column_or_nan(stmt, 0);
    p->train_loss = column_or_nan(stmt, 1);
    p->val_loss = column_or_nan(stmt, 2);
    p->val_accuracy = column_or_nan(stmt, 3);
    p->val_f1 = column_or_nan(stmt, 4);
    p->lr = column_or_nan(stmt, 5);
    if (!isfinite(p->epoch)) (*n)--;
  }
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    *msg = sqlite3_mprintf("%s: cannot read attn_training_log: %s", fn, sqlite3_errmsg(db));
    sqlite3_finalize(stmt);
    return SQLITE_ERROR;
  }
  sqlite3_finalize(stmt);
  return SQLITE_OK;
}

/* Learning-rate drops: on both panels, a dashed line at the first epoch with the lower rate. */
static void draw_lr_drops(sqlite3_str *out, const panel *loss, const panel *metric,
                          const curve_point *pts, int n) {
  int drops = 0;
  for (int i = 1; i < n; i++) {
    if (!(isfinite(pts[i].lr) && isfinite(pts[i - 1].lr) && pts[i].lr < pts[i - 1].lr)) continue;
    const panel *ps[2] = {loss, metric};
    for (int k = 0; k < 2; k++) {
      double xx = px(ps[k], pts[i].epoch);
      sqlite3_str_appendf(out,
                          "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" "
                          "stroke=\"#7b3294\" stroke-width=\"1.2\" stroke-dasharray=\"5,3\"/>"
                          "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" fill=\"#7b3294\" "
                          "text-anchor=\"%s\">lr %g</text>\n",
                          xx, xx, ps[k]->y, ps[k]->y + ps[k]->h,
                          xx > ps[k]->x + ps[k]->w - 60 ? xx - 3 : xx + 3,
                          ps[k]->y + 12 + 11 * (drops % 3),
                          xx > ps[k]->x + ps[k]->w - 60 ? "end" : "start", pts[i].lr);
    }
    drops++;
  }
}

/* The kept epoch (the weights that were saved), circled on the figure that chose it: the
 * summary's best_epoch and monitor. Without a summary (a log written elsewhere), the lowest
 * validation loss, which is what the monitor picks by default without a validation F1. Returns
 * the index of the circled point (-1: none) and in *monitor the figure to name in the legend
 * ("": none). */
static int draw_kept(sqlite3_str *out, const panel *loss, const panel *metric,
                     const curve_point *pts, int n, const curves_kept *kept, const char **monitor) {
  int best = -1;
  for (int i = 0; i < n && kept->epoch > 0; i++)
    if (pts[i].epoch == kept->epoch) best = i;
  *monitor = kept->monitor;
  if (best < 0) {
    *monitor = "val_loss";
    for (int i = 0; i < n; i++)
      if (isfinite(pts[i].val_loss) && (best < 0 || pts[i].val_loss < pts[best].val_loss)) best = i;
  }
  const panel *mark_panel = loss;
  double mark_y = NAN;
  if (best >= 0) {
    if (!strcmp(*monitor, "val_f1")) mark_panel = metric, mark_y = pts[best].val_f1;
    else if (!strcmp(*monitor, "val_accuracy"))
      mark_panel = metric, mark_y = pts[best].val_accuracy;
    else mark_y = pts[best].val_loss;
    if (!isfinite(mark_y)) /* no validation: the last epoch is kept, marked on its train loss */
      mark_panel = loss, mark_y = pts[best].train_loss, *monitor = "";
    if (isfinite(mark_y))
      sqlite3_str_appendf(out,
                          "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"6\" fill=\"none\" "
                          "stroke=\"#d62728\" stroke-width=\"1.5\"/>\n",
                          px(mark_panel, pts[best].epoch), py(mark_panel, mark_y));
    else best = -1;
  }
  return best;
}

/* The picture of n >= 1 points: loss on the left, validation accuracy and F1 on the right, the
 * learning-rate drops, the kept epoch and the legend. Returns the SVG being written, for
 * attn_svg_result (which reports an out-of-memory sqlite3_str). */
static sqlite3_str *training_draw(const char *name, sqlite3_int64 version, const curve_point *pts,
                                  int n, const curves_kept *kept) {
  const int W = 960, H = 400;
  panel loss = {80, 70, 340, 250, pts[0].epoch, pts[n - 1].epoch, 0, 1};
  panel metric = {560, 70, 340, 250, pts[0].epoch, pts[n - 1].epoch, 0, 1};
  if (loss.x1 - loss.x0 < 1)
    loss.x0 -= 0.5, loss.x1 += 0.5, metric.x0 = loss.x0, metric.x1 = loss.x1;
  double lo, hi;
  range_of(pts, n, offsetof(curve_point, train_loss), offsetof(curve_point, val_loss), &lo, &hi);
  double pad = (hi - lo) * 0.06;
  loss.y0 = lo - pad < 0 && lo >= 0 ? 0 : lo - pad;
  loss.y1 = hi + pad;
  range_of(pts, n, offsetof(curve_point, val_accuracy), offsetof(curve_point, val_f1), &lo, &hi);
  pad = (hi - lo) * 0.06;
  metric.y0 = lo - pad;
  metric.y1 = hi + pad > 1 && hi <= 1 ? 1 : hi + pad;

  sqlite3_str *out = sqlite3_str_new(NULL);
  char *title = sqlite3_mprintf("Training of model %s version %lld", name, (long long)version);
  attn_svg_begin(out, W, H, title, title ? -1 : 0);
  sqlite3_free(title);
  sqlite3_str_appendf(out, "<text x=\"20\" y=\"30\" font-size=\"18\" font-weight=\"bold\" "
                           "fill=\"#1a1a1a\">Training of model ");
  attn_svg_text(out, name, (int)strlen(name), 40);
  sqlite3_str_appendf(out, " version %lld (%d epoch%s)</text>\n", (long long)version, n,
                      n == 1 ? "" : "s");
  draw_axes(out, &loss, "Loss", "cross-entropy");
  draw_axes(out, &metric, "Validation", "accuracy / F1");
  draw_lr_drops(out, &loss, &metric, pts, n);
  draw_series(out, &loss, pts, n, offsetof(curve_point, train_loss), "#1f77b4", NULL);
  draw_series(out, &loss, pts, n, offsetof(curve_point, val_loss), "#d62728", NULL);
  draw_series(out, &metric, pts, n, offsetof(curve_point, val_accuracy), "#2ca02c", NULL);
  draw_series(out, &metric, pts, n, offsetof(curve_point, val_f1), "#ff7f0e", "6,3");
  const char *monitor;
  int best = draw_kept(out, &loss, &metric, pts, n, kept, &monitor);
  double ly = H - 22;
  legend_entry(out, 80, ly, "#1f77b4", NULL, "train loss");
  legend_entry(out, 180, ly, "#d62728", NULL, "validation loss");
  if (best >= 0)
    sqlite3_str_appendf(out,
                        "<circle cx=\"310\" cy=\"%.1f\" r=\"6\" fill=\"none\" "
                        "stroke=\"#d62728\" stroke-width=\"1.5\"/><text x=\"322\" y=\"%.1f\" "
                        "font-size=\"11\" fill=\"#333333\">kept: epoch %g%s%s</text>\n",
                        ly, ly + 4, pts[best].epoch, *monitor ? ", best " : "", monitor);
  legend_entry(out, 560, ly, "#2ca02c", NULL, "accuracy");
  legend_entry(out, 650, ly, "#ff7f0e", "6,3", "weighted F1");
  legend_entry(out, 770, ly, "#7b3294", "5,3", "learning-rate drop");
  return out;
}

/* attn_training_svg(model [, version]) -> SVG */
void attn_training_svg_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  const char *fn = "attn_training_svg";
  attn_conn *conn = sqlite3_user_data(ctx);
  sqlite3 *db = attn_conn_db(conn);
  curve_point *pts = NULL;
  char *msg = NULL;
  int rc = SQLITE_ERROR, n = 0, reading = 0, exists = 0;
  curves_kept kept = {0, ""};
  const char *ref = NULL;
  char *name = NULL;
  size_t name_len;
  int64_t ref_version;
  sqlite3_int64 version;
  if ((rc = attn_name_value(fn, argv[0], &ref, &msg)) != SQLITE_OK) goto error;
  rc = SQLITE_ERROR;
  if (!attn_model_ref_split(ref, &name_len, &ref_version)) {
    msg = sqlite3_mprintf("%s: '%s' is no model reference: expected a name, 'name@version' "
                          "(version a positive integer), or 'name@' for a name that itself "
                          "contains '@'",
                          fn, ref);
    goto error;
  }
  if (ref_version >= 0 && argc > 1 && sqlite3_value_type(argv[1]) != SQLITE_NULL) {
    msg = sqlite3_mprintf("%s: the version is given twice ('%s' and a second argument)", fn, ref);
    goto error;
  }
  if (!(name = sqlite3_mprintf("%.*s", (int)name_len, ref))) {
    rc = SQLITE_NOMEM;
    goto error;
  }
  /* the store's tables are checked, and a view calling us back is refused */
  rc = attn_store_read_begin(conn, fn, &exists, &msg);
  if (rc != SQLITE_OK) goto error;
  reading = 1;
  rc = SQLITE_ERROR;
  if (!exists) {
    msg = sqlite3_mprintf("%s: no model named '%s' (this database has no model store)", fn, name);
    goto error;
  }
  rc = training_version(conn, fn, name, ref_version, argc, argv, &version, &msg);
  if (rc != SQLITE_OK) goto error;
  training_kept(db, name, version, &kept);
  rc = training_log_read(db, fn, name, version, &pts, &n, &msg);
  if (rc != SQLITE_OK) goto error;
  attn_store_read_end(conn);
  reading = 0;
  if (n == 0) {
    msg = sqlite3_mprintf("%s: model '%s' version %lld has no training log (imported?)", fn, name,
                          (long long)version);
    rc = SQLITE_ERROR;
    goto error;
  }
  sqlite3_str *out = training_draw(name, version, pts, n, &kept);
  sqlite3_free(pts);
  sqlite3_free(name);
  attn_svg_result(ctx, out);
  return;
error:
  if (reading) attn_store_read_end(conn);
  sqlite3_free(pts);
  sqlite3_free(name);
  attn_result_error(
      ctx, rc == SQLITE_ROW || rc == SQLITE_DONE || rc == SQLITE_OK ? SQLITE_ERROR : rc, msg, fn);
}
