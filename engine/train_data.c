/* train_data.c -- the rows of a training run, prepared before the model is made
 * (nn_train_data_prepare, train.h), as the lesson prepares them:
 *   labels    sorted set of distinct byte strings (memcmp order, shorter first on a tie), as
 *             sklearn's LabelEncoder; 2 to NN_MAX_CLASSES (config.h) classes
 *   split     stratified: per class, its rows shuffled (Fisher-Yates, seeded) and
 *             round(val_fraction * count) of them to validation, keeping at least 1 in training
 *             ("validation": "random"); or the last rows in the order given ("last", "query"),
 *             or none ("none")
 *   vocab     from the training split's texts (in row order); every text encoded once
 *   weights   1/count per class over the training split (class_weights), else 1
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "json.h"
#include "nn_mem.h"
#include "text.h"
#include "train.h"

/* Fisher-Yates, as numpy's shuffle: for i from n-1 down to 1, swap a[i] and a[j], j in [0, i]. */
void nn_train_shuffle(int *a, int n, nn_rng *rng) {
  for (int i = n - 1; i > 0; i--) {
    int j = (int)nn_rng_below(rng, (uint32_t)i + 1);
    int t = a[i];
    a[i] = a[j];
    a[j] = t;
  }
}


/* Stable sort of rows[0..count) by row_length (1..max_len), through scratch. */
void nn_train_sort_by_length(int *rows, int count, const uint16_t *row_length, int max_len,
                             int *counts, int *scratch) {
  memset(counts, 0, (size_t)(max_len + 2) * sizeof *counts);
  for (int i = 0; i < count; i++) counts[row_length[rows[i]] + 1]++;
  for (int l = 1; l <= max_len + 1; l++) counts[l] += counts[l - 1];
  for (int i = 0; i < count; i++) scratch[counts[row_length[rows[i]]]++] = rows[i];
  memcpy(rows, scratch, (size_t)count * sizeof *rows);
}

/* ---------------------------------------------------------------- labels */

typedef struct label_ref {
  const char *bytes;
  int len;
  int row;
} label_ref;

static int label_bytes_cmp(const char *a, int alen, const char *b, int blen) {
  int common = alen < blen ? alen : blen;
  int c = common ? memcmp(a, b, (size_t)common) : 0;
  if (c) return c;
  return (alen > blen) - (alen < blen);
}

static int label_ref_cmp(const void *pa, const void *pb) {
  const label_ref *a = pa, *b = pb;
  int c = label_bytes_cmp(a->bytes, a->len, b->bytes, b->len);
  if (c) return c;
  return (a->row > b->row) - (a->row < b->row); /* a total order: qsort's result is unique */
}

/* Sorted distinct labels -> *out_labels (C NUL-terminated copies), row_class[i]. */
static int build_classes(char ***out_labels, int *out_C, int *row_class, const char *const *labels,
                         const int *label_lens, int n, const nn_allocator *mem, char *err) {
  int status = NN_NOMEM, C = 0;
  char **names = NULL;
  label_ref *refs = nn_mem_alloc(mem, (size_t)n * sizeof *refs);
  if (!refs) goto oom;
  for (int i = 0; i < n; i++) {
    int len = label_lens ? label_lens[i] : (labels[i] ? (int)strlen(labels[i]) : 0);
    if (len < 0 || (len > 0 && !labels[i])) {
      snprintf(err, NN_ERR_LEN, "label of row %d has an invalid length %d", i + 1, len);
      status = NN_ERROR;
      goto done;
    }
    if (len > 0 && memchr(labels[i], 0, (size_t)len)) {
      snprintf(err, NN_ERR_LEN, "label of row %d contains a NUL byte", i + 1);
      status = NN_ERROR;
      goto done;
    }
    refs[i].bytes = len > 0 ? labels[i] : "";
    refs[i].len = len;
    refs[i].row = i;
  }
  qsort(refs, (size_t)n, sizeof *refs, label_ref_cmp);
  for (int i = 0; i < n; i++) {
    if (i == 0 || label_bytes_cmp(refs[i].bytes, refs[i].len, refs[i - 1].bytes,
                                  refs[i - 1].len) != 0)
      C++;
    row_class[refs[i].row] = C - 1;
  }
  if (C < 2) {
    snprintf(err, NN_ERR_LEN, "need at least 2 distinct labels, got 1 (\"%.*s\")",
             refs[0].len > 200 ? 200 : refs[0].len, refs[0].bytes);
    status = NN_ERROR;
    goto done;
  }
  if (C > NN_MAX_CLASSES) {
    snprintf(err, NN_ERR_LEN, "too many distinct labels: %d (at most %d)", C,
             NN_MAX_CLASSES);
    status = NN_ERROR;
    goto done;
  }
  names = nn_mem_calloc(mem, (size_t)C, sizeof *names);
  if (!names) goto oom;
  for (int i = 0, c = -1; i < n; i++) {
    if (row_class[refs[i].row] == c) continue;
    c = row_class[refs[i].row];
    names[c] = nn_mem_alloc(mem, (size_t)refs[i].len + 1);
    if (!names[c]) goto oom;
    memcpy(names[c], refs[i].bytes, (size_t)refs[i].len);
    names[c][refs[i].len] = 0;
  }
  *out_labels = names;
  *out_C = C;
  names = NULL;
  status = NN_OK;
  goto done;
oom:
  snprintf(err, NN_ERR_LEN, "out of memory sorting the labels of %d rows", n);
  status = NN_NOMEM;
done:
  if (names)
    for (int c = 0; c < C; c++) nn_mem_free(mem, names[c]);
  nn_mem_free(mem, names);
  nn_mem_free(mem, refs);
  return status;
}
/* ---------------------------------------------------------------- split and encoding */

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
static int base_classes(nn_trainer *tr, const nn_model *base, const char *const *labels,
                        const int *label_lens, char *err) {
  tr->C = nn_model_num_classes(base);
  for (int i = 0; i < tr->n; i++) {
    int len = label_lens ? label_lens[i] : (labels[i] ? (int)strlen(labels[i]) : 0);
    if (len < 0 || (len > 0 && !labels[i])) {
      snprintf(err, NN_ERR_LEN, "label of row %d has an invalid length %d", i + 1, len);
      return NN_ERROR;
    }
    int c = nn_model_label_lookup(base, len > 0 ? labels[i] : "", len);
    if (c < 0) {
      char quoted[240];
      nn_json_quote_for_message(quoted, sizeof quoted, len > 0 ? labels[i] : "", (size_t)len);
      snprintf(err, NN_ERR_LEN,
               "label %s of row %d is not one of the base model's %d labels: a warm start keeps "
               "the base model's labels",
               quoted, i + 1, tr->C);
      return NN_ERROR;
    }
    tr->row_class[i] = c;
  }
  return NN_OK;
}

/* Stratified split into tr->train_rows and tr->val_rows, both ascending (validation is sorted
 * by length later). class_count: (C) rows per class. */
static int split_rows(nn_trainer *tr, const int *class_count, char *err) {
  int n = tr->n, C = tr->C;
  int *start = nn_mem_alloc(tr->mem, ((size_t)C + 1) * sizeof *start);
  int *by_class = nn_mem_alloc(tr->mem, (size_t)n * sizeof *by_class);
  unsigned char *is_val = nn_mem_calloc(tr->mem, (size_t)n, 1);
  if (!start || !by_class || !is_val) {
    nn_mem_free(tr->mem, start);
    nn_mem_free(tr->mem, by_class);
    nn_mem_free(tr->mem, is_val);
    snprintf(err, NN_ERR_LEN, "out of memory splitting %d rows", n);
    return NN_NOMEM;
  }
  /* by_class: the rows of each class in ascending order; start[c]: where class c begins */
  start[0] = 0;
  for (int c = 0; c < C; c++) start[c + 1] = start[c] + class_count[c];
  for (int i = 0; i < n; i++) by_class[start[tr->row_class[i]]++] = i; /* start[c] -> end of c */
  for (int c = C; c > 0; c--) start[c] = start[c - 1];                 /* back to the beginnings */
  start[0] = 0;
  nn_rng rng;
  nn_rng_seed(&rng, tr->cfg.seed ^ SEED_SPLIT);
  double fraction = nn_decimal_double(tr->cfg.val_fraction);
  int n_val = 0;
  for (int c = 0; c < C; c++) {
    int count = class_count[c];
    nn_train_shuffle(by_class + start[c], count, &rng);
    int take = (int)round(fraction * count);
    if (take > count - 1) take = count - 1;
    if (take < 0) take = 0;
    for (int k = 0; k < take; k++) is_val[by_class[start[c] + k]] = 1;
    n_val += take;
  }
  tr->n_val = n_val;
  tr->n_train = n - n_val;
  int status = NN_OK;
  if (n_val == 0) {
    int need = (int)ceil(0.5 / fraction); /* rows a class needs for round(f * count) >= 1 */
    if (need < 2) need = 2;
    snprintf(err, NN_ERR_LEN,
             "too few rows for a validation split (%d rows in %d classes): with val_fraction "
             "%g a class needs at least %d rows to give one to validation",
             n, C, (double)tr->cfg.val_fraction, need);
    status = NN_ERROR;
  } else {
    tr->train_rows = nn_mem_alloc(tr->mem, (size_t)tr->n_train * sizeof *tr->train_rows);
    tr->val_rows = nn_mem_alloc(tr->mem, (size_t)n_val * sizeof *tr->val_rows);
    if (!tr->train_rows || !tr->val_rows) {
      snprintf(err, NN_ERR_LEN, "out of memory splitting %d rows", n);
      status = NN_NOMEM;
    } else {
      for (int i = 0, t = 0, v = 0; i < n; i++) {
        if (is_val[i])
          tr->val_rows[v++] = i;
        else
          tr->train_rows[t++] = i;
      }
    }
  }
  nn_mem_free(tr->mem, start);
  nn_mem_free(tr->mem, by_class);
  nn_mem_free(tr->mem, is_val);
  return status;
}

/* The split of "validation": "last", "query" and "none" (nn_validation): the last rows in the
 * order given are the validation split -- round(val_fraction * n) of them (at least 1, at most
 * n - 1), cfg.validation_rows of them, or none. */
static int split_rows_ordered(nn_trainer *tr, char *err) {
  int n = tr->n, n_val = 0;
  if (tr->cfg.validation == NN_VALIDATION_LAST) {
    n_val = (int)round(nn_decimal_double(tr->cfg.val_fraction) * n);
    if (n_val < 1) n_val = 1;
    if (n_val > n - 1) n_val = n - 1;
  } else if (tr->cfg.validation == NN_VALIDATION_QUERY) {
    n_val = tr->cfg.validation_rows;
  }
  if (tr->cfg.validation != NN_VALIDATION_NONE && (n_val < 1 || n_val > n - 1)) {
    snprintf(err, NN_ERR_LEN,
             tr->cfg.validation == NN_VALIDATION_LAST
                 ? "too few rows for a validation split (%d row): \"validation\": \"last\" needs "
                   "at least 2"
                 : "the validation split must have 1 to %d rows (all rows given less one), got "
                   "%d",
             tr->cfg.validation == NN_VALIDATION_LAST ? n : n - 1, n_val);
    return NN_ERROR;
  }
  tr->n_val = n_val;
  tr->n_train = n - n_val;
  tr->train_rows = nn_mem_alloc(tr->mem, (size_t)tr->n_train * sizeof *tr->train_rows);
  tr->val_rows = nn_mem_alloc(tr->mem, (size_t)(n_val ? n_val : 1) * sizeof *tr->val_rows);
  if (!tr->train_rows || !tr->val_rows) {
    snprintf(err, NN_ERR_LEN, "out of memory splitting %d rows", n);
    return NN_NOMEM;
  }
  for (int i = 0; i < tr->n_train; i++) tr->train_rows[i] = i;
  for (int i = 0; i < n_val; i++) tr->val_rows[i] = tr->n_train + i;
  return NN_OK;
}

/* Vocabulary from the training texts (in row order) into *vocab -- or a copy of `fixed` when it
 * is given (a warm start) -- then every row encoded into tr->ids16 or ids32 / token_start /
 * row_length. *vocab stays the caller's to free, also on error. */
static int encode_rows(nn_trainer *tr, nn_vocab **vocab, const nn_vocab *fixed,
                       const char *const *texts, const int *text_lens, char *err) {
  int n = tr->n, max_len = tr->cfg.max_len, status;
  const char **train_texts = nn_mem_alloc(tr->mem, (size_t)tr->n_train * sizeof *train_texts);
  int *train_lens = nn_mem_alloc(tr->mem, (size_t)tr->n_train * sizeof *train_lens);
  nn_token *tokens = nn_mem_alloc(tr->mem, (size_t)max_len * sizeof *tokens);
  if (!train_texts || !train_lens || !tokens) goto oom;
  for (int k = 0; k < tr->n_train; k++) {
    int i = tr->train_rows[k];
    train_texts[k] = texts[i] ? texts[i] : "";
    train_lens[k] = texts[i] ? text_lens[i] : 0;
  }
  status = fixed ? copy_vocab(vocab, fixed, tr->stop, tr->stop_ctx, tr->mem, err)
                 : nn_vocab_build_ex(vocab, train_texts, train_lens, tr->n_train, &tr->cfg,
                                     tr->stop, tr->stop_ctx, tr->mem, err);
  nn_mem_free(tr->mem, train_texts); /* not needed while the ids grow */
  nn_mem_free(tr->mem, train_lens);
  train_texts = NULL;
  train_lens = NULL;
  if (status != NN_OK) goto done;

  /* ids are < the vocabulary's size: 16 bits each when they fit */
  int narrow = nn_vocab_count(*vocab) <= 65536;
  size_t width = narrow ? sizeof(uint16_t) : sizeof(int32_t);
  size_t capacity = (size_t)n * 8 + 16, used = 0, block_start = 0;
  void *ids = nn_mem_alloc(tr->mem, capacity * width);
  tr->token_start = nn_mem_alloc(tr->mem, (size_t)n * sizeof *tr->token_start);
  tr->token_block =
      nn_mem_alloc(tr->mem, (((size_t)n >> TOKEN_BLOCK_SHIFT) + 1) * sizeof *tr->token_block);
  tr->row_length = nn_mem_alloc(tr->mem, (size_t)n * sizeof *tr->row_length);
  if (narrow)
    tr->ids16 = ids;
  else
    tr->ids32 = ids;
  if (!ids || !tr->token_start || !tr->token_block || !tr->row_length) goto oom;
  for (int i = 0; i < n; i++) {
    if (i % 4096 == 4095 && tr->stop && tr->stop(tr->stop_ctx)) {
      snprintf(err, NN_ERR_LEN, "interrupted");
      status = NN_INTERRUPTED;
      goto done;
    }
    int count = nn_text_encode(tokens, texts[i] ? texts[i] : "", texts[i] ? text_lens[i] : 0,
                               &tr->cfg, *vocab);
    if (count < 1) count = 1, tokens[0].id = NN_UNK; /* the contract says >= 1; be safe */
    if (count > max_len) count = max_len;
    if (used + (size_t)count > capacity) {
      size_t grown = capacity * 2 > used + (size_t)max_len ? capacity * 2 : used + (size_t)max_len;
      void *bigger = nn_mem_realloc(tr->mem, ids, grown * width);
      if (!bigger) goto oom;
      ids = bigger;
      if (narrow)
        tr->ids16 = ids;
      else
        tr->ids32 = ids;
      capacity = grown;
    }
    if ((i & ((1 << TOKEN_BLOCK_SHIFT) - 1)) == 0) tr->token_block[i >> TOKEN_BLOCK_SHIFT] = block_start = used;
    tr->token_start[i] = (uint32_t)(used - block_start); /* < 4096 rows x 4096 ids */
    tr->row_length[i] = (uint16_t)count;                 /* max_len <= 4096 */
    if (narrow)
      for (int t = 0; t < count; t++) tr->ids16[used + t] = (uint16_t)tokens[t].id;
    else
      for (int t = 0; t < count; t++) tr->ids32[used + t] = tokens[t].id;
    used += (size_t)count;
  }
  if (used < capacity) { /* give back the slack */
    void *fitted = nn_mem_realloc(tr->mem, ids, (used ? used : 1) * width);
    if (fitted) {
      if (narrow)
        tr->ids16 = fitted;
      else
        tr->ids32 = fitted;
    }
  }
  status = NN_OK;
  goto done;
oom:
  snprintf(err, NN_ERR_LEN, "out of memory encoding %d texts", n);
  status = NN_NOMEM;
done:
  nn_mem_free(tr->mem, train_texts);
  nn_mem_free(tr->mem, train_lens);
  nn_mem_free(tr->mem, tokens);
  return status;
}

/* ---------------------------------------------------------------- all of it */

int nn_train_data_prepare(nn_trainer *tr, char ***names_out, nn_vocab **vocab_out,
                          const nn_model *base, const char *const *texts, const int *text_lens,
                          const char *const *labels, const int *label_lens, char *err) {
  int n = tr->n, status, C = 0;
  char **names = NULL;
  int *class_count = NULL, *train_count = NULL, *lens_copy = NULL;
  nn_vocab *vocab = NULL;
  *names_out = NULL;
  *vocab_out = NULL;
  tr->row_class = nn_mem_alloc(tr->mem, (size_t)n * sizeof *tr->row_class);
  if (!tr->row_class) goto oom;
  status = base ? base_classes(tr, base, labels, label_lens, err)
                : build_classes(&names, &tr->C, tr->row_class, labels, label_lens, n, tr->mem, err);
  if (status != NN_OK) goto done;
  C = tr->C;
  class_count = nn_mem_calloc(tr->mem, (size_t)C, sizeof *class_count);
  train_count = nn_mem_calloc(tr->mem, (size_t)C, sizeof *train_count);
  if (!class_count || !train_count) goto oom;
  for (int i = 0; i < n; i++) class_count[tr->row_class[i]]++;

  status = tr->cfg.validation == NN_VALIDATION_RANDOM ? split_rows(tr, class_count, err)
                                                       : split_rows_ordered(tr, err);
  if (status != NN_OK) goto done;

  if (!text_lens) { /* NUL-terminated texts */
    lens_copy = nn_mem_alloc(tr->mem, (size_t)n * sizeof *lens_copy);
    if (!lens_copy) goto oom;
    for (int i = 0; i < n; i++) lens_copy[i] = texts[i] ? (int)strlen(texts[i]) : 0;
    text_lens = lens_copy;
  }
  status = encode_rows(tr, &vocab, base ? nn_model_vocab(base) : NULL, texts, text_lens, err);
  if (status != NN_OK) goto done;

  tr->class_weights = nn_mem_alloc(tr->mem, (size_t)C * sizeof *tr->class_weights);
  if (!tr->class_weights) goto oom;
  for (int k = 0; k < tr->n_train; k++) train_count[tr->row_class[tr->train_rows[k]]]++;
  for (int c = 0; c < C; c++) /* a warm start's class may have no rows: no loss reads its 0 */
    tr->class_weights[c] = !tr->cfg.class_weights ? 1.0f
                           : train_count[c] ? (float)(1.0 / (double)train_count[c]) : 0.0f;
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
    for (int c = 0; names && c < C; c++) nn_mem_free(tr->mem, names[c]);
    nn_mem_free(tr->mem, names);
    nn_vocab_free(vocab);
  }
  nn_mem_free(tr->mem, class_count);
  nn_mem_free(tr->mem, train_count);
  nn_mem_free(tr->mem, lens_copy);
  return status;
}
