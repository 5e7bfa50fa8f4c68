/* attn_vtab.c -- plumbing every SQL feature of the extension shares: registering a function or
 * a table-valued function with the connection's state, the common parts of a virtual table
 * (xConnect, xBestIndex, xOpen, xDisconnect), one place that formats errors (an engine status as
 * SQLite's too), the model name argument check, JSON strings and float32 BLOBs. Registers nothing
 * itself (attnext.c does). Also the engine's allocator, attn_mem. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn_ext.h"
#include "json.h"

static void *attn_mem_alloc(void *ctx, size_t n) {
  (void)ctx;
  return sqlite3_malloc64((sqlite3_uint64)n);
}
static void *attn_mem_resize(void *ctx, void *p, size_t n) {
  (void)ctx;
  return sqlite3_realloc64(p, (sqlite3_uint64)n);
}
static void attn_mem_release(void *ctx, void *p) {
  (void)ctx;
  sqlite3_free(p);
}
const nn_allocator attn_mem = {attn_mem_alloc, attn_mem_resize, attn_mem_release, NULL};

static void attn_vtab_error(sqlite3_vtab *vtab, char *msg /* sqlite3_malloc'd, taken */) {
  sqlite3_free(vtab->zErrMsg);
  vtab->zErrMsg = msg;
}

int attn_error_code(int rc) {
  /* Python's sqlite3 raises a bare MemoryError('') for SQLITE_NOMEM, dropping the message that
   * says which function ran out and doing what ("attn_fit: out of memory creating the model"):
   * the message carries the meaning, SQLITE_ERROR carries it to every client. SQLite's own
   * allocation failures still end the statement with SQLITE_NOMEM. */
  return rc == SQLITE_NOMEM ? SQLITE_ERROR : rc;
}

int attn_vtab_fail(sqlite3_vtab *vtab, int rc, char *msg, const char *fn) {
  attn_vtab_error(vtab, msg ? msg : sqlite3_mprintf("%s: out of memory", fn));
  return attn_error_code(rc);
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

int attn_create_function(sqlite3 *db, attn_conn *conn, const char *name, int nargs, int flags,
                         void (*func)(sqlite3_context *, int, sqlite3_value **)) {
  attn_conn_ref(conn); /* released by SQLite through attn_conn_unref, also on failure */
  return sqlite3_create_function_v2(db, name, nargs, SQLITE_UTF8 | flags, conn, func, NULL, NULL,
                                    attn_conn_unref);
}

int attn_create_module(sqlite3 *db, attn_conn *conn, const char *name,
                       const sqlite3_module *module) {
  attn_conn_ref(conn); /* released by SQLite through attn_conn_unref, also on failure */
  return sqlite3_create_module_v2(db, name, module, conn, attn_conn_unref);
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

int attn_vtab_connect(sqlite3 *db, const char *schema, int config, void *conn, int mode,
                      size_t cursor_size, sqlite3_vtab **out) {
  int rc = sqlite3_declare_vtab(db, schema);
  if (rc != SQLITE_OK) return rc;
  attn_vtab *vtab = sqlite3_malloc64(sizeof *vtab);
  if (!vtab) return SQLITE_NOMEM;
  memset(vtab, 0, sizeof *vtab);
  vtab->conn = conn;
  vtab->mode = mode;
  vtab->cursor_size = cursor_size;
  sqlite3_vtab_config(db, config);
  *out = &vtab->base;
  return SQLITE_OK;
}

int attn_vtab_disconnect(sqlite3_vtab *vtab) {
  sqlite3_free(vtab);
  return SQLITE_OK;
}

int attn_vtab_open(sqlite3_vtab *vtab, sqlite3_vtab_cursor **out) {
  size_t size = ((attn_vtab *)vtab)->cursor_size;
  sqlite3_vtab_cursor *cur = sqlite3_malloc64(size);
  if (!cur) return SQLITE_NOMEM;
  memset(cur, 0, size);
  *out = cur;
  return SQLITE_OK;
}

int attn_vtab_best_index(sqlite3_vtab *vtab, sqlite3_index_info *info, int first_arg, int nargs,
                         int nrequired, const char *usage) {
  int idx[16], unusable = 0, mask = 0, n = 0;
  for (int a = 0; a < nargs; a++) idx[a] = -1;
  for (int i = 0; i < info->nConstraint; i++) {
    const struct sqlite3_index_constraint *c = &info->aConstraint[i];
    int a = c->iColumn - first_arg;
    if (a < 0 || a >= nargs || c->op != SQLITE_INDEX_CONSTRAINT_EQ) continue;
    if (!c->usable) unusable |= 1 << a;
    else idx[a] = i;
  }
  for (int a = 0; a < nargs; a++) {
    if (idx[a] < 0) continue;
    info->aConstraintUsage[idx[a]].argvIndex = ++n;
    info->aConstraintUsage[idx[a]].omit = 1;
    mask |= 1 << a;
  }
  /* An argument that is there but not usable in this plan: ask for another plan. */
  if (unusable & ~mask) return SQLITE_CONSTRAINT;
  for (int a = 0; a < nrequired; a++) {
    if (!(mask & (1 << a))) {
      attn_vtab_error(vtab, sqlite3_mprintf("%s", usage));
      return SQLITE_ERROR;
    }
  }
  info->idxNum = mask;
  info->estimatedCost = 10;
  info->estimatedRows = 100;
  return SQLITE_OK;
}

int attn_name_value(const char *fn, sqlite3_value *v, const char **name, char **errmsg) {
  const char *s = v ? (const char *)sqlite3_value_text(v) : NULL;
  *name = NULL;
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
