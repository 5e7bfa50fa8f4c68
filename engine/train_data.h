/* train_data.h -- the rows of a training run as the trainer reads them, built once before the
 * model is made and freed with it (train_data.c): the classes, the split, every row's ids and
 * the class weights; and the shuffle and the sort by length that order rows for the epochs and
 * the pretraining. Knows nothing of the trainer (train.h), which holds one nn_train_data and
 * calls in here. Internal to the engine. */
#ifndef ATTNEXT_TRAIN_DATA_H
#define ATTNEXT_TRAIN_DATA_H

#include <stdint.h>

#include "nn.h"

#define TOKEN_BLOCK_SHIFT 12 /* the ids of each 4096 rows in an allocation of their own */
#define TOKEN_GROUP_SHIFT 4  /* where a row's ids begin: its group's (16 rows) start + lengths */
_Static_assert(TOKEN_GROUP_SHIFT <= TOKEN_BLOCK_SHIFT, "a group of rows never spans two blocks");

/* The seed of the split by text's hash and of the lesson's split (train.h has the trainer's). */
#define SEED_SPLIT 0x53504c4954000001ull /* "SPLIT" */

/* The rows of nn_trainer_args: its functions, or its arrays read through functions. */
typedef struct nn_train_rows {
  nn_row_fn text, label;
  void *ctx;
  void (*done)(void *ctx, int first, int end, const int *keep, int nkeep); /* rows_done */
} nn_train_rows;

typedef struct nn_train_data {
  const nn_allocator *mem; /* of every buffer below */
  int n;                   /* labelled rows 0 .. n - 1 */
  int n_unlab;             /* unlabelled rows n .. n + n_unlab - 1: encoded, in no split */
  int C;                   /* classes */
  int n_train, n_val;      /* the labelled rows on each side of the split */
  int split_moved; /* the split by text: rows of the validation side that train (a class's only
                    * rows) */
  int n_truncated; /* rows whose text had more than max_len tokens (cut there) */
  int64_t pretrain_tokens; /* tokens of the training and unlabelled rows */

  /* Every row, encoded once, compactly: the bytes per row are what millions of rows cost
   * (tests/bench/memory_bench.py). Row i's ids are the row_length[i] ids of id_blocks[i >> 12]
   * from group_start[i >> 4] + the lengths of the rows before i in its group of 16 (at most
   * 15 x 4096 ids, so a 32-bit start for 16 rows instead of one per row); 16 bits each when
   * the vocabulary has <= 65,536 words (ids16), else 32. Each block of 4096 rows is its own
   * allocation of its exact size: no array of all ids grows by copying. */
  void **id_blocks;        /* ((n + n_unlab) / 4096 + 1) uint16_t (ids16) or int32_t ids */
  int ids16;               /* 1: every id fits 16 bits */
  uint32_t *group_start;   /* ((n + n_unlab) / 16 + 1) from the start of the group's block */
  uint16_t *row_length;    /* (n + n_unlab) 1..max_len */
  uint16_t *row_class;     /* (n), (n + n_unlab) after nn_train_data_grow_classes; < C */
  unsigned char *val_bits; /* (n / 8 + 1) bit i: row i is in the validation split */
  int *val_rows;           /* (n_val) ascending (the trainer sorts them by length) */
  float *class_weights;    /* (C) */
  int *spare_rows;         /* (n_train) the lesson's split's buffer, no longer needed, or NULL:
                    * nn_train_data_take_spare */
} nn_train_data;

/* What nn_train_data_prepare reads. */
typedef struct nn_train_data_args {
  const nn_config *cfg; /* the split, max_len, the vocabulary's options, class_weights */
  const nn_model *base; /* a warm start's model, else NULL */
  const nn_train_rows *rows;
  int n, n_unlab;       /* labelled rows, then unlabelled ones (after them in rows) */
  nn_interrupt_fn stop; /* asked as the rows are read (NULL: never) */
  void *stop_ctx;
  const nn_allocator *mem; /* of every buffer of the data */
} nn_train_data_args;

/* The rows of a training run, prepared once into *d (filled from scratch): the sorted label set
 * (d->C, d->row_class, *names: C NUL-terminated copies), the split (d->val_bits,
 * d->split_moved, d->val_rows, d->n_train, d->n_val), the vocabulary of the training split
 * (*vocab), every row encoded (d->id_blocks, ids16, group_start, row_length) and the class
 * weights. With a base model (a warm start) the classes are its labels (*names NULL; a label it
 * lacks is an error) and *vocab is a copy of its vocabulary. On success *names and *vocab are
 * the caller's and d is freed by nn_train_data_free; on error *names and *vocab are NULL and d
 * is freed already (empty). */
int nn_train_data_prepare(nn_train_data *d, char ***names, nn_vocab **vocab,
                          const nn_train_data_args *a, char *err);
/* row_class grown to the unlabelled rows too (their classes 0 until chosen): self-training
 * labels them. NN_OK or NN_NOMEM (row_class as it was). */
int nn_train_data_grow_classes(nn_train_data *d);
/* d->spare_rows, now the caller's to free (NULL when there is none). */
int *nn_train_data_take_spare(nn_train_data *d);
/* Frees every buffer of d and empties it (again: nothing to do). */
void nn_train_data_free(nn_train_data *d);

/* Whether row i is in the validation split. */
static inline int nn_train_is_val(const nn_train_data *d, int i) {
  return (d->val_bits[i >> 3] >> (i & 7)) & 1;
}

/* Row i's ids (row_length[i] of them): a uint16_t * when d->ids16, else an int32_t *. */
static inline const void *nn_train_row_ids(const nn_train_data *d, int i) {
  size_t start = d->group_start[i >> TOKEN_GROUP_SHIFT];
  for (int j = i & ~((1 << TOKEN_GROUP_SHIFT) - 1); j < i; j++) start += d->row_length[j];
  const void *block = d->id_blocks[i >> TOKEN_BLOCK_SHIFT];
  return d->ids16 ? (const void *)((const uint16_t *)block + start)
                  : (const void *)((const int32_t *)block + start);
}

/* Fisher-Yates, as numpy's shuffle: for i from n-1 down to 1, swap a[i] and a[j], j in [0, i]. */
void nn_train_shuffle(int *a, int n, nn_rng *rng);
/* Stable sort of rows[0..count) by row_length (1..max_len), through counts (max_len + 2) and
 * scratch (count). */
void nn_train_sort_by_length(int *rows, int count, const uint16_t *row_length, int max_len,
                             int *counts, int *scratch);
/* The position in [0, 1) of a text's bytes in the split by text: below val_fraction, the row
 * validates. Never changes between releases or platforms. */
double nn_train_text_position(const char *text, int len);

#endif
