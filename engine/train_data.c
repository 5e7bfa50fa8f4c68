/* train_data.c -- the rows of a training run (nn_train_data, train_data.h), prepared before the
 * model is made (nn_train_data_prepare) and freed with the trainer (nn_train_data_free):
 *   labels    sorted set of distinct byte strings (memcmp order, shorter first on a tie), as
 *             sklearn's LabelEncoder; 2 to NN_MAX_CLASSES (config.h) classes
 *   split     by a hash of each text: a row validates when its text's position in [0, 1) is
 *             below val_fraction, a class keeping at least 1 row in training ("validation":
 *             "random"); the lesson's: stratified, per class its rows shuffled (Fisher-Yates,
 *             one fixed seed) and round(val_fraction * count) of them to validation; or the
 *             last rows in the order given ("last", "query"), or none ("none")
 *   vocab     from the training split's texts (in row order); every text encoded once
 *   weights   1/count per class over the training split (class_weights), else 1
 * The rows are read through functions (nn_train_rows), never copied: what stays per row is the
 * encoded ids, the length, the class and the split, a few bytes besides the ids. The trainer
 * (train.c), the pretraining and the self-training read them; nothing here knows the trainer.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "json.h"
#include "nn_internal.h"
#include "nn_mem.h"
#include "text.h"
#include "train_data.h"

_Static_assert(NN_MAX_CLASSES <= 65535, "row_class holds a class in 16 bits");

void nn_train_shuffle(int *a, int n, nn_rng *rng) {
  for (int i = n - 1; i > 0; i--) {
    int j = (int)nn_rng_below(rng, (uint32_t)i + 1);
    int t = a[i];
    a[i] = a[j];
    a[j] = t;
  }
}

/* A counting sort: counts[l + 1] rows of length l, summed into where each length begins. */
void nn_train_sort_by_length(int *rows, int count, const uint16_t *row_length, int max_len,
                             int *counts, int *scratch) {
  memset(counts, 0, (size_t)(max_len + 2) * sizeof *counts);
  for (int i = 0; i < count; i++) counts[row_length[rows[i]] + 1]++;
  for (int l = 1; l <= max_len + 1; l++) counts[l] += counts[l - 1];
  for (int i = 0; i < count; i++) scratch[counts[row_length[rows[i]]]++] = rows[i];
  memcpy(rows, scratch, (size_t)count * sizeof *rows);
}

/* ---------------------------------------------------------------- labels */

static int label_bytes_cmp(const char *a, int alen, const char *b, int blen) {
  int common = alen < blen ? alen : blen;
  int c = common ? memcmp(a, b, (size_t)common) : 0;
  if (c) return c;
  return (alen > blen) - (alen < blen);
}

/* A distinct label of the rows: its bytes (the rows'), and its number in first-seen order. */
typedef struct label_entry {
  const char *bytes;
  int len;
  int first;
} label_entry;

static int label_entry_cmp(const void *pa, const void *pb) {
  const label_entry *a = pa, *b = pb;
  return label_bytes_cmp(a->bytes, a->len, b->bytes, b->len); /* distinct: never 0 */
}

/* Row i's label (never NULL: "" when empty), or NN_ERROR naming the row for a length that
 * cannot be. */
static int row_label(const nn_train_rows *rows, int i, const char **bytes, int *len, char *err) {
  int l = 0;
  const char *p = rows->label(rows->ctx, i, &l);
  if (l < 0 || (l > 0 && !p)) {
    snprintf(err, NN_ERR_LEN, "label of row %d has an invalid length %d", i + 1, l);
    return NN_ERROR;
  }
  *bytes = l > 0 ? p : "";
  *len = l;
  return NN_OK;
}

/* Sorted distinct labels -> *out_labels (C NUL-terminated copies), d->row_class. Each row's
 * label is looked up in a hash table of the distinct ones (numbered as first seen; no array of
 * all rows is sorted), then the distinct labels are sorted and the rows' numbers mapped to
 * their ranks. */
static int build_classes(nn_train_data *d, char ***out_labels, const nn_train_data_args *a,
                         char *err) {
  const nn_train_rows *rows = a->rows;
  int n = d->n, status = NN_NOMEM, C = 0, cap = 0;
  label_entry *labels = NULL;
  int *slots = NULL, *rank = NULL;
  char **names = NULL;
  uint32_t mask = 63;
  nn_hash_key key = nn_hash_key_new(d);
  slots = nn_mem_alloc(d->mem, ((size_t)mask + 1) * sizeof *slots);
  if (!slots) goto oom;
  memset(slots, 0xff, ((size_t)mask + 1) * sizeof *slots);
  for (int i = 0; i < n; i++) {
    const char *bytes;
    int len;
    if (i % 4096 == 4095 && a->stop && a->stop(a->stop_ctx)) {
      snprintf(err, NN_ERR_LEN, "interrupted");
      status = NN_INTERRUPTED;
      goto done;
    }
    status = row_label(rows, i, &bytes, &len, err);
    if (status != NN_OK) goto done;
    if (len > 0 && memchr(bytes, 0, (size_t)len)) {
      snprintf(err, NN_ERR_LEN, "label of row %d contains a NUL byte", i + 1);
      status = NN_ERROR;
      goto done;
    }
    uint32_t h = nn_hash_bytes(&key, bytes, len) & mask;
    int e;
    while ((e = slots[h]) >= 0 &&
           (labels[e].len != len || memcmp(labels[e].bytes, bytes, (size_t)len) != 0))
      h = (h + 1) & mask;
    if (e < 0) { /* a new label */
      if (C == cap) {
        int grown = cap ? 2 * cap : 16;
        label_entry *more = nn_mem_realloc(d->mem, labels, (size_t)grown * sizeof *more);
        if (!more) goto oom;
        labels = more;
        cap = grown;
      }
      labels[C] = (label_entry){bytes, len, C};
      slots[h] = e = C++;
      if ((uint32_t)C * 2 > mask + 1) { /* half full: double the table */
        uint32_t size = (mask + 1) * 2;
        int *bigger = nn_mem_alloc(d->mem, (size_t)size * sizeof *bigger);
        if (!bigger) goto oom;
        memset(bigger, 0xff, (size_t)size * sizeof *bigger);
        for (int k = 0; k < C; k++) {
          uint32_t j = nn_hash_bytes(&key, labels[k].bytes, labels[k].len) & (size - 1);
          while (bigger[j] >= 0) j = (j + 1) & (size - 1);
          bigger[j] = k;
        }
        nn_mem_free(d->mem, slots);
        slots = bigger;
        mask = size - 1;
      }
    }
    /* beyond NN_MAX_CLASSES the labels are only counted: that is an error below */
    if (e < NN_MAX_CLASSES) d->row_class[i] = (uint16_t)e;
  }
  if (C < 2) {
    snprintf(err, NN_ERR_LEN, "need at least 2 distinct labels, got 1 (\"%.*s\")",
             labels[0].len > 200 ? 200 : labels[0].len, labels[0].bytes);
    status = NN_ERROR;
    goto done;
  }
  if (C > NN_MAX_CLASSES) {
    snprintf(err, NN_ERR_LEN, "too many distinct labels: %d (at most %d)", C, NN_MAX_CLASSES);
    status = NN_ERROR;
    goto done;
  }
  qsort(labels, (size_t)C, sizeof *labels, label_entry_cmp);
  rank = nn_mem_alloc(d->mem, (size_t)C * sizeof *rank);
  names = nn_mem_calloc(d->mem, (size_t)C, sizeof *names);
  if (!rank || !names) goto oom;
  for (int c = 0; c < C; c++) rank[labels[c].first] = c;
  for (int i = 0; i < n; i++) d->row_class[i] = (uint16_t)rank[d->row_class[i]];
  for (int c = 0; c < C; c++) {
    names[c] = nn_mem_alloc(d->mem, (size_t)labels[c].len + 1);
    if (!names[c]) goto oom;
    memcpy(names[c], labels[c].bytes, (size_t)labels[c].len);
    names[c][labels[c].len] = 0;
  }
  *out_labels = names;
  d->C = C;
  names = NULL;
  status = NN_OK;
  goto done;
oom:
  snprintf(err, NN_ERR_LEN, "out of memory sorting the labels of %d rows", n);
  status = NN_NOMEM;
done:
  if (names)
    for (int c = 0; c < C; c++) nn_mem_free(d->mem, names[c]);
  nn_mem_free(d->mem, names);
  nn_mem_free(d->mem, rank);
  nn_mem_free(d->mem, labels);
  nn_mem_free(d->mem, slots);
  return status;
}
/* ---------------------------------------------------------------- split and encoding */

#define NN_SPLIT_SEED 1234u /* the split of every run: the one of the default seed */

/* *out = a copy of vocab (the same ids). */
static int copy_vocab(nn_vocab **out, const nn_vocab *vocab, nn_interrupt_fn stop, void *stop_ctx,
                      const nn_allocator *mem, char *err) {
  int n = nn_vocab_count(vocab);
  const char **tokens = nn_mem_alloc(mem, (size_t)n * sizeof *tokens);
  int *lens = nn_mem_alloc(mem, (size_t)n * sizeof *lens);
  int status = NN_NOMEM;
  *out = NULL;
  if (tokens && lens) {
    for (int id = 0; id < n; id++) tokens[id] = nn_vocab_token(vocab, id, &lens[id]);
    status = nn_vocab_from_list_ex(out, tokens, lens, n, stop, stop_ctx, mem, err);
  } else {
    snprintf(err, NN_ERR_LEN, "out of memory copying a vocabulary of %d tokens", n);
  }
  nn_mem_free(mem, tokens);
  nn_mem_free(mem, lens);
  return status;
}

/* A warm start: each row's label as the base model's class id (C = the base model's classes),
 * or an error naming the first label the base model does not have. */
static int base_classes(nn_train_data *d, const nn_train_data_args *a, char *err) {
  const nn_model *base = a->base;
  const nn_train_rows *rows = a->rows;
  d->C = nn_model_num_classes(base);
  const char *last = NULL; /* the previous row's label and class: labels repeat */
  int last_len = -1, last_class = -1;
  for (int i = 0; i < d->n; i++) {
    const char *bytes;
    int len;
    if (i % 4096 == 4095 && a->stop && a->stop(a->stop_ctx)) {
      snprintf(err, NN_ERR_LEN, "interrupted");
      return NN_INTERRUPTED;
    }
    int status = row_label(rows, i, &bytes, &len, err);
    if (status != NN_OK) return status;
    int c = len == last_len && memcmp(bytes, last, (size_t)len) == 0
                ? last_class
                : nn_model_label_lookup(base, bytes, len);
    if (c < 0) {
      char quoted[240];
      nn_json_quote_for_message(quoted, sizeof quoted, bytes, (size_t)len);
      snprintf(err, NN_ERR_LEN,
               "label %s of row %d is not one of the base model's %d labels: a warm start keeps "
               "the base model's labels",
               quoted, i + 1, d->C);
      return NN_ERROR;
    }
    d->row_class[i] = (uint16_t)c;
    last = bytes;
    last_len = len;
    last_class = c;
  }
  return NN_OK;
}

/* The side of a text in the split by text: FNV-1a over its bytes, then SplitMix64's finaliser
 * (FNV alone leaves texts that differ in their last byte close), as a fraction in [0, 1). Fixed
 * for every platform, seed and release: a row's side may never change between versions. */
double nn_train_text_position(const char *text, int len) {
  uint64_t h = 0xcbf29ce484222325ull ^ SEED_SPLIT;
  for (int i = 0; i < len; i++) h = (h ^ (unsigned char)text[i]) * 0x100000001b3ull;
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return (double)(h >> 11) * 0x1.0p-53;
}

/* The default recipe's split ("validation": "random"): a row validates when its text's position
 * (nn_train_text_position) is below val_fraction, so the same text lands on the same side in
 * every run with that fraction, whatever else the table holds. A later version is then never
 * trained on an earlier one's validation rows, and "deploy": "if_better" compares the two on
 * rows neither trained on after rows were added or removed. A class left with no training row
 * gets back its validation row of the highest position (d->split_moved counts them: such a
 * version trained on rows of the validation side, which the deploy decision must know). */
static int split_rows_by_text(nn_train_data *d, const nn_train_data_args *a, char *err) {
  const nn_train_rows *rows = a->rows;
  int n = d->n, C = d->C;
  double fraction = nn_decimal_double(a->cfg->val_fraction);
  int *back = nn_mem_alloc(d->mem, (size_t)C * sizeof *back);     /* a class's row to give back */
  double *top = nn_mem_alloc(d->mem, (size_t)C * sizeof *top);    /* its position */
  int *trains = nn_mem_calloc(d->mem, (size_t)C, sizeof *trains); /* its training rows */
  d->val_bits = nn_mem_calloc(d->mem, (size_t)n / 8 + 1, 1);
  int status = NN_OK, n_val = 0;
  if (!back || !top || !trains || !d->val_bits) goto oom;
  for (int c = 0; c < C; c++) back[c] = -1, top[c] = -1.0;
  size_t scanned = 0; /* text bytes since the last interrupt check */
  for (int i = 0; i < n; i++) {
    int len = 0, c = d->row_class[i];
    const char *text = rows->text(rows->ctx, i, &len);
    if (!text || len < 0) len = 0;
    scanned += (size_t)len;
    if ((i % 4096 == 4095 || scanned > ((size_t)1 << 20)) && a->stop) {
      scanned = 0;
      if (a->stop(a->stop_ctx)) {
        snprintf(err, NN_ERR_LEN, "interrupted");
        status = NN_INTERRUPTED;
        goto done;
      }
    }
    double position = nn_train_text_position(text ? text : "", len);
    if (position >= fraction) {
      trains[c]++;
      continue;
    }
    d->val_bits[i >> 3] |= (unsigned char)(1u << (i & 7));
    n_val++;
    if (position > top[c]) top[c] = position, back[c] = i;
  }
  for (int c = 0; c < C; c++)
    if (!trains[c] && back[c] >= 0) {
      d->val_bits[back[c] >> 3] &= (unsigned char)~(1u << (back[c] & 7));
      n_val--;
      d->split_moved++;
    }
  if (n_val == 0) {
    snprintf(err, NN_ERR_LEN,
             "too few rows for a validation split (%d rows in %d classes): with val_fraction %g "
             "no row's text falls in the validation split (a text does with chance %g); give "
             "more rows, a larger val_fraction or \"validation\": \"none\"",
             n, C, (double)a->cfg->val_fraction, (double)a->cfg->val_fraction);
    status = NN_ERROR;
    goto done;
  }
  d->n_val = n_val;
  d->n_train = n - n_val;
  d->val_rows = nn_mem_alloc(d->mem, (size_t)n_val * sizeof *d->val_rows);
  if (!d->val_rows) goto oom;
  for (int i = 0, v = 0; i < n; i++)
    if (nn_train_is_val(d, i)) d->val_rows[v++] = i;
  goto done;
oom:
  snprintf(err, NN_ERR_LEN, "out of memory splitting %d rows", n);
  status = NN_NOMEM;
done:
  nn_mem_free(d->mem, back);
  nn_mem_free(d->mem, top);
  nn_mem_free(d->mem, trains);
  return status;
}

/* The lesson's split ("recipe": "lesson", "validation": "random"), stratified into
 * d->val_bits and d->val_rows (ascending; sorted by length later): per class, its rows
 * shuffled and round(val_fraction * count) of them to validation, keeping at least 1 in
 * training. class_count: (C) rows per class. The buffer of the rows listed by class for the
 * shuffles, shrunk to n_train ints, is kept in d->spare_rows for the epochs' order
 * (nn_train_data_take_spare): no array of n rows is freed and allocated again. */
static int split_rows(nn_train_data *d, const nn_train_data_args *a, const int *class_count,
                      char *err) {
  int n = d->n, C = d->C;
  int *start = nn_mem_alloc(d->mem, ((size_t)C + 1) * sizeof *start);
  int *by_class = nn_mem_alloc(d->mem, (size_t)n * sizeof *by_class);
  d->val_bits = nn_mem_calloc(d->mem, (size_t)n / 8 + 1, 1);
  if (!start || !by_class || !d->val_bits) {
    nn_mem_free(d->mem, start);
    nn_mem_free(d->mem, by_class);
    snprintf(err, NN_ERR_LEN, "out of memory splitting %d rows", n);
    return NN_NOMEM;
  }
  /* by_class: the rows of each class in ascending order; start[c]: where class c begins */
  start[0] = 0;
  for (int c = 0; c < C; c++) start[c + 1] = start[c] + class_count[c];
  for (int i = 0; i < n; i++) by_class[start[d->row_class[i]]++] = i; /* start[c] -> end of c */
  for (int c = C; c > 0; c--) start[c] = start[c - 1];                /* back to the beginnings */
  start[0] = 0;
  /* The split does not follow "seed": a retrain with another seed validates on the same rows,
   * so that "deploy": "if_better" compares two versions on rows neither trained on. Every seed
   * splits as the default seed (1234) always did. */
  nn_rng rng;
  nn_rng_seed(&rng, NN_SPLIT_SEED ^ SEED_SPLIT);
  double fraction = nn_decimal_double(a->cfg->val_fraction);
  int n_val = 0;
  for (int c = 0; c < C; c++) {
    int count = class_count[c];
    nn_train_shuffle(by_class + start[c], count, &rng);
    int take = (int)round(fraction * count);
    if (take > count - 1) take = count - 1;
    if (take < 0) take = 0;
    for (int k = 0; k < take; k++) {
      int i = by_class[start[c] + k];
      d->val_bits[i >> 3] |= (unsigned char)(1u << (i & 7));
    }
    n_val += take;
  }
  d->n_val = n_val;
  d->n_train = n - n_val;
  int status = NN_OK;
  if (n_val == 0) {
    int need = (int)ceil(0.5 / fraction); /* rows a class needs for round(f * count) >= 1 */
    if (need < 2) need = 2;
    snprintf(err, NN_ERR_LEN,
             "too few rows for a validation split (%d rows in %d classes): with val_fraction "
             "%g a class needs at least %d rows to give one to validation",
             n, C, (double)a->cfg->val_fraction, need);
    status = NN_ERROR;
  } else {
    d->val_rows = nn_mem_alloc(d->mem, (size_t)n_val * sizeof *d->val_rows);
    if (!d->val_rows) {
      snprintf(err, NN_ERR_LEN, "out of memory splitting %d rows", n);
      status = NN_NOMEM;
    } else {
      for (int i = 0, v = 0; i < n; i++)
        if (nn_train_is_val(d, i)) d->val_rows[v++] = i;
      /* n_train <= n: shrunk in place (a failed shrink keeps the larger buffer) */
      int *spare = nn_mem_realloc(d->mem, by_class, (size_t)d->n_train * sizeof *spare);
      d->spare_rows = spare ? spare : by_class;
      by_class = NULL;
    }
  }
  nn_mem_free(d->mem, start);
  nn_mem_free(d->mem, by_class);
  return status;
}

/* The split of "validation": "last", "query" and "none" (nn_validation): the last rows in the
 * order given are the validation split -- round(val_fraction * n) of them (at least 1, at most
 * n - 1), cfg.validation_rows of them, or none. */
static int split_rows_ordered(nn_train_data *d, const nn_train_data_args *a, char *err) {
  int n = d->n, n_val = 0;
  if (a->cfg->validation == NN_VALIDATION_LAST) {
    n_val = (int)round(nn_decimal_double(a->cfg->val_fraction) * n);
    if (n_val < 1) n_val = 1;
    if (n_val > n - 1) n_val = n - 1;
  } else if (a->cfg->validation == NN_VALIDATION_QUERY) {
    n_val = a->cfg->validation_rows;
  }
  if (a->cfg->validation != NN_VALIDATION_NONE && (n_val < 1 || n_val > n - 1)) {
    snprintf(err, NN_ERR_LEN,
             a->cfg->validation == NN_VALIDATION_LAST
                 ? "too few rows for a validation split (%d row): \"validation\": \"last\" needs "
                   "at least 2"
                 : "the validation split must have 1 to %d rows (all rows given less one), got "
                   "%d",
             a->cfg->validation == NN_VALIDATION_LAST ? n : n - 1, n_val);
    return NN_ERROR;
  }
  d->n_val = n_val;
  d->n_train = n - n_val;
  d->val_bits = nn_mem_calloc(d->mem, (size_t)n / 8 + 1, 1);
  d->val_rows = nn_mem_alloc(d->mem, (size_t)(n_val ? n_val : 1) * sizeof *d->val_rows);
  if (!d->val_bits || !d->val_rows) {
    snprintf(err, NN_ERR_LEN, "out of memory splitting %d rows", n);
    return NN_NOMEM;
  }
  for (int i = 0; i < n_val; i++) {
    int row = d->n_train + i;
    d->val_rows[i] = row;
    d->val_bits[row >> 3] |= (unsigned char)(1u << (row & 7));
  }
  return NN_OK;
}

/* The training split's texts in row order, as nn_vocab_build_rows asks for them. */
typedef struct train_texts {
  const nn_train_data *d;
  const nn_train_rows *rows;
  int next; /* the row after the last one given */
} train_texts;

static const char *train_text(void *ctx, int t, int *len) {
  train_texts *c = ctx;
  while (c->next < c->d->n && nn_train_is_val(c->d, c->next)) c->next++;
  int i = c->next++;
  return c->rows->text(c->rows->ctx, i, len);
}

/* Vocabulary from the training texts (in row order) into *vocab -- or a copy of `fixed` when it
 * is given (a warm start) -- then every row encoded into d->id_blocks / group_start /
 * row_length: each block's ids through a scratch buffer into an allocation of their exact size.
 * *vocab stays the caller's to free, also on error. */
static int encode_rows(nn_train_data *d, nn_vocab **vocab, const nn_train_data_args *a, char *err) {
  const nn_train_rows *rows = a->rows;
  const nn_vocab *fixed = a->base ? nn_model_vocab(a->base) : NULL;
  int n = d->n + d->n_unlab, max_len = a->cfg->max_len, status; /* the unlabelled rows last */
  void *stage = NULL;
  /* one token past the limit is read, so that a text cut at max_len is counted as cut */
  nn_config probe = *a->cfg;
  probe.max_len = max_len + 1;
  nn_token *tokens = nn_mem_alloc(d->mem, (size_t)(max_len + 1) * sizeof *tokens);
  int *keep = rows->done ? nn_mem_alloc(d->mem, ((size_t)1 << TOKEN_BLOCK_SHIFT) * sizeof *keep)
                         : NULL; /* a block's validation rows, for rows->done */
  if (!tokens || (rows->done && !keep)) goto oom;
  train_texts cursor = {d, rows, 0};
  status = fixed ? copy_vocab(vocab, fixed, a->stop, a->stop_ctx, d->mem, err)
                 : nn_vocab_build_rows(vocab, train_text, &cursor, d->n_train + d->n_unlab, a->cfg,
                                       a->stop, a->stop_ctx, d->mem, err);
  if (status != NN_OK) goto done;

  /* ids are < the vocabulary's size: 16 bits each when they fit */
  d->ids16 = nn_vocab_count(*vocab) <= 65536;
  size_t width = d->ids16 ? sizeof(uint16_t) : sizeof(int32_t);
  int blocks = ((n - 1) >> TOKEN_BLOCK_SHIFT) + 1;
  size_t capacity = ((size_t)8 << TOKEN_BLOCK_SHIFT) + (size_t)max_len; /* grows when needed */
  stage = nn_mem_alloc(d->mem, capacity * width);
  d->id_blocks = nn_mem_calloc(d->mem, (size_t)blocks, sizeof *d->id_blocks);
  d->group_start =
      nn_mem_alloc(d->mem, ((size_t)((n - 1) >> TOKEN_GROUP_SHIFT) + 1) * sizeof *d->group_start);
  d->row_length = nn_mem_alloc(d->mem, (size_t)n * sizeof *d->row_length);
  if (!stage || !d->id_blocks || !d->group_start || !d->row_length) goto oom;
  size_t scanned = 0; /* text bytes since the last interrupt check */
  for (int b = 0; b < blocks; b++) {
    int first = b << TOKEN_BLOCK_SHIFT;
    int end = n - first > (1 << TOKEN_BLOCK_SHIFT) ? first + (1 << TOKEN_BLOCK_SHIFT) : n;
    size_t used = 0; /* < 4096 rows x 4096 ids */
    for (int i = first; i < end; i++) {
      int len = 0;
      const char *text = rows->text(rows->ctx, i, &len);
      scanned += text && len > 0 ? (size_t)len : 0;
      if ((i % 4096 == 4095 || scanned > ((size_t)1 << 20)) && a->stop) { /* long texts too */
        scanned = 0;
        if (a->stop(a->stop_ctx)) {
          snprintf(err, NN_ERR_LEN, "interrupted");
          status = NN_INTERRUPTED;
          goto done;
        }
      }
      int count = nn_text_encode(tokens, text ? text : "", text ? len : 0, &probe, *vocab);
      if (count < 1) count = 1, tokens[0].id = NN_UNK; /* the contract says >= 1; be safe */
      if (count > max_len) count = max_len, d->n_truncated++;
      if (used + (size_t)count > capacity) {
        size_t grown = 2 * capacity;
        void *bigger = nn_mem_realloc(d->mem, stage, grown * width);
        if (!bigger) goto oom;
        stage = bigger;
        capacity = grown;
      }
      if ((i & ((1 << TOKEN_GROUP_SHIFT) - 1)) == 0)
        d->group_start[i >> TOKEN_GROUP_SHIFT] = (uint32_t)used;
      d->row_length[i] = (uint16_t)count; /* max_len <= 4096 */
      if (i >= d->n || !nn_train_is_val(d, i)) d->pretrain_tokens += count;
      if (d->ids16)
        for (int t = 0; t < count; t++) ((uint16_t *)stage)[used + t] = (uint16_t)tokens[t].id;
      else
        for (int t = 0; t < count; t++) ((int32_t *)stage)[used + t] = tokens[t].id;
      used += (size_t)count;
    }
    d->id_blocks[b] = nn_mem_alloc(d->mem, used * width);
    if (!d->id_blocks[b]) goto oom;
    memcpy(d->id_blocks[b], stage, used * width);
    if (rows->done) { /* these texts are not read again */
      int nkeep = 0;
      for (int i = first; i < end && i < d->n; i++)
        if (nn_train_is_val(d, i)) keep[nkeep++] = i;
      rows->done(rows->ctx, first, end, keep, nkeep);
    }
  }
  status = NN_OK;
  goto done;
oom:
  snprintf(err, NN_ERR_LEN, "out of memory encoding %d texts", n);
  status = NN_NOMEM;
done:
  nn_mem_free(d->mem, stage);
  nn_mem_free(d->mem, tokens);
  nn_mem_free(d->mem, keep);
  return status;
}

/* ---------------------------------------------------------------- all of it */

int nn_train_data_prepare(nn_train_data *d, char ***names_out, nn_vocab **vocab_out,
                          const nn_train_data_args *a, char *err) {
  int n = a->n, status, C = 0;
  char **names = NULL;
  int *class_count = NULL, *train_count = NULL;
  nn_vocab *vocab = NULL;
  *names_out = NULL;
  *vocab_out = NULL;
  memset(d, 0, sizeof *d);
  d->mem = a->mem;
  d->n = n;
  d->n_unlab = a->n_unlab;
  d->row_class = nn_mem_alloc(d->mem, (size_t)n * sizeof *d->row_class);
  if (!d->row_class) goto oom;
  status = a->base ? base_classes(d, a, err) : build_classes(d, &names, a, err);
  if (status != NN_OK) goto done;
  C = d->C;
  class_count = nn_mem_calloc(d->mem, (size_t)C, sizeof *class_count);
  train_count = nn_mem_calloc(d->mem, (size_t)C, sizeof *train_count);
  if (!class_count || !train_count) goto oom;
  for (int i = 0; i < n; i++) class_count[d->row_class[i]]++;

  status = a->cfg->validation != NN_VALIDATION_RANDOM ? split_rows_ordered(d, a, err)
           : a->cfg->recipe == NN_RECIPE_LESSON       ? split_rows(d, a, class_count, err)
                                                      : split_rows_by_text(d, a, err);
  if (status != NN_OK) goto done;

  status = encode_rows(d, &vocab, a, err);
  if (status != NN_OK) goto done;

  d->class_weights = nn_mem_alloc(d->mem, (size_t)C * sizeof *d->class_weights);
  if (!d->class_weights) goto oom;
  for (int i = 0; i < n; i++)
    if (!nn_train_is_val(d, i)) train_count[d->row_class[i]]++;
  for (int c = 0; c < C; c++) /* a warm start's class may have no rows: no loss reads its 0 */
    d->class_weights[c] = !a->cfg->class_weights ? 1.0f
                          : train_count[c]       ? (float)(1.0 / (double)train_count[c])
                                                 : 0.0f;
  status = NN_OK;
  goto done;
oom:
  snprintf(err, NN_ERR_LEN, "out of memory preparing training over %d rows", n);
  status = NN_NOMEM;
done:
  if (status == NN_OK) {
    *names_out = names;
    *vocab_out = vocab;
  } else {
    for (int c = 0; names && c < C; c++) nn_mem_free(d->mem, names[c]);
    nn_mem_free(d->mem, names);
    nn_vocab_free(vocab);
  }
  nn_mem_free(d->mem, class_count);
  nn_mem_free(d->mem, train_count);
  if (status != NN_OK) nn_train_data_free(d);
  return status;
}

int nn_train_data_grow_classes(nn_train_data *d) {
  size_t rows = (size_t)d->n + (size_t)d->n_unlab;
  uint16_t *row_class = nn_mem_alloc(d->mem, rows * sizeof *row_class);
  if (!row_class) return NN_NOMEM;
  memcpy(row_class, d->row_class, (size_t)d->n * sizeof *row_class);
  memset(row_class + d->n, 0, (size_t)d->n_unlab * sizeof *row_class); /* until chosen */
  nn_mem_free(d->mem, d->row_class);
  d->row_class = row_class;
  return NN_OK;
}

int *nn_train_data_take_spare(nn_train_data *d) {
  int *spare = d->spare_rows;
  d->spare_rows = NULL;
  return spare;
}

void nn_train_data_free(nn_train_data *d) {
  const nn_allocator *mem = d->mem;
  for (int b = 0; d->id_blocks && b <= (d->n + d->n_unlab - 1) >> TOKEN_BLOCK_SHIFT; b++)
    nn_mem_free(mem, d->id_blocks[b]);
  nn_mem_free(mem, d->id_blocks);
  nn_mem_free(mem, d->group_start);
  nn_mem_free(mem, d->row_length);
  nn_mem_free(mem, d->row_class);
  nn_mem_free(mem, d->val_bits);
  nn_mem_free(mem, d->val_rows);
  nn_mem_free(mem, d->class_weights);
  nn_mem_free(mem, d->spare_rows);
  memset(d, 0, sizeof *d);
}
