/* attn_train.c -- training: the table-valued function attn_train (one row per epoch, returned as
 * each epoch ends) and the scalar attn_fit (trains to the end, returns a JSON summary). Both run
 * the same code (attn_training below); when the last epoch ends the model and its training log
 * are written in one transaction as a new deployed version (attn_store_save).
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
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attn_ext.h"

/* ------------------------------------------------------------------ the progress line */

/* A line on standard error within a training epoch:
 *   epoch 3/20  [########------------]  61/143 batches  loss 0.8123  9120 rows/s  0:04 left
 * drawn with a carriage return (at most 10 times a second) only when standard error is a
 * terminal and the option "progress" is true, and cleared before the epoch's row is returned,
 * so the shell's output stays clean. */
typedef struct attn_progress {
  int enabled;
  int epoch, epochs;
  double start, last_draw;
  int drawn;
} attn_progress;
static double attn_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void attn_progress_begin(attn_progress *p, int want, int epoch, int epochs) {
  memset(p, 0, sizeof *p);
  p->enabled = want && isatty(STDERR_FILENO);
  p->epoch = epoch;
  p->epochs = epochs;
  p->start = attn_now();
}

static void attn_progress_update(attn_progress *p, int batches_done, int batches_total, double loss,
                          double rows_per_second) {
  if (!p->enabled || batches_total <= 0) return;
  double now = attn_now();
  if (p->drawn && now - p->last_draw < 0.1 && batches_done < batches_total) return;
  p->last_draw = now;
  char bar[21];
  int filled = (int)(20.0 * batches_done / batches_total);
  if (filled > 20) filled = 20;
  for (int i = 0; i < 20; i++) bar[i] = i < filled ? '#' : '-';
  bar[20] = 0;
  double elapsed = now - p->start;
  double left = batches_done > 0 ? elapsed * (batches_total - batches_done) / batches_done : 0;
  int secs = (int)(left + 0.5);
  fprintf(stderr, "\r\033[Kepoch %d/%d  [%s]  %d/%d batches  loss %.4f  %.0f rows/s  %d:%02d left",
          p->epoch, p->epochs, bar, batches_done, batches_total, loss, rows_per_second, secs / 60,
          secs % 60);
  fflush(stderr);
  p->drawn = 1;
}

static void attn_progress_clear(attn_progress *p) {
  if (p->drawn) {
    fputs("\r\033[K", stderr);
    fflush(stderr);
  }
  p->drawn = 0;
}

/* ------------------------------------------------------------------ one training run */

typedef struct attn_training {
  attn_conn *conn;
  const char *fn; /* "attn_train" or "attn_fit" */
  nn_config cfg;
  nn_trainer *trainer; /* NULL once saved or stopped */
  char *name;
  nn_epoch_stats *log;
  int nlog, cap_log;
  int stopped;          /* interrupted or failed: nothing more to run, nothing to save */
  int saved;            /* the model is in the store, as `version` */
  int64_t version;
  char *metrics;        /* the trainer's summary (JSON object), kept for attn_fit */
  sqlite3_stmt *probe;  /* "SELECT 1": fails with SQLITE_INTERRUPT after sqlite3_interrupt */
  attn_progress progress;
  attn_rows data;       /* the training data, kept while the trainer lives */
} attn_training;

static void attn_training_free(attn_training *t) {
  attn_progress_clear(&t->progress);
  nn_trainer_free(t->trainer);
  t->trainer = NULL;
  sqlite3_finalize(t->probe);
  t->probe = NULL;
  sqlite3_free(t->name);
  t->name = NULL;
  sqlite3_free(t->log);
  t->log = NULL;
  t->nlog = t->cap_log = 0;
  free(t->metrics);
  t->metrics = NULL;
  attn_rows_free(&t->data);
}

/* nn_progress_fn: stop when the connection was interrupted; draw the progress line. */
static int attn_training_progress(void *ctx, int batches_done, int batches_total, double loss,
                                  double rows_per_second) {
  attn_training *t = ctx;
  if (t->probe) {
    sqlite3_reset(t->probe);
    if (sqlite3_step(t->probe) == SQLITE_INTERRUPT) return 1;
  }
  attn_progress_update(&t->progress, batches_done, batches_total, loss, rows_per_second);
  return 0;
}

/* Read the rows of the query and create the trainer. name, query, options: the SQL arguments
 * (options may be NULL). On error *msg is set ("fn: ..."). */
static int attn_training_start(attn_training *t, attn_conn *conn, const char *fn,
                               sqlite3_value *name_arg, sqlite3_value *query_arg,
                               sqlite3_value *options_arg, char **msg) {
  sqlite3 *db = attn_conn_db(conn);
  char err[NN_ERR_LEN] = "";
  sqlite3_stmt *stmt = NULL;
  attn_embeddings emb = {NULL, 0, 0};
  int rc;
  memset(t, 0, sizeof *t);
  t->conn = conn;
  t->fn = fn;
  if ((rc = attn_conn_check_write(conn, fn, msg)) != SQLITE_OK) goto done;
  const char *name = NULL;
  if ((rc = attn_name_value(fn, name_arg, &name, msg)) != SQLITE_OK) goto done;
  t->name = sqlite3_mprintf("%s", name);
  if (!t->name) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  nn_config_default(&t->cfg);
  if (options_arg && sqlite3_value_type(options_arg) != SQLITE_NULL) {
    if (sqlite3_value_type(options_arg) != SQLITE_TEXT) {
      *msg = sqlite3_mprintf("%s: the options must be a JSON object as text, e.g. "
                             "'{\"epochs\":10}'",
                             fn);
      rc = SQLITE_ERROR;
      goto done;
    }
    rc = attn_train_options(db, fn, (const char *)sqlite3_value_text(options_arg), &t->cfg, &emb,
                            msg);
    if (rc != SQLITE_OK) goto done;
  }
  rc = attn_prepare_query(db, fn, query_arg ? (const char *)sqlite3_value_text(query_arg) : NULL,
                          2, "(text, label)", &stmt, msg);
  if (rc != SQLITE_OK) goto done;
  int query_done = 0;
  attn_conn_query_begin(conn, fn);
  rc = attn_rows_read(&t->data, stmt, ATTN_ROWS_TEXT_LABEL, INT_MAX, &query_done, fn, msg);
  attn_conn_query_end(conn);
  sqlite3_finalize(stmt);
  stmt = NULL;
  if (rc != SQLITE_OK) goto done;
  if (t->data.n == 0) {
    *msg = sqlite3_mprintf("%s: the query returned no rows", fn);
    rc = SQLITE_ERROR;
    goto done;
  }
  attn_interrupt interrupt = {db, NULL, 0}; /* the vocabulary of many rows takes a while */
  int st = nn_trainer_create_ex(&t->trainer, &t->cfg, t->data.texts, t->data.lens,
                                t->data.labels, t->data.label_lens, t->data.n,
                                attn_interrupt_check, &interrupt, err);
  attn_interrupt_end(&interrupt);
  if (st != NN_OK) {
    t->trainer = NULL;
    *msg = st == NN_INTERRUPTED ? sqlite3_mprintf("%s: interrupted", fn)
                                : sqlite3_mprintf("%s: %s", fn, err);
    rc = st == NN_INTERRUPTED ? SQLITE_INTERRUPT : st == NN_NOMEM ? SQLITE_NOMEM : SQLITE_ERROR;
    goto done;
  }
  rc = attn_embeddings_apply(db, fn, t->trainer, &emb, msg);
  if (rc != SQLITE_OK) goto done;
  rc = sqlite3_prepare_v2(db, "SELECT 1", -1, &t->probe, NULL);
  if (rc != SQLITE_OK) *msg = sqlite3_mprintf("%s: %s", fn, sqlite3_errmsg(db));
done:
  sqlite3_finalize(stmt);
  attn_embeddings_free(&emb);
  if (rc != SQLITE_OK) {
    t->stopped = 1;
    if (!*msg) *msg = sqlite3_mprintf("%s: out of memory", fn);
  }
  return rc;
}

/* Training is over: store the best model and the log in one transaction, then let the trainer
 * and the training data go. */
static int attn_training_save(attn_training *t, char **msg) {
  char err[NN_ERR_LEN] = "";
  nn_model *model = NULL;
  int st = nn_trainer_take_model(t->trainer, &model, err);
  if (st != NN_OK) {
    *msg = sqlite3_mprintf("%s: %s", t->fn, err);
    t->stopped = 1;
    return st == NN_NOMEM ? SQLITE_NOMEM : SQLITE_ERROR;
  }
  t->metrics = nn_trainer_metrics_json(t->trainer);
  int rc = attn_store_save(t->conn, t->fn, t->name, model, t->metrics, t->log, t->nlog,
                           &t->version, msg);
  nn_model_free(model);
  nn_trainer_free(t->trainer);
  t->trainer = NULL;
  attn_rows_free(&t->data);
  if (rc == SQLITE_OK)
    t->saved = 1;
  else
    t->stopped = 1;
  return rc;
}

/* Run the next epoch (its statistics in *row); after the last, save the model. Returns
 * SQLITE_ROW when an epoch ran (saved is set when it was the last), SQLITE_DONE when there was
 * no epoch left (the model is saved), else an error with *msg. */
static int attn_training_epoch(attn_training *t, nn_epoch_stats *row, char **msg) {
  char err[NN_ERR_LEN] = "";
  nn_epoch_stats stats;
  memset(&stats, 0, sizeof stats);
  if (!t->trainer) return SQLITE_DONE;
  attn_progress_begin(&t->progress, t->cfg.progress, t->nlog + 1, t->cfg.epochs);
  int st = nn_trainer_epoch(t->trainer, &stats, attn_training_progress, t, err);
  attn_progress_clear(&t->progress);
  if (st == NN_OK) {
    if (t->nlog == t->cap_log) {
      int cap = t->cap_log ? 2 * t->cap_log : 32;
      nn_epoch_stats *log = sqlite3_realloc64(t->log, (sqlite3_uint64)cap * sizeof *log);
      if (!log) {
        t->stopped = 1;
        *msg = sqlite3_mprintf("%s: out of memory", t->fn);
        return SQLITE_NOMEM;
      }
      t->log = log;
      t->cap_log = cap;
    }
    t->log[t->nlog++] = stats;
    *row = stats;
    /* The last epoch: store the model before its row is returned. */
    if (nn_trainer_done(t->trainer)) {
      int rc = attn_training_save(t, msg);
      if (rc != SQLITE_OK) return rc;
    }
    return SQLITE_ROW;
  }
  if (st == NN_INTERRUPTED) {
    t->stopped = 1;
    *msg = sqlite3_mprintf("%s: interrupted", t->fn);
    return SQLITE_INTERRUPT;
  }
  if (st != NN_DONE) {
    t->stopped = 1;
    *msg = sqlite3_mprintf("%s: %s", t->fn, err);
    return st == NN_NOMEM ? SQLITE_NOMEM : SQLITE_ERROR;
  }
  int rc = attn_training_save(t, msg);
  return rc == SQLITE_OK ? SQLITE_DONE : rc;
}

/* Run every epoch left and save. SQLITE_OK or an error with *msg. */
static int attn_training_finish(attn_training *t, char **msg) {
  nn_epoch_stats row;
  int rc;
  while ((rc = attn_training_epoch(t, &row, msg)) == SQLITE_ROW) {
  }
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* ------------------------------------------------------------------ attn_train */

typedef struct attn_train_cursor {
  sqlite3_vtab_cursor base;
  attn_training run;
  nn_epoch_stats row; /* the current row */
  int started;        /* xFilter ran (run is initialised) */
  int eof;
} attn_train_cursor;

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
  ATTN_TRAIN_COL_ARG_NAME,
  ATTN_TRAIN_COL_ARG_QUERY,
  ATTN_TRAIN_COL_ARG_OPTIONS
};
static const char attn_train_schema[] =
    "CREATE TABLE x(epoch INTEGER, train_loss REAL, val_loss REAL, val_accuracy REAL, "
    "val_f1 REAL, lr REAL, seconds REAL, best INTEGER, arg_name HIDDEN, arg_query HIDDEN, "
    "arg_options HIDDEN)";

static int attn_train_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                              sqlite3_vtab **out, char **errmsg) {
  return attn_vtab_connect(db, attn_train_schema, SQLITE_VTAB_DIRECTONLY, aux, 0,
                           sizeof(attn_train_cursor), out);
}

static int attn_train_best_index(sqlite3_vtab *vtab, sqlite3_index_info *info) {
  return attn_vtab_best_index(
      vtab, info, ATTN_TRAIN_COL_ARG_NAME, 3, 2,
      "attn_train: expected 2 or 3 arguments: attn_train(name, query[, options])");
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
    sqlite3_log(SQLITE_MISUSE, "attn_train: the connection was closed before the last epoch of "
                               "'%s' was read: training stopped, the model was not saved",
                t->name);
    return;
  }
  sqlite3_finalize(alive);
  if (t->probe) {
    sqlite3_reset(t->probe);
    if (sqlite3_step(t->probe) == SQLITE_INTERRUPT) return; /* interrupted: nothing saved */
    sqlite3_reset(t->probe);
  }
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

static int attn_train_filter(sqlite3_vtab_cursor *base, int idx_num, const char *idx_str,
                             int argc, sqlite3_value **argv) {
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
  int rc = attn_training_start(&cur->run, vtab->conn, "attn_train", argc > 0 ? argv[0] : NULL,
                               argc > 1 ? argv[1] : NULL, options && argc > 2 ? argv[2] : NULL,
                               &msg);
  if (rc != SQLITE_OK) {
    return attn_vtab_fail(base->pVtab, rc, msg, "attn_train");
  }
  return attn_train_step(cur);
}

static int attn_train_next(sqlite3_vtab_cursor *base) {
  return attn_train_step((attn_train_cursor *)base);
}

static int attn_train_eof(sqlite3_vtab_cursor *base) {
  return ((attn_train_cursor *)base)->eof;
}

static int attn_train_column(sqlite3_vtab_cursor *base, sqlite3_context *ctx, int col) {
  const nn_epoch_stats *s = &((attn_train_cursor *)base)->row;
  switch (col) {
  case ATTN_TRAIN_COL_EPOCH: sqlite3_result_int(ctx, s->epoch); break;
  case ATTN_TRAIN_COL_TRAIN_LOSS: sqlite3_result_double(ctx, s->train_loss); break;
  case ATTN_TRAIN_COL_VAL_LOSS: sqlite3_result_double(ctx, s->val_loss); break;
  case ATTN_TRAIN_COL_VAL_ACCURACY: sqlite3_result_double(ctx, s->val_accuracy); break;
  case ATTN_TRAIN_COL_VAL_F1: sqlite3_result_double(ctx, s->val_f1); break;
  case ATTN_TRAIN_COL_LR: sqlite3_result_double(ctx, s->lr); break;
  case ATTN_TRAIN_COL_SECONDS: sqlite3_result_double(ctx, s->seconds); break;
  case ATTN_TRAIN_COL_BEST: sqlite3_result_int(ctx, s->best); break;
  default: break; /* hidden argument columns: NULL */
  }
  return SQLITE_OK;
}

static int attn_train_rowid(sqlite3_vtab_cursor *base, sqlite_int64 *rowid) {
  *rowid = ((attn_train_cursor *)base)->row.epoch;
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
  int rc = attn_training_start(&t, sqlite3_user_data(ctx), "attn_fit", argv[0], argv[1],
                               argc > 2 ? argv[2] : NULL, &msg);
  if (rc == SQLITE_OK) rc = attn_training_finish(&t, &msg);
  if (rc == SQLITE_OK) {
    sqlite3_str *s = sqlite3_str_new(NULL);
    sqlite3_str_appendall(s, "{\"name\":");
    attn_json_string(s, t.name, (int)strlen(t.name));
    sqlite3_str_appendf(s, ",\"version\":%lld,\"epochs\":%d", (long long)t.version, t.nlog);
    if (t.metrics && t.metrics[0] == '{' && t.metrics[1] != '}')
      sqlite3_str_appendf(s, ",%s", t.metrics + 1);
    else
      sqlite3_str_appendchar(s, 1, '}');
    char *json = sqlite3_str_finish(s);
    if (json)
      sqlite3_result_text(ctx, json, -1, sqlite3_free);
    else
      sqlite3_result_error_nomem(ctx);
  } else {
    sqlite3_result_error(ctx, msg ? msg : "attn_fit: out of memory", -1);
    if (rc != SQLITE_ERROR) sqlite3_result_error_code(ctx, rc);
  }
  sqlite3_free(msg);
  attn_training_free(&t);
}

