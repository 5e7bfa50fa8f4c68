/* attn_viz.h -- what the visualisation files of the extension share: the SVG writer
 * (attn_svg.c), sentence-to-sentence attention (attn_matrix.c) and word vectors (attn_vectors.c).
 * attn_viz_register (attn_viz.c, declared in attn_ext.h) registers all of them.
 */
#ifndef ATTNEXT_ATTN_VIZ_H
#define ATTNEXT_ATTN_VIZ_H

#include "attn_ext.h"

/* ------------------------------------------------------------------ SVG writer (attn_svg.c) */

/* Every SVG the extension writes is a complete, well-formed XML document: text is valid UTF-8
 * (invalid bytes and characters XML forbids become U+FFFD), & < > " ' are escaped, labels are cut
 * to a number of characters with an ellipsis, and the picture's size is bounded by its caller. */

/* Append s (len bytes, any bytes) as XML character data / attribute text, at most max_chars
 * characters (code points; longer: the first max_chars - 1 and an ellipsis). Returns the number
 * of characters written. */
int attn_svg_text(sqlite3_str *out, const char *s, int len, int max_chars);
/* Columns of a monospace font that what attn_svg_text writes takes (wide characters: 2). */
int attn_svg_text_columns(const char *s, int len, int max_chars);
/* Bytes of the first max_chars characters of s (len bytes), for cutting a string before
 * formatting it; invalid bytes count as one character each. */
int attn_svg_prefix_bytes(const char *s, int len, int max_chars);
/* Width in pixels of n columns of the monospace font at font size `size`. */
double attn_svg_mono_width(int n, double size);

/* Colour of t in [0, 1] on the extension's sequential scale (white -> dark red) as "#rrggbb";
 * out must hold 8 bytes. attn_svg_ink: the text colour readable on it. */
void attn_svg_color(char *out, double t);
const char *attn_svg_ink(double t);

/* <?xml ...?><svg ...> with a white background and <title> (title_len bytes; -1: strlen). */
void attn_svg_begin(sqlite3_str *out, int width, int height, const char *title, int title_len);
/* A horizontal colour bar from lo to hi with its caption at (x, y), width w. */
void attn_svg_legend(sqlite3_str *out, double x, double y, double w, double lo, double hi,
                     const char *caption);
/* Close the document and make it the function's result (or an out-of-memory error). */
void attn_svg_result(sqlite3_context *ctx, sqlite3_str *out);

/* Dimensions of a word vector, at most: attn_vectors_load's lines and attn_matrix's vectors. */
#define ATTN_VECTORS_MAX_DIM 4096

/* ------------------------------------------------------------------ attn_matrix.c */

int attn_matrix_register(sqlite3 *db, attn_conn *conn);

/* ------------------------------------------------------------------ attn_vectors.c */

int attn_vectors_register(sqlite3 *db, attn_conn *conn);

/* attn_train's options "embeddings" (a table of (word, vector)) and "freeze_embeddings". */
typedef struct attn_embeddings {
  char *table; /* sqlite3_malloc'd; NULL: no pretrained vectors */
  int freeze;
  int dim;     /* of the table's vectors */
} attn_embeddings;
/* Parse attn_train's options JSON into cfg (nn_config_parse_json) after taking the two keys out
 * into *emb; with a table and no "embed_dim", embed_dim becomes the table's dimension, and a
 * different embed_dim is an error. Errors: SQLite code, *errmsg "fn: ...". */
int attn_train_options(sqlite3 *db, const char *fn, const char *options, nn_config *cfg,
                       attn_embeddings *emb, char **errmsg);
/* After nn_trainer_create: set the vocabulary's rows from the table, and freeze. */
int attn_embeddings_apply(sqlite3 *db, const char *fn, nn_trainer *tr, const attn_embeddings *emb,
                          char **errmsg);
void attn_embeddings_free(attn_embeddings *emb);

#endif
