/* attn_predict.c -- one text at a time: the label, the class probabilities and the attention
 * weights of the deployed model.
 *
 *   SELECT attn_predict('news', title) FROM headlines;     -- label of the deployed 'news'
 *   SELECT attn_predict(title) FROM headlines;             -- the default model (most recently
 *                                                          -- deployed one in the database)
 *   SELECT * FROM attn_probs('news', 'Final tennis tournament starts next week');
 *   --  label | probability                  all classes, most probable first
 *   SELECT * FROM attn_weights('news', 'Final tennis tournament starts next week');
 *   --  position | token | weight | start | end
 *   --  position: 0-based token index; token: the cleaned token; start, end: byte span
 *   --  [start, end) of the token in the text (NULL when it has none); weights sum to 1.
 *
 * attn_predict costs tokenize + forward per row: the model is looked up once per statement
 * (attn_model_get keeps it as auxdata of the constant name argument) and the connection's
 * workspace is reused. A NULL text gives NULL.
 */
#include <stdlib.h>
#include <string.h>

#include "attn_ext.h"

/* ------------------------------------------------------------------ attn_predict */

#define ATTN_STACK_TOKENS 256
#define ATTN_STACK_CLASSES 64

void attn_predict_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  const char *fn = "attn_predict";
  const char *name = NULL;
  char *msg = NULL, err[NN_ERR_LEN];
  attn_model *model = NULL;
  int rc;
  if (argc == 2 && (rc = attn_name_value(fn, argv[0], &name, &msg)) != SQLITE_OK) goto error;
  rc = attn_model_get(ctx, fn, name, argc == 2 ? 0 : -1, &model, &msg);
  if (rc != SQLITE_OK) goto error;
  sqlite3_value *value = argv[argc - 1];
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
  const nn_config *cfg = nn_model_config(nn);
  int T = cfg->max_len > 0 ? cfg->max_len : 1, C = nn_model_num_classes(nn);
  nn_token stack_tokens[ATTN_STACK_TOKENS], *tokens = stack_tokens;
  int stack_ids[ATTN_STACK_TOKENS], *ids = stack_ids;
  float stack_logits[ATTN_STACK_CLASSES], *logits = stack_logits;
  void *heap = NULL;
  if (T > ATTN_STACK_TOKENS || C > ATTN_STACK_CLASSES) {
    heap = sqlite3_malloc64((sqlite3_uint64)T * (sizeof *tokens + sizeof *ids) +
                            (sqlite3_uint64)C * sizeof *logits);
    if (!heap) {
      rc = SQLITE_NOMEM;
      goto error;
    }
    tokens = heap;
    ids = (int *)(tokens + T);
    logits = (float *)(ids + T);
  }
  int n = nn_text_encode(tokens, text ? text : "", text ? len : 0, cfg, nn_model_vocab(nn));
  if (n < 1) n = 1, tokens[0].id = NN_UNK;
  if (n > T) n = T;
  for (int i = 0; i < n; i++) ids[i] = tokens[i].id;
  nn_batch batch = {ids, &n, NULL, 1, n};
  if (nn_model_forward(nn, ws, &batch, 0, NULL, logits, NULL, err) != NN_OK) {
    msg = sqlite3_mprintf("%s: %s", fn, err);
    sqlite3_free(heap);
    rc = SQLITE_ERROR;
    goto error;
  }
  int best = 0;
  for (int c = 1; c < C; c++)
    if (logits[c] > logits[best]) best = c;
  sqlite3_free(heap);
  sqlite3_result_text(ctx, nn_model_label(nn, best), -1, SQLITE_TRANSIENT);
  return;
error:
  attn_result_error(ctx, rc, msg, fn);
}

/* ------------------------------------------------------------------ attn_probs, attn_weights */

enum { ATTN_PROBS = 0, ATTN_WEIGHTS = 1 };

typedef struct attn_explain_vtab {
  sqlite3_vtab base;
  attn_conn *conn;
  int mode;
} attn_explain_vtab;

typedef struct attn_explain_cursor {
  sqlite3_vtab_cursor base;
  attn_explain ex;
  attn_model *model;
  int *order; /* probs: class ids, most probable first */
  int nrows, row;
} attn_explain_cursor;

#define ATTN_PROBS_FIRST_ARG 2
#define ATTN_WEIGHTS_FIRST_ARG 5

static int attn_explain_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                                sqlite3_vtab **out, char **errmsg, int mode) {
  int rc = attn_vtab_connect(
      db, mode == ATTN_PROBS
              ? "CREATE TABLE x(label TEXT, probability REAL, arg_name HIDDEN, arg_text HIDDEN)"
              : "CREATE TABLE x(position INTEGER, token TEXT, weight REAL, start INTEGER, "
                "\"end\" INTEGER, arg_name HIDDEN, arg_text HIDDEN)",
      sizeof(attn_explain_vtab), SQLITE_VTAB_INNOCUOUS, out);
  if (rc != SQLITE_OK) return rc;
  attn_explain_vtab *vtab = (attn_explain_vtab *)*out;
  vtab->conn = aux;
  vtab->mode = mode;
  return SQLITE_OK;
}

static int attn_probs_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                              sqlite3_vtab **out, char **errmsg) {
  return attn_explain_connect(db, aux, argc, argv, out, errmsg, ATTN_PROBS);
}

static int attn_weights_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                                sqlite3_vtab **out, char **errmsg) {
  return attn_explain_connect(db, aux, argc, argv, out, errmsg, ATTN_WEIGHTS);
}

static int attn_explain_best_index(sqlite3_vtab *base, sqlite3_index_info *info) {
  attn_explain_vtab *vtab = (attn_explain_vtab *)base;
  if (vtab->mode == ATTN_PROBS)
    return attn_vtab_best_index(base, info, ATTN_PROBS_FIRST_ARG, 2, 2,
                                "attn_probs: expected 2 arguments: attn_probs(name, text)");
  return attn_vtab_best_index(base, info, ATTN_WEIGHTS_FIRST_ARG, 2, 2,
                              "attn_weights: expected 2 arguments: attn_weights(name, text)");
}

static int attn_explain_open(sqlite3_vtab *vtab, sqlite3_vtab_cursor **out) {
  return attn_vtab_cursor_new(sizeof(attn_explain_cursor), out);
}

static int attn_explain_close(sqlite3_vtab_cursor *base) {
  attn_explain_cursor *cur = (attn_explain_cursor *)base;
  attn_explain_free(&cur->ex);
  attn_model_release(cur->model);
  sqlite3_free(cur->order);
  sqlite3_free(cur);
  return SQLITE_OK;
}

static int attn_explain_filter(sqlite3_vtab_cursor *base, int idx_num, const char *idx_str,
                               int argc, sqlite3_value **argv) {
  attn_explain_cursor *cur = (attn_explain_cursor *)base;
  attn_explain_vtab *vtab = (attn_explain_vtab *)base->pVtab;
  const char *fn = vtab->mode == ATTN_PROBS ? "attn_probs" : "attn_weights";
  char *msg = NULL;
  int rc;
  cur->nrows = cur->row = 0;
  attn_model_release(cur->model);
  cur->model = NULL;
  const char *name = NULL;
  rc = attn_name_value(fn, argc > 0 ? argv[0] : NULL, &name, &msg);
  if (rc != SQLITE_OK) goto done;
  rc = attn_model_acquire(vtab->conn, fn, name, &cur->model, &msg);
  if (rc != SQLITE_OK) goto done;
  if (argc < 2 || sqlite3_value_type(argv[1]) == SQLITE_NULL) goto done; /* no rows */
  const char *text = (const char *)sqlite3_value_text(argv[1]);
  int len = sqlite3_value_bytes(argv[1]);
  nn_workspace *ws = attn_conn_workspace(vtab->conn, &msg);
  if (!ws) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  rc = attn_explain_text(&cur->ex, cur->model, ws, text, len, vtab->mode == ATTN_WEIGHTS, fn,
                         &msg);
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
      while (j > 0 && cur->ex.probs[cur->order[j - 1]] < cur->ex.probs[c]) {
        cur->order[j] = cur->order[j - 1];
        j--;
      }
      cur->order[j] = c;
    }
    cur->nrows = C;
  } else {
    cur->nrows = cur->ex.n;
  }
done:
  if (rc != SQLITE_OK) {
    attn_vtab_error(base->pVtab, msg ? msg : sqlite3_mprintf("%s: out of memory", fn));
    return rc;
  }
  return SQLITE_OK;
}

static int attn_explain_next(sqlite3_vtab_cursor *base) {
  ((attn_explain_cursor *)base)->row++;
  return SQLITE_OK;
}

static int attn_explain_eof(sqlite3_vtab_cursor *base) {
  attn_explain_cursor *cur = (attn_explain_cursor *)base;
  return cur->row >= cur->nrows;
}

static int attn_explain_column(sqlite3_vtab_cursor *base, sqlite3_context *ctx, int col) {
  attn_explain_cursor *cur = (attn_explain_cursor *)base;
  attn_explain_vtab *vtab = (attn_explain_vtab *)base->pVtab;
  int i = cur->row;
  if (vtab->mode == ATTN_PROBS) {
    int c = cur->order[i];
    if (col == 0)
      sqlite3_result_text(ctx, nn_model_label(cur->model->nn, c), -1, SQLITE_TRANSIENT);
    else if (col == 1)
      sqlite3_result_double(ctx, cur->ex.probs[c]);
    return SQLITE_OK;
  }
  const nn_token *t = &cur->ex.tokens[i];
  switch (col) {
  case 0: sqlite3_result_int(ctx, i); break;
  case 1: sqlite3_result_text(ctx, cur->ex.token_text[i] ? cur->ex.token_text[i] : "", -1,
                              SQLITE_TRANSIENT);
    break;
  case 2: sqlite3_result_double(ctx, cur->ex.weights[i]); break;
  case 3:
    if (t->start >= 0) sqlite3_result_int(ctx, t->start);
    break;
  case 4:
    if (t->start >= 0) sqlite3_result_int(ctx, t->end);
    break;
  default: break;
  }
  return SQLITE_OK;
}

static int attn_explain_rowid(sqlite3_vtab_cursor *base, sqlite_int64 *rowid) {
  *rowid = ((attn_explain_cursor *)base)->row + 1;
  return SQLITE_OK;
}

#define ATTN_EXPLAIN_MODULE(connect)                                                           \
  {                                                                                             \
    0, NULL, connect, attn_explain_best_index, attn_vtab_disconnect, NULL, attn_explain_open, \
        attn_explain_close, attn_explain_filter, attn_explain_next, attn_explain_eof,           \
        attn_explain_column, attn_explain_rowid, NULL, NULL, NULL, NULL, NULL, NULL, NULL,     \
        NULL, NULL, NULL, NULL                                                                   \
  }

const sqlite3_module attn_probs_module = ATTN_EXPLAIN_MODULE(attn_probs_connect);
const sqlite3_module attn_weights_module = ATTN_EXPLAIN_MODULE(attn_weights_connect);

