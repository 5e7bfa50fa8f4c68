/* attn_svg.c -- the small SVG writer behind attn_heatmap_svg, attn_training_svg, attn_matrix_svg
 * and attn_curve_svg: text escaping (UTF-8 validated, XML-forbidden characters replaced, & < > "
 * ' escaped, long labels cut with an ellipsis), the colour scale, the legend and the document
 * frame.
 *
 *   SELECT writefile('heatmap.svg', attn_heatmap_svg('news', 'Hawks win the cup final'));
 *
 * Numbers are written with sqlite3_str_appendf, which does not depend on the C locale.
 */
#include <math.h>
#include <string.h>

#include "attn_ext.h"
#include "utf8.h"

/* One character of s[0..len) (len >= 1): its length in bytes (>= 1) and its code point in *cp,
 * or 0xFFFD for an invalid sequence (then 1 byte is consumed). Decoding: engine/utf8.h. */
static int utf8_decode(const unsigned char *s, int len, unsigned *cp) {
  uint32_t c;
  int n = nn_utf8_decode(s, (size_t)len, &c);
  *cp = n ? c : 0xFFFD;
  return n ? n : 1;
}

/* The character as it may appear in XML 1.0 text: white space becomes a space, characters XML
 * forbids (other C0 controls, U+FFFE, U+FFFF) become U+FFFD. */
static unsigned xml_char(unsigned cp) {
  if (cp == '\t' || cp == '\n' || cp == '\r') return ' ';
  if (cp < 0x20 || cp == 0xFFFE || cp == 0xFFFF) return 0xFFFD;
  return cp;
}

static void append_cp(sqlite3_str *out, unsigned cp) {
  char b[4];
  int n;
  switch (cp) {
  case '&': sqlite3_str_appendall(out, "&amp;"); return;
  case '<': sqlite3_str_appendall(out, "&lt;"); return;
  case '>': sqlite3_str_appendall(out, "&gt;"); return;
  case '"': sqlite3_str_appendall(out, "&quot;"); return;
  case '\'': sqlite3_str_appendall(out, "&apos;"); return;
  default: break;
  }
  if (cp < 0x80) {
    b[0] = (char)cp, n = 1;
  } else if (cp < 0x800) {
    b[0] = (char)(0xC0 | (cp >> 6)), b[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
  } else if (cp < 0x10000) {
    b[0] = (char)(0xE0 | (cp >> 12)), b[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    b[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
  } else {
    b[0] = (char)(0xF0 | (cp >> 18)), b[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    b[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), b[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
  }
  sqlite3_str_append(out, b, n);
}

static int count_chars(const char *s, int len) {
  int n = 0;
  for (int i = 0; i < len;) {
    unsigned cp;
    i += utf8_decode((const unsigned char *)s + i, len - i, &cp);
    n++;
  }
  return n;
}

/* Wide characters take two columns of a monospace font: East Asian wide and full-width forms
 * and the emoji blocks (an approximation of Unicode's East_Asian_Width W/F). */
static int is_wide(unsigned cp) {
  return (cp >= 0x1100 && cp <= 0x115F) || (cp >= 0x2E80 && cp <= 0xA4CF && cp != 0x303F) ||
         (cp >= 0xAC00 && cp <= 0xD7A3) || (cp >= 0xF900 && cp <= 0xFAFF) ||
         (cp >= 0xFE30 && cp <= 0xFE4F) || (cp >= 0xFF00 && cp <= 0xFF60) ||
         (cp >= 0xFFE0 && cp <= 0xFFE6) || (cp >= 0x1F300 && cp <= 0x1F64F) ||
         (cp >= 0x1F900 && cp <= 0x1F9FF) || (cp >= 0x20000 && cp <= 0x3FFFD);
}

int attn_svg_text_columns(const char *s, int len, int max_chars) {
  if (!s || len <= 0) return 0;
  if (max_chars < 1) max_chars = 1;
  int total = count_chars(s, len), keep = total <= max_chars ? total : max_chars - 1, cols = 0;
  for (int i = 0, n = 0; i < len && n < keep; n++) {
    unsigned cp;
    i += utf8_decode((const unsigned char *)s + i, len - i, &cp);
    cols += is_wide(cp) ? 2 : 1;
  }
  return cols + (keep < total); /* the ellipsis */
}

int attn_svg_prefix_bytes(const char *s, int len, int max_chars) {
  int i = 0;
  for (int n = 0; i < len && n < max_chars; n++) {
    unsigned cp;
    i += utf8_decode((const unsigned char *)s + i, len - i, &cp);
  }
  return i;
}

int attn_svg_text(sqlite3_str *out, const char *s, int len, int max_chars) {
  if (!s || len <= 0) return 0;
  if (max_chars < 1) max_chars = 1;
  int total = count_chars(s, len), keep = total <= max_chars ? total : max_chars - 1, n = 0;
  for (int i = 0; i < len && n < keep; n++) {
    unsigned cp;
    i += utf8_decode((const unsigned char *)s + i, len - i, &cp);
    append_cp(out, xml_char(cp));
  }
  if (keep < total) {
    append_cp(out, 0x2026); /* … */
    n++;
  }
  return n;
}

double attn_svg_mono_width(int n, double size) {
  return n * size * 0.6021; /* DejaVu Sans Mono's advance, 1233/2048 em */
}

/* ColorBrewer "Reds", 9 classes: white for no attention, dark red for the most. */
static const unsigned char scale[9][3] = {{255, 245, 240}, {254, 224, 210}, {252, 187, 161},
                                          {252, 146, 114}, {251, 106, 74},  {239, 59, 44},
                                          {203, 24, 29},   {165, 15, 21},   {103, 0, 13}};

void attn_svg_color(char *out, double t) {
  if (!(t >= 0)) t = 0; /* NaN too */
  if (t > 1) t = 1;
  double x = t * 8;
  int i = (int)x;
  if (i > 7) i = 7;
  double f = x - i;
  int rgb[3];
  for (int k = 0; k < 3; k++)
    rgb[k] = (int)lround(scale[i][k] + f * (scale[i + 1][k] - scale[i][k]));
  static const char hex[] = "0123456789abcdef";
  out[0] = '#';
  for (int k = 0; k < 3; k++) {
    out[1 + 2 * k] = hex[rgb[k] >> 4];
    out[2 + 2 * k] = hex[rgb[k] & 15];
  }
  out[7] = 0;
}

const char *attn_svg_ink(double t) { return t > 0.55 ? "#ffffff" : "#1a1a1a"; }

void attn_svg_begin(sqlite3_str *out, int width, int height, const char *title, int title_len) {
  sqlite3_str_appendf(out,
                      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                      "viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, Verdana, sans-serif\">\n"
                      "<title>",
                      width, height, width, height);
  if (title) attn_svg_text(out, title, title_len < 0 ? (int)strlen(title) : title_len, 400);
  sqlite3_str_appendf(out, "</title>\n<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", width,
                      height);
}

void attn_svg_legend(sqlite3_str *out, double x, double y, double w, double lo, double hi,
                     const char *caption) {
  sqlite3_str_appendall(out, "<defs><linearGradient id=\"attn-scale\" x1=\"0\" x2=\"1\" y1=\"0\" "
                             "y2=\"0\">");
  for (int i = 0; i <= 8; i++) {
    char c[8];
    attn_svg_color(c, i / 8.0);
    sqlite3_str_appendf(out, "<stop offset=\"%.3f\" stop-color=\"%s\"/>", i / 8.0, c);
  }
  sqlite3_str_appendall(out, "</linearGradient></defs>\n");
  sqlite3_str_appendf(out,
                      "<g font-size=\"11\" fill=\"#333333\">"
                      "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"10\" "
                      "fill=\"url(#attn-scale)\" stroke=\"#999999\" stroke-width=\"0.5\"/>"
                      "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"start\">%.3f</text>"
                      "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.3f</text>"
                      "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">",
                      x, y, w, x, y + 23, lo, x + w, y + 23, hi, x + w / 2, y + 23);
  attn_svg_text(out, caption, (int)strlen(caption), 60);
  sqlite3_str_appendall(out, "</text></g>\n");
}

void attn_svg_result(sqlite3_context *ctx, sqlite3_str *out) {
  sqlite3_str_appendall(out, "</svg>\n");
  int rc = sqlite3_str_errcode(out);
  int len = sqlite3_str_length(out);
  char *svg = sqlite3_str_finish(out);
  if (rc != SQLITE_OK || !svg) {
    sqlite3_free(svg);
    if (rc == SQLITE_TOOBIG) sqlite3_result_error_toobig(ctx);
    else sqlite3_result_error_nomem(ctx);
    return;
  }
  sqlite3_result_text(ctx, svg, len, sqlite3_free);
}
