/* attn_values.c -- SQL values in and out, the same for every SQL function of the extension: the
 * checks of the arguments several functions take (the model name, a probability threshold),
 * numbers as text for messages, SQL values and strings as JSON, float32 BLOBs, and errors as
 * SQLite's (an engine status as a result code and message, a scalar function's error result).
 *
 *   SELECT attn_predict('', 'a headline');
 *   -- attn_predict: the model name must be a non-empty text, got ''
 *   SELECT attn_predict('news', 'a headline', 1.5);
 *   -- attn_predict: min_probability must be a number from 0 to 1, got 1.5
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn_ext.h"
#include "json.h"

int attn_error_code(int rc) {
  /* Python's sqlite3 raises a bare MemoryError('') for SQLITE_NOMEM, dropping the message that
   * says which function ran out and doing what ("attn_fit: out of memory creating the model"):
   * the message carries the meaning, SQLITE_ERROR carries it to every client. SQLite's own
   * allocation failures still end the statement with SQLITE_NOMEM. */
  return rc == SQLITE_NOMEM ? SQLITE_ERROR : rc;
}

int attn_nn_rc(int st) {
  switch (st) {
  case NN_OK: return SQLITE_OK;
  case NN_NOMEM: return SQLITE_NOMEM;
  case NN_INTERRUPTED: return SQLITE_INTERRUPT;
  default: return SQLITE_ERROR;
  }
}

int attn_nn_error(int st, const char *fn, const char *err, char **errmsg) {
  *errmsg = st == NN_INTERRUPTED ? sqlite3_mprintf("%s: interrupted", fn)
                                 : sqlite3_mprintf("%s: %s", fn, err);
  return attn_nn_rc(st);
}

void attn_json_string(sqlite3_str *out, const char *s, int len) {
  static const char hex[] = "0123456789abcdef";
  sqlite3_str_appendchar(out, 1, '"');
  for (int i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      sqlite3_str_appendchar(out, 1, '\\');
      sqlite3_str_appendchar(out, 1, (char)c);
    } else if (c == '\n') {
      sqlite3_str_appendall(out, "\\n");
    } else if (c == '\t') {
      sqlite3_str_appendall(out, "\\t");
    } else if (c == '\r') {
      sqlite3_str_appendall(out, "\\r");
    } else if (c < 0x20) {
      char esc[7] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15], 0};
      sqlite3_str_appendall(out, esc);
    } else {
      sqlite3_str_appendchar(out, 1, (char)c);
    }
  }
  sqlite3_str_appendchar(out, 1, '"');
}

int attn_json_value(nn_strbuf *sb, sqlite3_value *v) {
  char buf[64];
  switch (sqlite3_value_type(v)) {
  case SQLITE_INTEGER:
    sqlite3_snprintf(sizeof buf, buf, "%lld", (long long)sqlite3_value_int64(v));
    break;
  case SQLITE_FLOAT: sqlite3_snprintf(sizeof buf, buf, "%!0.15g", sqlite3_value_double(v)); break;
  case SQLITE_TEXT: {
    const char *text = (const char *)sqlite3_value_text(v);
    if (!text) return SQLITE_NOMEM;
    nn_strbuf_append_json_string(sb, text, (size_t)sqlite3_value_bytes(v));
    return SQLITE_OK;
  }
  case SQLITE_BLOB: return SQLITE_MISMATCH;
  default: sqlite3_snprintf(sizeof buf, buf, "null"); break;
  }
  nn_strbuf_puts(sb, buf);
  return SQLITE_OK;
}

int attn_name_value(const char *fn, sqlite3_value *v, const char **name, char **errmsg) {
  const char *s = v ? (const char *)sqlite3_value_text(v) : NULL;
  *name = NULL;
  if (s && strlen(s) != (size_t)sqlite3_value_bytes(v)) {
    /* read as a C string, 'm' || char(0) || 'x' would be the model 'm', trained or served */
    *errmsg = sqlite3_mprintf("%s: the model name must not contain a NUL character", fn);
    return *errmsg ? SQLITE_ERROR : SQLITE_NOMEM;
  }
  if (s && *s) {
    *name = s;
    return SQLITE_OK;
  }
  if (!s && v && sqlite3_value_type(v) != SQLITE_NULL) return SQLITE_NOMEM; /* text conversion */
  *errmsg =
      sqlite3_mprintf("%s: the model name must be a non-empty text, got %s", fn, s ? "''" : "NULL");
  return *errmsg ? SQLITE_ERROR : SQLITE_NOMEM;
}

const char *attn_number_text(char out[32], double x) {
  /* %g's 6 digits print 1.0000000000000002 as 1, a value the range allows: 15 digits when they
   * read back as x (0.1 stays 0.1), else 17. SQLite's printf stops at 16 digits without the !
   * flag. (Under a locale whose decimal point is not '.', strtod reads less and the 17 digits
   * are printed: still x.) */
  sqlite3_snprintf(32, out, "%.15g", x);
  if (strtod(out, NULL) != x) sqlite3_snprintf(32, out, "%!.17g", x);
  return out;
}

int attn_probability_value(const char *fn, const char *arg, sqlite3_value *v, double *out,
                           char **errmsg) {
  int type = v ? sqlite3_value_numeric_type(v) : SQLITE_NULL; /* '0.5' reads as 0.5 */
  if (type == SQLITE_INTEGER || type == SQLITE_FLOAT) {
    double x = sqlite3_value_double(v);
    if (x >= 0 && x <= 1) {    /* false for NaN */
      *out = x == 0 ? 0.0 : x; /* -0.0 is 0: never reported back as -0.0 */
      return SQLITE_OK;
    }
    char got[32];
    if (type == SQLITE_INTEGER) /* as given, every digit */
      sqlite3_snprintf(sizeof got, got, "%lld", (long long)sqlite3_value_int64(v));
    else attn_number_text(got, x);
    *errmsg = sqlite3_mprintf("%s: %s must be a number from 0 to 1, got %s", fn, arg, got);
  } else if (type == SQLITE_TEXT) {
    const char *s = (const char *)sqlite3_value_text(v);
    int len = sqlite3_value_bytes(v);
    *errmsg = sqlite3_mprintf("%s: %s must be a number from 0 to 1, got '%.*s%s'", fn, arg,
                              attn_svg_prefix_bytes(s, len, 40), s ? s : "",
                              attn_svg_prefix_bytes(s, len, 40) < len ? "..." : "");
  } else {
    *errmsg = sqlite3_mprintf("%s: %s must be a number from 0 to 1, got %s", fn, arg,
                              type == SQLITE_NULL ? "NULL" : "a BLOB");
  }
  return *errmsg ? SQLITE_ERROR : SQLITE_NOMEM;
}

void attn_result_error(sqlite3_context *ctx, int rc, char *msg, const char *fn) {
  if (msg) {
    sqlite3_result_error(ctx, msg, -1);
  } else {
    char buf[96];
    sqlite3_snprintf(sizeof buf, buf, "%s: out of memory", fn);
    sqlite3_result_error(ctx, buf, -1);
  }
  if (attn_error_code(rc) != SQLITE_ERROR) sqlite3_result_error_code(ctx, rc);
  sqlite3_free(msg);
}

void attn_floats_from_le(float *out, const unsigned char *blob, int n) {
  for (int k = 0; k < n; k++) {
    uint32_t bits = (uint32_t)blob[4 * k] | (uint32_t)blob[4 * k + 1] << 8 |
                    (uint32_t)blob[4 * k + 2] << 16 | (uint32_t)blob[4 * k + 3] << 24;
    memcpy(&out[k], &bits, 4);
  }
}

void attn_floats_to_le(unsigned char *out, const float *in, int n) {
  for (int k = 0; k < n; k++) {
    uint32_t bits;
    memcpy(&bits, &in[k], 4);
    out[4 * k] = (unsigned char)bits;
    out[4 * k + 1] = (unsigned char)(bits >> 8);
    out[4 * k + 2] = (unsigned char)(bits >> 16);
    out[4 * k + 3] = (unsigned char)(bits >> 24);
  }
}
