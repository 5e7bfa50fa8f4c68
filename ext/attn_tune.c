/* attn_tune.c -- the table-valued function attn_tune: a grid search. Every combination of the
 * grid's option values is trained on the same rows (the same split and seed: the options'), each
 * trial is stored as a version of `name`, and the best by the options' "monitor" (default
 * val_loss) is the one deployed.
 *
 *   SELECT * FROM attn_tune('news', 'SELECT title, category FROM headlines',
 *                           '{"cell":["rnn","gru"],"hidden":[64,128]}', '{"epochs":10}');
 *   --  trial | config                    | best_epoch | val_loss | val_accuracy | val_f1 |
 *   --  1     | {"cell":"rnn","hidden":64} | 9          | 0.41     | ...                    ...
 *   --  seconds | chosen | version         chosen = 1 on the deployed trial
 *
 * Order of the trials: the cross product with the grid's first key varying slowest (as Python's
 * itertools.product). Each trial's options are the options argument patched with the trial's
 * values (json_patch); every trial's options are checked before the first one trains, so a bad
 * value fails at once. Training runs through the core's attn_training (ext/attn_training.c), the
 * code of attn_train and attn_fit; a trial keeps its trained model in memory (not its trainer:
 * one trainer at a time) and nothing is written until every trial has trained: an error or an
 * interrupt while training leaves the store as it was. Then every trial is saved, in trial order,
 * and the best deployed, all in one transaction (attn_store_save_items): an error, an interrupt, a
 * full disk or a kill -9 during the save leaves the store as it was; the trials not chosen are
 * never deployed (deployed_seq 0), so that attn_deploy(name, 'previous') afterwards goes back to
 * the version deployed before the tune.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn_ext.h"

/* Trials at most: the product of the grid's array lengths. */
#define ATTN_TUNE_MAX_TRIALS 256

/* One option of the grid: its key and its values as JSON texts. */
typedef struct attn_tune_key {
  char *key;
  char **values; /* (n) */
  int n;
} attn_tune_key;

/* One trial: its options, its results, its model until saved. */
typedef struct attn_tune_trial {
  char *config;      /* JSON object of the trial's grid values (sqlite3_malloc'd) */
  char *options;     /* the options argument patched with config */
  int best_epoch;
  double val_loss, val_accuracy, val_f1, seconds;
  int64_t version;
  nn_model *model;   /* NULL once saved */
  char *metrics;     /* malloc'd (nn_trainer_metrics_json) */
  nn_epoch_stats *log;
  int nlog;
} attn_tune_trial;

typedef struct attn_tune_cursor {
  sqlite3_vtab_cursor base;
  attn_tune_trial *trials;
  int ntrials, chosen, row;
} attn_tune_cursor;

/* Columns; the arguments are the hidden columns at the end. */
enum {
  ATTN_TUNE_COL_TRIAL,
  ATTN_TUNE_COL_CONFIG,
  ATTN_TUNE_COL_BEST_EPOCH,
  ATTN_TUNE_COL_VAL_LOSS,
  ATTN_TUNE_COL_VAL_ACCURACY,
  ATTN_TUNE_COL_VAL_F1,
  ATTN_TUNE_COL_SECONDS,
  ATTN_TUNE_COL_CHOSEN,
  ATTN_TUNE_COL_VERSION,
  ATTN_TUNE_COL_ARG_NAME,
  ATTN_TUNE_COL_ARG_QUERY,
  ATTN_TUNE_COL_ARG_GRID,
  ATTN_TUNE_COL_ARG_OPTIONS
};
static const char attn_tune_schema[] =
    "CREATE TABLE x(trial INTEGER, config TEXT, best_epoch INTEGER, val_loss REAL, "
    "val_accuracy REAL, val_f1 REAL, seconds REAL, chosen INTEGER, version INTEGER, "
    "arg_name HIDDEN, arg_query HIDDEN, arg_grid HIDDEN, arg_options HIDDEN)";

/* Direct-only: it writes the store and runs a query given as text. */
static int attn_tune_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                             sqlite3_vtab **out, char **errmsg) {
  return attn_vtab_connect(db, attn_tune_schema, SQLITE_VTAB_DIRECTONLY, aux, 0,
                           sizeof(attn_tune_cursor), out);
}

static int attn_tune_best_index(sqlite3_vtab *vtab, sqlite3_index_info *info) {
  return attn_vtab_best_index(
      vtab, info, ATTN_TUNE_COL_ARG_NAME, 4, 3,
      "attn_tune: expected 3 or 4 arguments: attn_tune(name, query, grid[, options])");
}

static void attn_tune_trials_free(attn_tune_trial *trials, int n) {
  for (int i = 0; trials && i < n; i++) {
    sqlite3_free(trials[i].config);
    sqlite3_free(trials[i].options);
    nn_model_free(trials[i].model);
    free(trials[i].metrics);
    sqlite3_free(trials[i].log);
  }
  sqlite3_free(trials);
}

static void attn_tune_reset(attn_tune_cursor *cur) {
  attn_tune_trials_free(cur->trials, cur->ntrials);
  cur->trials = NULL;
  cur->ntrials = cur->row = 0;
  cur->chosen = -1;
}

static int attn_tune_close(sqlite3_vtab_cursor *base) {
  attn_tune_reset((attn_tune_cursor *)base);
  sqlite3_free(base);
  return SQLITE_OK;
}

static void attn_tune_keys_free(attn_tune_key *keys, int n) {
  for (int k = 0; keys && k < n; k++) {
    sqlite3_free(keys[k].key);
    for (int i = 0; keys[k].values && i < keys[k].n; i++) sqlite3_free(keys[k].values[i]);
    sqlite3_free(keys[k].values);
  }
  sqlite3_free(keys);
}

/* Read the grid (a JSON object of non-empty arrays) into *keys / *nkeys and the number of trials.
 * Errors name the function and the key. */
static int attn_tune_grid(sqlite3 *db, const char *fn, const char *grid, attn_tune_key **keys,
                          int *nkeys, int *ntrials, char **msg) {
  sqlite3_stmt *stmt = NULL;
  attn_tune_key *k = NULL;
  int n = 0, cap = 0, rc = SQLITE_OK;
  int64_t trials = 1;
  *keys = NULL;
  *nkeys = *ntrials = 0;
  if (!grid || sqlite3_prepare_v2(db, "SELECT json_valid(?1) AND json_type(?1) = 'object'", -1,
                                  &stmt, NULL) != SQLITE_OK) {
    rc = grid ? SQLITE_ERROR : SQLITE_OK;
  } else {
    sqlite3_bind_text(stmt, 1, grid, -1, SQLITE_STATIC);
    rc = sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_int(stmt, 0) ? SQLITE_OK : SQLITE_ERROR;
  }
  sqlite3_finalize(stmt);
  stmt = NULL;
  if (!grid || rc != SQLITE_OK) {
    *msg = sqlite3_mprintf("%s: the grid must be a JSON object of option -> array of values, "
                           "e.g. '{\"hidden\":[64,128]}', got %s",
                           fn, grid ? grid : "NULL");
    return SQLITE_ERROR;
  }
  /* one row per (key, element); an element's JSON text rebuilt from json_each's value */
  rc = sqlite3_prepare_v2(
      db,
      "SELECT g.key, g.type, e.id IS NOT NULL, CASE e.type WHEN 'text' THEN json_quote(e.value) "
      "WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' WHEN 'null' THEN 'null' "
      "ELSE e.value END, g.value "
      "FROM json_each(?1) AS g LEFT JOIN json_each(CASE WHEN g.type = 'array' THEN g.value END) "
      "AS e ORDER BY g.id, e.id",
      -1, &stmt, NULL);
  if (rc != SQLITE_OK) {
    *msg = sqlite3_mprintf("%s: cannot read the grid: %s", fn, sqlite3_errmsg(db));
    return SQLITE_ERROR;
  }
  sqlite3_bind_text(stmt, 1, grid, -1, SQLITE_STATIC);
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    const char *key = (const char *)sqlite3_column_text(stmt, 0);
    const char *type = (const char *)sqlite3_column_text(stmt, 1);
    if (!key || !type) {
      rc = SQLITE_NOMEM;
      break;
    }
    if (strcmp(type, "array") != 0) {
      const char *v = (const char *)sqlite3_column_text(stmt, 4);
      *msg = sqlite3_mprintf("%s: grid key \"%s\" must be an array of option values, got %s", fn,
                             key, v ? v : type);
      rc = SQLITE_ERROR;
      break;
    }
    if (!sqlite3_column_int(stmt, 2)) {
      *msg = sqlite3_mprintf("%s: grid key \"%s\" is an empty array: give at least one value", fn,
                             key);
      rc = SQLITE_ERROR;
      break;
    }
    if (n == 0 || strcmp(k[n - 1].key, key) != 0) { /* a new key */
      if (n == cap) {
        int c = cap ? 2 * cap : 8;
        attn_tune_key *p = sqlite3_realloc64(k, sizeof *p * (sqlite3_uint64)c);
        if (!p) {
          rc = SQLITE_NOMEM;
          break;
        }
        memset(p + cap, 0, sizeof *p * (size_t)(c - cap));
        k = p;
        cap = c;
      }
      k[n].key = sqlite3_mprintf("%s", key);
      if (!k[n++].key) {
        rc = SQLITE_NOMEM;
        break;
      }
    }
    attn_tune_key *cur = &k[n - 1];
    if (cur->n >= ATTN_TUNE_MAX_TRIALS) {
      trials = (int64_t)ATTN_TUNE_MAX_TRIALS + 1;
      continue; /* counted as too many below */
    }
    char **values = sqlite3_realloc64(cur->values, sizeof *values * (sqlite3_uint64)(cur->n + 1));
    if (!values) {
      rc = SQLITE_NOMEM;
      break;
    }
    cur->values = values;
    cur->values[cur->n] = sqlite3_mprintf("%s", (const char *)sqlite3_column_text(stmt, 3));
    if (!cur->values[cur->n++]) {
      rc = SQLITE_NOMEM;
      break;
    }
  }
  sqlite3_finalize(stmt);
  if (rc == SQLITE_DONE) rc = SQLITE_OK;
  if (rc == SQLITE_OK && n == 0) {
    *msg = sqlite3_mprintf("%s: the grid is empty: give at least one option with an array of "
                           "values, e.g. '{\"hidden\":[64,128]}'", fn);
    rc = SQLITE_ERROR;
  }
  for (int i = 0; rc == SQLITE_OK && i < n && trials <= ATTN_TUNE_MAX_TRIALS; i++)
    trials *= k[i].n;
  if (rc == SQLITE_OK && trials > ATTN_TUNE_MAX_TRIALS) {
    *msg = sqlite3_mprintf("%s: the grid has more than %d trials (the product of the lengths of "
                           "its arrays)", fn, ATTN_TUNE_MAX_TRIALS);
    rc = SQLITE_ERROR;
  }
  if (rc != SQLITE_OK) {
    attn_tune_keys_free(k, n);
    if (rc != SQLITE_ERROR && !*msg) *msg = sqlite3_mprintf("%s: out of memory", fn);
    return rc;
  }
  *keys = k;
  *nkeys = n;
  *ntrials = (int)trials;
  return SQLITE_OK;
}

/* Trial t's config (JSON object of its grid values) and options (options patched with it). */
static int attn_tune_trial_options(sqlite3 *db, const char *fn, const attn_tune_key *keys,
                                   int nkeys, int t, const char *options, attn_tune_trial *trial,
                                   char **msg) {
  sqlite3_str *s = sqlite3_str_new(db);
  sqlite3_str_appendchar(s, 1, '{');
  /* index of key k: t / (product of the lengths after k) % length of k */
  for (int k = 0; k < nkeys; k++) {
    int after = 1;
    for (int j = k + 1; j < nkeys; j++) after *= keys[j].n;
    int i = t / after % keys[k].n;
    if (k) sqlite3_str_appendchar(s, 1, ',');
    attn_json_string(s, keys[k].key, (int)strlen(keys[k].key));
    sqlite3_str_appendf(s, ":%s", keys[k].values[i]);
  }
  sqlite3_str_appendchar(s, 1, '}');
  trial->config = sqlite3_str_finish(s);
  if (!trial->config) return SQLITE_NOMEM;
  sqlite3_stmt *stmt = NULL;
  int rc = sqlite3_prepare_v2(db, "SELECT json_patch(coalesce(?1, '{}'), ?2)", -1, &stmt, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(stmt, 1, options, -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 2, trial->config, -1, SQLITE_STATIC);
    rc = sqlite3_step(stmt);
  }
  if (rc == SQLITE_ROW && sqlite3_column_type(stmt, 0) != SQLITE_NULL) {
    trial->options = sqlite3_mprintf("%s", (const char *)sqlite3_column_text(stmt, 0));
    rc = trial->options ? SQLITE_OK : SQLITE_NOMEM;
  } else {
    *msg = sqlite3_mprintf("%s: the options must be a JSON object as text, e.g. "
                           "'{\"epochs\":10}' (%s)",
                           fn, sqlite3_errmsg(db));
    rc = SQLITE_ERROR;
  }
  sqlite3_finalize(stmt);
  return rc;
}

static double attn_tune_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Whether figure a is better than b under monitor (NaN is never better). */
static int attn_tune_better(int monitor, const attn_tune_trial *a, const attn_tune_trial *b) {
  switch (monitor) {
  case NN_MONITOR_VAL_F1: return a->val_f1 > b->val_f1 || (isnan(b->val_f1) && !isnan(a->val_f1));
  case NN_MONITOR_VAL_ACCURACY:
    return a->val_accuracy > b->val_accuracy ||
           (isnan(b->val_accuracy) && !isnan(a->val_accuracy));
  default: return a->val_loss < b->val_loss || (isnan(b->val_loss) && !isnan(a->val_loss));
  }
}

/* The kept epoch's figures of a finished run (the log row of the best epoch). */
static void attn_tune_figures(attn_tune_trial *trial, const attn_training *t) {
  sqlite3_stmt *stmt = NULL;
  trial->best_epoch = 0;
  trial->val_loss = trial->val_accuracy = trial->val_f1 = NAN;
  if (t->metrics &&
      sqlite3_prepare_v2(attn_conn_db(t->conn),
                         "SELECT json_extract(?1, '$.best_epoch'), json_extract(?1, '$.val_loss'), "
                         "json_extract(?1, '$.val_accuracy'), json_extract(?1, '$.val_f1')",
                         -1, &stmt, NULL) == SQLITE_OK) {
    sqlite3_bind_text(stmt, 1, t->metrics, -1, SQLITE_STATIC);
    if (sqlite3_step(stmt) == SQLITE_ROW) {
      trial->best_epoch = sqlite3_column_int(stmt, 0);
      if (sqlite3_column_type(stmt, 1) != SQLITE_NULL) trial->val_loss = sqlite3_column_double(stmt, 1);
      if (sqlite3_column_type(stmt, 2) != SQLITE_NULL)
        trial->val_accuracy = sqlite3_column_double(stmt, 2);
      if (sqlite3_column_type(stmt, 3) != SQLITE_NULL) trial->val_f1 = sqlite3_column_double(stmt, 3);
    }
  }
  sqlite3_finalize(stmt);
}

static int attn_tune_filter(sqlite3_vtab_cursor *base, int idx_num, const char *idx_str,
                            int argc, sqlite3_value **argv) {
  attn_tune_cursor *cur = (attn_tune_cursor *)base;
  attn_vtab *vtab = (attn_vtab *)base->pVtab;
  sqlite3 *db = attn_conn_db(vtab->conn);
  const char *fn = "attn_tune";
  char *msg = NULL;
  attn_training t;
  attn_tune_key *keys = NULL;
  attn_store_item *items = NULL;
  int nkeys = 0, ntrials = 0, rc;
  memset(&t, 0, sizeof t);
  attn_tune_reset(cur);
  sqlite3_value *name_arg = argc > 0 ? argv[0] : NULL, *query_arg = argc > 1 ? argv[1] : NULL;
  sqlite3_value *grid_arg = argc > 2 ? argv[2] : NULL;
  sqlite3_value *options_arg =
      attn_arg_given(idx_num, ATTN_TUNE_COL_ARG_OPTIONS - ATTN_TUNE_COL_ARG_NAME) && argc > 3
          ? argv[3] : NULL;
  const char *options = NULL;
  if (options_arg && sqlite3_value_type(options_arg) != SQLITE_NULL) {
    if (sqlite3_value_type(options_arg) != SQLITE_TEXT) {
      msg = sqlite3_mprintf("%s: the options must be a JSON object as text, e.g. "
                            "'{\"epochs\":10}'", fn);
      rc = SQLITE_ERROR;
      goto done;
    }
    options = (const char *)sqlite3_value_text(options_arg);
  }
  rc = attn_training_begin(&t, vtab->conn, fn, name_arg, query_arg, &msg);
  if (rc != SQLITE_OK) goto done;
  rc = attn_tune_grid(db, fn,
                      grid_arg && sqlite3_value_type(grid_arg) == SQLITE_TEXT
                          ? (const char *)sqlite3_value_text(grid_arg) : NULL,
                      &keys, &nkeys, &ntrials, &msg);
  if (rc != SQLITE_OK) goto done;
  /* the monitor that picks the best trial: the options' */
  rc = attn_training_options(&t, options, &msg);
  if (rc != SQLITE_OK) goto done;
  int monitor = t.cfg.monitor;
  cur->trials = sqlite3_malloc64(sizeof *cur->trials * (sqlite3_uint64)ntrials);
  if (!cur->trials) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  memset(cur->trials, 0, sizeof *cur->trials * (size_t)ntrials);
  cur->ntrials = ntrials;
  /* every trial's options checked before the first trains */
  for (int i = 0; i < ntrials; i++) {
    rc = attn_tune_trial_options(db, fn, keys, nkeys, i, options, &cur->trials[i], &msg);
    if (rc == SQLITE_OK) rc = attn_training_options(&t, cur->trials[i].options, &msg);
    if (rc != SQLITE_OK) goto done;
  }
  t.keep = 1;
  for (int i = 0; i < ntrials; i++) {
    attn_tune_trial *trial = &cur->trials[i];
    double start = attn_tune_now();
    attn_training_reset(&t);
    rc = attn_training_options(&t, trial->options, &msg);
    if (rc == SQLITE_OK) rc = attn_training_create(&t, &msg);
    if (rc == SQLITE_OK) rc = attn_training_finish(&t, &msg);
    if (rc != SQLITE_OK) goto done;
    trial->seconds = attn_tune_now() - start;
    attn_tune_figures(trial, &t);
    trial->model = t.model;
    t.model = NULL;
    trial->metrics = t.metrics;
    t.metrics = NULL;
    trial->log = t.log;
    trial->nlog = t.nlog;
    t.log = NULL;
    t.nlog = t.cap_log = 0;
    if (cur->chosen < 0 || attn_tune_better(monitor, trial, &cur->trials[cur->chosen]))
      cur->chosen = i;
  }
  attn_interrupt interrupt = {db, NULL, 0};
  int interrupted = attn_interrupted(&interrupt, 1); /* the last chance before writing */
  attn_interrupt_end(&interrupt);
  if (interrupted) {
    msg = sqlite3_mprintf("%s: interrupted", fn);
    rc = SQLITE_INTERRUPT;
    goto done;
  }
  /* Save: every trial in trial order and the deployment of the chosen one in one transaction
   * (all or nothing); the trials not chosen are never deployed. */
  items = sqlite3_malloc64(sizeof *items * (sqlite3_uint64)ntrials);
  if (!items) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  for (int i = 0; i < ntrials; i++) {
    attn_tune_trial *trial = &cur->trials[i];
    attn_store_item item = {trial->model, trial->metrics, trial->log, trial->nlog,
                            i == cur->chosen, 0};
    items[i] = item;
  }
  rc = attn_store_save_items(vtab->conn, fn, t.name, items, ntrials, &msg);
  if (rc != SQLITE_OK) goto done;
  for (int i = 0; i < ntrials; i++) {
    cur->trials[i].version = items[i].version;
    nn_model_free(cur->trials[i].model);
    cur->trials[i].model = NULL;
  }
  rc = SQLITE_OK;
done:
  attn_tune_keys_free(keys, nkeys);
  sqlite3_free(items);
  attn_training_free(&t);
  if (rc != SQLITE_OK) {
    attn_tune_reset(cur);
    return attn_vtab_fail(base->pVtab, rc, msg, fn);
  }
  return SQLITE_OK;
}

static int attn_tune_next(sqlite3_vtab_cursor *base) {
  ((attn_tune_cursor *)base)->row++;
  return SQLITE_OK;
}

static int attn_tune_eof(sqlite3_vtab_cursor *base) {
  attn_tune_cursor *cur = (attn_tune_cursor *)base;
  return cur->row >= cur->ntrials;
}

static void attn_tune_result_double(sqlite3_context *ctx, double v) {
  if (isfinite(v))
    sqlite3_result_double(ctx, v);
  else
    sqlite3_result_null(ctx);
}

static int attn_tune_column(sqlite3_vtab_cursor *base, sqlite3_context *ctx, int col) {
  attn_tune_cursor *cur = (attn_tune_cursor *)base;
  const attn_tune_trial *trial = &cur->trials[cur->row];
  switch (col) {
  case ATTN_TUNE_COL_TRIAL: sqlite3_result_int(ctx, cur->row + 1); break;
  case ATTN_TUNE_COL_CONFIG: sqlite3_result_text(ctx, trial->config, -1, SQLITE_TRANSIENT); break;
  case ATTN_TUNE_COL_BEST_EPOCH: sqlite3_result_int(ctx, trial->best_epoch); break;
  case ATTN_TUNE_COL_VAL_LOSS: attn_tune_result_double(ctx, trial->val_loss); break;
  case ATTN_TUNE_COL_VAL_ACCURACY: attn_tune_result_double(ctx, trial->val_accuracy); break;
  case ATTN_TUNE_COL_VAL_F1: attn_tune_result_double(ctx, trial->val_f1); break;
  case ATTN_TUNE_COL_SECONDS: sqlite3_result_double(ctx, trial->seconds); break;
  case ATTN_TUNE_COL_CHOSEN: sqlite3_result_int(ctx, cur->row == cur->chosen); break;
  case ATTN_TUNE_COL_VERSION: sqlite3_result_int64(ctx, trial->version); break;
  default: break;
  }
  return SQLITE_OK;
}

static int attn_tune_rowid(sqlite3_vtab_cursor *base, sqlite_int64 *rowid) {
  *rowid = ((attn_tune_cursor *)base)->row + 1;
  return SQLITE_OK;
}

const sqlite3_module attn_tune_module = {
    .iVersion = 0,
    .xCreate = NULL, /* eponymous only */
    .xConnect = attn_tune_connect,
    .xBestIndex = attn_tune_best_index,
    .xDisconnect = attn_vtab_disconnect,
    .xOpen = attn_vtab_open,
    .xClose = attn_tune_close,
    .xFilter = attn_tune_filter,
    .xNext = attn_tune_next,
    .xEof = attn_tune_eof,
    .xColumn = attn_tune_column,
    .xRowid = attn_tune_rowid,
};
