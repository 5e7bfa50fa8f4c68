/* attn_options.c -- the options of a training (attn_train, attn_fit, attn_tune): one JSON object
 * of nn_config's keys (the engine's table, engine/config.c) and of the keys ext/ reads itself
 * (option_keys below: "from", "deploy", "embeddings", ..., and attn_tune's "search", "trials",
 * ...). The text is parsed once, by the engine (attn_options_parse: nn_options_parse hands
 * ext/'s keys back); a run's options are then read into its attn_training (attn_options_read):
 * the warm start ("from"), ext/'s keys, the engine's into nn_config, then the combinations that
 * cannot work are refused, naming the keys. Values are shown in messages as attn_option_value
 * writes them.
 * "embeddings" names a table of (word, vector) rows (e.g. one attn_vectors_load filled) and
 * "freeze_embeddings" keeps them as they are (attn_embeddings_apply, once the trainer exists).
 * Words are matched exactly against the vocabulary; rows they set start as the vectors, the
 * others keep the N(0, 1) initialisation; without "embed_dim" the embedding takes the vectors'
 * dimension.
 *
 *   SELECT * FROM attn_train('news', 'SELECT title, category FROM headlines',
 *                            '{"embeddings":"glove","freeze_embeddings":true,"epochs":5}');
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn_ext.h"
#include "json.h"

#define VECTORS_MAX_DIM ATTN_VECTORS_MAX_DIM

/* ------------------------------------------------------------------ attn_train's "embeddings" */

void attn_embeddings_free(attn_embeddings *emb) {
  sqlite3_free(emb->table);
  memset(emb, 0, sizeof *emb);
}

/* The dimension of the table's vectors, from its first row with a vector. */
static int embeddings_dim(sqlite3 *db, const char *fn, attn_embeddings *emb, char **errmsg) {
  sqlite3_stmt *stmt = NULL;
  char *sql = sqlite3_mprintf("SELECT length(vector), typeof(vector) FROM \"%w\" "
                              "WHERE vector IS NOT NULL LIMIT 1",
                              emb->table);
  if (!sql) return SQLITE_NOMEM;
  int rc = sqlite3_prepare_v2(db, sql, -1, &stmt, NULL);
  sqlite3_free(sql);
  if (rc != SQLITE_OK) {
    *errmsg = sqlite3_mprintf("%s: option \"embeddings\": cannot read table '%s' (columns word, "
                              "vector): %s",
                              fn, emb->table, sqlite3_errmsg(db));
    return SQLITE_ERROR;
  }
  rc = sqlite3_step(stmt);
  if (rc != SQLITE_ROW) {
    *errmsg = rc == SQLITE_DONE
                  ? sqlite3_mprintf("%s: option \"embeddings\": table '%s' has no vectors", fn,
                                    emb->table)
                  : sqlite3_mprintf("%s: option \"embeddings\": cannot read table '%s': %s", fn,
                                    emb->table, sqlite3_errmsg(db));
    sqlite3_finalize(stmt);
    return SQLITE_ERROR;
  }
  sqlite3_int64 bytes = sqlite3_column_int64(stmt, 0);
  int blob = strcmp((const char *)sqlite3_column_text(stmt, 1), "blob") == 0;
  sqlite3_finalize(stmt);
  if (!blob || bytes <= 0 || bytes % 4 != 0 || bytes / 4 > VECTORS_MAX_DIM) {
    *errmsg = sqlite3_mprintf("%s: option \"embeddings\": the vectors of table '%s' must be BLOBs "
                              "of 1 to %d float32 (as attn_vectors_load makes them)",
                              fn, emb->table, VECTORS_MAX_DIM);
    return SQLITE_ERROR;
  }
  emb->dim = (int)(bytes / 4);
  return SQLITE_OK;
}

/* ------------------------------------------------------------------ the keys of ext/ */

/* The keys ext/ reads itself, by attn_option_key (nn_config's keys are the engine's table,
 * engine/config.c). The order is that of "did you mean" among them after nn_config's. */
static const struct {
  const char *name;
  attn_options_reader owner; /* TRAINING: every training reads it; TUNE: attn_tune alone */
} option_keys[ATTN_OPTION_COUNT] = {
    [ATTN_OPTION_FROM] = {"from", ATTN_OPTIONS_TRAINING},
    [ATTN_OPTION_FROM_VERSION] = {"from_version", ATTN_OPTIONS_TRAINING},
    [ATTN_OPTION_EMBEDDINGS] = {"embeddings", ATTN_OPTIONS_TRAINING},
    [ATTN_OPTION_FREEZE_EMBEDDINGS] = {"freeze_embeddings", ATTN_OPTIONS_TRAINING},
    [ATTN_OPTION_DEPLOY] = {"deploy", ATTN_OPTIONS_TRAINING},
    [ATTN_OPTION_VALIDATION_QUERY] = {"validation_query", ATTN_OPTIONS_TRAINING},
    [ATTN_OPTION_CLASS_WEIGHTS] = {"class_weights", ATTN_OPTIONS_TRAINING},
    [ATTN_OPTION_UNLABELLED] = {"unlabelled", ATTN_OPTIONS_TRAINING},
    [ATTN_OPTION_SEARCH] = {"search", ATTN_OPTIONS_TUNE},
    [ATTN_OPTION_TRIALS] = {"trials", ATTN_OPTIONS_TUNE},
    [ATTN_OPTION_SECONDS] = {"seconds", ATTN_OPTIONS_TUNE},
    [ATTN_OPTION_PARALLEL] = {"parallel", ATTN_OPTIONS_TUNE},
    [ATTN_OPTION_KEEP_TRIALS] = {"keep_trials", ATTN_OPTIONS_TUNE},
};
_Static_assert(ATTN_OPTION_COUNT <= NN_OPTIONS_MAX_EXTRA, "nn_options holds every key of ext/");

int attn_options_parse(nn_options *o, const char *fn, const char *text, attn_options_reader reader,
                       char **msg) {
  char err[NN_ERR_LEN] = "";
  const char *names[ATTN_OPTION_COUNT];
  for (int k = 0; k < ATTN_OPTION_COUNT; k++) /* attn_tune reads every key, a training its own */
    names[k] = option_keys[k].owner == ATTN_OPTIONS_TRAINING || reader == ATTN_OPTIONS_TUNE
                   ? option_keys[k].name
                   : NULL;
  int st = nn_options_parse(o, text, names, ATTN_OPTION_COUNT, &attn_mem, err);
  if (st == NN_OK) return SQLITE_OK;
  if (st == NN_NOMEM) return SQLITE_NOMEM;
  *msg = sqlite3_mprintf("%s: %s", fn, err);
  return SQLITE_ERROR;
}

char *attn_option_value(const char *text, const nn_json *v) {
  if (v->type == NN_JSON_STRING) return sqlite3_mprintf("%s", v->str);
  nn_strbuf sb;
  nn_strbuf_init(&sb, &attn_mem);
  nn_strbuf_append_json_compact(&sb, v, text);
  char *shown = sb.oom ? NULL : sqlite3_mprintf("%s", sb.data ? sb.data : "");
  nn_strbuf_free(&sb);
  return shown;
}

/* ------------------------------------------------------------------ a training run's options */

/* "embeddings" and "freeze_embeddings" of o into emb, then the engine's keys (nn_options_apply)
 * into cfg; without "embed_dim" the embedding takes the table's dimension. */
static int read_config(sqlite3 *db, const char *fn, const nn_options *o, nn_config *cfg,
                       attn_embeddings *emb, char **errmsg) {
  char err[NN_ERR_LEN] = "";
  int rc = SQLITE_OK;
  memset(emb, 0, sizeof *emb);
  const nn_json *table = o->extra[ATTN_OPTION_EMBEDDINGS];
  const nn_json *freeze = o->extra[ATTN_OPTION_FREEZE_EMBEDDINGS];
  int has_embed_dim = nn_json_get(o->doc, "embed_dim") != NULL;
  if (table && table->type != NN_JSON_NULL) {
    if (table->type != NN_JSON_STRING || table->str_len == 0) {
      char *got = table->type == NN_JSON_STRING ? NULL : attn_option_value(o->text, table);
      if (table->type != NN_JSON_STRING && !got) return SQLITE_NOMEM;
      *errmsg = sqlite3_mprintf("%s: option \"embeddings\" must be the name of a table of "
                                "(word, vector), got %s",
                                fn, got ? got : "\"\"");
      sqlite3_free(got);
      return SQLITE_ERROR;
    }
    emb->table = sqlite3_mprintf("%s", table->str);
    if (!emb->table) return SQLITE_NOMEM;
  }
  if (freeze) { /* true / false, or 1 / 0 as nn_config takes booleans */
    if (freeze->type == NN_JSON_TRUE || freeze->type == NN_JSON_FALSE) {
      emb->freeze = freeze->type == NN_JSON_TRUE;
    } else if (freeze->type == NN_JSON_NUMBER && freeze->is_integer &&
               (freeze->integer == 0 || freeze->integer == 1)) {
      emb->freeze = (int)freeze->integer;
    } else {
      char *got = attn_option_value(o->text, freeze);
      *errmsg = got ? sqlite3_mprintf("%s: option \"freeze_embeddings\" must be true or false, "
                                      "got %s",
                                      fn, got)
                    : NULL;
      sqlite3_free(got);
      rc = *errmsg ? SQLITE_ERROR : SQLITE_NOMEM;
      goto fail;
    }
  }
  int st = nn_options_apply(o, cfg, err);
  if (st != NN_OK) {
    rc = attn_nn_error(st, fn, err, errmsg);
    goto fail;
  }
  if (emb->table) {
    rc = embeddings_dim(db, fn, emb, errmsg);
    if (rc != SQLITE_OK) goto fail;
    if (!has_embed_dim) {
      cfg->embed_dim = emb->dim;
      cfg->data_sized &= ~NN_SIZED_EMBED_DIM; /* the vectors' width, at any number of rows */
    } else if (cfg->embed_dim != emb->dim) {
      *errmsg = sqlite3_mprintf("%s: option \"embeddings\": table '%s' has %d-dimensional "
                                "vectors, but embed_dim is %d (leave embed_dim out to use %d)",
                                fn, emb->table, emb->dim, cfg->embed_dim, emb->dim);
      rc = SQLITE_ERROR;
      goto fail;
    }
  }
  return SQLITE_OK;
fail:
  attn_embeddings_free(emb);
  return rc;
}

void attn_options_clear(attn_training *t) {
  attn_model_release(t->base);
  t->base = NULL;
  attn_embeddings_free(&t->emb);
  sqlite3_free(t->class_weights);
  t->class_weights = NULL;
  sqlite3_free(t->options_text);
  t->options_text = NULL;
  sqlite3_free(t->from_name);
  t->from_name = NULL;
  t->from_version = -1;
  t->deploy = ATTN_DEPLOY_IF_BETTER;
  t->deploy_given = 0;
  t->use_unlabelled = 1; /* the option's default, also when no options are given */
}

/* The keys of a run that ext/ reads beside the engine's, read from o into t: "unlabelled",
 * "deploy", "validation_query", "class_weights" when it is an object. cfg must be parsed
 * afterwards; check_combinations checks it against these. */
static int read_run(attn_training *t, const nn_options *o, char **msg) {
  const char *fn = t->fn;
  const nn_json *deploy = o->extra[ATTN_OPTION_DEPLOY],
                *query = o->extra[ATTN_OPTION_VALIDATION_QUERY];
  const nn_json *weights = o->extra[ATTN_OPTION_CLASS_WEIGHTS];
  const nn_json *unlabelled = o->extra[ATTN_OPTION_UNLABELLED];
  char *got = NULL;
  int rc = SQLITE_OK;
  t->use_unlabelled = 1;
  if (unlabelled && unlabelled->type != NN_JSON_NULL) {
    if (unlabelled->type != NN_JSON_TRUE && unlabelled->type != NN_JSON_FALSE) {
      if (!(got = attn_option_value(o->text, unlabelled))) return SQLITE_NOMEM;
      *msg = sqlite3_mprintf("%s: option \"unlabelled\" must be true or false, got %s", fn, got);
      sqlite3_free(got);
      return SQLITE_ERROR;
    }
    t->use_unlabelled = unlabelled->type == NN_JSON_TRUE;
  }
  if (deploy && deploy->type != NN_JSON_NULL) {
    static const char *const names[] = {"if_better", "always", "never"};
    t->deploy_given = 1;
    int found = -1;
    for (int k = 0; k < 3 && deploy->type == NN_JSON_STRING; k++)
      if (strcmp(deploy->str, names[k]) == 0 && strlen(names[k]) == deploy->str_len) found = k;
    if (found >= 0) {
      t->deploy = found; /* ATTN_DEPLOY_IF_BETTER, _ALWAYS, _NEVER */
    } else {
      int text = deploy->type == NN_JSON_STRING;
      if (!(got = attn_option_value(o->text, deploy))) return SQLITE_NOMEM;
      *msg = sqlite3_mprintf("%s: option \"deploy\" must be \"always\", \"if_better\" or "
                             "\"never\", got %s%s%s",
                             fn, text ? "\"" : "", got, text ? "\"" : "");
      rc = SQLITE_ERROR;
    }
  }
  if (rc == SQLITE_OK && query && query->type != NN_JSON_NULL) {
    if (query->type != NN_JSON_STRING || query->str_len == 0) {
      got = query->type == NN_JSON_STRING ? NULL : attn_option_value(o->text, query);
      if (query->type != NN_JSON_STRING && !got) return SQLITE_NOMEM;
      *msg = sqlite3_mprintf("%s: option \"validation_query\" must be a query as text "
                             "(SELECT text, label FROM ...), got %s",
                             fn, got ? got : "\"\"");
      rc = SQLITE_ERROR;
    } else if (t->validation_query && strcmp(t->validation_query, query->str) != 0) {
      *msg = sqlite3_mprintf("%s: option \"validation_query\" must be the same for every "
                             "trial",
                             fn);
      rc = SQLITE_ERROR;
    } else if (!t->validation_query) {
      t->validation_query = sqlite3_mprintf("%s", query->str);
      if (!t->validation_query) rc = SQLITE_NOMEM;
    }
  }
  if (rc == SQLITE_OK && weights) {
    t->class_weights = attn_option_value(o->text, weights);
    if (!t->class_weights) rc = SQLITE_NOMEM;
  }
  sqlite3_free(got);
  return rc;
}

/* The combinations of options that cannot work, once t->cfg is parsed: errors name the keys.
 * o: the options as given (which keys were given; NULL: none). */
static int check_combinations(attn_training *t, const nn_options *o, char **msg) {
  const char *fn = t->fn;
  int given[6] = {0};
  static const char *const keys[6] = {"validation", "val_fraction", "monitor",
                                      "patience",   "lr_patience",  "class_weights"};
  for (int k = 0; o && k < 6; k++) {
    const nn_json *v = nn_json_get(o->doc, keys[k]);
    given[k] = v && v->type != NN_JSON_NULL;
  }
  const char *mode = nn_validation_name(t->cfg.validation);
  if (t->validation_query) {
    if (given[0] && t->cfg.validation != NN_VALIDATION_QUERY) {
      *msg = sqlite3_mprintf("%s: option \"validation_query\" gives the validation rows: leave "
                             "out \"validation\" (got \"%s\")",
                             fn, mode);
      return SQLITE_ERROR;
    }
    if (given[1]) {
      *msg = sqlite3_mprintf("%s: option \"val_fraction\" has no effect with "
                             "\"validation_query\" (its rows are the validation split): leave it "
                             "out",
                             fn);
      return SQLITE_ERROR;
    }
    t->cfg.validation = NN_VALIDATION_QUERY;
    return SQLITE_OK;
  }
  if (t->cfg.validation == NN_VALIDATION_QUERY) {
    *msg = sqlite3_mprintf("%s: option \"validation\": \"query\" needs \"validation_query\" "
                           "(a query returning the validation rows: text, label)",
                           fn);
    return SQLITE_ERROR;
  }
  if (t->cfg.validation == NN_VALIDATION_NONE) {
    for (int k = 1; k < 5; k++)
      if (given[k]) {
        *msg = sqlite3_mprintf("%s: option \"%s\" has no effect with \"validation\": \"none\" "
                               "(no validation split: no early stopping, the last epoch is kept)"
                               ": leave it out",
                               fn, keys[k]);
        return SQLITE_ERROR;
      }
    if (t->deploy == ATTN_DEPLOY_IF_BETTER && t->deploy_given) {
      *msg = sqlite3_mprintf("%s: option \"deploy\": \"if_better\" compares on the validation "
                             "split, and \"validation\": \"none\" has none: use \"always\" or "
                             "\"never\"",
                             fn);
      return SQLITE_ERROR;
    }
    if (!t->deploy_given) t->deploy = ATTN_DEPLOY_ALWAYS; /* nothing to compare on */
  }
  return SQLITE_OK;
}

/* A warm start ("from") neither pretrains nor self-trains (its vectors are the base model's, and
 * it trains one round); vectors given by "embeddings" are not pretrained either. Asked for
 * anyway (a value above 0), that is an error rather than an option silently dropped. */
static int check_start(attn_training *t, const nn_options *o, char **msg) {
  static const struct {
    const char *key, *with, *why;
  } refused[] = {
      {"pretrain_epochs", "from", "a warm start keeps the base model's vectors"},
      {"self_training", "from", "a warm start trains one round from the base model's weights"},
      {"pretrain_epochs", "embeddings", "the embedding starts as the given vectors"},
  };
  for (size_t k = 0; k < sizeof refused / sizeof refused[0]; k++) {
    const nn_json *v = nn_json_get(o->doc, refused[k].key);
    int with = strcmp(refused[k].with, "from") ? t->emb.table != NULL : t->base != NULL;
    if (!with || !v || v->type != NN_JSON_NUMBER || !(v->number > 0)) continue;
    *msg = sqlite3_mprintf("%s: option \"%s\" cannot be used with \"%s\": %s", t->fn,
                           refused[k].key, refused[k].with, refused[k].why);
    return SQLITE_ERROR;
  }
  return SQLITE_OK;
}

/* "from" (a model name: its deployed version, or "from_version") makes a warm start whose
 * config starts as the base model's; then read_run's keys, read_config's, and the checks of
 * what they give together. */
int attn_options_read(attn_training *t, const char *options, attn_options_reader reader,
                      char **msg) {
  sqlite3 *db = attn_conn_db(t->conn);
  const char *fn = t->fn;
  char err[NN_ERR_LEN] = "", *what = NULL, *got = NULL;
  nn_options o;
  int rc = SQLITE_OK;
  attn_options_clear(t);
  nn_config_default(&t->cfg);
  /* "" or only whitespace: no options, as the engine reads it (nothing to store as JSON) */
  if (!options || !options[strspn(options, " \t\n\r")]) return check_combinations(t, NULL, msg);
  t->options_text = sqlite3_mprintf("%s", options);
  if (!t->options_text) return SQLITE_NOMEM;
  /* parsed once, by the engine; its keys are applied after ext/'s are checked */
  rc = attn_options_parse(&o, fn, options, reader, msg);
  if (rc != SQLITE_OK) goto done;
  const nn_json *from = o.extra[ATTN_OPTION_FROM], *version = o.extra[ATTN_OPTION_FROM_VERSION];
  const nn_json *table = o.extra[ATTN_OPTION_EMBEDDINGS];
  if (from && from->type == NN_JSON_NULL) from = NULL; /* null: not given */
  if (version && version->type == NN_JSON_NULL) version = NULL;
  if (from && (from->type != NN_JSON_STRING || from->str_len == 0)) {
    got = from->type == NN_JSON_STRING ? NULL : attn_option_value(o.text, from);
    if (from->type != NN_JSON_STRING && !got) {
      rc = SQLITE_NOMEM;
      goto done;
    }
    *msg = sqlite3_mprintf("%s: option \"from\" must be the name of a model, got %s", fn,
                           got ? got : "\"\"");
    rc = SQLITE_ERROR;
  } else if (version && !(version->type == NN_JSON_NUMBER && version->is_integer)) {
    if (!(got = attn_option_value(o.text, version))) {
      rc = SQLITE_NOMEM;
      goto done;
    }
    *msg = sqlite3_mprintf("%s: option \"from_version\" must be an integer, got %s", fn, got);
    rc = SQLITE_ERROR;
  } else if (from && table && table->type != NN_JSON_NULL) {
    *msg = sqlite3_mprintf("%s: option \"embeddings\" cannot be used with \"from\": the "
                           "embedding starts as the base model's",
                           fn);
    rc = SQLITE_ERROR;
  } else if (version && !from) {
    *msg = sqlite3_mprintf("%s: option \"from_version\" needs \"from\" (the name of the model "
                           "to start from)",
                           fn);
    rc = SQLITE_ERROR;
  }
  if (rc != SQLITE_OK) goto done;
  if (from) {
    what = sqlite3_mprintf("%s: option \"from\"", fn);
    if (!what) {
      rc = SQLITE_NOMEM;
      goto done;
    }
    rc = version
             ? attn_model_acquire_version(t->conn, what, from->str, version->integer, &t->base, msg)
             : attn_model_acquire_deployed(t->conn, what, from->str, &t->base, msg);
    if (rc != SQLITE_OK) {
      t->base = NULL;
      goto done;
    }
    t->cfg = *nn_model_config(t->base->nn);
    /* the base's validation query is not stored: its rows are not this run's */
    if (t->cfg.validation == NN_VALIDATION_QUERY) t->cfg.validation = NN_VALIDATION_RANDOM;
    t->cfg.validation_rows = 0;
    t->from_name = sqlite3_mprintf("%s", from->str);
    t->from_version = t->base->version;
    if (!t->from_name) {
      rc = SQLITE_NOMEM;
      goto done;
    }
  }
  rc = read_run(t, &o, msg);
  if (rc != SQLITE_OK) goto done;
  rc = read_config(db, fn, &o, &t->cfg, &t->emb, msg);
  if (rc != SQLITE_OK) goto done;
  rc = check_combinations(t, &o, msg);
  if (rc != SQLITE_OK) goto done;
  if (t->base && t->emb.table) {
    *msg = sqlite3_mprintf("%s: option \"embeddings\" cannot be used with \"from\": the "
                           "embedding starts as the base model's",
                           fn);
    rc = SQLITE_ERROR;
    goto done;
  }
  rc = check_start(t, &o, msg); /* what a warm start or given vectors leave out */
  if (rc != SQLITE_OK) goto done;
  if (t->base && nn_config_check_warm_start(&t->cfg, nn_model_config(t->base->nn), err) != NN_OK) {
    *msg = sqlite3_mprintf("%s: %s", fn, err);
    rc = SQLITE_ERROR;
    goto done;
  }
  /* a model the store could not hold: refused before the query runs */
  rc = attn_store_check_size(db, fn, &t->cfg, 0, msg);
done:
  nn_options_free(&o);
  sqlite3_free(what);
  sqlite3_free(got);
  if (rc != SQLITE_OK) {
    attn_options_clear(t);
    if (!*msg) *msg = sqlite3_mprintf("%s: out of memory", fn);
  }
  return rc;
}

/* ------------------------------------------------------------------ after the trainer exists */

int attn_embeddings_apply(sqlite3 *db, const char *fn, nn_trainer *tr, const attn_embeddings *emb,
                          char **errmsg) {
  char err[NN_ERR_LEN] = "";
  float *vector = NULL;
  sqlite3_stmt *stmt = NULL;
  int rc = SQLITE_OK, found;
  int st = emb->freeze ? nn_trainer_freeze_embeddings(tr, 1, err) : NN_OK;
  if (st != NN_OK) return attn_nn_error(st, fn, err, errmsg);
  if (!emb->table) return SQLITE_OK;
  char *sql = sqlite3_mprintf("SELECT word, vector FROM \"%w\"", emb->table);
  vector = sqlite3_malloc64((sqlite3_uint64)emb->dim * sizeof *vector);
  if (!sql || !vector) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  if (sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) != SQLITE_OK) {
    *errmsg = sqlite3_mprintf("%s: option \"embeddings\": cannot read table '%s': %s", fn,
                              emb->table, sqlite3_errmsg(db));
    rc = SQLITE_ERROR;
    goto done;
  }
  sqlite3_int64 row = 0;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    row++;
    if (sqlite3_column_type(stmt, 0) == SQLITE_NULL || sqlite3_column_type(stmt, 1) == SQLITE_NULL)
      continue;
    const char *word = (const char *)sqlite3_column_text(stmt, 0);
    int len = sqlite3_column_bytes(stmt, 0);
    const unsigned char *blob = sqlite3_column_blob(stmt, 1);
    int bytes = sqlite3_column_bytes(stmt, 1);
    if (sqlite3_column_type(stmt, 1) != SQLITE_BLOB || bytes != 4 * emb->dim) {
      *errmsg = sqlite3_mprintf("%s: option \"embeddings\": the vector of '%.*s' (row %lld of "
                                "'%s') must be a BLOB of %d float32, got %d bytes",
                                fn, len > 60 ? 60 : len, word, (long long)row, emb->table, emb->dim,
                                bytes);
      rc = SQLITE_ERROR;
      goto done;
    }
    attn_floats_from_le(vector, blob, emb->dim);
    for (int k = 0; k < emb->dim; k++) {
      if (!isfinite(vector[k])) {
        *errmsg = sqlite3_mprintf("%s: option \"embeddings\": the vector of '%.*s' in '%s' has "
                                  "a value that is not a finite number",
                                  fn, len > 60 ? 60 : len, word, emb->table);
        rc = SQLITE_ERROR;
        goto done;
      }
    }
    int st = nn_trainer_set_embedding(tr, word, len, vector, emb->dim, &found, err);
    if (st != NN_OK) {
      rc = attn_nn_error(st, fn, err, errmsg);
      goto done;
    }
  }
  if (rc != SQLITE_DONE) {
    *errmsg = sqlite3_mprintf("%s: option \"embeddings\": cannot read table '%s': %s", fn,
                              emb->table, sqlite3_errmsg(db));
    rc = SQLITE_ERROR;
    goto done;
  }
  rc = SQLITE_OK;
done:
  sqlite3_finalize(stmt);
  sqlite3_free(sql);
  sqlite3_free(vector);
  return rc;
}
