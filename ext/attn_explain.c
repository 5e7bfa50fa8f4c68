/* attn_explain.c -- attention beside a measure that is faithful by construction: each token's
 * leave-one-out occlusion, the drop of the predicted class's probability when the token is left
 * out of the text.
 *
 *   SELECT * FROM attn_explain('news', 'Final tennis tournament starts next week');
 *   --  position | token | attention | occlusion | start | end
 *   --  position, token, start, end: as attn_weights; attention: attn_weights' weight;
 *   --  occlusion = p(predicted class | the tokens) - p(predicted class | the tokens without this
 *   --  one); negative when leaving the token out raises the probability.
 *   SELECT t.rowid, e.* FROM test AS t, attn_explain('news', t.title) AS e;  -- over a table
 *
 * Leave-one-out runs on the preprocessed tokens (after max_len truncation): a one-token text left
 * empty reads as one <UNK>, as the tokenizer reads an empty text. The text and its n leave-one-out
 * sequences go through the model in one batched forward pass (attn_explain_occlusion,
 * attn_infer.c): the attention column comes from that pass, equal to attn_weights' to float
 * rounding (one-row and batched products add in different orders).
 * A NULL text gives no rows.
 */
#include <string.h>

#include "attn_ext.h"

typedef struct attn_explain_cursor {
  sqlite3_vtab_cursor base;
  attn_explain ex;
  attn_model *model;
  attn_interrupt interrupt;
  int nrows, row;
} attn_explain_cursor;

enum {
  ATTN_EXPLAIN_COL_POSITION,
  ATTN_EXPLAIN_COL_TOKEN,
  ATTN_EXPLAIN_COL_ATTENTION,
  ATTN_EXPLAIN_COL_OCCLUSION,
  ATTN_EXPLAIN_COL_START,
  ATTN_EXPLAIN_COL_END,
  ATTN_EXPLAIN_COL_ARG_NAME,
  ATTN_EXPLAIN_COL_ARG_TEXT
};
static const char attn_explain_schema[] =
    "CREATE TABLE x(position INTEGER, token TEXT, attention REAL, occlusion REAL, "
    "start INTEGER, \"end\" INTEGER, arg_name HIDDEN, arg_text HIDDEN)";

static int attn_explain_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                                sqlite3_vtab **out, char **errmsg) {
  return attn_vtab_connect(db, attn_explain_schema, SQLITE_VTAB_INNOCUOUS, aux, 0,
                           sizeof(attn_explain_cursor), out);
}

static int attn_explain_best_index(sqlite3_vtab *base, sqlite3_index_info *info) {
  return attn_vtab_best_index(base, info, ATTN_EXPLAIN_COL_ARG_NAME, 2, 2,
                              "attn_explain: expected 2 arguments: attn_explain(name, text)");
}

static int attn_explain_close(sqlite3_vtab_cursor *base) {
  attn_explain_cursor *cur = (attn_explain_cursor *)base;
  attn_explain_free(&cur->ex);
  attn_model_release(cur->model);
  attn_interrupt_end(&cur->interrupt);
  sqlite3_free(cur);
  return SQLITE_OK;
}

static int attn_explain_filter(sqlite3_vtab_cursor *base, int idx_num, const char *idx_str,
                               int argc, sqlite3_value **argv) {
  const char *fn = "attn_explain";
  attn_explain_cursor *cur = (attn_explain_cursor *)base;
  attn_vtab *vtab = (attn_vtab *)base->pVtab;
  char *msg = NULL;
  const char *name = NULL;
  cur->nrows = cur->row = 0;
  attn_model_release(cur->model);
  cur->model = NULL;
  cur->interrupt.db = attn_conn_db(vtab->conn);
  int rc = attn_name_value(fn, argc > 0 ? argv[0] : NULL, &name, &msg);
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
  rc = attn_explain_occlusion(&cur->ex, cur->model, ws, &cur->interrupt, text, len, fn, &msg);
  if (rc != SQLITE_OK) goto done;
  cur->nrows = cur->ex.n;
done:
  if (rc != SQLITE_OK) return attn_vtab_fail(base->pVtab, rc, msg, fn);
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
  int i = cur->row;
  const nn_token *t = &cur->ex.tokens[i];
  switch (col) {
  case ATTN_EXPLAIN_COL_POSITION: sqlite3_result_int(ctx, i); break;
  case ATTN_EXPLAIN_COL_TOKEN:
    sqlite3_result_text(ctx, cur->ex.token_text[i] ? cur->ex.token_text[i] : "", -1,
                        SQLITE_TRANSIENT);
    break;
  case ATTN_EXPLAIN_COL_ATTENTION: sqlite3_result_double(ctx, cur->ex.weights[i]); break;
  case ATTN_EXPLAIN_COL_OCCLUSION: sqlite3_result_double(ctx, cur->ex.occlusion[i]); break;
  case ATTN_EXPLAIN_COL_START:
    if (t->start >= 0) sqlite3_result_int(ctx, t->start);
    break;
  case ATTN_EXPLAIN_COL_END:
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

const sqlite3_module attn_explain_module = {
    .iVersion = 0,
    .xCreate = NULL, /* eponymous only */
    .xConnect = attn_explain_connect,
    .xBestIndex = attn_explain_best_index,
    .xDisconnect = attn_vtab_disconnect,
    .xOpen = attn_vtab_open,
    .xClose = attn_explain_close,
    .xFilter = attn_explain_filter,
    .xNext = attn_explain_next,
    .xEof = attn_explain_eof,
    .xColumn = attn_explain_column,
    .xRowid = attn_explain_rowid,
};
