/* train.h -- the trainer's structure and what train.c (creation, the epochs), pretrain.c and
 * self_train.c share. The rows it trains on are train_data.h's. Internal to the engine: nn.h is
 * the public interface. */
#ifndef ATTNEXT_TRAIN_H
#define ATTNEXT_TRAIN_H

#include "model.h"
#include "nn_internal.h"
#include "pool.h"
#include "train_data.h"

#define NN_TRAIN_MAX_LOGITS (1u << 26) /* batch rows x classes: bounds the (B, C) buffers */
#define BUCKET_BATCHES 50              /* batches per length-sorted chunk of an epoch */
#define MAX_SHARDS 8                   /* data-parallel pieces of a batch */
#define SHARD_ROWS 32                  /* a batch of B rows runs as clamp(B / 32, 1, 8) shards */

/* Seeds of the trainer's random streams, derived from cfg->seed (the model's initialisation
 * draws from cfg->seed itself; the split's is train_data.h's SEED_SPLIT). */
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
  nn_train_data data; /* the rows (train_data.c): classes, split, ids, class weights */
  int n_unlab_given;  /* nn_trainer_args.n_unlabelled: counted in the metrics, read or not */
  double pretrain_seconds, pretrain_loss; /* the pretraining's (pretrain.c) */
  int pretrain_done;                      /* nn_train_pretrain ran (or had nothing to do) */
  size_t param_count;
  nn_interrupt_fn stop; /* nn_trainer_args.stop, during creation only; NULL after */
  void *stop_ctx;

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
  int *pseudo_rows;    /* (pseudo_max) ascending row numbers, their labels in data.row_class */
  float *start_params; /* (param_count) the weights the first epoch started from */
  int round;           /* 0: the first training; 1: the second, with the pseudo-labelled rows */
  int round_start;     /* the epochs run before this round (cosine_lr's origin) */
  int round1_epochs;   /* the epochs the first round ran */
  int round1_batch;    /* its batch size (cfg.batch_size then) */
  double self_training_seconds; /* choosing the pseudo-labelled rows */

  /* the choice of word dropout (cfg.data_sized_done & NN_SIZED_WORD_DROPOUT, choose.c) */
  int choose_done;            /* nn_train_choose ran (or had nothing to do) */
  int choose_failed;          /* ... and stopped on an error: the trainer trains no more */
  const unsigned char *known; /* (V) or NULL: a scoring batch reads each word not marked as
                               * <UNK> (the words of the half a fold trained on) */
  double choose_f1[2];        /* the two settings' weighted F1 over both halves */
  double choose_seconds;
};

/* 1 while self-training's second round is still to come: planned (tr->pseudo_max > 0, from
 * nn_train_self_plan) and round 1 not handed over yet (train.c's second_round_begin ends it,
 * with or without rows to add). */
static inline int nn_train_second_round_pending(const nn_trainer *tr) {
  return tr->pseudo_max > 0 && tr->round == 0;
}

/* pretrain.c: skip-gram vectors learnt on the texts of the training split and the unlabelled
 * rows, written into every member's embedding and subword tables (cfg.pretrain_epochs passes;
 * none: nothing changes). Before the first epoch. */
int nn_train_pretrain(nn_trainer *tr, nn_progress_fn fn, void *ctx, char *err);
/* self_train.c: with cfg.self_training and unlabelled rows, how many rows round 2 can add
 * (tr->pseudo_max) and the buffers it needs (pseudo_rows, start_params, data.row_class grown to
 * the unlabelled rows); after the sizing, before the batch buffers (sized to round 2's rows
 * too). */
int nn_train_self_plan(nn_trainer *tr, char *err);
/* The end of round 1, which train.c drives (the unlabelled rows scored with the kept weights, the
 * surest of each class chosen, the trainer set back to its first epoch's weights and optimizer
 * for round 2): its scratch (every unlabelled row's score, a batch of row numbers, 2C counts),
 * each batch's logits (tr->logits, unlabelled rows first .. first + count) read into classes
 * and scores, the choice (tr->n_pseudo rows in tr->pseudo_rows), the scratch freed; and
 * nn_train_self_free, the buffers nn_train_self_plan made. */
typedef struct nn_self_scores {
  struct nn_scored_row *scores; /* (n_unlab) */
  int *rows;                    /* (batch_rows) */
  int *counts;                  /* (2C) */
} nn_self_scores;
int nn_train_self_scores_alloc(nn_trainer *tr, nn_self_scores *sc, char *err);
void nn_train_self_score(nn_trainer *tr, nn_self_scores *sc, int first, int count);
void nn_train_self_choose(nn_trainer *tr, nn_self_scores *sc);
void nn_train_self_scores_free(nn_trainer *tr, nn_self_scores *sc);
void nn_train_self_free(nn_trainer *tr);
/* The logits of rows[0..count) (count <= tr->batch_rows) in tr->logits' first (count, C)
 * block, as validation computes them (no dropout; an ensemble's mean). */
int nn_train_forward_rows(nn_trainer *tr, const int *rows, int count, char *err);

/* choose.c: word dropout chosen on the labelled rows, before the first epoch (nn.h,
 * nn_trainer_choose); the trainer then as nn_trainer_create left it, but for the setting. */
int nn_train_choose(nn_trainer *tr, nn_progress_fn fn, void *ctx, char *err);
/* NN_INTERRUPTED, with its message in err. */
int nn_train_interrupted(char *err);
/* train.c, for choose.c: Adam, the schedule and early stopping as before a round's first epoch;
 * and one pass of training batches over tr->order[0 .. n_rows) (shuffled, sorted by length in
 * chunks, cut into batches of cfg.batch_size, their order shuffled), fn called after each batch
 * (batches_done of *batches). *loss: the pass's mean batch loss; *rate: rows a second. */
int nn_train_reset_optimizer(nn_trainer *tr, char *err);
int nn_train_pass(nn_trainer *tr, int n_rows, nn_progress_fn fn, void *ctx, double *loss,
                  double *rate, int *batches, char *err);
/* The streams nn_trainer_create seeds from cfg.seed (shuffle, dropout, word dropout), seeded
 * again from seed. */
void nn_train_seed_streams(nn_trainer *tr, uint64_t seed);

/* One skip-gram pair, as fastText's binary logistic loss: L = -log sigmoid(u.o) for label 1,
 * -log(1 - sigmoid(u.o)) for label 0. grad (E) += -lr dL/du (accumulates: the input vector's
 * step, taken after all its pairs); o (E) += -lr dL/do (in place, with u as it was). Returns L
 * (before the step). */
double nn_skipgram_pair(const float *u, float *o, float *grad, int E, float label, float lr);

#endif
