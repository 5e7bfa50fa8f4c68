/* attn_uncertain.c -- the table-valued function attn_uncertain: which texts to label next.
 *
 *   SELECT id, label, margin FROM attn_uncertain('news',
 *       'SELECT rowid, title FROM headlines WHERE category IS NULL') LIMIT 100;
 *   --  id | label | probability | margin | entropy      the least sure first
 *
 * Uncertainty sampling, the usual first step of active learning: the model is least sure of a
 * text whose two most probable labels are nearly tied, and labelling such texts teaches it more
 * than labelling texts it already gets right. Each row of the query (one read-only statement,
 * columns id and text, as attn_classify's) is classified (attn_classify_probs, in chunks on the
 * connection's threads); the rows come back ordered by margin, the top probability less the
 * second, ascending (ties: the higher entropy first, then the query's order). Every row must be
 * seen before the first is returned, so the query is read whole: its ids and four numbers a
 * row stay in memory (SQLite's allocator, so the heap limit holds), the texts only a chunk at a
 * time. An integer id (a rowid, the usual case) is kept in the row itself, 32 bytes a row in
 * all; any other id as a copy of its value besides (about 80 bytes more: over 1 million rows
 * the process's peak grew by 123 MB with every id a copy, by 47 MB with them inline, the
 * array's doubling included). A NULL id or text is an error naming the row: a row the user
 * cannot find again, or a text with nothing to classify, is no suggestion. A model whose
 * probabilities are not numbers (weights so large that the logits overflow) gives NULL
 * probability, margin and entropy, as attn_classify and attn_probs give NULL: such rows come
 * first, the model being surest of nothing there.
 *
 *   SELECT id FROM attn_uncertain('news',
 *       'SELECT rowid, title FROM headlines WHERE category IS NULL', '{"diverse": 100}') LIMIT 100;
 *
 * The option "diverse": k puts k rows first in BADGE's order (engine/diverse.c): a batch both
 * uncertain and unlike each other, where the least sure rows by margin are often ten texts on
 * one story. The order is over each row's probabilities and the last layer's input (fc1's
 * output, its positive part: measured better than the output as it is, tests/bench/RESULTS.md;
 * without fc1 the context), so those rows are classified with their contexts
 * (attn_classify_pooled), and a sample of at most ATTN_DIVERSE_SAMPLE rows (a reservoir, drawn
 * from "seed") keeps them: (C + context) floats a row, at most ATTN_DIVERSE_BYTES. The other
 * rows follow in the margin order; every row's numbers are the same as without the option.
 * A pick costs a pass over the sample (10,000 picks at most) and asks for an interrupt.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn_ext.h"
#include "json.h"

/* The diverse order: at most this many picks (each costs a pass over the sample), from a
 * sample of at most ATTN_DIVERSE_SAMPLE rows and ATTN_DIVERSE_BYTES of their numbers. */
#define ATTN_DIVERSE_MAX 10000
#define ATTN_DIVERSE_SAMPLE 50000
#define ATTN_DIVERSE_BYTES ((sqlite3_int64)64 << 20)
#define ATTN_SEED_MAX ((int64_t)1 << 53) /* attn_fit's "seed" bound: a JSON number is a double */

static int attn_int64_cmp(const void *pa, const void *pb) {
  sqlite3_int64 a = *(const sqlite3_int64 *)pa, b = *(const sqlite3_int64 *)pb;
  return a < b ? -1 : a > b;
}

typedef struct attn_uncertain_row {
  union {
    sqlite3_int64 integer; /* boxed == 0 */
    sqlite3_value *value;  /* boxed == 1: a copy the cursor owns */
  } id;
  sqlite3_int64 order;                /* in the query */
  float probability, margin, entropy; /* NaN: the model gave no probabilities (NULL) */
  unsigned label : 31, boxed : 1;
} attn_uncertain_row;

typedef struct attn_uncertain_cursor {
  sqlite3_vtab_cursor base;
  attn_model *model;
  attn_uncertain_row *rows;
  sqlite3_int64 n, cap, i;
} attn_uncertain_cursor;

/* Columns; the arguments are the hidden columns at the end. */
enum {
  ATTN_UNCERTAIN_COL_ID,
  ATTN_UNCERTAIN_COL_LABEL,
  ATTN_UNCERTAIN_COL_PROBABILITY,
  ATTN_UNCERTAIN_COL_MARGIN,
  ATTN_UNCERTAIN_COL_ENTROPY,
  ATTN_UNCERTAIN_COL_ARG_NAME,
  ATTN_UNCERTAIN_COL_ARG_QUERY,
  ATTN_UNCERTAIN_COL_ARG_OPTIONS
};
static const char attn_uncertain_schema[] =
    "CREATE TABLE x(id, label TEXT, probability REAL, margin REAL, entropy REAL, arg_name HIDDEN, "
    "arg_query HIDDEN, arg_options HIDDEN)";

static int attn_uncertain_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                                  sqlite3_vtab **out, char **errmsg) {
  return attn_vtab_connect(db, attn_uncertain_schema, SQLITE_VTAB_DIRECTONLY, /* runs a query */
                           aux, 0, sizeof(attn_uncertain_cursor), out);
}

static int attn_uncertain_best_index(sqlite3_vtab *vtab, sqlite3_index_info *info) {
  return attn_vtab_best_index(vtab, info, ATTN_UNCERTAIN_COL_ARG_NAME, 3, 2,
                              "attn_uncertain: expected 2 or 3 arguments: attn_uncertain(name, "
                              "query[, options])");
}

static void attn_uncertain_reset(attn_uncertain_cursor *cur) {
  for (sqlite3_int64 i = 0; i < cur->n; i++)
    if (cur->rows[i].boxed) sqlite3_value_free(cur->rows[i].id.value);
  cur->n = cur->i = 0;
  attn_model_release(cur->model);
  cur->model = NULL;
}

static int attn_uncertain_close(sqlite3_vtab_cursor *base) {
  attn_uncertain_cursor *cur = (attn_uncertain_cursor *)base;
  attn_uncertain_reset(cur);
  sqlite3_free(cur->rows);
  sqlite3_free(cur);
  return SQLITE_OK;
}

/* The least sure first: no probabilities (NaN) first, then margin ascending, entropy
 * descending, then the query's order: a total order, whatever the numbers (qsort may misbehave
 * with one that is not). */
static int attn_uncertain_cmp(const void *pa, const void *pb) {
  const attn_uncertain_row *a = pa, *b = pb;
  int a_nan = isnan(a->margin), b_nan = isnan(b->margin);
  if (a_nan != b_nan) return a_nan ? -1 : 1;
  if (!a_nan) {
    if (a->margin != b->margin) return a->margin < b->margin ? -1 : 1;
    if (a->entropy != b->entropy) return a->entropy > b->entropy ? -1 : 1;
  }
  return a->order < b->order ? -1 : a->order > b->order;
}

/* The diverse order's sample of the rows: a reservoir (Algorithm R, drawn from an nn_rng
 * seeded by the "seed" option, so the same query gives the same sample) of at most cap rows
 * whose probabilities are numbers, each with its probabilities, predicted class, attention
 * context and place in the query. */
typedef struct attn_uncertain_sample {
  int diverse;           /* rows to pick (the option), 0: the margin order only */
  uint64_t seed;         /* the option "seed" */
  int C, PD, cap, n;     /* classes, context width, rows the sample may hold, holds */
  int room;              /* rows the arrays below have room for (<= cap) */
  sqlite3_int64 offered; /* rows offered so far */
  nn_rng rng;
  sqlite3_int64 *order; /* (room) each row's place in the query */
  int *top;             /* (room) */
  float *probs;         /* (room, C) */
  float *pooled;        /* (room, PD) */
  float *chunk_pooled;  /* the current chunk's contexts */
  int chunk_cap;
} attn_uncertain_sample;

static void attn_uncertain_sample_free(attn_uncertain_sample *s) {
  sqlite3_free(s->order);
  sqlite3_free(s->top);
  sqlite3_free(s->probs);
  sqlite3_free(s->pooled);
  sqlite3_free(s->chunk_pooled);
}

/* Room for n rows in the sample (n <= cap), doubling. */
static int attn_uncertain_sample_reserve(attn_uncertain_sample *s, int n) {
  if (n <= s->room) return SQLITE_OK;
  sqlite3_int64 grown = s->room ? 2 * (sqlite3_int64)s->room : 1024;
  if (grown < n) grown = n;
  if (grown > s->cap) grown = s->cap;
  sqlite3_int64 *order = sqlite3_realloc64(s->order, sizeof *order * (sqlite3_uint64)grown);
  if (order) s->order = order;
  int *top = sqlite3_realloc64(s->top, sizeof *top * (sqlite3_uint64)grown);
  if (top) s->top = top;
  float *probs = sqlite3_realloc64(s->probs, sizeof *probs * (sqlite3_uint64)grown * s->C);
  if (probs) s->probs = probs;
  float *pooled = sqlite3_realloc64(s->pooled, sizeof *pooled * (sqlite3_uint64)grown * s->PD);
  if (pooled) s->pooled = pooled;
  if (!order || !top || !probs || !pooled) return SQLITE_NOMEM;
  s->room = (int)grown;
  return SQLITE_OK;
}

/* The options: NULL or a JSON object, {"diverse": k} (0 to ATTN_DIVERSE_MAX, 0 the margin
 * order) and {"seed": s} (0 to ATTN_SEED_MAX); whole numbers may be written 1e2 or 100.0. */
static int attn_uncertain_options(sqlite3_value *arg, attn_uncertain_sample *s, char **msg) {
  static const char usage[] = "attn_uncertain: the options must be a JSON object as text, e.g. "
                              "'{\"diverse\":100}'";
  if (!arg || sqlite3_value_type(arg) == SQLITE_NULL) return SQLITE_OK;
  if (sqlite3_value_type(arg) != SQLITE_TEXT) {
    *msg = sqlite3_mprintf("%s", usage);
    return SQLITE_ERROR;
  }
  char err[NN_ERR_LEN] = "";
  nn_json *doc = NULL;
  int st = nn_json_parse(&doc, (const char *)sqlite3_value_text(arg),
                         (size_t)sqlite3_value_bytes(arg), &attn_mem, err);
  if (st == NN_NOMEM) return SQLITE_NOMEM;
  if (st != NN_OK || doc->type != NN_JSON_OBJECT) {
    *msg = st != NN_OK ? sqlite3_mprintf("attn_uncertain: the options are not JSON: %s", err)
                       : sqlite3_mprintf("%s", usage);
    nn_json_free(doc);
    return SQLITE_ERROR;
  }
  int rc = SQLITE_OK;
  for (size_t i = 0; rc == SQLITE_OK && i < doc->count; i++) {
    const nn_json *m = &doc->items[i];
    int diverse = nn_json_key_is(m, "diverse");
    int64_t v = 0;
    /* whole numbers as attn_fit reads them: 100, 1e2 and 100.0 alike; seeds as its "seed" */
    if (!diverse && !nn_json_key_is(m, "seed")) {
      char key[160];
      nn_json_quote_for_message(key, sizeof key, m->key, m->key_len);
      *msg = sqlite3_mprintf("attn_uncertain: unknown option %s (expected \"diverse\" or "
                             "\"seed\")",
                             key);
      rc = SQLITE_ERROR;
    } else if (!nn_json_integral(m, &v) || v < 0 ||
               v > (diverse ? ATTN_DIVERSE_MAX : ATTN_SEED_MAX)) {
      *msg = diverse ? sqlite3_mprintf("attn_uncertain: option \"diverse\" must be an integer "
                                       "from 0 to %d, the rows to pick",
                                       ATTN_DIVERSE_MAX)
                     : sqlite3_mprintf("attn_uncertain: option \"seed\" must be an integer from 0 "
                                       "to %lld",
                                       (long long)ATTN_SEED_MAX);
      rc = SQLITE_ERROR;
    } else if (diverse) {
      s->diverse = (int)v;
    } else {
      s->seed = (uint64_t)v;
    }
  }
  nn_json_free(doc);
  return rc;
}

/* Offer a chunk's rows to the sample: those whose probabilities are all numbers. */
static int attn_uncertain_offer(attn_uncertain_sample *s, sqlite3_int64 first, int n,
                                const int *pred, const float *probs) {
  for (int i = 0; i < n; i++) {
    const float *p = probs + (size_t)i * s->C;
    int finite = 1;
    for (int c = 0; c < s->C && finite; c++) finite = isfinite(p[c]);
    if (!finite) continue;
    int slot;
    if (s->n < s->cap) {
      int rc = attn_uncertain_sample_reserve(s, s->n + 1);
      if (rc != SQLITE_OK) return rc;
      slot = s->n++;
    } else {
      uint64_t j = nn_rng_next(&s->rng) % (uint64_t)(s->offered + 1);
      slot = j < (uint64_t)s->cap ? (int)j : -1;
    }
    s->offered++;
    if (slot < 0) continue;
    s->order[slot] = first + i;
    s->top[slot] = pred[i];
    memcpy(s->probs + (size_t)slot * s->C, p, sizeof *p * (size_t)s->C);
    memcpy(s->pooled + (size_t)slot * s->PD, s->chunk_pooled + (size_t)i * s->PD,
           sizeof *s->pooled * (size_t)s->PD);
  }
  return SQLITE_OK;
}

/* Classify one chunk of rows (read by attn_rows_read) into cur->rows. */
static int attn_uncertain_chunk(attn_uncertain_cursor *cur, attn_conn *conn, attn_rows *rows,
                                sqlite3_int64 first, int **pred, float **probs, int *cap,
                                attn_uncertain_sample *smp, char **msg) {
  const char *fn = "attn_uncertain";
  int C = nn_model_num_classes(cur->model->nn), n = rows->n;
  for (int i = 0; i < n; i++) {
    const char *what = sqlite3_value_type(rows->keys[i]) == SQLITE_NULL ? "id"
                       : !rows->texts[i]                                ? "text"
                                                                        : NULL;
    if (what) {
      *msg = sqlite3_mprintf("%s: row %lld of the query has a NULL %s", fn,
                             (long long)(first + i + 1), what);
      return SQLITE_ERROR;
    }
  }
  if (n > *cap) {
    int *p = sqlite3_realloc64(*pred, sizeof **pred * (sqlite3_uint64)n);
    if (p) *pred = p;
    float *q = sqlite3_realloc64(*probs, sizeof **probs * (sqlite3_uint64)n * (sqlite3_uint64)C);
    if (q) *probs = q;
    if (!p || !q) return SQLITE_NOMEM;
    *cap = n;
  }
  if (smp->diverse && n > smp->chunk_cap) {
    float *q = sqlite3_realloc64(smp->chunk_pooled,
                                 sizeof *q * (sqlite3_uint64)n * (sqlite3_uint64)smp->PD);
    if (!q) return SQLITE_NOMEM;
    smp->chunk_pooled = q;
    smp->chunk_cap = n;
  }
  if (cur->n + n > cur->cap) {
    sqlite3_int64 grown = cur->cap ? 2 * cur->cap : 1024;
    while (grown < cur->n + n) grown *= 2;
    attn_uncertain_row *more = sqlite3_realloc64(cur->rows, sizeof *more * (sqlite3_uint64)grown);
    if (!more) return SQLITE_NOMEM;
    cur->rows = more;
    cur->cap = grown;
  }
  int rc = smp->diverse ? attn_classify_pooled(conn, cur->model, rows->texts, rows->lens, n, *pred,
                                               *probs, smp->chunk_pooled, fn, msg)
                        : attn_classify_probs(conn, cur->model, rows->texts, rows->lens, n, *pred,
                                              *probs, fn, msg);
  if (rc != SQLITE_OK) return rc;
  if (smp->diverse) {
    rc = attn_uncertain_offer(smp, first, n, *pred, *probs);
    if (rc != SQLITE_OK) return rc;
  }
  for (int i = 0; i < n; i++) {
    const float *p = *probs + (size_t)i * C;
    float top = -1.0f, second = 0.0f;
    double entropy = 0.0;
    int finite = 1;
    for (int c = 0; c < C; c++) {
      if (!isfinite(p[c])) finite = 0;
      if (p[c] > top) second = top < 0.0f ? 0.0f : top, top = p[c];
      else if (p[c] > second) second = p[c];
      if (p[c] > 0.0f) entropy -= (double)p[c] * log((double)p[c]);
    }
    attn_uncertain_row *r = &cur->rows[cur->n];
    sqlite3_value *id = rows->keys[i];
    rows->keys[i] = NULL;
    /* an integer without a subtype is its number; anything else keeps the copy (the cursor's) */
    r->boxed = sqlite3_value_type(id) != SQLITE_INTEGER || sqlite3_value_subtype(id) != 0;
    if (r->boxed) {
      r->id.value = id;
    } else {
      r->id.integer = sqlite3_value_int64(id);
      sqlite3_value_free(id);
    }
    r->label = (unsigned)(*pred)[i];
    r->probability = finite ? top : NAN;
    r->margin = finite ? top - second : NAN;
    r->entropy = finite ? (float)entropy : NAN;
    r->order = first + i;
    cur->n++;
  }
  return SQLITE_OK;
}

/* The rows at the given places of the query (picks, in pick order) first, the others after
 * them in the margin order; cur->rows in query order on entry (each row's order its index). */
static int attn_uncertain_front(attn_uncertain_cursor *cur, const int64_t *picks, int P) {
  if (P == 0) { /* no rows, or none with probabilities: the margin order */
    if (cur->n > 1) qsort(cur->rows, (size_t)cur->n, sizeof *cur->rows, attn_uncertain_cmp);
    return SQLITE_OK;
  }
  attn_uncertain_row *front = sqlite3_malloc64(sizeof *front * (sqlite3_uint64)P);
  sqlite3_int64 *sorted = sqlite3_malloc64(sizeof *sorted * (sqlite3_uint64)P);
  if (!front || !sorted) {
    sqlite3_free(front);
    sqlite3_free(sorted);
    return SQLITE_NOMEM;
  }
  for (int j = 0; j < P; j++) front[j] = cur->rows[picks[j]], sorted[j] = picks[j];
  qsort(sorted, (size_t)P, sizeof *sorted, attn_int64_cmp);
  if (cur->n > 1) qsort(cur->rows, (size_t)cur->n, sizeof *cur->rows, attn_uncertain_cmp);
  /* keep the rows not picked, in their order, at the end */
  sqlite3_int64 out = cur->n;
  for (sqlite3_int64 i = cur->n - 1; i >= 0; i--) {
    sqlite3_int64 o = cur->rows[i].order;
    if (!bsearch(&o, sorted, (size_t)P, sizeof *sorted, attn_int64_cmp))
      cur->rows[--out] = cur->rows[i];
  }
  memcpy(cur->rows, front, sizeof *front * (size_t)P); /* out == P */
  sqlite3_free(front);
  sqlite3_free(sorted);
  return SQLITE_OK;
}

/* The diverse order over the sample (nn_diverse_order on each row's probabilities and the
 * last layer's input, from its context), then the rows ordered with the picks first. */
static int attn_uncertain_diverse(attn_uncertain_cursor *cur, attn_conn *conn,
                                  attn_uncertain_sample *smp, char **msg) {
  const char *fn = "attn_uncertain";
  nn_model *nn = cur->model->nn;
  int HD = nn_model_head_input_dim(nn), k = smp->diverse < smp->n ? smp->diverse : smp->n;
  float *feat = sqlite3_malloc64(sizeof *feat * (sqlite3_uint64)(smp->n ? smp->n : 1) * HD);
  int64_t *picks = sqlite3_malloc64(sizeof *picks * (sqlite3_uint64)(k ? k : 1));
  if (!feat || !picks) {
    sqlite3_free(feat);
    sqlite3_free(picks);
    return SQLITE_NOMEM;
  }
  nn_model_head_input(nn, smp->pooled, smp->n, feat);
  /* fc1's output above 0: measured better than as it is; a context (no fc1) as it is */
  if (nn_model_config(nn)->fc_hidden > 0)
    for (size_t i = 0; i < (size_t)smp->n * HD; i++)
      if (feat[i] < 0.0f) feat[i] = 0.0f;
  attn_interrupt interrupt = {0};
  interrupt.db = attn_conn_db(conn);
  char err[NN_ERR_LEN] = "";
  int P = 0;
  int st = nn_diverse_order(smp->probs, smp->top, feat, smp->n, smp->C, HD, k, smp->seed,
                            attn_interrupt_check, &interrupt, &attn_mem, picks, &P, err);
  attn_interrupt_end(&interrupt);
  int rc = SQLITE_OK;
  if (st != NN_OK) {
    rc = attn_nn_error(st, fn, err, msg);
  } else {
    for (int j = 0; j < P; j++) picks[j] = smp->order[picks[j]]; /* a place in the query */
    rc = attn_uncertain_front(cur, picks, P);
  }
  sqlite3_free(feat);
  sqlite3_free(picks);
  return rc;
}

static int attn_uncertain_filter(sqlite3_vtab_cursor *base, int idx_num, const char *idx_str,
                                 int argc, sqlite3_value **argv) {
  attn_uncertain_cursor *cur = (attn_uncertain_cursor *)base;
  attn_vtab *vtab = (attn_vtab *)base->pVtab;
  attn_conn *conn = vtab->conn;
  const char *fn = "attn_uncertain";
  char *msg = NULL;
  sqlite3_stmt *stmt = NULL;
  attn_rows rows;
  int *pred = NULL, cap = 0, done = 0, rc;
  float *probs = NULL;
  attn_uncertain_sample smp;
  memset(&rows, 0, sizeof rows);
  memset(&smp, 0, sizeof smp);
  attn_uncertain_reset(cur);
  const char *name = NULL;
  rc = attn_name_value(fn, argc > 0 ? argv[0] : NULL, &name, &msg);
  if (rc != SQLITE_OK) goto done;
  rc = attn_model_acquire(conn, fn, name, &cur->model, &msg);
  if (rc != SQLITE_OK) goto done;
  rc = attn_uncertain_options(attn_arg_given(idx_num, 2) ? argv[argc - 1] : NULL, &smp, &msg);
  if (rc != SQLITE_OK) goto done;
  if (smp.diverse) {
    smp.C = nn_model_num_classes(cur->model->nn);
    smp.PD = nn_model_pooled_dim(cur->model->nn);
    /* ATTN_DIVERSE_SAMPLE rows, fewer when that many rows' numbers would pass
     * ATTN_DIVERSE_BYTES (many classes) */
    sqlite3_int64 row_bytes = 4 * ((sqlite3_int64)smp.C + smp.PD) + 12;
    sqlite3_int64 fit = ATTN_DIVERSE_BYTES / row_bytes;
    smp.cap = (int)(fit < ATTN_DIVERSE_SAMPLE ? (fit > 1 ? fit : 1) : ATTN_DIVERSE_SAMPLE);
    nn_rng_seed(&smp.rng, smp.seed);
  }
  rc = attn_prepare_query(attn_conn_db(conn), fn,
                          argc > 1 ? (const char *)sqlite3_value_text(argv[1]) : NULL, 2,
                          "(id, text)", &stmt, &msg);
  if (rc != SQLITE_OK) goto done;
  while (!done) {
    sqlite3_int64 first = cur->n;
    attn_conn_query_begin(conn, fn);
    rc = attn_rows_read(&rows, stmt, ATTN_ROWS_ID_TEXT, ATTN_CHUNK_ROWS, &done, fn, &msg);
    attn_conn_query_end(conn);
    if (rc != SQLITE_OK) goto done;
    rc = attn_uncertain_chunk(cur, conn, &rows, first, &pred, &probs, &cap, &smp, &msg);
    if (rc != SQLITE_OK) goto done;
  }
  if (smp.diverse) rc = attn_uncertain_diverse(cur, conn, &smp, &msg);
  else if (cur->n > 1) qsort(cur->rows, (size_t)cur->n, sizeof *cur->rows, attn_uncertain_cmp);
done:
  attn_uncertain_sample_free(&smp);
  sqlite3_finalize(stmt);
  attn_rows_free(&rows); /* the ids not handed to cur->rows */
  sqlite3_free(pred);
  sqlite3_free(probs);
  if (rc != SQLITE_OK) {
    attn_uncertain_reset(cur);
    return attn_vtab_fail(base->pVtab, rc, msg, fn);
  }
  return rc;
}

static int attn_uncertain_next(sqlite3_vtab_cursor *base) {
  ((attn_uncertain_cursor *)base)->i++;
  return SQLITE_OK;
}

static int attn_uncertain_eof(sqlite3_vtab_cursor *base) {
  attn_uncertain_cursor *cur = (attn_uncertain_cursor *)base;
  return cur->i >= cur->n;
}

static void attn_uncertain_result(sqlite3_context *ctx, float v) {
  if (isnan(v)) sqlite3_result_null(ctx);
  else sqlite3_result_double(ctx, v);
}

static int attn_uncertain_column(sqlite3_vtab_cursor *base, sqlite3_context *ctx, int col) {
  attn_uncertain_cursor *cur = (attn_uncertain_cursor *)base;
  const attn_uncertain_row *r = &cur->rows[cur->i];
  switch (col) {
  case ATTN_UNCERTAIN_COL_ID:
    if (r->boxed) sqlite3_result_value(ctx, r->id.value);
    else sqlite3_result_int64(ctx, r->id.integer);
    break;
  case ATTN_UNCERTAIN_COL_LABEL:
    sqlite3_result_text(ctx, nn_model_label(cur->model->nn, r->label), -1, SQLITE_TRANSIENT);
    break;
  /* NaN: SQLite gives NULL, but say so rather than rely on it */
  case ATTN_UNCERTAIN_COL_PROBABILITY: attn_uncertain_result(ctx, r->probability); break;
  case ATTN_UNCERTAIN_COL_MARGIN: attn_uncertain_result(ctx, r->margin); break;
  case ATTN_UNCERTAIN_COL_ENTROPY: attn_uncertain_result(ctx, r->entropy); break;
  default: break;
  }
  return SQLITE_OK;
}

static int attn_uncertain_rowid(sqlite3_vtab_cursor *base, sqlite_int64 *rowid) {
  *rowid = ((attn_uncertain_cursor *)base)->i + 1;
  return SQLITE_OK;
}

const sqlite3_module attn_uncertain_module = {
    .iVersion = 0,
    .xCreate = NULL, /* eponymous only */
    .xConnect = attn_uncertain_connect,
    .xBestIndex = attn_uncertain_best_index,
    .xDisconnect = attn_vtab_disconnect,
    .xOpen = attn_vtab_open,
    .xClose = attn_uncertain_close,
    .xFilter = attn_uncertain_filter,
    .xNext = attn_uncertain_next,
    .xEof = attn_uncertain_eof,
    .xColumn = attn_uncertain_column,
    .xRowid = attn_uncertain_rowid,
};
