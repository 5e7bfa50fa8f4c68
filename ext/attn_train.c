/* attn_train.c -- training: the table-valued function attn_train (one row per epoch, returned as
 * each epoch ends) and the scalar attn_fit (trains to the end, returns a JSON summary). Both run
 * the same code (attn_training, in the core: ext/attn_training.c); when the last epoch ends the
 * model and its training log are written in one transaction as a new version, deployed as
 * option "deploy" decides (attn_store_save_items). Option "from" (and "from_version"): a warm
 * start from a stored model.
 *
 *   SELECT * FROM attn_train('news', 'SELECT title, category FROM headlines',
 *                            '{"cell":"gru","epochs":10}');
 *   --  epoch | train_loss | val_loss | val_accuracy | val_f1 | lr | seconds | best
 *   SELECT attn_fit('news', 'SELECT title, category FROM headlines', '{"epochs":10}');
 *   --  {"name":"news","version":2,"epochs":10,"best_epoch":9,"val_loss":...,"seconds":...}
 *
 * The query must be one read-only statement without parameters returning at least two columns:
 * the text and the label (any SQL type; labels are compared as text). Its rows are read into
 * memory first; no statement of ours is open on the database while the epochs run. Options: a
 * JSON object (nn_config keys), plus "embeddings": the name of a table of (word, vector)
 * pretrained vectors that initialise the embedding rows of the words they share with the
 * vocabulary, and "freeze_embeddings" (true: the embedding is not trained) -- see attn_options.c.
 * An error, or sqlite3_interrupt (Ctrl-C in the shell; noticed after every batch by stepping a
 * tiny statement, which fails with SQLITE_INTERRUPT once the connection is interrupted), leaves
 * the database as it was.
 *
 * A cursor of attn_train closed before its last epoch (a client that steps one row and resets
 * the statement: Python's execute() or fetchone(), better-sqlite3's get(); a LIMIT) is not an
 * end of training: xClose runs the remaining epochs and saves the model, unless the connection
 * was interrupted or training failed. A save failing there cannot be an SQL error of the
 * statement: it goes to sqlite3_log and is reported by the next attn_train, attn_fit,
 * attn_import or attn_deploy call of the connection (attn_conn_check_write).
 * Direct-only: not usable from triggers or views. The arguments of attn_train are the hidden
 * columns arg_name, arg_query, arg_options (prefixed so that an argument such as `name` or
 * `text` written in a query resolves to the caller's column, not to the function's own).
 *
 * In a dqlite node (build/attnext-node) a statement must not train: both submit a job through
 * the node's hooks (attn_conn_jobs; the jobs: ext/node/attn_job_runner.c) and return at once,
 * attn_fit its JSON object {"job":3,...} and attn_train one row (job, function, name, state,
 * node, submitted_at); the connection's vtab declares that row's columns there.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attn_ext.h"

/* ------------------------------------------------------------------ attn_train */

typedef struct attn_train_cursor {
  sqlite3_vtab_cursor base;
  attn_training run;
  nn_epoch_stats row; /* the current row */
  int started;        /* xFilter ran (run is initialised) */
  int eof;
  attn_job_receipt job; /* in a node: the job submitted (its one row) */
} attn_train_cursor;

/* The vtab's modes: training here, or submitting a job (a dqlite node). */
enum { ATTN_TRAIN_HERE = 0, ATTN_TRAIN_JOB = 1 };

/* Columns: one row per epoch; the arguments are the hidden columns at the end. */
enum {
  ATTN_TRAIN_COL_EPOCH,
  ATTN_TRAIN_COL_TRAIN_LOSS,
  ATTN_TRAIN_COL_VAL_LOSS,
  ATTN_TRAIN_COL_VAL_ACCURACY,
  ATTN_TRAIN_COL_VAL_F1,
  ATTN_TRAIN_COL_LR,
  ATTN_TRAIN_COL_SECONDS,
  ATTN_TRAIN_COL_BEST,
  ATTN_TRAIN_COL_VERSION,
  ATTN_TRAIN_COL_DEPLOYED,
  ATTN_TRAIN_COL_ARG_NAME,
  ATTN_TRAIN_COL_ARG_QUERY,
  ATTN_TRAIN_COL_ARG_OPTIONS,
  ATTN_TRAIN_COL_SUMMARY /* hidden, after the arguments (so never one of them) */
};
static const char attn_train_schema[] =
    "CREATE TABLE x(epoch INTEGER, train_loss REAL, val_loss REAL, val_accuracy REAL, "
    "val_f1 REAL, lr REAL, seconds REAL, best INTEGER, version INTEGER, deployed INTEGER, "
    "arg_name HIDDEN, arg_query HIDDEN, arg_options HIDDEN, summary HIDDEN)";

/* In a node: the job's row, then the same arguments. */
static const char attn_train_job_schema[] =
    "CREATE TABLE x(" ATTN_JOB_RECEIPT_COLUMNS ", arg_name HIDDEN, arg_query HIDDEN, "
    "arg_options HIDDEN)";

static int attn_train_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                              sqlite3_vtab **out, char **errmsg) {
  int job = attn_conn_jobs(aux) != NULL;
  return attn_vtab_connect(db, job ? attn_train_job_schema : attn_train_schema,
                           SQLITE_VTAB_DIRECTONLY, aux, job ? ATTN_TRAIN_JOB : ATTN_TRAIN_HERE,
                           sizeof(attn_train_cursor), out);
}

static int attn_train_best_index(sqlite3_vtab *vtab, sqlite3_index_info *info) {
  static const char usage[] =
      "attn_train: expected 2 or 3 arguments: attn_train(name, query[, options])";
  int job = ((attn_vtab *)vtab)->mode == ATTN_TRAIN_JOB;
  /* a fourth argument would land on the hidden summary column: refused like a fifth */
  for (int i = 0; !job && i < info->nConstraint; i++)
    if (info->aConstraint[i].iColumn == ATTN_TRAIN_COL_SUMMARY &&
        info->aConstraint[i].op == SQLITE_INDEX_CONSTRAINT_EQ && info->aConstraint[i].usable) {
      sqlite3_free(vtab->zErrMsg);
      vtab->zErrMsg = sqlite3_mprintf("%s", usage);
      return SQLITE_ERROR;
    }
  return attn_vtab_best_index(vtab, info, job ? ATTN_JOB_RECEIPT_NCOLS : ATTN_TRAIN_COL_ARG_NAME, 3,
                              2, usage);
}

/* The statement ends before the last epoch was read (a client that steps once and resets, a
 * LIMIT): finish the training and save it, unless it was interrupted or failed. A failure here
 * cannot reach the statement: logged, and reported by the connection's next writing call. */
static void attn_train_finish_on_close(attn_train_cursor *cur) {
  attn_training *t = &cur->run;
  char *msg = NULL;
  if (!t->trainer || t->stopped) return;
  /* A statement finalized after its connection was closed (sqlite3_close_v2 left a zombie):
   * nothing can be saved any more; say so in the log rather than train for nothing. */
  sqlite3_stmt *alive = NULL;
  if (sqlite3_prepare_v2(attn_conn_db(t->conn), "SELECT 1", -1, &alive, NULL) != SQLITE_OK) {
    sqlite3_finalize(alive);
    sqlite3_log(SQLITE_MISUSE,
                "attn_train: the connection was closed before the last epoch of "
                "'%s' was read: training stopped, the model was not saved",
                t->name);
    return;
  }
  sqlite3_finalize(alive);
  if (t->interrupt.probe && attn_interrupted(&t->interrupt, 1)) return; /* nothing saved */
  int rc = attn_training_finish(t, &msg);
  if (rc != SQLITE_OK && rc != SQLITE_INTERRUPT) {
    char *full = sqlite3_mprintf("%s (the statement was closed before its last epoch; training "
                                 "went on to the end, but the model was not saved)",
                                 msg ? msg : "attn_train: out of memory");
    sqlite3_log(rc, "%s", full ? full : "attn_train: the model was not saved");
    attn_conn_set_pending_error(t->conn, full);
  }
  sqlite3_free(msg);
}

static int attn_train_close(sqlite3_vtab_cursor *base) {
  attn_train_cursor *cur = (attn_train_cursor *)base;
  if (cur->started) {
    attn_train_finish_on_close(cur);
    attn_training_free(&cur->run);
  }
  sqlite3_free(cur->job.name);
  sqlite3_free(cur);
  return SQLITE_OK;
}

/* One epoch as the next row. */
static int attn_train_step(attn_train_cursor *cur) {
  char *msg = NULL;
  int rc = attn_training_epoch(&cur->run, &cur->row, &msg);
  if (rc == SQLITE_ROW) {
    cur->eof = 0;
    return SQLITE_OK;
  }
  cur->eof = 1;
  if (rc == SQLITE_DONE) return SQLITE_OK;
  return attn_vtab_fail(cur->base.pVtab, rc, msg, "attn_train");
}

static int attn_train_filter(sqlite3_vtab_cursor *base, int idx_num, const char *idx_str, int argc,
                             sqlite3_value **argv) {
  attn_train_cursor *cur = (attn_train_cursor *)base;
  attn_vtab *vtab = (attn_vtab *)base->pVtab;
  char *msg = NULL;
  if (cur->started) {
    /* Asked to run again: attn_train on the inner side of a join is filtered once per outer row,
     * and each run would train and save another version. The run that started ends as at xClose
     * (finished and saved); the statement then stops with an error saying how to train once. */
    attn_train_finish_on_close(cur);
    attn_training_free(&cur->run);
    cur->eof = 1;
    return attn_vtab_fail(
        base->pVtab, SQLITE_ERROR,
        sqlite3_mprintf("attn_train: the statement runs the training again for another row of a "
                        "join (each run would save a new version); the first run finished and was "
                        "saved. Train in a statement of its own, or join its rows from a "
                        "materialized CTE: WITH t AS MATERIALIZED (SELECT * FROM attn_train(...))"),
        "attn_train");
  }
  cur->started = 1;
  cur->eof = 1;
  int options = attn_arg_given(idx_num, ATTN_TRAIN_COL_ARG_OPTIONS - ATTN_TRAIN_COL_ARG_NAME);
  if (vtab->mode == ATTN_TRAIN_JOB) { /* a dqlite node: a job, its row */
    const attn_job_hooks *jobs = attn_conn_jobs(vtab->conn);
    if (!jobs) /* only a node's connection is in this mode, and stays a node's */
      return attn_vtab_fail(base->pVtab, SQLITE_ERROR,
                            sqlite3_mprintf("attn_train: no job runner here"), "attn_train");
    sqlite3_free(cur->job.name);
    cur->job.name = NULL;
    int rc =
        jobs->submit(vtab->conn, "attn_train", argc > 0 ? argv[0] : NULL, argc > 1 ? argv[1] : NULL,
                     NULL, options && argc > 2 ? argv[2] : NULL, 1, &cur->job, &msg);
    if (rc != SQLITE_OK) return attn_vtab_fail(base->pVtab, rc, msg, "attn_train");
    cur->eof = 0;
    return SQLITE_OK;
  }
  int rc =
      attn_training_start(&cur->run, vtab->conn, "attn_train", argc > 0 ? argv[0] : NULL,
                          argc > 1 ? argv[1] : NULL, options && argc > 2 ? argv[2] : NULL, &msg);
  if (rc != SQLITE_OK) {
    return attn_vtab_fail(base->pVtab, rc, msg, "attn_train");
  }
  return attn_train_step(cur);
}

static int attn_train_next(sqlite3_vtab_cursor *base) {
  attn_train_cursor *cur = (attn_train_cursor *)base;
  if (cur->job.job) { /* a node: one row, the job's */
    cur->eof = 1;
    return SQLITE_OK;
  }
  return attn_train_step(cur);
}

static int attn_train_eof(sqlite3_vtab_cursor *base) { return ((attn_train_cursor *)base)->eof; }

static int attn_train_column(sqlite3_vtab_cursor *base, sqlite3_context *ctx, int col) {
  const attn_train_cursor *cur = (attn_train_cursor *)base;
  const nn_epoch_stats *s = &cur->row;
  const attn_job_hooks *jobs =
      cur->job.job ? attn_conn_jobs(((attn_vtab *)base->pVtab)->conn) : NULL;
  if (jobs) {
    jobs->receipt_column(&cur->job, ctx, col);
    return SQLITE_OK;
  }
  /* the last row is returned once the model is saved: it says as which version, and whether
   * that version was deployed (option "deploy"); NULL on the other rows */
  int last = cur->run.saved && s->epoch == cur->run.nlog;
  switch (col) {
  case ATTN_TRAIN_COL_VERSION:
    if (last) sqlite3_result_int64(ctx, cur->run.version);
    break;
  case ATTN_TRAIN_COL_DEPLOYED:
    if (last) sqlite3_result_int(ctx, cur->run.deployed);
    break;
  case ATTN_TRAIN_COL_EPOCH: sqlite3_result_int(ctx, s->epoch); break;
  case ATTN_TRAIN_COL_TRAIN_LOSS: sqlite3_result_double(ctx, s->train_loss); break;
  case ATTN_TRAIN_COL_VAL_LOSS: sqlite3_result_double(ctx, s->val_loss); break;
  case ATTN_TRAIN_COL_VAL_ACCURACY: sqlite3_result_double(ctx, s->val_accuracy); break;
  case ATTN_TRAIN_COL_VAL_F1: sqlite3_result_double(ctx, s->val_f1); break;
  case ATTN_TRAIN_COL_LR: sqlite3_result_double(ctx, s->lr); break;
  case ATTN_TRAIN_COL_SECONDS: sqlite3_result_double(ctx, s->seconds); break;
  case ATTN_TRAIN_COL_BEST: sqlite3_result_int(ctx, s->best); break;
  case ATTN_TRAIN_COL_SUMMARY: /* on the last row: what attn_fit returns */
    if (last) {
      char *json = attn_training_summary(&cur->run);
      if (!json) return SQLITE_NOMEM;
      sqlite3_result_text(ctx, json, -1, sqlite3_free);
      sqlite3_result_subtype(ctx, ATTN_JSON_SUBTYPE);
    }
    break;
  default: break; /* hidden argument columns: NULL */
  }
  return SQLITE_OK;
}

static int attn_train_rowid(sqlite3_vtab_cursor *base, sqlite_int64 *rowid) {
  const attn_train_cursor *cur = (attn_train_cursor *)base;
  *rowid = cur->job.job ? cur->job.job : cur->row.epoch;
  return SQLITE_OK;
}

const sqlite3_module attn_train_module = {
    .iVersion = 0,
    .xCreate = NULL, /* eponymous only: no CREATE VIRTUAL TABLE */
    .xConnect = attn_train_connect,
    .xBestIndex = attn_train_best_index,
    .xDisconnect = attn_vtab_disconnect,
    .xOpen = attn_vtab_open,
    .xClose = attn_train_close,
    .xFilter = attn_train_filter,
    .xNext = attn_train_next,
    .xEof = attn_train_eof,
    .xColumn = attn_train_column,
    .xRowid = attn_train_rowid,
};

/* ------------------------------------------------------------------ attn_fit */

/* attn_fit(name, query [, options]) -> text: train to the end, save, and return a JSON object:
 * name, version, epochs (run), then the trainer's summary of the kept epoch (best_epoch,
 * val_loss, val_accuracy, val_f1, train_rows, val_rows, epochs_run, seconds, ...). */
void attn_fit_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  attn_training t;
  char *msg = NULL;
  const attn_job_hooks *jobs = attn_conn_jobs(sqlite3_user_data(ctx));
  if (jobs) { /* a dqlite node: a job, its JSON object */
    attn_job_receipt job;
    int rc = jobs->submit(sqlite3_user_data(ctx), "attn_fit", argv[0], argv[1], NULL,
                          argc > 2 ? argv[2] : NULL, 1, &job, &msg);
    char *json = rc == SQLITE_OK ? jobs->receipt_json(&job) : NULL;
    sqlite3_free(job.name);
    if (json) {
      sqlite3_result_text(ctx, json, -1, sqlite3_free);
      sqlite3_result_subtype(ctx, ATTN_JSON_SUBTYPE);
    } else {
      attn_result_error(ctx, rc == SQLITE_OK ? SQLITE_NOMEM : rc, msg, "attn_fit");
      msg = NULL;
    }
    sqlite3_free(msg);
    return;
  }
  int rc = attn_training_start(&t, sqlite3_user_data(ctx), "attn_fit", argv[0], argv[1],
                               argc > 2 ? argv[2] : NULL, &msg);
  if (rc == SQLITE_OK) rc = attn_training_finish(&t, &msg);
  if (rc == SQLITE_OK) {
    char *json = attn_training_summary(&t);
    if (json) {
      sqlite3_result_text(ctx, json, -1, sqlite3_free);
      sqlite3_result_subtype(ctx, ATTN_JSON_SUBTYPE); /* json_object() nests it as an object */
    } else sqlite3_result_error(ctx, "attn_fit: out of memory", -1);
  } else {
    sqlite3_result_error(ctx, msg ? msg : "attn_fit: out of memory", -1);
    if (attn_error_code(rc) != SQLITE_ERROR) sqlite3_result_error_code(ctx, rc);
  }
  sqlite3_free(msg);
  attn_training_free(&t);
}
