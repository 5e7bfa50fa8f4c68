/* attn_predict.c -- one text at a time: the label, the class probabilities and the attention
 * weights of the deployed model.
 *
 *   SELECT attn_predict('news', title) FROM headlines;     -- label of the deployed 'news'
 *   SELECT attn_predict(title) FROM headlines;             -- the default model (most recently
 *                                                          -- deployed one in the database)
 *   SELECT attn_predict('news', title, 0.8) FROM headlines;             -- NULL below 0.8
 *   SELECT attn_predict('news', title, 0.8, 'unknown') FROM headlines;  -- 'unknown' below 0.8
 *   SELECT * FROM attn_probs('news', 'Final tennis tournament starts next week');
 *   --  label | probability                  all classes, most probable first
 *   SELECT * FROM attn_weights('news', 'Final tennis tournament starts next week');
 *   --  position | token | weight | start | end
 *   --  position: 0-based token index; token: the cleaned token; start, end: byte span
 *   --  [start, end) of the token in the text (NULL when it has none); weights sum to 1.
 *
 * attn_predict costs tokenize + forward per row: the model is looked up once per statement
 * (attn_model_get keeps it as auxdata of the constant name argument) and the connection's
 * workspace is reused. A NULL text gives NULL. With min_probability (a number from 0 to 1), a
 * prediction whose probability (the softmax of the top class, as attn_classify reports it:
 * attn_top_class) is below it gives NULL, or the fallback value given as the fourth argument,
 * returned as it is (any type).
 */
#include <stdlib.h>
#include <string.h>

#include "attn_ext.h"

/* ------------------------------------------------------------------ attn_predict */

#define ATTN_STACK_CLASSES 64

void attn_predict_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  const char *fn = "attn_predict";
  const char *name = NULL;
  char *msg = NULL, err[NN_ERR_LEN];
  attn_model *model = NULL;
  int rc;
  double min_probability = 0;
  /* argc: 1 (text), 2 (name, text), 3 (+ min_probability), 4 (+ fallback) */
  if (argc >= 2 && (rc = attn_name_value(fn, argv[0], &name, &msg)) != SQLITE_OK) goto error;
  if (argc >= 3 && (rc = attn_probability_value(fn, "min_probability", argv[2], &min_probability,
                                                &msg)) != SQLITE_OK)
    goto error;
  rc = attn_model_get(ctx, fn, name, argc >= 2 ? 0 : -1, &model, &msg);
  if (rc != SQLITE_OK) goto error;
  sqlite3_value *value = argv[argc == 1 ? 0 : 1];
  if (sqlite3_value_type(value) == SQLITE_NULL) {
    sqlite3_result_null(ctx);
    return;
  }
  const char *text = (const char *)sqlite3_value_text(value);
  int len = sqlite3_value_bytes(value);
  nn_workspace *ws = attn_conn_workspace(sqlite3_user_data(ctx), &msg);
  if (!ws) {
    rc = SQLITE_NOMEM;
    goto error;
  }
  nn_model *nn = model->nn;
  int C = nn_model_num_classes(nn);
  float stack_logits[ATTN_STACK_CLASSES], *logits = stack_logits, *heap = NULL;
  if (C > ATTN_STACK_CLASSES) {
    logits = heap = sqlite3_malloc64((sqlite3_uint64)C * sizeof *logits);
    if (!heap) {
      rc = SQLITE_NOMEM;
      goto error;
    }
  }
  int st = attn_forward_text(nn, ws, text, len, logits, NULL, err);
  if (st != NN_OK) {
    rc = attn_nn_error(st, fn, err, &msg);
    sqlite3_free(heap);
    goto error;
  }
  float top = 1;
  int best = attn_top_class(logits, C, argc >= 3 ? &top : NULL); /* no exp() without a threshold */
  sqlite3_free(heap);
  if (argc >= 3 && !((double)top >= min_probability)) { /* NaN (a broken model): abstain */
    if (argc == 4) sqlite3_result_value(ctx, argv[3]);
    else sqlite3_result_null(ctx);
    return;
  }
  sqlite3_result_text(ctx, nn_model_label(nn, best), -1, SQLITE_TRANSIENT);
  return;
error:
  attn_result_error(ctx, rc, msg, fn);
}

/* ------------------------------------------------------------------ attn_probs, attn_weights */

enum { ATTN_PROBS = 0, ATTN_WEIGHTS = 1 }; /* the mode: which of the two names was called */

/* Columns of attn_probs and of attn_weights; the arguments are the hidden columns at the end. */
enum {
  ATTN_PROBS_COL_LABEL,
  ATTN_PROBS_COL_PROBABILITY,
  ATTN_PROBS_COL_ARG_NAME,
  ATTN_PROBS_COL_ARG_TEXT
};
static const char attn_probs_schema[] =
    "CREATE TABLE x(label TEXT, probability REAL, arg_name HIDDEN, arg_text HIDDEN)";
enum {
  ATTN_WEIGHTS_COL_POSITION,
  ATTN_WEIGHTS_COL_TOKEN,
  ATTN_WEIGHTS_COL_WEIGHT,
  ATTN_WEIGHTS_COL_START,
  ATTN_WEIGHTS_COL_END,
  ATTN_WEIGHTS_COL_ARG_NAME,
  ATTN_WEIGHTS_COL_ARG_TEXT
};
static const char attn_weights_schema[] =
    "CREATE TABLE x(position INTEGER, token TEXT, weight REAL, start INTEGER, \"end\" INTEGER, "
    "arg_name HIDDEN, arg_text HIDDEN)";
/* attn_weights' columns as the token columns of the cursor */
static const int attn_weights_token[] = {[ATTN_WEIGHTS_COL_POSITION] = ATTN_TOKEN_POSITION,
                                         [ATTN_WEIGHTS_COL_TOKEN] = ATTN_TOKEN_TEXT,
                                         [ATTN_WEIGHTS_COL_WEIGHT] = ATTN_TOKEN_ATTENTION,
                                         [ATTN_WEIGHTS_COL_START] = ATTN_TOKEN_START,
                                         [ATTN_WEIGHTS_COL_END] = ATTN_TOKEN_END};

/* One module under two names: argv[0] is the name it was called by. */
static int attn_probs_weights_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                                      sqlite3_vtab **out, char **errmsg) {
  int mode = strcmp(argv[0], "attn_probs") == 0 ? ATTN_PROBS : ATTN_WEIGHTS;
  return attn_vtab_connect(db, mode == ATTN_PROBS ? attn_probs_schema : attn_weights_schema,
                           SQLITE_VTAB_INNOCUOUS, aux, mode, sizeof(attn_text_cursor), out);
}

static int attn_probs_weights_best_index(sqlite3_vtab *base, sqlite3_index_info *info) {
  if (((attn_vtab *)base)->mode == ATTN_PROBS)
    return attn_vtab_best_index(base, info, ATTN_PROBS_COL_ARG_NAME, 2, 2,
                                "attn_probs: expected 2 arguments: attn_probs(name, text)");
  return attn_vtab_best_index(base, info, ATTN_WEIGHTS_COL_ARG_NAME, 2, 2,
                              "attn_weights: expected 2 arguments: attn_weights(name, text)");
}

static int attn_probs_weights_filter(sqlite3_vtab_cursor *base, int idx_num, const char *idx_str,
                                     int argc, sqlite3_value **argv) {
  attn_text_cursor *cur = (attn_text_cursor *)base;
  attn_vtab *vtab = (attn_vtab *)base->pVtab;
  const char *fn = vtab->mode == ATTN_PROBS ? "attn_probs" : "attn_weights";
  char *msg = NULL;
  int rc = attn_text_cursor_begin(cur, vtab->conn, fn, argc, argv, &msg);
  if (rc != SQLITE_OK || !cur->text) goto done;
  rc = attn_text_read(&cur->reading, cur->model, cur->ws, cur->text, cur->len,
                      vtab->mode == ATTN_WEIGHTS, fn, &msg);
  if (rc != SQLITE_OK) goto done;
  if (vtab->mode == ATTN_PROBS) {
    int C = nn_model_num_classes(cur->model->nn);
    sqlite3_free(cur->order);
    cur->order = sqlite3_malloc64((sqlite3_uint64)C * sizeof *cur->order);
    if (!cur->order) {
      rc = SQLITE_NOMEM;
      goto done;
    }
    /* insertion sort: most probable first, ties by class id */
    for (int c = 0; c < C; c++) {
      int j = c;
      while (j > 0 && cur->reading.probs[cur->order[j - 1]] < cur->reading.probs[c]) {
        cur->order[j] = cur->order[j - 1];
        j--;
      }
      cur->order[j] = c;
    }
    cur->nrows = C;
  } else {
    cur->nrows = cur->reading.n;
  }
done:
  if (rc != SQLITE_OK) {
    return attn_vtab_fail(base->pVtab, rc, msg, fn);
  }
  return SQLITE_OK;
}

static int attn_probs_weights_column(sqlite3_vtab_cursor *base, sqlite3_context *ctx, int col) {
  attn_text_cursor *cur = (attn_text_cursor *)base;
  attn_vtab *vtab = (attn_vtab *)base->pVtab;
  if (vtab->mode == ATTN_PROBS) {
    int c = cur->order[cur->row];
    if (col == ATTN_PROBS_COL_LABEL)
      sqlite3_result_text(ctx, nn_model_label(cur->model->nn, c), -1, SQLITE_TRANSIENT);
    else if (col == ATTN_PROBS_COL_PROBABILITY) sqlite3_result_double(ctx, cur->reading.probs[c]);
    return SQLITE_OK;
  }
  if (col >= 0 && col < ATTN_WEIGHTS_COL_ARG_NAME)
    attn_text_cursor_token(ctx, cur, attn_weights_token[col]);
  return SQLITE_OK;
}

const sqlite3_module attn_probs_weights_module = {
    .iVersion = 0,
    .xCreate = NULL, /* eponymous only */
    .xConnect = attn_probs_weights_connect,
    .xBestIndex = attn_probs_weights_best_index,
    .xDisconnect = attn_vtab_disconnect,
    .xOpen = attn_vtab_open,
    .xClose = attn_text_cursor_close,
    .xFilter = attn_probs_weights_filter,
    .xNext = attn_text_cursor_next,
    .xEof = attn_text_cursor_eof,
    .xColumn = attn_probs_weights_column,
    .xRowid = attn_text_cursor_rowid,
};
