/* attn_embed.c -- the attention-pooled representation of a text as a vector BLOB: the SQL
 * function attn_embed.
 *
 *   SELECT attn_embed('news', 'Hawks win the cup final');   -- BLOB of D float32, little-endian
 *   -- with sqlite-vec: vec_length(attn_embed(...)) = D, vec_to_json(...), KNN on a vec0 table:
 *   CREATE VIRTUAL TABLE news_vec USING vec0(embedding float[128]);
 *   INSERT INTO news_vec(rowid, embedding) SELECT rowid, attn_embed('news', title) FROM headlines;
 *   SELECT rowid, distance FROM news_vec
 *   WHERE embedding MATCH attn_embed('news', 'Cup final tonight') AND k = 5;
 *
 * The vector is the context that attention pooling makes of the recurrent outputs (the weighted
 * sum of the hidden states, or of their value projections for "self" attention), the input of
 * fc1: D = hidden x directions numbers (nn_model_forward_pooled), times the members of an
 * ensemble (each member's context in turn: each has its own space). The BLOB is D float32 in
 * little-endian byte order, whatever the host (attn_floats_to_le): the layout of sqlite-vec's
 * float vectors, of attn_vectors_load's and of numpy's '<f4'. A NULL text gives NULL; an empty
 * text is one <UNK> token, as attn_predict reads it. Innocuous: the model is looked up as
 * attn_predict does (once per statement for a constant name).
 */
#include <string.h>

#include "attn_ext.h"

void attn_embed_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  const char *fn = "attn_embed";
  const char *name = NULL;
  char *msg = NULL, err[NN_ERR_LEN];
  attn_model *model = NULL;
  void *heap = NULL;
  int rc = attn_name_value(fn, argv[0], &name, &msg);
  if (rc != SQLITE_OK) goto error;
  rc = attn_model_get(ctx, fn, name, 0, &model, &msg);
  if (rc != SQLITE_OK) goto error;
  if (sqlite3_value_type(argv[1]) == SQLITE_NULL) {
    sqlite3_result_null(ctx);
    return;
  }
  const char *text = (const char *)sqlite3_value_text(argv[1]);
  int len = sqlite3_value_bytes(argv[1]);
  if (!text) {
    rc = SQLITE_NOMEM;
    goto error;
  }
  nn_workspace *ws = attn_conn_workspace(sqlite3_user_data(ctx), &msg);
  if (!ws) {
    rc = SQLITE_NOMEM;
    goto error;
  }
  nn_model *nn = model->nn;
  int C = nn_model_num_classes(nn), D = nn_model_pooled_dim(nn);
  size_t floats = (size_t)C + 2 * (size_t)D; /* logits, pooled, little-endian bytes */
  heap = sqlite3_malloc64(floats * sizeof(float));
  if (!heap) {
    rc = SQLITE_NOMEM;
    goto error;
  }
  float *logits = heap, *pooled = logits + C;
  unsigned char *blob = (unsigned char *)(pooled + D);
  int st = attn_forward_text(nn, ws, text, len, logits, pooled, err);
  if (st != NN_OK) {
    rc = attn_nn_error(st, fn, err, &msg);
    goto error;
  }
  attn_floats_to_le(blob, pooled, D);
  sqlite3_result_blob64(ctx, blob, 4 * (sqlite3_uint64)D, SQLITE_TRANSIENT);
  sqlite3_free(heap);
  return;
error:
  sqlite3_free(heap);
  attn_result_error(ctx, rc, msg, fn);
}
