/* attn_jobs.c -- training jobs of a dqlite node, as SQL: the table-valued function attn_jobs
 * (every job of the database: state, progress, losses so far, the version it produced, the
 * error), attn_cancel(job), and attn_job_commit, with which a job's thread commits its result
 * through the leader; and attn_node_init, the node's entry point, which registers attnext on
 * every connection with these three and the hooks through which attn_train, attn_fit and
 * attn_tune submit jobs. The jobs themselves: attn_job_runner.c. Only build/attnext-node has
 * these functions (and the tests' module build/tests/attnext_jobs_test.so); attnext.so has not.
 *
 *   SELECT job, name, state, epoch || '/' || epochs AS epoch, round(train_loss, 4) AS loss,
 *          version, error FROM attn_jobs ORDER BY job DESC;
 *   SELECT attn_cancel(3);    -- 1: cancelled; 0: it had ended already
 *
 * attn_jobs reads the tables attn_job_runs and attn_job_epochs, which the jobs write through
 * Raft once a second: every node has them, and whichever node leads answers with the same rows.
 * The leader's own jobs show their batch-level progress live (attn_status of the job's private
 * connection). Outside a node the tables exist only in a copy of a node's database.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_jobs.h"
#include "json.h"

/* ------------------------------------------------------------------ attn_jobs */

enum {
  ATTN_JOBS_COL_JOB,
  ATTN_JOBS_COL_FUNCTION,
  ATTN_JOBS_COL_NAME,
  ATTN_JOBS_COL_STATE,
  ATTN_JOBS_COL_NODE,
  ATTN_JOBS_COL_PHASE,
  ATTN_JOBS_COL_TRIAL,
  ATTN_JOBS_COL_TRIALS,
  ATTN_JOBS_COL_EPOCH,
  ATTN_JOBS_COL_EPOCHS,
  ATTN_JOBS_COL_BATCH,
  ATTN_JOBS_COL_BATCHES,
  ATTN_JOBS_COL_TRAIN_LOSS,
  ATTN_JOBS_COL_VAL_LOSS,
  ATTN_JOBS_COL_VAL_ACCURACY,
  ATTN_JOBS_COL_VAL_F1,
  ATTN_JOBS_COL_LOSSES,
  ATTN_JOBS_COL_VERSION,
  ATTN_JOBS_COL_DEPLOYED,
  ATTN_JOBS_COL_SUBMITTED_AT,
  ATTN_JOBS_COL_STARTED_AT,
  ATTN_JOBS_COL_FINISHED_AT,
  ATTN_JOBS_COL_SECONDS,
  ATTN_JOBS_COL_RESULT,
  ATTN_JOBS_COL_ERROR,
  ATTN_JOBS_NCOLS
};
static const char attn_jobs_schema[] =
    "CREATE TABLE x(job INTEGER, function TEXT, name TEXT, state TEXT, node INTEGER, "
    "phase TEXT, trial INTEGER, trials INTEGER, epoch INTEGER, epochs INTEGER, batch INTEGER, "
    "batches INTEGER, train_loss REAL, val_loss REAL, val_accuracy REAL, val_f1 REAL, "
    "losses TEXT, version INTEGER, deployed INTEGER, submitted_at TEXT, started_at TEXT, "
    "finished_at TEXT, seconds REAL, result TEXT, error TEXT)";

/* The rows, in ATTN_JOBS_COL order; the epochs (NULL here) from attn_jobs_epochs_query. */
#define ATTN_JOBS_COLUMNS                                                                          \
  "SELECT r.job, r.function, r.name, r.state, r.node, r.phase, r.trial, r.trials, r.epoch, "       \
  "r.epochs, r.batch, r.batches, r.train_loss, r.val_loss, r.val_accuracy, r.val_f1, NULL, "       \
  "r.version, r.deployed, r.submitted_at, r.started_at, r.finished_at, "                           \
  "(julianday(coalesce(r.finished_at, CASE WHEN r.state IN ('queued', 'running') THEN 'now' "      \
  "END)) - julianday(r.started_at)) * 86400.0, r.result, r.error "
static const char attn_jobs_query[] =
    ATTN_JOBS_COLUMNS "FROM main.attn_job_runs AS r ORDER BY r.job";
/* The same rows, each run once per epoch of its job (LEFT JOIN: once with none) in the order of
 * attn_jobs_epochs_query, after the run's rowid: one statement, so that SQLite joins through
 * attn_job_epochs' primary key, or an automatic index when a crafted table has none, instead
 * of a scan of the whole table per job (20,000 jobs x 20,000 epochs: 10 s). +r.job: compared as
 * the bound job of attn_jobs_epochs_query is, with attn_job_epochs.job's affinity. */
static const char attn_jobs_joined_query[] = ATTN_JOBS_COLUMNS
    ", r.rowid, e.rowid IS NOT NULL, e.trial > 0, e.trial, e.epoch, "
    "e.train_loss, e.val_loss, e.val_accuracy, e.val_f1 FROM main.attn_job_runs AS r LEFT JOIN "
    "main.attn_job_epochs AS e ON e.job = +r.job ORDER BY r.job, r.rowid, e.trial, e.epoch";
/* A job's epochs, for the JSON array of objects of its `losses` column (a tune's, trial > 0,
 * say which trial; the comparison is SQL's, whatever the column holds). */
static const char attn_jobs_epochs_query[] =
    "SELECT trial > 0, trial, epoch, train_loss, val_loss, val_accuracy, val_f1 FROM "
    "main.attn_job_epochs WHERE job = ?1 ORDER BY trial, epoch";

typedef struct attn_jobs_row {
  sqlite3_value *values[ATTN_JOBS_NCOLS];
  char *losses; /* the epochs as JSON (sqlite3_malloc'd); NULL without attn_job_epochs */
  int live;     /* this process trains it: the progress columns from `view` */
  attn_status_view view;
} attn_jobs_row;

typedef struct attn_jobs_cursor {
  sqlite3_vtab_cursor base;
  attn_jobs_row *rows;
  int n, row;
} attn_jobs_cursor;

/* Direct-only: it reads tables of the database. */
static int attn_jobs_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                             sqlite3_vtab **out, char **errmsg) {
  return attn_vtab_connect(db, attn_jobs_schema, SQLITE_VTAB_DIRECTONLY, aux, 0,
                           sizeof(attn_jobs_cursor), out);
}

static int attn_jobs_best_index(sqlite3_vtab *vtab, sqlite3_index_info *info) {
  info->estimatedCost = 100;
  info->estimatedRows = 100;
  return SQLITE_OK;
}

static void attn_jobs_clear(attn_jobs_cursor *cur) {
  for (int i = 0; i < cur->n; i++) {
    for (int c = 0; c < ATTN_JOBS_NCOLS; c++) sqlite3_value_free(cur->rows[i].values[c]);
    sqlite3_free(cur->rows[i].losses);
  }
  sqlite3_free(cur->rows);
  cur->rows = NULL;
  cur->n = cur->row = 0;
}

static int attn_jobs_close(sqlite3_vtab_cursor *base) {
  attn_jobs_clear((attn_jobs_cursor *)base);
  sqlite3_free(base);
  return SQLITE_OK;
}

/* The type of table `name` in main: 0 absent, 1 an ordinary table, -1 something else. */
static int attn_jobs_table(sqlite3 *db, const char *name) {
  int64_t is_table = 0;
  if (attn_sql_ints(db, "SELECT type = 'table' FROM main.sqlite_schema WHERE name = ?1", &name, 1,
                    NULL, 0, &is_table, 1) != SQLITE_ROW)
    return 0;
  return is_table ? 1 : -1;
}

/* Append one epoch's object to sb, from stmt's columns col (trial > 0), col + 1 (trial), epoch,
 * train_loss, val_loss, val_accuracy, val_f1; `n` objects before it. SQLITE_OK, or
 * SQLITE_MISMATCH when a figure is a BLOB (no JSON form). */
static int attn_jobs_epoch_json(nn_strbuf *sb, sqlite3_stmt *stmt, int col, int n) {
  static const char *const keys[6] = {"trial",    "epoch",        "train_loss",
                                      "val_loss", "val_accuracy", "val_f1"};
  int rc = SQLITE_OK;
  nn_strbuf_puts(sb, n ? ",{" : "{");
  int first = sqlite3_column_int(stmt, col) ? 0 : 1; /* a trial's, or the epoch first */
  for (int k = first; rc == SQLITE_OK && k < 6; k++) {
    nn_strbuf_printf(sb, "%s\"%s\":", k > first ? "," : "", keys[k]);
    rc = attn_json_value(sb, sqlite3_column_value(stmt, col + 1 + k));
  }
  nn_strbuf_puts(sb, "}");
  return rc;
}

/* *out = the epochs of job (stmt: attn_jobs_epochs_query) as SQLite's json_group_array of
 * json_object would write them: [{"trial":1,"epoch":1,"train_loss":0.5,...},...], "[]" for
 * none. SQLITE_MISMATCH when a figure is a BLOB (no JSON form). */
static int attn_jobs_epochs(sqlite3_stmt *stmt, sqlite3_value *job, char **out) {
  nn_strbuf sb;
  nn_strbuf_init(&sb, &attn_mem);
  nn_strbuf_puts(&sb, "[");
  sqlite3_reset(stmt);
  int rc = sqlite3_bind_value(stmt, 1, job), n = 0;
  while (rc == SQLITE_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW)
    rc = attn_jobs_epoch_json(&sb, stmt, 0, n++);
  if (rc == SQLITE_DONE) rc = SQLITE_OK;
  nn_strbuf_puts(&sb, "]");
  if (rc == SQLITE_OK && sb.oom) rc = SQLITE_NOMEM;
  *out = rc == SQLITE_OK ? sqlite3_mprintf("%s", sb.data) : NULL;
  if (rc == SQLITE_OK && !*out) rc = SQLITE_NOMEM;
  nn_strbuf_free(&sb);
  sqlite3_reset(stmt);
  return rc;
}

/* The losses of the joined path's run r: sb's objects closed as an array. */
static int attn_jobs_losses(nn_strbuf *sb, attn_jobs_row *r) {
  nn_strbuf_puts(sb, "]");
  if (sb->oom) return SQLITE_NOMEM;
  r->losses = sqlite3_mprintf("%s", sb->data);
  return r->losses ? SQLITE_OK : SQLITE_NOMEM;
}

/* The rows are read at once (a few hundred jobs at most in practice): no statement of ours
 * stays open on the database while the caller reads them. */
static int attn_jobs_filter(sqlite3_vtab_cursor *base, int idx_num, const char *idx_str, int argc,
                            sqlite3_value **argv) {
  attn_jobs_cursor *cur = (attn_jobs_cursor *)base;
  attn_vtab *vtab = (attn_vtab *)base->pVtab;
  sqlite3 *db = attn_conn_db(vtab->conn);
  sqlite3_stmt *stmt = NULL, *epochs_stmt = NULL;
  char *msg = NULL;
  int rc, cap = 0;
  attn_jobs_clear(cur);
  rc = attn_store_read_begin(vtab->conn, "attn_jobs", NULL, &msg);
  if (rc != SQLITE_OK) return attn_vtab_fail(base->pVtab, rc, msg, "attn_jobs");
  int runs = attn_jobs_table(db, "attn_job_runs"), epochs = attn_jobs_table(db, "attn_job_epochs");
  if (runs < 0 || epochs < 0) {
    msg = sqlite3_mprintf("attn_jobs: %s is not an ordinary table: not the jobs table attnext "
                          "writes",
                          runs < 0 ? "attn_job_runs" : "attn_job_epochs");
    rc = SQLITE_ERROR;
    goto done;
  }
  if (runs == 0) goto done; /* no job ever ran here */
  /* with attn_job_epochs: joined in one statement; the query of one job's epochs per run only
   * where the join cannot be made (a table without rowid) */
  int joined =
      epochs && sqlite3_prepare_v2(db, attn_jobs_joined_query, -1, &stmt, NULL) == SQLITE_OK;
  rc = joined ? SQLITE_OK : sqlite3_prepare_v2(db, attn_jobs_query, -1, &stmt, NULL);
  if (rc == SQLITE_OK && epochs && !joined)
    rc = sqlite3_prepare_v2(db, attn_jobs_epochs_query, -1, &epochs_stmt, NULL);
  if (rc != SQLITE_OK) {
    msg = sqlite3_mprintf("attn_jobs: cannot read attn_job_runs: %s", sqlite3_errmsg(db));
    goto done;
  }
  const char *database = sqlite3_db_filename(db, "main");
  nn_strbuf sb; /* joined: the losses of the run being read */
  nn_strbuf_init(&sb, &attn_mem);
  int64_t run_rowid = 0;
  int nepochs = 0;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    if (joined && cur->n > 0 && sqlite3_column_int64(stmt, ATTN_JOBS_NCOLS) == run_rowid) {
      rc = attn_jobs_epoch_json(&sb, stmt, ATTN_JOBS_NCOLS + 2, nepochs++); /* the same run */
      if (rc != SQLITE_OK) break;
      continue;
    }
    if (joined && cur->n > 0 && (rc = attn_jobs_losses(&sb, &cur->rows[cur->n - 1])) != SQLITE_OK)
      break;
    if (cur->n == cap) {
      int c = cap ? 2 * cap : 16;
      attn_jobs_row *rows = sqlite3_realloc64(cur->rows, sizeof *rows * (sqlite3_uint64)c);
      if (!rows) {
        rc = SQLITE_NOMEM;
        break;
      }
      cur->rows = rows;
      cap = c;
    }
    attn_jobs_row *r = &cur->rows[cur->n++];
    memset(r, 0, sizeof *r);
    for (int c = 0; c < ATTN_JOBS_NCOLS; c++) {
      r->values[c] = sqlite3_value_dup(sqlite3_column_value(stmt, c));
      if (!r->values[c]) rc = SQLITE_NOMEM;
    }
    if (rc == SQLITE_NOMEM) break;
    if (joined) {
      run_rowid = sqlite3_column_int64(stmt, ATTN_JOBS_NCOLS);
      nepochs = 0;
      sb.len = 0;
      nn_strbuf_puts(&sb, "[");
      if (sqlite3_column_int(stmt, ATTN_JOBS_NCOLS + 1) &&
          (rc = attn_jobs_epoch_json(&sb, stmt, ATTN_JOBS_NCOLS + 2, nepochs++)) != SQLITE_OK)
        break;
    } else if (epochs_stmt) {
      rc = attn_jobs_epochs(epochs_stmt, r->values[ATTN_JOBS_COL_JOB], &r->losses);
      if (rc != SQLITE_OK) break;
    }
    const char *state = (const char *)sqlite3_column_text(stmt, ATTN_JOBS_COL_STATE);
    if (state && strcmp(state, "running") == 0 && database)
      r->live = attn_job_live(database, sqlite3_column_int64(stmt, ATTN_JOBS_COL_JOB), &r->view);
  }
  if (rc == SQLITE_DONE && joined && cur->n > 0) rc = attn_jobs_losses(&sb, &cur->rows[cur->n - 1]);
  if (rc == SQLITE_OK) rc = SQLITE_DONE;
  nn_strbuf_free(&sb);
  if (rc == SQLITE_DONE) {
    rc = SQLITE_OK;
  } else if (rc == SQLITE_MISMATCH) {
    msg = sqlite3_mprintf("attn_jobs: cannot read attn_job_runs: " ATTN_JSON_BLOB_MESSAGE);
    rc = SQLITE_ERROR;
  } else if (rc != SQLITE_NOMEM) {
    msg = sqlite3_mprintf("attn_jobs: cannot read attn_job_runs: %s", sqlite3_errmsg(db));
  }
done:
  sqlite3_finalize(stmt);
  sqlite3_finalize(epochs_stmt);
  attn_store_read_end(vtab->conn);
  if (rc != SQLITE_OK) {
    attn_jobs_clear(cur);
    return attn_vtab_fail(base->pVtab, rc, msg, "attn_jobs");
  }
  return SQLITE_OK;
}

static int attn_jobs_next(sqlite3_vtab_cursor *base) {
  ((attn_jobs_cursor *)base)->row++;
  return SQLITE_OK;
}

static int attn_jobs_eof(sqlite3_vtab_cursor *base) {
  attn_jobs_cursor *cur = (attn_jobs_cursor *)base;
  return cur->row >= cur->n;
}

static void attn_jobs_count(sqlite3_context *ctx, int v) {
  if (v > 0) sqlite3_result_int(ctx, v);
}

static void attn_jobs_figure(sqlite3_context *ctx, double v) {
  if (isfinite(v) && v >= 0) sqlite3_result_double(ctx, v);
}

static int attn_jobs_column(sqlite3_vtab_cursor *base, sqlite3_context *ctx, int col) {
  attn_jobs_cursor *cur = (attn_jobs_cursor *)base;
  const attn_jobs_row *r = &cur->rows[cur->row];
  const attn_status_view *v = &r->view;
  if (r->live) { /* this process trains it: the figures of now, not of the last progress write */
    switch (col) {
    case ATTN_JOBS_COL_PHASE:
      sqlite3_result_text(ctx, v->phase, -1, SQLITE_STATIC);
      return SQLITE_OK;
    case ATTN_JOBS_COL_TRIAL: attn_jobs_count(ctx, v->trial); return SQLITE_OK;
    case ATTN_JOBS_COL_TRIALS: attn_jobs_count(ctx, v->trials); return SQLITE_OK;
    case ATTN_JOBS_COL_EPOCH: sqlite3_result_int(ctx, v->epoch); return SQLITE_OK;
    case ATTN_JOBS_COL_EPOCHS: attn_jobs_count(ctx, v->epochs); return SQLITE_OK;
    case ATTN_JOBS_COL_BATCH: sqlite3_result_int(ctx, v->batch); return SQLITE_OK;
    case ATTN_JOBS_COL_BATCHES: attn_jobs_count(ctx, v->batches); return SQLITE_OK;
    case ATTN_JOBS_COL_TRAIN_LOSS:
      if (isfinite(v->train_loss)) sqlite3_result_double(ctx, v->train_loss);
      return SQLITE_OK;
    case ATTN_JOBS_COL_VAL_LOSS: attn_jobs_figure(ctx, v->val_loss); return SQLITE_OK;
    case ATTN_JOBS_COL_VAL_ACCURACY: attn_jobs_figure(ctx, v->val_accuracy); return SQLITE_OK;
    case ATTN_JOBS_COL_VAL_F1: attn_jobs_figure(ctx, v->val_f1); return SQLITE_OK;
    default: break;
    }
  }
  if (col < 0 || col >= ATTN_JOBS_NCOLS) return SQLITE_OK;
  if (col == ATTN_JOBS_COL_LOSSES && r->losses) {
    sqlite3_result_text(ctx, r->losses, -1, SQLITE_TRANSIENT);
    sqlite3_result_subtype(ctx, ATTN_JSON_SUBTYPE); /* json_object() nests it */
    return SQLITE_OK;
  }
  sqlite3_result_value(ctx, r->values[col]);
  if ((col == ATTN_JOBS_COL_LOSSES || col == ATTN_JOBS_COL_RESULT) &&
      sqlite3_value_type(r->values[col]) == SQLITE_TEXT)
    sqlite3_result_subtype(ctx, ATTN_JSON_SUBTYPE); /* json_object() nests it */
  return SQLITE_OK;
}

static int attn_jobs_rowid(sqlite3_vtab_cursor *base, sqlite_int64 *rowid) {
  attn_jobs_cursor *cur = (attn_jobs_cursor *)base;
  *rowid = sqlite3_value_int64(cur->rows[cur->row].values[ATTN_JOBS_COL_JOB]);
  return SQLITE_OK;
}

static const sqlite3_module attn_jobs_module = {
    .iVersion = 0,
    .xCreate = NULL, /* eponymous only */
    .xConnect = attn_jobs_connect,
    .xBestIndex = attn_jobs_best_index,
    .xDisconnect = attn_vtab_disconnect,
    .xOpen = attn_vtab_open,
    .xClose = attn_jobs_close,
    .xFilter = attn_jobs_filter,
    .xNext = attn_jobs_next,
    .xEof = attn_jobs_eof,
    .xColumn = attn_jobs_column,
    .xRowid = attn_jobs_rowid,
};

/* ------------------------------------------------------------------ attn_cancel */

/* A job id argument: an integer (or a text that reads as one, spaces around it allowed). The text
 * is read here rather than by sqlite3_value_numeric_type on a copy of the value: a copy from
 * sqlite3_value_dup has no connection, which SQLite 3.52's conversion dereferences (a crash). */
static int attn_job_id_value(const char *fn, sqlite3_value *v, int64_t *out, char **msg) {
  int ok = 0;
  if (sqlite3_value_type(v) == SQLITE_INTEGER) {
    *out = sqlite3_value_int64(v);
    ok = 1;
  } else if (sqlite3_value_type(v) == SQLITE_TEXT) {
    const char *t = (const char *)sqlite3_value_text(v);
    if (!t) return SQLITE_NOMEM;
    while (*t == ' ' || (*t >= '\t' && *t <= '\r')) t++;
    const char *d = t + (*t == '+' || *t == '-');
    if (*d >= '0' && *d <= '9') {
      char *end;
      errno = 0;
      long long n = strtoll(t, &end, 10);
      while (*end == ' ' || (*end >= '\t' && *end <= '\r')) end++;
      if (!*end && errno != ERANGE) {
        *out = n;
        ok = 1;
      }
    }
  }
  if (ok) return SQLITE_OK;
  const char *text = (const char *)sqlite3_value_text(v);
  *msg = sqlite3_mprintf("%s: the job must be an integer (a job of attn_jobs), got %s%s%s", fn,
                         sqlite3_value_type(v) == SQLITE_TEXT ? "'" : "", text ? text : "NULL",
                         sqlite3_value_type(v) == SQLITE_TEXT ? "'" : "");
  return SQLITE_ERROR;
}

/* attn_cancel(job) -> 1 when the job was queued or running and is now cancelled, 0 when it had
 * ended already. The job's thread stops within a second (its next progress write finds the row
 * cancelled); nothing it trained is saved. */
static void attn_cancel_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  attn_conn *conn = sqlite3_user_data(ctx);
  sqlite3 *db = attn_conn_db(conn);
  const char *fn = "attn_cancel";
  sqlite3_stmt *stmt = NULL;
  char *msg = NULL;
  int64_t job = 0;
  int rc = attn_job_id_value(fn, argv[0], &job, &msg);
  if (rc != SQLITE_OK) goto done;
  if (!attn_jobs_here(conn)) {
    msg = sqlite3_mprintf("%s: no jobs here: jobs run only in a dqlite node "
                          "(build/attnext-node); here attn_train, attn_fit and attn_tune train in "
                          "the caller's statement: interrupt it (sqlite3_interrupt, Ctrl-C)",
                          fn);
    rc = SQLITE_ERROR;
    goto done;
  }
  if ((rc = attn_conn_check_write(conn, fn, &msg)) != SQLITE_OK) goto done;
  if (attn_jobs_table(db, "attn_job_runs") != 1) {
    msg = sqlite3_mprintf("%s: no job %lld", fn, (long long)job);
    rc = SQLITE_ERROR;
    goto done;
  }
  rc = sqlite3_prepare_v2(db,
                          "UPDATE main.attn_job_runs SET state = 'cancelled', error = "
                          "'cancelled by attn_cancel', phase = NULL, finished_at = "
                          "strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE job = ?1 AND state IN "
                          "('queued', 'running')",
                          -1, &stmt, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_int64(stmt, 1, job);
    rc = attn_exec_step(stmt, db, fn, "cancel the job", &msg);
  } else {
    msg = sqlite3_mprintf("%s: %s", fn, sqlite3_errmsg(db));
  }
  sqlite3_finalize(stmt);
  stmt = NULL;
  if (rc != SQLITE_OK) goto done;
  if (sqlite3_changes(db) == 1) {
    sqlite3_result_int(ctx, 1);
    goto done;
  }
  rc = attn_sql_ints(db, "SELECT state FROM main.attn_job_runs WHERE job = ?1", NULL, 0, &job, 1,
                     NULL, 0);
  if (rc == SQLITE_ROW) {
    rc = SQLITE_OK;
    sqlite3_result_int(ctx, 0); /* done, failed or cancelled already */
  } else if (rc == SQLITE_DONE) {
    msg = sqlite3_mprintf("%s: no job %lld", fn, (long long)job);
    rc = SQLITE_ERROR;
  } else {
    msg = sqlite3_mprintf("%s: %s", fn, sqlite3_errmsg(db));
  }
done:
  sqlite3_finalize(stmt);
  if (rc != SQLITE_OK) attn_result_error(ctx, rc, msg, fn);
  else sqlite3_free(msg);
}

/* ------------------------------------------------------------------ attn_job_commit */

/* One version of a job's result, read from its image. */
typedef struct attn_commit_item {
  nn_model *model;
  char *metrics;
  nn_epoch_stats *log;
  int nlog;
  int64_t old_version;
  attn_lineage_info lineage;
  char *texts[11]; /* the lineage's strings (owned) */
} attn_commit_item;

static void attn_commit_items_free(attn_commit_item *items, int n) {
  for (int i = 0; items && i < n; i++) {
    nn_model_free(items[i].model);
    sqlite3_free(items[i].metrics);
    sqlite3_free(items[i].log);
    for (int k = 0; k < 11; k++) sqlite3_free(items[i].texts[k]);
  }
  sqlite3_free(items);
}

static char *attn_column_dup(sqlite3_stmt *stmt, int col) {
  if (sqlite3_column_type(stmt, col) == SQLITE_NULL) return NULL;
  return sqlite3_mprintf("%s", (const char *)sqlite3_column_text(stmt, col));
}

static double attn_column_figure(sqlite3_stmt *stmt, int col) {
  return sqlite3_column_type(stmt, col) == SQLITE_NULL ? NAN : sqlite3_column_double(stmt, col);
}

/* Read the lineage and the log of version `version` of the image m into item. */
static int attn_commit_item_read(sqlite3 *m, attn_commit_item *item, int64_t version) {
  sqlite3_stmt *stmt = NULL;
  int rc = sqlite3_prepare_v2(m,
                              "SELECT epoch, train_loss, val_loss, val_accuracy, val_f1, lr, "
                              "seconds FROM log WHERE version = ?1 ORDER BY epoch LIMIT 100000",
                              -1, &stmt, NULL);
  if (rc != SQLITE_OK) return rc;
  sqlite3_bind_int64(stmt, 1, version);
  int cap = 0;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    if (item->nlog == cap) {
      cap = cap ? 2 * cap : 32;
      nn_epoch_stats *log = sqlite3_realloc64(item->log, sizeof *log * (sqlite3_uint64)cap);
      if (!log) {
        rc = SQLITE_NOMEM;
        break;
      }
      item->log = log;
    }
    nn_epoch_stats *e = &item->log[item->nlog++];
    memset(e, 0, sizeof *e);
    e->epoch = sqlite3_column_int(stmt, 0);
    e->train_loss = attn_column_figure(stmt, 1);
    e->val_loss = attn_column_figure(stmt, 2);
    e->val_accuracy = attn_column_figure(stmt, 3);
    e->val_f1 = attn_column_figure(stmt, 4);
    e->lr = attn_column_figure(stmt, 5);
    e->seconds = attn_column_figure(stmt, 6);
  }
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) return rc == SQLITE_ROW ? SQLITE_ERROR : rc;
  rc = sqlite3_prepare_v2(m,
                          "SELECT function, query, rows_sha256, validation_query, "
                          "validation_sha256, options, from_name, backend, started_at, "
                          "ended_at, rows, validation_rows, from_version FROM lineage WHERE "
                          "version = ?1",
                          -1, &stmt, NULL);
  if (rc != SQLITE_OK) return rc;
  sqlite3_bind_int64(stmt, 1, version);
  attn_lineage_info *l = &item->lineage;
  memset(l, 0, sizeof *l);
  l->rows = l->validation_rows = l->from_version = -1;
  if ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    for (int k = 0; k < 10; k++) {
      item->texts[k] = attn_column_dup(stmt, k);
      if (sqlite3_column_type(stmt, k) != SQLITE_NULL && !item->texts[k]) rc = SQLITE_NOMEM;
    }
    l->function = item->texts[0];
    l->query = item->texts[1];
    l->rows_sha256 = item->texts[2];
    l->validation_query = item->texts[3];
    l->validation_sha256 = item->texts[4];
    l->options = item->texts[5];
    l->from_name = item->texts[6];
    l->backend = item->texts[7];
    l->started_at = item->texts[8];
    l->ended_at = item->texts[9];
    for (int k = 10; k < 13; k++) {
      int64_t v =
          sqlite3_column_type(stmt, k) == SQLITE_INTEGER ? sqlite3_column_int64(stmt, k) : -1;
      if (k == 10) l->rows = v;
      if (k == 11) l->validation_rows = v;
      if (k == 12) l->from_version = v;
    }
    if (rc == SQLITE_ROW) rc = SQLITE_DONE;
  }
  sqlite3_finalize(stmt);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* The end of the first step of a json_set path (".key", "[N]", "[#]", "[#-N]"). */
static const char *attn_json_step_end(const char *path) {
  if (*path == '[') {
    const char *end = strchr(path, ']');
    return end ? end + 1 : path + strlen(path);
  }
  const char *end = path + 1;
  while (*end && *end != '.' && *end != '[') end++;
  return end;
}

/* The value json_set creates for the rest of a path that names no member yet: `value` itself,
 * {"key": ...} for ".key", [...] for "[0]". 0 when the path cannot be created (SQLite's json_set
 * then leaves the document as it is). */
static int attn_json_create(nn_strbuf *sb, const char *path, const char *value) {
  if (!*path) {
    nn_strbuf_puts(sb, value);
    return 1;
  }
  const char *end = attn_json_step_end(path);
  if (*path == '.') {
    size_t at = sb->len; /* a failed creation below leaves sb as it was */
    nn_strbuf_puts(sb, "{\"");
    nn_strbuf_append(sb, path + 1, (size_t)(end - path - 1));
    nn_strbuf_puts(sb, "\":");
    if (!attn_json_create(sb, end, value)) {
      sb->len = at;
      if (sb->data) sb->data[at] = 0;
      return 0;
    }
    nn_strbuf_puts(sb, "}");
    return 1;
  }
  if (strncmp(path, "[0]", 3) != 0) return 0;
  size_t at = sb->len;
  nn_strbuf_puts(sb, "[");
  if (!attn_json_create(sb, end, value)) {
    sb->len = at;
    if (sb->data) sb->data[at] = 0;
    return 0;
  }
  nn_strbuf_puts(sb, "]");
  return 1;
}

/* v (parsed from text) with `value` (JSON text) set at path, as SQLite's json_set writes it: a
 * member that exists is replaced where it is, a missing one is appended to its object (or array,
 * at index count), a path that names nothing changes nothing; no whitespace between tokens, each
 * token as written. Paths: steps ".key" (a key without quotes), "[N]", "[#]" and "[#-N]". */
static void attn_json_set_emit(nn_strbuf *sb, const nn_json *v, const char *text, const char *path,
                               const char *value) {
  if (!*path) {
    nn_strbuf_puts(sb, value);
    return;
  }
  const char *end = attn_json_step_end(path);
  size_t target = (size_t)-1; /* the member or item the step names; count: a new one */
  if (*path == '.' && v->type == NN_JSON_OBJECT) {
    size_t klen = (size_t)(end - path - 1);
    target = v->count;
    for (size_t i = 0; i < v->count && target == v->count; i++)
      if (v->items[i].key_len == klen && memcmp(v->items[i].key, path + 1, klen) == 0) target = i;
  } else if (*path == '[' && v->type == NN_JSON_ARRAY && end[-1] == ']') {
    const char *p = path + 1;
    uint64_t i = 0, back = 0;
    int ok = 1, digits = 0;
    if (*p == '#') {
      p++;
      if (*p == '-') {
        for (p++; *p >= '0' && *p <= '9'; p++, digits++) back = back * 10 + (uint64_t)(*p - '0');
        ok = digits > 0 && digits < 10 && back <= v->count;
      }
      i = v->count - back;
    } else {
      for (; *p >= '0' && *p <= '9'; p++, digits++) i = i * 10 + (uint64_t)(*p - '0');
      ok = digits > 0 && digits < 10;
    }
    if (ok && p + 1 == end && i <= v->count) target = (size_t)i;
  }
  if (target == (size_t)-1) {
    nn_strbuf_append_json_compact(sb, v, text);
    return;
  }
  int object = v->type == NN_JSON_OBJECT;
  nn_strbuf_puts(sb, object ? "{" : "[");
  for (size_t i = 0; i < v->count; i++) {
    const nn_json *item = &v->items[i];
    if (i) nn_strbuf_puts(sb, ",");
    if (object) {
      nn_strbuf_append(sb, text + item->key_start, item->key_end - item->key_start);
      nn_strbuf_puts(sb, ":");
    }
    if (i == target) attn_json_set_emit(sb, item, text, end, value);
    else nn_strbuf_append_json_compact(sb, item, text);
  }
  if (target == v->count) { /* a new member or item, when the rest of the path can be made */
    size_t at = sb->len;
    if (v->count) nn_strbuf_puts(sb, ",");
    if (object) {
      nn_strbuf_puts(sb, "\"");
      nn_strbuf_append(sb, path + 1, (size_t)(end - path - 1));
      nn_strbuf_puts(sb, "\":");
    }
    if (!attn_json_create(sb, end, value)) {
      sb->len = at;
      if (sb->data) sb->data[at] = 0;
    }
  }
  nn_strbuf_puts(sb, object ? "}" : "]");
}

/* *json = json_set(*json, path, value), byte for byte what SQLite's json_set returns (path
 * starts with "$"); the value: kind 0 the integer `number`, 1 true when `number` else false, 2
 * the string `text`. A *json that is NULL or not JSON (a hand-made image) is left as it is. */
static int attn_commit_json_set(char **json, const char *path, int kind, int64_t number,
                                const char *text) {
  nn_json *doc = NULL;
  char err[NN_ERR_LEN];
  if (!*json) return SQLITE_OK;
  int st = nn_json_parse(&doc, *json, strlen(*json), &attn_mem, err);
  if (st == NN_NOMEM) return SQLITE_NOMEM;
  if (st != NN_OK) return SQLITE_OK;
  nn_strbuf value, sb;
  nn_strbuf_init(&value, &attn_mem);
  nn_strbuf_init(&sb, &attn_mem);
  if (kind == 0) nn_strbuf_printf(&value, "%lld", (long long)number);
  else if (kind == 1) nn_strbuf_puts(&value, number ? "true" : "false");
  else nn_strbuf_append_json_string(&value, text, strlen(text));
  if (!value.oom) attn_json_set_emit(&sb, doc, *json, path + 1, value.data);
  char *copy = value.oom || sb.oom ? NULL : sqlite3_mprintf("%s", sb.data);
  nn_strbuf_free(&value);
  nn_strbuf_free(&sb);
  nn_json_free(doc);
  if (!copy) return SQLITE_NOMEM;
  sqlite3_free(*json);
  *json = copy;
  return SQLITE_OK;
}

/* What attn_job_commit reads and builds, shared by its steps below. */
typedef struct attn_commit {
  const char *fn;
  sqlite3 *db; /* the cluster's database */
  sqlite3 *m;  /* the job's result image, read-only */
  int64_t job;
  char *state, *function, *name, *result;  /* the job's row, and the answer to rewrite */
  int64_t base_version, base_rowid, first; /* what the run compared with, its first version */
  int64_t cur_version, cur_rowid;          /* the deployed version now */
  attn_commit_item *items;
  attn_store_item *store;
  int n, chosen;
  char *msg;
} attn_commit;

/* The job's row for this token: its state, function and name. A job already done: *done = 1
 * and *version its version (the thread asks again when the answer was lost). */
static int attn_commit_job(attn_commit *c, sqlite3_value *token, int *done, int64_t *version) {
  sqlite3_stmt *stmt = NULL;
  *done = 0;
  *version = 0;
  if (attn_jobs_table(c->db, "attn_job_runs") == 1 &&
      sqlite3_prepare_v2(c->db,
                         "SELECT state, function, name, version FROM main.attn_job_runs WHERE "
                         "job = ?1 AND token = ?2",
                         -1, &stmt, NULL) == SQLITE_OK) {
    sqlite3_bind_int64(stmt, 1, c->job);
    sqlite3_bind_value(stmt, 2, token);
    if (sqlite3_step(stmt) == SQLITE_ROW) {
      c->state = attn_column_dup(stmt, 0);
      c->function = attn_column_dup(stmt, 1);
      c->name = attn_column_dup(stmt, 2);
      if (c->state && strcmp(c->state, "done") == 0) {
        *done = 1;
        *version = sqlite3_column_int64(stmt, 3);
      }
    }
  }
  sqlite3_finalize(stmt);
  if (*done) return SQLITE_OK;
  if (!c->state || !c->function || !c->name) {
    c->msg = sqlite3_mprintf("%s: no job %lld with that token", c->fn, (long long)c->job);
    return SQLITE_ERROR;
  }
  if (strcmp(c->state, "running") != 0) {
    c->msg = sqlite3_mprintf("%s: job %lld is %s: its model is not saved", c->fn, (long long)c->job,
                             c->state);
    return SQLITE_ERROR;
  }
  return SQLITE_OK;
}

/* The image, read-only in a connection of its own (c->m), and its meta row: the job's function
 * and name must match its row. */
static int attn_commit_image(attn_commit *c, sqlite3_value *image) {
  sqlite3_stmt *stmt = NULL;
  sqlite3_int64 size = sqlite3_value_bytes(image);
  unsigned char *copy = sqlite3_malloc64((sqlite3_uint64)(size ? size : 1));
  if (!copy) return SQLITE_NOMEM;
  if (size) memcpy(copy, sqlite3_value_blob(image), (size_t)size);
  int rc = sqlite3_open_v2(":memory:", &c->m, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_db_config(c->m, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
    rc = sqlite3_deserialize(c->m, "main", copy, size, size,
                             SQLITE_DESERIALIZE_FREEONCLOSE | SQLITE_DESERIALIZE_READONLY);
  } else {
    sqlite3_free(copy);
  }
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(c->m,
                            "SELECT function, name, base_version, base_rowid, first_version, "
                            "result FROM meta",
                            -1, &stmt, NULL);
  if (rc == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW) {
    const char *f = (const char *)sqlite3_column_text(stmt, 0);
    const char *nm = (const char *)sqlite3_column_text(stmt, 1);
    if (!f || !nm || strcmp(f, c->function) != 0 || strcmp(nm, c->name) != 0) rc = SQLITE_MISMATCH;
    c->base_version = sqlite3_column_int64(stmt, 2);
    c->base_rowid = sqlite3_column_int64(stmt, 3);
    c->first = sqlite3_column_int64(stmt, 4);
    c->result = attn_column_dup(stmt, 5);
  } else if (rc == SQLITE_OK) {
    rc = SQLITE_CORRUPT;
  }
  sqlite3_finalize(stmt);
  if (rc != SQLITE_OK) {
    c->msg = sqlite3_mprintf("%s: the image is not job %lld's result (%s)", c->fn,
                             (long long)c->job, c->m ? sqlite3_errmsg(c->m) : sqlite3_errstr(rc));
    return SQLITE_ERROR;
  }
  return SQLITE_OK;
}

/* A version the run deployed under "deploy": "if_better" when the deployed version changed
 * while it ran: not deployed (*deploy = 0), and deploy_reason says why, in its metrics and in
 * attn_fit's answer. */
static int attn_commit_recheck(attn_commit *c, attn_commit_item *it, int *deploy) {
  nn_json *doc = NULL; /* the metrics: its deploy policy and deploy_reason */
  char jerr[NN_ERR_LEN];
  if (!it->metrics) return SQLITE_OK;
  if (nn_json_parse(&doc, it->metrics, strlen(it->metrics), &attn_mem, jerr) == NN_NOMEM)
    return SQLITE_NOMEM;
  int rc = SQLITE_OK;
  const char *policy = nn_json_string(nn_json_get(doc, "deploy"), NULL);
  if (policy && strcmp(policy, "if_better") == 0) {
    const char *why = nn_json_string(nn_json_get(doc, "deploy_reason"), NULL);
    char before[32] = "none", now[32] = "none";
    if (c->base_version) snprintf(before, sizeof before, "%lld", (long long)c->base_version);
    if (c->cur_version) snprintf(now, sizeof now, "%lld", (long long)c->cur_version);
    char *reason = sqlite3_mprintf("%s; but the deployed version changed while the job ran "
                                   "(%s, now %s): not deployed, compare them and deploy with "
                                   "attn_deploy",
                                   why ? why : "", before, now);
    *deploy = 0;
    rc = reason ? attn_commit_json_set(&it->metrics, "$.deployed", 1, 0, NULL) : SQLITE_NOMEM;
    if (rc == SQLITE_OK) rc = attn_commit_json_set(&it->metrics, "$.deploy_reason", 2, 0, reason);
    if (rc == SQLITE_OK && c->result && strcmp(c->function, "attn_fit") == 0)
      rc = attn_commit_json_set(&c->result, "$.deploy_reason", 2, 0, reason);
    sqlite3_free(reason);
  }
  nn_json_free(doc);
  return rc;
}

/* One more slot in c->items and c->store, zeroed: c->n - 1. */
static int attn_commit_grow(attn_commit *c, int *cap) {
  if (c->n == *cap) {
    *cap = *cap ? 2 * *cap : 4;
    attn_commit_item *more = sqlite3_realloc64(c->items, sizeof *more * (sqlite3_uint64)*cap);
    attn_store_item *smore = sqlite3_realloc64(c->store, sizeof *smore * (sqlite3_uint64)*cap);
    if (more) c->items = more;
    if (smore) c->store = smore;
    if (!more || !smore) return SQLITE_NOMEM;
  }
  memset(&c->items[c->n], 0, sizeof c->items[c->n]);
  memset(&c->store[c->n], 0, sizeof c->store[c->n]);
  c->n++;
  return SQLITE_OK;
}

/* The image's versions: each model loaded, its metrics, log and lineage, and whether it is
 * deployed now (c->items, c->store). */
static int attn_commit_versions(attn_commit *c) {
  sqlite3_stmt *stmt = NULL;
  attn_store_deployed_row(c->db, c->name, &c->cur_version, &c->cur_rowid);
  int changed = c->cur_version != c->base_version || c->cur_rowid != c->base_rowid, cap = 0;
  int rc = sqlite3_prepare_v2(c->m,
                              "SELECT version, deployed, metrics, weights FROM models ORDER BY "
                              "version LIMIT 1000",
                              -1, &stmt, NULL);
  while (rc == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW) {
    if ((rc = attn_commit_grow(c, &cap)) != SQLITE_OK) break;
    attn_commit_item *it = &c->items[c->n - 1];
    char err[NN_ERR_LEN] = "";
    const unsigned char *blob = sqlite3_column_blob(stmt, 3);
    static const unsigned char empty[1] = {0};
    int st = nn_model_load_ex(&it->model, blob ? blob : empty,
                              blob ? (size_t)sqlite3_column_bytes(stmt, 3) : 0, NULL, NULL,
                              &attn_mem, err);
    if (st != NN_OK) {
      it->model = NULL;
      c->msg = sqlite3_mprintf("%s: job %lld's version %lld: %s", c->fn, (long long)c->job,
                               (long long)sqlite3_column_int64(stmt, 0), err);
      rc = attn_nn_rc(st);
      break;
    }
    it->old_version = sqlite3_column_int64(stmt, 0);
    it->metrics = attn_column_dup(stmt, 2);
    int deploy = sqlite3_column_int(stmt, 1) != 0;
    if (deploy && changed) rc = attn_commit_recheck(c, it, &deploy);
    if (rc != SQLITE_OK) break;
    rc = attn_commit_item_read(c->m, it, it->old_version);
    attn_store_item *s = &c->store[c->n - 1];
    s->model = it->model;
    s->metrics = it->metrics;
    s->log = it->log;
    s->nlog = it->nlog;
    s->deploy = deploy;
    s->lineage = &it->lineage;
  }
  sqlite3_finalize(stmt);
  if (rc == SQLITE_OK && c->n == 0) {
    c->msg = sqlite3_mprintf("%s: job %lld's result holds no model", c->fn, (long long)c->job);
    rc = SQLITE_ERROR;
  }
  if (rc != SQLITE_OK && !c->msg)
    c->msg = sqlite3_mprintf("%s: cannot read job %lld's result: %s", c->fn, (long long)c->job,
                             rc == SQLITE_NOMEM ? "out of memory" : sqlite3_errmsg(c->m));
  return rc;
}

/* The answer as the function would have given it here: the versions the cluster numbered
 * (attn_fit's object, attn_train's last row, attn_tune's trials), and attn_tune's chosen trial
 * (c->chosen). */
static int attn_commit_answer(attn_commit *c) {
  int rc = SQLITE_OK, tune = strcmp(c->function, "attn_tune") == 0;
  for (int i = 0; rc == SQLITE_OK && c->result && i < c->n; i++) {
    char path[64];
    if (strcmp(c->function, "attn_fit") == 0) {
      rc = attn_commit_json_set(&c->result, "$.version", 0, c->store[i].version, NULL);
      if (rc == SQLITE_OK)
        rc = attn_commit_json_set(&c->result, "$.deployed", 1, c->store[i].deploy, NULL);
      continue;
    }
    int at = (int)(c->items[i].old_version - c->first);
    if (tune) {
      nn_json *doc = NULL;
      char jerr[NN_ERR_LEN];
      if (nn_json_parse(&doc, c->result, strlen(c->result), &attn_mem, jerr) == NN_NOMEM)
        return SQLITE_NOMEM;
      const nn_json *ch = nn_json_get(
          doc && doc->type == NN_JSON_ARRAY && at >= 0 ? nn_json_at(doc, (size_t)at) : NULL,
          "chosen");
      if (ch && (ch->type == NN_JSON_TRUE || (ch->type == NN_JSON_NUMBER && ch->number != 0)))
        c->chosen = i;
      nn_json_free(doc);
      snprintf(path, sizeof path, "$[%d].version", at);
    } else {
      snprintf(path, sizeof path, "$[#-1].version");
    }
    rc = attn_commit_json_set(&c->result, path, 0, c->store[i].version, NULL);
    memcpy(path + strlen(path) - 7, "deployed", 9);
    if (rc == SQLITE_OK) rc = attn_commit_json_set(&c->result, path, 0, c->store[i].deploy, NULL);
  }
  return rc;
}

/* The job's epochs, all of them now, in attn_job_epochs (the live ones replaced). */
static int attn_commit_epochs(attn_commit *c) {
  sqlite3_stmt *stmt = NULL;
  int tune = strcmp(c->function, "attn_tune") == 0;
  int rc =
      sqlite3_prepare_v2(c->db, "DELETE FROM main.attn_job_epochs WHERE job = ?1", -1, &stmt, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_int64(stmt, 1, c->job);
    rc = attn_exec_step(stmt, c->db, c->fn, "write the job's epochs", &c->msg);
  }
  sqlite3_finalize(stmt);
  stmt = NULL;
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(c->db,
                            "INSERT INTO main.attn_job_epochs(job, trial, epoch, train_loss, "
                            "val_loss, val_accuracy, val_f1, lr, seconds) VALUES(?1, ?2, ?3, "
                            "?4, ?5, ?6, ?7, ?8, ?9)",
                            -1, &stmt, NULL);
  for (int i = 0; rc == SQLITE_OK && i < c->n; i++)
    for (int e = 0; rc == SQLITE_OK && e < c->items[i].nlog; e++) {
      const nn_epoch_stats *s = &c->items[i].log[e];
      double figures[6] = {s->train_loss, s->val_loss, s->val_accuracy,
                           s->val_f1,     s->lr,       s->seconds};
      sqlite3_reset(stmt);
      sqlite3_bind_int64(stmt, 1, c->job);
      sqlite3_bind_int64(stmt, 2, tune ? c->items[i].old_version - c->first + 1 : 0);
      sqlite3_bind_int(stmt, 3, s->epoch);
      for (int k = 0; k < 6; k++) {
        if (isfinite(figures[k])) sqlite3_bind_double(stmt, 4 + k, figures[k]);
        else sqlite3_bind_null(stmt, 4 + k);
      }
      rc = attn_exec_step(stmt, c->db, c->fn, "write the job's epochs", &c->msg);
    }
  sqlite3_finalize(stmt);
  return rc;
}

/* The job's row: done, with its (chosen) version and the answer. */
static int attn_commit_done(attn_commit *c) {
  sqlite3_stmt *stmt = NULL;
  int rc = sqlite3_prepare_v2(c->db,
                              "UPDATE main.attn_job_runs SET state = 'done', phase = NULL, "
                              "finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), version = ?2, "
                              "deployed = ?3, result = ?4, error = NULL, epoch = ?5, epochs = ?5, "
                              "batch = NULL, batches = NULL WHERE job = ?1",
                              -1, &stmt, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_int64(stmt, 1, c->job);
    sqlite3_bind_int64(stmt, 2, c->store[c->chosen].version);
    sqlite3_bind_int(stmt, 3, c->store[c->chosen].deploy);
    sqlite3_bind_text(stmt, 4, c->result, -1, SQLITE_STATIC);
    sqlite3_bind_int(stmt, 5, c->items[c->chosen].nlog);
    rc = attn_exec_step(stmt, c->db, c->fn, "mark the job done", &c->msg);
  }
  sqlite3_finalize(stmt);
  return rc;
}

/* attn_job_commit(job, token, image) -> version. Run by a job's thread through the leader,
 * inside BEGIN ... COMMIT: the versions of the job's result (`image`: a database image of
 * tables meta, models, log, lineage) are stored as the next versions of its name, numbered after
 * the cluster's own (attn_store_save_items: log, lineage, deployment), and the job's row says
 * done. A version the run deployed under "deploy": "if_better" is not deployed when the deployed
 * version changed while the job ran (its comparison no longer holds: deploy_reason says so).
 * Only the job's own thread knows its token; a job already done answers its version (the
 * thread asks again when the answer was lost), a job no longer running is refused. */
static void attn_job_commit_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  attn_conn *conn = sqlite3_user_data(ctx);
  attn_commit c;
  memset(&c, 0, sizeof c);
  c.fn = "attn_job_commit";
  c.db = attn_conn_db(conn);
  int done = 0;
  int64_t done_version = 0;
  int rc = attn_job_id_value(c.fn, argv[0], &c.job, &c.msg);
  if (rc == SQLITE_OK && !attn_jobs_here(conn)) {
    c.msg = sqlite3_mprintf("%s: a dqlite node's job thread commits its result with it; there "
                            "are no jobs here",
                            c.fn);
    rc = SQLITE_ERROR;
  }
  if (rc == SQLITE_OK) rc = attn_conn_check_write(conn, c.fn, &c.msg);
  if (rc == SQLITE_OK &&
      (sqlite3_value_type(argv[1]) != SQLITE_TEXT || sqlite3_value_type(argv[2]) != SQLITE_BLOB)) {
    c.msg = sqlite3_mprintf("%s: expected (job, token, image): a job's token (text) and the "
                            "image of its result (a BLOB)",
                            c.fn);
    rc = SQLITE_ERROR;
  }
  if (rc == SQLITE_OK) rc = attn_commit_job(&c, argv[1], &done, &done_version);
  if (rc == SQLITE_OK && done) {
    sqlite3_result_int64(ctx, done_version); /* committed already: the answer was lost */
  } else {
    if (rc == SQLITE_OK) rc = attn_commit_image(&c, argv[2]);
    if (rc == SQLITE_OK) rc = attn_commit_versions(&c);
    if (rc == SQLITE_OK) rc = attn_store_save_items(conn, c.function, c.name, c.store, c.n, &c.msg);
    if (rc == SQLITE_OK) rc = attn_commit_answer(&c);
    if (rc == SQLITE_OK) rc = attn_commit_epochs(&c);
    if (rc == SQLITE_OK) rc = attn_commit_done(&c);
    if (rc == SQLITE_OK) sqlite3_result_int64(ctx, c.store[c.chosen].version);
  }
  sqlite3_close(c.m);
  attn_commit_items_free(c.items, c.n);
  sqlite3_free(c.store);
  sqlite3_free(c.state);
  sqlite3_free(c.function);
  sqlite3_free(c.name);
  sqlite3_free(c.result);
  if (rc != SQLITE_OK) attn_result_error(ctx, rc, c.msg, c.fn);
  else sqlite3_free(c.msg);
}

/* ------------------------------------------------------------------ the node's registration */

/* The node's own SQL functions, registered after attnext's (attn_register). Direct-only: they
 * write the database or read its tables (a view of an untrusted database must not reach them). */
/* clang-format off */
static const attn_registration attn_node_functions[] = {
    {"attn_jobs", -1, 0, NULL, &attn_jobs_module},
    {"attn_cancel", 1, SQLITE_DIRECTONLY, attn_cancel_func, NULL},
    {"attn_job_commit", 3, SQLITE_DIRECTONLY, attn_job_commit_func, NULL},
};
/* clang-format on */

static const attn_job_hooks attn_node_hooks = {
    .here = attn_jobs_here,
    .submit = attn_job_submit,
    .receipt_column = attn_job_receipt_column,
    .receipt_json = attn_job_receipt_json,
    .functions = attn_node_functions,
    .nfunctions = (int)(sizeof attn_node_functions / sizeof attn_node_functions[0]),
};

int attn_node_init(sqlite3 *db, char **pzErrMsg, const sqlite3_api_routines *pApi) {
  int rc = attn_register(db, pzErrMsg, pApi, &attn_node_hooks);
  if (rc == SQLITE_OK) attn_jobs_note_database(db); /* a dqlite node's database: its jobs */
  return rc;
}
