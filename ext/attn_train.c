/* attn_train.c -- the training table-valued function: one row per epoch, returned as each epoch
 * ends; when the last row has been read, the model and its training log are written in one
 * savepoint as a new deployed version.
 *
 *   SELECT * FROM attn_train('news', 'SELECT title, category FROM headlines',
 *                            '{"cell":"gru","epochs":10}');
 *   --  epoch | train_loss | val_loss | val_accuracy | val_f1 | lr | seconds | best
 *
 * The query must be one read-only statement returning at least two columns: the text and the
 * label (any SQL type; labels are compared as text). Options: a JSON object (nn_config keys),
 * plus "embeddings": the name of a table of (word, vector) pretrained vectors that initialise
 * the embedding rows of the words they share with the vocabulary, and "freeze_embeddings"
 * (true: the embedding is not trained) -- see attn_vectors.c.
 * An error, or sqlite3_interrupt (Ctrl-C in the shell; noticed after every batch by stepping a
 * tiny statement, which fails with SQLITE_INTERRUPT once the connection is interrupted), leaves
 * the database as it was. A LIMIT that stops reading before the last epoch ends the training
 * without saving it. Direct-only: not usable from triggers or views. The arguments are the
 * hidden columns arg_name, arg_query, arg_options (prefixed so that an argument such as `name`
 * or `text` written in a query resolves to the caller's column, not to the function's own).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "attn_ext.h"
#include "attn_viz.h" /* attn_train_options: the "embeddings" options (attn_vectors.c) */

#define ATTN_TRAIN_FIRST_ARG 8 /* name, query, options follow the 8 result columns */

typedef struct attn_train_vtab {
  sqlite3_vtab base;
  attn_conn *conn;
} attn_train_vtab;

typedef struct attn_train_cursor {
  sqlite3_vtab_cursor base;
  nn_config cfg;
  nn_trainer *trainer;
  char *name;
  nn_epoch_stats row; /* the current row */
  nn_epoch_stats *log;
  int nlog, cap_log;
  int eof;
  sqlite3_stmt *probe; /* "SELECT 1": fails with SQLITE_INTERRUPT after sqlite3_interrupt */
  attn_progress progress;
  attn_rows data; /* the training data, kept while the trainer lives */
} attn_train_cursor;

static int attn_train_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                              sqlite3_vtab **out, char **errmsg) {
  int rc = attn_vtab_connect(db,
                             "CREATE TABLE x(epoch INTEGER, train_loss REAL, val_loss REAL, "
                             "val_accuracy REAL, val_f1 REAL, lr REAL, seconds REAL, "
                             "best INTEGER, arg_name HIDDEN, arg_query HIDDEN, arg_options HIDDEN)",
                             sizeof(attn_train_vtab), SQLITE_VTAB_DIRECTONLY, out);
  if (rc == SQLITE_OK) ((attn_train_vtab *)*out)->conn = aux;
  return rc;
}

static int attn_train_best_index(sqlite3_vtab *vtab, sqlite3_index_info *info) {
  return attn_vtab_best_index(
      vtab, info, ATTN_TRAIN_FIRST_ARG, 3, 2,
      "attn_train: expected 2 or 3 arguments: attn_train(name, query[, options])");
}

static int attn_train_open(sqlite3_vtab *vtab, sqlite3_vtab_cursor **out) {
  return attn_vtab_cursor_new(sizeof(attn_train_cursor), out);
}

static void attn_train_reset(attn_train_cursor *cur) {
  nn_trainer_free(cur->trainer);
  cur->trainer = NULL;
  sqlite3_finalize(cur->probe);
  cur->probe = NULL;
  sqlite3_free(cur->name);
  cur->name = NULL;
  sqlite3_free(cur->log);
  cur->log = NULL;
  cur->nlog = cur->cap_log = 0;
  attn_rows_free(&cur->data);
  cur->eof = 1;
}

static int attn_train_close(sqlite3_vtab_cursor *base) {
  attn_train_cursor *cur = (attn_train_cursor *)base;
  attn_progress_clear(&cur->progress);
  attn_train_reset(cur);
  sqlite3_free(cur);
  return SQLITE_OK;
}

/* nn_progress_fn: stop when the connection was interrupted; draw the progress line. */
static int attn_train_progress(void *ctx, int batches_done, int batches_total, double loss,
                               double rows_per_second) {
  attn_train_cursor *cur = ctx;
  if (cur->probe) {
    sqlite3_reset(cur->probe);
    if (sqlite3_step(cur->probe) == SQLITE_INTERRUPT) return 1;
  }
  attn_progress_update(&cur->progress, batches_done, batches_total, loss, rows_per_second);
  return 0;
}

/* Run the next epoch; at the end, save the model. */
/* Training is over: store the best model and the log in one savepoint, then let the training
 * data go (the next xNext ends the rows). */
static int attn_train_save(attn_train_cursor *cur) {
  attn_train_vtab *vtab = (attn_train_vtab *)cur->base.pVtab;
  const char *fn = "attn_train";
  char err[NN_ERR_LEN] = "", *msg = NULL;
  nn_model *model = NULL;
  int st = nn_trainer_take_model(cur->trainer, &model, err);
  if (st != NN_OK) {
    attn_vtab_error(cur->base.pVtab, sqlite3_mprintf("%s: %s", fn, err));
    return st == NN_NOMEM ? SQLITE_NOMEM : SQLITE_ERROR;
  }
  char *metrics = nn_trainer_metrics_json(cur->trainer);
  int64_t version = 0;
  int rc = attn_store_save(vtab->conn, fn, cur->name, model, metrics, cur->log, cur->nlog,
                           &version, &msg);
  if (rc != SQLITE_OK)
    attn_vtab_error(cur->base.pVtab, msg ? msg : sqlite3_mprintf("%s: out of memory", fn));
  nn_model_free(model);
  free(metrics);
  nn_trainer_free(cur->trainer);
  cur->trainer = NULL;
  return rc;
}

static int attn_train_step(attn_train_cursor *cur) {
  const char *fn = "attn_train";
  char err[NN_ERR_LEN] = "";
  nn_epoch_stats stats;
  memset(&stats, 0, sizeof stats);
  attn_progress_begin(&cur->progress, cur->cfg.progress, cur->nlog + 1, cur->cfg.epochs);
  int st = nn_trainer_epoch(cur->trainer, &stats, attn_train_progress, cur, err);
  attn_progress_clear(&cur->progress);
  if (st == NN_OK) {
    if (cur->nlog == cur->cap_log) {
      int cap = cur->cap_log ? 2 * cur->cap_log : 32;
      nn_epoch_stats *log = sqlite3_realloc64(cur->log, (sqlite3_uint64)cap * sizeof *log);
      if (!log) return SQLITE_NOMEM;
      cur->log = log;
      cur->cap_log = cap;
    }
    cur->log[cur->nlog++] = stats;
    cur->row = stats;
    cur->eof = 0;
    /* The last epoch: store the model before its row is returned, so that a LIMIT stopping
     * at that row (LIMIT = epochs) keeps the model. */
    if (nn_trainer_done(cur->trainer)) return attn_train_save(cur);
    return SQLITE_OK;
  }
  cur->eof = 1;
  if (st == NN_INTERRUPTED) {
    attn_vtab_error(cur->base.pVtab, sqlite3_mprintf("%s: interrupted", fn));
    return SQLITE_INTERRUPT;
  }
  if (st != NN_DONE) {
    attn_vtab_error(cur->base.pVtab, sqlite3_mprintf("%s: %s", fn, err));
    return st == NN_NOMEM ? SQLITE_NOMEM : SQLITE_ERROR;
  }
  return attn_train_save(cur);
}

static int attn_train_filter(sqlite3_vtab_cursor *base, int idx_num, const char *idx_str,
                             int argc, sqlite3_value **argv) {
  attn_train_cursor *cur = (attn_train_cursor *)base;
  attn_train_vtab *vtab = (attn_train_vtab *)base->pVtab;
  sqlite3 *db = attn_conn_db(vtab->conn);
  const char *fn = "attn_train";
  char err[NN_ERR_LEN] = "", *msg = NULL;
  sqlite3_stmt *stmt = NULL;
  int rc = SQLITE_OK;
  attn_embeddings emb = {NULL, 0, 0};
  attn_train_reset(cur);
  if ((rc = attn_conn_check_write(vtab->conn, fn, &msg)) != SQLITE_OK) goto done;
  const char *name = argc > 0 ? (const char *)sqlite3_value_text(argv[0]) : NULL;
  if (!name || !*name) {
    msg = sqlite3_mprintf("%s: the model name must be a non-empty text, got %s", fn,
                          name ? "''" : "NULL");
    rc = SQLITE_ERROR;
    goto done;
  }
  cur->name = sqlite3_mprintf("%s", name);
  if (!cur->name) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  nn_config_default(&cur->cfg);
  if ((idx_num & 4) && argc > 2 && sqlite3_value_type(argv[2]) != SQLITE_NULL) {
    if (sqlite3_value_type(argv[2]) != SQLITE_TEXT) {
      msg = sqlite3_mprintf("%s: the options must be a JSON object as text, e.g. "
                            "'{\"epochs\":10}'",
                            fn);
      rc = SQLITE_ERROR;
      goto done;
    }
    rc = attn_train_options(db, fn, (const char *)sqlite3_value_text(argv[2]), &cur->cfg, &emb,
                            &msg);
    if (rc != SQLITE_OK) goto done;
  }
  rc = attn_prepare_query(db, fn, argc > 1 ? (const char *)sqlite3_value_text(argv[1]) : NULL, 2,
                          "(text, label)", &stmt, &msg);
  if (rc != SQLITE_OK) goto done;
  int query_done = 0;
  attn_conn_query_begin(vtab->conn, fn);
  rc = attn_rows_read(&cur->data, stmt, ATTN_ROWS_TEXT_LABEL, INT_MAX, &query_done, fn, &msg);
  attn_conn_query_end(vtab->conn);
  sqlite3_finalize(stmt);
  stmt = NULL;
  if (rc != SQLITE_OK) goto done;
  if (cur->data.n == 0) {
    msg = sqlite3_mprintf("%s: the query returned no rows", fn);
    rc = SQLITE_ERROR;
    goto done;
  }
  int st = nn_trainer_create(&cur->trainer, &cur->cfg, cur->data.texts, cur->data.lens,
                             cur->data.labels, cur->data.label_lens, cur->data.n, err);
  if (st != NN_OK) {
    cur->trainer = NULL;
    msg = sqlite3_mprintf("%s: %s", fn, err);
    rc = st == NN_NOMEM ? SQLITE_NOMEM : SQLITE_ERROR;
    goto done;
  }
  rc = attn_embeddings_apply(db, fn, cur->trainer, &emb, &msg);
  attn_embeddings_free(&emb);
  if (rc != SQLITE_OK) goto done;
  rc = sqlite3_prepare_v2(db, "SELECT 1", -1, &cur->probe, NULL);
  if (rc != SQLITE_OK) {
    msg = sqlite3_mprintf("%s: %s", fn, sqlite3_errmsg(db));
    goto done;
  }
  return attn_train_step(cur);
done:
  sqlite3_finalize(stmt);
  attn_embeddings_free(&emb);
  cur->eof = 1;
  if (rc != SQLITE_OK)
    attn_vtab_error(base->pVtab, msg ? msg : sqlite3_mprintf("%s: out of memory", fn));
  else
    sqlite3_free(msg);
  return rc;
}

static int attn_train_next(sqlite3_vtab_cursor *base) {
  attn_train_cursor *cur = (attn_train_cursor *)base;
  if (!cur->trainer) {
    cur->eof = 1;
    return SQLITE_OK;
  }
  return attn_train_step(cur);
}

static int attn_train_eof(sqlite3_vtab_cursor *base) {
  return ((attn_train_cursor *)base)->eof;
}

static int attn_train_column(sqlite3_vtab_cursor *base, sqlite3_context *ctx, int col) {
  const nn_epoch_stats *s = &((attn_train_cursor *)base)->row;
  switch (col) {
  case 0: sqlite3_result_int(ctx, s->epoch); break;
  case 1: sqlite3_result_double(ctx, s->train_loss); break;
  case 2: sqlite3_result_double(ctx, s->val_loss); break;
  case 3: sqlite3_result_double(ctx, s->val_accuracy); break;
  case 4: sqlite3_result_double(ctx, s->val_f1); break;
  case 5: sqlite3_result_double(ctx, s->lr); break;
  case 6: sqlite3_result_double(ctx, s->seconds); break;
  case 7: sqlite3_result_int(ctx, s->best); break;
  default: break; /* hidden argument columns: NULL */
  }
  return SQLITE_OK;
}

static int attn_train_rowid(sqlite3_vtab_cursor *base, sqlite_int64 *rowid) {
  *rowid = ((attn_train_cursor *)base)->row.epoch;
  return SQLITE_OK;
}

static const sqlite3_module attn_train_module = {
    .iVersion = 0,
    .xCreate = NULL, /* eponymous only: no CREATE VIRTUAL TABLE */
    .xConnect = attn_train_connect,
    .xBestIndex = attn_train_best_index,
    .xDisconnect = attn_vtab_disconnect,
    .xOpen = attn_train_open,
    .xClose = attn_train_close,
    .xFilter = attn_train_filter,
    .xNext = attn_train_next,
    .xEof = attn_train_eof,
    .xColumn = attn_train_column,
    .xRowid = attn_train_rowid,
};

int attn_train_register(sqlite3 *db, attn_conn *conn) {
  return attn_create_module(db, conn, "attn_train", &attn_train_module);
}
