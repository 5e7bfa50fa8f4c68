/* attn_matrix.c -- sentence-to-sentence attention, as in the "Understanding Attention" lesson:
 * every word of a query sentence attends over the words of a key sentence through their
 * pretrained word vectors.
 *
 *   CREATE TABLE glove AS SELECT * FROM attn_vectors_load('glove.6B.50d.txt');
 *   SELECT * FROM attn_matrix('the cat sat on the mat', 'a dog lay on a rug', 'glove');
 *   --  query_position | query_token | key_position | key_token | weight
 *   SELECT writefile('matrix.svg',
 *                    attn_matrix_svg('the cat sat on the mat', 'a dog lay on a rug', 'glove'));
 *   SELECT * FROM attn_matrix('the cat sat', 'a dog lay', 'glove', 'trainable', 7);
 *   SELECT * FROM attn_matrix('the cat sat', 'a dog lay', 'glove', 'additive', 7);
 *
 * Texts are split on white space (Python's str.split(): no other cleaning, stop words kept);
 * positions are 0-based. Each token's vector is looked up in the table named by `vectors`
 * (columns word TEXT and vector BLOB of little-endian float32, as attn_vectors_load makes it):
 * first as written, then lower-cased (ASCII letters); a token found neither way is a zero vector.
 * Instead of a table, vectors = 'model:<name>' takes the word vectors a trained model learned:
 * the rows of its embeddings.weight (deployed version), looked up in its vocabulary the same way
 * (so stop words and words it never saw are zero vectors).
 * The three kinds of the lesson, with q_i the word vector of query token i and k_j that of key
 * token j (d numbers each), each row of weights a softmax over the key tokens (sum 1):
 *   'dot' (the default): scaled dot-product, weight(i, j) = softmax_j(q_i . k_j / sqrt(d));
 *   'trainable': query, key and value Linear(d, d) layers (weight and bias), randomly
 *     initialised: weight(i, j) = softmax_j((Wq q_i + bq) . (Wk k_j + bk) / sqrt(d)), values
 *     Wv k_j + bv;
 *   'additive' (Bahdanau): weight(i, j) = softmax_j(v . tanh(W q_i + U k_j)), W and U (d, d),
 *     v (d), no biases.
 * The layers of 'trainable' and 'additive' are drawn from `seed` (default 1234) as PyTorch
 * initialises a Linear, U(-1/sqrt(d), 1/sqrt(d)), with the engine's generator (engine/rng.c,
 * nn_rng_uniform) in the order Wq, bq, Wk, bk, Wv, bv (W, U, v), each row-major (tensor (out,
 * in)): tests/gen_matrix_fixtures.py draws the same numbers in Python and computes the weights
 * with PyTorch. The column context is query token i's attention output sum_j weight(i, j)
 * value_j (value_j = k_j, or Wv k_j + bv for 'trainable'), computed when asked for. A
 * zero-vector query token attends uniformly under 'dot'. The attention layers of attnext's
 * models pool one sequence, so they have no sentence-to-sentence form to offer here. At most
 * 512 tokens per text (80 for the SVG), and 1024 dimensions for 'trainable' and 'additive'
 * (their d x d layers). Both functions read the table named by an argument, so they are
 * direct-only (not usable in triggers or views).
 */
#include <math.h>
#include <string.h>

#include "attn_ext.h"

#define MATRIX_MAX_TOKENS 512
#define MATRIX_SVG_MAX_TOKENS 80
#define MATRIX_LABEL_CHARS 16
#define MATRIX_MAX_DIM_LAYERS 1024 /* d of 'trainable' and 'additive': d x d layers */
#define MATRIX_DEFAULT_SEED 1234

enum { MX_DOT, MX_TRAINABLE, MX_ADDITIVE };
static const char *const mx_kind_names[3] = {"dot", "trainable", "additive"};

typedef struct mx_token {
  int start, len; /* bytes of the text */
  int found;      /* 1: as written, 2: lower-cased, 0: zero vector */
} mx_token;

typedef struct mx_side {
  char *text; /* copy, NUL-terminated */
  int len;
  mx_token *tokens;
  int n;
  float *vectors; /* (n, dim) */
} mx_side;

typedef struct attn_mx {
  mx_side q, k;
  int dim;
  int kind; /* MX_DOT, MX_TRAINABLE, MX_ADDITIVE */
  uint64_t seed;
  double *weight; /* (q.n, k.n) */
  /* the context column, made when first asked for */
  double *values;              /* (k.n, d) value vectors of the key tokens */
  double *context;             /* (q.n, d) */
  unsigned char *context_done; /* (q.n) */
  float *layers;               /* 'trainable': Wv, bv, kept for the values */
} attn_mx;

static void mx_free(attn_mx *m) {
  mx_side *sides[2] = {&m->q, &m->k};
  for (int s = 0; s < 2; s++) {
    sqlite3_free(sides[s]->text);
    sqlite3_free(sides[s]->tokens);
    sqlite3_free(sides[s]->vectors);
  }
  sqlite3_free(m->weight);
  sqlite3_free(m->values);
  sqlite3_free(m->context);
  sqlite3_free(m->context_done);
  sqlite3_free(m->layers);
  memset(m, 0, sizeof *m);
}

static int is_space(unsigned char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* Split on ASCII white space (str.split() without arguments). */
static int mx_split(mx_side *side, const char *text, int len, int max_tokens, const char *fn,
                    const char *which, char **errmsg) {
  side->text = sqlite3_malloc64((sqlite3_uint64)len + 1);
  if (!side->text) return SQLITE_NOMEM;
  memcpy(side->text, text, (size_t)len);
  side->text[len] = 0;
  side->len = len;
  int n = 0;
  for (int i = 0; i < len;) {
    while (i < len && is_space((unsigned char)text[i])) i++;
    if (i >= len) break;
    while (i < len && !is_space((unsigned char)text[i])) i++;
    n++;
  }
  if (n > max_tokens) {
    *errmsg = sqlite3_mprintf("%s: the %s text has %d tokens, at most %d are allowed", fn, which, n,
                              max_tokens);
    return SQLITE_ERROR;
  }
  side->tokens = sqlite3_malloc64((sqlite3_uint64)(n ? n : 1) * sizeof *side->tokens);
  if (!side->tokens) return SQLITE_NOMEM;
  n = 0;
  for (int i = 0; i < len;) {
    while (i < len && is_space((unsigned char)text[i])) i++;
    if (i >= len) break;
    int start = i;
    while (i < len && !is_space((unsigned char)text[i])) i++;
    side->tokens[n].start = start;
    side->tokens[n].len = i - start;
    side->tokens[n].found = 0;
    n++;
  }
  side->n = n;
  return SQLITE_OK;
}

/* Where the vectors come from: a (word, vector) table, or a trained model's embedding. */
typedef struct mx_source {
  const char *name;   /* as given: a table, or "model:<name>" */
  sqlite3_stmt *stmt; /* SELECT vector FROM table WHERE word = ?1 */
  attn_model *model;  /* model: its vocabulary and embeddings.weight */
  const float *emb;   /* (V, E) */
} mx_source;

/* The vector of word w (len bytes): 1 with *dim and either *vec (floats) or *blob (float32
 * little-endian bytes) set, 0 when there is none, -1 on an error (*errmsg set). */
static int mx_source_get(mx_source *src, const char *w, int len, const float **vec,
                         const unsigned char **blob, int *dim, const char *fn, char **errmsg) {
  *vec = NULL, *blob = NULL;
  if (src->model) {
    const nn_vocab *vocab = nn_model_vocab(src->model->nn);
    int id = nn_vocab_lookup(vocab, w, len);
    if (id <= NN_UNK || id >= nn_vocab_count(vocab)) return 0;
    *dim = nn_model_config(src->model->nn)->embed_dim;
    *vec = src->emb + (size_t)id * *dim;
    return 1;
  }
  sqlite3_stmt *stmt = src->stmt;
  sqlite3_reset(stmt);
  sqlite3_bind_text(stmt, 1, w, len, SQLITE_STATIC);
  int rc = sqlite3_step(stmt);
  if (rc == SQLITE_DONE) return 0;
  if (rc != SQLITE_ROW) {
    *errmsg = sqlite3_mprintf("%s: cannot read the vectors table '%s': %s", fn, src->name,
                              sqlite3_errmsg(sqlite3_db_handle(stmt)));
    return -1;
  }
  int is_blob = sqlite3_column_int(stmt, 2);
  sqlite3_int64 bytes = is_blob ? sqlite3_column_int64(stmt, 1) : 0;
  if (bytes > 4 * ATTN_VECTORS_MAX_DIM) { /* as attn_vectors_load: refused before it is read */
    *errmsg = sqlite3_mprintf("%s: the vector of '%.*s' in '%s' has %lld dimensions, at most %d "
                              "are supported",
                              fn, len, w, src->name, (long long)(bytes / 4), ATTN_VECTORS_MAX_DIM);
    return -1;
  }
  if (!is_blob || bytes <= 0 || bytes % 4 != 0 || sqlite3_column_bytes(stmt, 0) != bytes) {
    *errmsg =
        sqlite3_mprintf("%s: the vector of '%.*s' in '%s' must be a BLOB of float32 (a "
                        "multiple of 4 bytes), got %lld bytes of type %s",
                        fn, len, w, src->name, (long long)bytes, is_blob ? "BLOB" : "non-BLOB");
    return -1;
  }
  *dim = (int)(bytes / 4);
  *blob = sqlite3_column_blob(stmt, 0);
  return 1;
}

static int mx_alloc_vectors(attn_mx *m) {
  mx_side *sides[2] = {&m->q, &m->k};
  int d = m->dim > 0 ? m->dim : 1;
  for (int s = 0; s < 2; s++) {
    size_t n = (size_t)(sides[s]->n ? sides[s]->n : 1) * d;
    sides[s]->vectors = sqlite3_malloc64(n * sizeof(float));
    if (!sides[s]->vectors) return SQLITE_NOMEM;
    memset(sides[s]->vectors, 0, n * sizeof(float));
  }
  return SQLITE_OK;
}

/* Look up the vectors of one side: as written, then with ASCII letters lower-cased; the first
 * vector found fixes m->dim (and allocates both sides' vectors, zero for tokens not found). */
static int mx_lookup(attn_mx *m, mx_side *side, mx_source *src, attn_interrupt *interrupt,
                     const char *fn, char **errmsg) {
  for (int i = 0; i < side->n; i++) {
    if (attn_interrupted(interrupt, 16)) {
      *errmsg = sqlite3_mprintf("%s: interrupted", fn);
      return SQLITE_INTERRUPT;
    }
    mx_token *t = &side->tokens[i];
    const char *word = side->text + t->start;
    char lower[256];
    for (int pass = 1; pass <= 2 && !t->found; pass++) {
      const char *w = word;
      if (pass == 2) {
        if (t->len >= (int)sizeof lower) break;
        int changed = 0;
        for (int c = 0; c < t->len; c++) {
          char ch = word[c];
          lower[c] = ch >= 'A' && ch <= 'Z' ? (char)(ch + 32) : ch;
          changed |= lower[c] != ch;
        }
        if (!changed) break;
        w = lower;
      }
      const float *vec;
      const unsigned char *blob;
      int d = 0;
      int got = mx_source_get(src, w, t->len, &vec, &blob, &d, fn, errmsg);
      if (got < 0) return SQLITE_ERROR;
      if (got == 0) continue;
      if (m->dim == 0) {
        m->dim = d;
        if (mx_alloc_vectors(m) != SQLITE_OK) return SQLITE_NOMEM;
      } else if (d != m->dim) {
        *errmsg = sqlite3_mprintf("%s: the vector of '%.*s' in '%s' has %d dimensions, the ones "
                                  "before it %d",
                                  fn, t->len, w, src->name, d, m->dim);
        return SQLITE_ERROR;
      }
      float *dst = side->vectors + (size_t)i * d;
      if (vec) {
        memcpy(dst, vec, (size_t)d * sizeof *dst);
      } else {
        attn_floats_from_le(dst, blob, d);
      }
      for (int c = 0; c < d; c++) {
        if (!isfinite(dst[c])) {
          *errmsg = sqlite3_mprintf("%s: the vector of '%.*s' in '%s' has a value that is not a "
                                    "finite number",
                                    fn, t->len, w, src->name);
          return SQLITE_ERROR;
        }
      }
      t->found = pass;
    }
  }
  return SQLITE_OK;
}

/* The layers of 'trainable' (Wq, bq, Wk, bk, Wv, bv) or 'additive' (W, U, v) into one buffer:
 * each value (2 u - 1) / sqrt(d) in float with u = nn_rng_uniform, as PyTorch's Linear and the
 * engine's init_params (engine/model.c) draw them. */
static float *mx_draw_layers(int kind, int d, uint64_t seed, size_t *count) {
  size_t dd = (size_t)d * d;
  *count = kind == MX_TRAINABLE ? 3 * (dd + d) : 2 * dd + d;
  float *p = sqlite3_malloc64(*count * sizeof *p);
  if (!p) return NULL;
  nn_rng rng;
  nn_rng_seed(&rng, seed);
  float bound = (float)(1.0 / sqrt((double)d));
  for (size_t i = 0; i < *count; i++) p[i] = (2.0f * nn_rng_uniform(&rng) - 1.0f) * bound;
  return p;
}

/* out (n, d) = x (n, d) W^T + b (W (d, d) row-major, b (d) or NULL), in double. */
static int mx_linear(double *out, const float *x, int n, const float *W, const float *b, int d,
                     attn_interrupt *interrupt) {
  for (int i = 0; i < n; i++) {
    if (interrupt && attn_interrupted(interrupt, 1)) return SQLITE_INTERRUPT; /* d x d */
    const float *xi = x + (size_t)i * d;
    for (int r = 0; r < d; r++) {
      const float *w = W + (size_t)r * d;
      double acc = b ? (double)b[r] : 0.0;
      for (int c = 0; c < d; c++) acc += (double)w[c] * xi[c];
      out[(size_t)i * d + r] = acc;
    }
  }
  return SQLITE_OK;
}

/* Each row of m->weight (scores so far) made a softmax. */
static void mx_softmax_rows(attn_mx *m) {
  int nq = m->q.n, nk = m->k.n;
  for (int i = 0; i < nq; i++) {
    double *row = m->weight + (size_t)i * nk, top = -INFINITY, sum = 0;
    for (int j = 0; j < nk; j++)
      if (row[j] > top) top = row[j];
    for (int j = 0; j < nk; j++) sum += row[j] = exp(row[j] - top);
    for (int j = 0; j < nk; j++) row[j] /= sum;
  }
}

/* The weights of m->kind from the looked-up vectors. */
static int mx_weights(attn_mx *m, attn_interrupt *interrupt, const char *fn, char **errmsg) {
  int d = m->dim > 0 ? m->dim : 1, nq = m->q.n, nk = m->k.n;
  double *pq = NULL, *pk = NULL;
  int rc = SQLITE_OK;
  m->weight = sqlite3_malloc64((sqlite3_uint64)(nq ? nq : 1) * (nk ? nk : 1) * sizeof(double));
  if (!m->weight) return SQLITE_NOMEM;
  if (m->kind != MX_DOT) {
    size_t count;
    m->layers = mx_draw_layers(m->kind, d, m->seed, &count);
    pq = sqlite3_malloc64((sqlite3_uint64)(nq ? nq : 1) * d * sizeof *pq);
    pk = sqlite3_malloc64((sqlite3_uint64)(nk ? nk : 1) * d * sizeof *pk);
    if (!m->layers || !pq || !pk) {
      rc = SQLITE_NOMEM;
      goto done;
    }
    size_t dd = (size_t)d * d;
    const float *L = m->layers;
    /* trainable: Wq, bq, Wk, bk (Wv, bv later); additive: W q_i, U k_j (v after them) */
    const float *Wq = L, *bq = m->kind == MX_TRAINABLE ? L + dd : NULL;
    const float *Wk = m->kind == MX_TRAINABLE ? L + dd + d : L + dd;
    const float *bk = m->kind == MX_TRAINABLE ? L + 2 * dd + d : NULL;
    rc = mx_linear(pq, m->q.vectors, nq, Wq, bq, d, interrupt);
    if (rc == SQLITE_OK) rc = mx_linear(pk, m->k.vectors, nk, Wk, bk, d, interrupt);
    if (rc != SQLITE_OK) goto done;
  }
  double scale = 1.0 / sqrt((double)d);
  const float *v = m->kind == MX_ADDITIVE ? m->layers + 2 * (size_t)d * d : NULL;
  for (int i = 0; i < nq; i++) {
    if (attn_interrupted(interrupt, 1)) { /* a row is up to 512 x 4096 multiply-adds */
      rc = SQLITE_INTERRUPT;
      goto done;
    }
    double *row = m->weight + (size_t)i * nk;
    for (int j = 0; j < nk; j++) {
      double score = 0;
      if (m->kind == MX_DOT) {
        const float *q = m->q.vectors + (size_t)i * d, *k = m->k.vectors + (size_t)j * d;
        for (int c = 0; c < d; c++) score += (double)q[c] * k[c];
        score *= scale;
      } else if (m->kind == MX_TRAINABLE) {
        const double *q = pq + (size_t)i * d, *k = pk + (size_t)j * d;
        for (int c = 0; c < d; c++) score += q[c] * k[c];
        score *= scale;
      } else { /* additive: v . tanh(W q_i + U k_j) */
        const double *q = pq + (size_t)i * d, *k = pk + (size_t)j * d;
        for (int c = 0; c < d; c++) score += (double)v[c] * tanh(q[c] + k[c]);
      }
      row[j] = score;
    }
  }
  mx_softmax_rows(m);
done:
  sqlite3_free(pq);
  sqlite3_free(pk);
  if (rc == SQLITE_INTERRUPT) *errmsg = sqlite3_mprintf("%s: interrupted", fn);
  return rc;
}

/* The context of query token i: sum_j weight(i, j) value_j into m->context (made on first use;
 * the values of 'trainable' are Wv k_j + bv). */
static int mx_context(attn_mx *m, int i) {
  int d = m->dim > 0 ? m->dim : 1, nq = m->q.n, nk = m->k.n;
  if (!m->context) {
    m->context = sqlite3_malloc64((sqlite3_uint64)(nq ? nq : 1) * d * sizeof *m->context);
    m->context_done = sqlite3_malloc64((sqlite3_uint64)(nq ? nq : 1));
    m->values = sqlite3_malloc64((sqlite3_uint64)(nk ? nk : 1) * d * sizeof *m->values);
    if (!m->context || !m->context_done || !m->values) {
      sqlite3_free(m->context);
      sqlite3_free(m->context_done);
      sqlite3_free(m->values);
      m->context = NULL, m->context_done = NULL, m->values = NULL;
      return SQLITE_NOMEM;
    }
    memset(m->context_done, 0, (size_t)(nq ? nq : 1));
    if (m->kind == MX_TRAINABLE) {
      size_t dd = (size_t)d * d;
      const float *Wv = m->layers + 2 * (dd + d), *bv = Wv + dd;
      mx_linear(m->values, m->k.vectors, nk, Wv, bv, d, NULL);
    } else {
      for (size_t x = 0; x < (size_t)nk * d; x++) m->values[x] = m->k.vectors[x];
    }
  }
  if (!m->context_done[i]) {
    double *out = m->context + (size_t)i * d;
    for (int c = 0; c < d; c++) out[c] = 0;
    for (int j = 0; j < nk; j++) {
      double w = m->weight[(size_t)i * nk + j];
      const double *val = m->values + (size_t)j * d;
      for (int c = 0; c < d; c++) out[c] += w * val[c];
    }
    m->context_done[i] = 1;
  }
  return SQLITE_OK;
}

/* Split, look up and compute the weights. */
static int mx_compute(attn_mx *m, attn_conn *conn, const char *fn, sqlite3_value *qv,
                      sqlite3_value *kv, sqlite3_value *tv, sqlite3_value *kindv,
                      sqlite3_value *seedv, int max_tokens, char **errmsg) {
  sqlite3 *db = attn_conn_db(conn);
  mx_source src;
  int rc;
  memset(&src, 0, sizeof src);
  if (!qv || !kv || sqlite3_value_type(qv) == SQLITE_NULL ||
      sqlite3_value_type(kv) == SQLITE_NULL) {
    *errmsg = sqlite3_mprintf("%s: the query and key texts must not be NULL", fn);
    return SQLITE_ERROR;
  }
  const char *table = tv ? (const char *)sqlite3_value_text(tv) : NULL;
  if (!table || !*table) {
    *errmsg = sqlite3_mprintf("%s: the vectors argument must name a table of (word, vector) or "
                              "a model as 'model:<name>', got %s",
                              fn, table ? "''" : "NULL");
    return SQLITE_ERROR;
  }
  src.name = table;
  const char *kind = kindv && sqlite3_value_type(kindv) != SQLITE_NULL
                         ? (const char *)sqlite3_value_text(kindv)
                         : "dot";
  m->kind = -1;
  for (int k = 0; kind && k < 3; k++)
    if (sqlite3_stricmp(kind, mx_kind_names[k]) == 0) m->kind = k;
  if (m->kind < 0) {
    int len = kind ? (int)strlen(kind) : 0, cut = attn_svg_prefix_bytes(kind, len, 40);
    *errmsg = sqlite3_mprintf("%s: kind must be 'dot' (scaled dot-product), 'trainable' (query, "
                              "key and value layers) or 'additive', got '%.*s%s'",
                              fn, cut, kind ? kind : "", cut < len ? "..." : "");
    return SQLITE_ERROR;
  }
  m->seed = MATRIX_DEFAULT_SEED;
  if (seedv) {
    int type = sqlite3_value_numeric_type(seedv);
    if (type != SQLITE_INTEGER || sqlite3_value_int64(seedv) < 0) {
      const char *t = type == SQLITE_NULL ? "NULL" : type == SQLITE_BLOB ? "a BLOB" : NULL;
      const char *v = t ? NULL : (const char *)sqlite3_value_text(seedv);
      int len = v ? sqlite3_value_bytes(seedv) : 0, cut = attn_svg_prefix_bytes(v, len, 40);
      const char *quote = type == SQLITE_TEXT ? "'" : ""; /* numbers as numbers */
      *errmsg = t ? sqlite3_mprintf("%s: seed must be an integer from 0 to 2^63 - 1, got %s", fn, t)
                  : sqlite3_mprintf("%s: seed must be an integer from 0 to 2^63 - 1, got "
                                    "%s%.*s%s%s",
                                    fn, quote, cut, v ? v : "", cut < len ? "..." : "", quote);
      return *errmsg ? SQLITE_ERROR : SQLITE_NOMEM;
    }
    m->seed = (uint64_t)sqlite3_value_int64(seedv);
  }
  const char *qt = (const char *)sqlite3_value_text(qv);
  int ql = sqlite3_value_bytes(qv);
  const char *kt = (const char *)sqlite3_value_text(kv);
  int kl = sqlite3_value_bytes(kv);
  if (!qt || !kt) return SQLITE_NOMEM;
  rc = mx_split(&m->q, qt, ql, max_tokens, fn, "query", errmsg);
  if (rc == SQLITE_OK) rc = mx_split(&m->k, kt, kl, max_tokens, fn, "key", errmsg);
  if (rc != SQLITE_OK) return rc;
  if (strncmp(table, "model:", 6) == 0) {
    rc = attn_model_acquire(conn, fn, table + 6, &src.model, errmsg);
    if (rc != SQLITE_OK) return rc;
    nn_tensor_info info;
    nn_model_tensor(src.model->nn, 0, &info); /* embeddings.weight (V, E) */
    src.emb = nn_model_weights(src.model->nn) + info.offset;
  } else {
    /* The size and type first (length() of a BLOB reads no content): a crafted table's huge
     * vector is refused without being read. */
    char *sql = sqlite3_mprintf("SELECT CASE WHEN typeof(vector) = 'blob' AND length(vector) <= %d "
                                "THEN vector END, length(vector), typeof(vector) = 'blob' "
                                "FROM \"%w\" WHERE word = ?1 LIMIT 1",
                                4 * ATTN_VECTORS_MAX_DIM, table);
    if (!sql) return SQLITE_NOMEM;
    rc = sqlite3_prepare_v2(db, sql, -1, &src.stmt, NULL);
    sqlite3_free(sql);
    if (rc != SQLITE_OK) {
      *errmsg = sqlite3_mprintf("%s: cannot read the vectors table '%s' (columns word, vector): "
                                "%s",
                                fn, table, sqlite3_errmsg(db));
      return SQLITE_ERROR;
    }
  }
  attn_interrupt interrupt = {db, NULL, 0};
  rc = mx_lookup(m, &m->q, &src, &interrupt, fn, errmsg);
  if (rc == SQLITE_OK) rc = mx_lookup(m, &m->k, &src, &interrupt, fn, errmsg);
  if (rc == SQLITE_OK && m->dim == 0) rc = mx_alloc_vectors(m); /* nothing found: all zero */
  sqlite3_finalize(src.stmt);
  attn_model_release(src.model);
  if (rc != SQLITE_OK) {
    attn_interrupt_end(&interrupt);
    return rc;
  }
  if (m->kind != MX_DOT && m->dim > MATRIX_MAX_DIM_LAYERS) {
    attn_interrupt_end(&interrupt);
    *errmsg = sqlite3_mprintf("%s: kind '%s' draws d x d layers: vectors of at most %d "
                              "dimensions, got %d",
                              fn, mx_kind_names[m->kind], MATRIX_MAX_DIM_LAYERS, m->dim);
    return SQLITE_ERROR;
  }
  rc = mx_weights(m, &interrupt, fn, errmsg);
  attn_interrupt_end(&interrupt);
  return rc;
}

/* ------------------------------------------------------------------ attn_matrix (table) */

typedef struct mx_cursor {
  sqlite3_vtab_cursor base;
  attn_mx m;
  sqlite3_int64 row, nrows;
} mx_cursor;

/* Columns; the arguments are the hidden columns at the end. */
enum {
  ATTN_MATRIX_COL_QUERY_POSITION,
  ATTN_MATRIX_COL_QUERY_TOKEN,
  ATTN_MATRIX_COL_KEY_POSITION,
  ATTN_MATRIX_COL_KEY_TOKEN,
  ATTN_MATRIX_COL_WEIGHT,
  ATTN_MATRIX_COL_CONTEXT,
  ATTN_MATRIX_COL_ARG_QUERY_TEXT,
  ATTN_MATRIX_COL_ARG_KEY_TEXT,
  ATTN_MATRIX_COL_ARG_VECTORS,
  ATTN_MATRIX_COL_ARG_KIND,
  ATTN_MATRIX_COL_ARG_SEED
};
static const char attn_matrix_schema[] =
    "CREATE TABLE x(query_position INTEGER, query_token TEXT, key_position INTEGER, "
    "key_token TEXT, weight REAL, context BLOB, arg_query_text HIDDEN, arg_key_text HIDDEN, "
    "arg_vectors HIDDEN, arg_kind HIDDEN, arg_seed HIDDEN)";

static int mx_connect(sqlite3 *db, void *aux, int argc, const char *const *argv, sqlite3_vtab **out,
                      char **errmsg) {
  return attn_vtab_connect(db, attn_matrix_schema, SQLITE_VTAB_DIRECTONLY, aux, 0,
                           sizeof(mx_cursor), out);
}

static int mx_best_index(sqlite3_vtab *vtab, sqlite3_index_info *info) {
  return attn_vtab_best_index(vtab, info, ATTN_MATRIX_COL_ARG_QUERY_TEXT, 5, 3,
                              "attn_matrix: expected 3 to 5 arguments: attn_matrix(query_text, "
                              "key_text, vectors[, kind[, seed]])");
}

static int mx_close(sqlite3_vtab_cursor *base) {
  mx_cursor *cur = (mx_cursor *)base;
  mx_free(&cur->m);
  sqlite3_free(cur);
  return SQLITE_OK;
}

static int mx_filter(sqlite3_vtab_cursor *base, int idx_num, const char *idx_str, int argc,
                     sqlite3_value **argv) {
  mx_cursor *cur = (mx_cursor *)base;
  attn_vtab *vtab = (attn_vtab *)base->pVtab;
  char *msg = NULL;
  /* argv: the arguments given, in column order (attn_vtab_best_index) */
  int kind = attn_arg_given(idx_num, ATTN_MATRIX_COL_ARG_KIND - ATTN_MATRIX_COL_ARG_QUERY_TEXT);
  int seed = attn_arg_given(idx_num, ATTN_MATRIX_COL_ARG_SEED - ATTN_MATRIX_COL_ARG_QUERY_TEXT);
  mx_free(&cur->m);
  cur->row = cur->nrows = 0;
  int rc = mx_compute(&cur->m, vtab->conn, "attn_matrix", argc > 0 ? argv[0] : NULL,
                      argc > 1 ? argv[1] : NULL, argc > 2 ? argv[2] : NULL,
                      kind && argc > 3 ? argv[3] : NULL,
                      seed && argc > 3 + kind ? argv[3 + kind] : NULL, MATRIX_MAX_TOKENS, &msg);
  if (rc != SQLITE_OK) {
    mx_free(&cur->m);
    return attn_vtab_fail(base->pVtab, rc, msg, "attn_matrix");
  }
  cur->nrows = (sqlite3_int64)cur->m.q.n * cur->m.k.n;
  return SQLITE_OK;
}

static int mx_next(sqlite3_vtab_cursor *base) {
  ((mx_cursor *)base)->row++;
  return SQLITE_OK;
}

static int mx_eof(sqlite3_vtab_cursor *base) {
  mx_cursor *cur = (mx_cursor *)base;
  return cur->row >= cur->nrows;
}

static int mx_column(sqlite3_vtab_cursor *base, sqlite3_context *ctx, int col) {
  mx_cursor *cur = (mx_cursor *)base;
  int nk = cur->m.k.n, i = (int)(cur->row / nk), j = (int)(cur->row % nk);
  const mx_token *q = &cur->m.q.tokens[i], *k = &cur->m.k.tokens[j];
  switch (col) {
  case ATTN_MATRIX_COL_QUERY_POSITION: sqlite3_result_int(ctx, i); break;
  case ATTN_MATRIX_COL_QUERY_TOKEN:
    sqlite3_result_text(ctx, cur->m.q.text + q->start, q->len, SQLITE_TRANSIENT);
    break;
  case ATTN_MATRIX_COL_KEY_POSITION: sqlite3_result_int(ctx, j); break;
  case ATTN_MATRIX_COL_KEY_TOKEN:
    sqlite3_result_text(ctx, cur->m.k.text + k->start, k->len, SQLITE_TRANSIENT);
    break;
  case ATTN_MATRIX_COL_WEIGHT: sqlite3_result_double(ctx, cur->m.weight[cur->row]); break;
  case ATTN_MATRIX_COL_CONTEXT: { /* float32, little-endian, as attn_embed */
    int d = cur->m.dim > 0 ? cur->m.dim : 1;
    if (mx_context(&cur->m, i) != SQLITE_OK) return SQLITE_NOMEM;
    unsigned char *blob = sqlite3_malloc64(4 * (sqlite3_uint64)d);
    float *f = sqlite3_malloc64(sizeof *f * (sqlite3_uint64)d);
    if (!blob || !f) {
      sqlite3_free(blob);
      sqlite3_free(f);
      return SQLITE_NOMEM;
    }
    for (int c = 0; c < d; c++) f[c] = (float)cur->m.context[(size_t)i * d + c];
    attn_floats_to_le(blob, f, d);
    sqlite3_free(f);
    sqlite3_result_blob64(ctx, blob, 4 * (sqlite3_uint64)d, sqlite3_free);
    break;
  }
  default: break;
  }
  return SQLITE_OK;
}

static int mx_rowid(sqlite3_vtab_cursor *base, sqlite_int64 *rowid) {
  *rowid = ((mx_cursor *)base)->row + 1;
  return SQLITE_OK;
}

const sqlite3_module attn_matrix_module = {
    .iVersion = 0,
    .xCreate = NULL, /* eponymous only */
    .xConnect = mx_connect,
    .xBestIndex = mx_best_index,
    .xDisconnect = attn_vtab_disconnect,
    .xOpen = attn_vtab_open,
    .xClose = mx_close,
    .xFilter = mx_filter,
    .xNext = mx_next,
    .xEof = mx_eof,
    .xColumn = mx_column,
    .xRowid = mx_rowid,
};

/* ------------------------------------------------------------------ attn_matrix_svg */

static void mx_label(sqlite3_str *out, const mx_side *side, int i) {
  const mx_token *t = &side->tokens[i];
  attn_svg_text(out, side->text + t->start, t->len, MATRIX_LABEL_CHARS);
}

/* The picture's start: its title (the kind of attention) and the line saying what it shows. */
static void mx_svg_heading(sqlite3_str *out, const attn_mx *m, int width, int height) {
  char *title =
      m->kind == MX_DOT ? sqlite3_mprintf("Scaled dot-product attention")
      : m->kind == MX_TRAINABLE
          ? sqlite3_mprintf("Trainable attention (query, key, value layers, seed %llu)",
                            (unsigned long long)m->seed)
          : sqlite3_mprintf("Additive attention (seed %llu)", (unsigned long long)m->seed);
  attn_svg_begin(out, width, height, title, title ? -1 : 0);
  sqlite3_str_appendf(out,
                      "<text x=\"20\" y=\"28\" font-size=\"17\" font-weight=\"bold\" "
                      "fill=\"#1a1a1a\">%s</text>\n",
                      title ? title : "");
  sqlite3_free(title);
  int dd = m->dim > 0 ? m->dim : 1;
  if (m->kind == MX_DOT)
    sqlite3_str_appendf(out,
                        "<text x=\"20\" y=\"48\" font-size=\"12\" fill=\"#555555\">rows: "
                        "query tokens; columns: key tokens; softmax of q.k/sqrt(%d) over "
                        "each row</text>\n",
                        dd);
  else if (m->kind == MX_TRAINABLE)
    sqlite3_str_appendf(out,
                        "<text x=\"20\" y=\"48\" font-size=\"12\" fill=\"#555555\">rows: "
                        "query tokens; columns: key tokens; softmax of (Wq q + bq).(Wk k + "
                        "bk)/sqrt(%d) over each row</text>\n",
                        dd);
  else
    sqlite3_str_appendall(out, "<text x=\"20\" y=\"48\" font-size=\"12\" fill=\"#555555\">rows: "
                               "query tokens; columns: key tokens; softmax of v.tanh(W q + U k) "
                               "over each row</text>\n");
}

void attn_matrix_svg_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  const char *fn = "attn_matrix_svg";
  attn_mx m;
  char *msg = NULL;
  memset(&m, 0, sizeof m);
  int rc =
      mx_compute(&m, sqlite3_user_data(ctx), fn, argv[0], argv[1], argv[2],
                 argc > 3 ? argv[3] : NULL, argc > 4 ? argv[4] : NULL, MATRIX_SVG_MAX_TOKENS, &msg);
  if (rc != SQLITE_OK) {
    if (msg) {
      sqlite3_result_error(ctx, msg, -1);
      sqlite3_free(msg);
    } else {
      sqlite3_result_error(ctx, "attn_matrix_svg: out of memory", -1);
    }
    if (attn_error_code(rc) != SQLITE_ERROR) sqlite3_result_error_code(ctx, rc);
    mx_free(&m);
    return;
  }
  int nq = m.q.n, nk = m.k.n, qchars = 1, kchars = 1, missing = 0;
  for (int i = 0; i < nq; i++) {
    int c = attn_svg_text_columns(m.q.text + m.q.tokens[i].start, m.q.tokens[i].len,
                                  MATRIX_LABEL_CHARS);
    if (c > qchars) qchars = c;
    missing |= !m.q.tokens[i].found;
  }
  for (int j = 0; j < nk; j++) {
    int c = attn_svg_text_columns(m.k.text + m.k.tokens[j].start, m.k.tokens[j].len,
                                  MATRIX_LABEL_CHARS);
    if (c > kchars) kchars = c;
    missing |= !m.k.tokens[j].found;
  }
  int most = nq > nk ? nq : nk;
  double cell = most > 0 ? 560.0 / most : 40;
  if (cell > 44) cell = 44;
  if (cell < 16) cell = 16;
  double font = cell >= 24 ? 12 : 10;
  double left = 20 + attn_svg_mono_width(qchars, font) + 10;
  double top = 70 + attn_svg_mono_width(kchars, font) * 0.7071 + 14;
  double gw = cell * nk, gh = cell * nq;
  int width = (int)ceil(left + gw + attn_svg_mono_width(kchars, font) * 0.7071 + 30);
  if (width < 600) width = 600;
  int height = (int)ceil(top + gh + 80);

  sqlite3_str *out = sqlite3_str_new(NULL);
  mx_svg_heading(out, &m, width, height);
  const char *mono = "font-family=\"DejaVu Sans Mono, monospace\"";
  for (int j = 0; j < nk; j++) {
    double x = left + cell * (j + 0.5), y = top - 6;
    sqlite3_str_appendf(out,
                        "<text transform=\"translate(%.1f %.1f) rotate(-45)\" %s "
                        "font-size=\"%.0f\" fill=\"%s\">",
                        x, y, mono, font, m.k.tokens[j].found ? "#1a1a1a" : "#999999");
    mx_label(out, &m.k, j);
    sqlite3_str_appendall(out, "</text>\n");
  }
  for (int i = 0; i < nq; i++) {
    double y = top + cell * (i + 0.5) + font * 0.35;
    sqlite3_str_appendf(out,
                        "<text x=\"%.1f\" y=\"%.1f\" %s font-size=\"%.0f\" "
                        "text-anchor=\"end\" fill=\"%s\">",
                        left - 6, y, mono, font, m.q.tokens[i].found ? "#1a1a1a" : "#999999");
    mx_label(out, &m.q, i);
    sqlite3_str_appendall(out, "</text>\n");
    for (int j = 0; j < nk; j++) {
      double w = m.weight[(size_t)i * nk + j];
      char fill[8];
      attn_svg_color(fill, w);
      sqlite3_str_appendf(out,
                          "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                          "fill=\"%s\" stroke=\"#ffffff\" stroke-width=\"1\"><title>%.4f"
                          "</title></rect>",
                          left + cell * j, top + cell * i, cell, cell, fill, w);
      if (cell >= 30)
        sqlite3_str_appendf(out,
                            "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" "
                            "text-anchor=\"middle\" fill=\"%s\">%.2f</text>",
                            left + cell * (j + 0.5), top + cell * (i + 0.5) + 3.5, attn_svg_ink(w),
                            w);
      sqlite3_str_appendall(out, "\n");
    }
  }
  if (nq == 0 || nk == 0)
    sqlite3_str_appendf(out,
                        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" fill=\"#555555\">"
                        "(no tokens)</text>\n",
                        left, top + 14);
  double ly = top + gh + 22;
  attn_svg_legend(out, 20, ly, 240, 0, 1, "attention weight");
  if (missing)
    sqlite3_str_appendf(out,
                        "<text x=\"290\" y=\"%.1f\" font-size=\"11\" fill=\"#999999\">grey: "
                        "not in the vectors (a zero vector)</text>\n",
                        ly + 9);
  mx_free(&m);
  attn_svg_result(ctx, out);
}
