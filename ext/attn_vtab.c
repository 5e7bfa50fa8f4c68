/* attn_vtab.c -- the virtual-table plumbing every table-valued function of the extension
 * shares: the common parts of its virtual table (xConnect, xBestIndex, xOpen, xDisconnect) and
 * the one place a cursor's error becomes the table's message. Registers nothing itself
 * (attnext.c does, through attn_create_module of attn_conn.c).
 *
 *   SELECT label, probability FROM attn_probs('news', 'Kessler Trucks shares tumble');
 *   -- xBestIndex: 'news' and the text are the hidden argument columns, both required
 */
#include <string.h>

#include "attn_ext.h"

static void attn_vtab_error(sqlite3_vtab *vtab, char *msg /* sqlite3_malloc'd, taken */) {
  sqlite3_free(vtab->zErrMsg);
  vtab->zErrMsg = msg;
}

int attn_vtab_fail(sqlite3_vtab *vtab, int rc, char *msg, const char *fn) {
  attn_vtab_error(vtab, msg ? msg : sqlite3_mprintf("%s: out of memory", fn));
  return attn_error_code(rc);
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
