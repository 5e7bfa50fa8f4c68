/* attn_viz.c -- pictures of a model as SVG documents: attention over the words of texts
 * (attn_heatmap, attn_heatmap_query) and the training curves (attn_curves). Also registers the
 * other visualisation files' functions (attn_matrix.c, attn_vectors.c).
 *
 *   SELECT writefile('heatmap.svg', attn_heatmap('news', 'Hawks striker scores twice in final'));
 *   -- one text: its tokens coloured by attention weight, a legend, and the predicted label and
 *   -- its probability in the title
 *   SELECT writefile('rows.svg', attn_heatmap_query('news', 'SELECT title FROM headlines LIMIT 8'));
 *   -- one row per text of the query's first column (at most 100 rows; NULL texts are skipped)
 *   SELECT writefile('curves.svg', attn_curves('news'));      -- the deployed version
 *   SELECT writefile('curves.svg', attn_curves('news', 2));   -- version 2
 *   -- train and validation loss, validation accuracy and F1 per epoch (attn_training_log),
 *   -- learning-rate drops marked, the best epoch circled
 *
 * Tokens are shown as they appear in the text (the byte span the tokenizer reports), falling back
 * to the cleaned token (e.g. <UNK> for a text with no token); a dashed box marks a token that is
 * not in the model's vocabulary. The colour scale runs from 0 to the largest weight shown.
 * The query of attn_heatmap_query must be one read-only statement (as attn_classify's).
 * Sizes are bounded: tokens cut to 24 characters, at most 200 tokens per text and 4000 in all.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn_viz.h"

#define HM_MAX_ROWS 100         /* texts of attn_heatmap_query */
#define HM_MAX_TOKENS_ROW 200   /* tokens drawn per text */
#define HM_MAX_TOKENS_ALL 4000  /* tokens drawn per picture */
#define HM_TOKEN_CHARS 24       /* characters of a token label */
#define HM_WIDTH 960            /* picture width at most */
#define HM_MARGIN 20
#define HM_FONT 14.0
#define HM_BOX_H 26
#define HM_LINE_H 46            /* box + weight line + gap */

/* ------------------------------------------------------------------ heatmap data */

typedef struct hm_token {
  char *text; /* sqlite3_malloc'd, len bytes, any bytes */
  int len;
  float weight;
  int unk; /* not in the vocabulary */
} hm_token;

typedef struct hm_row {
  hm_token *tokens;
  int n;      /* tokens drawn */
  int total;  /* tokens the model read */
  int label;  /* predicted class */
  double probability;
} hm_row;

typedef struct hm_data {
  hm_row *rows;
  int n, cap;
  int tokens_drawn;
} hm_data;

static void hm_free(hm_data *d) {
  for (int r = 0; r < d->n; r++) {
    for (int i = 0; i < d->rows[r].n; i++) sqlite3_free(d->rows[r].tokens[i].text);
    sqlite3_free(d->rows[r].tokens);
  }
  sqlite3_free(d->rows);
  memset(d, 0, sizeof *d);
}

/* Run one text through the model and keep what the picture needs. */
static int hm_add_text(hm_data *d, attn_model *model, nn_workspace *ws, attn_explain *ex,
                       const char *text, int len, const char *fn, char **errmsg) {
  int rc = attn_explain_text(ex, model, ws, text, len, 1, fn, errmsg);
  if (rc != SQLITE_OK) return rc;
  if (d->n == d->cap) {
    int cap = d->cap ? 2 * d->cap : 8;
    hm_row *rows = sqlite3_realloc64(d->rows, (sqlite3_uint64)cap * sizeof *rows);
    if (!rows) goto oom;
    d->rows = rows;
    d->cap = cap;
  }
  hm_row *row = &d->rows[d->n];
  memset(row, 0, sizeof *row);
  int C = nn_model_num_classes(model->nn), best = 0;
  for (int c = 1; c < C; c++)
    if (ex->probs[c] > ex->probs[best]) best = c;
  row->label = best;
  row->probability = ex->probs[best];
  row->total = ex->n;
  int n = ex->n < HM_MAX_TOKENS_ROW ? ex->n : HM_MAX_TOKENS_ROW;
  if (n > HM_MAX_TOKENS_ALL - d->tokens_drawn) n = HM_MAX_TOKENS_ALL - d->tokens_drawn;
  if (n < 0) n = 0;
  d->n++; /* the row is owned by d from here (freed by hm_free) */
  row->tokens = sqlite3_malloc64((sqlite3_uint64)(n > 0 ? n : 1) * sizeof *row->tokens);
  if (!row->tokens) goto oom;
  for (int i = 0; i < n; i++) {
    const nn_token *t = &ex->tokens[i];
    const char *s;
    int slen;
    if (t->start >= 0 && t->end > t->start && t->end <= len) {
      s = text + t->start, slen = t->end - t->start;
    } else {
      s = ex->token_text[i] ? ex->token_text[i] : "", slen = (int)strlen(s);
    }
    hm_token *tok = &row->tokens[i];
    tok->text = sqlite3_malloc64((sqlite3_uint64)slen + 1);
    if (!tok->text) goto oom;
    memcpy(tok->text, s, (size_t)slen);
    tok->text[slen] = 0;
    tok->len = slen;
    tok->weight = ex->weights[i];
    tok->unk = ex->tokens[i].id == NN_UNK;
    row->n++;
  }
  d->tokens_drawn += row->n;
  return SQLITE_OK;
oom:
  *errmsg = sqlite3_mprintf("%s: out of memory", fn);
  return SQLITE_NOMEM;
}

/* ------------------------------------------------------------------ heatmap drawing */

static double hm_box_width(const hm_token *t) {
  int chars = attn_svg_text_columns(t->text, t->len, HM_TOKEN_CHARS);
  double w = attn_svg_mono_width(chars, HM_FONT) + 12;
  return w < 34 ? 34 : w; /* room for the weight below */
}

/* Draw the rows; single: one text, its label in the title. more: rows were left out. */
static void hm_draw(sqlite3_context *ctx, const hm_data *d, attn_model *model, int single,
                    int more) {
  nn_model *nn = model->nn;
  double max_weight = 0;
  int any_unk = 0;
  for (int r = 0; r < d->n; r++)
    for (int i = 0; i < d->rows[r].n; i++) {
      if (d->rows[r].tokens[i].weight > max_weight) max_weight = d->rows[r].tokens[i].weight;
      any_unk |= d->rows[r].tokens[i].unk;
    }
  if (!(max_weight > 0)) max_weight = 1;

  /* body first (its height decides the document's), then the frame */
  sqlite3_str *body = sqlite3_str_new(NULL);
  double y = HM_MARGIN, right = 0, limit = HM_WIDTH - HM_MARGIN;
  const char *title_fmt;
  char *title;
  if (single && d->n == 1) {
    const char *label = nn_model_label(nn, d->rows[0].label);
    const char *l = label ? label : "?";
    int keep = attn_svg_prefix_bytes(l, (int)strlen(l), 40);
    title = sqlite3_mprintf("%.*s%s (p = %.3f)", keep, l, l[keep] ? "\xe2\x80\xa6" : "",
                            d->rows[0].probability);
    title_fmt = "predicted";
  } else {
    title = sqlite3_mprintf("Attention over %d text%s", d->n, d->n == 1 ? "" : "s");
    title_fmt = NULL;
  }
  /* title: "predicted: <label> (p = 0.934)" */
  sqlite3_str_appendf(body, "<text x=\"%d\" y=\"%.1f\" font-size=\"18\" font-weight=\"bold\" "
                            "fill=\"#1a1a1a\">", HM_MARGIN, y + 16);
  if (title_fmt) sqlite3_str_appendf(body, "%s: ", title_fmt);
  int title_chars = title ? attn_svg_text(body, title, (int)strlen(title), 60) : 0;
  sqlite3_str_appendall(body, "</text>\n");
  sqlite3_str_appendf(body, "<text x=\"%d\" y=\"%.1f\" font-size=\"12\" fill=\"#555555\">model ",
                      HM_MARGIN, y + 36);
  attn_svg_text(body, model->name, (int)strlen(model->name), 40);
  sqlite3_str_appendf(body, " version %lld; %s attention, %s", (long long)model->version,
                      nn_attention_name(nn_model_config(nn)->attention),
                      nn_cell_name(nn_model_config(nn)->cell));
  if (more) sqlite3_str_appendf(body, "; the first %d rows of the query", d->n);
  if (d->tokens_drawn >= HM_MAX_TOKENS_ALL) sqlite3_str_appendall(body, "; tokens cut");
  sqlite3_str_appendall(body, "</text>\n");
  y += 52;
  /* room for the title: bold DejaVu Sans averages about 0.65 em a character */
  right = 480;
  if (title_chars) {
    double title_right = HM_MARGIN + (title_chars + (title_fmt ? 11 : 0)) * 18 * 0.65;
    if (title_right > right) right = title_right;
  }

  for (int r = 0; r < d->n; r++) {
    const hm_row *row = &d->rows[r];
    if (!single || d->n > 1) {
      const char *label = nn_model_label(nn, row->label);
      sqlite3_str_appendf(body, "<text x=\"%d\" y=\"%.1f\" font-size=\"12\" fill=\"#333333\">"
                                "%d. ", HM_MARGIN, y + 12, r + 1);
      attn_svg_text(body, label ? label : "?", label ? (int)strlen(label) : 1, 40);
      sqlite3_str_appendf(body, " (p = %.3f)", row->probability);
      if (row->n < row->total) sqlite3_str_appendf(body, "; %d of %d tokens", row->n, row->total);
      sqlite3_str_appendall(body, "</text>\n");
      y += 18;
    }
    double x = HM_MARGIN;
    for (int i = 0; i < row->n; i++) {
      const hm_token *t = &row->tokens[i];
      double w = hm_box_width(t);
      if (x + w > limit && x > HM_MARGIN) {
        x = HM_MARGIN;
        y += HM_LINE_H;
      }
      double v = t->weight / max_weight;
      char fill[8];
      attn_svg_color(fill, v);
      sqlite3_str_appendf(body, "<g><title>");
      attn_svg_text(body, t->text, t->len, 200);
      sqlite3_str_appendf(body, ": %.4f</title>", (double)t->weight);
      sqlite3_str_appendf(body,
                          "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" rx=\"3\" "
                          "fill=\"%s\" stroke=\"%s\" stroke-width=\"1\"%s/>",
                          x, y, w, HM_BOX_H, fill, t->unk ? "#555555" : "#bbbbbb",
                          t->unk ? " stroke-dasharray=\"3,2\"" : "");
      sqlite3_str_appendf(body,
                          "<text x=\"%.1f\" y=\"%.1f\" font-family=\"DejaVu Sans Mono, monospace\" "
                          "font-size=\"%.0f\" text-anchor=\"middle\" fill=\"%s\">",
                          x + w / 2, y + 18, HM_FONT, attn_svg_ink(v));
      attn_svg_text(body, t->text, t->len, HM_TOKEN_CHARS);
      sqlite3_str_appendf(body,
                          "</text><text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" "
                          "text-anchor=\"middle\" fill=\"#666666\">%.3f</text></g>\n",
                          x + w / 2, y + HM_BOX_H + 12, (double)t->weight);
      x += w + 4;
      if (x > right) right = x;
    }
    y += HM_LINE_H + 4;
  }
  attn_svg_legend(body, HM_MARGIN, y, 240, 0, max_weight, "attention weight");
  if (any_unk)
    sqlite3_str_appendf(body,
                        "<rect x=\"%d\" y=\"%.1f\" width=\"22\" height=\"12\" fill=\"none\" "
                        "stroke=\"#555555\" stroke-dasharray=\"3,2\"/><text x=\"%d\" y=\"%.1f\" "
                        "font-size=\"11\" fill=\"#333333\">not in the vocabulary (&lt;UNK&gt;)"
                        "</text>\n",
                        HM_MARGIN + 270, y - 1, HM_MARGIN + 298, y + 9);
  y += 30 + HM_MARGIN;
  int width = (int)ceil(right + HM_MARGIN);
  if (width > HM_WIDTH) width = HM_WIDTH;
  int height = (int)ceil(y);

  int rc = sqlite3_str_errcode(body);
  int blen = sqlite3_str_length(body);
  char *btext = sqlite3_str_finish(body);
  if (rc != SQLITE_OK || !btext) {
    sqlite3_free(btext);
    sqlite3_free(title);
    sqlite3_result_error_nomem(ctx);
    return;
  }
  sqlite3_str *out = sqlite3_str_new(NULL);
  char *full = title_fmt ? sqlite3_mprintf("%s: %s", title_fmt, title ? title : "") : NULL;
  const char *doc_title = full ? full : title;
  attn_svg_begin(out, width, height, doc_title, doc_title ? (int)strlen(doc_title) : 0);
  sqlite3_str_append(out, btext, blen);
  sqlite3_free(btext);
  sqlite3_free(title);
  sqlite3_free(full);
  attn_svg_result(ctx, out);
}

static int hm_model(sqlite3_context *ctx, sqlite3_value **argv, const char *fn,
                    attn_model **model, nn_workspace **ws, char **msg) {
  const char *name = (const char *)sqlite3_value_text(argv[0]);
  if (!name || !*name) {
    *msg = sqlite3_mprintf("%s: the model name must be a non-empty text, got %s", fn,
                           name ? "''" : "NULL");
    return SQLITE_ERROR;
  }
  int rc = attn_model_get(ctx, fn, name, 0, model, msg);
  if (rc != SQLITE_OK) return rc;
  *ws = attn_conn_workspace(sqlite3_user_data(ctx), msg);
  return *ws ? SQLITE_OK : SQLITE_NOMEM;
}

static void viz_error(sqlite3_context *ctx, int rc, char *msg, const char *fn) {
  if (msg) {
    sqlite3_result_error(ctx, msg, -1);
  } else {
    char buf[96];
    sqlite3_snprintf(sizeof buf, buf, "%s: out of memory", fn);
    sqlite3_result_error(ctx, buf, -1);
  }
  if (rc != SQLITE_ERROR) sqlite3_result_error_code(ctx, rc);
  sqlite3_free(msg);
}

/* attn_heatmap(model, text) -> SVG */
static void attn_heatmap_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  const char *fn = "attn_heatmap";
  char *msg = NULL;
  attn_model *model = NULL;
  nn_workspace *ws = NULL;
  attn_explain ex;
  hm_data d;
  memset(&ex, 0, sizeof ex);
  memset(&d, 0, sizeof d);
  int rc = hm_model(ctx, argv, fn, &model, &ws, &msg);
  if (rc != SQLITE_OK) goto error;
  if (sqlite3_value_type(argv[1]) == SQLITE_NULL) {
    sqlite3_result_null(ctx);
    return;
  }
  const char *text = (const char *)sqlite3_value_text(argv[1]);
  int len = sqlite3_value_bytes(argv[1]);
  rc = hm_add_text(&d, model, ws, &ex, text, len, fn, &msg);
  attn_explain_free(&ex);
  if (rc != SQLITE_OK) goto error;
  hm_draw(ctx, &d, model, 1, 0);
  hm_free(&d);
  return;
error:
  attn_explain_free(&ex);
  hm_free(&d);
  viz_error(ctx, rc, msg, fn);
}

/* One step of the user's query; functions that write the model store refuse to run inside it
 * (attn_conn_query_begin: its query must be read-only). */
static int hm_step_query(sqlite3_context *ctx, sqlite3_stmt *stmt, const char *fn) {
  attn_conn *conn = sqlite3_user_data(ctx);
  attn_conn_query_begin(conn, fn);
  int rc = sqlite3_step(stmt);
  attn_conn_query_end(conn);
  return rc;
}

/* attn_heatmap_query(model, query) -> SVG with a row per text of the query's first column */
static void attn_heatmap_query_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  const char *fn = "attn_heatmap_query";
  char *msg = NULL;
  attn_model *model = NULL;
  nn_workspace *ws = NULL;
  sqlite3_stmt *stmt = NULL;
  attn_explain ex;
  hm_data d;
  memset(&ex, 0, sizeof ex);
  memset(&d, 0, sizeof d);
  int rc = hm_model(ctx, argv, fn, &model, &ws, &msg);
  if (rc != SQLITE_OK) goto error;
  rc = attn_prepare_query(sqlite3_context_db_handle(ctx), fn,
                          (const char *)sqlite3_value_text(argv[1]), 1, "(text)", &stmt, &msg);
  if (rc != SQLITE_OK) goto error;
  int more = 0;
  while ((rc = hm_step_query(ctx, stmt, fn)) == SQLITE_ROW) {
    if (d.n == HM_MAX_ROWS) {
      more = 1;
      break;
    }
    if (sqlite3_column_type(stmt, 0) == SQLITE_NULL) continue;
    const char *text = (const char *)sqlite3_column_text(stmt, 0);
    int len = sqlite3_column_bytes(stmt, 0);
    rc = hm_add_text(&d, model, ws, &ex, text, len, fn, &msg);
    if (rc != SQLITE_OK) goto error;
  }
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    msg = sqlite3_mprintf("%s: the query failed: %s", fn,
                          sqlite3_errmsg(sqlite3_context_db_handle(ctx)));
    goto error;
  }
  sqlite3_finalize(stmt);
  stmt = NULL;
  attn_explain_free(&ex);
  if (d.n == 0) {
    msg = sqlite3_mprintf("%s: the query returned no text (no rows, or only NULLs)", fn);
    rc = SQLITE_ERROR;
    goto error;
  }
  hm_draw(ctx, &d, model, 0, more);
  hm_free(&d);
  return;
error:
  sqlite3_finalize(stmt);
  attn_explain_free(&ex);
  hm_free(&d);
  viz_error(ctx, rc == SQLITE_OK || rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_ERROR : rc,
            msg, fn);
}

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
  double x, y, w, h;        /* plot area */
  double x0, x1, y0, y1;    /* data range */
} panel;

static double px(const panel *p, double v) { return p->x + (v - p->x0) / (p->x1 - p->x0) * p->w; }
static double py(const panel *p, double v) { return p->y + p->h - (v - p->y0) / (p->y1 - p->y0) * p->h; }

static void draw_axes(sqlite3_str *out, const panel *p, const char *title, const char *ylabel) {
  double first, step;
  int count;
  sqlite3_str_appendf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                           "fill=\"#fafafa\" stroke=\"#888888\"/>\n", p->x, p->y, p->w, p->h);
  nice_ticks(p->y0, p->y1, &first, &step, &count);
  for (int i = 0; i < count; i++) {
    double v = first + i * step, yy = py(p, v);
    if (yy < p->y - 0.5 || yy > p->y + p->h + 0.5) continue;
    sqlite3_str_appendf(out, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" "
                             "stroke=\"#e0e0e0\"/><text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" "
                             "text-anchor=\"end\" fill=\"#333333\">%g</text>\n",
                        p->x, p->x + p->w, yy, yy, p->x - 5, yy + 4, fabs(v) < step * 1e-6 ? 0.0 : v);
  }
  nice_ticks(p->x0, p->x1, &first, &step, &count);
  if (step < 1) step = 1, first = ceil(p->x0), count = (int)(p->x1 - first) + 1;
  for (int i = 0; i < count && i < 30; i++) {
    double v = first + i * step, xx = px(p, v);
    if (xx < p->x - 0.5 || xx > p->x + p->w + 0.5) continue;
    sqlite3_str_appendf(out, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" "
                             "stroke=\"#888888\"/><text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" "
                             "text-anchor=\"middle\" fill=\"#333333\">%g</text>\n",
                        xx, xx, p->y + p->h, p->y + p->h + 4, xx, p->y + p->h + 16, v);
  }
  sqlite3_str_appendf(out, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\" "
                           "fill=\"#333333\">epoch</text>\n", p->x + p->w / 2, p->y + p->h + 32);
  sqlite3_str_appendf(out, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" font-weight=\"bold\" "
                           "fill=\"#1a1a1a\">%s</text>\n", p->x, p->y - 8, title);
  sqlite3_str_appendf(out, "<text transform=\"translate(%.1f %.1f) rotate(-90)\" font-size=\"12\" "
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
      sqlite3_str_appendf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s%s%s "
                               "points=\"", color, dash ? " stroke-dasharray=\"" : "",
                          dash ? dash : "", dash ? "\"" : "");
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
  sqlite3_str_appendf(out, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
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

/* attn_curves(model [, version]) -> SVG */
static void attn_curves_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  const char *fn = "attn_curves";
  attn_conn *conn = sqlite3_user_data(ctx);
  sqlite3 *db = attn_conn_db(conn);
  sqlite3_stmt *stmt = NULL;
  curve_point *pts = NULL;
  char *msg = NULL;
  int rc = SQLITE_ERROR, n = 0, cap = 0, reading = 0, exists = 0;
  const char *name = (const char *)sqlite3_value_text(argv[0]);
  if (!name || !*name) {
    msg = sqlite3_mprintf("%s: the model name must be a non-empty text, got %s", fn,
                          name ? "''" : "NULL");
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
  sqlite3_int64 version;
  if (argc > 1 && sqlite3_value_type(argv[1]) != SQLITE_NULL) {
    if (sqlite3_value_numeric_type(argv[1]) != SQLITE_INTEGER) {
      msg = sqlite3_mprintf("%s: the version must be an integer, got '%s'", fn,
                            sqlite3_value_text(argv[1]));
      goto error;
    }
    version = sqlite3_value_int64(argv[1]);
    if (sqlite3_prepare_v2(db, "SELECT 1 FROM main.attn_models WHERE name = ?1 AND version = ?2",
                           -1, &stmt, NULL) != SQLITE_OK) {
      msg = sqlite3_mprintf("%s: no model named '%s' (this database has no model store)", fn, name);
      goto error;
    }
    sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(stmt, 2, version);
    if (sqlite3_step(stmt) != SQLITE_ROW) {
      msg = sqlite3_mprintf("%s: model '%s' has no version %lld", fn, name, (long long)version);
      goto error;
    }
  } else {
    if (sqlite3_prepare_v2(db, "SELECT version FROM main.attn_models WHERE name = ?1 "
                               "ORDER BY deployed DESC, version DESC LIMIT 1",
                           -1, &stmt, NULL) != SQLITE_OK) {
      msg = sqlite3_mprintf("%s: no model named '%s' (this database has no model store)", fn, name);
      goto error;
    }
    sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
    if (sqlite3_step(stmt) != SQLITE_ROW) {
      msg = sqlite3_mprintf("%s: no model named '%s'", fn, name);
      goto error;
    }
    version = sqlite3_column_int64(stmt, 0);
  }
  sqlite3_finalize(stmt);
  stmt = NULL;
  if (sqlite3_prepare_v2(db, "SELECT epoch, train_loss, val_loss, val_accuracy, val_f1, lr "
                             "FROM main.attn_training_log WHERE name = ?1 AND version = ?2 "
                             "ORDER BY epoch",
                         -1, &stmt, NULL) != SQLITE_OK) {
    msg = sqlite3_mprintf("%s: cannot read attn_training_log: %s", fn, sqlite3_errmsg(db));
    goto error;
  }
  sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
  sqlite3_bind_int64(stmt, 2, version);
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    if (n == CURVES_MAX_EPOCHS) break;
    if (n == cap) {
      cap = cap ? 2 * cap : 64;
      curve_point *p = sqlite3_realloc64(pts, (sqlite3_uint64)cap * sizeof *p);
      if (!p) {
        rc = SQLITE_NOMEM;
        goto error;
      }
      pts = p;
    }
    curve_point *p = &pts[n++];
    p->epoch = column_or_nan(stmt, 0);
    p->train_loss = column_or_nan(stmt, 1);
    p->val_loss = column_or_nan(stmt, 2);
    p->val_accuracy = column_or_nan(stmt, 3);
    p->val_f1 = column_or_nan(stmt, 4);
    p->lr = column_or_nan(stmt, 5);
    if (!isfinite(p->epoch)) n--;
  }
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    msg = sqlite3_mprintf("%s: cannot read attn_training_log: %s", fn, sqlite3_errmsg(db));
    rc = SQLITE_ERROR;
    goto error;
  }
  sqlite3_finalize(stmt);
  stmt = NULL;
  attn_store_read_end(conn);
  reading = 0;
  if (n == 0) {
    msg = sqlite3_mprintf("%s: model '%s' version %lld has no training log (imported?)", fn, name,
                          (long long)version);
    rc = SQLITE_ERROR;
    goto error;
  }

  const int W = 960, H = 400;
  panel loss = {80, 70, 340, 250, pts[0].epoch, pts[n - 1].epoch, 0, 1};
  panel metric = {560, 70, 340, 250, pts[0].epoch, pts[n - 1].epoch, 0, 1};
  if (loss.x1 - loss.x0 < 1) loss.x0 -= 0.5, loss.x1 += 0.5, metric.x0 = loss.x0, metric.x1 = loss.x1;
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

  /* learning-rate drops: a dashed line at the first epoch with the lower rate */
  int drops = 0;
  for (int i = 1; i < n; i++) {
    if (!(isfinite(pts[i].lr) && isfinite(pts[i - 1].lr) && pts[i].lr < pts[i - 1].lr)) continue;
    const panel *ps[2] = {&loss, &metric};
    for (int k = 0; k < 2; k++) {
      double xx = px(ps[k], pts[i].epoch);
      sqlite3_str_appendf(out, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" "
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
  draw_series(out, &loss, pts, n, offsetof(curve_point, train_loss), "#1f77b4", NULL);
  draw_series(out, &loss, pts, n, offsetof(curve_point, val_loss), "#d62728", NULL);
  draw_series(out, &metric, pts, n, offsetof(curve_point, val_accuracy), "#2ca02c", NULL);
  draw_series(out, &metric, pts, n, offsetof(curve_point, val_f1), "#ff7f0e", "6,3");
  /* the best epoch: lowest validation loss (the weights that were kept) */
  int best = -1;
  for (int i = 0; i < n; i++)
    if (isfinite(pts[i].val_loss) && (best < 0 || pts[i].val_loss < pts[best].val_loss)) best = i;
  if (best >= 0)
    sqlite3_str_appendf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"6\" fill=\"none\" "
                             "stroke=\"#d62728\" stroke-width=\"1.5\"/>\n",
                        px(&loss, pts[best].epoch), py(&loss, pts[best].val_loss));
  double ly = H - 22;
  legend_entry(out, 80, ly, "#1f77b4", NULL, "train loss");
  legend_entry(out, 180, ly, "#d62728", NULL, "validation loss");
  if (best >= 0)
    sqlite3_str_appendf(out, "<circle cx=\"310\" cy=\"%.1f\" r=\"6\" fill=\"none\" "
                             "stroke=\"#d62728\" stroke-width=\"1.5\"/><text x=\"322\" y=\"%.1f\" "
                             "font-size=\"11\" fill=\"#333333\">best (epoch %g)</text>\n",
                        ly, ly + 4, pts[best].epoch);
  legend_entry(out, 560, ly, "#2ca02c", NULL, "accuracy");
  legend_entry(out, 650, ly, "#ff7f0e", "6,3", "weighted F1");
  legend_entry(out, 770, ly, "#7b3294", "5,3", "learning-rate drop");
  sqlite3_free(pts);
  attn_svg_result(ctx, out);
  return;
error:
  sqlite3_finalize(stmt);
  if (reading) attn_store_read_end(conn);
  sqlite3_free(pts);
  viz_error(ctx, rc == SQLITE_ROW || rc == SQLITE_DONE || rc == SQLITE_OK ? SQLITE_ERROR : rc, msg,
            fn);
}

/* ------------------------------------------------------------------ registration */

int attn_viz_register(sqlite3 *db, attn_conn *conn) {
  /* Innocuous, not deterministic: the pictures follow the deployed version. */
  int flags = SQLITE_INNOCUOUS;
  int rc = attn_create_function(db, conn, "attn_heatmap", 2, flags, attn_heatmap_func);
  /* runs a query given as text: direct use only, as attn_train */
  if (rc == SQLITE_OK)
    rc = attn_create_function(db, conn, "attn_heatmap_query", 2, SQLITE_DIRECTONLY,
                              attn_heatmap_query_func);
  if (rc == SQLITE_OK) rc = attn_create_function(db, conn, "attn_curves", 1, flags, attn_curves_func);
  if (rc == SQLITE_OK) rc = attn_create_function(db, conn, "attn_curves", 2, flags, attn_curves_func);
  if (rc == SQLITE_OK) rc = attn_matrix_register(db, conn);
  if (rc == SQLITE_OK) rc = attn_vectors_register(db, conn);
  return rc;
}
