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
 * sequences go through the model in one batched forward pass (attn_text_occlusion,
 * attn_infer.c): the attention column comes from that pass, equal to attn_weights' to float
 * rounding (one-row and batched products add in different orders).
 * A NULL text gives no rows.
 */
#include <string.h>

#include "attn_ext.h"

/* Columns: the token columns of the cursor, in their order; the arguments are the hidden columns
 * at the end. */
enum {
  ATTN_EXPLAIN_COL_POSITION = ATTN_TOKEN_POSITION,
  ATTN_EXPLAIN_COL_TOKEN = ATTN_TOKEN_TEXT,
  ATTN_EXPLAIN_COL_ATTENTION = ATTN_TOKEN_ATTENTION,
  ATTN_EXPLAIN_COL_OCCLUSION = ATTN_TOKEN_OCCLUSION,
  ATTN_EXPLAIN_COL_START = ATTN_TOKEN_START,
  ATTN_EXPLAIN_COL_END = ATTN_TOKEN_END,
  ATTN_EXPLAIN_COL_ARG_NAME,
  ATTN_EXPLAIN_COL_ARG_TEXT
};
static const char attn_explain_schema[] =
    "CREATE TABLE x(position INTEGER, token TEXT, attention REAL, occlusion REAL, "
    "start INTEGER, \"end\" INTEGER, arg_name HIDDEN, arg_text HIDDEN)";

static int attn_explain_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                                sqlite3_vtab **out, char **errmsg) {
  return attn_vtab_connect(db, attn_explain_schema, SQLITE_VTAB_INNOCUOUS, aux, 0,
                           sizeof(attn_text_cursor), out);
}

static int attn_explain_best_index(sqlite3_vtab *base, sqlite3_index_info *info) {
  return attn_vtab_best_index(base, info, ATTN_EXPLAIN_COL_ARG_NAME, 2, 2,
                              "attn_explain: expected 2 arguments: attn_explain(name, text)");
}

static int attn_explain_filter(sqlite3_vtab_cursor *base, int idx_num, const char *idx_str,
                               int argc, sqlite3_value **argv) {
  const char *fn = "attn_explain";
  attn_text_cursor *cur = (attn_text_cursor *)base;
  attn_vtab *vtab = (attn_vtab *)base->pVtab;
  char *msg = NULL;
  int rc = attn_text_cursor_begin(cur, vtab->conn, fn, argc, argv, &msg);
  if (rc != SQLITE_OK || !cur->text) goto done;
  rc = attn_text_occlusion(&cur->reading, cur->model, cur->ws, &cur->interrupt, cur->text, cur->len,
                           fn, &msg);
  if (rc != SQLITE_OK) goto done;
  cur->nrows = cur->reading.n;
done:
  if (rc != SQLITE_OK) return attn_vtab_fail(base->pVtab, rc, msg, fn);
  return SQLITE_OK;
}

static int attn_explain_column(sqlite3_vtab_cursor *base, sqlite3_context *ctx, int col) {
  if (col < ATTN_EXPLAIN_COL_ARG_NAME) attn_text_cursor_token(ctx, (attn_text_cursor *)base, col);
  return SQLITE_OK;
}

const sqlite3_module attn_explain_module = {
    .iVersion = 0,
    .xCreate = NULL, /* eponymous only */
    .xConnect = attn_explain_connect,
    .xBestIndex = attn_explain_best_index,
    .xDisconnect = attn_vtab_disconnect,
    .xOpen = attn_vtab_open,
    .xClose = attn_text_cursor_close,
    .xFilter = attn_explain_filter,
    .xNext = attn_text_cursor_next,
    .xEof = attn_text_cursor_eof,
    .xColumn = attn_explain_column,
    .xRowid = attn_text_cursor_rowid,
};
