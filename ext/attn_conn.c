/* attn_conn.c -- the core every SQL function of the extension uses: the per-connection state
 * (attn_conn), the model cache and the reads of the model store (its tables checked by
 * attn_store_check.c, a name resolved to its deployed model), interrupt probes for long loops,
 * registering a function or a table-valued function with the state (attn_create_function,
 * attn_create_module), the engine's allocator attn_mem, and the SQL function attn_cache_limit,
 * which bounds the cache.
 *
 *   SELECT attn_cache_limit();            -- bytes of parsed models a connection keeps
 *   SELECT attn_cache_limit(64 << 20);    -- keep at most 64 MiB -> 67108864
 *
 * Writing the store: attn_store.c; checking its tables: attn_store_check.c.
 *
 * Cache. A model row is parsed once per connection (nn_model_load) and kept, keyed by name,
 * version and the row's identity (rowid, created_at, size: a row deleted and written again under
 * the same version is a different model; attnext gives every row it writes a random rowid,
 * attn_store.c, so a save rolled back and done again with other weights of the same size in the
 * same millisecond is told apart too). Which version of a name is deployed is looked up with
 * a query, and the answer is remembered while a "database unchanged" stamp holds: the pager's
 * data version (SQLITE_FCNTL_DATA_VERSION: changes on every commit, of this or any other
 * connection, as seen by the current read transaction) plus this connection's change count
 * (sqlite3_total_changes64: writes of its own). Outside a read transaction the data version may
 * be stale, and inside a write transaction a ROLLBACK changes neither number, so there the query
 * runs every time. Scalar functions with a constant name also keep the model with
 * sqlite3_set_auxdata for the rest of the statement, so a row costs tokenize + forward only.
 * (Verified: tests/sql/versions.sql and tests/test_python_sqlite.py, two connections.)
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn_ext.h"

/* The engine's allocator: SQLite's (attn_ext.h says why). */
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

#define ATTN_MEMO_MAX 8 /* remembered name -> deployed model answers */
/* Bytes of parsed models the cache of one connection keeps (attn_cache_limit changes it). */
#define ATTN_CACHE_DEFAULT_BYTES ((int64_t)256 << 20)

struct attn_conn {
  sqlite3 *db;
  int refs;
  const attn_job_hooks *jobs; /* its host's training jobs (a dqlite node), or NULL */
  attn_model *models;         /* the cache, most recently used first; each holds one reference */
  /* name -> deployed model answers, valid while the stamp is unchanged; each holds a ref */
  int memo_valid;
  int64_t memo_data_version, memo_changes;
  int nmemo;
  char *memo_name[ATTN_MEMO_MAX];
  attn_model *memo_model[ATTN_MEMO_MAX];
  attn_model *memo_default;
  int64_t cache_limit; /* bytes (attn_model_cost) the cache may keep; the model in use stays */
  nn_workspace *ws;
  nn_pool *pool;             /* batched inference (attn_conn_pool), created on first use */
  nn_workspace **pool_ws;    /* one per pool thread */
  int store_depth;           /* > 0 while the store tables are read (attn_store_read_begin) */
  int checked;               /* the store's schema passed attn_store_check at this stamp: */
  int checked_exists;        /* ... and attn_models exists */
  char *checked_fingerprint; /* the store's CREATE statements when it last passed the check */
  int64_t checked_data_version, checked_changes;
  int query_depth;      /* > 0 while a function's query is stepped (attn_conn_query_begin) */
  const char *query_fn; /* the function whose query it is (outermost) */
  char *pending_error;  /* a save that failed where no statement could report it */
  int behind;           /* a save went through a second connection (attn_conn_set_behind) */
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

void attn_conn_forget_deployed(attn_conn *conn) {
  for (int i = 0; i < conn->nmemo; i++) {
    sqlite3_free(conn->memo_name[i]);
    attn_model_release(conn->memo_model[i]);
  }
  conn->nmemo = 0;
  attn_model_release(conn->memo_default);
  conn->memo_default = NULL;
  conn->memo_valid = 0;
}

attn_conn *attn_conn_create(sqlite3 *db, const attn_job_hooks *jobs) {
  attn_conn *conn = sqlite3_malloc64(sizeof *conn);
  if (!conn) return NULL;
  memset(conn, 0, sizeof *conn);
  conn->db = db;
  conn->jobs = jobs;
  conn->refs = 1;
  conn->cache_limit = ATTN_CACHE_DEFAULT_BYTES;
  return conn;
}

void attn_conn_ref(attn_conn *conn) { conn->refs++; }

void attn_conn_unref(void *p) {
  attn_conn *conn = p;
  if (!conn || --conn->refs > 0) return;
  attn_conn_forget_deployed(conn);
  while (conn->models) {
    attn_model *m = conn->models;
    conn->models = m->next;
    m->stale = 1;
    attn_model_release(m);
  }
  nn_workspace_free(conn->ws);
  for (int t = 0; conn->pool_ws && t < nn_pool_threads(conn->pool); t++)
    nn_workspace_free(conn->pool_ws[t]);
  sqlite3_free(conn->pool_ws);
  nn_pool_free(conn->pool);
  sqlite3_free(conn->checked_fingerprint);
  sqlite3_free(conn->pending_error);
  sqlite3_free(conn);
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

sqlite3 *attn_conn_db(attn_conn *conn) { return conn->db; }

const attn_job_hooks *attn_conn_jobs(attn_conn *conn) {
  return conn->jobs && conn->jobs->here(conn) ? conn->jobs : NULL;
}

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

int attn_conn_in_dqlite(attn_conn *conn) { return attn_in_dqlite(conn->db); }

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

/* PRAGMA query_only of the connection (1: no writes allowed). */
static int attn_query_only(sqlite3 *db) {
  sqlite3_stmt *stmt = NULL;
  int on = 0;
  if (sqlite3_prepare_v2(db, "PRAGMA query_only", -1, &stmt, NULL) == SQLITE_OK &&
      sqlite3_step(stmt) == SQLITE_ROW)
    on = sqlite3_column_int(stmt, 0);
  sqlite3_finalize(stmt);
  return on;
}

int attn_conn_check_write(attn_conn *conn, const char *fn, char **errmsg) {
  if (conn->pending_error) {
    *errmsg = sqlite3_mprintf("%s: not run, to report that an earlier training of this "
                              "connection was lost: %s; run this call again",
                              fn, conn->pending_error);
    sqlite3_free(conn->pending_error);
    conn->pending_error = NULL;
    return SQLITE_ERROR;
  }
  /* A database that cannot be written fails here, not after a whole training. */
  if (sqlite3_db_readonly(conn->db, "main") == 1 || attn_query_only(conn->db)) {
    *errmsg = sqlite3_mprintf("%s: the database is read-only (opened read-only or immutable, or "
                              "PRAGMA query_only): a model cannot be saved in it",
                              fn);
    return SQLITE_READONLY;
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

int attn_conn_may_write(attn_conn *conn) {
  return sqlite3_db_readonly(conn->db, "main") == 0 && !attn_query_only(conn->db) &&
         conn->query_depth == 0 &&
         !(attn_in_dqlite(conn->db) && !attn_dqlite_write_replicated(conn->db));
}

nn_workspace *attn_conn_workspace(attn_conn *conn, char **errmsg) {
  if (!conn->ws) {
    char err[NN_ERR_LEN] = "";
    if (nn_workspace_create(&conn->ws, &attn_mem, err) != NN_OK) {
      *errmsg = sqlite3_mprintf("%s", err);
      conn->ws = NULL;
      return NULL;
    }
  }
  return conn->ws;
}

int attn_conn_pool(attn_conn *conn, nn_pool **pool, nn_workspace ***ws, char **errmsg) {
  char err[NN_ERR_LEN] = "";
  if (!conn->pool && nn_pool_create(&conn->pool, 0, &attn_mem, err) != NN_OK) {
    conn->pool = NULL;
    *errmsg = sqlite3_mprintf("%s", err);
    return SQLITE_NOMEM;
  }
  int threads = nn_pool_threads(conn->pool);
  if (!conn->pool_ws) {
    conn->pool_ws = sqlite3_malloc64(sizeof *conn->pool_ws * (sqlite3_uint64)threads);
    if (!conn->pool_ws) return SQLITE_NOMEM;
    memset(conn->pool_ws, 0, sizeof *conn->pool_ws * (size_t)threads);
  }
  for (int t = 0; t < threads; t++) {
    if (!conn->pool_ws[t] && nn_workspace_create(&conn->pool_ws[t], &attn_mem, err) != NN_OK) {
      conn->pool_ws[t] = NULL;
      *errmsg = sqlite3_mprintf("%s", err);
      return SQLITE_NOMEM;
    }
  }
  *pool = conn->pool;
  *ws = conn->pool_ws;
  return SQLITE_OK;
}

/* The "database unchanged" stamp; 0 when it cannot be trusted. The pager's data version is
 * that of the current read transaction: with none open (a statement such as SELECT
 * attn_predict('news', 'some text') reads no table) one is opened for a moment by stepping
 * PRAGMA data_version, so that a statement's lookup is remembered across statements and costs
 * the same however many versions the store holds. Not in a write transaction: there a ROLLBACK
 * (TO) could undo writes without changing either number. */
static int attn_stamp(sqlite3 *db, int64_t *data_version, int64_t *changes) {
  int v = 0, state = sqlite3_txn_state(db, "main");
  if (state == SQLITE_TXN_NONE) {
    sqlite3_stmt *open = NULL;
    int rc = sqlite3_prepare_v2(db, "PRAGMA main.data_version", -1, &open, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(open) == SQLITE_ROW ? SQLITE_OK : SQLITE_ERROR;
    /* the data version as of the read transaction just begun (kept while none is open) */
    if (rc == SQLITE_OK &&
        sqlite3_file_control(db, "main", SQLITE_FCNTL_DATA_VERSION, &v) != SQLITE_OK)
      rc = SQLITE_ERROR;
    sqlite3_finalize(open);
    if (rc != SQLITE_OK) return 0;
  } else if (state != SQLITE_TXN_READ ||
             sqlite3_file_control(db, "main", SQLITE_FCNTL_DATA_VERSION, &v) != SQLITE_OK) {
    return 0;
  }
  *data_version = (unsigned)v;
  *changes = sqlite3_total_changes64(db);
  return 1;
}

void attn_conn_set_behind(attn_conn *conn) {
  conn->behind = sqlite3_txn_state(conn->db, "main") != SQLITE_TXN_NONE;
}

const char *attn_conn_behind_hint(attn_conn *conn) {
  if (conn->behind && sqlite3_txn_state(conn->db, "main") == SQLITE_TXN_NONE) conn->behind = 0;
  return conn->behind
             ? "; this connection cannot see the latest save yet: a statement of this connection "
               "is still reading (e.g. a cursor not fetched to the end) and another connection "
               "wrote since it began, so in WAL mode this connection could not write and the "
               "model was saved through a second connection; finish or reset that statement "
               "first (e.g. fetchall() the cursor), or use another connection"
             : "";
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
void attn_cache_limit_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  attn_conn *conn = sqlite3_user_data(ctx);
  if (argc == 1) {
    if (sqlite3_value_numeric_type(argv[0]) != SQLITE_INTEGER || sqlite3_value_int64(argv[0]) < 0) {
      char *msg = sqlite3_mprintf("attn_cache_limit: the limit must be an integer number of bytes "
                                  ">= 0, got '%s'",
                                  sqlite3_value_type(argv[0]) == SQLITE_NULL
                                      ? "NULL"
                                      : (const char *)sqlite3_value_text(argv[0]));
      sqlite3_result_error(ctx, msg ? msg : "attn_cache_limit: out of memory", -1);
      sqlite3_free(msg);
      return;
    }
    conn->cache_limit = sqlite3_value_int64(argv[0]);
    attn_cache_trim(conn);
  }
  sqlite3_result_int64(ctx, conn->cache_limit);
}

/* ------------------------------------------------------------------ reading the store */

static int attn_store_read_begin_at(attn_conn *conn, const char *fn, int *models_exist, int stamped,
                                    int64_t data_version, int64_t changes, char **errmsg);

int attn_store_read_begin(attn_conn *conn, const char *fn, int *models_exist, char **errmsg) {
  int64_t data_version = 0, changes = 0;
  int stamped = conn->store_depth > 0 ? 0 : attn_stamp(conn->db, &data_version, &changes);
  return attn_store_read_begin_at(conn, fn, models_exist, stamped, data_version, changes, errmsg);
}

/* attn_store_read_begin with the stamp of now (stamped 0: none) already taken. */
static int attn_store_read_begin_at(attn_conn *conn, const char *fn, int *models_exist, int stamped,
                                    int64_t data_version, int64_t changes, char **errmsg) {
  if (conn->store_depth > 0) {
    *errmsg = sqlite3_mprintf("%s: the model store was read again while it was being read (a "
                              "collation or other callback of the program calls attnext)",
                              fn);
    return SQLITE_ERROR;
  }
  /* The check is remembered while the database is unchanged (the stamp), else while the
   * tables' definitions are the same text. */
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

/* Find or load the model in row `rowid`. On success *out is borrowed from the cache. */
static int attn_cache_load(attn_conn *conn, const char *fn, const char *name, int64_t version,
                           int64_t rowid, const char *created_at, int64_t nbytes, attn_model **out,
                           char **errmsg) {
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
    *errmsg =
        sqlite3_mprintf("%s: cannot read model '%s' version %lld: %s", fn, name, (long long)version,
                        rc == SQLITE_DONE ? "row gone" : sqlite3_errmsg(db));
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
                            &attn_mem, err);
  attn_interrupt_end(&interrupt);
  if (st != NN_OK) {
    m->nn = NULL;
    *errmsg = st == NN_INTERRUPTED
                  ? sqlite3_mprintf("%s: interrupted", fn)
                  : sqlite3_mprintf("%s: model '%s' version %lld cannot be loaded: %s", fn, name,
                                    (long long)version, err);
    rc = attn_nn_rc(st);
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

int attn_model_ref_split(const char *ref, size_t *name_len, int64_t *version) {
  const char *at = strrchr(ref, '@');
  *name_len = strlen(ref);
  *version = -1;
  if (!at) return 1;
  const char *p = at + 1;
  if (!*p) {
    /* a trailing '@' is the escape: 'a@3@' is the model named 'a@3' */
    *name_len = (size_t)(at - ref);
    return *name_len > 0;
  }
  int64_t v = 0;
  for (; *p; p++) {
    if (*p < '0' || *p > '9') return 1; /* 'me@example.com': '@' is part of the name */
    if (v > (INT64_MAX - 9) / 10) return 0;
    v = v * 10 + (*p - '0');
  }
  *name_len = (size_t)(at - ref);
  *version = v;
  return *name_len > 0;
}

char *attn_conn_suggest_name(attn_conn *conn, const char *name) {
  sqlite3_stmt *stmt = NULL;
  char *best = NULL;
  size_t best_d = 3, len = strlen(name);
  /* the same rule as an unknown option's: at most two edits, and fewer than half the name */
  if (sqlite3_prepare_v2(conn->db, "SELECT DISTINCT name FROM main.attn_models", -1, &stmt, NULL) !=
      SQLITE_OK) {
    sqlite3_finalize(stmt);
    return NULL;
  }
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    const char *stored = (const char *)sqlite3_column_text(stmt, 0);
    if (!stored) continue;
    size_t n = strlen(stored), d = nn_edit_distance(name, len, stored, n);
    if (d > 0 && d < best_d && d < n / 2 + 1) {
      char *copy = sqlite3_mprintf("%s", stored);
      if (!copy) continue;
      sqlite3_free(best);
      best = copy;
      best_d = d;
    }
  }
  sqlite3_finalize(stmt);
  if (!best) return NULL;
  /* a stored name that a reference would misread is suggested with its escape */
  size_t name_len;
  int64_t version;
  int literal =
      attn_model_ref_split(best, &name_len, &version) && version < 0 && name_len == strlen(best);
  char *hint = sqlite3_mprintf(" (did you mean '%s%s'?)", best, literal ? "" : "@");
  sqlite3_free(best);
  return hint;
}

/* "fn: no model named 'x'" with the closest stored name, inside a read of the store. */
static char *attn_no_model_error(attn_conn *conn, const char *fn, const char *name) {
  char *hint = attn_conn_suggest_name(conn, name);
  char *msg = sqlite3_mprintf("%s: no model named '%s'%s%s", fn, name, hint ? hint : "",
                              attn_conn_behind_hint(conn));
  sqlite3_free(hint);
  return msg;
}

static int attn_resolve_read(attn_conn *conn, const char *fn, const char *name, int64_t version,
                             int stamped, int64_t data_version, int64_t changes, attn_model **out,
                             char **errmsg);

/* name -> the deployed model (name NULL: the default model), or with version >= 0 that stored
 * version of name, deployed or not. *out is borrowed from the cache.
 * Known limit: a row's weights rewritten in place by UPDATE with the same size, rowid, version
 * and created_at are not noticed by a connection that has parsed them; add a version instead
 * (attn_import), which is what attn_train and attn_import do. */
static int attn_resolve(attn_conn *conn, const char *fn, const char *name, int64_t version,
                        attn_model **out, char **errmsg) {
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
    for (int i = 0; name && version < 0 && i < conn->nmemo; i++) {
      if (strcmp(conn->memo_name[i], name) == 0) {
        *out = conn->memo_model[i];
        attn_cache_touch(conn, *out);
        return SQLITE_OK;
      }
    }
  } else {
    attn_conn_forget_deployed(conn);
  }

  int exists = 0;
  int rc = attn_store_read_begin_at(conn, fn, &exists, stamped, data_version, changes, errmsg);
  if (rc != SQLITE_OK) return rc;
  if (!exists) {
    attn_store_read_end(conn);
    *errmsg =
        name ? sqlite3_mprintf("%s: no model named '%s'%s", fn, name, attn_conn_behind_hint(conn))
             : sqlite3_mprintf("%s: no deployed model in this database%s", fn,
                               attn_conn_behind_hint(conn));
    return SQLITE_ERROR;
  }
  rc = attn_resolve_read(conn, fn, name, version, stamped, data_version, changes, out, errmsg);
  attn_store_read_end(conn);
  return rc;
}

/* A model reference ('news', 'news@3', 'a@b@') through attn_resolve. */
static int attn_resolve_ref(attn_conn *conn, const char *fn, const char *ref, attn_model **out,
                            char **errmsg) {
  size_t name_len;
  int64_t version;
  *errmsg = NULL;
  if (!ref) return attn_resolve(conn, fn, NULL, -1, out, errmsg);
  if (!attn_model_ref_split(ref, &name_len, &version)) {
    *errmsg = sqlite3_mprintf("%s: '%s' is no model reference: expected a name, "
                              "'name@version' (version a positive integer), or 'name@' for a "
                              "name that itself contains '@'",
                              fn, ref);
    return *errmsg ? SQLITE_ERROR : SQLITE_NOMEM;
  }
  if (name_len == strlen(ref)) return attn_resolve(conn, fn, ref, -1, out, errmsg);
  char *name = sqlite3_mprintf("%.*s", (int)name_len, ref);
  if (!name) return SQLITE_NOMEM;
  int rc = attn_resolve(conn, fn, name, version, out, errmsg);
  sqlite3_free(name);
  return rc;
}

/* attn_resolve's reading part, inside attn_store_read_begin .. end. */
static int attn_resolve_read(attn_conn *conn, const char *fn, const char *name, int64_t version,
                             int stamped, int64_t data_version, int64_t changes, attn_model **out,
                             char **errmsg) {
  sqlite3 *db = conn->db;
  sqlite3_stmt *stmt = NULL;
  int rc;
  if (name && version >= 0)
    rc = sqlite3_prepare_v2(db,
                            "SELECT rowid, version, created_at, length(weights), name "
                            "FROM main.attn_models WHERE name = ?1 AND version = ?2",
                            -1, &stmt, NULL);
  else if (name)
    rc = sqlite3_prepare_v2(db,
                            "SELECT rowid, version, created_at, length(weights), name "
                            "FROM main.attn_models WHERE name = ?1 AND deployed = 1 "
                            /* +version: the index of deployed rows (schema.sql), not the
                             * primary key's order through every version of the name */
                            "ORDER BY +version DESC LIMIT 1",
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
  if (name && version >= 0) sqlite3_bind_int64(stmt, 2, version);
  rc = sqlite3_step(stmt);
  if (rc == SQLITE_DONE) {
    sqlite3_finalize(stmt);
    if (!name) {
      *errmsg = sqlite3_mprintf("%s: no deployed model in this database%s", fn,
                                attn_conn_behind_hint(conn));
      return SQLITE_ERROR;
    }
    /* No such version: does the name exist at all? */
    int exists = 0;
    if (sqlite3_prepare_v2(db, "SELECT 1 FROM main.attn_models WHERE name = ?1", -1, &stmt, NULL) ==
        SQLITE_OK) {
      sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
      exists = sqlite3_step(stmt) == SQLITE_ROW;
    }
    sqlite3_finalize(stmt);
    if (!exists) *errmsg = attn_no_model_error(conn, fn, name);
    else if (version >= 0)
      *errmsg = sqlite3_mprintf("%s: model '%s' has no version %lld%s", fn, name,
                                (long long)version, attn_conn_behind_hint(conn));
    else
      *errmsg = sqlite3_mprintf("%s: model '%s' has no deployed version%s", fn, name,
                                attn_conn_behind_hint(conn));
    return *errmsg ? SQLITE_ERROR : SQLITE_NOMEM;
  }
  if (rc != SQLITE_ROW) {
    *errmsg = sqlite3_mprintf("%s: cannot read attn_models: %s", fn, sqlite3_errmsg(db));
    sqlite3_finalize(stmt);
    return rc;
  }
  int stored_version = name && version >= 0;
  int64_t rowid = sqlite3_column_int64(stmt, 0);
  version = sqlite3_column_int64(stmt, 1);
  const char *created = (const char *)sqlite3_column_text(stmt, 2);
  int64_t nbytes = sqlite3_column_int64(stmt, 3);
  const char *row_name = (const char *)sqlite3_column_text(stmt, 4);
  attn_model *m = NULL;
  rc = attn_cache_load(conn, fn, row_name ? row_name : "", version, rowid, created ? created : "",
                       nbytes, &m, errmsg);
  sqlite3_finalize(stmt);
  if (rc != SQLITE_OK) return rc;

  /* Remember the deployed answer while the stamp holds (a stored version needs no memo: the
   * cache finds it by rowid and version). */
  if (stamped && !stored_version) {
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
  int rc = attn_resolve_ref(conn, fn, name, &m, errmsg);
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
  int rc = attn_resolve_ref(conn, fn, name, &m, errmsg);
  if (rc != SQLITE_OK) return rc;
  m->refs++;
  *out = m;
  return SQLITE_OK;
}

int attn_model_acquire_deployed(attn_conn *conn, const char *fn, const char *name, attn_model **out,
                                char **errmsg) {
  attn_model *m = NULL;
  int rc = attn_resolve(conn, fn, name, -1, &m, errmsg);
  if (rc != SQLITE_OK) return rc;
  m->refs++;
  *out = m;
  return SQLITE_OK;
}

int attn_model_acquire_version(attn_conn *conn, const char *fn, const char *name, int64_t version,
                               attn_model **out, char **errmsg) {
  sqlite3 *db = conn->db;
  sqlite3_stmt *stmt = NULL;
  attn_model *m = NULL;
  int exists = 0;
  *errmsg = NULL;
  int rc = attn_store_read_begin(conn, fn, &exists, errmsg);
  if (rc != SQLITE_OK) return rc;
  if (!exists) {
    *errmsg = sqlite3_mprintf("%s: no model named '%s'%s", fn, name, attn_conn_behind_hint(conn));
    rc = SQLITE_ERROR;
    goto done;
  }
  rc = sqlite3_prepare_v2(db,
                          "SELECT rowid, created_at, length(weights), version = ?2 "
                          "FROM main.attn_models WHERE name = ?1 ORDER BY version = ?2 DESC "
                          "LIMIT 1",
                          -1, &stmt, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(stmt, 2, version);
    rc = sqlite3_step(stmt);
  }
  if (rc == SQLITE_DONE || (rc == SQLITE_ROW && !sqlite3_column_int(stmt, 3))) {
    *errmsg = rc == SQLITE_DONE ? sqlite3_mprintf("%s: no model named '%s'%s", fn, name,
                                                  attn_conn_behind_hint(conn))
                                : sqlite3_mprintf("%s: model '%s' has no version %lld%s", fn, name,
                                                  (long long)version, attn_conn_behind_hint(conn));
    rc = SQLITE_ERROR;
    goto done;
  }
  if (rc != SQLITE_ROW) {
    *errmsg = sqlite3_mprintf("%s: cannot read attn_models: %s", fn, sqlite3_errmsg(db));
    rc = SQLITE_ERROR;
    goto done;
  }
  const char *created = (const char *)sqlite3_column_text(stmt, 1);
  rc = attn_cache_load(conn, fn, name, version, sqlite3_column_int64(stmt, 0),
                       created ? created : "", sqlite3_column_int64(stmt, 2), &m, errmsg);
  if (rc == SQLITE_OK) {
    m->refs++;
    *out = m;
  }
done:
  sqlite3_finalize(stmt);
  attn_store_read_end(conn);
  return rc;
}

/* ------------------------------------------------------------------ interrupts */

int attn_interrupt_begin(attn_interrupt *it, sqlite3 *db) {
  it->db = db;
  if (it->probe) return SQLITE_OK;
  int rc = sqlite3_prepare_v2(db, "SELECT 1", -1, &it->probe, NULL);
  if (rc != SQLITE_OK) it->probe = NULL;
  return rc;
}

int attn_interrupted(attn_interrupt *it, unsigned every) {
  if (every > 1 && ++it->ticks % every != 0) return 0;
  if (!it->probe && attn_interrupt_begin(it, it->db) != SQLITE_OK)
    return sqlite3_errcode(it->db) == SQLITE_INTERRUPT;
  int rc = sqlite3_step(it->probe);
  sqlite3_reset(it->probe);
  return rc == SQLITE_INTERRUPT;
}

int attn_interrupt_check(void *it) { return attn_interrupted(it, 1); }

void attn_interrupt_end(attn_interrupt *it) {
  sqlite3_finalize(it->probe);
  it->probe = NULL;
}
