/* attn_store.c -- writing the model store: creating its tables, saving trained or imported
 * models as new versions of a name with their training logs (attn_train, attn_fit, attn_tune and
 * attn_import all save through attn_store_save_items).
 *
 * Tables: sql/schema.sql (a copy is compiled in: attn_schema.h), created by the first write.
 *
 * Saving (attn_store_save_items). Every version of one save (attn_tune: all its trials), the
 * deployed flags and the log rows are written in one transaction that takes the write lock
 * before it reads anything (so that the busy handler, i.e. busy_timeout, applies): they commit
 * together or not at all (an error, an interrupt, a full disk, a kill -9). Versions saved
 * without `deploy` are never deployed (deployed_seq 0), so that attn_deploy(name, 'previous')
 * never goes to a trial that was not chosen. Each row gets a random rowid: a row written again
 * under the same name and version (a save rolled back, then done again) is told apart by the
 * model cache (attn_conn.c). The transaction is one of four kinds:
 *  - no transaction open on the connection: BEGIN IMMEDIATE ... COMMIT (attn_fit, attn_import);
 *  - a statement of the connection reads main (SELECT * FROM attn_train(...), a cursor the
 *    caller is looping over): BEGIN IMMEDIATE on the connection itself, which turns its read
 *    transaction into a write, so that what the connection does next sees the model. SQLite
 *    refuses at once, without the busy handler, while another connection holds the write lock:
 *    the save waits in short sleeps up to the busy timeout (interruptible) for it. In WAL mode a
 *    snapshot that another connection's commit made out of date can never become a write
 *    (SQLITE_BUSY_SNAPSHOT): then the save runs on a second connection to the same file, with
 *    the caller's busy timeout and per-connection limits (attn_store_save_side), and the
 *    connection remembers that it cannot see it yet (attn_conn_set_behind: its errors say so);
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
#include "compat.h" /* nn_os_seconds */

/* ------------------------------------------------------------------ writing */

int attn_store_ensure_schema(sqlite3 *db, const char *fn, char **errmsg) {
  char *err = NULL;
  /* tables that are there already: trusted? (before the schema's CREATE INDEX touches them) */
  int rc = attn_store_check(db, fn, NULL, errmsg);
  if (rc != SQLITE_OK) return rc;
  rc = sqlite3_exec(db, attn_schema_sql, NULL, NULL, &err);
  if (rc != SQLITE_OK) {
    *errmsg = sqlite3_mprintf("%s: cannot create the model store tables: %s", fn,
                              err ? err : sqlite3_errmsg(db));
    sqlite3_free(err);
    return rc;
  }
  return attn_store_check(db, fn, NULL, errmsg);
}

int attn_exec_step(sqlite3_stmt *stmt, sqlite3 *db, const char *fn, const char *what,
                   char **errmsg) {
  int rc = sqlite3_step(stmt);
  if (rc == SQLITE_DONE || rc == SQLITE_ROW) return SQLITE_OK;
  *errmsg = sqlite3_mprintf("%s: cannot %s: %s", fn, what, sqlite3_errmsg(db));
  return rc;
}

/* Keeps the first failure among a statement's binds in *rc: a bind fails on a text or BLOB
 * longer than SQLITE_LIMIT_LENGTH (SQLITE_TOOBIG) or out of memory, and the statement must not
 * then run with that parameter NULL. */
static void attn_bound(int *rc, int bind_rc) {
  if (*rc == SQLITE_OK) *rc = bind_rc;
}

/* Binds one epoch's row of attn_training_log, ?1 .. ?9 in the table's order. */
static int attn_bind_epoch(sqlite3_stmt *stmt, const char *name, int64_t version,
                           const nn_epoch_stats *e) {
  int rc = SQLITE_OK;
  attn_bound(&rc, sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC));
  attn_bound(&rc, sqlite3_bind_int64(stmt, 2, version));
  attn_bound(&rc, sqlite3_bind_int(stmt, 3, e->epoch));
  attn_bound(&rc, sqlite3_bind_double(stmt, 4, e->train_loss));
  attn_bound(&rc, sqlite3_bind_double(stmt, 5, e->val_loss));
  attn_bound(&rc, sqlite3_bind_double(stmt, 6, e->val_accuracy));
  attn_bound(&rc, sqlite3_bind_double(stmt, 7, e->val_f1));
  attn_bound(&rc, sqlite3_bind_double(stmt, 8, e->lr));
  attn_bound(&rc, sqlite3_bind_double(stmt, 9, e->seconds));
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

int attn_sql_ints(sqlite3 *db, const char *sql, const char *const *texts, int ntexts,
                  const int64_t *ints, int nints, int64_t *out, int ncols) {
  sqlite3_stmt *stmt = NULL;
  int rc = sqlite3_prepare_v2(db, sql, -1, &stmt, NULL);
  for (int i = 0; rc == SQLITE_OK && i < ntexts; i++)
    rc = sqlite3_bind_text(stmt, i + 1, texts[i], -1, SQLITE_STATIC);
  for (int i = 0; rc == SQLITE_OK && i < nints; i++)
    rc = sqlite3_bind_int64(stmt, ntexts + i + 1, ints[i]);
  if (rc == SQLITE_OK) rc = sqlite3_step(stmt);
  for (int c = 0; rc == SQLITE_ROW && c < ncols; c++) out[c] = sqlite3_column_int64(stmt, c);
  sqlite3_finalize(stmt); /* keeps the error and its message on db */
  return rc;
}

void attn_store_deployed_row(sqlite3 *db, const char *name, int64_t *version, int64_t *rowid) {
  int64_t row[2];
  if (attn_sql_ints(db,
                    "SELECT version, rowid FROM main.attn_models WHERE name = ?1 AND deployed = 1 "
                    "ORDER BY deployed_seq DESC LIMIT 1",
                    &name, 1, NULL, 0, row, 2) == SQLITE_ROW) {
    *version = row[0];
    *rowid = row[1];
  }
}

/* *out = the integer of a one-row query with the model name as ?1 (NULL reads as 0). */
static int store_int_query(sqlite3 *db, const char *fn, const char *sql, const char *name,
                           int64_t *out, char **errmsg) {
  int rc = attn_sql_ints(db, sql, &name, 1, NULL, 0, out, 1);
  if (rc == SQLITE_ROW) return SQLITE_OK;
  *errmsg = sqlite3_mprintf("%s: cannot save the model: %s", fn, sqlite3_errmsg(db));
  return rc;
}

/* Does table `table` of main exist? */
static int attn_table_exists(sqlite3 *db, const char *table) {
  return sqlite3_table_column_metadata(db, "main", table, NULL, NULL, NULL, NULL, NULL, NULL) ==
         SQLITE_OK;
}

/* The largest version `name` ever had: the largest number among its rows of attn_models,
 * attn_training_log (a log whose model row was deleted included) and attn_lineage (the history:
 * a version whose other rows were deleted, or a store whose attn_versions was emptied, must not
 * hand its number out again and replace that row) and its attn_versions.last_version (a version
 * deleted with its log included). Values that are not
 * numbers (a store edited by hand) are not versions; a REAL counts as its integer part. Tables
 * that do not exist count as empty. SQLITE_OK with *top (0: none), or an error with *errmsg
 * "fn: cannot save the model: ..." (no next version: a number at the largest integer). */
static int attn_store_top_version(sqlite3 *db, const char *fn, const char *name, int count,
                                  int64_t *top, char **errmsg) {
  static const char *const parts[] = {
      "attn_models",
      "SELECT max(version) AS v FROM main.attn_models WHERE name = ?1 AND "
      "typeof(version) IN ('integer', 'real')",
      "attn_training_log",
      "SELECT max(version) AS v FROM main.attn_training_log WHERE name = ?1 "
      "AND typeof(version) IN ('integer', 'real')",
      "attn_versions",
      "SELECT max(last_version) AS v FROM main.attn_versions WHERE name = ?1 AND "
      "typeof(last_version) IN ('integer', 'real')",
      "attn_lineage",
      "SELECT max(version) AS v FROM main.attn_lineage WHERE name = ?1 AND "
      "typeof(version) IN ('integer', 'real')"};
  sqlite3_str *sql = sqlite3_str_new(db);
  sqlite3_stmt *stmt = NULL;
  int n = 0, rc;
  *top = 0;
  /* each branch names its column v: a compound SELECT takes the names of its first branch,
   * which is whichever table exists first */
  sqlite3_str_appendall(sql, "SELECT max(v) FROM (");
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i += 2) {
    if (!attn_table_exists(db, parts[i])) continue;
    if (n++) sqlite3_str_appendall(sql, " UNION ALL ");
    sqlite3_str_appendall(sql, parts[i + 1]);
  }
  sqlite3_str_appendall(sql, ")");
  char *text = sqlite3_str_finish(sql);
  if (!text) return SQLITE_NOMEM;
  if (n == 0) {
    sqlite3_free(text);
    return SQLITE_OK;
  }
  rc = sqlite3_prepare_v2(db, text, -1, &stmt, NULL);
  sqlite3_free(text);
  if (rc == SQLITE_OK) rc = sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
  if (rc == SQLITE_OK) rc = sqlite3_step(stmt) == SQLITE_ROW ? SQLITE_OK : sqlite3_errcode(db);
  if (rc != SQLITE_OK) {
    *errmsg = sqlite3_mprintf("%s: cannot save the model: %s", fn, sqlite3_errmsg(db));
    sqlite3_finalize(stmt);
    return rc;
  }
  int type = sqlite3_column_type(stmt, 0);
  double real = sqlite3_column_double(stmt, 0);
  int64_t integer = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  /* the next `count` versions must be integers: past 2^63 - 1 there are none */
  if ((type == SQLITE_FLOAT && real >= 9223372036854775807.0 - count) ||
      (type == SQLITE_INTEGER && integer > INT64_MAX - count)) {
    char number[40];
    if (type == SQLITE_FLOAT) sqlite3_snprintf(sizeof number, number, "%g", real);
    else sqlite3_snprintf(sizeof number, number, "%lld", (long long)integer);
    *errmsg = sqlite3_mprintf("%s: cannot save the model: '%s' already has version %s (the "
                              "largest of attn_models, attn_training_log, attn_versions and "
                              "attn_lineage), too close to the largest integer for %d more; "
                              "delete or renumber its rows there",
                              fn, name, number, count);
    return SQLITE_ERROR;
  }
  if (type == SQLITE_INTEGER) *top = integer > 0 ? integer : 0;
  else if (type == SQLITE_FLOAT) *top = real > 0 ? (int64_t)real : 0;
  return SQLITE_OK;
}

int attn_store_check_save(attn_conn *conn, const char *fn, const char *name, int count,
                          char **errmsg) {
  int64_t top = 0;
  int rc = attn_store_check(attn_conn_db(conn), fn, NULL, errmsg);
  if (rc == SQLITE_OK)
    rc = attn_store_top_version(attn_conn_db(conn), fn, name, count, &top, errmsg);
  return rc;
}

int attn_store_check_size(sqlite3 *db, const char *fn, const nn_config *cfg, uint64_t params,
                          char **errmsg) {
  int64_t limit = sqlite3_limit(db, SQLITE_LIMIT_LENGTH, -1);
  nn_config small = *cfg;
  int exact = params > 0;
  if (!exact) {
    /* before the rows are read: the smallest vocabulary (<PAD>, <UNK>) and one class, so that
     * the bound never refuses a model that would fit */
    small.vocab_size = 2;
    params = nn_config_param_count(&small, 1);
  }
  /* the file (nn_model_save): 8 bytes of header length, a header, 4 bytes a parameter (2 with
   * "storage": "float16") */
  uint64_t bytes = 8 + (cfg->storage == NN_STORAGE_FLOAT16 ? 2 : 4) * params;
  if (limit < 0 || bytes <= (uint64_t)limit) return SQLITE_OK;
  /* name the options of the largest share: the subword table, the vocabulary's table or the
   * rest of the network */
  uint64_t K = (uint64_t)(cfg->ensemble > 1 ? cfg->ensemble : 1);
  uint64_t E = (uint64_t)cfg->embed_dim;
  uint64_t subwords = (uint64_t)cfg->subword_buckets * E * K;
  nn_config net = *cfg;
  net.vocab_size = 0;
  net.subword_buckets = 0;
  uint64_t rest = nn_config_param_count(&net, 1);
  uint64_t words = params > subwords + rest ? params - subwords - rest : 0;
  char options[160];
  if (subwords >= words && subwords >= rest)
    sqlite3_snprintf(sizeof options, options, "\"subword_buckets\" (%d) or \"embed_dim\" (%d)",
                     cfg->subword_buckets, cfg->embed_dim);
  else if (words >= rest)
    sqlite3_snprintf(sizeof options, options, "\"vocab_size\" (%d) or \"embed_dim\" (%d)",
                     cfg->vocab_size, cfg->embed_dim);
  else
    sqlite3_snprintf(sizeof options, options, "\"hidden\" (%d) or \"layers\" (%d)", cfg->hidden,
                     cfg->layers);
  if (K > 1) {
    size_t used = strlen(options);
    sqlite3_snprintf((int)(sizeof options - used), options + used, " or \"ensemble\" (%d)",
                     cfg->ensemble);
  }
  *errmsg = sqlite3_mprintf("%s: the model would be a file of at least %llu bytes (%llu "
                            "parameters), more than this connection's largest BLOB "
                            "(SQLITE_LIMIT_LENGTH, %lld bytes): make option %s smaller",
                            fn, (unsigned long long)bytes, (unsigned long long)params,
                            (long long)limit, options);
  return SQLITE_TOOBIG;
}

/* A rowid for a new row of attn_models: random, so that a row written again under the same name
 * and version (a save rolled back and done again, a version deleted and imported again) never
 * has the rowid of the row it replaces, whatever the millisecond and the size: the model cache
 * keys on it (attn_conn.c). Below 2^62, so that an INSERT of the user's own (max(rowid) + 1)
 * still finds room above. */
static int64_t attn_store_random_rowid(void) {
  uint64_t r = 0;
  sqlite3_randomness((int)sizeof r, &r);
  r &= ((uint64_t)1 << 62) - 1;
  return r ? (int64_t)r : 1;
}

/* Insert one version (item) as `version` of `name` with its log rows, using the prepared
 * statements ins (attn_models) and log (attn_training_log). */
static int attn_store_insert(sqlite3 *db, const char *fn, const char *name,
                             const attn_store_item *item, int64_t version, int64_t seq,
                             sqlite3_stmt *ins, sqlite3_stmt *log, char **errmsg) {
  unsigned char *blob = NULL;
  size_t blob_len = 0;
  char *config = NULL, *labels = NULL, err[NN_ERR_LEN] = "";
  int rc = SQLITE_OK;
  int st = nn_model_save(item->model, &blob, &blob_len, err);
  if (st != NN_OK) {
    *errmsg = sqlite3_mprintf("%s: cannot serialise the model: %s", fn, err);
    rc = attn_nn_rc(st);
    goto done;
  }
  config = nn_config_to_json(nn_model_config(item->model), &attn_mem);
  labels = attn_labels_json(item->model);
  if (!config || !labels) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  /* a random rowid taken already (a chance of one in 2^62 per row): draw again */
  for (int attempt = 0; attempt < 4; attempt++) {
    sqlite3_reset(ins);
    rc = SQLITE_OK;
    attn_bound(&rc, sqlite3_bind_int64(ins, 1, attn_store_random_rowid()));
    attn_bound(&rc, sqlite3_bind_text(ins, 2, name, -1, SQLITE_STATIC));
    attn_bound(&rc, sqlite3_bind_int64(ins, 3, version));
    attn_bound(&rc, sqlite3_bind_int(ins, 4, item->deploy ? 1 : 0));
    attn_bound(&rc, sqlite3_bind_int64(ins, 5, item->deploy ? seq : 0));
    attn_bound(&rc, sqlite3_bind_text(ins, 6, config, -1, SQLITE_STATIC));
    attn_bound(&rc, sqlite3_bind_text(ins, 7, labels, -1, SQLITE_STATIC));
    attn_bound(&rc, item->metrics ? sqlite3_bind_text(ins, 8, item->metrics, -1, SQLITE_STATIC)
                                  : sqlite3_bind_null(ins, 8));
    if (rc != SQLITE_OK) break;
    /* a file past the connection's BLOB limit (one imported, or a lower limit set since the
     * training began): said in bytes, not as a NULL weights column */
    rc = sqlite3_bind_blob64(ins, 9, blob, blob_len, SQLITE_STATIC);
    if (rc != SQLITE_OK) {
      if (rc == SQLITE_TOOBIG)
        *errmsg = sqlite3_mprintf("%s: cannot save the model: its file is %llu bytes, more than "
                                  "this connection's largest BLOB (SQLITE_LIMIT_LENGTH, %d "
                                  "bytes)",
                                  fn, (unsigned long long)blob_len,
                                  sqlite3_limit(db, SQLITE_LIMIT_LENGTH, -1));
      break;
    }
    rc = sqlite3_step(ins);
    if (rc != SQLITE_CONSTRAINT || sqlite3_extended_errcode(db) != SQLITE_CONSTRAINT_ROWID) break;
  }
  sqlite3_reset(ins);
  if (rc != SQLITE_DONE) {
    if (*errmsg) goto done;
    *errmsg = sqlite3_mprintf("%s: cannot save the model: %s", fn, sqlite3_errmsg(db));
    goto done;
  }
  rc = SQLITE_OK;
  for (int i = 0; rc == SQLITE_OK && i < item->nlog; i++) {
    const nn_epoch_stats *e = &item->log[i];
    sqlite3_reset(log);
    rc = attn_bind_epoch(log, name, version, e);
    if (rc != SQLITE_OK)
      *errmsg = sqlite3_mprintf("%s: cannot save the training log: %s", fn, sqlite3_errstr(rc));
    else rc = attn_exec_step(log, db, fn, "save the training log", errmsg);
  }
  sqlite3_reset(log);
  if (rc == SQLITE_OK && item->lineage)
    rc = attn_lineage_write(db, fn, name, version, item->lineage, errmsg);
done:
  sqlite3_free(blob); /* the engine's, from attn_mem (as every model of ext/) */
  sqlite3_free(config);
  sqlite3_free(labels);
  return rc;
}

/* Write the rows of a save on db, inside a transaction the caller holds (and undoes on error):
 * the store tables when missing, the n items as the next versions of `name` in their order (one
 * more than the largest of the name, then up), the one with deploy set deployed (then the other
 * versions of the name are undeployed; the versions saved without deploy are never deployed,
 * deployed_seq 0), their log rows. *first_out is set before the first row is written. With
 * guard non-NULL and *guard NULL, *guard gets the guard statement (see attn_store_save_items)
 * once the store exists. */
static int attn_store_write(sqlite3 *db, const char *fn, const char *name, attn_store_item *items,
                            int n, sqlite3_stmt **guard, int64_t *first_out, char **errmsg) {
  int64_t top = 0, seq = 0;
  sqlite3_stmt *stmt = NULL, *log = NULL;
  int rc = attn_store_ensure_schema(db, fn, errmsg), deploy = 0;
  if (rc != SQLITE_OK) return rc;
  for (int i = 0; i < n; i++) deploy |= items[i].deploy;
  if (guard && !*guard &&
      sqlite3_prepare_v2(db, "DELETE FROM main.attn_training_log WHERE 0", -1, guard, NULL) !=
          SQLITE_OK)
    *guard = NULL;
  /* Past every number the name ever had, in the store or its log: a version is never given
   * twice (a deleted latest version, a log left by a lost run). */
  rc = attn_store_top_version(db, fn, name, n, &top, errmsg);
  if (rc == SQLITE_OK)
    rc = store_int_query(db, fn,
                         "SELECT coalesce(max(deployed_seq), 0) FROM main.attn_models "
                         "WHERE ?1 IS NOT NULL",
                         name, &seq, errmsg);
  if (rc != SQLITE_OK) return rc;
  /* A deployed_seq at the largest integer leaves no next one: say so rather than failing on
   * the primary key (max + 1 overflows to a REAL, read back as the same integer). */
  if (seq >= INT64_MAX) {
    *errmsg = sqlite3_mprintf("%s: cannot save the model: attn_models.deployed_seq has "
                              "reached the largest integer (%lld); renumber that column",
                              fn, (long long)INT64_MAX);
    return SQLITE_ERROR;
  }
  int64_t first = top + 1;
  if (n == 1 && items[0].reserved > 0) {
    /* the version reserved when its epochs began to be logged live (attn_store_live_begin):
     * its log rows are written again in full below */
    first = items[0].reserved;
    sqlite3_stmt *clear = NULL;
    rc = sqlite3_prepare_v2(db,
                            "DELETE FROM main.attn_training_log WHERE name = ?1 AND "
                            "version = ?2",
                            -1, &clear, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(clear, 1, name, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int64(clear, 2, first);
    if (rc == SQLITE_OK) {
      rc = attn_exec_step(clear, db, fn, "save the training log", errmsg);
    } else {
      *errmsg = sqlite3_mprintf("%s: cannot save the model: %s", fn, sqlite3_errmsg(db));
    }
    sqlite3_finalize(clear);
    if (rc != SQLITE_OK) return rc;
  }
  *first_out = first;
  if (deploy) {
    rc = sqlite3_prepare_v2(db,
                            "UPDATE main.attn_models SET deployed = 0 "
                            "WHERE name = ?1 AND deployed != 0",
                            -1, &stmt, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK) {
      rc = attn_exec_step(stmt, db, fn, "save the model", errmsg);
    } else {
      *errmsg = sqlite3_mprintf("%s: cannot save the model: %s", fn, sqlite3_errmsg(db));
    }
    sqlite3_finalize(stmt);
    stmt = NULL;
    if (rc != SQLITE_OK) return rc;
  }
  rc = sqlite3_prepare_v2(
      db,
      "INSERT INTO main.attn_models(rowid, name, version, created_at, deployed, deployed_seq, "
      "config, labels, metrics, weights) VALUES(?1, ?2, ?3, strftime('%Y-%m-%dT%H:%M:%fZ', "
      "'now'), ?4, ?5, ?6, ?7, ?8, ?9)",
      -1, &stmt, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(db,
                            "INSERT INTO main.attn_training_log(name, version, epoch, "
                            "train_loss, val_loss, val_accuracy, val_f1, lr, seconds) "
                            "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                            -1, &log, NULL);
  if (rc != SQLITE_OK)
    *errmsg = sqlite3_mprintf("%s: cannot save the model: %s", fn, sqlite3_errmsg(db));
  for (int i = 0; rc == SQLITE_OK && i < n; i++) {
    items[i].version = first + i;
    rc = attn_store_insert(db, fn, name, &items[i], first + i, seq + 1, stmt, log, errmsg);
  }
  sqlite3_finalize(stmt);
  sqlite3_finalize(log);
  stmt = NULL;
  if (rc != SQLITE_OK) return rc;
  /* the name's high-water mark: these numbers are never given again, even once deleted */
  rc = sqlite3_prepare_v2(db,
                          "INSERT INTO main.attn_versions(name, last_version) VALUES(?1, ?2) "
                          "ON CONFLICT(name) DO UPDATE SET last_version = CASE WHEN "
                          "typeof(last_version) IN ('integer', 'real') AND last_version > "
                          "excluded.last_version THEN last_version ELSE excluded.last_version END",
                          -1, &stmt, NULL);
  if (rc == SQLITE_OK) rc = sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
  if (rc == SQLITE_OK) rc = sqlite3_bind_int64(stmt, 2, first + n - 1 > top ? first + n - 1 : top);
  if (rc == SQLITE_OK) {
    rc = attn_exec_step(stmt, db, fn, "save the model", errmsg);
  } else {
    *errmsg = sqlite3_mprintf("%s: cannot save the model: %s", fn, sqlite3_errmsg(db));
  }
  sqlite3_finalize(stmt);
  return rc;
}

/* ------------------------------------------------------------------ waiting for the write lock */

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
  double left = deadline - nn_os_seconds();
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
                           "IMMEDIATE",
                           fn);
  return sqlite3_mprintf("%s: cannot save the model: database is locked (another connection "
                         "held the write lock for longer than this connection's busy timeout, "
                         "%d ms; set a longer one with PRAGMA busy_timeout)",
                         fn, timeout_ms);
}

/* ------------------------------------------------------------------ the four ways to save */

/* The integer a PRAGMA returns (-1 when none). */
static int64_t attn_pragma_int(sqlite3 *db, const char *sql) {
  sqlite3_stmt *stmt = NULL;
  int64_t v = -1;
  if (sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW)
    v = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  return v;
}

/* The second connection writes as db would: its per-connection limits and durability settings
 * (the largest file size, synchronous, secure_delete, trusted_schema, foreign keys, triggers). */
static int attn_copy_settings(sqlite3 *side, sqlite3 *db) {
  static const char *const pragmas[] = {"max_page_count", "synchronous",        "secure_delete",
                                        "foreign_keys",   "recursive_triggers", "cell_size_check"};
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

/* A statement of this connection reads main in WAL mode and its read snapshot is out of date
 * (another connection committed since it began): a write on this connection would fail with
 * SQLITE_BUSY_SNAPSHOT. Save on a second connection to the same file instead, in one BEGIN
 * IMMEDIATE transaction that waits for the write lock until `deadline` (this connection's busy
 * timeout). Returns -1 when no second connection can be opened (caller saves on db). */
static int attn_store_save_side(sqlite3 *db, const char *fn, const char *name,
                                attn_store_item *items, int n, double deadline, int timeout_ms,
                                char **errmsg) {
  const char *file = sqlite3_db_filename(db, "main");
  sqlite3_vfs *vfs = NULL;
  sqlite3 *side = NULL;
  int64_t first = 0;
  if (!file || !*file || sqlite3_db_readonly(db, "main") != 0 ||
      attn_pragma_int(db, "PRAGMA query_only") != 0)
    return -1; /* writing on db fails with the usual error */
  if (sqlite3_file_control(db, "main", SQLITE_FCNTL_VFS_POINTER, &vfs) != SQLITE_OK) vfs = NULL;
  if (sqlite3_open_v2(file, &side, SQLITE_OPEN_READWRITE, vfs ? vfs->zName : NULL) != SQLITE_OK) {
    sqlite3_close(side);
    return -1;
  }
  /* before the settings are copied: reading max_page_count reads the file, which a checkpoint
   * or a recovery of the WAL may hold for a moment */
  attn_side_wait wait = {db, deadline, 1};
  sqlite3_busy_handler(side, attn_side_busy, &wait);
  if (attn_copy_settings(side, db) != SQLITE_OK) {
    sqlite3_close(side);
    return -1;
  }
  int rc = sqlite3_exec(side, "BEGIN IMMEDIATE", NULL, NULL, NULL);
  if (rc != SQLITE_OK) {
    *errmsg = (rc & 0xff) == SQLITE_BUSY
                  ? attn_busy_message(sqlite3_extended_errcode(side), fn,
                                      attn_db_interrupted(db) ? SQLITE_INTERRUPT : rc, timeout_ms)
                  : sqlite3_mprintf("%s: cannot save the model: %s", fn, sqlite3_errmsg(side));
    if (attn_db_interrupted(db)) rc = SQLITE_INTERRUPT;
  } else {
    rc = attn_store_write(side, fn, name, items, n, NULL, &first, errmsg);
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
static int attn_store_save_direct(sqlite3 *db, const char *fn, const char *name,
                                  attn_store_item *items, int n, char **errmsg) {
  int64_t was_deployed = 0, first = 0, had_mark = 0, mark = 0;
  int rc = attn_store_ensure_schema(db, fn, errmsg);
  if (rc == SQLITE_OK)
    rc = store_int_query(db, fn,
                         "SELECT max(version) FROM main.attn_models "
                         "WHERE name = ?1 AND deployed = 1",
                         name, &was_deployed, errmsg);
  if (rc == SQLITE_OK)
    rc = store_int_query(db, fn, "SELECT count(*) FROM main.attn_versions WHERE name = ?1", name,
                         &had_mark, errmsg);
  if (rc == SQLITE_OK && had_mark)
    rc = store_int_query(db, fn, "SELECT last_version FROM main.attn_versions WHERE name = ?1",
                         name, &mark, errmsg);
  if (rc != SQLITE_OK) return rc;
  rc = attn_store_write(db, fn, name, items, n, NULL, &first, errmsg);
  if (rc != SQLITE_OK && first > 0) {
    char *undo = sqlite3_mprintf(
        "DELETE FROM main.attn_training_log WHERE name = %Q AND version BETWEEN %lld AND %lld;"
        "DELETE FROM main.attn_models WHERE name = %Q AND version BETWEEN %lld AND %lld;"
        "DELETE FROM main.attn_lineage WHERE name = %Q AND version BETWEEN %lld AND %lld;"
        "UPDATE main.attn_models SET deployed = 1 WHERE name = %Q AND version = %lld;",
        name, (long long)first, (long long)(first + n - 1), name, (long long)first,
        (long long)(first + n - 1), name, (long long)first, (long long)(first + n - 1), name,
        (long long)was_deployed);
    if (undo && had_mark) {
      char *with = sqlite3_mprintf("%sUPDATE main.attn_versions SET last_version = %lld WHERE "
                                   "name = %Q;",
                                   undo, (long long)mark, name);
      sqlite3_free(undo);
      undo = with;
    } else if (undo) {
      char *with = sqlite3_mprintf("%sDELETE FROM main.attn_versions WHERE name = %Q;", undo, name);
      sqlite3_free(undo);
      undo = with;
    }
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
 * open it does not, and attn_store_backoff waits until the deadline (the busy timeout). A
 * statement of this connection that reads in WAL mode with an out-of-date snapshot makes BEGIN
 * IMMEDIATE fail with SQLITE_BUSY_SNAPSHOT: then *stale is set (the caller may save through a
 * second connection) and nothing was written. */
static int attn_store_save_here(sqlite3 *db, const char *fn, const char *name,
                                attn_store_item *items, int n, int savepoint, sqlite3_stmt **guard,
                                double deadline, int timeout_ms, int *stale, char **errmsg) {
  int delay_ms = 1, rc;
  int64_t first = 0;
  /* SQLite opens no savepoint while a statement that writes is running (SQLITE_BUSY "cannot open
   * savepoint - SQL statements in progress"): such a statement holds the transaction already. */
  if (savepoint && attn_writer_running(db))
    return attn_store_save_direct(db, fn, name, items, n, errmsg);
  for (;;) {
    int reading = sqlite3_txn_state(db, "main") != SQLITE_TXN_NONE;
    rc = sqlite3_exec(db, savepoint ? "SAVEPOINT attn_store" : "BEGIN IMMEDIATE", NULL, NULL, NULL);
    int extended = sqlite3_extended_errcode(db);
    if (rc != SQLITE_OK) {
      if (rc == SQLITE_BUSY && reading && !savepoint && extended != SQLITE_BUSY_SNAPSHOT &&
          (rc = attn_store_backoff(db, deadline, &delay_ms)) == SQLITE_OK)
        continue;
      if (!savepoint && extended == SQLITE_BUSY_SNAPSHOT && stale) *stale = 1;
      *errmsg = (rc & 0xff) == SQLITE_BUSY || rc == SQLITE_INTERRUPT
                    ? attn_busy_message(extended, fn, rc, timeout_ms)
                    : sqlite3_mprintf("%s: cannot save the model: %s", fn, sqlite3_errmsg(db));
      if (!savepoint && !sqlite3_get_autocommit(db)) attn_store_undo(db, 0, *guard);
      return rc;
    }
    rc = attn_store_write(db, fn, name, items, n, guard, &first, errmsg);
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

int attn_store_save_items(attn_conn *conn, const char *fn, const char *name, attn_store_item *items,
                          int n, char **errmsg) {
  sqlite3 *db = attn_conn_db(conn);
  sqlite3_stmt *guard = NULL;
  int rc, stale = 0;
  int timeout_ms = attn_busy_timeout(db);
  double deadline = nn_os_seconds() + timeout_ms / 1000.0;
  *errmsg = NULL;
  for (int i = 0; i < n; i++) items[i].version = 0;
  int autocommit = sqlite3_get_autocommit(db);
  /* Prepared before the transaction when the store exists, so that a failure inside BEGIN or
   * SAVEPOINT is covered too (attn_store_undo); else once the schema is there. */
  if (sqlite3_prepare_v2(db, "DELETE FROM main.attn_training_log WHERE 0", -1, &guard, NULL) !=
      SQLITE_OK)
    guard = NULL;
  if (autocommit && sqlite3_txn_state(db, NULL) == SQLITE_TXN_WRITE) {
    rc = attn_store_save_direct(db, fn, name, items, n, errmsg);
  } else {
    /* On the caller's own connection whenever its snapshot allows it, so that what follows on
     * that connection (a deploy, an INSERT, a read of the new version) sees the model; a
     * statement of it that reads in WAL mode with a snapshot that another connection's commit
     * made out of date cannot write: then through a second connection. */
    int wal_reading =
        autocommit && sqlite3_txn_state(db, "main") == SQLITE_TXN_READ && attn_store_wal(db);
    rc = attn_store_save_here(db, fn, name, items, n, !autocommit, &guard, deadline, timeout_ms,
                              wal_reading ? &stale : NULL, errmsg);
    if (rc != SQLITE_OK && stale) {
      char *side_msg = NULL;
      int side = attn_store_save_side(db, fn, name, items, n, deadline, timeout_ms, &side_msg);
      sqlite3_free(*errmsg);
      if (side != -1) {
        *errmsg = side_msg;
        rc = side;
        if (rc == SQLITE_OK) attn_conn_set_behind(conn);
      } else {
        sqlite3_free(side_msg);
        *errmsg = sqlite3_mprintf(
            "%s: cannot save the model: another connection wrote to the database while this "
            "statement read it (WAL mode: its read snapshot cannot become a write), and no "
            "second connection to the file could be opened to write it instead",
            fn);
      }
    }
  }
  if (rc == SQLITE_OK) {
    sqlite3_free(*errmsg);
    *errmsg = NULL;
  } else {
    for (int i = 0; i < n; i++) items[i].version = 0;
  }
  if (rc == SQLITE_NOMEM && !*errmsg) *errmsg = sqlite3_mprintf("%s: out of memory", fn);
  sqlite3_finalize(guard);
  attn_conn_forget_deployed(conn);
  return rc;
}

/* ------------------------------------------------------------------ the live training log */

int attn_store_live_ok(attn_conn *conn) {
  sqlite3 *db = attn_conn_db(conn);
  const char *file = sqlite3_db_filename(db, "main");
  if (!file || !*file || !sqlite3_get_autocommit(db) ||
      sqlite3_txn_state(db, NULL) == SQLITE_TXN_WRITE || attn_writer_running(db) ||
      !attn_store_wal(db))
    return 0;
  return attn_conn_may_write(conn); /* read-only, dqlite */
}

/* One short write transaction of the live log: on the connection itself when its snapshot
 * allows (so that it stays current for the save at the end), else on a second connection.
 * Never waits for another writer beyond the busy timeout, and a lock it cannot take is not an
 * error: SQLITE_BUSY, nothing written, try again at the next epoch. */
typedef int (*attn_live_fn)(sqlite3 *db, void *ctx, char **errmsg);

static int attn_store_live_write(attn_conn *conn, const char *fn, attn_live_fn work, void *ctx,
                                 char **errmsg) {
  sqlite3 *db = attn_conn_db(conn);
  /* prepared first: once the connection is interrupted no statement can be (attn_store_undo) */
  sqlite3_stmt *guard = NULL;
  if (sqlite3_prepare_v2(db, "DELETE FROM main.attn_training_log WHERE 0", -1, &guard, NULL) !=
      SQLITE_OK)
    guard = NULL; /* no store yet: the first live write makes it */
  int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
  int extended = sqlite3_extended_errcode(db);
  if (rc == SQLITE_OK) {
    rc = work(db, ctx, errmsg);
    if (rc == SQLITE_OK) rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK) attn_store_undo(db, 0, guard);
    sqlite3_finalize(guard);
    return rc;
  }
  attn_store_undo(db, 0, guard);
  sqlite3_finalize(guard);
  if (extended != SQLITE_BUSY_SNAPSHOT) return (rc & 0xff) == SQLITE_BUSY ? SQLITE_BUSY : rc;
  /* this connection reads an out-of-date snapshot: a second connection */
  const char *file = sqlite3_db_filename(db, "main");
  sqlite3_vfs *vfs = NULL;
  sqlite3 *side = NULL;
  if (sqlite3_file_control(db, "main", SQLITE_FCNTL_VFS_POINTER, &vfs) != SQLITE_OK) vfs = NULL;
  if (sqlite3_open_v2(file, &side, SQLITE_OPEN_READWRITE, vfs ? vfs->zName : NULL) != SQLITE_OK ||
      attn_copy_settings(side, db) != SQLITE_OK) {
    sqlite3_close(side);
    return SQLITE_BUSY;
  }
  rc = sqlite3_exec(side, "BEGIN IMMEDIATE", NULL, NULL, NULL);
  if (rc == SQLITE_OK) {
    rc = work(side, ctx, errmsg);
    if (rc == SQLITE_OK) rc = sqlite3_exec(side, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK) sqlite3_exec(side, "ROLLBACK", NULL, NULL, NULL);
    if (rc == SQLITE_OK) attn_conn_set_behind(conn);
  } else if ((rc & 0xff) == SQLITE_BUSY) {
    rc = SQLITE_BUSY;
  }
  sqlite3_close(side);
  return rc;
}

typedef struct attn_live_rows {
  const char *fn, *name;
  const nn_epoch_stats *log;
  int from, to;
  int64_t version;   /* 0: reserve one (attn_store_live_begin) */
  int64_t prev_mark; /* the name's attn_versions.last_version before, -1: no row */
} attn_live_rows;

static int attn_live_rows_write(sqlite3 *db, void *ctx, char **errmsg) {
  attn_live_rows *r = ctx;
  sqlite3_stmt *stmt = NULL;
  int rc = SQLITE_OK;
  if (r->version == 0) {
    int64_t top = 0;
    rc = attn_store_ensure_schema(db, r->fn, errmsg);
    if (rc == SQLITE_OK) rc = attn_store_top_version(db, r->fn, r->name, 1, &top, errmsg);
    if (rc != SQLITE_OK) return rc;
    r->prev_mark = -1;
    if (sqlite3_prepare_v2(db,
                           "SELECT last_version FROM main.attn_versions WHERE name = ?1 AND "
                           "typeof(last_version) = 'integer'",
                           -1, &stmt, NULL) == SQLITE_OK &&
        sqlite3_bind_text(stmt, 1, r->name, -1, SQLITE_STATIC) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW)
      r->prev_mark = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    stmt = NULL;
    rc = sqlite3_prepare_v2(db,
                            "INSERT INTO main.attn_versions(name, last_version) VALUES(?1, ?2) "
                            "ON CONFLICT(name) DO UPDATE SET last_version = excluded.last_version",
                            -1, &stmt, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(stmt, 1, r->name, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int64(stmt, 2, top + 1);
    if (rc == SQLITE_OK) rc = attn_exec_step(stmt, db, r->fn, "log the epoch", errmsg);
    sqlite3_finalize(stmt);
    stmt = NULL;
    if (rc != SQLITE_OK) return rc;
    r->version = top + 1;
  }
  rc = sqlite3_prepare_v2(db,
                          "INSERT OR REPLACE INTO main.attn_training_log(name, version, epoch, "
                          "train_loss, val_loss, val_accuracy, val_f1, lr, seconds) "
                          "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                          -1, &stmt, NULL);
  for (int i = r->from; rc == SQLITE_OK && i < r->to; i++) {
    const nn_epoch_stats *e = &r->log[i];
    sqlite3_reset(stmt);
    rc = attn_bind_epoch(stmt, r->name, r->version, e);
    if (rc == SQLITE_OK) rc = attn_exec_step(stmt, db, r->fn, "log the epoch", errmsg);
  }
  sqlite3_finalize(stmt);
  return rc;
}

int attn_store_live_begin(attn_conn *conn, const char *fn, const char *name,
                          const nn_epoch_stats *log, int n, int64_t *version, int64_t *prev_mark,
                          char **errmsg) {
  attn_live_rows r = {fn, name, log, 0, n, 0, -1};
  int rc = attn_store_live_write(conn, fn, attn_live_rows_write, &r, errmsg);
  attn_conn_forget_deployed(conn);
  if (rc == SQLITE_OK) {
    *version = r.version;
    *prev_mark = r.prev_mark;
  }
  return rc;
}

int attn_store_live_log(attn_conn *conn, const char *fn, const char *name, int64_t version,
                        const nn_epoch_stats *log, int from, int to, char **errmsg) {
  attn_live_rows r = {fn, name, log, from, to, version, -1};
  return attn_store_live_write(conn, fn, attn_live_rows_write, &r, errmsg);
}

void attn_store_live_abort(attn_conn *conn, const char *name, int64_t version, int64_t prev_mark) {
  sqlite3 *db = attn_conn_db(conn), *side = NULL;
  const char *file = sqlite3_db_filename(db, "main");
  sqlite3_vfs *vfs = NULL;
  if (!file || !*file) return;
  if (sqlite3_file_control(db, "main", SQLITE_FCNTL_VFS_POINTER, &vfs) != SQLITE_OK) vfs = NULL;
  if (sqlite3_open_v2(file, &side, SQLITE_OPEN_READWRITE, vfs ? vfs->zName : NULL) == SQLITE_OK &&
      attn_copy_settings(side, db) == SQLITE_OK) {
    sqlite3_busy_timeout(side, attn_busy_timeout(db));
    /* the log rows, and the reservation as it was when no later number was taken since */
    char *sql = prev_mark >= 0
                    ? sqlite3_mprintf("BEGIN IMMEDIATE;"
                                      "DELETE FROM main.attn_training_log WHERE name = %Q AND "
                                      "version = %lld;"
                                      "UPDATE main.attn_versions SET last_version = %lld WHERE "
                                      "name = %Q AND last_version = %lld;"
                                      "COMMIT;",
                                      name, (long long)version, (long long)prev_mark, name,
                                      (long long)version)
                    : sqlite3_mprintf("BEGIN IMMEDIATE;"
                                      "DELETE FROM main.attn_training_log WHERE name = %Q AND "
                                      "version = %lld;"
                                      "DELETE FROM main.attn_versions WHERE name = %Q AND "
                                      "last_version = %lld;"
                                      "COMMIT;",
                                      name, (long long)version, name, (long long)version);
    if (sql && sqlite3_exec(side, sql, NULL, NULL, NULL) != SQLITE_OK)
      sqlite3_exec(side, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_free(sql);
  }
  sqlite3_close(side);
  attn_conn_forget_deployed(conn);
}
