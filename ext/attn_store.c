/* attn_store.c -- the model store: per-connection state, the model cache, saving a trained or
 * imported model as a new deployed version, and the SQL functions attn_deploy and attn_import.
 *
 *   SELECT attn_deploy('news', 2);        -- version 2 of 'news' predicts from now on -> 2
 *   SELECT attn_import('news', readfile('news.safetensors'));   -- new version, deployed -> 3
 *
 * Tables: sql/schema.sql (a copy is compiled in: attn_schema.h), created by the first write.
 *
 * Cache. A model row is parsed once per connection (nn_model_load) and kept, keyed by name,
 * version and the row's identity (rowid, created_at, size: a row deleted and written again under
 * the same version is a different model). Which version of a name is deployed is looked up with
 * a query, and the answer is remembered while a "database unchanged" stamp holds: the pager's
 * data version (SQLITE_FCNTL_DATA_VERSION: changes on every commit, of this or any other
 * connection, as seen by the current read transaction) plus this connection's change count
 * (sqlite3_total_changes64: writes of its own). Outside a read transaction the data version may
 * be stale, and inside a write transaction a ROLLBACK changes neither number, so there the query
 * runs every time. Scalar functions with a constant name also keep the model with
 * sqlite3_set_auxdata for the rest of the statement, so a row costs tokenize + forward only.
 * (Verified: tests/sql/versions.sql and tests/test_python_sqlite.py, two connections.)
 *
 * Saving (attn_store_save). The model row, the deployed flags and the log rows are written in one
 * transaction that takes the write lock before it reads anything (so that the busy handler, i.e.
 * busy_timeout, applies), in one of four ways:
 *  - no transaction open on the connection: BEGIN IMMEDIATE ... COMMIT (attn_fit, attn_import);
 *  - the calling statement reads main in WAL mode (SELECT * FROM attn_train(...)): its read
 *    snapshot cannot become a write once another connection committed (SQLITE_BUSY_SNAPSHOT,
 *    no busy handler), so the save runs on a second connection to the same file, with the
 *    caller's busy timeout and per-connection limits (attn_store_save_side);
 *  - the calling statement reads in rollback-journal mode (it holds SHARED): SQLite refuses at
 *    once, without the busy handler, while another connection holds RESERVED; the save waits in
 *    short sleeps up to the busy timeout (interruptible) for that writer to give up;
 *  - inside the caller's BEGIN ... COMMIT: SAVEPOINT attn_store, retried the same way.
 * Inside a statement that itself writes (INSERT ... SELECT FROM attn_train(...), CREATE TABLE ...
 * AS) SQLite opens no savepoint; the rows then join that statement's transaction and on error
 * are deleted again by hand, the deployed version restored (attn_store_save_direct).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn_ext.h"
#include "attn_schema.h"

#define ATTN_MEMO_MAX 8  /* remembered name -> deployed model answers */
/* Bytes of parsed models the cache of one connection keeps (attn_cache_limit changes it). */
#define ATTN_CACHE_DEFAULT_BYTES ((int64_t)256 << 20)

struct attn_conn {
  sqlite3 *db;
  int refs;
  attn_model *models; /* the cache, most recently used first; each holds one reference */
  /* name -> deployed model answers, valid while the stamp is unchanged; each holds a ref */
  int memo_valid;
  int64_t memo_data_version, memo_changes;
  int nmemo;
  char *memo_name[ATTN_MEMO_MAX];
  attn_model *memo_model[ATTN_MEMO_MAX];
  attn_model *memo_default;
  int64_t cache_limit;    /* bytes (attn_model_cost) the cache may keep; the model in use stays */
  nn_workspace *ws;
  int store_depth;        /* > 0 while the store tables are read (attn_store_read_begin) */
  int checked;            /* the store's schema passed attn_store_check at this stamp: */
  int checked_exists;     /* ... and attn_models exists */
  char *checked_fingerprint; /* the store's CREATE statements when it last passed the check */
  int64_t checked_data_version, checked_changes;
  int query_depth;        /* > 0 while a function's query is stepped (attn_conn_query_begin) */
  const char *query_fn;   /* the function whose query it is (outermost) */
  char *pending_error;    /* a save that failed where no statement could report it */
};

/* ------------------------------------------------------------------ models */

static void attn_model_free(attn_model *m) {
  if (!m) return;
  nn_model_free(m->nn);
  sqlite3_free(m->name);
  sqlite3_free(m->created_at);
  sqlite3_free(m);
}

void attn_model_release(attn_model *m) {
  if (m && --m->refs == 0) attn_model_free(m);
}

static void attn_model_release_void(void *m) { attn_model_release((attn_model *)m); }

/* ------------------------------------------------------------------ connection state */

static void attn_memo_clear(attn_conn *conn) {
  for (int i = 0; i < conn->nmemo; i++) {
    sqlite3_free(conn->memo_name[i]);
    attn_model_release(conn->memo_model[i]);
  }
  conn->nmemo = 0;
  attn_model_release(conn->memo_default);
  conn->memo_default = NULL;
  conn->memo_valid = 0;
}

attn_conn *attn_conn_create(sqlite3 *db) {
  attn_conn *conn = sqlite3_malloc64(sizeof *conn);
  if (!conn) return NULL;
  memset(conn, 0, sizeof *conn);
  conn->db = db;
  conn->refs = 1;
  conn->cache_limit = ATTN_CACHE_DEFAULT_BYTES;
  return conn;
}

void attn_conn_ref(attn_conn *conn) { conn->refs++; }

void attn_conn_unref(void *p) {
  attn_conn *conn = p;
  if (!conn || --conn->refs > 0) return;
  attn_memo_clear(conn);
  while (conn->models) {
    attn_model *m = conn->models;
    conn->models = m->next;
    m->stale = 1;
    attn_model_release(m);
  }
  nn_workspace_free(conn->ws);
  sqlite3_free(conn->checked_fingerprint);
  sqlite3_free(conn->pending_error);
  sqlite3_free(conn);
}

sqlite3 *attn_conn_db(attn_conn *conn) { return conn->db; }

void attn_conn_query_begin(attn_conn *conn, const char *fn) {
  if (conn->query_depth++ == 0) conn->query_fn = fn;
}

void attn_conn_query_end(attn_conn *conn) {
  if (conn->query_depth > 0 && --conn->query_depth == 0) conn->query_fn = NULL;
}

void attn_conn_set_pending_error(attn_conn *conn, char *msg) {
  sqlite3_free(conn->pending_error);
  conn->pending_error = msg;
}

/* Inside a dqlite node (Raft-replicated SQLite; its VFS is named "dqlite-N"), a transaction is
 * replicated only when it commits inside a statement step that dqlite runs for an EXEC request
 * (dqlite then polls its VFS for the new WAL frames and sends them through Raft) or at an
 * explicit COMMIT, which is such a step. A SELECT in autocommit mode whose function writes
 * commits in the middle of the statement: for a QUERY request dqlite never polls, the frames stay
 * on that node only (lost at failover), and the node's next write aborts the process (dqlite
 * 1.11, vfs.c: assertion "wal->n_tx == 0"). INSERT ... RETURNING commits after its first step:
 * the same. So inside dqlite a model write is allowed only in an explicit transaction, or when a
 * statement that writes and returns no rows (INSERT INTO t SELECT ..., CREATE TABLE t AS SELECT
 * ..., UPDATE) is running and no SELECT is: that statement runs in a single step, and dqlite
 * refuses it as a QUERY (no result columns). */
static int attn_in_dqlite(sqlite3 *db) {
  sqlite3_vfs *vfs = NULL;
  if (sqlite3_file_control(db, "main", SQLITE_FCNTL_VFS_POINTER, &vfs) != SQLITE_OK || !vfs ||
      !vfs->zName)
    return 0;
  return strncmp(vfs->zName, "dqlite-", 7) == 0;
}

static int attn_dqlite_write_replicated(sqlite3 *db) {
  int writer = 0;
  if (!sqlite3_get_autocommit(db)) return 1;
  for (sqlite3_stmt *s = sqlite3_next_stmt(db, NULL); s; s = sqlite3_next_stmt(db, s)) {
    if (!sqlite3_stmt_busy(s)) continue;
    if (sqlite3_column_count(s) > 0) return 0; /* a SELECT or a RETURNING is running */
    if (!sqlite3_stmt_readonly(s)) writer = 1;
  }
  return writer;
}

int attn_conn_check_write(attn_conn *conn, const char *fn, char **errmsg) {
  if (conn->pending_error) {
    *errmsg = sqlite3_mprintf("%s: not run, to report that an earlier training of this "
                              "connection was lost: %s; run this call again", fn,
                              conn->pending_error);
    sqlite3_free(conn->pending_error);
    conn->pending_error = NULL;
    return SQLITE_ERROR;
  }
  if (conn->query_depth > 0) {
    *errmsg = sqlite3_mprintf("%s: cannot write the model store from inside the query of %s "
                              "(its query must be read-only)",
                              fn, conn->query_fn ? conn->query_fn : "another function");
    return SQLITE_ERROR;
  }
  if (attn_in_dqlite(conn->db) && !attn_dqlite_write_replicated(conn->db)) {
    *errmsg = sqlite3_mprintf(
        "%s: inside dqlite this write would commit outside Raft (not replicated): run it in an "
        "explicit transaction (BEGIN; SELECT ...; COMMIT -- the dqlite shell does) or inside a "
        "statement that writes (INSERT INTO t SELECT ...)",
        fn);
    return SQLITE_ERROR;
  }
  return SQLITE_OK;
}

nn_workspace *attn_conn_workspace(attn_conn *conn, char **errmsg) {
  if (!conn->ws) {
    char err[NN_ERR_LEN] = "";
    if (nn_workspace_create(&conn->ws, err) != NN_OK) {
      *errmsg = sqlite3_mprintf("%s", err);
      conn->ws = NULL;
      return NULL;
    }
  }
  return conn->ws;
}

/* The "database unchanged" stamp; 0 when it cannot be trusted. Only in a read transaction:
 * with none open the data version may be stale, and in a write transaction a ROLLBACK (TO)
 * could undo writes without changing either number. */
static int attn_stamp(sqlite3 *db, int64_t *data_version, int64_t *changes) {
  int v = 0;
  if (sqlite3_txn_state(db, "main") != SQLITE_TXN_READ) return 0;
  if (sqlite3_file_control(db, "main", SQLITE_FCNTL_DATA_VERSION, &v) != SQLITE_OK) return 0;
  *data_version = (unsigned)v;
  *changes = sqlite3_total_changes64(db);
  return 1;
}

/* Drop a cache entry (it lives on while referenced). */
static void attn_cache_drop(attn_conn *conn, attn_model *m) {
  for (attn_model **p = &conn->models; *p; p = &(*p)->next) {
    if (*p == m) {
      *p = m->next;
      m->next = NULL;
      m->stale = 1;
      attn_model_release(m);
      return;
    }
  }
}

/* Bytes model m takes, as the cache counts them (every byte bound of the cache goes through
 * here): what the engine says the parsed model holds in host and device memory (parameters,
 * inference tables, vocabulary, labels), which the load prepared in full. */
static int64_t attn_model_cost(const attn_model *m) {
  size_t bytes = nn_model_memory(m->nn) + nn_model_device_memory(m->nn);
  return bytes > 0 ? (int64_t)bytes : 1;
}

/* Forget the remembered answers that point at m (their references released). */
static void attn_memo_forget(attn_conn *conn, attn_model *m) {
  if (conn->memo_default == m) {
    attn_model_release(m);
    conn->memo_default = NULL;
  }
  for (int i = 0; i < conn->nmemo;) {
    if (conn->memo_model[i] != m) {
      i++;
      continue;
    }
    sqlite3_free(conn->memo_name[i]);
    attn_model_release(m);
    conn->nmemo--;
    conn->memo_name[i] = conn->memo_name[conn->nmemo];
    conn->memo_model[i] = conn->memo_model[conn->nmemo];
  }
}

/* Move m to the front of the cache (most recently used). */
static void attn_cache_touch(attn_conn *conn, attn_model *m) {
  for (attn_model **p = &conn->models; *p; p = &(*p)->next) {
    if (*p == m) {
      *p = m->next;
      m->next = conn->models;
      conn->models = m;
      return;
    }
  }
}

/* Keep the most recently used models whose costs add up to at most conn->cache_limit bytes, and
 * always the first (the one in use, however large); drop the others, least recently used first
 * (a model still referenced by a cursor or a statement lives on until released). */
static void attn_cache_trim(attn_conn *conn) {
  int64_t total = 0;
  attn_model *m = conn->models, *next;
  for (int first = 1; m; m = next, first = 0) {
    next = m->next;
    int64_t cost = attn_model_cost(m);
    if (!first && cost > conn->cache_limit - total) {
      attn_memo_forget(conn, m);
      attn_cache_drop(conn, m);
      continue;
    }
    total += cost;
  }
}

/* attn_cache_limit() -> bytes; attn_cache_limit(bytes) -> bytes: the most bytes of parsed models
 * this connection keeps between calls (default 256 MB); setting it evicts at once. */
static void attn_cache_limit_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  attn_conn *conn = sqlite3_user_data(ctx);
  if (argc == 1) {
    if (sqlite3_value_numeric_type(argv[0]) != SQLITE_INTEGER || sqlite3_value_int64(argv[0]) < 0) {
      char *msg = sqlite3_mprintf("attn_cache_limit: the limit must be an integer number of bytes "
                                  ">= 0, got '%s'",
                                  sqlite3_value_type(argv[0]) == SQLITE_NULL
                                      ? "NULL" : (const char *)sqlite3_value_text(argv[0]));
      sqlite3_result_error(ctx, msg ? msg : "attn_cache_limit: out of memory", -1);
      sqlite3_free(msg);
      return;
    }
    conn->cache_limit = sqlite3_value_int64(argv[0]);
    attn_cache_trim(conn);
  }
  sqlite3_result_int64(ctx, conn->cache_limit);
}

int attn_cache_register(sqlite3 *db, attn_conn *conn) {
  /* direct-only: a view of a database could otherwise lift the bound */
  int rc = attn_create_function(db, conn, "attn_cache_limit", 0, SQLITE_DIRECTONLY,
                                attn_cache_limit_func);
  if (rc == SQLITE_OK)
    rc = attn_create_function(db, conn, "attn_cache_limit", 1, SQLITE_DIRECTONLY,
                              attn_cache_limit_func);
  return rc;
}

/* ------------------------------------------------------------------ checking the store */

/* The columns the extension reads or writes; pk: position in the PRIMARY KEY (0: not in it). */
typedef struct attn_store_column {
  const char *name;
  int pk;
} attn_store_column;

static const attn_store_column attn_models_columns[] = {
    {"name", 1},   {"version", 2}, {"created_at", 0}, {"deployed", 0}, {"deployed_seq", 0},
    {"config", 0}, {"labels", 0},  {"metrics", 0},    {"weights", 0},  {NULL, 0}};
static const attn_store_column attn_log_columns[] = {
    {"name", 1},       {"version", 2},  {"epoch", 3},        {"train_loss", 0}, {"val_loss", 0},
    {"val_accuracy", 0}, {"val_f1", 0}, {"lr", 0},           {"seconds", 0},    {NULL, 0}};

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
    *errmsg = sqlite3_mprintf("%s: cannot read the schema of %s: %s", fn, table,
                              sqlite3_errmsg(db));
    sqlite3_finalize(stmt);
    return rc == SQLITE_OK ? SQLITE_ERROR : rc;
  }
  *exists = 1;
  const char *type = (const char *)sqlite3_column_text(stmt, 0);
  if (!type || strcmp(type, "table") != 0)
    problem = "is a view";
  else if (sqlite3_column_int(stmt, 2) || sqlite3_column_int64(stmt, 1) <= 0)
    problem = "is a virtual table";
  sqlite3_finalize(stmt);
  stmt = NULL;
  /* a rowid table (the lookups read rowid), whose rowid no column hides */
  if (!problem && sqlite3_table_column_metadata(db, "main", table, "_rowid_", NULL, NULL, NULL,
                                                NULL, NULL) != SQLITE_OK)
    problem = "is a WITHOUT ROWID table";
  if (!problem) {
    rc = sqlite3_prepare_v2(db,
                            "SELECT name, pk, hidden FROM pragma_table_xinfo(?1, 'main')", -1,
                            &stmt, NULL);
    if (rc != SQLITE_OK) {
      *errmsg = sqlite3_mprintf("%s: cannot read the schema of %s: %s", fn, table,
                                sqlite3_errmsg(db));
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
      for (; cols[k].name && sqlite3_stricmp(cols[k].name, col) != 0; k++) {}
      if (!cols[k].name) {
        if (pk) problem = "has a PRIMARY KEY other than the expected one";
        continue; /* a column of the user's own: ignored */
      }
      found |= 1u << k;
      if (pk != cols[k].pk) problem = "has a PRIMARY KEY other than the expected one";
    }
    if (!problem && rc != SQLITE_ROW && rc != SQLITE_DONE) {
      *errmsg = sqlite3_mprintf("%s: cannot read the schema of %s: %s", fn, table,
                                sqlite3_errmsg(db));
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
  const char *key = cols == attn_models_columns ? "PRIMARY KEY(name, version)"
                                                : "PRIMARY KEY(name, version, epoch)";
  *errmsg = sqlite3_mprintf("%s: %s %s%s%s%s, not a model store table this extension wrote "
                            "(expected an ordinary table with the columns of sql/schema.sql and "
                            "%s)",
                            fn, table, problem, detail ? " '" : "", detail ? detail : "",
                            detail ? "'" : "", key);
  sqlite3_free(detail);
  return SQLITE_ERROR;
}

int attn_store_check(sqlite3 *db, const char *fn, int *models_exist, char **errmsg) {
  int exists = 0, log_exists = 0;
  int rc = attn_store_check_table(db, fn, "attn_models", attn_models_columns, &exists, errmsg);
  if (rc == SQLITE_OK)
    rc = attn_store_check_table(db, fn, "attn_training_log", attn_log_columns, &log_exists,
                                errmsg);
  if (models_exist) *models_exist = exists;
  return rc;
}

/* The definitions of the store's tables as sqlite_schema holds them ("" when neither exists):
 * a table is a function of its CREATE statement, so equal text means an equal check. NULL when
 * it cannot be read (out of memory, ...). sqlite3_malloc'd. */
static char *attn_store_fingerprint(sqlite3 *db) {
  sqlite3_stmt *stmt = NULL;
  sqlite3_str *fp = sqlite3_str_new(db);
  int rc = sqlite3_prepare_v2(db,
                              "SELECT type, name, sql FROM main.sqlite_schema "
                              "WHERE name LIKE 'attn_models' OR name LIKE 'attn_training_log'",
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

int attn_store_read_begin(attn_conn *conn, const char *fn, int *models_exist, char **errmsg) {
  if (conn->store_depth > 0) {
    *errmsg = sqlite3_mprintf("%s: the model store was read again while it was being read (a "
                              "view, trigger or generated column of this database calls attnext)",
                              fn);
    return SQLITE_ERROR;
  }
  /* The check is remembered while the database is unchanged (the stamp: in a read transaction),
   * else while the tables' definitions are the same text. */
  int64_t data_version = 0, changes = 0;
  int stamped = attn_stamp(conn->db, &data_version, &changes);
  if (!(stamped && conn->checked && conn->checked_data_version == data_version &&
        conn->checked_changes == changes)) {
    conn->checked = 0;
    conn->store_depth++; /* the check reads the schema: refuse a call back meanwhile too */
    char *fp = attn_store_fingerprint(conn->db);
    int rc = SQLITE_OK;
    if (!fp || !conn->checked_fingerprint || strcmp(fp, conn->checked_fingerprint) != 0) {
      sqlite3_free(conn->checked_fingerprint);
      conn->checked_fingerprint = NULL;
      rc = attn_store_check(conn->db, fn, &conn->checked_exists, errmsg);
      if (rc == SQLITE_OK) {
        conn->checked_fingerprint = fp;
        fp = NULL;
      }
    }
    sqlite3_free(fp);
    conn->store_depth--;
    if (rc != SQLITE_OK) return rc;
    if (stamped) {
      conn->checked = 1;
      conn->checked_data_version = data_version;
      conn->checked_changes = changes;
    }
  }
  if (models_exist) *models_exist = conn->checked_exists;
  conn->store_depth++;
  return SQLITE_OK;
}

void attn_store_read_end(attn_conn *conn) {
  if (conn->store_depth > 0) conn->store_depth--;
}

/* Is the message from a query on a missing attn_models table? */
static int attn_no_table(sqlite3 *db) {
  return strncmp(sqlite3_errmsg(db), "no such table", 13) == 0;
}

/* Find or load the model in row `rowid`. On success *out is borrowed from the cache. */
static int attn_cache_load(attn_conn *conn, const char *fn, const char *name, int64_t version,
                           int64_t rowid, const char *created_at, int64_t nbytes,
                           attn_model **out, char **errmsg) {
  sqlite3 *db = conn->db;
  for (attn_model **p = &conn->models; *p; p = &(*p)->next) {
    attn_model *m = *p;
    if (m->version != version || strcmp(m->name, name) != 0) continue;
    if (m->rowid == rowid && m->nbytes == nbytes && strcmp(m->created_at, created_at) == 0) {
      *p = m->next; /* move to the front */
      m->next = conn->models;
      conn->models = m;
      *out = m;
      return SQLITE_OK;
    }
    attn_cache_drop(conn, m); /* same version, another row: the old one is gone */
    break;
  }
  sqlite3_stmt *stmt = NULL;
  char err[NN_ERR_LEN] = "";
  attn_model *m = NULL;
  int rc = sqlite3_prepare_v2(db, "SELECT weights FROM main.attn_models WHERE rowid = ?1", -1,
                              &stmt, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_int64(stmt, 1, rowid);
    rc = sqlite3_step(stmt);
  }
  if (rc != SQLITE_ROW) {
    *errmsg = sqlite3_mprintf("%s: cannot read model '%s' version %lld: %s", fn, name,
                              (long long)version, rc == SQLITE_DONE ? "row gone" : sqlite3_errmsg(db));
    rc = rc == SQLITE_DONE ? SQLITE_ERROR : rc;
    goto done;
  }
  m = sqlite3_malloc64(sizeof *m);
  if (!m) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  memset(m, 0, sizeof *m);
  m->name = sqlite3_mprintf("%s", name);
  m->created_at = sqlite3_mprintf("%s", created_at);
  if (!m->name || !m->created_at) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  const unsigned char *blob = sqlite3_column_blob(stmt, 0);
  size_t len = (size_t)sqlite3_column_bytes(stmt, 0);
  if (!blob) len = 0;
  static const unsigned char empty[1] = {0};
  attn_interrupt interrupt = {db, NULL, 0};
  int st = nn_model_load_ex(&m->nn, blob ? blob : empty, len, attn_interrupt_check, &interrupt,
                            err);
  attn_interrupt_end(&interrupt);
  if (st != NN_OK) {
    m->nn = NULL;
    *errmsg = st == NN_INTERRUPTED
                  ? sqlite3_mprintf("%s: interrupted", fn)
                  : sqlite3_mprintf("%s: model '%s' version %lld cannot be loaded: %s", fn, name,
                                    (long long)version, err);
    rc = st == NN_INTERRUPTED ? SQLITE_INTERRUPT : st == NN_NOMEM ? SQLITE_NOMEM : SQLITE_ERROR;
    goto done;
  }
  m->version = version;
  m->rowid = rowid;
  m->nbytes = nbytes;
  m->refs = 1;
  m->next = conn->models;
  conn->models = m;
  attn_cache_trim(conn);
  *out = m;
  m = NULL;
  rc = SQLITE_OK;
done:
  sqlite3_finalize(stmt);
  attn_model_free(m);
  if (rc == SQLITE_NOMEM && !*errmsg) *errmsg = sqlite3_mprintf("%s: out of memory", fn);
  return rc;
}

static int attn_resolve_read(attn_conn *conn, const char *fn, const char *name, int stamped,
                             int64_t data_version, int64_t changes, attn_model **out,
                             char **errmsg);

/* name -> the deployed model (name NULL: the default model). *out is borrowed from the cache.
 * Known limit: a row's weights rewritten in place by UPDATE with the same size, rowid, version
 * and created_at are not noticed by a connection that has parsed them; add a version instead
 * (attn_import), which is what attn_train and attn_import do. */
static int attn_resolve(attn_conn *conn, const char *fn, const char *name, attn_model **out,
                        char **errmsg) {
  sqlite3 *db = conn->db;
  int64_t data_version = 0, changes = 0;
  int stamped = attn_stamp(db, &data_version, &changes);
  *errmsg = NULL;
  if (stamped && conn->memo_valid && conn->memo_data_version == data_version &&
      conn->memo_changes == changes) {
    if (!name && conn->memo_default) {
      *out = conn->memo_default;
      attn_cache_touch(conn, *out);
      return SQLITE_OK;
    }
    for (int i = 0; name && i < conn->nmemo; i++) {
      if (strcmp(conn->memo_name[i], name) == 0) {
        *out = conn->memo_model[i];
        attn_cache_touch(conn, *out);
        return SQLITE_OK;
      }
    }
  } else {
    attn_memo_clear(conn);
  }

  int exists = 0;
  int rc = attn_store_read_begin(conn, fn, &exists, errmsg);
  if (rc != SQLITE_OK) return rc;
  if (!exists) {
    attn_store_read_end(conn);
    *errmsg = name ? sqlite3_mprintf("%s: no model named '%s'", fn, name)
                   : sqlite3_mprintf("%s: no deployed model in this database", fn);
    return SQLITE_ERROR;
  }
  rc = attn_resolve_read(conn, fn, name, stamped, data_version, changes, out, errmsg);
  attn_store_read_end(conn);
  return rc;
}

/* attn_resolve's reading part, inside attn_store_read_begin .. end. */
static int attn_resolve_read(attn_conn *conn, const char *fn, const char *name, int stamped,
                             int64_t data_version, int64_t changes, attn_model **out,
                             char **errmsg) {
  sqlite3 *db = conn->db;
  sqlite3_stmt *stmt = NULL;
  int rc;
  if (name)
    rc = sqlite3_prepare_v2(db,
                            "SELECT rowid, version, created_at, length(weights), name "
                            "FROM main.attn_models WHERE name = ?1 AND deployed = 1 "
                            "ORDER BY version DESC LIMIT 1",
                            -1, &stmt, NULL);
  else
    rc = sqlite3_prepare_v2(db,
                            "SELECT rowid, version, created_at, length(weights), name "
                            "FROM main.attn_models WHERE deployed = 1 "
                            "ORDER BY deployed_seq DESC, rowid DESC LIMIT 1",
                            -1, &stmt, NULL);
  if (rc != SQLITE_OK) {
    *errmsg = sqlite3_mprintf("%s: cannot read attn_models: %s", fn, sqlite3_errmsg(db));
    sqlite3_finalize(stmt);
    return rc;
  }
  if (name) sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
  rc = sqlite3_step(stmt);
  if (rc == SQLITE_DONE) {
    sqlite3_finalize(stmt);
    if (!name) {
      *errmsg = sqlite3_mprintf("%s: no deployed model in this database", fn);
      return SQLITE_ERROR;
    }
    /* No deployed version: does the name exist at all? */
    int exists = 0;
    if (sqlite3_prepare_v2(db, "SELECT 1 FROM main.attn_models WHERE name = ?1", -1, &stmt,
                           NULL) == SQLITE_OK) {
      sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
      exists = sqlite3_step(stmt) == SQLITE_ROW;
    }
    sqlite3_finalize(stmt);
    *errmsg = exists ? sqlite3_mprintf("%s: model '%s' has no deployed version", fn, name)
                     : sqlite3_mprintf("%s: no model named '%s'", fn, name);
    return SQLITE_ERROR;
  }
  if (rc != SQLITE_ROW) {
    *errmsg = sqlite3_mprintf("%s: cannot read attn_models: %s", fn, sqlite3_errmsg(db));
    sqlite3_finalize(stmt);
    return rc;
  }
  int64_t rowid = sqlite3_column_int64(stmt, 0), version = sqlite3_column_int64(stmt, 1);
  const char *created = (const char *)sqlite3_column_text(stmt, 2);
  int64_t nbytes = sqlite3_column_int64(stmt, 3);
  const char *row_name = (const char *)sqlite3_column_text(stmt, 4);
  attn_model *m = NULL;
  rc = attn_cache_load(conn, fn, row_name ? row_name : "", version, rowid, created ? created : "",
                       nbytes, &m, errmsg);
  sqlite3_finalize(stmt);
  if (rc != SQLITE_OK) return rc;

  /* Remember the answer while the stamp holds. */
  if (stamped) {
    if (!conn->memo_valid) {
      conn->memo_valid = 1;
      conn->memo_data_version = data_version;
      conn->memo_changes = changes;
    }
    if (!name) {
      m->refs++;
      conn->memo_default = m;
    } else if (conn->nmemo < ATTN_MEMO_MAX) {
      char *copy = sqlite3_mprintf("%s", name);
      if (copy) {
        m->refs++;
        conn->memo_name[conn->nmemo] = copy;
        conn->memo_model[conn->nmemo++] = m;
      }
    }
  }
  *out = m;
  return SQLITE_OK;
}

int attn_model_get(sqlite3_context *ctx, const char *fn, const char *name, int name_arg,
                   attn_model **out, char **errmsg) {
  attn_conn *conn = sqlite3_user_data(ctx);
  *errmsg = NULL;
  if (name_arg >= 0) {
    attn_model *m = sqlite3_get_auxdata(ctx, name_arg);
    if (m) {
      *out = m;
      return SQLITE_OK;
    }
  }
  attn_model *m = NULL;
  int rc = attn_resolve(conn, fn, name, &m, errmsg);
  if (rc != SQLITE_OK) return rc;
  if (name_arg >= 0) {
    m->refs++; /* released by SQLite (at once if it cannot keep it); the cache still holds m */
    sqlite3_set_auxdata(ctx, name_arg, m, attn_model_release_void);
  }
  *out = m;
  return SQLITE_OK;
}

int attn_model_acquire(attn_conn *conn, const char *fn, const char *name, attn_model **out,
                       char **errmsg) {
  attn_model *m = NULL;
  int rc = attn_resolve(conn, fn, name, &m, errmsg);
  if (rc != SQLITE_OK) return rc;
  m->refs++;
  *out = m;
  return SQLITE_OK;
}

/* ------------------------------------------------------------------ writing */

int attn_store_ensure_schema(sqlite3 *db, const char *fn, char **errmsg) {
  char *err = NULL;
  int rc = sqlite3_exec(db, attn_schema_sql, NULL, NULL, &err);
  if (rc != SQLITE_OK) {
    *errmsg = sqlite3_mprintf("%s: cannot create the model store tables: %s", fn,
                              err ? err : sqlite3_errmsg(db));
    sqlite3_free(err);
    return rc;
  }
  return attn_store_check(db, fn, NULL, errmsg); /* tables that were there already: trusted? */
}

/* Run one statement with bound values; SQLITE_OK or an error with *errmsg. */
static int attn_exec_step(sqlite3_stmt *stmt, sqlite3 *db, const char *fn, const char *what,
                          char **errmsg) {
  int rc = sqlite3_step(stmt);
  if (rc == SQLITE_DONE || rc == SQLITE_ROW) return SQLITE_OK;
  *errmsg = sqlite3_mprintf("%s: cannot %s: %s", fn, what, sqlite3_errmsg(db));
  return rc;
}

/* The labels of a model as a JSON array. sqlite3_malloc'd; NULL when out of memory. */
static char *attn_labels_json(const nn_model *model) {
  sqlite3_str *s = sqlite3_str_new(NULL);
  int C = nn_model_num_classes(model);
  sqlite3_str_appendchar(s, 1, '[');
  for (int c = 0; c < C; c++) {
    const char *label = nn_model_label(model, c);
    if (c) sqlite3_str_appendchar(s, 1, ',');
    attn_json_string(s, label ? label : "", label ? (int)strlen(label) : 0);
  }
  sqlite3_str_appendchar(s, 1, ']');
  return sqlite3_str_finish(s);
}

/* *out = the integer of a one-row query with the model name as ?1 (NULL reads as 0). */
static int store_int_query(sqlite3 *db, const char *fn, const char *sql, const char *name,
                           int64_t *out, char **errmsg) {
  sqlite3_stmt *stmt = NULL;
  int rc = sqlite3_prepare_v2(db, sql, -1, &stmt, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
    rc = sqlite3_step(stmt) == SQLITE_ROW ? SQLITE_OK : sqlite3_errcode(db);
    *out = sqlite3_column_int64(stmt, 0);
  }
  sqlite3_finalize(stmt);
  if (rc != SQLITE_OK)
    *errmsg = sqlite3_mprintf("%s: cannot save the model: %s", fn, sqlite3_errmsg(db));
  return rc;
}

/* What one save writes. */
typedef struct attn_save_rows {
  const char *name, *config, *labels, *metrics;
  const unsigned char *blob;
  size_t blob_len;
  const nn_epoch_stats *log;
  int nlog;
} attn_save_rows;

/* Write the rows of a save on db, inside a transaction the caller holds (and undoes on error):
 * the store tables when missing, the new version (one more than the largest of the name)
 * deployed, the other versions of the name undeployed, the log rows. *version_out is set before
 * the first row is written. With guard non-NULL and *guard NULL, *guard gets the guard statement
 * (see attn_store_save) once the store exists. */
static int attn_store_write(sqlite3 *db, const char *fn, const attn_save_rows *r,
                            sqlite3_stmt **guard, int64_t *version_out, char **errmsg) {
  int64_t top = 0, seq = 0;
  sqlite3_stmt *stmt = NULL;
  int rc = attn_store_ensure_schema(db, fn, errmsg);
  if (rc != SQLITE_OK) return rc;
  if (guard && !*guard &&
      sqlite3_prepare_v2(db, "DELETE FROM main.attn_training_log WHERE 0", -1, guard, NULL) !=
          SQLITE_OK)
    *guard = NULL;
  rc = store_int_query(db, fn, "SELECT coalesce(max(version), 0) FROM main.attn_models "
                               "WHERE name = ?1", r->name, &top, errmsg);
  if (rc == SQLITE_OK)
    rc = store_int_query(db, fn, "SELECT coalesce(max(deployed_seq), 0) FROM main.attn_models "
                                 "WHERE ?1 IS NOT NULL", r->name, &seq, errmsg);
  if (rc != SQLITE_OK) return rc;
  /* A version (or deployed_seq) at the largest integer leaves no next one: say so rather than
   * failing on the primary key (max + 1 overflows to a REAL, read back as the same integer). */
  if (top >= INT64_MAX || seq >= INT64_MAX) {
    *errmsg = top >= INT64_MAX
                  ? sqlite3_mprintf("%s: cannot save the model: '%s' already has version %lld, "
                                    "the largest integer, so there is no next version; delete "
                                    "or renumber its rows in attn_models", fn, r->name,
                                    (long long)INT64_MAX)
                  : sqlite3_mprintf("%s: cannot save the model: attn_models.deployed_seq has "
                                    "reached the largest integer (%lld); renumber that column",
                                    fn, (long long)INT64_MAX);
    return SQLITE_ERROR;
  }
  *version_out = top + 1;
  rc = sqlite3_prepare_v2(db,
                          "UPDATE main.attn_models SET deployed = 0 "
                          "WHERE name = ?1 AND deployed != 0",
                          -1, &stmt, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(stmt, 1, r->name, -1, SQLITE_STATIC);
    rc = attn_exec_step(stmt, db, fn, "save the model", errmsg);
  } else {
    *errmsg = sqlite3_mprintf("%s: cannot save the model: %s", fn, sqlite3_errmsg(db));
  }
  sqlite3_finalize(stmt);
  stmt = NULL;
  if (rc != SQLITE_OK) return rc;

  rc = sqlite3_prepare_v2(
      db,
      "INSERT INTO main.attn_models(name, version, created_at, deployed, deployed_seq, config, "
      "labels, metrics, weights) VALUES(?1, ?2, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), 1, ?7, "
      "?3, ?4, ?5, ?6)",
      -1, &stmt, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(stmt, 1, r->name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(stmt, 2, top + 1);
    sqlite3_bind_text(stmt, 3, r->config, -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 4, r->labels, -1, SQLITE_STATIC);
    if (r->metrics)
      sqlite3_bind_text(stmt, 5, r->metrics, -1, SQLITE_STATIC);
    else
      sqlite3_bind_null(stmt, 5);
    sqlite3_bind_blob64(stmt, 6, r->blob, r->blob_len, SQLITE_STATIC);
    sqlite3_bind_int64(stmt, 7, seq + 1);
    rc = attn_exec_step(stmt, db, fn, "save the model", errmsg);
  } else {
    *errmsg = sqlite3_mprintf("%s: cannot save the model: %s", fn, sqlite3_errmsg(db));
  }
  sqlite3_finalize(stmt);
  stmt = NULL;
  if (rc != SQLITE_OK || r->nlog <= 0) return rc;

  rc = sqlite3_prepare_v2(db,
                          "INSERT INTO main.attn_training_log(name, version, epoch, train_loss, "
                          "val_loss, val_accuracy, val_f1, lr, seconds) "
                          "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                          -1, &stmt, NULL);
  if (rc != SQLITE_OK)
    *errmsg = sqlite3_mprintf("%s: cannot save the training log: %s", fn, sqlite3_errmsg(db));
  for (int i = 0; rc == SQLITE_OK && i < r->nlog; i++) {
    const nn_epoch_stats *e = &r->log[i];
    sqlite3_reset(stmt);
    sqlite3_bind_text(stmt, 1, r->name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(stmt, 2, top + 1);
    sqlite3_bind_int(stmt, 3, e->epoch);
    sqlite3_bind_double(stmt, 4, e->train_loss);
    sqlite3_bind_double(stmt, 5, e->val_loss);
    sqlite3_bind_double(stmt, 6, e->val_accuracy);
    sqlite3_bind_double(stmt, 7, e->val_f1);
    sqlite3_bind_double(stmt, 8, e->lr);
    sqlite3_bind_double(stmt, 9, e->seconds);
    rc = attn_exec_step(stmt, db, fn, "save the training log", errmsg);
  }
  sqlite3_finalize(stmt);
  return rc;
}

/* ------------------------------------------------------------------ waiting for the write lock */

static double attn_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The connection's busy timeout in milliseconds (PRAGMA busy_timeout; 0 when none). */
static int attn_busy_timeout(sqlite3 *db) {
  sqlite3_stmt *stmt = NULL;
  int ms = 0;
  if (sqlite3_prepare_v2(db, "PRAGMA busy_timeout", -1, &stmt, NULL) == SQLITE_OK &&
      sqlite3_step(stmt) == SQLITE_ROW)
    ms = sqlite3_column_int(stmt, 0);
  sqlite3_finalize(stmt);
  return ms < 0 ? 0 : ms;
}

/* Has sqlite3_interrupt been called on db (a new statement fails with SQLITE_INTERRUPT)? */
static int attn_db_interrupted(sqlite3 *db) {
  attn_interrupt it = {db, NULL, 0};
  int stop = attn_interrupted(&it, 1);
  attn_interrupt_end(&it);
  return stop;
}

/* One wait for the write lock held by another connection: sleeps a little and returns
 * SQLITE_OK (try again), SQLITE_BUSY once `deadline` has passed, SQLITE_INTERRUPT when `db` was
 * interrupted. Used where SQLite does not call the busy handler: a connection that already reads
 * (holds SHARED) and wants to write is refused at once while another holds RESERVED, so that the
 * two cannot wait for each other; waiting here instead lets the other writer's own busy timeout
 * run out first, after which it rolls back and this save goes through. */
static int attn_store_backoff(sqlite3 *db, double deadline, int *delay_ms) {
  if (attn_db_interrupted(db)) return SQLITE_INTERRUPT;
  double left = deadline - attn_now();
  if (left <= 0) return SQLITE_BUSY;
  int ms = *delay_ms < 1 ? 1 : *delay_ms;
  if (ms > left * 1000) ms = (int)(left * 1000) + 1;
  sqlite3_sleep(ms);
  *delay_ms = *delay_ms < 1 ? 2 : *delay_ms * 2 > 50 ? 50 : *delay_ms * 2;
  return SQLITE_OK;
}

/* Busy handler of the second connection (attn_store_save_side): wait up to the busy timeout of
 * the connection that saves, stop at once when that one is interrupted. */
typedef struct attn_side_wait {
  sqlite3 *parent;
  double deadline;
  int delay_ms;
} attn_side_wait;

static int attn_side_busy(void *arg, int count) {
  attn_side_wait *w = arg;
  return attn_store_backoff(w->parent, w->deadline, &w->delay_ms) == SQLITE_OK;
}

/* The message of a save that did not get the write lock. */
static char *attn_busy_message(int extended, const char *fn, int rc, int timeout_ms) {
  if (rc == SQLITE_INTERRUPT) return sqlite3_mprintf("%s: interrupted", fn);
  if (extended == SQLITE_BUSY_SNAPSHOT)
    return sqlite3_mprintf("%s: cannot save the model: another connection wrote to the database "
                           "since this connection's transaction began reading it (WAL mode: its "
                           "read snapshot is out of date and cannot become a write); call it "
                           "outside BEGIN ... COMMIT, or begin the transaction with BEGIN "
                           "IMMEDIATE", fn);
  return sqlite3_mprintf("%s: cannot save the model: database is locked (another connection "
                         "held the write lock for longer than this connection's busy timeout, "
                         "%d ms; set a longer one with PRAGMA busy_timeout)", fn, timeout_ms);
}

/* ------------------------------------------------------------------ the four ways to save */

/* The integer a PRAGMA returns (-1 when none). */
static int64_t attn_pragma_int(sqlite3 *db, const char *sql) {
  sqlite3_stmt *stmt = NULL;
  int64_t v = -1;
  if (sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) == SQLITE_OK &&
      sqlite3_step(stmt) == SQLITE_ROW)
    v = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  return v;
}

/* The second connection writes as db would: its per-connection limits and durability settings
 * (the largest file size, synchronous, secure_delete, trusted_schema, foreign keys, triggers). */
static int attn_copy_settings(sqlite3 *side, sqlite3 *db) {
  static const char *const pragmas[] = {"max_page_count", "synchronous", "secure_delete",
                                        "foreign_keys", "recursive_triggers", "cell_size_check"};
  for (size_t i = 0; i < sizeof pragmas / sizeof pragmas[0]; i++) {
    char *get = sqlite3_mprintf("PRAGMA main.%s", pragmas[i]);
    int64_t v = get ? attn_pragma_int(db, get) : -1;
    sqlite3_free(get);
    if (v < 0) continue;
    char *set = sqlite3_mprintf("PRAGMA main.%s = %lld", pragmas[i], (long long)v);
    int rc = set ? sqlite3_exec(side, set, NULL, NULL, NULL) : SQLITE_NOMEM;
    sqlite3_free(set);
    if (rc != SQLITE_OK) return rc;
  }
  static const int flags[] = {SQLITE_DBCONFIG_TRUSTED_SCHEMA, SQLITE_DBCONFIG_DEFENSIVE,
                              SQLITE_DBCONFIG_ENABLE_TRIGGER};
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
    int on = 0;
    if (sqlite3_db_config(db, flags[i], -1, &on) == SQLITE_OK)
      sqlite3_db_config(side, flags[i], on, NULL);
  }
  return SQLITE_OK;
}

/* The statement that called us reads main in WAL mode: its read snapshot is as old as the
 * statement, and a write on this connection would fail with SQLITE_BUSY_SNAPSHOT if another
 * connection wrote meanwhile. Save on a second connection to the same file instead, in one
 * BEGIN IMMEDIATE transaction that waits for the write lock as long as this connection's busy
 * timeout. Returns -1 when no second connection can be opened (caller saves on db). */
static int attn_store_save_side(sqlite3 *db, const char *fn, const attn_save_rows *r,
                                int64_t *version_out, char **errmsg) {
  const char *file = sqlite3_db_filename(db, "main");
  sqlite3_vfs *vfs = NULL;
  sqlite3 *side = NULL;
  if (!file || !*file || sqlite3_db_readonly(db, "main") != 0 ||
      attn_pragma_int(db, "PRAGMA query_only") != 0)
    return -1; /* writing on db fails with the usual error */
  if (sqlite3_file_control(db, "main", SQLITE_FCNTL_VFS_POINTER, &vfs) != SQLITE_OK) vfs = NULL;
  if (sqlite3_open_v2(file, &side, SQLITE_OPEN_READWRITE, vfs ? vfs->zName : NULL) != SQLITE_OK) {
    sqlite3_close(side);
    return -1;
  }
  if (attn_copy_settings(side, db) != SQLITE_OK) {
    sqlite3_close(side);
    return -1;
  }
  int timeout_ms = attn_busy_timeout(db);
  attn_side_wait wait = {db, attn_now() + timeout_ms / 1000.0, 1};
  sqlite3_busy_handler(side, attn_side_busy, &wait);
  int rc = sqlite3_exec(side, "BEGIN IMMEDIATE", NULL, NULL, NULL);
  if (rc != SQLITE_OK) {
    *errmsg = (rc & 0xff) == SQLITE_BUSY
                  ? attn_busy_message(sqlite3_extended_errcode(side), fn,
                                      attn_db_interrupted(db) ? SQLITE_INTERRUPT : rc, timeout_ms)
                  : sqlite3_mprintf("%s: cannot save the model: %s", fn, sqlite3_errmsg(side));
    if (attn_db_interrupted(db)) rc = SQLITE_INTERRUPT;
  } else {
    rc = attn_store_write(side, fn, r, NULL, version_out, errmsg);
    if (rc == SQLITE_OK) {
      rc = sqlite3_exec(side, "COMMIT", NULL, NULL, NULL);
      if (rc != SQLITE_OK)
        *errmsg = sqlite3_mprintf("%s: cannot save the model: %s", fn, sqlite3_errmsg(side));
    }
    if (rc != SQLITE_OK) sqlite3_exec(side, "ROLLBACK", NULL, NULL, NULL);
  }
  sqlite3_close(side);
  return rc;
}

/* After a failed save on db: end the transaction it began (ROLLBACK), or undo the savepoint.
 * While the connection is interrupted, or after an allocation failed inside the statement that
 * called us (SQLite keeps its out-of-memory state until that statement ends), every new statement
 * fails at once, ROLLBACK included; stepping a writing statement (`guard`, writes nothing) then
 * fails with SQLITE_INTERRUPT or SQLITE_NOMEM, which makes SQLite roll the transaction back. */
static void attn_store_undo(sqlite3 *db, int savepoint, sqlite3_stmt *guard) {
  if (savepoint) {
    int undone = sqlite3_exec(db, "ROLLBACK TO attn_store", NULL, NULL, NULL);
    sqlite3_exec(db, "RELEASE attn_store", NULL, NULL, NULL);
    if (undone != SQLITE_OK && guard && !sqlite3_get_autocommit(db)) sqlite3_step(guard);
    return;
  }
  if (sqlite3_get_autocommit(db)) return;
  if (sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL) != SQLITE_OK && guard &&
      !sqlite3_get_autocommit(db))
    sqlite3_step(guard);
}

/* Inside a statement that itself writes (INSERT ... SELECT FROM attn_train(...), CREATE TABLE
 * ... AS): no transaction or savepoint can be opened; the rows join that statement's transaction
 * (which holds the write lock already) and are deleted again by hand on error, the deployed
 * version restored. */
static int attn_store_save_direct(sqlite3 *db, const char *fn, const attn_save_rows *r,
                                  int64_t *version_out, char **errmsg) {
  int64_t was_deployed = 0, version = 0;
  int rc = attn_store_ensure_schema(db, fn, errmsg);
  if (rc == SQLITE_OK)
    rc = store_int_query(db, fn, "SELECT max(version) FROM main.attn_models "
                                 "WHERE name = ?1 AND deployed = 1",
                         r->name, &was_deployed, errmsg);
  if (rc != SQLITE_OK) return rc;
  rc = attn_store_write(db, fn, r, NULL, &version, errmsg);
  if (rc == SQLITE_OK) {
    *version_out = version;
  } else if (version > 0) {
    char *undo = sqlite3_mprintf(
        "DELETE FROM main.attn_training_log WHERE name = %Q AND version = %lld;"
        "DELETE FROM main.attn_models WHERE name = %Q AND version = %lld;"
        "UPDATE main.attn_models SET deployed = 1 WHERE name = %Q AND version = %lld;",
        r->name, (long long)version, r->name, (long long)version, r->name,
        (long long)was_deployed);
    if (undo) sqlite3_exec(db, undo, NULL, NULL, NULL);
    sqlite3_free(undo);
  }
  return rc;
}

/* Save on db itself: BEGIN IMMEDIATE when no transaction is open (savepoint 0), else a
 * SAVEPOINT inside the caller's transaction (savepoint 1). The write lock is taken before
 * anything is read: with no read transaction open, SQLite's busy handler waits for it; with one
 * open it does not, and attn_store_backoff waits up to the busy timeout. */
static int attn_store_save_here(sqlite3 *db, const char *fn, const attn_save_rows *r,
                                int savepoint, sqlite3_stmt **guard, int64_t *version_out,
                                char **errmsg) {
  int timeout_ms = attn_busy_timeout(db), delay_ms = 1;
  double deadline = attn_now() + timeout_ms / 1000.0;
  int rc;
  for (;;) {
    int reading = sqlite3_txn_state(db, "main") != SQLITE_TXN_NONE;
    rc = sqlite3_exec(db, savepoint ? "SAVEPOINT attn_store" : "BEGIN IMMEDIATE", NULL, NULL,
                      NULL);
    int extended = sqlite3_extended_errcode(db);
    if (rc == SQLITE_BUSY && savepoint && strstr(sqlite3_errmsg(db), "statements in progress"))
      return attn_store_save_direct(db, fn, r, version_out, errmsg);
    if (rc != SQLITE_OK) {
      if (rc == SQLITE_BUSY && reading && !savepoint && extended != SQLITE_BUSY_SNAPSHOT &&
          (rc = attn_store_backoff(db, deadline, &delay_ms)) == SQLITE_OK)
        continue;
      *errmsg = (rc & 0xff) == SQLITE_BUSY || rc == SQLITE_INTERRUPT
                    ? attn_busy_message(extended, fn, rc, timeout_ms)
                    : sqlite3_mprintf("%s: cannot save the model: %s", fn, sqlite3_errmsg(db));
      if (!savepoint && !sqlite3_get_autocommit(db)) attn_store_undo(db, 0, *guard);
      return rc;
    }
    rc = attn_store_write(db, fn, r, guard, version_out, errmsg);
    extended = sqlite3_extended_errcode(db);
    if (rc == SQLITE_OK) {
      rc = sqlite3_exec(db, savepoint ? "RELEASE attn_store" : "COMMIT", NULL, NULL, NULL);
      extended = sqlite3_extended_errcode(db);
      if (rc != SQLITE_OK) {
        sqlite3_free(*errmsg);
        *errmsg = (rc & 0xff) == SQLITE_BUSY
                      ? attn_busy_message(extended, fn, rc, timeout_ms)
                      : sqlite3_mprintf("%s: cannot save the model: %s", fn, sqlite3_errmsg(db));
      }
    }
    if (rc == SQLITE_OK) return SQLITE_OK;
    attn_store_undo(db, savepoint, *guard);
    if ((rc & 0xff) != SQLITE_BUSY || !savepoint) return rc;
    /* Inside the caller's transaction the first write may find the lock taken: wait and retry
     * (never on a stale WAL snapshot, which no wait can refresh). */
    int waited = reading && extended != SQLITE_BUSY_SNAPSHOT
                     ? attn_store_backoff(db, deadline, &delay_ms)
                     : rc;
    sqlite3_free(*errmsg);
    *errmsg = NULL;
    if (waited == SQLITE_OK) continue;
    *errmsg = attn_busy_message(extended, fn, waited, timeout_ms);
    return waited;
  }
}

/* Is main in WAL mode? */
static int attn_store_wal(sqlite3 *db) {
  sqlite3_stmt *stmt = NULL;
  int wal = 0;
  if (sqlite3_prepare_v2(db, "PRAGMA main.journal_mode", -1, &stmt, NULL) == SQLITE_OK &&
      sqlite3_step(stmt) == SQLITE_ROW) {
    const char *mode = (const char *)sqlite3_column_text(stmt, 0);
    wal = mode && sqlite3_stricmp(mode, "wal") == 0;
  }
  sqlite3_finalize(stmt);
  return wal;
}

int attn_store_save(attn_conn *conn, const char *fn, const char *name, const nn_model *model,
                    const char *metrics_json, const nn_epoch_stats *log, int nlog,
                    int64_t *version_out, char **errmsg) {
  sqlite3 *db = conn->db;
  unsigned char *blob = NULL;
  size_t blob_len = 0;
  char *config = NULL, *labels = NULL;
  sqlite3_stmt *guard = NULL;
  char err[NN_ERR_LEN] = "";
  int rc;
  int64_t version = 0;
  *errmsg = NULL;

  if (nn_model_save(model, &blob, &blob_len, err) != NN_OK) {
    *errmsg = sqlite3_mprintf("%s: cannot serialise the model: %s", fn, err);
    rc = SQLITE_ERROR;
    goto done;
  }
  config = nn_config_to_json(nn_model_config(model));
  labels = attn_labels_json(model);
  if (!config || !labels) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  attn_save_rows rows = {name, config, labels, metrics_json, blob, blob_len, log, nlog};
  int autocommit = sqlite3_get_autocommit(db);
  /* Prepared before the transaction when the store exists, so that a failure inside BEGIN or
   * SAVEPOINT is covered too (attn_store_undo); else once the schema is there. */
  if (sqlite3_prepare_v2(db, "DELETE FROM main.attn_training_log WHERE 0", -1, &guard, NULL) !=
      SQLITE_OK)
    guard = NULL;
  rc = -1;
  if (autocommit && sqlite3_txn_state(db, "main") == SQLITE_TXN_READ && attn_store_wal(db))
    rc = attn_store_save_side(db, fn, &rows, &version, errmsg);
  if (rc != -1) {
    /* saved (or failed) on the second connection */
  } else if (autocommit && sqlite3_txn_state(db, NULL) == SQLITE_TXN_WRITE) {
    rc = attn_store_save_direct(db, fn, &rows, &version, errmsg);
  } else {
    rc = attn_store_save_here(db, fn, &rows, !autocommit, &guard, &version, errmsg);
  }
  if (rc == SQLITE_OK) *version_out = version;
done:
  if (rc == SQLITE_NOMEM && !*errmsg) *errmsg = sqlite3_mprintf("%s: out of memory", fn);
  sqlite3_finalize(guard);
  free(blob);
  free(config);
  sqlite3_free(labels);
  attn_memo_clear(conn);
  return rc;
}

/* ------------------------------------------------------------------ attn_deploy, attn_import */

/* The model name argument: non-empty text, else an error. */
static const char *attn_name_arg(sqlite3_context *ctx, const char *fn, sqlite3_value *v) {
  const char *name = (const char *)sqlite3_value_text(v);
  if (sqlite3_value_type(v) == SQLITE_NULL || !name || !*name) {
    char *msg = sqlite3_mprintf("%s: the model name must be a non-empty text, got %s", fn,
                                sqlite3_value_type(v) == SQLITE_NULL ? "NULL" : "''");
    sqlite3_result_error(ctx, msg ? msg : "out of memory", -1);
    sqlite3_free(msg);
    return NULL;
  }
  return name;
}

/* attn_deploy(name, version) -> version: make that version the one that predicts. */
static void attn_deploy_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  attn_conn *conn = sqlite3_user_data(ctx);
  sqlite3 *db = conn->db;
  const char *fn = "attn_deploy";
  const char *name = attn_name_arg(ctx, fn, argv[0]);
  char *msg = NULL;
  sqlite3_stmt *stmt = NULL;
  int rc;
  if (!name) return;
  if ((rc = attn_conn_check_write(conn, fn, &msg)) != SQLITE_OK) goto done;
  if ((rc = attn_store_check(db, fn, NULL, &msg)) != SQLITE_OK) goto done; /* issue 17 */
  if (sqlite3_value_numeric_type(argv[1]) != SQLITE_INTEGER) {
    msg = sqlite3_value_type(argv[1]) == SQLITE_NULL
              ? sqlite3_mprintf("%s: the version must be an integer, got NULL", fn)
              : sqlite3_mprintf("%s: the version must be an integer, got '%s'", fn,
                                (const char *)sqlite3_value_text(argv[1]));
    rc = SQLITE_ERROR;
    goto done;
  }
  int64_t version = sqlite3_value_int64(argv[1]);
  rc = sqlite3_prepare_v2(db,
                          "SELECT max(version = ?2), count(*) FROM main.attn_models "
                          "WHERE name = ?1",
                          -1, &stmt, NULL);
  if (rc != SQLITE_OK) {
    msg = attn_no_table(db) ? sqlite3_mprintf("%s: no model named '%s'", fn, name)
                            : sqlite3_mprintf("%s: %s", fn, sqlite3_errmsg(db));
    rc = SQLITE_ERROR;
    goto done;
  }
  sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
  sqlite3_bind_int64(stmt, 2, version);
  if (sqlite3_step(stmt) != SQLITE_ROW) {
    msg = sqlite3_mprintf("%s: %s", fn, sqlite3_errmsg(db));
    rc = SQLITE_ERROR;
    goto done;
  }
  int found = sqlite3_column_int(stmt, 0), count = sqlite3_column_int(stmt, 1);
  sqlite3_finalize(stmt);
  stmt = NULL;
  if (count == 0) {
    msg = sqlite3_mprintf("%s: no model named '%s'", fn, name);
    rc = SQLITE_ERROR;
    goto done;
  }
  if (!found) {
    msg = sqlite3_mprintf("%s: model '%s' has no version %lld", fn, name, (long long)version);
    rc = SQLITE_ERROR;
    goto done;
  }
  /* One UPDATE: atomic on its own, and allowed inside a statement that writes. */
  rc = sqlite3_prepare_v2(db,
                          "UPDATE main.attn_models SET deployed = (version = ?2), "
                          "deployed_seq = CASE WHEN version = ?2 THEN (SELECT coalesce(max("
                          "deployed_seq), 0) + 1 FROM main.attn_models) ELSE deployed_seq END "
                          "WHERE name = ?1",
                          -1, &stmt, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(stmt, 2, version);
    rc = attn_exec_step(stmt, db, fn, "deploy", &msg);
  } else {
    msg = sqlite3_mprintf("%s: %s", fn, sqlite3_errmsg(db));
  }
  if (rc == SQLITE_OK) sqlite3_result_int64(ctx, version);
done:
  sqlite3_finalize(stmt);
  attn_memo_clear(conn);
  if (rc != SQLITE_OK) {
    sqlite3_result_error(ctx, msg ? msg : "attn_deploy: out of memory", -1);
    if (rc != SQLITE_ERROR) sqlite3_result_error_code(ctx, rc);
  }
  sqlite3_free(msg);
}

/* attn_import(name, blob) -> version: validate a safetensors BLOB, store it as a new version
 * of `name` and deploy it. */
static void attn_import_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  attn_conn *conn = sqlite3_user_data(ctx);
  const char *fn = "attn_import";
  const char *name = attn_name_arg(ctx, fn, argv[0]);
  char err[NN_ERR_LEN] = "", *msg = NULL;
  nn_model *model = NULL;
  int64_t version = 0;
  int rc;
  if (!name) return;
  if ((rc = attn_conn_check_write(conn, fn, &msg)) != SQLITE_OK) goto done;
  if (sqlite3_value_type(argv[1]) != SQLITE_BLOB) {
    static const char *types[] = {"", "an integer", "a real", "text", "a BLOB", "NULL"};
    msg = sqlite3_mprintf("%s: the weights must be a BLOB (a safetensors file), got %s", fn,
                          types[sqlite3_value_type(argv[1])]);
    rc = SQLITE_ERROR;
    goto done;
  }
  const unsigned char *blob = sqlite3_value_blob(argv[1]);
  static const unsigned char empty[1] = {0};
  size_t len = (size_t)sqlite3_value_bytes(argv[1]);
  attn_interrupt interrupt = {conn->db, NULL, 0};
  int st = nn_model_load_ex(&model, blob ? blob : empty, blob ? len : 0, attn_interrupt_check,
                            &interrupt, err);
  attn_interrupt_end(&interrupt);
  if (st != NN_OK) {
    model = NULL;
    msg = sqlite3_mprintf("%s: %s", fn, err);
    rc = st == NN_INTERRUPTED ? SQLITE_INTERRUPT : st == NN_NOMEM ? SQLITE_NOMEM : SQLITE_ERROR;
    goto done;
  }
  rc = attn_store_save(conn, fn, name, model, NULL, NULL, 0, &version, &msg);
  if (rc == SQLITE_OK) sqlite3_result_int64(ctx, version);
done:
  nn_model_free(model);
  if (rc != SQLITE_OK) {
    sqlite3_result_error(ctx, msg ? msg : "attn_import: out of memory", -1);
    if (rc != SQLITE_ERROR) sqlite3_result_error_code(ctx, rc);
  }
  sqlite3_free(msg);
}

int attn_store_register(sqlite3 *db, attn_conn *conn) {
  int rc = attn_create_function(db, conn, "attn_deploy", 2, SQLITE_DIRECTONLY, attn_deploy_func);
  if (rc == SQLITE_OK)
    rc = attn_create_function(db, conn, "attn_import", 2, SQLITE_DIRECTONLY, attn_import_func);
  return rc;
}

/* ------------------------------------------------------------------ interrupts */

int attn_interrupted(attn_interrupt *it, unsigned every) {
  if (every > 1 && ++it->ticks % every != 0) return 0;
  if (!it->probe && sqlite3_prepare_v2(it->db, "SELECT 1", -1, &it->probe, NULL) != SQLITE_OK) {
    it->probe = NULL;
    return sqlite3_errcode(it->db) == SQLITE_INTERRUPT;
  }
  int rc = sqlite3_step(it->probe);
  sqlite3_reset(it->probe);
  return rc == SQLITE_INTERRUPT;
}

int attn_interrupt_check(void *it) { return attn_interrupted(it, 1); }

void attn_interrupt_end(attn_interrupt *it) {
  sqlite3_finalize(it->probe);
  it->probe = NULL;
}
