/* attn_training.c -- one training run, shared by attn_train / attn_fit (attn_train.c) and
 * attn_tune (attn_tune.c): its options (read by attn_options.c, with "from", a warm start from
 * a stored model), the rows of the query read into memory, the trainer, its epochs with the
 * progress line, the deploy decision, and the save of the model with its log as a new version
 * (attn_store_save_items).
 * See attn_ext.h.
 *
 *   SELECT attn_fit('news', 'SELECT title, category FROM new_headlines', '{"from":"news"}');
 *   --  warm start: version 3 of 'news' starts from the deployed version's weights
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attn_ext.h"
#include "compat.h" /* nn_os_seconds */
#include "json.h"

/* ------------------------------------------------------------------ the progress line */

/* A line on standard error within a training epoch:
 *   epoch 3/20  [########------------]  61/143 batches  loss 0.8123  9120 rows/s  0:04 left
 * drawn with a carriage return (at most 10 times a second) only when standard error is a
 * terminal and the option "progress" is true, and cleared before the epoch's row is returned,
 * so the shell's output stays clean. */
static void attn_progress_begin(attn_progress *p, int want, int epoch, int epochs) {
  memset(p, 0, sizeof *p);
  p->enabled = want && isatty(STDERR_FILENO);
  p->epoch = epoch;
  p->epochs = epochs;
  p->start = nn_os_seconds();
}

static void attn_progress_update(attn_progress *p, int batches_done, int batches_total, double loss,
                                 double rows_per_second) {
  if (!p->enabled || batches_total <= 0) return;
  double now = nn_os_seconds();
  /* the last batch is drawn at once, then not again: the validation repeats that report to
   * ask for interrupts */
  if (p->drawn && batches_done == p->last_done) return;
  if (p->drawn && now - p->last_draw < 0.1 && batches_done < batches_total) return;
  p->last_draw = now;
  p->last_done = batches_done;
  char bar[21];
  int filled = (int)(20.0 * batches_done / batches_total);
  if (filled > 20) filled = 20;
  for (int i = 0; i < 20; i++) bar[i] = i < filled ? '#' : '-';
  bar[20] = 0;
  double elapsed = now - p->start;
  double left = batches_done > 0 ? elapsed * (batches_total - batches_done) / batches_done : 0;
  int secs = (int)(left + 0.5);
  if (p->epochs == 0) /* the recipe's choice of word dropout: four short trainings */
    fprintf(stderr, "\r\033[Kchoosing word dropout  [%s]  %d/%d batches  %d:%02d left", bar,
            batches_done, batches_total, secs / 60, secs % 60);
  else if (isnan(loss)) /* self-training scores the unlabelled rows: no loss, no training rows */
    fprintf(stderr, "\r\033[Kscoring unlabelled rows  [%s]  %d/%d batches  %d:%02d left", bar,
            batches_done, batches_total, secs / 60, secs % 60);
  else
    fprintf(stderr,
            "\r\033[Kepoch %d/%d  [%s]  %d/%d batches  loss %.4f  %.0f rows/s  %d:%02d left",
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
  attn_interrupt_end(&t->interrupt);
  sqlite3_free(t->name);
  t->name = NULL;
  attn_train_rows_free(&t->rows);
  attn_train_rows_free(&t->unlabelled);
  attn_train_rows_free(&t->kept);
  sqlite3_free(t->kept_index);
  t->kept_index = NULL;
  t->nkept = t->cap_kept = t->kept_failed = 0;
  t->nquery = t->nvalidation = t->nskipped = 0;
  sqlite3_free(t->validation_query);
  t->validation_query = NULL;
  sqlite3_free(t->query_text);
  t->query_text = NULL;
  attn_status_unregister(t->status);
  t->status = NULL;
}

void attn_training_reset(attn_training *t) {
  attn_progress_clear(&t->progress);
  /* a run that logged epochs live and was not saved: its rows go, its version is given back */
  if (t->live_version > 0 && !t->saved)
    attn_store_live_abort(t->conn, t->name, t->live_version, t->live_prev_mark);
  t->live_version = 0;
  t->live_written = 0;
  nn_trainer_free(t->trainer);
  t->trainer = NULL;
  sqlite3_free(t->log);
  t->log = NULL;
  t->nlog = t->cap_log = 0;
  sqlite3_free(t->metrics);
  t->metrics = NULL;
  nn_model_free(t->model);
  t->model = NULL;
  attn_options_clear(t);
  sqlite3_free(t->deploy_reason);
  t->deploy_reason = NULL;
  sqlite3_free(t->val_rows);
  t->val_rows = NULL;
  t->nval = 0;
  t->stopped = t->saved = t->deployed = 0;
  t->version = 0;
}

/* Whether the run was asked to stop: the connection interrupted, or the job cancelled. */
static int attn_training_stop_asked(attn_training *t) {
  if (t->stop_flag && atomic_load(t->stop_flag)) return 1;
  return t->interrupt.probe && attn_interrupted(&t->interrupt, 1);
}

/* nn_progress_fn: stop when the run was asked to; draw the progress line. */
static int attn_training_progress(void *ctx, int batches_done, int batches_total, double loss,
                                  double rows_per_second) {
  attn_training *t = ctx;
  if (attn_training_stop_asked(t)) return 1;
  attn_progress_update(&t->progress, batches_done, batches_total, loss, rows_per_second);
  attn_status_batch(t->status, batches_done, batches_total, loss, rows_per_second);
  return 0;
}

/* Option "class_weights" as an object (t->class_weights, attn_options_read) applied to the
 * trainer. */
static int attn_training_class_weights(attn_training *t, char **msg) {
  const char **labels = NULL;
  int *lens = NULL, n = 0, rc = SQLITE_OK;
  double *weights = NULL;
  nn_json *doc = NULL;
  char err[NN_ERR_LEN] = "";
  if (!t->class_weights) return SQLITE_OK;
  int st = nn_json_parse(&doc, t->class_weights, strlen(t->class_weights), &attn_mem, err);
  if (st != NN_OK) {
    rc = st == NN_NOMEM ? SQLITE_NOMEM : attn_nn_error(st, t->fn, err, msg);
    goto done;
  }
  size_t cap = nn_json_count(doc) ? nn_json_count(doc) : 1;
  labels = sqlite3_malloc64(sizeof *labels * (sqlite3_uint64)cap);
  lens = sqlite3_malloc64(sizeof *lens * (sqlite3_uint64)cap);
  weights = sqlite3_malloc64(sizeof *weights * (sqlite3_uint64)cap);
  if (!labels || !lens || !weights) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  for (size_t i = 0; i < nn_json_count(doc); i++) {
    const nn_json *w = nn_json_at(doc, i);
    if (w->type != NN_JSON_NUMBER) {
      char *got = attn_option_value(t->class_weights, w);
      *msg = got ? sqlite3_mprintf("%s: option \"class_weights\": the weight of label \"%s\" "
                                   "must be a number, got %s",
                                   t->fn, w->key, got)
                 : NULL;
      sqlite3_free(got);
      rc = *msg ? SQLITE_ERROR : SQLITE_NOMEM;
      goto done;
    }
    labels[n] = w->key;
    lens[n] = (int)strlen(w->key);
    weights[n++] = w->number;
  }
  st = nn_trainer_set_class_weights(t->trainer, labels, lens, weights, n, err);
  if (st != NN_OK) rc = attn_nn_error(st, t->fn, err, msg);
done:
  nn_json_free(doc);
  sqlite3_free((void *)labels);
  sqlite3_free(lens);
  sqlite3_free(weights);
  if (rc == SQLITE_NOMEM && !*msg) *msg = sqlite3_mprintf("%s: out of memory", t->fn);
  return rc;
}

/* t's rows as the trainer reads them (nn_trainer_args.row_text, row_label): the labelled rows,
 * then the unlabelled ones. */
static const char *attn_training_text(void *ctx, int i, int *len) {
  const attn_training *t = ctx;
  return i < t->rows.n ? attn_train_rows_text(&t->rows, i, len)
                       : attn_train_rows_text(&t->unlabelled, i - t->rows.n, len);
}

static const char *attn_training_label(void *ctx, int i, int *len) {
  const attn_training *t = ctx;
  return attn_train_rows_label(&t->rows, i, len);
}

/* nn_trainer_args.rows_done: rows first .. end - 1 are encoded. Their texts go, the validation
 * rows' (keep) copied to t->kept first: the deploy decision scores them after the training.
 * Out of memory for a copy: nothing more is let go, and attn_training_create fails. */
static void attn_training_rows_done(void *ctx, int first, int end, const int *keep, int nkeep) {
  attn_training *t = ctx;
  if (t->kept_failed) return;
  if (t->nkept + nkeep > t->cap_kept) {
    int cap = t->cap_kept ? t->cap_kept : 256;
    while (cap < t->nkept + nkeep) cap *= 2;
    int *index = sqlite3_realloc64(t->kept_index, sizeof *index * (sqlite3_uint64)cap);
    if (!index) {
      t->kept_failed = 1;
      return;
    }
    t->kept_index = index;
    t->cap_kept = cap;
  }
  for (int k = 0; k < nkeep; k++) {
    if (attn_train_rows_copy(&t->kept, &t->rows, keep[k]) != SQLITE_OK) {
      t->kept_failed = 1;
      return;
    }
    t->kept_index[t->nkept++] = keep[k];
  }
  int n = t->rows.n;
  attn_train_rows_release(&t->rows, end < n ? end : n);
  if (end > n) attn_train_rows_release(&t->unlabelled, end - n);
  (void)first;
}

/* Create the trainer of t->cfg over t's rows (a warm start from t->base when set). */
int attn_training_create(attn_training *t, char **msg) {
  sqlite3 *db = attn_conn_db(t->conn);
  const char *fn = t->fn;
  char err[NN_ERR_LEN] = "";
  int rc = SQLITE_OK;
  /* "deploy": "if_better" asked for compares on a validation split: keep one */
  if (t->deploy == ATTN_DEPLOY_IF_BETTER && t->deploy_given)
    t->cfg.data_sized &= ~NN_SIZED_VALIDATION;
  nn_trainer_args args = {.cfg = &t->cfg,
                          .base = t->base ? t->base->nn : NULL,
                          .row_text = attn_training_text,
                          .row_label = attn_training_label,
                          .rows_ctx = t,
                          .rows_done = t->keep ? NULL : attn_training_rows_done,
                          .n = t->rows.n,
                          .n_unlabelled = t->unlabelled.n,
                          /* the vocabulary of many rows takes a while */
                          .stop = attn_interrupt_check,
                          .stop_ctx = &t->interrupt,
                          .mem = &attn_mem};
  t->interrupt.db = db;
  int st = nn_trainer_create(&t->trainer, &args, err);
  /* the base's weights are copied: let it go (the cache may drop it) */
  attn_model_release(t->base);
  t->base = NULL;
  if (st != NN_OK) {
    t->trainer = NULL;
    rc = attn_nn_error(st, fn, err, msg);
    goto done;
  }
  if (!t->keep) { /* every text is encoded: only the validation rows' stay, renumbered */
    if (t->kept_failed) {
      rc = SQLITE_NOMEM;
      goto done;
    }
    attn_train_rows_seal(&t->kept);
    attn_train_rows_free(&t->rows);
    attn_train_rows_free(&t->unlabelled);
    t->rows = t->kept;
    memset(&t->kept, 0, sizeof t->kept);
  }
  t->cfg = *nn_trainer_config(t->trainer); /* with what the recipe sized to the rows */
  if (t->cfg.validation == NN_VALIDATION_NONE && !t->deploy_given)
    t->deploy = ATTN_DEPLOY_ALWAYS; /* a few rows, no validation split: nothing to compare on */
  /* its real size, once the vocabulary is known: refused before the first epoch */
  rc = attn_store_check_size(db, fn, &t->cfg, nn_trainer_param_count(t->trainer), msg);
  if (rc != SQLITE_OK) goto done;
  rc = attn_embeddings_apply(db, fn, t->trainer, &t->emb, msg);
  if (rc != SQLITE_OK) goto done;
  rc = attn_training_class_weights(t, msg);
  if (rc != SQLITE_OK) goto done;
  nn_trainer_backend(t->trainer, t->backend, sizeof t->backend);
  attn_utc_now(t->started_at);
  t->live_last = nn_os_seconds();
  rc = attn_interrupt_begin(&t->interrupt, db);
  if (rc != SQLITE_OK) *msg = sqlite3_mprintf("%s: %s", fn, sqlite3_errmsg(db));
done:
  attn_embeddings_free(&t->emb);
  if (rc != SQLITE_OK) {
    t->stopped = 1;
    if (!*msg) *msg = sqlite3_mprintf("%s: out of memory", fn);
  }
  return rc;
}

int attn_training_open(attn_training *t, attn_conn *conn, const char *fn, sqlite3_value *name_arg,
                       sqlite3_value *query_arg, sqlite3_value *options_arg, char **msg) {
  sqlite3 *db = attn_conn_db(conn);
  sqlite3_stmt *stmt = NULL;
  const char *options = NULL, *name = NULL;
  int rc = SQLITE_OK;
  memset(t, 0, sizeof *t);
  t->conn = conn;
  t->fn = fn;
  t->from_version = -1;
  /* in this order: the options' type, a writable store, the name, the options, a name that can
   * take a new version, the query */
  if (options_arg && sqlite3_value_type(options_arg) != SQLITE_NULL) {
    if (sqlite3_value_type(options_arg) != SQLITE_TEXT) {
      *msg = sqlite3_mprintf("%s: the options must be a JSON object as text, e.g. "
                             "'{\"epochs\":10}'",
                             fn);
      rc = SQLITE_ERROR;
      goto done;
    }
    options = (const char *)sqlite3_value_text(options_arg);
  }
  if ((rc = attn_conn_check_write(conn, fn, msg)) != SQLITE_OK) goto done;
  if ((rc = attn_name_value(fn, name_arg, &name, msg)) != SQLITE_OK) goto done;
  t->name = sqlite3_mprintf("%s", name);
  if (!t->name) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  if ((rc = attn_options_read(t, options, ATTN_OPTIONS_TRAINING, msg)) != SQLITE_OK) goto done;
  /* what would make the save fail, checked before training rather than after it */
  if ((rc = attn_store_check_save(conn, fn, name, 1, msg)) != SQLITE_OK) goto done;
  const char *query = query_arg ? (const char *)sqlite3_value_text(query_arg) : NULL;
  rc = attn_prepare_query(db, fn, query, 2, "(text, label)", &stmt, msg);
  if (rc != SQLITE_OK) goto done;
  t->query_text = sqlite3_mprintf("%s", query);
  if (!t->query_text) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  t->status = attn_status_register(db, fn, name);
  attn_conn_query_begin(conn, fn);
  rc = attn_train_rows_read(&t->rows, stmt, fn, msg, t->use_unlabelled ? &t->unlabelled : NULL,
                            &t->nskipped);
  attn_conn_query_end(conn);
  if (rc != SQLITE_OK) goto done;
  t->nquery = t->rows.n;
  if (t->nquery == 0) {
    int nulls = t->unlabelled.n + t->nskipped;
    *msg = nulls ? sqlite3_mprintf("%s: the query returned no labelled rows (%d rows, every "
                                   "label NULL): at least 2 labels are needed",
                                   fn, nulls)
                 : sqlite3_mprintf("%s: the query returned no rows", fn);
    rc = SQLITE_ERROR;
    goto done;
  }
  attn_interrupt interrupt = {db, NULL, 0};
  rc = attn_train_rows_sha256(&t->rows, 0, t->nquery, &interrupt, t->rows_sha256);
  attn_interrupt_end(&interrupt);
  if (rc != SQLITE_OK) *msg = sqlite3_mprintf("%s: interrupted", fn);
done:
  sqlite3_finalize(stmt);
  if (rc != SQLITE_OK) {
    t->stopped = 1;
    if (!*msg) *msg = sqlite3_mprintf("%s: out of memory", fn);
  }
  return rc;
}

/* An error of the validation query's ("attn_fit: the query ...", "row 3 of the query has a
 * NULL label") names the option it came from. */
static void attn_validation_query_error(char **msg) {
  if (!*msg) return;
  char *full = sqlite3_mprintf("%s (option \"validation_query\")", *msg);
  sqlite3_free(*msg);
  *msg = full;
}

int attn_training_rows(attn_training *t, char **msg) {
  sqlite3 *db = attn_conn_db(t->conn);
  sqlite3_stmt *stmt = NULL;
  const char *fn = t->fn;
  int rc = SQLITE_OK;
  if (t->validation_query && t->nvalidation == 0) {
    rc = attn_prepare_query(db, fn, t->validation_query, 2, "(text, label)", &stmt, msg);
    if (rc != SQLITE_OK) {
      attn_validation_query_error(msg);
      return rc;
    }
    /* the training rows, then the validation query's: "validation": "query" takes the last */
    attn_conn_query_begin(t->conn, fn);
    rc = attn_train_rows_read(&t->rows, stmt, fn, msg, NULL, NULL);
    attn_conn_query_end(t->conn);
    sqlite3_finalize(stmt);
    if (rc != SQLITE_OK) {
      attn_validation_query_error(msg);
      return rc;
    }
    t->nvalidation = t->rows.n - t->nquery;
    if (t->nvalidation == 0) {
      *msg = sqlite3_mprintf("%s: option \"validation_query\" returned no rows", fn);
      return SQLITE_ERROR;
    }
    attn_interrupt interrupt = {db, NULL, 0};
    rc = attn_train_rows_sha256(&t->rows, t->nquery, t->nvalidation, &interrupt, t->val_sha256);
    attn_interrupt_end(&interrupt);
    if (rc != SQLITE_OK) *msg = sqlite3_mprintf("%s: interrupted", fn);
  }
  return rc;
}

int attn_training_start(attn_training *t, attn_conn *conn, const char *fn, sqlite3_value *name_arg,
                        sqlite3_value *query_arg, sqlite3_value *options_arg, char **msg) {
  int rc = attn_training_open(t, conn, fn, name_arg, query_arg, options_arg, msg);
  if (rc == SQLITE_OK) rc = attn_training_rows(t, msg);
  if (rc == SQLITE_OK) t->cfg.validation_rows = t->nvalidation;
  attn_status_phase(t->status, "training", t->cfg.epochs, 0, 0);
  if (rc == SQLITE_OK) rc = attn_training_create(t, msg);
  return rc;
}

/* ------------------------------------------------------------------ deploy: "if_better" */

/* One model's figures on the validation rows, computed the same way for the new version and the
 * deployed one: accuracy and support-weighted F1 of the predicted labels (compared as text), and
 * the mean cross-entropy (not class-weighted; +inf when the model lacks a row's label). */
static int attn_training_score(attn_training *t, const nn_model *model, const int *rows, int n,
                               nn_figures *out, char **msg) {
  const char *fn = t->fn;
  int C = nn_model_num_classes(model), L = t->rows.nlabels, rc;
  const char **texts = sqlite3_malloc64(sizeof *texts * (sqlite3_uint64)n);
  int *lens = sqlite3_malloc64(sizeof *lens * (sqlite3_uint64)n);
  int *pred = sqlite3_malloc64(sizeof *pred * (sqlite3_uint64)n);
  int *truth = sqlite3_malloc64(sizeof *truth * (sqlite3_uint64)n);
  float *probs = sqlite3_malloc64(sizeof *probs * (sqlite3_uint64)n * (sqlite3_uint64)C);
  /* counts over the model's classes, then one more for each label it does not have */
  int64_t *tp = sqlite3_malloc64(sizeof *tp * 3 * (sqlite3_uint64)(C + (L < n ? L : n)));
  int *class_of = sqlite3_malloc64(sizeof *class_of * (sqlite3_uint64)(L ? L : 1));
  if (!texts || !lens || !pred || !truth || !probs || !tp || !class_of) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  for (int i = 0; i < n; i++) texts[i] = attn_train_rows_text(&t->rows, rows[i], &lens[i]);
  attn_model wrapper;
  memset(&wrapper, 0, sizeof wrapper);
  wrapper.nn = (nn_model *)model;
  wrapper.refs = 1;
  rc = attn_classify_probs(t->conn, &wrapper, texts, lens, n, pred, probs, fn, msg);
  if (rc != SQLITE_OK) goto done;
  /* true labels as the model's class ids; labels it lacks get ids C, C + 1, ... in the order
   * first seen (class_of: by the label's number in t->rows, -2 until seen) */
  int extra = 0;
  double loss = 0;
  for (int k = 0; k < L; k++) class_of[k] = -2;
  for (int i = 0; i < n; i++) {
    int id = attn_train_rows_label_id(&t->rows, rows[i]);
    if (class_of[id] == -2) {
      int len;
      const char *label = attn_train_rows_label(&t->rows, rows[i], &len);
      int c = nn_model_label_lookup(model, label, len);
      class_of[id] = c >= 0 ? c : C + extra++;
    }
    int c = class_of[id];
    truth[i] = c;
    double p = c < C ? probs[(size_t)i * C + c] : 0;
    loss += p > 0 ? -log(p) : INFINITY;
  }
  int K = C + extra;
  int64_t *predicted = tp + K, *support = tp + 2 * K;
  memset(tp, 0, sizeof *tp * 3 * (size_t)K);
  for (int i = 0; i < n; i++) {
    predicted[pred[i]]++;
    support[truth[i]]++;
    tp[pred[i]] += pred[i] == truth[i];
  }
  nn_class_metrics weighted;
  nn_metrics_from_counts(NULL, &weighted, &out->accuracy, tp, predicted, support, K);
  out->f1 = weighted.f1;
  out->loss = loss / n;
done:
  sqlite3_free((void *)texts);
  sqlite3_free(lens);
  sqlite3_free(pred);
  sqlite3_free(truth);
  sqlite3_free(probs);
  sqlite3_free(tp);
  sqlite3_free(class_of);
  if (rc == SQLITE_NOMEM && !*msg) *msg = sqlite3_mprintf("%s: out of memory", fn);
  return rc;
}

/* How a version split its rows, from its metrics: "split": "text_hash" with its fraction and
 * the rows of the validation side it trained on anyway (split_moved). */
typedef struct attn_split {
  int by_text;     /* the split by a hash of each text */
  double fraction; /* its val_fraction */
  int moved;       /* rows of the validation side that trained; -1: not known */
} attn_split;

static attn_split attn_split_of(const nn_json *metrics) {
  attn_split split = {0, 0.0, -1};
  const nn_json *by = metrics ? nn_json_get(metrics, "split") : NULL;
  const nn_json *fraction = metrics ? nn_json_get(metrics, "split_fraction") : NULL;
  const nn_json *moved = metrics ? nn_json_get(metrics, "split_moved") : NULL;
  if (by && by->type == NN_JSON_STRING && strcmp(by->str, "text_hash") == 0 && fraction &&
      fraction->type == NN_JSON_NUMBER && moved && moved->type == NN_JSON_NUMBER) {
    split.by_text = 1;
    split.fraction = fraction->number;
    split.moved = moved->number >= 0 && moved->number <= 2147483647.0 ? (int)moved->number : -1;
  }
  return split;
}

/* Whether the deployed version `version` of t->name never trained on the rows t validates on:
 * ATTN_HELD_SAME when it held out exactly these rows (its metrics' validation_sha256 is
 * t->val_id); ATTN_HELD_BY_TEXT when both split by text at the same fraction and it trained on
 * no row of the validation side (whatever rows were added or removed since, each of these rows
 * was on its validation side or not in its table); else ATTN_HELD_UNKNOWN. */
enum { ATTN_HELD_UNKNOWN = 0, ATTN_HELD_SAME = 1, ATTN_HELD_BY_TEXT = 2 };
static int attn_training_held_out(attn_training *t, int64_t version) {
  sqlite3_stmt *stmt = NULL;
  int held = ATTN_HELD_UNKNOWN;
  if (!t->val_id[0] ||
      sqlite3_prepare_v2(attn_conn_db(t->conn),
                         "SELECT metrics FROM main.attn_models WHERE name = ?1 AND version = ?2",
                         -1, &stmt, NULL) != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return held;
  }
  sqlite3_bind_text(stmt, 1, t->name, -1, SQLITE_STATIC);
  sqlite3_bind_int64(stmt, 2, version);
  if (sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_type(stmt, 0) == SQLITE_TEXT) {
    nn_json *doc = NULL, *mine = NULL;
    char err[NN_ERR_LEN];
    const char *metrics = (const char *)sqlite3_column_text(stmt, 0);
    if (nn_json_parse(&doc, metrics, (size_t)sqlite3_column_bytes(stmt, 0), &attn_mem, err) ==
        NN_OK) {
      const nn_json *v = nn_json_get(doc, "validation_sha256");
      attn_split theirs = attn_split_of(doc), ours = {0, 0.0, -1};
      if (t->metrics &&
          nn_json_parse(&mine, t->metrics, strlen(t->metrics), &attn_mem, err) == NN_OK)
        ours = attn_split_of(mine);
      if (v && v->type == NN_JSON_STRING && strcmp(v->str, t->val_id) == 0) held = ATTN_HELD_SAME;
      else if (ours.by_text && theirs.by_text && theirs.moved == 0 &&
               ours.fraction == theirs.fraction)
        held = ATTN_HELD_BY_TEXT;
    }
    nn_json_free(doc);
    nn_json_free(mine);
  }
  sqlite3_finalize(stmt);
  return held;
}

/* Two figures of a deploy reason, 6 digits each, more where 6 would print different values
 * alike (two trainings' losses can differ in the eighth): the reason then never says that
 * 0.0510322 is lower than 0.0510322. a, b: 32 bytes each. */
static void attn_training_two_figures(char *a, char *b, double x, double y) {
  for (int digits = 6; digits <= 17; digits++) {
    sqlite3_snprintf(32, a, "%.*g", digits, x);
    sqlite3_snprintf(32, b, "%.*g", digits, y);
    if (x == y || strcmp(a, b) != 0) break;
  }
}

int attn_training_decide(attn_training *t, const nn_model *model, const int *rows, int n,
                         int *deploy, char **msg) {
  attn_model *current = NULL;
  char *err = NULL;
  int rc = SQLITE_OK;
  sqlite3_free(t->deploy_reason);
  t->deploy_reason = NULL;
  t->val_id[0] = 0;
  if (n > 0 && attn_train_rows_sha256_of(&t->rows, rows, n, t->val_id) != SQLITE_OK)
    return SQLITE_NOMEM;
  if (t->deploy != ATTN_DEPLOY_IF_BETTER) {
    *deploy = t->deploy == ATTN_DEPLOY_ALWAYS;
    t->deploy_reason = sqlite3_mprintf("option \"deploy\" is \"%s\"", *deploy ? "always" : "never");
    return t->deploy_reason ? SQLITE_OK : SQLITE_NOMEM;
  }
  *deploy = 1;
  if (attn_model_acquire_deployed(t->conn, t->fn, t->name, &current, &err) != SQLITE_OK) {
    /* nothing deployed (or it cannot be read): the new version serves */
    t->deploy_reason = sqlite3_mprintf(
        "no version of '%s' was deployed%s%s", t->name,
        err && !strstr(err, "no model named") && !strstr(err, "has no deployed version")
            ? " that could be read: "
            : "",
        err && !strstr(err, "no model named") && !strstr(err, "has no deployed version") ? err
                                                                                         : "");
    sqlite3_free(err);
    return t->deploy_reason ? SQLITE_OK : SQLITE_NOMEM;
  }
  nn_figures fresh, deployed;
  rc = attn_training_score(t, model, rows, n, &fresh, msg);
  if (rc == SQLITE_OK) rc = attn_training_score(t, current->nn, rows, n, &deployed, msg);
  int held = rc == SQLITE_OK ? attn_training_held_out(t, current->version) : ATTN_HELD_UNKNOWN;

  /* the monitored figure of both versions, as every reason below gives it */
  nn_monitor monitor = t->cfg.monitor;
  const char *figure = nn_monitor_name(monitor);
  char a[32] = "", b[32] = "";
  if (rc == SQLITE_OK)
    attn_training_two_figures(a, b, nn_monitor_figure(monitor, &fresh),
                              nn_monitor_figure(monitor, &deployed));
  if (rc == SQLITE_OK && held == ATTN_HELD_UNKNOWN) {
    /* The deployed version validated on other rows (another split, fraction or data, or it
     * was imported): it may have trained on some of these, which would favour it. The rule:
     * the new version is deployed, and the reason says that nothing was compared. */
    *deploy = 1;
    t->deploy_reason = sqlite3_mprintf(
        "not compared: the deployed version %lld held out other rows than these %d validation "
        "rows (another split, fraction or data, or a class with every row on the validation "
        "side), so it may have trained on some of them (%s %s "
        "against its %s there); the new version is deployed",
        (long long)current->version, n, figure, a, b);
    if (!t->deploy_reason) rc = SQLITE_NOMEM;
  } else if (rc == SQLITE_OK) {
    *deploy = nn_monitor_better(monitor, &fresh, &deployed);
    /* which rows the figures are on, as both reasons below say it */
    char *where = held == ATTN_HELD_SAME
                      ? sqlite3_mprintf("on the same %d validation rows (held out by both)", n)
                      : sqlite3_mprintf("on these %d validation rows, which neither trained on "
                                        "(both split by a hash of each text at this "
                                        "val_fraction)",
                                        n);
    if (!where) {
      rc = SQLITE_NOMEM;
    } else if (nn_monitor_tie(monitor, &fresh, &deployed)) {
      char c[32], d[32];
      attn_training_two_figures(c, d, fresh.loss, deployed.loss);
      t->deploy_reason = sqlite3_mprintf(
          "%s %s ties the deployed version %lld's %s, and its val_loss %s %s its %s", figure, a,
          (long long)current->version, where, c, *deploy ? "is lower than" : "does not beat", d);
    } else {
      t->deploy_reason = sqlite3_mprintf(
          "%s %s %s the deployed version %lld's %s %s", figure, a,
          *deploy ? (monitor == NN_MONITOR_VAL_LOSS ? "is lower than" : "is higher than")
                  : "does not beat",
          (long long)current->version, b, where);
    }
    sqlite3_free(where);
    if (rc == SQLITE_OK && !t->deploy_reason) rc = SQLITE_NOMEM;
  }
  attn_model_release(current);
  return rc;
}

char *attn_training_summary(const attn_training *t) {
  sqlite3_str *s = sqlite3_str_new(NULL);
  sqlite3_str_appendall(s, "{\"name\":");
  attn_json_string(s, t->name, (int)strlen(t->name));
  sqlite3_str_appendf(s, ",\"version\":%lld,\"epochs\":%d,\"committed\":%s", (long long)t->version,
                      t->nlog, t->committed ? "true" : "false");
  if (t->metrics && t->metrics[0] == '{' && t->metrics[1] != '}')
    sqlite3_str_appendf(s, ",%s", t->metrics + 1);
  else sqlite3_str_appendchar(s, 1, '}');
  return sqlite3_str_finish(s);
}

char *attn_training_metrics(const attn_training *t, const char *metrics, int deployed) {
  static const char *const names[] = {"if_better", "always", "never"};
  sqlite3_str *s = sqlite3_str_new(NULL);
  size_t len = metrics ? strlen(metrics) : 0;
  if (len >= 2 && metrics[len - 1] == '}') {
    sqlite3_str_append(s, metrics, (int)len - 1);
    if (len > 2) sqlite3_str_appendchar(s, 1, ',');
  } else {
    sqlite3_str_appendchar(s, 1, '{');
  }
  /* the unlabelled rows "unlabelled": false skipped (the engine counts those it was given) */
  if (t->nskipped)
    sqlite3_str_appendf(s, "\"unlabelled_rows\":%d,\"unlabelled_read\":false,", t->nskipped);
  /* which rows were held out, so that a later run can tell whether it validates on the same */
  if (t->val_id[0]) sqlite3_str_appendf(s, "\"validation_sha256\":\"%s\",", t->val_id);
  /* a text longer than max_len tokens was read up to its max_len-th: say how many */
  sqlite3_str_appendf(s, "\"truncated_texts\":%d,", t->ntruncated);
  sqlite3_str_appendf(s, "\"deploy\":\"%s\",\"deployed\":%s,\"deploy_reason\":", names[t->deploy],
                      deployed ? "true" : "false");
  const char *why = t->deploy_reason ? t->deploy_reason : "";
  attn_json_string(s, why, (int)strlen(why));
  sqlite3_str_appendchar(s, 1, '}');
  return sqlite3_str_finish(s);
}

void attn_training_lineage(const attn_training *t, attn_lineage_info *l, const char *options,
                           char *ended_at) {
  attn_utc_now(ended_at);
  memset(l, 0, sizeof *l);
  l->function = t->fn;
  l->query = t->query_text;
  l->rows = t->nquery;
  l->rows_sha256 = t->rows_sha256;
  l->validation_query = t->validation_query;
  l->validation_rows = t->validation_query ? t->nvalidation : -1;
  l->validation_sha256 = t->validation_query ? t->val_sha256 : NULL;
  l->options = options;
  l->from_name = t->from_name;
  l->from_version = t->from_name ? t->from_version : -1;
  l->backend = t->backend[0] ? t->backend : NULL;
  l->started_at = t->started_at[0] ? t->started_at : NULL;
  l->ended_at = ended_at;
}

/* ------------------------------------------------------------------ the save */

/* Row i of the query's rows as numbered in t->rows after the trainer was created (the kept
 * validation rows: t->kept_index is ascending and holds every one). */
static int attn_kept_number(const attn_training *t, int i) {
  int lo = 0, hi = t->nkept - 1;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (t->kept_index[mid] < i) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* Training is over: take the model and the validation rows, let the trainer go, then decide
 * whether the new version is deployed ("deploy") and store it with its log and lineage in one
 * transaction. With t->keep: keep the model in t->model (and the validation rows), save nothing
 * (attn_tune saves its trials at the end). */
static int attn_training_save(attn_training *t, char **msg) {
  char err[NN_ERR_LEN] = "";
  nn_model *model = NULL;
  attn_status_phase(t->status, "saving", t->cfg.epochs, 0, 0);
  /* an interrupt that came after the last batch is answered before the inference tables are
   * built and the model written (a second or more for a large model) */
  int st = attn_training_stop_asked(t) ? NN_INTERRUPTED : NN_OK;
  if (st == NN_INTERRUPTED) snprintf(err, sizeof err, "interrupted");
  if (st == NN_OK) st = nn_trainer_take_model(t->trainer, &model, err);
  if (st != NN_OK) {
    t->stopped = 1;
    return attn_nn_error(st, t->fn, err, msg);
  }
  t->metrics = nn_trainer_metrics_json(t->trainer);
  t->ntruncated = nn_trainer_truncated_rows(t->trainer);
  const int *rows = NULL;
  int nrows = 0;
  nn_trainer_validation_rows(t->trainer, &rows, &nrows);
  /* the validation rows copied, the trainer and its rows' state let go before the deploy
   * decision reads the validation texts again (the run's peak memory stays the training's) */
  t->val_rows = sqlite3_malloc64(sizeof *t->val_rows * (sqlite3_uint64)(nrows ? nrows : 1));
  if (t->val_rows && nrows) memcpy(t->val_rows, rows, sizeof *rows * (size_t)nrows);
  for (int k = 0; t->val_rows && !t->keep && k < nrows; k++) /* their numbers in t->rows now */
    t->val_rows[k] = attn_kept_number(t, t->val_rows[k]);
  t->nval = t->val_rows ? nrows : 0;
  nn_trainer_free(t->trainer);
  t->trainer = NULL;
  if (t->keep) {
    t->model = model;
    if (!t->val_rows) {
      t->stopped = 1;
      return SQLITE_NOMEM;
    }
    return SQLITE_OK;
  }
  if (!t->val_rows) {
    nn_model_free(model);
    t->stopped = 1;
    *msg = sqlite3_mprintf("%s: out of memory", t->fn);
    return SQLITE_NOMEM;
  }
  int deploy = 1;
  int rc = attn_training_decide(t, model, t->val_rows, t->nval, &deploy, msg);
  char *metrics = rc == SQLITE_OK ? attn_training_metrics(t, t->metrics, deploy) : NULL;
  if (rc == SQLITE_OK && !metrics) rc = SQLITE_NOMEM;
  if (rc == SQLITE_OK) {
    char ended_at[32];
    attn_lineage_info lineage;
    attn_training_lineage(t, &lineage, t->options_text, ended_at);
    attn_store_item item = {model, metrics, t->log, t->nlog, deploy, &lineage, t->live_version, 0};
    /* inside the caller's BEGIN ... COMMIT the save is a savepoint: the caller's ROLLBACK, or
     * a program that ends without COMMIT, loses it */
    t->committed = sqlite3_get_autocommit(attn_conn_db(t->conn));
    rc = attn_store_save_items(t->conn, t->fn, t->name, &item, 1, msg);
    t->version = item.version;
  }
  if (rc == SQLITE_OK) { /* attn_fit's summary: the stored metrics, the decision included */
    size_t len = strlen(metrics);
    char *copy = sqlite3_malloc64(len + 1);
    if (copy) {
      memcpy(copy, metrics, len + 1);
      sqlite3_free(t->metrics);
      t->metrics = copy;
    }
  }
  sqlite3_free(metrics);
  nn_model_free(model);
  if (rc == SQLITE_OK) {
    t->saved = 1;
    t->deployed = deploy;
  } else {
    t->stopped = 1;
    if (!*msg) *msg = sqlite3_mprintf("%s: out of memory", t->fn);
  }
  return rc;
}

/* The live log: in WAL mode, once a training has run for a second, the epochs that finished are
 * written to attn_training_log (at most once a second, each write a short transaction of its
 * own), so that other connections and processes can follow it; the first write reserves its
 * version. A write that cannot take the lock now is tried again later; one that fails otherwise
 * stops the live log (the save at the end writes every row anyway). */
static void attn_training_live(attn_training *t) {
  double now = nn_os_seconds();
  char *err = NULL;
  if (t->keep || t->live_written < 0 || now - t->live_last < 1.0 || t->nlog <= t->live_written)
    return;
  t->live_last = now;
  if (!attn_store_live_ok(t->conn)) return;
  int rc = t->live_version == 0 ? attn_store_live_begin(t->conn, t->fn, t->name, t->log, t->nlog,
                                                        &t->live_version, &t->live_prev_mark, &err)
                                : attn_store_live_log(t->conn, t->fn, t->name, t->live_version,
                                                      t->log, t->live_written, t->nlog, &err);
  sqlite3_free(err);
  if (rc == SQLITE_OK) t->live_written = t->nlog;
  else if (rc != SQLITE_BUSY)
    t->live_written = t->live_version ? t->live_written : -1; /* not again */
}

/* Run the next epoch (its statistics in *row); after the last, save the model. Returns
 * SQLITE_ROW when an epoch ran (saved is set when it was the last), SQLITE_DONE when there was
 * no epoch left (the model is saved), else an error with *msg. */
static int attn_training_epoch_step(attn_training *t, nn_epoch_stats *row, char **msg) {
  char err[NN_ERR_LEN] = "";
  nn_epoch_stats stats;
  memset(&stats, 0, sizeof stats);
  if (!t->trainer) return SQLITE_DONE;
  if (t->nlog == 0 && nn_trainer_choosing(t->trainer)) { /* word dropout, on the rows */
    attn_status_phase(t->status, "choosing", t->cfg.epochs, 0, 0);
    attn_progress_begin(&t->progress, t->cfg.progress && !t->quiet, 0, 0);
    int st = nn_trainer_choose(t->trainer, attn_training_progress, t, err);
    attn_progress_clear(&t->progress);
    if (st != NN_OK) {
      t->stopped = 1;
      return attn_nn_error(st, t->fn, err, msg);
    }
    t->cfg.word_dropout = nn_trainer_config(t->trainer)->word_dropout;
    attn_status_phase(t->status, "training", t->cfg.epochs, 0, 0);
  }
  if (t->nlog == 0) { /* the pretraining first, as a phase of its own */
    int passes = nn_trainer_config(t->trainer)->pretrain_epochs; /* sized to the rows */
    attn_status_phase(t->status, "pretraining", passes, 0, 0);
    attn_progress_begin(&t->progress, t->cfg.progress && !t->quiet, 0, passes);
    int st = nn_trainer_pretrain(t->trainer, attn_training_progress, t, err);
    attn_progress_clear(&t->progress);
    attn_status_phase(t->status, "training", t->cfg.epochs, 0, 0);
    if (st != NN_OK) {
      t->stopped = 1;
      return attn_nn_error(st, t->fn, err, msg);
    }
  }
  /* self-training's second round, also after a first round that stopped early: it scores first */
  if (!t->second_round && nn_trainer_self_training(t->trainer)) {
    t->second_round = 1;
    attn_status_phase(t->status, "self-training", t->cfg.epochs, 0, 0);
  }
  attn_progress_begin(&t->progress, t->cfg.progress && !t->quiet, t->nlog + 1, t->cfg.epochs);
  int st = nn_trainer_epoch(t->trainer, &stats, attn_training_progress, t, err);
  attn_progress_clear(&t->progress);
  const nn_config *now = nn_trainer_config(t->trainer);
  if (st == NN_OK && t->second_round &&
      (now->epochs != t->cfg.epochs || now->batch_size != t->cfg.batch_size)) {
    /* the second round's epochs follow the first round's, in batches sized to its rows */
    t->cfg.epochs = now->epochs;
    t->cfg.batch_size = now->batch_size;
    attn_status_phase(t->status, "self-training", t->cfg.epochs, 0, 0);
  }
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
    int best = 0;
    for (int i = 0; i < t->nlog; i++)
      if (t->log[i].best) best = t->log[i].epoch;
    /* The last epoch: store the model before its row is returned. */
    if (nn_trainer_done(t->trainer)) {
      attn_status_epoch(t->status, &stats, best, t->live_version);
      int rc = attn_training_save(t, msg);
      if (rc != SQLITE_OK) return rc;
    } else {
      attn_training_live(t);
      attn_status_epoch(t->status, &stats, best, t->live_version);
    }
    return SQLITE_ROW;
  }
  if (st != NN_DONE) {
    t->stopped = 1;
    return attn_nn_error(st, t->fn, err, msg);
  }
  int rc = attn_training_save(t, msg);
  return rc == SQLITE_OK ? SQLITE_DONE : rc;
}

/* attn_training_epoch_step, then out of attn_status once the run is over (saved or stopped). */
int attn_training_epoch(attn_training *t, nn_epoch_stats *row, char **msg) {
  int rc = attn_training_epoch_step(t, row, msg);
  if ((t->saved || t->stopped) && !t->keep) {
    attn_status_unregister(t->status);
    t->status = NULL;
  }
  return rc;
}

/* Run every epoch left and save. SQLITE_OK or an error with *msg. */
int attn_training_finish(attn_training *t, char **msg) {
  nn_epoch_stats row;
  int rc;
  while ((rc = attn_training_epoch(t, &row, msg)) == SQLITE_ROW) {
  }
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}
