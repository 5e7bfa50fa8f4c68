/* attn_store_check.c -- checking the model store's tables (attn_models, attn_training_log,
 * attn_versions, attn_lineage) of a database that may come from elsewhere, before the extension
 * reads or writes them: each is absent, or an ordinary rowid table with the columns and PRIMARY
 * KEY of sql/schema.sql; anything else is refused with an error naming the table and the
 * problem.
 *
 *   SELECT attn_predict('news', 'a text');  -- on a database whose attn_models is a view:
 *   --  Error: attn_predict: attn_models is a view, not a model store table this extension wrote
 *   --  (expected an ordinary table with the columns of sql/schema.sql and
 *   --  PRIMARY KEY(name, version))
 *
 * attn_store_read_begin (attn_conn.c) runs the check before a read and remembers it while the
 * database is unchanged, or while the tables' definitions (attn_store_fingerprint) are the same
 * text; the writers (attn_store.c) run it before a save.
 */
#include <string.h>

#include "attn_ext.h"

/* The columns the extension reads or writes; pk: position in the PRIMARY KEY (0: not in it). */
typedef struct attn_store_column {
  const char *name;
  int pk;
} attn_store_column;

/* clang-format off */
static const attn_store_column attn_models_columns[] = {
    {"name", 1},   {"version", 2}, {"created_at", 0}, {"deployed", 0}, {"deployed_seq", 0},
    {"config", 0}, {"labels", 0},  {"metrics", 0},    {"weights", 0},  {NULL, 0}};
static const attn_store_column attn_log_columns[] = {
    {"name", 1},       {"version", 2},  {"epoch", 3},        {"train_loss", 0}, {"val_loss", 0},
    {"val_accuracy", 0}, {"val_f1", 0}, {"lr", 0},           {"seconds", 0},    {NULL, 0}};
static const attn_store_column attn_versions_columns[] = {
    {"name", 1}, {"last_version", 0}, {NULL, 0}};
static const attn_store_column attn_lineage_columns[] = {
    {"name", 1},          {"version", 2},         {"function", 0},   {"query", 0},
    {"rows", 0},          {"rows_sha256", 0},     {"validation_query", 0},
    {"validation_rows", 0}, {"validation_sha256", 0}, {"options", 0}, {"from_name", 0},
    {"from_version", 0},  {"attnext", 0},         {"backend", 0},    {"started_at", 0},
    {"ended_at", 0},      {NULL, 0}};
/* clang-format on */

/* One table of the store: absent (*exists = 0), or an ordinary rowid table of main (not a view,
 * not a virtual table) with the expected columns, none of them generated, and exactly the
 * expected PRIMARY KEY -- anything else is refused: reading a view, a virtual table or a
 * generated column runs code the database chose (possibly our own functions again), and a table
 * without the key would let two rows claim the same version. */
static int attn_store_check_table(sqlite3 *db, const char *fn, const char *table,
                                  const attn_store_column *cols, int *exists, char **errmsg) {
  sqlite3_stmt *stmt = NULL;
  const char *problem = NULL;
  char *detail = NULL;
  int rc = sqlite3_prepare_v2(db,
                              "SELECT type, rootpage, sql LIKE 'CREATE VIRTUAL%' "
                              "FROM main.sqlite_schema WHERE type IN ('table', 'view') "
                              "AND name = ?1 COLLATE NOCASE",
                              -1, &stmt, NULL);
  *exists = 0;
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(stmt, 1, table, -1, SQLITE_STATIC);
    rc = sqlite3_step(stmt);
  }
  if (rc == SQLITE_DONE) {
    sqlite3_finalize(stmt);
    return SQLITE_OK;
  }
  if (rc != SQLITE_ROW) {
    *errmsg =
        sqlite3_mprintf("%s: cannot read the schema of %s: %s", fn, table, sqlite3_errmsg(db));
    sqlite3_finalize(stmt);
    return rc == SQLITE_OK ? SQLITE_ERROR : rc;
  }
  *exists = 1;
  const char *type = (const char *)sqlite3_column_text(stmt, 0);
  if (!type || strcmp(type, "table") != 0) problem = "is a view";
  else if (sqlite3_column_int(stmt, 2) || sqlite3_column_int64(stmt, 1) <= 0)
    problem = "is a virtual table";
  sqlite3_finalize(stmt);
  stmt = NULL;
  /* a rowid table (the lookups read rowid), whose rowid no column hides */
  if (!problem && sqlite3_table_column_metadata(db, "main", table, "_rowid_", NULL, NULL, NULL,
                                                NULL, NULL) != SQLITE_OK)
    problem = "is a WITHOUT ROWID table";
  if (!problem) {
    rc = sqlite3_prepare_v2(db, "SELECT name, pk, hidden FROM pragma_table_xinfo(?1, 'main')", -1,
                            &stmt, NULL);
    if (rc != SQLITE_OK) {
      *errmsg =
          sqlite3_mprintf("%s: cannot read the schema of %s: %s", fn, table, sqlite3_errmsg(db));
      return rc;
    }
    sqlite3_bind_text(stmt, 1, table, -1, SQLITE_STATIC);
    unsigned found = 0;
    int npk = 0, nexpected_pk = 0;
    while (!problem && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      const char *col = (const char *)sqlite3_column_text(stmt, 0);
      int pk = sqlite3_column_int(stmt, 1), hidden = sqlite3_column_int(stmt, 2);
      if (!col) continue;
      if (hidden != 0) {
        problem = "has a generated column";
        detail = sqlite3_mprintf("%s", col);
        break;
      }
      if (!sqlite3_stricmp(col, "rowid") || !sqlite3_stricmp(col, "oid") ||
          !sqlite3_stricmp(col, "_rowid_")) {
        problem = "has a column that hides the rowid";
        detail = sqlite3_mprintf("%s", col);
        break;
      }
      if (pk) npk++;
      int k = 0;
      for (; cols[k].name && sqlite3_stricmp(cols[k].name, col) != 0; k++) {
      }
      if (!cols[k].name) {
        if (pk) problem = "has a PRIMARY KEY other than the expected one";
        continue; /* a column of the user's own: ignored */
      }
      found |= 1u << k;
      if (pk != cols[k].pk) problem = "has a PRIMARY KEY other than the expected one";
    }
    if (!problem && rc != SQLITE_ROW && rc != SQLITE_DONE) {
      *errmsg =
          sqlite3_mprintf("%s: cannot read the schema of %s: %s", fn, table, sqlite3_errmsg(db));
      sqlite3_finalize(stmt);
      return rc;
    }
    sqlite3_finalize(stmt);
    stmt = NULL;
    for (int k = 0; !problem && cols[k].name; k++) {
      if (cols[k].pk) nexpected_pk++;
      if (!(found & (1u << k))) {
        problem = "lacks a column";
        detail = sqlite3_mprintf("%s", cols[k].name);
      }
    }
    if (!problem && npk != nexpected_pk) problem = "has a PRIMARY KEY other than the expected one";
  }
  if (!problem) return SQLITE_OK;
  /* the expected key, e.g. "PRIMARY KEY(name, version)" */
  char key[96] = "PRIMARY KEY(";
  for (int pos = 1; pos <= 3; pos++)
    for (int k = 0; cols[k].name; k++)
      if (cols[k].pk == pos) {
        if (pos > 1) strcat(key, ", ");
        strcat(key, cols[k].name);
      }
  strcat(key, ")");
  *errmsg = sqlite3_mprintf("%s: %s %s%s%s%s, not a model store table this extension wrote "
                            "(expected an ordinary table with the columns of sql/schema.sql and "
                            "%s)",
                            fn, table, problem, detail ? " '" : "", detail ? detail : "",
                            detail ? "'" : "", key);
  sqlite3_free(detail);
  return SQLITE_ERROR;
}

int attn_store_check(sqlite3 *db, const char *fn, int *models_exist, char **errmsg) {
  int exists = 0, log_exists = 0, other = 0;
  int rc = attn_store_check_table(db, fn, "attn_models", attn_models_columns, &exists, errmsg);
  if (rc == SQLITE_OK)
    rc = attn_store_check_table(db, fn, "attn_training_log", attn_log_columns, &log_exists, errmsg);
  if (rc == SQLITE_OK)
    rc = attn_store_check_table(db, fn, "attn_versions", attn_versions_columns, &other, errmsg);
  if (rc == SQLITE_OK)
    rc = attn_store_check_table(db, fn, "attn_lineage", attn_lineage_columns, &other, errmsg);
  if (models_exist) *models_exist = exists;
  return rc;
}

/* Reads sqlite_schema only: the tables' definitions are compared as text, never run. */
char *attn_store_fingerprint(sqlite3 *db) {
  sqlite3_stmt *stmt = NULL;
  sqlite3_str *fp = sqlite3_str_new(db);
  int rc = sqlite3_prepare_v2(db,
                              "SELECT type, name, sql FROM main.sqlite_schema "
                              "WHERE name LIKE 'attn_models' OR name LIKE 'attn_training_log' "
                              "OR name LIKE 'attn_versions' OR name LIKE 'attn_lineage'",
                              -1, &stmt, NULL);
  while (rc == SQLITE_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    for (int i = 0; i < 3; i++) {
      const char *text = (const char *)sqlite3_column_text(stmt, i);
      sqlite3_str_appendall(fp, text ? text : "");
      sqlite3_str_appendchar(fp, 1, '\n');
    }
    rc = SQLITE_OK;
  }
  sqlite3_finalize(stmt);
  char *out = sqlite3_str_finish(fp);
  if (rc != SQLITE_DONE) {
    sqlite3_free(out);
    return NULL;
  }
  return out ? out : sqlite3_mprintf("");
}
