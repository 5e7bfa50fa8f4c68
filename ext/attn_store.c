/* attn_store.c -- writing the model store: creating its tables, saving a trained or imported
 * model as a new deployed version of its name with its training log (attn_train, attn_fit and
 * attn_import all save through attn_store_save).
 *
 * Tables: sql/schema.sql (a copy is compiled in: attn_schema.h), created by the first write.
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

int attn_exec_step(sqlite3_stmt *stmt, sqlite3 *db, const char *fn, const char *what,
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
  /* Short waits: a writer that retries in a loop takes the lock back a few ms after its busy
   * timeout gave it up; polling every 2 ms finds it free first (at 50 ms, a writer retrying
   * every 10 ms won 2 races of 8 against a training with the longer timeout). */
  *delay_ms = 2;
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

/* Is a statement that writes (not read-only) running on db? */
static int attn_writer_running(sqlite3 *db) {
  for (sqlite3_stmt *s = sqlite3_next_stmt(db, NULL); s; s = sqlite3_next_stmt(db, s))
    if (sqlite3_stmt_busy(s) && !sqlite3_stmt_readonly(s)) return 1;
  return 0;
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
  /* SQLite opens no savepoint while a statement that writes is running (SQLITE_BUSY "cannot open
   * savepoint - SQL statements in progress"): such a statement holds the transaction already. */
  if (savepoint && attn_writer_running(db))
    return attn_store_save_direct(db, fn, r, version_out, errmsg);
  for (;;) {
    int reading = sqlite3_txn_state(db, "main") != SQLITE_TXN_NONE;
    rc = sqlite3_exec(db, savepoint ? "SAVEPOINT attn_store" : "BEGIN IMMEDIATE", NULL, NULL,
                      NULL);
    int extended = sqlite3_extended_errcode(db);
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
  sqlite3 *db = attn_conn_db(conn);
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
  attn_conn_forget_deployed(conn);
  return rc;
}
