/* attn_training.c -- one training run, shared by attn_train / attn_fit (attn_train.c) and
 * attn_tune (attn_tune.c): the options (with "from", a warm start from a stored model), the rows
 * of the query read into memory, the trainer, its epochs with the progress line, and the save of
 * the model with its log as a new deployed version (attn_store_save). See attn_ext.h.
 *
 *   SELECT attn_fit('news', 'SELECT title, category FROM new_headlines', '{"from":"news"}');
 *   --  warm start: version 3 of 'news' starts from the deployed version's weights
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

void attn_training_free(attn_training *t) {
  attn_training_reset(t);
  sqlite3_finalize(t->probe);
  t->probe = NULL;
  sqlite3_free(t->name);
  t->name = NULL;
  attn_rows_free(&t->data);
}

void attn_training_reset(attn_training *t) {
  attn_progress_clear(&t->progress);
  nn_trainer_free(t->trainer);
  t->trainer = NULL;
  sqlite3_free(t->log);
  t->log = NULL;
  t->nlog = t->cap_log = 0;
  free(t->metrics);
  t->metrics = NULL;
  nn_model_free(t->model);
  t->model = NULL;
  attn_model_release(t->base);
  t->base = NULL;
  attn_embeddings_free(&t->emb);
  t->stopped = t->saved = 0;
  t->version = 0;
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

/* The options of one run (text or NULL) into t->cfg, t->emb and t->base: "from" (a model name:
 * its deployed version, or "from_version") makes a warm start whose config starts as the base
 * model's; the rest is attn_train_options'. */
int attn_training_options(attn_training *t, const char *options, char **msg) {
  sqlite3 *db = attn_conn_db(t->conn);
  const char *fn = t->fn;
  char err[NN_ERR_LEN] = "", *rest = NULL, *from = NULL, *what = NULL;
  sqlite3_stmt *stmt = NULL;
  int rc = SQLITE_OK, has_version = 0;
  sqlite3_int64 from_version = 0;
  attn_embeddings_free(&t->emb);
  attn_model_release(t->base);
  t->base = NULL;
  nn_config_default(&t->cfg);
  if (!options) return SQLITE_OK;
  /* Take "from" and "from_version" out with SQLite's JSON functions; anything that is not a
   * JSON object is left to attn_train_options, which says what is wrong with it. */
  rc = sqlite3_prepare_v2(db,
                          "SELECT json_type(?1, '$.from'), json_extract(?1, '$.from'), "
                          "json_type(?1, '$.from_version'), json_extract(?1, '$.from_version'), "
                          "json_remove(?1, '$.from', '$.from_version'), "
                          "json_type(?1, '$.embeddings') "
                          "WHERE json_valid(?1) AND json_type(?1) = 'object'",
                          -1, &stmt, NULL);
  if (rc != SQLITE_OK) {
    *msg = sqlite3_mprintf("%s: cannot read the options: %s", fn, sqlite3_errmsg(db));
    return SQLITE_ERROR;
  }
  sqlite3_bind_text(stmt, 1, options, -1, SQLITE_STATIC);
  rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW) {
    const char *ftype = (const char *)sqlite3_column_text(stmt, 0);
    const char *vtype = (const char *)sqlite3_column_text(stmt, 2);
    const char *vtext = (const char *)sqlite3_column_text(stmt, 3);
    int present = ftype || vtype; /* the keys, null or not: take them out */
    if (ftype && strcmp(ftype, "null") == 0) ftype = NULL; /* null: not given */
    if (vtype && strcmp(vtype, "null") == 0) vtype = NULL;
    rc = SQLITE_OK;
    if (ftype && (strcmp(ftype, "text") != 0 || sqlite3_column_bytes(stmt, 1) == 0)) {
      const char *v = (const char *)sqlite3_column_text(stmt, 1);
      *msg = sqlite3_mprintf("%s: option \"from\" must be the name of a model, got %s", fn,
                             v ? v : ftype);
      rc = SQLITE_ERROR;
    } else if (vtype && strcmp(vtype, "integer") != 0) {
      *msg = sqlite3_mprintf("%s: option \"from_version\" must be an integer, got %s", fn,
                             vtext ? vtext : vtype);
      rc = SQLITE_ERROR;
    } else if (ftype && sqlite3_column_type(stmt, 5) != SQLITE_NULL &&
               strcmp((const char *)sqlite3_column_text(stmt, 5), "null") != 0) {
      *msg = sqlite3_mprintf("%s: option \"embeddings\" cannot be used with \"from\": the "
                             "embedding starts as the base model's", fn);
      rc = SQLITE_ERROR;
    } else if (vtype && !ftype) {
      *msg = sqlite3_mprintf("%s: option \"from_version\" needs \"from\" (the name of the model "
                             "to start from)", fn);
      rc = SQLITE_ERROR;
    } else if (present) {
      rest = sqlite3_mprintf("%s", (const char *)sqlite3_column_text(stmt, 4));
      if (!rest) rc = SQLITE_NOMEM;
      if (ftype) {
        from = sqlite3_mprintf("%s", (const char *)sqlite3_column_text(stmt, 1));
        has_version = vtype != NULL;
        from_version = sqlite3_column_int64(stmt, 3);
        if (!from) rc = SQLITE_NOMEM;
      }
    }
  } else {
    rc = rc == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    if (rc != SQLITE_OK)
      *msg = sqlite3_mprintf("%s: cannot read the options: %s", fn, sqlite3_errmsg(db));
  }
  sqlite3_finalize(stmt);
  if (rc != SQLITE_OK) goto done;
  if (from) {
    what = sqlite3_mprintf("%s: option \"from\"", fn);
    if (!what) {
      rc = SQLITE_NOMEM;
      goto done;
    }
    rc = has_version ? attn_model_acquire_version(t->conn, what, from, from_version, &t->base, msg)
                     : attn_model_acquire(t->conn, what, from, &t->base, msg);
    if (rc != SQLITE_OK) {
      t->base = NULL;
      goto done;
    }
    t->cfg = *nn_model_config(t->base->nn);
  }
  rc = attn_train_options(db, fn, rest ? rest : options, &t->cfg, &t->emb, msg);
  if (rc != SQLITE_OK) goto done;
  if (t->base && t->emb.table) {
    *msg = sqlite3_mprintf("%s: option \"embeddings\" cannot be used with \"from\": the "
                           "embedding starts as the base model's", fn);
    rc = SQLITE_ERROR;
    goto done;
  }
  if (t->base && nn_config_check_warm_start(&t->cfg, nn_model_config(t->base->nn), err) != NN_OK) {
    *msg = sqlite3_mprintf("%s: %s", fn, err);
    rc = SQLITE_ERROR;
    goto done;
  }
done:
  sqlite3_free(rest);
  sqlite3_free(from);
  sqlite3_free(what);
  if (rc != SQLITE_OK) {
    attn_model_release(t->base);
    t->base = NULL;
    attn_embeddings_free(&t->emb);
    if (!*msg) *msg = sqlite3_mprintf("%s: out of memory", fn);
  }
  return rc;
}

/* Create the trainer of t->cfg over t->data (a warm start from t->base when set). */
int attn_training_create(attn_training *t, char **msg) {
  sqlite3 *db = attn_conn_db(t->conn);
  const char *fn = t->fn;
  char err[NN_ERR_LEN] = "";
  int rc = SQLITE_OK;
  attn_interrupt interrupt = {db, NULL, 0}; /* the vocabulary of many rows takes a while */
  int st = t->base ? nn_trainer_create_from(&t->trainer, t->base->nn, &t->cfg, t->data.texts,
                                            t->data.lens, t->data.labels, t->data.label_lens,
                                            t->data.n, attn_interrupt_check, &interrupt, err)
                   : nn_trainer_create_ex(&t->trainer, &t->cfg, t->data.texts, t->data.lens,
                                          t->data.labels, t->data.label_lens, t->data.n,
                                          attn_interrupt_check, &interrupt, err);
  attn_interrupt_end(&interrupt);
  /* the base's weights are copied: let it go (the cache may drop it) */
  attn_model_release(t->base);
  t->base = NULL;
  if (st != NN_OK) {
    t->trainer = NULL;
    *msg = st == NN_INTERRUPTED ? sqlite3_mprintf("%s: interrupted", fn)
                                : sqlite3_mprintf("%s: %s", fn, err);
    rc = st == NN_INTERRUPTED ? SQLITE_INTERRUPT : st == NN_NOMEM ? SQLITE_NOMEM : SQLITE_ERROR;
    goto done;
  }
  rc = attn_embeddings_apply(db, fn, t->trainer, &t->emb, msg);
  if (rc != SQLITE_OK) goto done;
  if (!t->probe) {
    rc = sqlite3_prepare_v2(db, "SELECT 1", -1, &t->probe, NULL);
    if (rc != SQLITE_OK) *msg = sqlite3_mprintf("%s: %s", fn, sqlite3_errmsg(db));
  }
done:
  attn_embeddings_free(&t->emb);
  if (rc != SQLITE_OK) {
    t->stopped = 1;
    if (!*msg) *msg = sqlite3_mprintf("%s: out of memory", fn);
  }
  return rc;
}

int attn_training_begin(attn_training *t, attn_conn *conn, const char *fn,
                        sqlite3_value *name_arg, sqlite3_value *query_arg, char **msg) {
  sqlite3 *db = attn_conn_db(conn);
  sqlite3_stmt *stmt = NULL;
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
  rc = attn_prepare_query(db, fn, query_arg ? (const char *)sqlite3_value_text(query_arg) : NULL,
                          2, "(text, label)", &stmt, msg);
  if (rc != SQLITE_OK) goto done;
  int query_done = 0;
  attn_conn_query_begin(conn, fn);
  rc = attn_rows_read(&t->data, stmt, ATTN_ROWS_TEXT_LABEL, INT_MAX, &query_done, fn, msg);
  attn_conn_query_end(conn);
  if (rc != SQLITE_OK) goto done;
  if (t->data.n == 0) {
    *msg = sqlite3_mprintf("%s: the query returned no rows", fn);
    rc = SQLITE_ERROR;
    goto done;
  }
done:
  sqlite3_finalize(stmt);
  if (rc != SQLITE_OK) {
    t->stopped = 1;
    if (!*msg) *msg = sqlite3_mprintf("%s: out of memory", fn);
  }
  return rc;
}

int attn_training_start(attn_training *t, attn_conn *conn, const char *fn,
                        sqlite3_value *name_arg, sqlite3_value *query_arg,
                        sqlite3_value *options_arg, char **msg) {
  const char *options = NULL;
  memset(t, 0, sizeof *t);
  t->conn = conn;
  t->fn = fn;
  if (options_arg && sqlite3_value_type(options_arg) != SQLITE_NULL) {
    if (sqlite3_value_type(options_arg) != SQLITE_TEXT) {
      *msg = sqlite3_mprintf("%s: the options must be a JSON object as text, e.g. "
                             "'{\"epochs\":10}'",
                             fn);
      t->stopped = 1;
      return SQLITE_ERROR;
    }
    options = (const char *)sqlite3_value_text(options_arg);
  }
  /* the order of the checks as before: writable store, name, options, query */
  int rc = attn_conn_check_write(conn, fn, msg);
  const char *name = NULL;
  if (rc == SQLITE_OK) rc = attn_name_value(fn, name_arg, &name, msg);
  if (rc == SQLITE_OK) rc = attn_training_options(t, options, msg);
  if (rc != SQLITE_OK) {
    t->stopped = 1;
    if (!*msg) *msg = sqlite3_mprintf("%s: out of memory", fn);
    return rc;
  }
  /* begin clears t: keep what the options made */
  nn_config cfg = t->cfg;
  attn_embeddings emb = t->emb;
  attn_model *base = t->base;
  rc = attn_training_begin(t, conn, fn, name_arg, query_arg, msg);
  t->cfg = cfg;
  t->emb = emb;
  t->base = base;
  if (rc == SQLITE_OK) rc = attn_training_create(t, msg);
  return rc;
}

/* Training is over: store the best model and the log in one transaction, then let the trainer
 * and the training data go. With t->keep: keep the model in t->model and the data, save nothing
 * (attn_tune saves its trials at the end). */
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
  if (t->keep) {
    t->model = model;
    nn_trainer_free(t->trainer);
    t->trainer = NULL;
    return SQLITE_OK;
  }
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
int attn_training_epoch(attn_training *t, nn_epoch_stats *row, char **msg) {
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
int attn_training_finish(attn_training *t, char **msg) {
  nn_epoch_stats row;
  int rc;
  while ((rc = attn_training_epoch(t, &row, msg)) == SQLITE_ROW) {
  }
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

