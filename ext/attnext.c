/* attnext.c -- entry point of the attnext SQLite extension: registers every SQL function and
 * table-valued function, and serves attn_version(). Helpers shared by the ext/ files live here.
 *
 *   .load ./attnext
 *   SELECT attn_version();
 *   -- attnext 0.1.0; backends: cpu (OpenBLAS 0.3.21, 2 threads); cuda: not built
 *
 * Registered (see each file): attn_train, attn_fit (attn_train.c); attn_predict, attn_probs,
 * attn_weights (attn_predict.c); attn_classify (attn_classify.c); attn_evaluate,
 * attn_confusion (attn_evaluate.c); attn_deploy, attn_import (attn_store.c); attn_version (here);
 * SVG functions (attn_viz.c).
 */
#include <string.h>
#ifndef _WIN32
#include <dlfcn.h>
#endif

#include "attn_ext.h"
SQLITE_EXTENSION_INIT1

/* attn_version() -> text: version, backends, BLAS, CUDA device. */
static void attn_version_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  char buf[512];
  buf[0] = 0;
  nn_version_string(buf, sizeof buf);
  sqlite3_result_text(ctx, buf, -1, SQLITE_TRANSIENT);
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

int attn_prepare_query(sqlite3 *db, const char *fn, const char *sql, int min_cols,
                       const char *cols, sqlite3_stmt **out, char **errmsg) {
  sqlite3_stmt *stmt = NULL;
  const char *tail = NULL;
  *out = NULL;
  if (!sql) {
    *errmsg = sqlite3_mprintf("%s: the query must be text (a SELECT statement)", fn);
    return SQLITE_ERROR;
  }
  if (sqlite3_prepare_v2(db, sql, -1, &stmt, &tail) != SQLITE_OK) {
    *errmsg = sqlite3_mprintf("%s: cannot prepare the query: %s", fn, sqlite3_errmsg(db));
    return SQLITE_ERROR;
  }
  if (!stmt) {
    *errmsg = sqlite3_mprintf("%s: the query is empty", fn);
    return SQLITE_ERROR;
  }
  /* Anything after the statement must be empty to SQLite itself: preparing it yields no
   * statement exactly when it holds only white space, semicolons and comments. */
  int more = 0;
  while (tail && *tail && !more) {
    sqlite3_stmt *next = NULL;
    const char *after = NULL;
    if (sqlite3_prepare_v2(db, tail, -1, &next, &after) != SQLITE_OK || next) more = 1;
    else if (after == tail) break;
    else tail = after;
    sqlite3_finalize(next);
  }
  if (more) {
    while (*tail == ' ' || *tail == '\t' || *tail == '\n' || *tail == '\r' || *tail == ';') tail++;
    sqlite3_finalize(stmt);
    *errmsg = sqlite3_mprintf("%s: the query must be a single statement, found more after it: %.40s",
                              fn, tail);
    return SQLITE_ERROR;
  }
  /* A parameter (?, ?1, :name, @name, $name) would be NULL: nothing binds it. */
  if (sqlite3_bind_parameter_count(stmt) > 0) {
    const char *param = sqlite3_bind_parameter_name(stmt, 1); /* owned by stmt */
    *errmsg = sqlite3_mprintf("%s: the query has parameters (%s); nothing binds them here: put "
                              "the values in the query text (e.g. with format() or quote()) or "
                              "in a table it reads",
                              fn, param ? param : "?");
    sqlite3_finalize(stmt);
    return SQLITE_ERROR;
  }
  if (!sqlite3_stmt_readonly(stmt)) {
    sqlite3_finalize(stmt);
    *errmsg = sqlite3_mprintf("%s: the query must be read-only (a SELECT)", fn);
    return SQLITE_ERROR;
  }
  if (sqlite3_column_count(stmt) < min_cols) {
    int n = sqlite3_column_count(stmt);
    sqlite3_finalize(stmt);
    *errmsg = sqlite3_mprintf("%s: the query must return at least %d columns %s, it returns %d",
                              fn, min_cols, cols, n);
    return SQLITE_ERROR;
  }
  *out = stmt;
  return SQLITE_OK;
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

int attn_vtab_connect(sqlite3 *db, const char *schema, size_t size, int config,
                      sqlite3_vtab **out) {
  int rc = sqlite3_declare_vtab(db, schema);
  if (rc != SQLITE_OK) return rc;
  sqlite3_vtab *vtab = sqlite3_malloc64(size);
  if (!vtab) return SQLITE_NOMEM;
  memset(vtab, 0, size);
  sqlite3_vtab_config(db, config);
  *out = vtab;
  return SQLITE_OK;
}

int attn_vtab_disconnect(sqlite3_vtab *vtab) {
  sqlite3_free(vtab);
  return SQLITE_OK;
}

int attn_vtab_cursor_new(size_t size, sqlite3_vtab_cursor **out) {
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
    if (!c->usable)
      unusable |= 1 << a;
    else
      idx[a] = i;
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

void attn_vtab_error(sqlite3_vtab *vtab, char *msg) {
  sqlite3_free(vtab->zErrMsg);
  vtab->zErrMsg = msg;
}

#ifdef _WIN32
__declspec(dllexport)
#endif
int sqlite3_attnext_init(sqlite3 *db, char **pzErrMsg, const sqlite3_api_routines *pApi) {
  SQLITE_EXTENSION_INIT2(pApi);
  attn_conn *conn = attn_conn_create(db);
  if (!conn) return SQLITE_NOMEM;
  int rc = attn_create_function(db, conn, "attn_version", 0,
                                SQLITE_INNOCUOUS | SQLITE_DETERMINISTIC, attn_version_func);
  if (rc == SQLITE_OK) rc = attn_store_register(db, conn);
  if (rc == SQLITE_OK) rc = attn_predict_register(db, conn);
  if (rc == SQLITE_OK) rc = attn_classify_register(db, conn);
  if (rc == SQLITE_OK) rc = attn_train_register(db, conn);
  if (rc == SQLITE_OK) rc = attn_evaluate_register(db, conn);
  if (rc == SQLITE_OK) rc = attn_viz_register(db, conn);
  if (rc != SQLITE_OK && pzErrMsg)
    *pzErrMsg = sqlite3_mprintf("attnext: cannot register the SQL functions: %s",
                                sqlite3_errmsg(db));
#ifndef _WIN32
  if (rc != SQLITE_OK) {
    /* SQLite unloads the library after a failed init, but the functions registered before the
     * failure (out of memory) stay registered and their destructors run at sqlite3_close:
     * keep the code mapped (one more reference, never released) so that nothing jumps into
     * unmapped memory. */
    Dl_info info;
    if (dladdr((void *)sqlite3_attnext_init, &info) && info.dli_fname)
      (void)dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  }
#endif
  attn_conn_unref(conn);
  return rc;
}
