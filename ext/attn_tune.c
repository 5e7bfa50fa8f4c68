/* attn_tune.c -- the table-valued function attn_tune: a grid search. Every combination of the
 * grid's option values is trained on the same rows (the same split and seed: the options'), each
 * trial is stored as a version of `name`, and the best by the options' "monitor" (the default
 * recipe's val_f1, highest first; the lesson recipe's val_loss; nn_monitor_better, the rule of the
 * best epoch) is the one deployed.
 *
 *   SELECT * FROM attn_tune('news', 'SELECT title, category FROM headlines',
 *                           '{"cell":["rnn","gru"],"hidden":[64,128]}', '{"epochs":10}');
 *   --  trial | config                    | best_epoch | val_loss | val_accuracy | val_f1 |
 *   --  1     | {"cell":"rnn","hidden":64} | 9          | 0.41     | ...                    ...
 *   --  seconds | chosen | version         chosen = 1 on the deployed trial
 *
 * Order of the trials: the cross product with the grid's first key varying slowest (as Python's
 * itertools.product). Each trial's options are the options argument patched with the trial's
 * values (an RFC 7396 merge patch, as SQLite's json_patch); every trial's options are checked before the first one trains, so a bad
 * value fails at once. Training runs through the core's attn_training (ext/attn_training.c), the
 * code of attn_train and attn_fit; a trial keeps its trained model in memory (not its trainer:
 * one trainer at a time) and nothing is written until every trial has trained: an error or an
 * interrupt while training leaves the store as it was. Then every trial is saved, in trial order,
 * and the best deployed, all in one transaction (attn_store_save_items): an error, an interrupt, a
 * full disk or a kill -9 during the save leaves the store as it was; the trials not chosen are
 * never deployed (deployed_seq 0), so that attn_deploy(name, 'previous') afterwards goes back to
 * the version deployed before the tune.
 *
 * In a dqlite node (build/attnext-node) the search is a job (ext/node/attn_job_runner.c, through
 * the node's hooks: attn_conn_jobs): the statement checks the grid and every trial's options,
 * submits the job and returns its one row (job, function, name, state, node, submitted_at); the
 * trials train in the job's thread.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn_ext.h"
#include "compat.h" /* nn_os_seconds */
#include "json.h"

/* Trials at most (a grid search: the product of the grid's array lengths). */
#define ATTN_TUNE_MAX_TRIALS 256
/* Values of one grid key at most, in a random search. */
#define ATTN_TUNE_MAX_VALUES 65536

/* One option of the grid: its key and its values as JSON texts. */
typedef struct attn_tune_key {
  char *key;
  char **values; /* (n) */
  int n;
} attn_tune_key;

/* One trial: its options, its results, its model until saved. */
typedef struct attn_tune_trial {
  char *config;  /* JSON object of the trial's grid values (sqlite3_malloc'd) */
  char *options; /* the options argument patched with config */
  int best_epoch;
  double val_loss, val_accuracy, val_f1, seconds;
  int64_t version;
  int deployed;
  nn_model *model; /* NULL once saved */
  char *metrics;   /* sqlite3_malloc'd (nn_trainer_metrics_json, attn_mem) */
  nn_epoch_stats *log;
  int nlog;
  int *val_rows, nval; /* its validation rows (the deploy decision's) */
  char *from_name;     /* lineage: option "from", the backend, when it ran */
  int64_t from_version;
  char backend[192], started_at[32], ended_at[32];
} attn_tune_trial;

typedef struct attn_tune_cursor {
  sqlite3_vtab_cursor base;
  attn_tune_trial *trials;
  int ntrials, chosen, row;
  attn_job_receipt job; /* in a node: the job submitted (its one row) */
} attn_tune_cursor;

/* The message of an interrupt that came once the trials were saved: they stay saved. */
static char *attn_tune_saved_interrupt(const attn_tune_cursor *cur) {
  int64_t lo = INT64_MAX, hi = 0;
  int stored = 0;
  for (int i = 0; i < cur->ntrials; i++) {
    if (cur->trials[i].version > 0 && cur->trials[i].version < lo) lo = cur->trials[i].version;
    if (cur->trials[i].version > hi) hi = cur->trials[i].version;
    stored += cur->trials[i].version > 0;
  }
  if (hi == 0) return sqlite3_mprintf("attn_tune: interrupted");
  if (stored == 1) /* "keep_trials": false */
    return sqlite3_mprintf("attn_tune: interrupted after its chosen trial was saved (version "
                           "%lld)",
                           (long long)hi);
  return sqlite3_mprintf("attn_tune: interrupted after its %d trials were saved (versions %lld "
                         "to %lld)",
                         stored, (long long)lo, (long long)hi);
}

/* The options of the search itself (taken out of the options argument): "search" ("grid" or
 * "random"), "trials" (a random search's count), "seconds" (no trial starts after this long),
 * "parallel" (trials two at a time where cores allow), "keep_trials" (false: only the chosen
 * trial is stored). */
typedef struct attn_tune_settings {
  int random, trials, parallel, keep_trials;
  double seconds; /* 0: no limit */
} attn_tune_settings;

/* Whether `key` is an option of the whole search, which a grid may not vary. */
static int attn_tune_search_key(const char *key) {
  /* "unlabelled" too: the trials share the rows, read once as the search's options say */
  static const char *const keys[] = {"deploy",  "validation_query", "search",      "trials",
                                     "seconds", "parallel",         "keep_trials", "unlabelled"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    if (strcmp(key, keys[i]) == 0) return 1;
  return 0;
}

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
  ATTN_TUNE_COL_DEPLOYED,
  ATTN_TUNE_COL_ARG_NAME,
  ATTN_TUNE_COL_ARG_QUERY,
  ATTN_TUNE_COL_ARG_GRID,
  ATTN_TUNE_COL_ARG_OPTIONS
};
static const char attn_tune_schema[] =
    "CREATE TABLE x(trial INTEGER, config TEXT, best_epoch INTEGER, val_loss REAL, "
    "val_accuracy REAL, val_f1 REAL, seconds REAL, chosen INTEGER, version INTEGER, "
    "deployed INTEGER, arg_name HIDDEN, arg_query HIDDEN, arg_grid HIDDEN, arg_options HIDDEN)";

/* In a node: the job's row, then the same arguments. */
static const char attn_tune_job_schema[] =
    "CREATE TABLE x(" ATTN_JOB_RECEIPT_COLUMNS ", arg_name HIDDEN, arg_query HIDDEN, "
    "arg_grid HIDDEN, arg_options HIDDEN)";

/* Direct-only: it writes the store and runs a query given as text. Mode 1: a node's job. */
static int attn_tune_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                             sqlite3_vtab **out, char **errmsg) {
  int job = attn_conn_jobs(aux) != NULL;
  return attn_vtab_connect(db, job ? attn_tune_job_schema : attn_tune_schema,
                           SQLITE_VTAB_DIRECTONLY, aux, job, sizeof(attn_tune_cursor), out);
}

static int attn_tune_best_index(sqlite3_vtab *vtab, sqlite3_index_info *info) {
  int job = ((attn_vtab *)vtab)->mode;
  return attn_vtab_best_index(
      vtab, info, job ? ATTN_JOB_RECEIPT_NCOLS : ATTN_TUNE_COL_ARG_NAME, 4, 3,
      "attn_tune: expected 3 or 4 arguments: attn_tune(name, query, grid[, options])");
}

static void attn_tune_trials_free(attn_tune_trial *trials, int n) {
  for (int i = 0; trials && i < n; i++) {
    sqlite3_free(trials[i].config);
    sqlite3_free(trials[i].options);
    nn_model_free(trials[i].model);
    sqlite3_free(trials[i].metrics); /* nn_trainer_metrics_json's: attn_mem */
    sqlite3_free(trials[i].log);
    sqlite3_free(trials[i].val_rows);
    sqlite3_free(trials[i].from_name);
  }
  sqlite3_free(trials);
}

static void attn_tune_reset(attn_tune_cursor *cur) {
  sqlite3_free(cur->job.name);
  memset(&cur->job, 0, sizeof cur->job);
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

/* A grid value as the trial's config shows it: strings quoted, integers and literals as written,
 * other numbers as SQLite writes a REAL (0.001, 5.0, 1.0e-05), arrays and objects compact.
 * sqlite3_malloc'd; NULL when out of memory. */
static char *attn_tune_value(const nn_json *v, const char *text) {
  if (v->type == NN_JSON_NUMBER)
    return v->is_integer ? sqlite3_mprintf("%lld", (long long)v->integer)
                         : sqlite3_mprintf("%!.15g", v->number);
  nn_strbuf sb;
  nn_strbuf_init(&sb, &attn_mem);
  if (v->type == NN_JSON_STRING) nn_strbuf_append_json_string(&sb, v->str, v->str_len);
  else nn_strbuf_append_json_compact(&sb, v, text);
  char *out = sb.oom ? NULL : sqlite3_mprintf("%s", sb.data ? sb.data : "");
  nn_strbuf_free(&sb);
  return out;
}

typedef struct attn_tune_seen {
  const char *value;
  int i;
} attn_tune_seen;

static int attn_tune_seen_cmp(const void *a, const void *b) {
  const attn_tune_seen *x = a, *y = b;
  int c = strcmp(x->value, y->value);
  return c ? c : (x->i > y->i) - (x->i < y->i);
}

/* Drop the repeats among a key's values, keeping the first of each in its place: a value given
 * twice makes the same configuration twice, which a search would train twice (a random search
 * drew distinct combinations, not distinct configurations). Sorted, so 65,536 values cost
 * n log n. SQLITE_OK or SQLITE_NOMEM. */
static int attn_tune_unique(attn_tune_key *k) {
  if (k->n < 2) return SQLITE_OK;
  attn_tune_seen *seen = sqlite3_malloc64(sizeof *seen * (sqlite3_uint64)k->n);
  if (!seen) return SQLITE_NOMEM;
  for (int i = 0; i < k->n; i++) seen[i] = (attn_tune_seen){k->values[i], i};
  qsort(seen, (size_t)k->n, sizeof *seen, attn_tune_seen_cmp);
  /* from the last: each freed value is compared before it is freed */
  for (int i = k->n - 1; i > 0; i--)
    if (strcmp(seen[i].value, seen[i - 1].value) == 0) {
      sqlite3_free(k->values[seen[i].i]);
      k->values[seen[i].i] = NULL; /* a repeat of an earlier one */
    }
  sqlite3_free(seen);
  int n = 0;
  for (int i = 0; i < k->n; i++)
    if (k->values[i]) k->values[n++] = k->values[i];
  k->n = n;
  return SQLITE_OK;
}

/* Read the grid (a JSON object of non-empty arrays) into *keys / *nkeys and the number of its
 * combinations (*combinations; at most ATTN_TUNE_MAX_TRIALS for a grid search, at most 2^62 for
 * a random search, whose arrays may hold up to ATTN_TUNE_MAX_VALUES values each). Errors name
 * the function and the key. */
static int attn_tune_grid(const char *fn, const char *grid, int random, attn_tune_key **keys,
                          int *nkeys, int64_t *combinations, char **msg) {
  nn_json *doc = NULL;
  attn_tune_key *k = NULL;
  char err[NN_ERR_LEN] = "", *got = NULL;
  int n = 0, rc = SQLITE_OK;
  int64_t trials = 1, limit = random ? ((int64_t)1 << 62) : ATTN_TUNE_MAX_TRIALS;
  int per_key = random ? ATTN_TUNE_MAX_VALUES : ATTN_TUNE_MAX_TRIALS;
  *keys = NULL;
  *nkeys = 0;
  *combinations = 0;
  int st = grid ? nn_json_parse(&doc, grid, strlen(grid), &attn_mem, err) : NN_ERROR;
  if (st == NN_NOMEM) return SQLITE_NOMEM;
  if (st != NN_OK || doc->type != NN_JSON_OBJECT) {
    nn_json_free(doc);
    *msg = sqlite3_mprintf("%s: the grid must be a JSON object of option -> array of values, "
                           "e.g. '{\"hidden\":[64,128]}', got %s",
                           fn, grid ? grid : "NULL");
    return SQLITE_ERROR;
  }
  k = sqlite3_malloc64(sizeof *k * (sqlite3_uint64)(doc->count ? doc->count : 1));
  if (!k) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  memset(k, 0, sizeof *k * (doc->count ? doc->count : 1));
  for (size_t m = 0; m < doc->count; m++) {
    const nn_json *g = &doc->items[m];
    if (g->type != NN_JSON_ARRAY) {
      if (!(got = attn_option_value(grid, g))) {
        rc = SQLITE_NOMEM;
        goto done;
      }
      *msg = sqlite3_mprintf("%s: grid key \"%s\" must be an array of option values, got %s", fn,
                             g->key, got);
      rc = SQLITE_ERROR;
      goto done;
    }
    if (g->count == 0) {
      *msg = sqlite3_mprintf("%s: grid key \"%s\" is an empty array: give at least one value", fn,
                             g->key);
      rc = SQLITE_ERROR;
      goto done;
    }
    attn_tune_key *cur = &k[n];
    cur->key = sqlite3_mprintf("%s", g->key);
    if (!k[n++].key) {
      rc = SQLITE_NOMEM;
      goto done;
    }
    if (g->count > (size_t)per_key) {
      if (random) {
        *msg = sqlite3_mprintf("%s: grid key \"%s\" has more than %d values", fn, g->key, per_key);
        rc = SQLITE_ERROR;
        goto done;
      }
      trials = (int64_t)ATTN_TUNE_MAX_TRIALS + 1; /* counted as too many below */
    }
    int count = g->count > (size_t)per_key ? per_key : (int)g->count;
    cur->values = sqlite3_malloc64(sizeof *cur->values * (sqlite3_uint64)count);
    if (!cur->values) {
      rc = SQLITE_NOMEM;
      goto done;
    }
    for (int i = 0; i < count; i++) {
      cur->values[i] = attn_tune_value(&g->items[i], grid);
      if (!cur->values[cur->n++]) {
        rc = SQLITE_NOMEM;
        goto done;
      }
    }
    if ((rc = attn_tune_unique(cur)) != SQLITE_OK) goto done;
  }
  if (n == 0) {
    *msg = sqlite3_mprintf("%s: the grid is empty: give at least one option with an array of "
                           "values, e.g. '{\"hidden\":[64,128]}'",
                           fn);
    rc = SQLITE_ERROR;
  }
  for (int i = 0; rc == SQLITE_OK && i < n && trials <= limit; i++)
    trials = trials > limit / k[i].n ? limit + 1 : trials * k[i].n;
  if (rc == SQLITE_OK && trials > limit) {
    *msg = random ? sqlite3_mprintf("%s: the grid has more than 2^62 combinations", fn)
                  : sqlite3_mprintf("%s: the grid has more than %d trials (the product of the "
                                    "lengths of its arrays; \"search\": \"random\" tries a "
                                    "sample of a larger one)",
                                    fn, ATTN_TUNE_MAX_TRIALS);
    rc = SQLITE_ERROR;
  }
done:
  nn_json_free(doc);
  sqlite3_free(got);
  if (rc != SQLITE_OK) {
    attn_tune_keys_free(k, n);
    if (rc != SQLITE_ERROR && !*msg) *msg = sqlite3_mprintf("%s: out of memory", fn);
    return rc;
  }
  *keys = k;
  *nkeys = n;
  *combinations = trials;
  return SQLITE_OK;
}

/* A value of an RFC 7396 merge patch with its null members left out, in objects at any depth. */
static void attn_tune_no_nulls(nn_strbuf *sb, const nn_json *v, const char *text) {
  if (v->type != NN_JSON_OBJECT) {
    nn_strbuf_append_json_compact(sb, v, text);
    return;
  }
  int n = 0;
  nn_strbuf_puts(sb, "{");
  for (size_t i = 0; i < v->count; i++) {
    const nn_json *m = &v->items[i];
    if (m->type == NN_JSON_NULL) continue;
    if (n++) nn_strbuf_puts(sb, ",");
    nn_strbuf_append(sb, text + m->key_start, m->key_end - m->key_start);
    nn_strbuf_puts(sb, ":");
    attn_tune_no_nulls(sb, m, text);
  }
  nn_strbuf_puts(sb, "}");
}

/* target (of ttext) patched with patch (of ptext) by RFC 7396, written as SQLite's json_patch
 * writes it: compact, the target's members in place (a null in the patch removes one, an object
 * merges into an object), then the patch's new members in its order; keys compared as written. */
static void attn_tune_patch(nn_strbuf *sb, const nn_json *target, const char *ttext,
                            const nn_json *patch, const char *ptext) {
  if (patch->type != NN_JSON_OBJECT) {
    nn_strbuf_append_json_compact(sb, patch, ptext);
    return;
  }
  if (!target || target->type != NN_JSON_OBJECT) {
    attn_tune_no_nulls(sb, patch, ptext);
    return;
  }
  int n = 0;
  nn_strbuf_puts(sb, "{");
  for (int pass = 0; pass < 2; pass++) { /* the target's members, then the patch's new ones */
    const nn_json *from = pass ? patch : target, *other = pass ? target : patch;
    const char *text = pass ? ptext : ttext, *other_text = pass ? ttext : ptext;
    for (size_t i = 0; i < from->count; i++) {
      const nn_json *m = &from->items[i], *match = NULL;
      size_t len = m->key_end - m->key_start;
      for (size_t j = 0; j < other->count && !match; j++) {
        const nn_json *o = &other->items[j];
        if (o->key_end - o->key_start == len &&
            memcmp(other_text + o->key_start, text + m->key_start, len) == 0)
          match = o;
      }
      const nn_json *p = pass ? m : match; /* the patch's value for this key */
      if ((pass && match) || (p && p->type == NN_JSON_NULL)) continue;
      if (n++) nn_strbuf_puts(sb, ",");
      nn_strbuf_append(sb, text + m->key_start, len);
      nn_strbuf_puts(sb, ":");
      if (pass) attn_tune_no_nulls(sb, m, ptext);
      else if (p) attn_tune_patch(sb, m, ttext, p, ptext);
      else nn_strbuf_append_json_compact(sb, m, ttext);
    }
  }
  nn_strbuf_puts(sb, "}");
}

/* The config (JSON object of its grid values) and options (options patched with it, as
 * json_patch would) of combination t (0-based, in itertools.product order) of the grid. */
static int attn_tune_trial_options(sqlite3 *db, const char *fn, const attn_tune_key *keys,
                                   int nkeys, int64_t t, const char *options,
                                   attn_tune_trial *trial, char **msg) {
  sqlite3_str *s = sqlite3_str_new(db);
  sqlite3_str_appendchar(s, 1, '{');
  /* index of key k: t / (product of the lengths after k) % length of k */
  for (int k = 0; k < nkeys; k++) {
    int64_t after = 1;
    for (int j = k + 1; j < nkeys; j++) after *= keys[j].n;
    int i = (int)(t / after % keys[k].n);
    if (k) sqlite3_str_appendchar(s, 1, ',');
    attn_json_string(s, keys[k].key, (int)strlen(keys[k].key));
    sqlite3_str_appendf(s, ":%s", keys[k].values[i]);
  }
  sqlite3_str_appendchar(s, 1, '}');
  trial->config = sqlite3_str_finish(s);
  if (!trial->config) return SQLITE_NOMEM;
  nn_json *target = NULL, *patch = NULL;
  char err[NN_ERR_LEN] = "";
  nn_strbuf sb;
  nn_strbuf_init(&sb, &attn_mem);
  int st = options ? nn_json_parse(&target, options, strlen(options), &attn_mem, err) : NN_OK;
  int rc = SQLITE_OK;
  if (st == NN_OK) st = nn_json_parse(&patch, trial->config, strlen(trial->config), &attn_mem, err);
  if (st == NN_OK) {
    attn_tune_patch(&sb, target, options, patch, trial->config);
    trial->options = sb.oom ? NULL : sqlite3_mprintf("%s", sb.data);
    rc = trial->options ? SQLITE_OK : SQLITE_NOMEM;
  } else if (st == NN_NOMEM) {
    rc = SQLITE_NOMEM;
  } else {
    *msg = sqlite3_mprintf("%s: the options must be a JSON object as text, e.g. "
                           "'{\"epochs\":10}' (%s)",
                           fn, err);
    rc = SQLITE_ERROR;
  }
  nn_strbuf_free(&sb);
  nn_json_free(target);
  nn_json_free(patch);
  return rc;
}

/* Whether trial a is better than trial b under monitor (nn_monitor_better: its tie and NaN
 * rules are those of the best epoch). */
static int attn_tune_better(nn_monitor monitor, const attn_tune_trial *a,
                            const attn_tune_trial *b) {
  nn_figures x = {a->val_loss, a->val_accuracy, a->val_f1};
  nn_figures y = {b->val_loss, b->val_accuracy, b->val_f1};
  return nn_monitor_better(monitor, &x, &y);
}

/* The kept epoch's figures of a finished run (its metrics: best_epoch, val_loss, ...). */
static void attn_tune_figures(attn_tune_trial *trial, const attn_training *t) {
  nn_json *doc = NULL;
  char err[NN_ERR_LEN];
  trial->best_epoch = 0;
  trial->val_loss = trial->val_accuracy = trial->val_f1 = NAN;
  if (!t->metrics || nn_json_parse(&doc, t->metrics, strlen(t->metrics), &attn_mem, err) != NN_OK)
    return;
  const nn_json *v = nn_json_get(doc, "best_epoch");
  if (v && v->type == NN_JSON_NUMBER) trial->best_epoch = (int)v->number;
  if ((v = nn_json_get(doc, "val_loss")) && v->type == NN_JSON_NUMBER) trial->val_loss = v->number;
  if ((v = nn_json_get(doc, "val_accuracy")) && v->type == NN_JSON_NUMBER)
    trial->val_accuracy = v->number;
  if ((v = nn_json_get(doc, "val_f1")) && v->type == NN_JSON_NUMBER) trial->val_f1 = v->number;
  nn_json_free(doc);
}

/* The options of the search (attn_tune_settings) taken out of `options`; *rest: the others
 * (sqlite3_malloc'd, or NULL when options is NULL), written compact as json_remove would. A text
 * that is not a JSON object is left to the training options' parser, which says what is wrong
 * with it. Errors name the key. */
static int attn_tune_settings_read(const char *fn, const char *options, attn_tune_settings *st,
                                   char **rest, char **msg) {
  nn_options o;
  char *got = NULL, *bad = NULL;
  memset(st, 0, sizeof *st);
  st->parallel = 1;
  st->keep_trials = 1;
  *rest = NULL;
  if (!options) return SQLITE_OK;
  int rc = attn_options_parse(&o, fn, options, ATTN_OPTIONS_TUNE, &bad);
  sqlite3_free(bad);
  if (rc == SQLITE_NOMEM) return SQLITE_NOMEM;
  if (rc != SQLITE_OK || !o.doc) { /* not an object: attn_options_read says so */
    *rest = sqlite3_mprintf("%s", options);
    return *rest ? SQLITE_OK : SQLITE_NOMEM;
  }
  const nn_json *search = o.extra[ATTN_OPTION_SEARCH], *trials = o.extra[ATTN_OPTION_TRIALS];
  const nn_json *seconds = o.extra[ATTN_OPTION_SECONDS], *parallel = o.extra[ATTN_OPTION_PARALLEL];
  const nn_json *keep = o.extra[ATTN_OPTION_KEEP_TRIALS];
#define GIVEN(v) ((v) && (v)->type != NN_JSON_NULL)
#define GOT(v) (got = attn_option_value(options, v))
  rc = SQLITE_OK;
  if (GIVEN(search)) {
    int text = search->type == NN_JSON_STRING;
    if (text && strcmp(search->str, "random") == 0) {
      st->random = 1;
    } else if (!(text && strcmp(search->str, "grid") == 0)) {
      rc = GOT(search) ? SQLITE_ERROR : SQLITE_NOMEM;
      if (got)
        *msg = sqlite3_mprintf("%s: option \"search\" must be \"grid\" or \"random\", got %s%s%s",
                               fn, text ? "\"" : "", got, text ? "\"" : "");
    }
  }
  if (rc == SQLITE_OK && GIVEN(trials)) {
    if (trials->type != NN_JSON_NUMBER || !trials->is_integer || trials->integer < 1 ||
        trials->integer > ATTN_TUNE_MAX_TRIALS) {
      rc = GOT(trials) ? SQLITE_ERROR : SQLITE_NOMEM;
      if (got)
        *msg = sqlite3_mprintf("%s: option \"trials\" must be an integer from 1 to %d, got %s", fn,
                               ATTN_TUNE_MAX_TRIALS, got);
    } else if (!st->random) {
      *msg = sqlite3_mprintf("%s: option \"trials\" is the size of a random search: it needs "
                             "\"search\": \"random\" (a grid search tries every combination)",
                             fn);
      rc = SQLITE_ERROR;
    } else {
      st->trials = (int)trials->integer;
    }
  }
  if (rc == SQLITE_OK && GIVEN(seconds)) {
    double x = seconds->number;
    if (seconds->type != NN_JSON_NUMBER || !(x > 0) || x > 1e9) {
      rc = GOT(seconds) ? SQLITE_ERROR : SQLITE_NOMEM;
      if (got)
        *msg = sqlite3_mprintf("%s: option \"seconds\" must be a number of seconds in (0, 1e9], "
                               "got %s",
                               fn, got);
    } else {
      st->seconds = x;
    }
  }
  if (rc == SQLITE_OK && GIVEN(parallel)) {
    if (parallel->type == NN_JSON_TRUE || parallel->type == NN_JSON_FALSE) {
      st->parallel = parallel->type == NN_JSON_TRUE;
    } else if (parallel->type == NN_JSON_NUMBER && parallel->is_integer &&
               (parallel->integer == 0 || parallel->integer == 1)) {
      st->parallel = (int)parallel->integer;
    } else {
      rc = GOT(parallel) ? SQLITE_ERROR : SQLITE_NOMEM;
      if (got)
        *msg = sqlite3_mprintf("%s: option \"parallel\" must be true or false, got %s", fn, got);
    }
  }
  if (rc == SQLITE_OK && GIVEN(keep)) {
    if (keep->type == NN_JSON_TRUE || keep->type == NN_JSON_FALSE) {
      st->keep_trials = keep->type == NN_JSON_TRUE;
    } else {
      rc = GOT(keep) ? SQLITE_ERROR : SQLITE_NOMEM;
      if (got)
        *msg = sqlite3_mprintf("%s: option \"keep_trials\" must be true (every trial is stored) "
                               "or false (only the chosen one), got %s",
                               fn, got);
    }
  }
#undef GOT
#undef GIVEN
  if (rc == SQLITE_OK) { /* the others, for the training options */
    nn_strbuf sb;
    int n = 0;
    nn_strbuf_init(&sb, &attn_mem);
    nn_strbuf_puts(&sb, "{");
    for (size_t i = 0; i < o.doc->count; i++) {
      const nn_json *m = &o.doc->items[i];
      if (m == search || m == trials || m == seconds || m == parallel || m == keep) continue;
      if (n++) nn_strbuf_puts(&sb, ",");
      nn_strbuf_append(&sb, options + m->key_start, m->key_end - m->key_start);
      nn_strbuf_puts(&sb, ":");
      nn_strbuf_append_json_compact(&sb, m, options);
    }
    nn_strbuf_puts(&sb, "}");
    *rest = sb.oom ? NULL : sqlite3_mprintf("%s", sb.data);
    if (!*rest) rc = SQLITE_NOMEM;
    nn_strbuf_free(&sb);
  }
  sqlite3_free(got);
  nn_options_free(&o);
  return rc;
}

/* The combinations a search tries, in order: every one (grid search), or `count` distinct ones
 * drawn at random from the seed (random search; all of them, shuffled, when there are fewer). */
static int attn_tune_indices(int64_t combinations, const attn_tune_settings *st, uint64_t seed,
                             int64_t **out, int *count) {
  int n = st->random ? (st->trials ? st->trials : 10) : (int)combinations;
  if ((int64_t)n > combinations) n = (int)combinations;
  int64_t *idx = sqlite3_malloc64(sizeof *idx * (sqlite3_uint64)(n ? n : 1));
  if (!idx) return SQLITE_NOMEM;
  if (!st->random) {
    for (int i = 0; i < n; i++) idx[i] = i;
  } else {
    nn_rng rng;
    nn_rng_seed(&rng, seed ^ 0x54554e4500000004ull); /* "TUNE" */
    uint64_t range = (uint64_t)combinations;
    uint64_t limit = UINT64_MAX - UINT64_MAX % range; /* no modulo bias */
    for (int i = 0; i < n;) {
      uint64_t r;
      do r = nn_rng_next(&rng);
      while (r >= limit);
      int64_t c = (int64_t)(r % range);
      int seen = 0;
      for (int j = 0; j < i && !seen; j++) seen = idx[j] == c;
      if (!seen) idx[i++] = c;
    }
  }
  *out = idx;
  *count = n;
  return SQLITE_OK;
}

/* A trial's run shares the statement's rows, name and interrupt probe (t) and owns the rest. */
static void attn_tune_share(attn_training *tt, const attn_training *t) {
  memset(tt, 0, sizeof *tt);
  tt->conn = t->conn;
  tt->fn = t->fn;
  tt->name = t->name;
  tt->rows = t->rows;
  tt->unlabelled = t->unlabelled;
  tt->use_unlabelled = t->use_unlabelled;
  tt->nskipped = t->nskipped;
  tt->nquery = t->nquery;
  tt->nvalidation = t->nvalidation;
  tt->query_text = t->query_text;
  tt->validation_query = t->validation_query;
  memcpy(tt->rows_sha256, t->rows_sha256, sizeof tt->rows_sha256);
  memcpy(tt->val_sha256, t->val_sha256, sizeof tt->val_sha256);
  tt->interrupt = t->interrupt;
  tt->keep = 1;
  tt->from_version = -1;
}

/* Trial i's run, up to its trainer (on the connection's thread: options, rows' encoding,
 * embeddings table, class weights). */
static int attn_tune_prepare(attn_training *tt, const attn_training *t, attn_tune_trial *trial,
                             int i, int ntrials, int threads, char **msg) {
  attn_tune_share(tt, t);
  int rc = attn_options_read(tt, trial->options, ATTN_OPTIONS_TUNE, msg);
  if (rc != SQLITE_OK) return rc;
  tt->cfg.validation_rows = t->nvalidation;
  tt->cfg.pool_threads = threads;
  tt->cfg.data_sized &= ~NN_SIZED_VALIDATION; /* trials are chosen on their validation rows */
  tt->status = attn_status_register(attn_conn_db(t->conn), t->fn, t->name);
  attn_status_phase(tt->status, "training", tt->cfg.epochs, i + 1, ntrials);
  return attn_training_create(tt, msg);
}

/* Trial run tt is over: its results into trial, then what the run owns let go. */
static void attn_tune_collect(attn_tune_trial *trial, attn_training *tt, double seconds) {
  trial->seconds = seconds;
  attn_tune_figures(trial, tt);
  trial->model = tt->model;
  tt->model = NULL;
  trial->metrics = tt->metrics;
  tt->metrics = NULL;
  trial->log = tt->log;
  trial->nlog = tt->nlog;
  tt->log = NULL;
  tt->nlog = tt->cap_log = 0;
  trial->val_rows = tt->val_rows;
  trial->nval = tt->nval;
  tt->val_rows = NULL;
  trial->from_name = tt->from_name;
  trial->from_version = tt->from_version;
  tt->from_name = NULL;
  memcpy(trial->backend, tt->backend, sizeof trial->backend);
  memcpy(trial->started_at, tt->started_at, sizeof trial->started_at);
  attn_utc_now(trial->ended_at);
}

/* A trial run's own end: free what it owns (not what it shares with the statement). */
static void attn_tune_release(attn_training *tt) {
  attn_status_unregister(tt->status);
  tt->status = NULL;
  memset(&tt->interrupt, 0, sizeof tt->interrupt); /* the statement's: it finalizes it */
  attn_training_reset(tt);
}

/* The second trial of a pair, in a thread of its own. */
typedef struct attn_tune_worker {
  attn_training *tt;
  int rc;
  char *msg;
  double seconds;
  atomic_int done;
} attn_tune_worker;

static void *attn_tune_worker_main(void *arg) {
  attn_tune_worker *w = arg;
  double start = nn_os_seconds();
  w->rc = attn_training_finish(w->tt, &w->msg);
  w->seconds = nn_os_seconds() - start;
  atomic_store(&w->done, 1);
  return NULL;
}

/* Train trials [i, i + count) (count 1 or 2) and collect them. With two, the second trains in a
 * thread of its own with half the cores, the first on this thread with the other half; both
 * give what they would give one at a time (the engine's results do not depend on the number of
 * threads). The worker touches no connection: it stops when `stop` is set, which this thread
 * does when the connection is interrupted or its own trial fails. */
static int attn_tune_run(attn_tune_cursor *cur, attn_training *t, int i, int count, int ntrials,
                         char **msg) {
  attn_training runs[2];
  atomic_int stop = 0;
  attn_tune_worker worker;
  pthread_t thread;
  int started = 0, rc = SQLITE_OK, threads = nn_cpu_count() / 2;
  memset(runs, 0, sizeof runs);
  memset(&worker, 0, sizeof worker);
  for (int k = 0; k < count && rc == SQLITE_OK; k++) {
    rc = attn_tune_prepare(&runs[k], t, &cur->trials[i + k], i + k, ntrials,
                           count == 2 ? (threads > 0 ? threads : 1) : 0, msg);
  }
  /* two at a time only on the CPU: a device runs one trainer at a time */
  if (rc == SQLITE_OK && count == 2 &&
      (strncmp(runs[0].backend, "cpu", 3) != 0 || strncmp(runs[1].backend, "cpu", 3) != 0)) {
    for (int k = 0; k < 2; k++) attn_tune_release(&runs[k]);
    rc = attn_tune_run(cur, t, i, 1, ntrials, msg);
    return rc == SQLITE_OK ? attn_tune_run(cur, t, i + 1, 1, ntrials, msg) : rc;
  }
  if (rc == SQLITE_OK && count == 2) {
    memset(&runs[1].interrupt, 0, sizeof runs[1].interrupt);
    runs[1].stop_flag = &stop;
    runs[1].quiet = 1;
    worker.tt = &runs[1];
    if (pthread_create(&thread, NULL, attn_tune_worker_main, &worker) == 0) {
      started = 1;
    } else { /* no thread: one after the other */
      runs[1].interrupt = t->interrupt;
      runs[1].stop_flag = NULL;
      worker.tt = NULL;
    }
  }
  double start = nn_os_seconds(), seconds0 = 0;
  if (rc == SQLITE_OK) {
    rc = attn_training_finish(&runs[0], msg);
    seconds0 = nn_os_seconds() - start;
  }
  if (started) {
    /* wait for the worker, passing an interrupt of the connection on to it */
    if (rc != SQLITE_OK) atomic_store(&stop, 1);
    while (!atomic_load(&worker.done)) {
      if (!atomic_load(&stop) && attn_interrupted(&t->interrupt, 1)) atomic_store(&stop, 1);
      sqlite3_sleep(5);
    }
    pthread_join(thread, NULL);
    if (rc == SQLITE_OK && worker.rc != SQLITE_OK) {
      rc = worker.rc;
      *msg = worker.msg;
      worker.msg = NULL;
    }
  } else if (rc == SQLITE_OK && count == 2) {
    start = nn_os_seconds();
    rc = attn_training_finish(&runs[1], msg);
    worker.seconds = nn_os_seconds() - start;
  }
  sqlite3_free(worker.msg);
  if (rc == SQLITE_OK)
    for (int k = 0; k < count; k++)
      attn_tune_collect(&cur->trials[i + k], &runs[k], k == 0 ? seconds0 : worker.seconds);
  for (int k = 0; k < count; k++) attn_tune_release(&runs[k]);
  return rc;
}

/* The grid's keys: none may be an option of the whole search. SQLITE_OK or SQLITE_ERROR with
 * *msg. */
static int attn_tune_grid_keys_check(const char *fn, const attn_tune_key *keys, int nkeys,
                                     char **msg) {
  for (int k = 0; k < nkeys; k++)
    if (attn_tune_search_key(keys[k].key)) {
      *msg = sqlite3_mprintf("%s: grid key \"%s\" is an option of the whole search, the same "
                             "for every trial: give it in the options, not the grid",
                             fn, keys[k].key);
      return SQLITE_ERROR;
    }
  return SQLITE_OK;
}

/* One trial's options read as a training of t would read them, and with a validation figure
 * to choose a trial by. SQLITE_OK or an error with *msg. */
static int attn_tune_trial_check(const attn_training *t, const char *fn, const char *options,
                                 char **msg) {
  attn_training check;
  attn_tune_share(&check, t);
  int rc = attn_options_read(&check, options, ATTN_OPTIONS_TUNE, msg);
  if (rc == SQLITE_OK && check.cfg.validation == NN_VALIDATION_NONE) {
    *msg = sqlite3_mprintf("%s: option \"validation\": \"none\" leaves no validation figure to "
                           "choose a trial by",
                           fn);
    rc = SQLITE_ERROR;
  }
  attn_tune_release(&check);
  return rc;
}

/* In a node: the checks of the search that need no rows (its options, the grid, every trial's
 * options), then the job. */
static int attn_tune_submit(attn_tune_cursor *cur, attn_conn *conn, sqlite3_value *name_arg,
                            sqlite3_value *query_arg, sqlite3_value *grid_arg,
                            sqlite3_value *options_arg, const char *options, char **msg) {
  sqlite3 *db = attn_conn_db(conn);
  const char *fn = "attn_tune";
  const char *grid = grid_arg && sqlite3_value_type(grid_arg) == SQLITE_TEXT
                         ? (const char *)sqlite3_value_text(grid_arg)
                         : NULL;
  char *train_options = NULL;
  attn_tune_key *keys = NULL;
  int64_t *indices = NULL, combinations = 0;
  attn_tune_settings st;
  attn_training t;
  attn_tune_trial trial;
  int nkeys = 0, ntrials = 0;
  memset(&t, 0, sizeof t);
  t.conn = conn;
  t.fn = fn;
  int rc = attn_tune_settings_read(fn, options, &st, &train_options, msg);
  if (rc == SQLITE_OK) rc = attn_tune_grid(fn, grid, st.random, &keys, &nkeys, &combinations, msg);
  if (rc == SQLITE_OK) rc = attn_tune_grid_keys_check(fn, keys, nkeys, msg);
  if (rc == SQLITE_OK) rc = attn_options_read(&t, train_options, ATTN_OPTIONS_TUNE, msg);
  if (rc == SQLITE_OK) rc = attn_tune_indices(combinations, &st, t.cfg.seed, &indices, &ntrials);
  for (int i = 0; rc == SQLITE_OK && i < ntrials; i++) {
    memset(&trial, 0, sizeof trial);
    rc = attn_tune_trial_options(db, fn, keys, nkeys, indices[i], train_options, &trial, msg);
    if (rc == SQLITE_OK) rc = attn_tune_trial_check(&t, fn, trial.options, msg);
    sqlite3_free(trial.config);
    sqlite3_free(trial.options);
  }
  const attn_job_hooks *jobs = attn_conn_jobs(conn);
  if (rc == SQLITE_OK && !jobs) { /* only a node's connection is in this mode, and stays one */
    *msg = sqlite3_mprintf("%s: no job runner here", fn);
    rc = SQLITE_ERROR;
  }
  if (rc == SQLITE_OK)
    rc = jobs->submit(conn, fn, name_arg, query_arg, grid, options_arg, 0, &cur->job, msg);
  attn_tune_keys_free(keys, nkeys);
  sqlite3_free(indices);
  sqlite3_free(train_options);
  attn_training_free(&t);
  if (rc == SQLITE_OK) cur->ntrials = 1; /* one row: the job's */
  return rc;
}

/* cur's ntrials trials, each with its options (the grid's combination indices[i] over
 * train_options), every one checked before the first trains. SQLITE_OK or an error with *msg. */
static int attn_tune_trials_prepare(attn_tune_cursor *cur, const attn_training *t, sqlite3 *db,
                                    const attn_tune_key *keys, int nkeys, const int64_t *indices,
                                    int ntrials, const char *train_options, char **msg) {
  const char *fn = "attn_tune";
  cur->trials = sqlite3_malloc64(sizeof *cur->trials * (sqlite3_uint64)ntrials);
  if (!cur->trials) return SQLITE_NOMEM;
  memset(cur->trials, 0, sizeof *cur->trials * (size_t)ntrials);
  cur->ntrials = ntrials;
  for (int i = 0; i < ntrials; i++) {
    int rc = attn_tune_trial_options(db, fn, keys, nkeys, indices[i], train_options,
                                     &cur->trials[i], msg);
    if (rc == SQLITE_OK) rc = attn_tune_trial_check(t, fn, cur->trials[i].options, msg);
    if (rc != SQLITE_OK) return rc;
  }
  return SQLITE_OK;
}

/* Train cur's trials: two at a time where cores allow and st says so; no trial starts once
 * st->seconds have passed (the trials left have no rows). cur->chosen: the best by monitor.
 * SQLITE_OK or an error with *msg. */
static int attn_tune_train_all(attn_tune_cursor *cur, attn_training *t,
                               const attn_tune_settings *st, nn_monitor monitor, char **msg) {
  int ntrials = cur->ntrials;
  double begun = nn_os_seconds();
  int ran = 0, pairs = st->parallel && nn_cpu_count() >= 2;
  while (ran < ntrials) {
    if (ran > 0 && st->seconds > 0 && nn_os_seconds() - begun >= st->seconds) break;
    int count = pairs && ran + 1 < ntrials ? 2 : 1;
    int rc = attn_tune_run(cur, t, ran, count, ntrials, msg);
    if (rc != SQLITE_OK) return rc;
    for (int k = ran; k < ran + count; k++)
      if (cur->chosen < 0 || attn_tune_better(monitor, &cur->trials[k], &cur->trials[cur->chosen]))
        cur->chosen = k;
    ran += count;
  }
  for (int i = ran; i < ntrials; i++) { /* the trials the time did not allow: no rows */
    sqlite3_free(cur->trials[i].config);
    sqlite3_free(cur->trials[i].options);
  }
  cur->ntrials = ran;
  return SQLITE_OK;
}

/* Save: every trial of cur in trial order and, where deploy, the deployment of the chosen one in
 * one transaction (all or nothing); the trials not chosen are never deployed. Each trial's
 * version and deployment into cur, its model freed; with keep_trials 0 only the chosen trial is
 * stored (the others keep version 0). SQLITE_OK or an error with *msg. */
static int attn_tune_save(attn_tune_cursor *cur, attn_training *t, int deploy, int keep_trials,
                          char **msg) {
  const char *fn = "attn_tune";
  int ntrials = cur->ntrials, rc = SQLITE_NOMEM;
  attn_store_item *items = sqlite3_malloc64(sizeof *items * (sqlite3_uint64)ntrials);
  attn_lineage_info *lineage = sqlite3_malloc64(sizeof *lineage * (sqlite3_uint64)ntrials);
  char **metrics = sqlite3_malloc64(sizeof *metrics * (sqlite3_uint64)ntrials);
  char *saved_reason = NULL;
  if (!items || !lineage || !metrics) goto done;
  memset(metrics, 0, sizeof *metrics * (size_t)ntrials);
  saved_reason = t->deploy_reason;
  t->deploy_reason = NULL;
  for (int i = 0; i < ntrials; i++) {
    attn_tune_trial *trial = &cur->trials[i];
    int chosen = i == cur->chosen;
    t->deploy_reason = chosen
                           ? saved_reason
                           : sqlite3_mprintf("trial %d of this tune was chosen", cur->chosen + 1);
    /* each trial's own held-out rows (a grid may vary val_fraction or validation) */
    t->val_id[0] = 0;
    if (trial->nval > 0 &&
        attn_train_rows_sha256_of(&t->rows, trial->val_rows, trial->nval, t->val_id) != SQLITE_OK) {
      if (!chosen) sqlite3_free(t->deploy_reason);
      t->deploy_reason = NULL;
      goto done;
    }
    metrics[i] = attn_training_metrics(t, trial->metrics, chosen && deploy);
    if (!chosen) sqlite3_free(t->deploy_reason);
    t->deploy_reason = NULL;
    if (!metrics[i]) goto done;
    char ended[32];
    attn_training_lineage(t, &lineage[i], trial->options, ended);
    lineage[i].from_name = trial->from_name;
    lineage[i].from_version = trial->from_name ? trial->from_version : -1;
    lineage[i].backend = trial->backend[0] ? trial->backend : NULL;
    lineage[i].started_at = trial->started_at;
    lineage[i].ended_at = trial->ended_at;
    attn_store_item item = {trial->model,     metrics[i],  trial->log, trial->nlog,
                            chosen && deploy, &lineage[i], 0,          0};
    items[i] = item;
  }
  /* "keep_trials": false -- the chosen trial alone is stored; the others' rows say version
   * NULL */
  if (keep_trials) rc = attn_store_save_items(t->conn, fn, t->name, items, ntrials, msg);
  else rc = attn_store_save_items(t->conn, fn, t->name, &items[cur->chosen], 1, msg);
  if (rc != SQLITE_OK) goto done;
  for (int i = 0; i < ntrials; i++) {
    int stored = keep_trials || i == cur->chosen;
    cur->trials[i].version = stored ? items[i].version : 0;
    cur->trials[i].deployed = stored && items[i].deploy;
    nn_model_free(cur->trials[i].model);
    cur->trials[i].model = NULL;
  }
done:
  sqlite3_free(items);
  sqlite3_free(lineage);
  for (int i = 0; metrics && i < ntrials; i++) sqlite3_free(metrics[i]);
  sqlite3_free(metrics);
  sqlite3_free(saved_reason);
  return rc;
}

static int attn_tune_filter(sqlite3_vtab_cursor *base, int idx_num, const char *idx_str, int argc,
                            sqlite3_value **argv) {
  attn_tune_cursor *cur = (attn_tune_cursor *)base;
  attn_vtab *vtab = (attn_vtab *)base->pVtab;
  sqlite3 *db = attn_conn_db(vtab->conn);
  const char *fn = "attn_tune";
  char *msg = NULL, *train_options = NULL;
  attn_training t;
  attn_tune_key *keys = NULL;
  int64_t *indices = NULL, combinations = 0;
  attn_tune_settings st;
  int nkeys = 0, ntrials = 0, rc;
  memset(&t, 0, sizeof t);
  attn_tune_reset(cur);
  sqlite3_value *name_arg = argc > 0 ? argv[0] : NULL, *query_arg = argc > 1 ? argv[1] : NULL;
  sqlite3_value *grid_arg = argc > 2 ? argv[2] : NULL;
  sqlite3_value *options_arg =
      attn_arg_given(idx_num, ATTN_TUNE_COL_ARG_OPTIONS - ATTN_TUNE_COL_ARG_NAME) && argc > 3
          ? argv[3]
          : NULL;
  const char *options = NULL;
  if (options_arg && sqlite3_value_type(options_arg) != SQLITE_NULL) {
    if (sqlite3_value_type(options_arg) != SQLITE_TEXT) {
      msg = sqlite3_mprintf("%s: the options must be a JSON object as text, e.g. "
                            "'{\"epochs\":10}'",
                            fn);
      rc = SQLITE_ERROR;
      goto done;
    }
    options = (const char *)sqlite3_value_text(options_arg);
  }
  if (vtab->mode) { /* a dqlite node: a job */
    rc = attn_tune_submit(cur, vtab->conn, name_arg, query_arg, grid_arg, options_arg, options,
                          &msg);
    if (rc != SQLITE_OK) goto done;
    return SQLITE_OK;
  }
  /* the options are read below, once the search's own keys are out */
  rc = attn_training_open(&t, vtab->conn, fn, name_arg, query_arg, NULL, &msg);
  /* each trial shows in attn_status while it trains (attn_tune_prepare) */
  attn_status_unregister(t.status);
  t.status = NULL;
  if (rc != SQLITE_OK) goto done;
  rc = attn_tune_settings_read(fn, options, &st, &train_options, &msg);
  if (rc != SQLITE_OK) goto done;
  rc = attn_tune_grid(fn,
                      grid_arg && sqlite3_value_type(grid_arg) == SQLITE_TEXT
                          ? (const char *)sqlite3_value_text(grid_arg)
                          : NULL,
                      st.random, &keys, &nkeys, &combinations, &msg);
  if (rc != SQLITE_OK) goto done;
  rc = attn_tune_grid_keys_check(fn, keys, nkeys, &msg);
  if (rc != SQLITE_OK) goto done;
  /* the monitor that picks the best trial, "deploy" and "validation_query": the options' */
  rc = attn_options_read(&t, train_options, ATTN_OPTIONS_TUNE, &msg);
  if (rc != SQLITE_OK) goto done;
  nn_monitor monitor = t.cfg.monitor;
  rc = attn_training_rows(&t, &msg);
  if (rc != SQLITE_OK) goto done;
  if (attn_interrupt_begin(&t.interrupt, db) != SQLITE_OK) {
    msg = sqlite3_mprintf("%s: %s", fn, sqlite3_errmsg(db));
    rc = SQLITE_ERROR;
    goto done;
  }
  rc = attn_tune_indices(combinations, &st, t.cfg.seed, &indices, &ntrials);
  if (rc != SQLITE_OK) goto done;
  rc = attn_tune_trials_prepare(cur, &t, db, keys, nkeys, indices, ntrials, train_options, &msg);
  if (rc != SQLITE_OK) goto done;
  rc = attn_store_check_save(vtab->conn, fn, t.name, ntrials, &msg);
  if (rc != SQLITE_OK) goto done;
  rc = attn_tune_train_all(cur, &t, &st, monitor, &msg);
  if (rc != SQLITE_OK) goto done;
  if (attn_interrupted(&t.interrupt, 1)) { /* the last chance before writing */
    msg = sqlite3_mprintf("%s: interrupted", fn);
    rc = SQLITE_INTERRUPT;
    goto done;
  }
  /* option "deploy" for the chosen trial, against the deployed version */
  attn_tune_trial *best = &cur->trials[cur->chosen];
  int deploy = 1;
  rc = attn_training_decide(&t, best->model, best->val_rows, best->nval, &deploy, &msg);
  if (rc != SQLITE_OK) goto done;
  rc = attn_tune_save(cur, &t, deploy, st.keep_trials, &msg);
  if (rc != SQLITE_OK) goto done;
  /* an interrupt during the commit: SQLite would end the statement with a bare "interrupted"
   * at its next check; say it with the function's name and what was saved */
  if (attn_interrupted(&t.interrupt, 1)) {
    msg = attn_tune_saved_interrupt(cur);
    rc = SQLITE_INTERRUPT;
    goto done;
  }
  rc = SQLITE_OK;
done:
  attn_tune_keys_free(keys, nkeys);
  sqlite3_free(indices);
  sqlite3_free(train_options);
  attn_training_free(&t);
  if (rc != SQLITE_OK) {
    attn_tune_reset(cur);
    return attn_vtab_fail(base->pVtab, rc, msg, fn);
  }
  return SQLITE_OK;
}

static int attn_tune_next(sqlite3_vtab_cursor *base) {
  attn_tune_cursor *cur = (attn_tune_cursor *)base;
  cur->row++;
  /* SQLite checks for an interrupt after each row of a table-valued function and fails with a
   * bare "interrupted": one that comes once the trials are saved (the commit window, or while
   * the caller reads the rows) is said here first, with the function's name and what was
   * saved. */
  if (!cur->job.job && cur->row < cur->ntrials) {
    attn_vtab *vtab = (attn_vtab *)base->pVtab;
    attn_interrupt it = {attn_conn_db(vtab->conn), NULL, 0};
    int stop = attn_interrupted(&it, 1);
    attn_interrupt_end(&it);
    if (stop)
      return attn_vtab_fail(base->pVtab, SQLITE_INTERRUPT, attn_tune_saved_interrupt(cur),
                            "attn_tune");
  }
  return SQLITE_OK;
}

static int attn_tune_eof(sqlite3_vtab_cursor *base) {
  attn_tune_cursor *cur = (attn_tune_cursor *)base;
  return cur->row >= cur->ntrials;
}

static void attn_tune_result_double(sqlite3_context *ctx, double v) {
  if (isfinite(v)) sqlite3_result_double(ctx, v);
  else sqlite3_result_null(ctx);
}

static int attn_tune_column(sqlite3_vtab_cursor *base, sqlite3_context *ctx, int col) {
  attn_tune_cursor *cur = (attn_tune_cursor *)base;
  const attn_job_hooks *jobs =
      cur->job.job ? attn_conn_jobs(((attn_vtab *)base->pVtab)->conn) : NULL;
  if (jobs) {
    jobs->receipt_column(&cur->job, ctx, col);
    return SQLITE_OK;
  }
  const attn_tune_trial *trial = &cur->trials[cur->row];
  switch (col) {
  case ATTN_TUNE_COL_TRIAL: sqlite3_result_int(ctx, cur->row + 1); break;
  case ATTN_TUNE_COL_CONFIG:
    sqlite3_result_text(ctx, trial->config, -1, SQLITE_TRANSIENT);
    sqlite3_result_subtype(ctx, ATTN_JSON_SUBTYPE);
    break;
  case ATTN_TUNE_COL_BEST_EPOCH: sqlite3_result_int(ctx, trial->best_epoch); break;
  case ATTN_TUNE_COL_VAL_LOSS: attn_tune_result_double(ctx, trial->val_loss); break;
  case ATTN_TUNE_COL_VAL_ACCURACY: attn_tune_result_double(ctx, trial->val_accuracy); break;
  case ATTN_TUNE_COL_VAL_F1: attn_tune_result_double(ctx, trial->val_f1); break;
  case ATTN_TUNE_COL_SECONDS: sqlite3_result_double(ctx, trial->seconds); break;
  case ATTN_TUNE_COL_CHOSEN: sqlite3_result_int(ctx, cur->row == cur->chosen); break;
  case ATTN_TUNE_COL_VERSION: /* 0: not stored ("keep_trials": false) */
    if (trial->version) sqlite3_result_int64(ctx, trial->version);
    break;
  case ATTN_TUNE_COL_DEPLOYED: sqlite3_result_int(ctx, trial->deployed); break;
  default: break;
  }
  return SQLITE_OK;
}

static int attn_tune_rowid(sqlite3_vtab_cursor *base, sqlite_int64 *rowid) {
  const attn_tune_cursor *cur = (attn_tune_cursor *)base;
  *rowid = cur->job.job ? cur->job.job : cur->row + 1;
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
