/* train.h -- the trainer's structure and the helpers train.c (the epochs) and train_data.c
 * (preparing the rows) share. Internal to the engine: nn.h is the public interface. */
#ifndef ATTNEXT_TRAIN_H
#define ATTNEXT_TRAIN_H

#include "model.h"
#include "nn_internal.h"
#include "pool.h"

#define NN_TRAIN_MAX_LOGITS (1u << 26) /* batch rows x classes: bounds the (B, C) buffers */
#define BUCKET_BATCHES 50              /* batches per length-sorted chunk of an epoch */
#define MAX_SHARDS 8                   /* data-parallel pieces of a batch */
#define TOKEN_BLOCK_SHIFT 12           /* the ids of each 4096 rows in an allocation of their own */
#define TOKEN_GROUP_SHIFT 4 /* where a row's ids begin: its group's (16 rows) start + lengths */
_Static_assert(TOKEN_GROUP_SHIFT <= TOKEN_BLOCK_SHIFT, "a group of rows never spans two blocks");
#define SHARD_ROWS 32 /* a batch of B rows runs as clamp(B / 32, 1, 8) shards */

/* Seeds of the trainer's random streams, derived from cfg->seed (the model's initialisation
 * draws from cfg->seed itself). */
#define SEED_SPLIT 0x53504c4954000001ull        /* "SPLIT" */
#define SEED_SHUFFLE 0x5348554646000002ull      /* "SHUFF" */
#define SEED_DROPOUT 0x44524f5000000003ull      /* "DROP" */
#define SEED_WORD_DROPOUT 0x574f524400000004ull /* "WORD" */

struct nn_trainer {
  const nn_allocator *mem; /* nn_trainer_args.mem: the trainer's memory, its model's too */
  nn_config cfg;
  nn_model *model;      /* NULL once taken */
  const nn_backend *be; /* the model's: gradients and Adam's moments live in its memory */
  nn_workspace *ws;
  int K;                /* networks trained: the model's members (1: a single network) */
  int batch_rows;       /* the largest batch: the stride of each member's logits */
  size_t member_stride; /* ints: the stride of each member's copy of a batch's tokens */
  nn_adam adam;
  int C;                   /* classes */
  int n, n_train, n_val;   /* rows */
  int n_unlab;             /* unlabelled rows n .. n + n_unlab - 1: encoded, for pretraining only */
  int n_unlab_given;       /* nn_trainer_args.n_unlabelled: counted in the metrics, read or not */
  int64_t pretrain_tokens; /* tokens of the training and unlabelled rows */
  int n_truncated;         /* rows whose text had more than max_len tokens (cut there) */
  int split_moved;         /* the split by text: rows of the validation side that train (a class's
                    * only rows) */
  double pretrain_seconds, pretrain_loss; /* the pretraining's (pretrain.c) */
  int pretrain_done;                      /* nn_train_pretrain ran (or had nothing to do) */
  size_t param_count;
  nn_interrupt_fn stop; /* nn_trainer_args.stop, during creation only; NULL after */
  void *stop_ctx;

  /* Every row, encoded once, compactly: the bytes per row are what millions of rows cost
   * (tests/bench/memory_bench.py). Row i's ids are the row_length[i] ids of id_blocks[i >> 12]
   * from group_start[i >> 4] + the lengths of the rows before i in its group of 16 (at most
   * 15 x 4096 ids, so a 32-bit start for 16 rows instead of one per row); 16 bits each when
   * the vocabulary has <= 65,536 words (ids16), else 32. Each block of 4096 rows is its own
   * allocation of its exact size: no array of all ids grows by copying. */
  void **id_blocks;        /* (n / 4096 + 1) uint16_t (ids16) or int32_t ids */
  int ids16;               /* 1: every id fits 16 bits */
  uint32_t *group_start;   /* (n / 16 + 1) from the start of the group's block */
  uint16_t *row_length;    /* (n) 1..max_len */
  uint16_t *row_class;     /* (n) < NN_MAX_CLASSES */
  unsigned char *val_bits; /* (n / 8 + 1) bit i: row i is in the validation split */
  int *val_rows;           /* (n_val) sorted by length (stable) */
  float *class_weights;    /* (C) */

  /* epoch buffers */
  int *order;        /* (n_train) this epoch's row order: the training rows (ascending), then
                      * shuffled and sorted */
  int *sort_scratch; /* (n_train) */
  int *length_count; /* (max_len + 2) counting sort */
  int *batch_perm;   /* (batches per epoch) */
  int *tokens;       /* (K, B, T) with T <= the longest row: each member's copy (make_batch) */
  int *lengths;      /* (B) */
  int *labels;       /* (B) */
  float *logits;     /* (K, B, C): each member's block; validation uses the first (B, C) */
  float *dlogits;    /* (K, B, C) */
  int64_t *true_positive, *predicted, *support; /* (C) each */
  float *best_params;                           /* (param_count) */

  nn_rng shuffle_rng, dropout_rng, word_rng;

  /* Data parallelism: each batch is cut into `shards` contiguous pieces, a number set by the
   * batch size alone (not by the core count), run on the pool; shard s writes gradients to
   * shard_grads[s] (shard 0: the model's), which are then summed in shard order. So results are
   * bit-identical whatever the number of threads. */
  nn_pool *pool;
  int shards;
  nn_workspace *shard_ws[MAX_SHARDS];
  float *shard_grads[MAX_SHARDS];
  /* Sparse embedding gradient (host memory only): a batch touches a few hundred of the V rows
   * of embeddings.weight (92% of the parameters with the lesson's sizes), so each shard lists
   * the distinct rows it touched (rows[s], deduplicated with stamp[s]); the reduction adds
   * only those, and after Adam only those are zeroed again. Every row skipped is exactly zero,
   * so the results are bit-identical to dense passes. */
  int sparse_embedding;
  size_t emb_size; /* V * E: the embedding rows come first in the buffers */
  int *rows[MAX_SHARDS], nrows[MAX_SHARDS], rows_cap[MAX_SHARDS];
  unsigned *stamp[MAX_SHARDS]; /* (V) batch number that last listed each row */
  unsigned batch_no;
  /* lazy_adam: the distinct tokens of the batch (the embedding rows Adam updates), listed from
   * the batch's tokens with lazy_stamp (V) */
  int *lazy_rows, nlazy;
  unsigned *lazy_stamp, lazy_no;
  size_t table_rows;             /* rows of a member's embedding table: V words + S subwords */
  size_t emb_tables;             /* the K tables, first in the buffers: K x table_rows x E floats */
  double current_wsum;           /* the batch's class-weight sum: the loss normaliser */
  double shard_loss[MAX_SHARDS]; /* each shard's unnormalised loss */
  float *step_params;            /* the update pass of the batch (update_task) */
  nn_adam_step_scalars step;
  nn_rng shard_rng[MAX_SHARDS];
  nn_batch current; /* the batch the shard tasks work on */
  int current_training;
  int shard_status[MAX_SHARDS];
  char shard_err[MAX_SHARDS][NN_ERR_LEN];

  /* schedule */
  double lr;               /* current learning rate */
  double lr_factor;        /* ReduceLROnPlateau factor */
  double plateau_best;     /* ReduceLROnPlateau.best */
  int plateau_bad;         /* ReduceLROnPlateau.num_bad_epochs */
  nn_figures best_figures; /* early stopping: the best epoch's validation figures so far, compared
                            * by nn_monitor_better (none yet: infinitely bad) */
  int bad_epochs;
  nn_epoch_stats best; /* stats of the best epoch (best.epoch == 0: none yet); with "storage":
                          "float16", once the model is taken, its figures are the rounded
                          weights' (nn_trainer_take_model) */
  nn_figures float32_figures; /* "storage": "float16": the best epoch's figures as trained */
  int rounded;    /* the model taken was rounded to float16 (and scored again if it could be) */
  size_t clamped; /* weights past the largest float16, clamped to it */
  int epochs_run;
  int done;
  double seconds; /* all epochs together */

  /* pretrained embeddings (nn_trainer_set_embedding, nn_trainer_freeze_embeddings) */
  unsigned char *pretrained; /* (V) 1 for rows set from a vector; NULL until the first */
  int pretrained_words;      /* rows set */
  int freeze_embeddings;
  int embeddings_option; /* either call was made: report it in the metrics */
  int warm_start;        /* created from nn_trainer_args.base */

  /* self-training (cfg.self_training, self_train.c): a second round of epochs from the starting
   * weights over the training rows and the pseudo-labelled ones */
  int pseudo_max;      /* the most unlabelled rows round 2 can add (0: one round only) */
  int n_pseudo;        /* unlabelled rows training with the classifier's label (round 2) */
  int *pseudo_rows;    /* (pseudo_max) ascending row numbers, their labels in row_class */
  float *start_params; /* (param_count) the weights the first epoch started from */
  int round;           /* 0: the first training; 1: the second, with the pseudo-labelled rows */
  int round_start;     /* the epochs run before this round (cosine_lr's origin) */
  int round1_epochs;   /* the epochs the first round ran */
  int round1_batch;    /* its batch size (cfg.batch_size then) */
  double self_training_seconds; /* choosing the pseudo-labelled rows */
};

/* Fisher-Yates, as numpy's shuffle: for i from n-1 down to 1, swap a[i] and a[j], j in [0, i]. */
void nn_train_shuffle(int *a, int n, nn_rng *rng);
/* Stable sort of rows[0..count) by row_length (1..max_len), through counts (max_len + 2) and
 * scratch (count). */
void nn_train_sort_by_length(int *rows, int count, const uint16_t *row_length, int max_len,
                             int *counts, int *scratch);

/* Whether row i is in the validation split. */
static inline int nn_train_is_val(const nn_trainer *tr, int i) {
  return (tr->val_bits[i >> 3] >> (i & 7)) & 1;
}

/* The rows of nn_trainer_args: its functions, or its arrays read through functions. */
typedef struct nn_train_rows {
  nn_row_fn text, label;
  void *ctx;
  void (*done)(void *ctx, int first, int end, const int *keep, int nkeep); /* rows_done */
} nn_train_rows;

/* train_data.c: the rows of a training run, prepared once: the sorted label set (tr->C,
 * tr->row_class, *names: C NUL-terminated copies), the split (tr->val_bits, tr->split_moved,
 * tr->val_rows, tr->n_train, tr->n_val; tr->order allocated), the vocabulary of the training
 * split (*vocab), every row encoded (tr->id_blocks, ids16, group_start, row_length) and the
 * class weights. Reads tr->cfg, tr->n, tr->stop. With a base model (a warm start) the classes
 * are its labels (*names NULL; a label it lacks is an error) and *vocab is a copy of its
 * vocabulary. On success *names and *vocab are the caller's; on error they are NULL and what
 * tr holds is freed with it. */
int nn_train_data_prepare(nn_trainer *tr, char ***names, nn_vocab **vocab, const nn_model *base,
                          const nn_train_rows *rows, char *err);
/* The position in [0, 1) of a text's bytes in the split by text (train_data.c): below
 * val_fraction, the row validates. Never changes between releases or platforms. */
double nn_train_text_position(const char *text, int len);
/* pretrain.c: skip-gram vectors learnt on the texts of the training split and the unlabelled
 * rows, written into every member's embedding and subword tables (cfg.pretrain_epochs passes;
 * none: nothing changes). Before the first epoch. */
int nn_train_pretrain(nn_trainer *tr, nn_progress_fn fn, void *ctx, char *err);
/* self_train.c: with cfg.self_training and unlabelled rows, how many rows round 2 can add
 * (tr->pseudo_max) and the buffers it needs (pseudo_rows, start_params, row_class grown to the
 * unlabelled rows); after the sizing, before the batch buffers (sized to round 2's rows too). */
int nn_train_self_plan(nn_trainer *tr, char *err);
/* The end of round 1: the unlabelled rows scored with the kept weights, the surest of each class
 * chosen (tr->n_pseudo of them), and the trainer set back to its first epoch's weights and
 * optimizer for round 2's epochs (sized to the rows it has then). fn is asked between batches
 * (an interrupt: NN_INTERRUPTED). */
int nn_train_self_begin(nn_trainer *tr, nn_progress_fn fn, void *ctx, char *err);
/* train.c: the logits of rows[0..count) (count <= tr->batch_rows) in tr->logits' first (count,
 * C) block, as validation computes them (no dropout; an ensemble's mean). */
int nn_train_forward_rows(nn_trainer *tr, const int *rows, int count, char *err);

/* One skip-gram pair, as fastText's binary logistic loss: L = -log sigmoid(u.o) for label 1,
 * -log(1 - sigmoid(u.o)) for label 0. grad (E) += -lr dL/du (accumulates: the input vector's
 * step, taken after all its pairs); o (E) += -lr dL/do (in place, with u as it was). Returns L
 * (before the step). */
double nn_skipgram_pair(const float *u, float *o, float *grad, int E, float label, float lr);

/* Row i's ids (row_length[i] of them): a uint16_t * when tr->ids16, else an int32_t *. */
static inline const void *nn_train_row_ids(const nn_trainer *tr, int i) {
  size_t start = tr->group_start[i >> TOKEN_GROUP_SHIFT];
  for (int j = i & ~((1 << TOKEN_GROUP_SHIFT) - 1); j < i; j++) start += tr->row_length[j];
  const void *block = tr->id_blocks[i >> TOKEN_BLOCK_SHIFT];
  return tr->ids16 ? (const void *)((const uint16_t *)block + start)
                   : (const void *)((const int32_t *)block + start);
}

#endif
