/* attn_options.c -- attn_train's and attn_fit's options: the JSON object of nn_config keys, plus
 * "embeddings" (the name of a table of (word, vector) rows, e.g. one attn_vectors_load filled)
 * and "freeze_embeddings" (attn_train_options, attn_embeddings_apply). Words are matched exactly
 * against the vocabulary; rows they set start as the vectors, the others keep the N(0, 1)
 * initialisation; without "embed_dim" the embedding takes the vectors' dimension. The options
 * text is parsed once, by the engine (attn_options_parse: nn_options_parse hands back the keys
 * ext/ reads), and shown in messages as attn_option_value writes a value.
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

int attn_train_options(sqlite3 *db, const char *fn, const nn_options *o, nn_config *cfg,
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
