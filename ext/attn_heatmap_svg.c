/* attn_heatmap_svg.c -- attention (or occlusion) over the words of texts as an SVG picture: the
 * SQL functions attn_heatmap_svg (one text) and attn_heatmap_query_svg (one row per text of a
 * query).
 *
 *   SELECT writefile('heatmap.svg', attn_heatmap_svg('news', 'Hawks striker scores in final'));
 *   -- one text: its tokens coloured by attention weight, a legend, and the predicted label and
 *   -- its probability in the title
 *   SELECT writefile('rows.svg',
 *                    attn_heatmap_query_svg('news', 'SELECT title FROM headlines LIMIT 8'));
 *   -- one row per text of the query's first column (at most 100 rows; NULL texts are skipped)
 *   SELECT writefile('occ.svg', attn_heatmap_svg('news', 'Hawks striker scores', 'occlusion'));
 *   -- the same picture with each token's leave-one-out occlusion (attn_explain) instead of its
 *   -- attention weight, on a diverging scale centred on 0 (red: the predicted class's
 *   -- probability drops without the token; blue: it rises); 'attention' is the default
 *
 * Tokens are shown as they appear in the text (the byte span the tokenizer reports), falling back
 * to the cleaned token (e.g. <UNK> for a text with no token); a dashed box marks a token that is
 * not in the model's vocabulary. The colour scale runs from 0 to the largest weight shown
 * (occlusion: from -m to m, m the largest |occlusion| shown).
 * The query of attn_heatmap_query_svg must be one read-only statement (as attn_classify's).
 * Sizes are bounded: tokens cut to 24 characters, at most 200 tokens per text and 4000 in all.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn_ext.h"

#define HM_MAX_ROWS 100        /* texts of attn_heatmap_query_svg */
#define HM_MAX_TOKENS_ROW 200  /* tokens drawn per text */
#define HM_MAX_TOKENS_ALL 4000 /* tokens drawn per picture */
#define HM_TOKEN_CHARS 24      /* characters of a token label */
#define HM_WIDTH 960           /* picture width at most */
#define HM_MARGIN 20
#define HM_FONT 14.0
#define HM_BOX_H 26
#define HM_LINE_H 46 /* box + weight line + gap */

/* ------------------------------------------------------------------ heatmap data */

typedef struct hm_token {
  char *text; /* sqlite3_malloc'd, len bytes, any bytes */
  int len;
  float weight;
  int unk; /* not in the vocabulary */
} hm_token;

typedef struct hm_row {
  hm_token *tokens;
  int n;     /* tokens drawn */
  int total; /* tokens the model read */
  int label; /* predicted class */
  double probability;
} hm_row;

typedef struct hm_data {
  hm_row *rows;
  int n, cap;
  int tokens_drawn;
  int occlusion; /* the third argument: 0 'attention' (weight: attention), 1 'occlusion' */
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
static int hm_add_text(hm_data *d, attn_model *model, nn_workspace *ws, attn_text_reading *reading,
                       attn_interrupt *it, const char *text, int len, const char *fn,
                       char **errmsg) {
  int rc = d->occlusion ? attn_text_occlusion(reading, model, ws, it, text, len, fn, errmsg)
                        : attn_text_read(reading, model, ws, text, len, 1, fn, errmsg);
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
    if (reading->probs[c] > reading->probs[best]) best = c;
  row->label = best;
  row->probability = reading->probs[best];
  row->total = reading->n;
  int n = reading->n < HM_MAX_TOKENS_ROW ? reading->n : HM_MAX_TOKENS_ROW;
  if (n > HM_MAX_TOKENS_ALL - d->tokens_drawn) n = HM_MAX_TOKENS_ALL - d->tokens_drawn;
  if (n < 0) n = 0;
  d->n++; /* the row is owned by d from here (freed by hm_free) */
  row->tokens = sqlite3_malloc64((sqlite3_uint64)(n > 0 ? n : 1) * sizeof *row->tokens);
  if (!row->tokens) goto oom;
  for (int i = 0; i < n; i++) {
    const nn_token *t = &reading->tokens[i];
    const char *s;
    int slen;
    if (t->start >= 0 && t->end > t->start && t->end <= len) {
      s = text + t->start, slen = t->end - t->start;
    } else {
      s = reading->token_text[i] ? reading->token_text[i] : "", slen = (int)strlen(s);
    }
    hm_token *tok = &row->tokens[i];
    tok->text = sqlite3_malloc64((sqlite3_uint64)slen + 1);
    if (!tok->text) goto oom;
    memcpy(tok->text, s, (size_t)slen);
    tok->text[slen] = 0;
    tok->len = slen;
    tok->weight = d->occlusion ? reading->occlusion[i] : reading->weights[i];
    tok->unk = reading->tokens[i].id == NN_UNK;
    row->n++;
  }
  d->tokens_drawn += row->n;
  return SQLITE_OK;
oom:
  *errmsg = sqlite3_mprintf("%s: out of memory", fn);
  return SQLITE_NOMEM;
}

/* ------------------------------------------------------------------ heatmap drawing */

/* Colour of t in [-1, 1] on the occlusion pictures' diverging scale (ColorBrewer RdBu: blue,
 * white at 0, red) as "#rrggbb" (out: 8 bytes). */
static void hm_diverging_color(char *out, double t) {
  static const int scale[9][3] = {{33, 102, 172},  {67, 147, 195},  {146, 197, 222},
                                  {209, 229, 240}, {255, 255, 255}, {253, 219, 199},
                                  {244, 165, 130}, {214, 96, 77},   {178, 24, 43}};
  if (!(t >= -1)) t = -1; /* NaN too */
  if (t > 1) t = 1;
  double x = (t + 1) * 4;
  int i = (int)x;
  if (i > 7) i = 7;
  double f = x - i;
  sqlite3_snprintf(8, out, "#%02x%02x%02x",
                   (int)lround(scale[i][0] + f * (scale[i + 1][0] - scale[i][0])),
                   (int)lround(scale[i][1] + f * (scale[i + 1][1] - scale[i][1])),
                   (int)lround(scale[i][2] + f * (scale[i + 1][2] - scale[i][2])));
}

/* The diverging scale's legend: a colour bar from -m to m with 0 in its middle, at (x, y). */
static void hm_diverging_legend(sqlite3_str *out, double x, double y, double w, double m) {
  sqlite3_str_appendall(out, "<defs><linearGradient id=\"attn-diverging\" x1=\"0\" x2=\"1\" "
                             "y1=\"0\" y2=\"0\">");
  for (int i = 0; i <= 8; i++) {
    char c[8];
    hm_diverging_color(c, i / 4.0 - 1);
    sqlite3_str_appendf(out, "<stop offset=\"%.3f\" stop-color=\"%s\"/>", i / 8.0, c);
  }
  sqlite3_str_appendall(out, "</linearGradient></defs>\n");
  sqlite3_str_appendf(out,
                      "<g font-size=\"11\" fill=\"#333333\">"
                      "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"10\" "
                      "fill=\"url(#attn-diverging)\" stroke=\"#999999\" stroke-width=\"0.5\"/>"
                      "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"start\">%.3f</text>"
                      "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">0</text>"
                      "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.3f</text>"
                      "<text x=\"%.1f\" y=\"%.1f\">occlusion: drop of p(predicted) without the "
                      "token (blue: it rises)</text></g>\n",
                      x, y, w, x, y + 23, -m, x + w / 2, y + 23, x + w, y + 23, m, x, y + 37);
}

static double hm_box_width(const hm_token *t) {
  int chars = attn_svg_text_columns(t->text, t->len, HM_TOKEN_CHARS);
  double w = attn_svg_mono_width(chars, HM_FONT) + 12;
  return w < 34 ? 34 : w; /* room for the weight below */
}

/* The scale's top: the largest weight drawn (occlusion: the largest |occlusion|), 1 when there is
 * none above 0; *any_unk: whether a drawn token is not in the vocabulary. */
static double hm_max_weight(const hm_data *d, int *any_unk) {
  double max_weight = 0;
  *any_unk = 0;
  for (int r = 0; r < d->n; r++)
    for (int i = 0; i < d->rows[r].n; i++) {
      double v = d->rows[r].tokens[i].weight;
      if (d->occlusion) v = fabs(v); /* the diverging scale's half-width */
      if (v > max_weight) max_weight = v;
      *any_unk |= d->rows[r].tokens[i].unk;
    }
  return max_weight > 0 ? max_weight : 1;
}

/* The title and the line under it at y, into body. single: one text, its label in the title;
 * more: rows were left out. *title (sqlite3_malloc'd, may be NULL) and *title_fmt (its prefix,
 * NULL when none) are for the document's title. Returns the right edge the title needs. */
static double hm_draw_header(sqlite3_str *body, const hm_data *d, const attn_model *model,
                             int single, int more, double y, char **title, const char **title_fmt) {
  nn_model *nn = model->nn;
  if (single && d->n == 1) {
    const char *label = nn_model_label(nn, d->rows[0].label);
    const char *l = label ? label : "?";
    int keep = attn_svg_prefix_bytes(l, (int)strlen(l), 40);
    *title = sqlite3_mprintf("%.*s%s (p = %.3f)", keep, l, l[keep] ? "\xe2\x80\xa6" : "",
                             d->rows[0].probability);
    *title_fmt = "predicted";
  } else {
    *title = sqlite3_mprintf("%s over %d text%s", d->occlusion ? "Occlusion" : "Attention", d->n,
                             d->n == 1 ? "" : "s");
    *title_fmt = NULL;
  }
  /* title: "predicted: <label> (p = 0.934)" */
  sqlite3_str_appendf(body,
                      "<text x=\"%d\" y=\"%.1f\" font-size=\"18\" font-weight=\"bold\" "
                      "fill=\"#1a1a1a\">",
                      HM_MARGIN, y + 16);
  if (*title_fmt) sqlite3_str_appendf(body, "%s: ", *title_fmt);
  int title_chars = *title ? attn_svg_text(body, *title, (int)strlen(*title), 60) : 0;
  sqlite3_str_appendall(body, "</text>\n");
  sqlite3_str_appendf(body, "<text x=\"%d\" y=\"%.1f\" font-size=\"12\" fill=\"#555555\">model ",
                      HM_MARGIN, y + 36);
  attn_svg_text(body, model->name, (int)strlen(model->name), 40);
  sqlite3_str_appendf(body, " version %lld; %s attention, %s", (long long)model->version,
                      nn_attention_name(nn_model_config(nn)->attention),
                      nn_cell_name(nn_model_config(nn)->cell));
  if (d->occlusion) sqlite3_str_appendall(body, "; leave-one-out occlusion");
  if (more) sqlite3_str_appendf(body, "; the first %d rows of the query", d->n);
  if (d->tokens_drawn >= HM_MAX_TOKENS_ALL) sqlite3_str_appendall(body, "; tokens cut");
  sqlite3_str_appendall(body, "</text>\n");
  /* room for the title: bold DejaVu Sans averages about 0.65 em a character */
  double right = 480;
  if (title_chars) {
    double title_right = HM_MARGIN + (title_chars + (*title_fmt ? 11 : 0)) * 18 * 0.65;
    if (title_right > right) right = title_right;
  }
  return right;
}

/* One token's box of width w at (x, y): its text, coloured by v (its weight over the scale's
 * top), the weight below it, the full token and weight as a tooltip. */
static void hm_draw_token(sqlite3_str *body, const hm_token *t, int occlusion, double v, double x,
                          double y, double w) {
  char fill[8];
  if (occlusion) hm_diverging_color(fill, v);
  else attn_svg_color(fill, v);
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
                      x + w / 2, y + 18, HM_FONT,
                      occlusion ? (fabs(v) > 0.6 ? "#ffffff" : "#1a1a1a") : attn_svg_ink(v));
  attn_svg_text(body, t->text, t->len, HM_TOKEN_CHARS);
  sqlite3_str_appendf(body,
                      "</text><text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" "
                      "text-anchor=\"middle\" fill=\"#666666\">%.3f</text></g>\n",
                      x + w / 2, y + HM_BOX_H + 12, (double)t->weight);
}

/* The rows from *y down (each with its label line unless single and one row), their tokens
 * wrapped at the picture's width; *y ends below the last row, *right grows to the widest. */
static void hm_draw_rows(sqlite3_str *body, const hm_data *d, nn_model *nn, int single,
                         double max_weight, double *y, double *right) {
  double limit = HM_WIDTH - HM_MARGIN;
  for (int r = 0; r < d->n; r++) {
    const hm_row *row = &d->rows[r];
    if (!single || d->n > 1) {
      const char *label = nn_model_label(nn, row->label);
      sqlite3_str_appendf(body,
                          "<text x=\"%d\" y=\"%.1f\" font-size=\"12\" fill=\"#333333\">"
                          "%d. ",
                          HM_MARGIN, *y + 12, r + 1);
      attn_svg_text(body, label ? label : "?", label ? (int)strlen(label) : 1, 40);
      sqlite3_str_appendf(body, " (p = %.3f)", row->probability);
      if (row->n < row->total) sqlite3_str_appendf(body, "; %d of %d tokens", row->n, row->total);
      sqlite3_str_appendall(body, "</text>\n");
      *y += 18;
    }
    double x = HM_MARGIN;
    for (int i = 0; i < row->n; i++) {
      const hm_token *t = &row->tokens[i];
      double w = hm_box_width(t);
      if (x + w > limit && x > HM_MARGIN) {
        x = HM_MARGIN;
        *y += HM_LINE_H;
      }
      hm_draw_token(body, t, d->occlusion, t->weight / max_weight, x, *y, w);
      x += w + 4;
      if (x > *right) *right = x;
    }
    *y += HM_LINE_H + 4;
  }
}

/* Draw the rows; single: one text, its label in the title. more: rows were left out. */
static void hm_draw(sqlite3_context *ctx, const hm_data *d, attn_model *model, int single,
                    int more) {
  int any_unk;
  double max_weight = hm_max_weight(d, &any_unk);

  /* body first (its height decides the document's), then the frame */
  sqlite3_str *body = sqlite3_str_new(NULL);
  double y = HM_MARGIN;
  const char *title_fmt;
  char *title;
  double right = hm_draw_header(body, d, model, single, more, y, &title, &title_fmt);
  y += 52;
  hm_draw_rows(body, d, model->nn, single, max_weight, &y, &right);
  if (d->occlusion) hm_diverging_legend(body, HM_MARGIN, y, 240, max_weight);
  else attn_svg_legend(body, HM_MARGIN, y, 240, 0, max_weight, "attention weight");
  if (any_unk)
    sqlite3_str_appendf(body,
                        "<rect x=\"%d\" y=\"%.1f\" width=\"22\" height=\"12\" fill=\"none\" "
                        "stroke=\"#555555\" stroke-dasharray=\"3,2\"/><text x=\"%d\" y=\"%.1f\" "
                        "font-size=\"11\" fill=\"#333333\">not in the vocabulary (&lt;UNK&gt;)"
                        "</text>\n",
                        HM_MARGIN + 270, y - 1, HM_MARGIN + 298, y + 9);
  y += (d->occlusion ? 44 : 30) + HM_MARGIN;
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

/* What both heatmap functions hold during a call. */
typedef struct hm_call {
  attn_model *model; /* valid until the call returns (attn_model_get) */
  nn_workspace *ws;  /* the connection's */
  attn_text_reading reading;
  hm_data d;
  attn_interrupt interrupt; /* between the passes of a long text's occlusion */
} hm_call;

/* Look up the model named by argv[0] and the workspace, read the measure argv[2] (when argc is
 * 3); hm_end frees the rest (also on error). */
static int hm_begin(sqlite3_context *ctx, int argc, sqlite3_value **argv, const char *fn,
                    hm_call *c, char **msg) {
  const char *name = NULL;
  memset(c, 0, sizeof *c);
  c->interrupt.db = sqlite3_context_db_handle(ctx);
  if (argc == 3) {
    const char *m = (const char *)sqlite3_value_text(argv[2]);
    if (m && strcmp(m, "occlusion") == 0) {
      c->d.occlusion = 1;
    } else if (!m || strcmp(m, "attention") != 0) {
      if (!m && sqlite3_value_type(argv[2]) != SQLITE_NULL) return SQLITE_NOMEM;
      int keep = m ? attn_svg_prefix_bytes(m, sqlite3_value_bytes(argv[2]), 40) : 0;
      *msg = m ? sqlite3_mprintf("%s: the third argument must be 'attention' or 'occlusion', "
                                 "got '%.*s%s'",
                                 fn, keep, m, m[keep] ? "..." : "")
               : sqlite3_mprintf("%s: the third argument must be 'attention' or 'occlusion', "
                                 "got NULL",
                                 fn);
      return SQLITE_ERROR;
    }
  }
  int rc = attn_name_value(fn, argv[0], &name, msg);
  if (rc != SQLITE_OK) return rc;
  rc = attn_model_get(ctx, fn, name, 0, &c->model, msg);
  if (rc != SQLITE_OK) return rc;
  c->ws = attn_conn_workspace(sqlite3_user_data(ctx), msg);
  return c->ws ? SQLITE_OK : SQLITE_NOMEM;
}

static void hm_end(hm_call *c) {
  attn_text_reading_free(&c->reading);
  hm_free(&c->d);
  attn_interrupt_end(&c->interrupt);
}

/* attn_heatmap_svg(model, text [, 'attention' | 'occlusion']) -> SVG */
void attn_heatmap_svg_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  const char *fn = "attn_heatmap_svg";
  char *msg = NULL;
  hm_call c;
  int rc = hm_begin(ctx, argc, argv, fn, &c, &msg);
  if (rc != SQLITE_OK) goto error;
  if (sqlite3_value_type(argv[1]) == SQLITE_NULL) {
    sqlite3_result_null(ctx);
    return;
  }
  const char *text = (const char *)sqlite3_value_text(argv[1]);
  int len = sqlite3_value_bytes(argv[1]);
  rc = hm_add_text(&c.d, c.model, c.ws, &c.reading, &c.interrupt, text, len, fn, &msg);
  attn_text_reading_free(&c.reading);
  if (rc != SQLITE_OK) goto error;
  hm_draw(ctx, &c.d, c.model, 1, 0);
  hm_end(&c);
  return;
error:
  hm_end(&c);
  attn_result_error(ctx, rc, msg, fn);
}

/* attn_heatmap_query_svg(model, query [, 'attention' | 'occlusion']) -> SVG with a row per text
 * of the query's first column */
void attn_heatmap_query_svg_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  const char *fn = "attn_heatmap_query_svg";
  char *msg = NULL;
  sqlite3_stmt *stmt = NULL;
  hm_call c;
  int rc = hm_begin(ctx, argc, argv, fn, &c, &msg);
  if (rc != SQLITE_OK) goto error;
  rc = attn_prepare_query(sqlite3_context_db_handle(ctx), fn,
                          (const char *)sqlite3_value_text(argv[1]), 1, "(text)", &stmt, &msg);
  if (rc != SQLITE_OK) goto error;
  int more = 0;
  while ((rc = attn_query_step(sqlite3_user_data(ctx), stmt, fn)) == SQLITE_ROW) {
    if (c.d.n == HM_MAX_ROWS) {
      more = 1;
      break;
    }
    if (sqlite3_column_type(stmt, 0) == SQLITE_NULL) continue;
    const char *text = (const char *)sqlite3_column_text(stmt, 0);
    int len = sqlite3_column_bytes(stmt, 0);
    rc = hm_add_text(&c.d, c.model, c.ws, &c.reading, &c.interrupt, text, len, fn, &msg);
    if (rc != SQLITE_OK) goto error;
  }
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    msg = sqlite3_mprintf("%s: the query failed: %s", fn,
                          sqlite3_errmsg(sqlite3_context_db_handle(ctx)));
    goto error;
  }
  sqlite3_finalize(stmt);
  stmt = NULL;
  attn_text_reading_free(&c.reading);
  if (c.d.n == 0) {
    msg = sqlite3_mprintf("%s: the query returned no text (no rows, or only NULLs)", fn);
    rc = SQLITE_ERROR;
    goto error;
  }
  hm_draw(ctx, &c.d, c.model, 0, more);
  hm_end(&c);
  return;
error:
  sqlite3_finalize(stmt);
  hm_end(&c);
  attn_result_error(
      ctx, rc == SQLITE_OK || rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_ERROR : rc, msg, fn);
}
