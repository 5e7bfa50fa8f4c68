/* train.c -- the trainer: its creation, the epochs of a training and what is read off it at
 * the end (the model, the metrics). One loop for every recipe, each of its parts PyTorch's; the
 * recipes' values are in ext/REFERENCE.md (the default) and nn_config_lesson (the lesson's).
 *
 * nn_trainer_create, in this order: the arguments checked; the rows prepared once into tr->data
 * (train_data.c: labels, split, vocabulary, every text encoded, class weights); the default
 * recipe's sizes set to those rows (nn_config_size_to_data); the model made, or a warm start's
 * copied; the shards, the thread pool and Adam; self-training's plan (self_train.c); the batch
 * and epoch buffers, sized to round 2's rows too. Before the first epoch, ext/ may set pretrained
 * embeddings, freeze them or give class weights.
 *
 * nn_trainer_epoch:
 *   order     the training rows shuffled, each chunk of 50 batches' worth sorted by length
 *             (stable counting sort) and cut into batches, the batches' order shuffled: a batch
 *             pads little, yet the data stays well mixed
 *   batch     forward, loss and backward on each shard of the batch, for each member of an
 *             ensemble on its own copy of the tokens (word dropout drawn per member); the
 *             gradients summed in shard order, then Adam (adam.c; lazy_adam: only the
 *             embedding rows the batch read)
 *   loss      CrossEntropyLoss(weight = tr->data.class_weights, label_smoothing)
 *   schedule  ReduceLROnPlateau(mode min, factor, patience, threshold 1e-4 rel) stepped with
 *             the validation loss after every epoch, or cosine per batch (cfg->lr_schedule)
 *   validate  the validation rows, sorted by length once, in fixed batches: the mean batch
 *             loss, accuracy and weighted F1
 *   stopping  after cfg->epochs, or after cfg->patience epochs without a strictly better
 *             monitored figure (cfg->monitor: the validation F1 or accuracy, higher is better,
 *             or the validation loss, lower is better; nn_monitor_better); the weights of the
 *             best epoch by that figure are kept and handed over (with "validation": "none",
 *             the last epoch's)
 * The first epoch runs the pretraining first (pretrain.c). With self-training, the end of round
 * 1 (second_round_begin) scores the unlabelled rows, has self_train.c choose the pseudo-labelled
 * ones, and starts round 2 from the first epoch's weights, with a new optimizer
 * (nn_train_reset_optimizer) and the epochs counting on. self_train.c calls nothing here.
 * nn_trainer_take_model hands over the kept weights ("storage": "float16": rounded, and scored
 * again); nn_trainer_metrics_json describes the run.
 *
 * Everything random draws from streams seeded by cfg->seed, and the shards are set by the batch
 * size, not the core count: a run gives the same bits at any thread count. The buffers are
 * allocated at creation, but for the embedding rows each shard touched (grown when a batch
 * needs more) and the buffers of self-training's scoring.
 *
 * On a device backend (CUDA) a batch runs whole, as one shard (the GPU is the parallelism),
 * gradients and Adam's moments stay in device memory and Adam runs there; the host sees the
 * parameters only when it keeps the best epoch's and when the model is taken.
 */
#ifndef _GNU_SOURCE
#define _POSIX_C_SOURCE 200809L /* clock_gettime, in compat.h's nn_os_seconds */
#endif
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h" /* nn_os_seconds */
#include "config.h"
#include "json.h"
#include "model.h"
#include "nn_internal.h"
#include "nn_mem.h"
#include "pool.h"
#include "text.h"
#include "train.h"

/* ---------------------------------------------------------------- create */

/* The model of a warm start: base's vocabulary (vocab, a copy: taken over, also on error),
 * labels and weights, cfg's options (its architecture equals base's: checked). */
static int model_from_base(nn_model **out, const nn_model *base, const nn_config *cfg,
                           nn_vocab *vocab, char *err) {
  int C = nn_model_num_classes(base);
  const nn_allocator *mem = nn_vocab_allocator(vocab); /* the trainer's */
  const char **names = nn_mem_alloc(mem, (size_t)C * sizeof *names);
  if (!names) {
    nn_vocab_free(vocab);
    snprintf(err, NN_ERR_LEN, "out of memory copying the base model");
    return NN_NOMEM;
  }
  for (int c = 0; c < C; c++) names[c] = nn_model_label(base, c);
  int status = nn_model_create_uninit(out, cfg, vocab, names, C, err);
  nn_mem_free(mem, names);
  if (status != NN_OK) return status;
  if (nn_model_param_count(*out) != nn_model_param_count(base)) { /* cannot be: same shapes */
    snprintf(err, NN_ERR_LEN, "warm start: %zu parameters, the base model has %zu",
             nn_model_param_count(*out), nn_model_param_count(base));
    nn_model_free(*out);
    *out = NULL;
    return NN_ERROR;
  }
  memcpy(nn_model_params(*out), nn_model_weights(base), nn_model_param_count(base) * sizeof(float));
  return NN_OK;
}

/* nn_trainer_args's arrays read as nn_train_rows (a length array NULL: strlen). */
static const char *args_text(void *ctx, int i, int *len) {
  const nn_trainer_args *a = ctx;
  *len = a->text_lens ? a->text_lens[i] : (a->texts[i] ? (int)strlen(a->texts[i]) : 0);
  return a->texts[i];
}

static const char *args_label(void *ctx, int i, int *len) {
  const nn_trainer_args *a = ctx;
  *len = a->label_lens ? a->label_lens[i] : (a->labels[i] ? (int)strlen(a->labels[i]) : 0);
  return a->labels[i];
}

/* The checks of nn_trainer_create's arguments before anything is allocated: rows there, both
 * texts and labels, the options (and a warm start's against its base), every text's length
 * (asking a->stop as it reads them). *n_unlab: the unlabelled rows that the training reads (the
 * pretraining's, none for a warm start). */
static int trainer_args_check(const nn_trainer_args *a, const nn_train_rows *rows, int *n_unlab,
                              char *err) {
  const nn_config *cfg = a->cfg;
  int n = a->n;
  if (n <= 0) {
    snprintf(err, NN_ERR_LEN, "no training rows");
    return NN_ERROR;
  }
  if (a->row_text || a->row_label ? !a->row_text || !a->row_label : !a->texts || !a->labels) {
    snprintf(err, NN_ERR_LEN, "the rows need both texts and labels");
    return NN_ERROR;
  }
  int status = nn_config_validate(cfg, err);
  if (status != NN_OK) return status;
  if (a->base) {
    status = nn_config_check_warm_start(cfg, nn_model_config(a->base), err);
    if (status != NN_OK) return status;
  }
  if (a->n_unlabelled < 0 || a->n_unlabelled > INT_MAX - n) {
    snprintf(err, NN_ERR_LEN, "too many unlabelled rows: %d", a->n_unlabelled);
    return NN_ERROR;
  }
  /* the unlabelled rows serve the pretraining (asked for, or sized to them: at least
   * NN_PRETRAIN_ROWS of them; a warm start keeps its embeddings) and the self-training */
  int pretraining = cfg->pretrain_epochs > 0 ||
                    ((cfg->data_sized & NN_SIZED_PRETRAIN) && a->n_unlabelled >= NN_PRETRAIN_ROWS);
  *n_unlab = (pretraining || cfg->self_training > 0.0f) && !a->base ? a->n_unlabelled : 0;
  size_t seen = 0; /* text bytes since the last interrupt check (strlen reads them) */
  for (int i = 0; i < n + *n_unlab; i++) {
    int len = 0;
    const char *text = rows->text(rows->ctx, i, &len);
    if (len < 0 || (len > 0 && !text)) {
      snprintf(err, NN_ERR_LEN, "text of row %d has an invalid length %d", i + 1, len);
      return NN_ERROR;
    }
    seen += (size_t)len;
    if ((i % 4096 == 4095 || seen > ((size_t)1 << 20)) && a->stop) {
      seen = 0;
      if (a->stop(a->stop_ctx)) {
        snprintf(err, NN_ERR_LEN, "interrupted");
        return NN_INTERRUPTED;
      }
    }
  }
  return NN_OK;
}

/* NN_NOMEM with its message, for a trainer over n rows (nn_trainer_create reads it as an
 * interrupt when stop asks: an allocation that stopped zeroing on an interrupt returned NULL). */
static int trainer_nomem(int n, char *err) {
  snprintf(err, NN_ERR_LEN, "out of memory preparing training over %d rows", n);
  return NN_NOMEM;
}

int nn_train_interrupted(char *err) {
  snprintf(err, NN_ERR_LEN, "interrupted");
  return NN_INTERRUPTED;
}

/* NN_ERROR: a call that needs the model after nn_trainer_take_model handed it over. */
static int model_taken(char *err) {
  snprintf(err, NN_ERR_LEN, "the trainer's model was already taken");
  return NN_ERROR;
}

/* The optimizer as before a round's first epoch (nn_trainer_create's round 1,
 * self-training's round 2): a new Adam (moments zero, learning rate cfg.lr), the learning rate
 * and ReduceLROnPlateau's state, early stopping's best figures, best epoch and bad epochs, and
 * cosine_lr's origin at the epochs run so far. */
int nn_train_reset_optimizer(nn_trainer *tr, char *err) {
  nn_adam_free_on(&tr->adam, tr->be); /* the first time: nothing to free */
  int status = nn_adam_init_on(&tr->adam, tr->be, tr->mem, tr->param_count, tr->cfg.lr, err);
  if (status != NN_OK) return status;
  tr->lr = nn_decimal_double(tr->cfg.lr);
  tr->plateau_best = INFINITY;
  tr->plateau_bad = 0;
  tr->best_figures = (nn_figures){INFINITY, -INFINITY, -INFINITY}; /* any real epoch beats it */
  tr->bad_epochs = 0;
  memset(&tr->best, 0, sizeof tr->best);
  tr->round_start = tr->epochs_run;
  return NN_OK;
}

/* What the passes over the parameters need, for tr's model: the shards (a workspace and a
 * gradient buffer each, the first the model's own) and the thread pool that runs them, Adam's
 * state, and the embedding tables' bookkeeping (lazy Adam's rows, the sparse gradient's stamps).
 * Asks tr->stop between the parameter-sized blocks. */
static int trainer_alloc_shards(nn_trainer *tr, char *err) {
  const nn_config *cfg = &tr->cfg;
  const nn_allocator *mem = tr->mem;
  nn_interrupt_fn stop = tr->stop;
  void *stop_ctx = tr->stop_ctx;
  int B = cfg->batch_size;
  int status = nn_workspace_create(&tr->ws, mem, err);
  if (status != NN_OK) return status;
  tr->be = tr->model->be;
  tr->K = tr->model->K;
  tr->param_count = nn_model_param_count(tr->model);
  tr->shards = B / SHARD_ROWS < 1 ? 1 : B / SHARD_ROWS > MAX_SHARDS ? MAX_SHARDS : B / SHARD_ROWS;
  if (tr->be->device_memory) tr->shards = 1;
  int want = cfg->pool_threads > 0 ? cfg->pool_threads : cfg->threads;
  status = nn_pool_create(&tr->pool,
                          want < tr->shards && want > 0
                              ? want
                              : (nn_cpu_count() < tr->shards ? nn_cpu_count() : tr->shards),
                          mem, err);
  if (status != NN_OK) return status;
  status = nn_model_zero_grads(tr->model, err);
  if (status != NN_OK) return status;
  /* each buffer of the size of the parameters is zeroed at its allocation: ask between them */
  if (stop && stop(stop_ctx)) return nn_train_interrupted(err);
  tr->shard_ws[0] = tr->ws;
  tr->shard_grads[0] = tr->model->grads; /* backend memory */
  for (int s = 1; s < tr->shards; s++) {
    status = nn_workspace_create(&tr->shard_ws[s], mem, err);
    if (status != NN_OK) return status;
    tr->shard_grads[s] =
        nn_backend_alloc(tr->mem, tr->be, (tr->param_count ? tr->param_count : 1) * sizeof(float));
    if (!tr->shard_grads[s]) return trainer_nomem(tr->data.n, err);
    if (stop && stop(stop_ctx)) return nn_train_interrupted(err);
  }
  status = nn_train_reset_optimizer(tr, err);
  if (status != NN_OK) return status;
  if (stop && stop(stop_ctx)) return nn_train_interrupted(err);
  /* the embedding tables come first in the buffers: each member's V word rows, then its S
   * subword rows (model.h), K members */
  tr->table_rows = (size_t)tr->model->V + (size_t)tr->model->S;
  tr->emb_tables = tr->table_rows * (size_t)tr->model->E * (size_t)tr->K;
  if (cfg->lazy_adam || ((cfg->data_sized_done & NN_SIZED_WORD_DROPOUT) &&
                         !tr->be->device_memory)) { /* choose.c's too, on the host */
    tr->lazy_rows = nn_mem_alloc(tr->mem, (tr->table_rows + 1) * sizeof *tr->lazy_rows);
    tr->lazy_stamp = nn_mem_calloc(tr->mem, tr->table_rows + 1, sizeof *tr->lazy_stamp);
    if (!tr->lazy_rows || !tr->lazy_stamp) return trainer_nomem(tr->data.n, err);
  }
  tr->sparse_embedding = !tr->be->device_memory;
  if (tr->sparse_embedding) {
    tr->emb_size = tr->emb_tables;
    for (int s = 0; s < tr->shards; s++) {
      tr->stamp[s] = nn_mem_calloc(tr->mem, tr->table_rows, sizeof(unsigned));
      if (!tr->stamp[s]) return trainer_nomem(tr->data.n, err);
    }
  }
  return NN_OK;
}

/* The buffers of a batch and of an epoch, sized to the largest batch and the longest row: the
 * tokens, lengths and labels of a batch (a copy per member), the logits and their gradients,
 * the sorts' scratch, the per-class counts and the best epoch's parameters; then the validation
 * rows sorted by length once. */
static int trainer_alloc_batches(nn_trainer *tr, char *err) {
  const nn_config *cfg = &tr->cfg;
  int C = tr->data.C, max_len = cfg->max_len, B = cfg->batch_size;
  /* self-training's round 2 trains on up to pseudo_max rows more, in batches sized to them */
  int second_round = nn_train_second_round_pending(tr);
  int n_train = tr->data.n_train + tr->pseudo_max,
      n = tr->data.n + (second_round ? tr->data.n_unlab : 0);
  if (second_round && (cfg->data_sized_done & NN_SIZED_BATCH)) {
    int B2 = nn_config_sized_batch(n_train);
    B = B2 > B ? B2 : B;
  }
  int batches = (n_train + cfg->batch_size - 1) / cfg->batch_size;
  int buffer_rows = n_train > tr->data.n_val ? n_train : tr->data.n_val;
  int batch_rows = B < buffer_rows ? B : buffer_rows; /* no batch is larger */
  int longest = 1;
  for (int i = 0; i < n; i++)
    if (tr->data.row_length[i] > longest) longest = tr->data.row_length[i];
  if ((uint64_t)batch_rows * (uint64_t)C > NN_TRAIN_MAX_LOGITS) {
    snprintf(err, NN_ERR_LEN,
             "option \"batch_size\" = %d is too large for %d classes: at most %d rows per batch", B,
             C, (int)(NN_TRAIN_MAX_LOGITS / (uint64_t)C));
    return NN_ERROR;
  }
  int *spare = nn_train_data_take_spare(&tr->data); /* the lesson's split hands over a buffer */
  if (spare && second_round) { /* of the training rows alone: too small for round 2 */
    nn_mem_free(tr->mem, spare);
    spare = NULL;
  }
  tr->order = spare ? spare : nn_mem_alloc(tr->mem, (size_t)n_train * sizeof *tr->order);
  /* sorts: the validation rows once (through order, not in use yet, when it is large enough),
   * then chunks of BUCKET_BATCHES batches of the training rows */
  size_t chunk_rows =
      (size_t)B * BUCKET_BATCHES < (size_t)n_train ? (size_t)B * BUCKET_BATCHES : (size_t)n_train;
  int val_through_order = tr->data.n_val <= n_train;
  size_t scratch_rows = val_through_order || chunk_rows > (size_t)tr->data.n_val
                            ? chunk_rows
                            : (size_t)tr->data.n_val;
  tr->sort_scratch =
      nn_mem_alloc(tr->mem, (scratch_rows ? scratch_rows : 1) * sizeof *tr->sort_scratch);
  tr->length_count = nn_mem_alloc(tr->mem, ((size_t)max_len + 2) * sizeof *tr->length_count);
  tr->batch_perm = nn_mem_alloc(tr->mem, (size_t)batches * sizeof *tr->batch_perm);
  tr->member_stride = (size_t)batch_rows * longest; /* one member's copy of a batch */
  tr->tokens = nn_mem_alloc(tr->mem, (size_t)tr->K * tr->member_stride * sizeof *tr->tokens);
  tr->lengths = nn_mem_alloc(tr->mem, (size_t)batch_rows * sizeof *tr->lengths);
  tr->labels = nn_mem_alloc(tr->mem, (size_t)batch_rows * sizeof *tr->labels);
  tr->batch_rows = batch_rows;
  tr->logits =
      nn_mem_alloc(tr->mem, (size_t)tr->K * batch_rows * C * sizeof *tr->logits); /* per member */
  tr->dlogits = nn_mem_alloc(tr->mem, (size_t)tr->K * batch_rows * C * sizeof *tr->dlogits);
  tr->true_positive = nn_mem_alloc(tr->mem, (size_t)C * sizeof *tr->true_positive);
  tr->predicted = nn_mem_alloc(tr->mem, (size_t)C * sizeof *tr->predicted);
  tr->support = nn_mem_alloc(tr->mem, (size_t)C * sizeof *tr->support);
  /* zeroed now, while nn_mem_stop asks for interrupts: its first copy at the end of the first
   * epoch would otherwise take the page faults of a parameter-sized block at once */
  tr->best_params =
      nn_mem_calloc(tr->mem, tr->param_count ? tr->param_count : 1, sizeof *tr->best_params);
  if (!tr->order || !tr->sort_scratch || !tr->length_count || !tr->batch_perm || !tr->tokens ||
      !tr->lengths || !tr->labels || !tr->logits || !tr->dlogits || !tr->true_positive ||
      !tr->predicted || !tr->support || !tr->best_params)
    return trainer_nomem(tr->data.n, err);
  nn_train_sort_by_length(tr->data.val_rows, tr->data.n_val, tr->data.row_length, max_len,
                          tr->length_count, val_through_order ? tr->order : tr->sort_scratch);
  return NN_OK;
}

void nn_train_seed_streams(nn_trainer *tr, uint64_t seed) {
  nn_rng_seed(&tr->shuffle_rng, seed ^ SEED_SHUFFLE);
  nn_rng_seed(&tr->dropout_rng, seed ^ SEED_DROPOUT);
  nn_rng_seed(&tr->word_rng, seed ^ SEED_WORD_DROPOUT);
}

int nn_trainer_create(nn_trainer **out, const nn_trainer_args *a, char *err) {
  const nn_config *cfg = a->cfg;
  const nn_model *base = a->base;
  nn_train_rows rows = {args_text, args_label, (void *)a, NULL};
  if (a->row_text || a->row_label)
    rows = (nn_train_rows){a->row_text, a->row_label, a->rows_ctx, a->rows_done};
  int n = a->n, n_unlab = 0;
  nn_interrupt_fn stop = a->stop;
  void *stop_ctx = a->stop_ctx;
  const nn_allocator *mem = a->mem;
  *out = NULL;
  int status = trainer_args_check(a, &rows, &n_unlab, err);
  if (status != NN_OK) return status;

  nn_trainer *tr = nn_mem_calloc(mem, 1, sizeof *tr);
  char **names = NULL;
  int names_count = 0;
  nn_vocab *vocab = NULL;
  if (!tr) {
    status = trainer_nomem(n, err);
    goto fail;
  }
  tr->mem = mem;
  tr->cfg = *cfg;
  if (base) tr->cfg.data_sized = 0; /* a warm start keeps the base model's recipe */
  tr->cfg.data_sized_done = 0;
  if ((tr->cfg.data_sized & NN_SIZED_VALIDATION) && tr->cfg.validation == NN_VALIDATION_RANDOM) {
    tr->cfg.validation = NN_VALIDATION_NONE; /* every labelled row trains (nn.h) */
    tr->cfg.data_sized_done |= NN_SIZED_VALIDATION;
  }
  tr->cfg.data_sized &= ~NN_SIZED_VALIDATION;
  tr->n_unlab_given = a->n_unlabelled;
  tr->stop = stop;
  tr->stop_ctx = stop_ctx;
  nn_mem_stop = stop; /* the zeroing of large blocks asks it too (nn_mem.h) */
  nn_mem_stop_ctx = stop_ctx;
  nn_train_data_args data = {&tr->cfg, base, &rows, n, n_unlab, stop, stop_ctx, mem};
  status = nn_train_data_prepare(&tr->data, &names, &vocab, &data, err);
  if (status != NN_OK) goto fail;
  nn_config_size_to_data(&tr->cfg, tr->data.n_train, tr->data.C, tr->data.n_unlab,
                         tr->data.pretrain_tokens);
  cfg = &tr->cfg;
  int C = tr->data.C;
  names_count = names ? C : 0;

  if (base) status = model_from_base(&tr->model, base, cfg, vocab, err);
  else
    status = nn_model_create_ex(&tr->model, cfg, vocab, (const char *const *)names, C, cfg->seed,
                                stop, stop_ctx, err); /* asks stop while it draws the weights */
  vocab = NULL;                                       /* owned by the model now, also on error */
  tr->warm_start = base != NULL;
  if (status != NN_OK) goto fail;
  if (stop && stop(stop_ctx)) {
    status = nn_train_interrupted(err);
    goto fail;
  }
  status = trainer_alloc_shards(tr, err);
  if (status != NN_OK) goto fail;
  status = nn_train_self_plan(tr, err);
  if (status != NN_OK) goto fail;
  status = trainer_alloc_batches(tr, err);
  if (status != NN_OK) goto fail;

  nn_train_seed_streams(tr, cfg->seed);
  tr->lr_factor = nn_decimal_double(cfg->lr_factor);
  tr->stop = NULL;
  tr->stop_ctx = NULL;
  status = NN_OK;
  goto done;
fail:
  /* an allocation that stopped zeroing on an interrupt returned NULL: not out of memory */
  if (status == NN_NOMEM && stop && stop(stop_ctx)) status = nn_train_interrupted(err);
  nn_trainer_free(tr);
  tr = NULL;
done:
  nn_mem_stop = NULL;
  nn_mem_stop_ctx = NULL;
  for (int c = 0; c < names_count; c++)
    nn_mem_free(mem, names[c]); /* nn_model_create copied them */
  nn_mem_free(mem, names);
  if (vocab) nn_vocab_free(vocab);
  *out = tr;
  return status;
}

/* ---------------------------------------------------------------- epochs */

/* Fill the batch buffers from rows[0..count): tokens (count, T) with T the longest row. A
 * training batch with word_dropout p replaces each token by <UNK> with probability p, drawn
 * from the trainer's own stream in row-major order (so any thread count gives the same
 * batch); validation batches are never changed. An ensemble's members each get their own copy
 * of a training batch (member k's at tr->tokens + k * tr->member_stride), each with its own
 * tokens dropped, member 0's drawn first: with one member, the stream and the batch are those of
 * a single network. */
static nn_batch make_batch(nn_trainer *tr, const int *rows, int count, int training) {
  int T = 1;
  for (int b = 0; b < count; b++)
    if (tr->data.row_length[rows[b]] > T) T = tr->data.row_length[rows[b]];
  for (int b = 0; b < count; b++) {
    int row = rows[b], len = tr->data.row_length[row];
    int *dst = tr->tokens + (size_t)b * T;
    const void *ids = nn_train_row_ids(&tr->data, row);
    if (tr->data.ids16)
      for (int t = 0; t < len; t++) dst[t] = ((const uint16_t *)ids)[t];
    else memcpy(dst, ids, (size_t)len * sizeof *dst);
    memset(dst + len, 0, (size_t)(T - len) * sizeof *dst); /* <PAD>; never read */
    tr->lengths[b] = len;
    tr->labels[b] = tr->data.row_class[row];
  }
  int members = training ? tr->K : 1;
  for (int k = 1; k < members; k++)
    memcpy(tr->tokens + (size_t)k * tr->member_stride, tr->tokens,
           (size_t)count * T * sizeof *tr->tokens);
  for (int k = 0; k < members && training && tr->cfg.word_dropout > 0.0f; k++)
    for (int b = 0; b < count; b++) {
      int *dst = tr->tokens + (size_t)k * tr->member_stride + (size_t)b * T;
      for (int t = 0; t < tr->lengths[b]; t++)
        if (nn_rng_uniform(&tr->word_rng) < tr->cfg.word_dropout) dst[t] = NN_UNK;
    }
  if (!training && tr->known) /* choose.c: a word its half never trained on is unknown */
    for (size_t i = 0; i < (size_t)count * T; i++)
      if (!tr->known[tr->tokens[i]]) tr->tokens[i] = NN_UNK;
  nn_batch batch = {tr->tokens, tr->lengths, tr->labels, count, T};
  return batch;
}

/* Rows [first, first + count) of shard s of a batch of B rows. */
static void shard_rows(int s, int shards, int B, int *first, int *count) {
  int n = shards < B ? shards : B;
  if (s >= n) {
    *first = B;
    *count = 0;
    return;
  }
  *first = (int)((long long)s * B / n);
  *count = (int)((long long)(s + 1) * B / n) - *first;
}

static nn_batch shard_batch(const nn_batch *batch, int first, int count) {
  nn_batch b = {batch->tokens + (size_t)first * batch->T, batch->lengths + first,
                batch->labels ? batch->labels + first : NULL, count, batch->T};
  return b;
}

static void forward_task(void *ctx, int s) {
  nn_trainer *tr = ctx;
  int first, count;
  shard_rows(s, tr->shards, tr->current.B, &first, &count);
  tr->shard_status[s] = NN_OK;
  if (count == 0) return;
  nn_batch b = shard_batch(&tr->current, first, count);
  tr->shard_status[s] =
      nn_model_forward(tr->model, tr->shard_ws[s], &b, tr->current_training, &tr->shard_rng[s],
                       tr->logits + (size_t)first * tr->data.C, NULL, tr->shard_err[s]);
}

/* List the distinct embedding rows shard s touched in this batch (its packed token ids). */
static int list_touched_rows(nn_trainer *tr, int s) {
  /* each member read its own copy of the batch (word_dropout): the union of their tokens */
  int P = 0;
  for (int k = 0; k < tr->K; k++) {
    const nn_workspace *ws = nn_workspace_member(tr->shard_ws[s], k);
    P += ws->P + ws->Q; /* its tokens' rows and their subword rows */
  }
  if (P > tr->rows_cap[s]) {
    int *r = nn_mem_realloc(tr->mem, tr->rows[s], (size_t)P * sizeof *r);
    if (!r) return NN_NOMEM;
    tr->rows[s] = r;
    tr->rows_cap[s] = P;
  }
  unsigned *stamp = tr->stamp[s], now = tr->batch_no;
  int n = 0;
  for (int k = 0; k < tr->K; k++) {
    const nn_workspace *ws = nn_workspace_member(tr->shard_ws[s], k);
    for (int r = 0; r < ws->P + ws->Q; r++) {
      int id = r < ws->P ? ws->ids[r] : ws->pair_src[r - ws->P];
      if (stamp[id] != now) {
        stamp[id] = now;
        tr->rows[s][n++] = id;
      }
    }
  }
  tr->nrows[s] = n;
  return NN_OK;
}

/* A training shard in one go, for each member of the model (one for a single network): forward,
 * its part of the batch's loss (normalised by the whole batch's weight sum, so its dlogits are
 * those of nn_cross_entropy over the batch), backward into the shard's gradient buffer (each
 * member's own region of it). One hand-off per batch. */
static void train_task(void *ctx, int s) {
  nn_trainer *tr = ctx;
  int first, count, C = tr->data.C;
  shard_rows(s, tr->shards, tr->current.B, &first, &count);
  /* the embedding rows of the buffer are zero already (zero_touched_rows); the rest is small */
  size_t skip = tr->sparse_embedding ? tr->emb_size : 0;
  tr->be->zero(tr->shard_grads[s] + skip, tr->param_count - skip);
  tr->nrows[s] = 0;
  tr->shard_loss[s] = 0.0;
  tr->shard_status[s] = NN_OK;
  if (count == 0) return;
  nn_batch b = shard_batch(&tr->current, first, count);
  for (int k = 0; k < tr->K && tr->shard_status[s] == NN_OK; k++) {
    nn_model *net = nn_model_member(tr->model, k);
    nn_workspace *ws = nn_workspace_member(tr->shard_ws[s], k);
    size_t at = ((size_t)k * tr->batch_rows + (size_t)first) * C;
    nn_batch bk = b; /* member k's own copy of the batch's tokens */
    bk.tokens = tr->current.tokens + (size_t)k * tr->member_stride + (size_t)first * b.T;
    if (!ws) {
      tr->shard_status[s] = NN_NOMEM;
      snprintf(tr->shard_err[s], NN_ERR_LEN, "out of memory creating a workspace");
      return;
    }
    tr->shard_status[s] = nn_model_forward(net, ws, &bk, 1, &tr->shard_rng[s], tr->logits + at,
                                           NULL, tr->shard_err[s]);
    if (tr->shard_status[s] != NN_OK) return;
    tr->shard_loss[s] += nn_cross_entropy_part(tr->dlogits + at, tr->logits + at,
                                               tr->current.labels + first, tr->data.class_weights,
                                               count, C, tr->current_wsum, tr->cfg.label_smoothing);
    tr->shard_status[s] = nn_model_backward_into(net, ws, &bk, tr->dlogits + at, tr->shard_grads[s],
                                                 tr->shard_err[s]);
  }
  if (tr->shard_status[s] == NN_OK && tr->sparse_embedding && list_touched_rows(tr, s) != NN_OK) {
    tr->shard_status[s] = NN_NOMEM;
    snprintf(tr->shard_err[s], NN_ERR_LEN, "out of memory listing embedding rows");
  }
}

/* After Adam: zero the embedding rows the batch wrote (buffer 0 got every shard's rows). */
static void zero_touched_rows(nn_trainer *tr) {
  if (!tr->sparse_embedding) return;
  int E = tr->model->E;
  size_t table = tr->emb_size / (size_t)tr->K; /* one member's V x E */
  for (int s = 0; s < tr->shards; s++)
    for (int i = 0; i < tr->nrows[s]; i++)
      for (int k = 0; k < tr->K; k++) {
        size_t at = (size_t)k * table + (size_t)tr->rows[s][i] * E;
        memset(tr->shard_grads[s] + at, 0, (size_t)E * sizeof(float));
        if (s > 0) memset(tr->shard_grads[0] + at, 0, (size_t)E * sizeof(float));
      }
}

static int shard_errors(nn_trainer *tr, char *err) {
  for (int s = 0; s < tr->shards; s++)
    if (tr->shard_status[s] != NN_OK) {
      memcpy(err, tr->shard_err[s], NN_ERR_LEN);
      return tr->shard_status[s];
    }
  return NN_OK;
}

/* The batch the shard tasks work on; a training batch draws each shard's dropout stream. */
static void begin_batch(nn_trainer *tr, const nn_batch *batch, int training) {
  tr->current = *batch;
  tr->current_training = training;
  if (training)
    for (int s = 0; s < tr->shards; s++)
      nn_rng_seed(&tr->shard_rng[s], nn_rng_next(&tr->dropout_rng));
}

/* Forward a batch over the shards into tr->logits. */
static int sharded_forward(nn_trainer *tr, const nn_batch *batch, int training, char *err) {
  begin_batch(tr, batch, training);
  nn_pool_run(tr->pool, forward_task, tr, tr->shards);
  return shard_errors(tr, err);
}

int nn_train_forward_rows(nn_trainer *tr, const int *rows, int count, char *err) {
  nn_batch batch = make_batch(tr, rows, count, 0);
  return sharded_forward(tr, &batch, 0, err);
}

/* lazy_adam: the distinct token ids of the batch (its embedding rows), in first-seen order. */
static void list_batch_rows(nn_trainer *tr, const nn_batch *batch) {
  if (++tr->lazy_no == 0) { /* the stamps wrapped: start them again */
    memset(tr->lazy_stamp, 0, tr->table_rows * sizeof *tr->lazy_stamp);
    tr->lazy_no = 1;
  }
  int n = 0;
  for (int k = 0; k < tr->K; k++) /* every member's copy of the batch */
    for (int b = 0; b < batch->B; b++)
      for (int t = 0; t < batch->lengths[b]; t++) {
        int id = batch->tokens[(size_t)k * tr->member_stride + (size_t)b * batch->T + t];
        const nn_model *m = tr->model;
        int sub_a = m->S > 0 ? m->sub_start[id] : 0, sub_b = m->S > 0 ? m->sub_start[id + 1] : 0;
        for (int i = sub_a - 1; i < sub_b; i++) { /* the word's row, then its subword rows */
          int row = i < sub_a ? id : m->sub_rows[i];
          if (tr->lazy_stamp[row] != tr->lazy_no) {
            tr->lazy_stamp[row] = tr->lazy_no;
            tr->lazy_rows[n++] = row;
          }
        }
      }
  tr->nlazy = n;
}

/* The update pass in slices: a few per thread, so that a thread that a busy machine holds up
 * leaves its share to the others (the pool's claims); the split changes no bit. */
static int update_tasks(const nn_trainer *tr) {
  int threads = nn_pool_threads(tr->pool);
  return threads > 1 ? 4 * threads : 1;
}

/* One slice [lo, hi) of the parameters after backward (host memory): the shards'
 * gradients summed in shard order (dense after the embedding, the touched embedding rows
 * within it), frozen embeddings zeroed, and the Adam step. All element-wise, so the split
 * changes no bit; it puts Adam (a fifth of an epoch) on every core and saves a hand-off. */
static void update_task(void *ctx, int task) {
  nn_trainer *tr = ctx;
  int tasks = update_tasks(tr);
  size_t n = tr->param_count, lo = n * (size_t)task / tasks, hi = n * (size_t)(task + 1) / tasks;
  float *g = tr->shard_grads[0];
  size_t emb = tr->sparse_embedding ? tr->emb_size : 0;
  size_t dense_lo = lo > emb ? lo : emb;
  for (int s = 1; s < tr->shards; s++) {
    const float *h = tr->shard_grads[s];
    for (size_t i = dense_lo; i < hi; i++) g[i] += h[i];
    if (!tr->sparse_embedding || lo >= emb) continue;
    size_t E = (size_t)tr->model->E, table = emb / (size_t)tr->K;
    for (int k = 0; k < tr->K; k++) /* each member's table (one for a single network) */
      for (int r = 0; r < tr->nrows[s]; r++) {
        size_t a = (size_t)k * table + (size_t)tr->rows[s][r] * E, b = a + E;
        if (a < lo) a = lo;
        if (b > hi) b = hi;
        for (size_t i = a; i < b; i++) g[i] += h[i];
      }
  }
  if (tr->freeze_embeddings) { /* a zero gradient from the first step: Adam never moves it */
    size_t end = tr->emb_size < hi ? tr->emb_size : hi;
    for (size_t i = lo; i < end; i++) g[i] = 0.0f;
  }
  size_t dense_from = lo;
  if (tr->cfg.lazy_adam && lo < tr->emb_tables) { /* the tables: the batch's rows only */
    size_t E = (size_t)tr->model->E, table = tr->emb_tables / (size_t)tr->K;
    for (int k = 0; k < tr->K; k++)
      for (int r = 0; r < tr->nlazy; r++) {
        size_t a = (size_t)k * table + (size_t)tr->lazy_rows[r] * E, b = a + E;
        if (a < lo) a = lo;
        if (b > hi) b = hi;
        if (a < b) nn_adam_step_range(&tr->adam, &tr->step, tr->step_params, g, a, b);
      }
    dense_from = tr->emb_tables < hi ? tr->emb_tables : hi;
  }
  nn_adam_step_range(&tr->adam, &tr->step, tr->step_params, g, dense_from, hi);
}

/* One training batch: forward, loss and backward on the shards, then the gradients summed
 * over the shards and the Adam step. *loss: the batch's weighted mean cross-entropy. */
static int sharded_train_step(nn_trainer *tr, const nn_batch *batch, float *loss, char *err) {
  begin_batch(tr, batch, 1);
  tr->current_wsum = nn_cross_entropy_weight_sum(batch->labels, tr->data.class_weights, batch->B);
  if (++tr->batch_no == 0) { /* the stamps wrapped: start them again */
    for (int s = 0; s < tr->shards && tr->sparse_embedding; s++)
      memset(tr->stamp[s], 0, tr->table_rows * sizeof(unsigned));
    tr->batch_no = 1;
  }
  nn_pool_run(tr->pool, train_task, tr, tr->shards);
  int status = shard_errors(tr, err);
  if (status != NN_OK) return status;
  double sum = 0.0;
  for (int s = 0; s < tr->shards; s++) sum += tr->shard_loss[s];
  *loss = (float)(sum / tr->current_wsum / tr->K); /* an ensemble: its members' mean */
  if (tr->be->device_memory) {                     /* the backend sums, in shard order, and steps */
    for (int s = 1; s < tr->shards; s++)
      tr->be->axpy(tr->shard_grads[0], tr->shard_grads[s], tr->param_count);
    if (tr->freeze_embeddings) /* every member's table: they come first */
      tr->be->zero(tr->model->grads, tr->emb_tables);
    status = nn_backend_check(tr->be, "summing gradients", err);
    if (status != NN_OK) return status;
    if (tr->cfg.lazy_adam) {
      list_batch_rows(tr, batch);
      return nn_adam_step_lazy_on(&tr->adam, tr->be, nn_model_train_params(tr->model),
                                  tr->model->grads, tr->emb_tables, tr->emb_tables / tr->K,
                                  tr->model->E, tr->lazy_rows, tr->nlazy, err);
    }
    return nn_adam_step_on(&tr->adam, tr->be, nn_model_train_params(tr->model), tr->model->grads,
                           err);
  }
  if (tr->cfg.lazy_adam) list_batch_rows(tr, batch);
  tr->step_params = nn_model_train_params(tr->model);
  tr->step = nn_adam_step_begin(&tr->adam);
  nn_pool_run(tr->pool, update_task, tr, update_tasks(tr));
  zero_touched_rows(tr);
  return NN_OK;
}

/* Validation: mean batch loss, accuracy and weighted F1 of the argmax predictions. fn, when
 * given, is called again with the epoch's last report (every batch done) every VALIDATE_ASK
 * validation batches: a large validation split takes seconds, and fn is where the caller
 * answers an interrupt. */
enum { VALIDATE_ASK = 8 };

typedef struct epoch_report {
  nn_progress_fn fn;
  void *ctx;
  int batches;
  double loss, rate;
} epoch_report;

static int validate(nn_trainer *tr, const epoch_report *report, double *loss, double *accuracy,
                    double *f1, char *err) {
  int B = tr->cfg.batch_size, C = tr->data.C;
  memset(tr->true_positive, 0, (size_t)C * sizeof *tr->true_positive);
  memset(tr->predicted, 0, (size_t)C * sizeof *tr->predicted);
  memset(tr->support, 0, (size_t)C * sizeof *tr->support);
  double mean = 0;
  int k = 0;
  for (int first = 0; first < tr->data.n_val; first += B, k++) {
    if (report->fn && k % VALIDATE_ASK == VALIDATE_ASK - 1 &&
        report->fn(report->ctx, report->batches, report->batches, report->loss, report->rate)) {
      snprintf(err, NN_ERR_LEN, "interrupted");
      return NN_INTERRUPTED;
    }
    int count = tr->data.n_val - first < B ? tr->data.n_val - first : B;
    nn_batch batch = make_batch(tr, tr->data.val_rows + first, count, 0);
    int status = sharded_forward(tr, &batch, 0, err);
    if (status != NN_OK) return status;
    /* the training loss, label smoothing included, as a PyTorch loop evaluating with its
     * loss_fn: the plateau scheduler reads it (ext/REFERENCE.md) */
    float batch_loss =
        nn_cross_entropy_smoothed(tr->dlogits, tr->logits, tr->labels, tr->data.class_weights,
                                  count, C, tr->cfg.label_smoothing);
    mean += ((double)batch_loss - mean) / (k + 1);
    for (int b = 0; b < count; b++) {
      const float *row = tr->logits + (size_t)b * C;
      int best = 0;
      for (int c = 1; c < C; c++)
        if (row[c] > row[best]) best = c; /* first maximum, as torch.argmax */
      tr->predicted[best]++;
      tr->support[tr->labels[b]]++;
      tr->true_positive[best] += best == tr->labels[b];
    }
  }
  nn_class_metrics weighted;
  nn_metrics_from_counts(NULL, &weighted, accuracy, tr->true_positive, tr->predicted, tr->support,
                         C);
  *loss = mean;
  *f1 = weighted.f1;
  return NN_OK;
}

/* ReduceLROnPlateau.step(val_loss) with mode "min", threshold 1e-4 "rel", cooldown 0,
 * min_lr 0, eps 1e-8 (torch/optim/lr_scheduler.py). */
static void plateau_step(nn_trainer *tr, double val_loss) {
  if (val_loss < tr->plateau_best * (1.0 - 1e-4)) {
    tr->plateau_best = val_loss;
    tr->plateau_bad = 0;
  } else {
    tr->plateau_bad++;
  }
  if (tr->plateau_bad > tr->cfg.lr_patience) {
    double old_lr = tr->lr, new_lr = old_lr * tr->lr_factor;
    if (new_lr < 0) new_lr = 0;
    if (old_lr - new_lr > 1e-8) tr->lr = new_lr;
    tr->plateau_bad = 0;
  }
}

/* lr_schedule "cosine": the learning rate of batch k of this epoch, from lr at the first batch
 * of the training (of the round, with self-training) down to 0 after the last of cfg->epochs
 * epochs:
 *   lr * (1 + cos(pi * step / steps)) / 2,  step = epochs run * batches + k
 * (PyTorch: LambdaLR with that factor, stepped after every optimizer step). */
static double cosine_lr(const nn_trainer *tr, int k, int batches) {
  double step = (double)(tr->epochs_run - tr->round_start) * batches + k,
         steps = (double)(tr->cfg.epochs - tr->round_start) * batches;
  return nn_decimal_double(tr->cfg.lr) * 0.5 * (1.0 + cos(3.14159265358979323846 * step / steps));
}

/* The round's epochs are over: all of cfg->epochs run, or early stopping ended them. */
static int epochs_over(const nn_trainer *tr) {
  return tr->done || tr->epochs_run >= tr->cfg.epochs;
}

/* ------------------------------------------------------- self-training's second round */

#define SELF_TRAIN_ASK 8 /* batches between progress calls (an interrupt is answered there) */

/* Every unlabelled row scored with the weights the model has now (self_train.c reads each
 * batch's logits). */
static int score_unlabelled(nn_trainer *tr, nn_self_scores *sc, nn_progress_fn fn, void *ctx,
                            char *err) {
  int B = tr->batch_rows, n = tr->data.n, batches = (tr->data.n_unlab + B - 1) / B;
  for (int first = 0, k = 0; first < tr->data.n_unlab; first += B, k++) {
    if (fn && k % SELF_TRAIN_ASK == SELF_TRAIN_ASK - 1 && fn(ctx, k, batches, NAN, 0.0))
      return nn_train_interrupted(err);
    int count = tr->data.n_unlab - first < B ? tr->data.n_unlab - first : B;
    for (int b = 0; b < count; b++) sc->rows[b] = n + first + b;
    int status = nn_train_forward_rows(tr, sc->rows, count, err);
    if (status != NN_OK) return status;
    nn_train_self_score(tr, sc, first, count);
  }
  return NN_OK;
}

/* The trainer as before its first epoch, for round 2: the starting weights, a new optimizer,
 * the schedule and early stopping reset, the batch and the epochs sized to round 2's rows. */
static int restart(nn_trainer *tr, char *err) {
  memcpy(nn_model_params(tr->model), tr->start_params, tr->param_count * sizeof(float));
  int status = nn_train_reset_optimizer(tr, err);
  if (status != NN_OK) return status;
  int rows = tr->data.n_train + tr->n_pseudo, epochs = tr->cfg.epochs;
  tr->round1_batch = tr->cfg.batch_size;
  if (tr->cfg.data_sized_done & NN_SIZED_BATCH) tr->cfg.batch_size = nn_config_sized_batch(rows);
  if (tr->cfg.data_sized_done & NN_SIZED_EPOCHS)
    epochs = nn_config_sized_epochs((rows + tr->cfg.batch_size - 1) / tr->cfg.batch_size);
  tr->round1_epochs = tr->epochs_run;
  tr->cfg.epochs = tr->epochs_run + epochs;
  tr->round = 1;
  tr->done = 0;
  return NN_OK;
}

/* The end of round 1: the unlabelled rows scored with the kept weights, the surest of each
 * class chosen by self_train.c (tr->n_pseudo of them), and the trainer set back to its first
 * epoch's weights and optimizer for round 2's epochs; without a row to add, round 1's model is
 * the result. fn is asked between batches (an interrupt: NN_INTERRUPTED). */
static int second_round_begin(nn_trainer *tr, nn_progress_fn fn, void *ctx, char *err) {
  double start = nn_os_seconds();
  nn_self_scores sc;
  int status = nn_train_self_scores_alloc(tr, &sc, err);
  if (status == NN_OK) {
    if (tr->best.epoch > 0) /* the kept epoch's weights label the rows */
      memcpy(nn_model_params(tr->model), tr->best_params, tr->param_count * sizeof(float));
    status = score_unlabelled(tr, &sc, fn, ctx, err);
  }
  if (status == NN_OK) {
    nn_train_self_choose(tr, &sc);
    if (tr->n_pseudo > 0) {
      status = restart(tr, err);
    } else {
      tr->round1_epochs = tr->epochs_run;
      tr->round1_batch = tr->cfg.batch_size;
      tr->round = 1;
      tr->done = 1;
    }
  }
  nn_train_self_scores_free(tr, &sc);
  tr->self_training_seconds = nn_os_seconds() - start;
  return status;
}

int nn_train_pass(nn_trainer *tr, int n_train, nn_progress_fn fn, void *ctx, double *loss,
                  double *rate, int *batches_out, char *err) {
  double start = nn_os_seconds();
  int B = tr->cfg.batch_size, max_len = tr->cfg.max_len;
  /* the order: shuffle, sort chunks of BUCKET_BATCHES batches by length, shuffle the batches */
  nn_train_shuffle(tr->order, n_train, &tr->shuffle_rng);
  size_t chunk = (size_t)B * BUCKET_BATCHES;
  for (size_t first = 0; first < (size_t)n_train; first += chunk) {
    size_t count = (size_t)n_train - first < chunk ? (size_t)n_train - first : chunk;
    nn_train_sort_by_length(tr->order + first, (int)count, tr->data.row_length, max_len,
                            tr->length_count, tr->sort_scratch);
  }
  int batches = (n_train + B - 1) / B;
  for (int k = 0; k < batches; k++) tr->batch_perm[k] = k;
  nn_train_shuffle(tr->batch_perm, batches, &tr->shuffle_rng);
  *batches_out = batches;

  tr->adam.lr = (float)tr->lr;
  int cosine = tr->cfg.lr_schedule == NN_SCHEDULE_COSINE;
  double train_loss = 0;
  int rows_done = 0;
  for (int k = 0; k < batches; k++) {
    int first = tr->batch_perm[k] * B;
    int count = n_train - first < B ? n_train - first : B;
    nn_batch batch = make_batch(tr, tr->order + first, count, 1);
    if (cosine) tr->adam.lr = (float)cosine_lr(tr, k, batches);
    float batch_loss = 0.0f;
    int status = sharded_train_step(tr, &batch, &batch_loss, err);
    if (status != NN_OK) return status;
    train_loss += ((double)batch_loss - train_loss) / (k + 1);
    rows_done += count;
    if (fn) {
      double elapsed = nn_os_seconds() - start;
      *rate = elapsed > 0 ? rows_done / elapsed : 0.0;
      if (fn(ctx, k + 1, batches, train_loss, *rate)) return nn_train_interrupted(err);
    }
  }
  *loss = train_loss;
  return NN_OK;
}

int nn_trainer_epoch(nn_trainer *tr, nn_epoch_stats *stats, nn_progress_fn fn, void *ctx,
                     char *err) {
  if (!tr->model) return model_taken(err);
  int status;
  if (epochs_over(tr)) {
    if (!nn_train_second_round_pending(tr)) {
      tr->done = 1;
      return NN_DONE;
    }
    status = second_round_begin(tr, fn, ctx, err); /* round 2: the pseudo-labelled rows too */
    if (status != NN_OK) return status;
    if (tr->done) return NN_DONE; /* no row was chosen */
  }
  status = nn_train_choose(tr, fn, ctx, err);
  if (status != NN_OK) return status;
  status = nn_train_pretrain(tr, fn, ctx, err);
  if (status != NN_OK) return status;
  if (nn_train_second_round_pending(tr) && tr->epochs_run == 0) /* what round 2 starts from */
    memcpy(tr->start_params, nn_model_weights(tr->model), tr->param_count * sizeof(float));
  double start = nn_os_seconds();
  int n_train = tr->data.n_train + tr->n_pseudo;
  for (int i = 0, k = 0; k < tr->data.n_train; i++) /* the training rows, ascending */
    if (!nn_train_is_val(&tr->data, i)) tr->order[k++] = i;
  if (tr->n_pseudo) /* then the pseudo-labelled ones (round 2) */
    memcpy(tr->order + tr->data.n_train, tr->pseudo_rows, (size_t)tr->n_pseudo * sizeof *tr->order);
  double train_loss = 0, rate = 0;
  int batches = 0;
  status = nn_train_pass(tr, n_train, fn, ctx, &train_loss, &rate, &batches, err);
  if (status != NN_OK) return status;
  double epoch_lr = tr->cfg.lr_schedule == NN_SCHEDULE_COSINE ? cosine_lr(tr, 0, batches) : tr->lr;

  nn_epoch_stats s;
  memset(&s, 0, sizeof s);
  if (tr->data.n_val > 0) {
    epoch_report report = {fn, ctx, batches, train_loss, rate};
    status = validate(tr, &report, &s.val_loss, &s.val_accuracy, &s.val_f1, err);
    if (status != NN_OK) return status;
  } else { /* "validation": "none": no figures; every epoch is kept, so the last one is */
    s.val_loss = s.val_accuracy = s.val_f1 = NAN;
  }
  s.epoch = tr->epochs_run + 1;
  s.train_loss = train_loss;
  s.lr = epoch_lr; /* cosine: the epoch's first batch's */
  nn_figures figures = {s.val_loss, s.val_accuracy, s.val_f1};
  s.best = tr->data.n_val > 0 ? nn_monitor_better(tr->cfg.monitor, &figures, &tr->best_figures) : 1;

  /* early stopping bookkeeping (the lesson: patience epochs without improvement) */
  if (s.best) {
    tr->best_figures = figures;
    tr->bad_epochs = 0;
    memcpy(tr->best_params, nn_model_weights(tr->model), tr->param_count * sizeof(float));
  } else {
    tr->bad_epochs++;
  }
  if (tr->cfg.lr_schedule != NN_SCHEDULE_COSINE && tr->data.n_val > 0)
    plateau_step(tr, s.val_loss); /* no validation: lr stays */
  tr->epochs_run++;
  if (tr->bad_epochs >= tr->cfg.patience) tr->done = 1;
  s.seconds = nn_os_seconds() - start;
  tr->seconds += s.seconds;
  if (s.best) tr->best = s;
  *stats = s;
  return NN_OK;
}

/* ---------------------------------------------------------------- results */

int nn_trainer_pretrain(nn_trainer *tr, nn_progress_fn fn, void *ctx, char *err) {
  return nn_train_pretrain(tr, fn, ctx, err);
}

int nn_trainer_choose(nn_trainer *tr, nn_progress_fn fn, void *ctx, char *err) {
  if (!tr->model) return model_taken(err);
  return nn_train_choose(tr, fn, ctx, err);
}

int nn_trainer_choosing(const nn_trainer *tr) {
  return tr->model && !tr->choose_done && (tr->cfg.data_sized_done & NN_SIZED_WORD_DROPOUT);
}

/* The choice of word dropout ran to its end (its figures are in the metrics). */
static int chose(const nn_trainer *tr) {
  return (tr->cfg.data_sized_done & NN_SIZED_WORD_DROPOUT) && tr->choose_done && !tr->choose_failed;
}

const nn_config *nn_trainer_config(const nn_trainer *tr) { return &tr->cfg; }

int nn_trainer_self_training(const nn_trainer *tr) {
  return nn_train_second_round_pending(tr) ? epochs_over(tr) : tr->round > 0 && tr->n_pseudo > 0;
}

int nn_trainer_done(const nn_trainer *tr) {
  return epochs_over(tr) && !nn_train_second_round_pending(tr);
}

int nn_trainer_take_model(nn_trainer *tr, nn_model **out, char *err) {
  *out = NULL;
  if (!tr->model) return model_taken(err);
  if (tr->best.epoch > 0)
    memcpy(nn_model_params(tr->model), tr->best_params, tr->param_count * sizeof(float));
  if (tr->cfg.storage == NN_STORAGE_FLOAT16 && !tr->rounded) {
    /* What is stored is what was measured: the weights are rounded to float16 here, in place,
     * and the kept epoch's validation figures (the version's metrics, attn_tune's choice) are
     * those of the rounded weights, scored again on the same rows; the deploy decision scores
     * this model too. The figures as trained stay in the metrics beside them. */
    tr->clamped = nn_float16_round(nn_model_params(tr->model), tr->param_count);
    tr->rounded = 1;
    if (tr->data.n_val > 0 && tr->best.epoch > 0) {
      epoch_report none = {NULL, NULL, 0, 0.0, 0.0};
      double loss, accuracy, f1;
      int status = validate(tr, &none, &loss, &accuracy, &f1, err);
      if (status != NN_OK) return status;
      tr->float32_figures = tr->best_figures;
      tr->best.val_loss = loss;
      tr->best.val_accuracy = accuracy;
      tr->best.val_f1 = f1;
    }
  }
  int status = nn_model_prepare_inference(tr->model, err); /* its weights are final now */
  if (status != NN_OK) return status;
  *out = tr->model;
  tr->model = NULL;
  return NN_OK;
}

/* A JSON number, or null for NaN and infinities (JSON has none). */
static int json_number(char *buf, size_t size, double x) {
  nn_json_format_double(buf, size, x); /* '.' whatever the host's locale */
  return (int)strlen(buf);
}

/* Appends ,"sized":{...} to extra (size bytes): the options the recipe chose for these rows
 * (with self-training, round 1's batch and epochs). Nothing when it chose none. */
static void metrics_sized(const nn_trainer *tr, char *extra, size_t size) {
  unsigned sized = tr->cfg.data_sized_done;
  if (!sized) return;
  size_t used = strlen(extra);
  used += (size_t)snprintf(extra + used, size - used, ",\"sized\":{");
  const char *sep = "";
  if (sized & NN_SIZED_VALIDATION) {
    used += (size_t)snprintf(extra + used, size - used, "%s\"validation\":\"%s\"", sep,
                             nn_validation_name(tr->cfg.validation));
    sep = ",";
  }
  if (sized & NN_SIZED_BATCH) {
    used += (size_t)snprintf(extra + used, size - used, "%s\"batch_size\":%d", sep,
                             tr->round > 0 ? tr->round1_batch : tr->cfg.batch_size);
    sep = ",";
  }
  if (sized & NN_SIZED_EPOCHS) {
    used += (size_t)snprintf(extra + used, size - used, "%s\"epochs\":%d", sep,
                             tr->round > 0 ? tr->round1_epochs : tr->cfg.epochs);
    sep = ",";
  }
  if ((sized & NN_SIZED_PATIENCE) && tr->cfg.validation != NN_VALIDATION_NONE) {
    used += (size_t)snprintf(extra + used, size - used, "%s\"patience\":%d", sep, tr->cfg.patience);
    sep = ",";
  }
  if (sized & NN_SIZED_PRETRAIN) {
    used += (size_t)snprintf(extra + used, size - used, "%s\"pretrain_epochs\":%d", sep,
                             tr->cfg.pretrain_epochs);
    sep = ",";
  }
  if (sized & NN_SIZED_SUBWORDS) {
    used += (size_t)snprintf(extra + used, size - used, "%s\"subword_buckets\":%d", sep,
                             tr->cfg.subword_buckets);
    sep = ",";
  }
  if (sized & NN_SIZED_EMBED_DIM) {
    used +=
        (size_t)snprintf(extra + used, size - used, "%s\"embed_dim\":%d", sep, tr->cfg.embed_dim);
    sep = ",";
  }
  if (chose(tr)) {
    char rate[40];
    json_number(rate, sizeof rate, nn_decimal_double(tr->cfg.word_dropout));
    used += (size_t)snprintf(extra + used, size - used, "%s\"word_dropout\":%s", sep, rate);
    sep = ",";
  }
  if (sized & NN_SIZED_SELF_TRAINING) {
    char ratio[40];
    json_number(ratio, sizeof ratio, nn_decimal_double(tr->cfg.self_training));
    used += (size_t)snprintf(extra + used, size - used, "%s\"self_training\":%s", sep, ratio);
    sep = ",";
  }
  if (used < size) snprintf(extra + used, size - used, "}");
}

char *nn_trainer_metrics_json(const nn_trainer *tr) {
  char loss[40], accuracy[40], f1[40], seconds[40];
  int have = tr->best.epoch > 0;
  json_number(loss, sizeof loss, have ? tr->best.val_loss : NAN);
  json_number(accuracy, sizeof accuracy, have ? tr->best.val_accuracy : NAN);
  json_number(f1, sizeof f1, have ? tr->best.val_f1 : NAN);
  json_number(seconds, sizeof seconds, tr->seconds);
  char extra[1024] = "";
  if (tr->embeddings_option)
    snprintf(extra, sizeof extra, ",\"pretrained_words\":%d,\"freeze_embeddings\":%s",
             tr->pretrained_words, tr->freeze_embeddings ? "true" : "false");
  if (tr->warm_start) {
    size_t used = strlen(extra);
    snprintf(extra + used, sizeof extra - used, ",\"warm_start\":true");
  }
  if (tr->cfg.validation == NN_VALIDATION_RANDOM && tr->cfg.recipe != NN_RECIPE_LESSON) {
    /* the split by text: a later run reads which rows this version never trained on */
    char fraction[40];
    json_number(fraction, sizeof fraction, nn_decimal_double(tr->cfg.val_fraction));
    size_t used = strlen(extra);
    snprintf(extra + used, sizeof extra - used,
             ",\"split\":\"text_hash\",\"split_fraction\":%s,\"split_moved\":%d", fraction,
             tr->data.split_moved);
  }
  metrics_sized(tr, extra, sizeof extra);
  int pretrained = tr->cfg.pretrain_epochs > 0 && tr->data.pretrain_tokens > 0 && !tr->warm_start &&
                   !tr->pretrained_words;
  if (tr->n_unlab_given) { /* read only when the pretraining ran over them */
    size_t used = strlen(extra);
    snprintf(extra + used, sizeof extra - used, ",\"unlabelled_rows\":%d%s", tr->n_unlab_given,
             (pretrained || tr->pseudo_max) && tr->data.n_unlab ? ""
                                                                : ",\"unlabelled_read\":false");
  }
  if (pretrained) {
    char pseconds[40];
    json_number(pseconds, sizeof pseconds, tr->pretrain_seconds);
    size_t used = strlen(extra);
    snprintf(extra + used, sizeof extra - used, ",\"pretrain_epochs\":%d,\"pretrain_seconds\":%s",
             tr->cfg.pretrain_epochs, pseconds);
  }
  if (chose(tr)) {
    char with[40], without[40], cseconds[40];
    json_number(with, sizeof with, tr->choose_f1[0]);
    json_number(without, sizeof without, tr->choose_f1[1]);
    json_number(cseconds, sizeof cseconds, tr->choose_seconds);
    size_t used = strlen(extra);
    snprintf(extra + used, sizeof extra - used,
             ",\"word_dropout_choice\":{\"folds\":2,\"weighted_f1\":{\"0.2\":%s,\"0\":%s},"
             "\"seconds\":%s}",
             with, without, cseconds);
  }
  if (tr->round > 0) { /* self-training: what round 2 had */
    char sseconds[40];
    json_number(sseconds, sizeof sseconds, tr->self_training_seconds);
    size_t used = strlen(extra);
    snprintf(extra + used, sizeof extra - used,
             ",\"self_training\":{\"pseudo_labelled_rows\":%d,\"first_epoch\":%d,"
             "\"batch_size\":%d,\"epochs\":%d,\"seconds\":%s}",
             tr->n_pseudo, tr->n_pseudo ? tr->round1_epochs + 1 : 0, tr->cfg.batch_size,
             tr->n_pseudo ? tr->cfg.epochs - tr->round1_epochs : 0, sseconds);
  }
  if (tr->rounded) { /* "storage": "float16": the figures above are the rounded weights' */
    size_t used = strlen(extra);
    used += (size_t)snprintf(extra + used, sizeof extra - used, ",\"storage\":\"float16\"");
    if (tr->data.n_val > 0 && have && used < sizeof extra) {
      char l32[40], a32[40], f32[40];
      json_number(l32, sizeof l32, tr->float32_figures.loss);
      json_number(a32, sizeof a32, tr->float32_figures.accuracy);
      json_number(f32, sizeof f32, tr->float32_figures.f1);
      used += (size_t)snprintf(extra + used, sizeof extra - used,
                               ",\"val_loss_float32\":%s,\"val_accuracy_float32\":%s,"
                               "\"val_f1_float32\":%s",
                               l32, a32, f32);
    }
    if (tr->clamped && used < sizeof extra)
      snprintf(extra + used, sizeof extra - used, ",\"float16_clamped\":%zu", tr->clamped);
  }
  const char *format = "{\"best_epoch\":%d,\"val_loss\":%s,\"val_accuracy\":%s,\"val_f1\":%s,"
                       "\"monitor\":\"%s\",\"train_rows\":%d,\"val_rows\":%d,\"epochs_run\":%d,"
                       "\"seconds\":%s%s}";
  const char *monitor = nn_monitor_name(tr->cfg.monitor);
  int len = snprintf(NULL, 0, format, tr->best.epoch, loss, accuracy, f1, monitor, tr->data.n_train,
                     tr->data.n_val, tr->epochs_run, seconds, extra);
  if (len < 0) return NULL;
  char *json = nn_mem_alloc(tr->mem, (size_t)len + 1);
  if (!json) return NULL;
  snprintf(json, (size_t)len + 1, format, tr->best.epoch, loss, accuracy, f1, monitor,
           tr->data.n_train, tr->data.n_val, tr->epochs_run, seconds, extra);
  return json;
}

/* ---------------------------------------------------------------- pretrained embeddings */

static int embeddings_settable(const nn_trainer *tr, const char *what, char *err) {
  if (!tr->model || tr->epochs_run > 0) {
    snprintf(err, NN_ERR_LEN, "%s: only before the first epoch", what);
    return NN_ERROR;
  }
  return NN_OK;
}

int nn_trainer_set_embedding(nn_trainer *tr, const char *word, int len, const float *vector,
                             int dim, int *found, char *err) {
  *found = 0;
  int status = embeddings_settable(tr, "pretrained embeddings", err);
  if (status != NN_OK) return status;
  if (dim != tr->cfg.embed_dim) {
    snprintf(err, NN_ERR_LEN,
             "pretrained embeddings: the vectors have %d dimensions, embed_dim is %d", dim,
             tr->cfg.embed_dim);
    return NN_ERROR;
  }
  const nn_vocab *vocab = nn_model_vocab(tr->model);
  int V = nn_vocab_count(vocab), id = word && len > 0 ? nn_vocab_lookup(vocab, word, len) : NN_UNK;
  tr->embeddings_option = 1;
  if (id <= NN_UNK || id >= V) return NN_OK; /* not in the vocabulary (or <PAD>, <UNK>) */
  if (!tr->pretrained) {
    tr->pretrained = nn_mem_calloc(tr->mem, (size_t)V, 1);
    if (!tr->pretrained) {
      snprintf(err, NN_ERR_LEN, "out of memory setting pretrained embeddings");
      return NN_NOMEM;
    }
  }
  float *params = nn_model_params(tr->model);
  for (int k = 0; k < tr->K; k++) { /* every member's embeddings.weight (V, E) */
    float *row = params + nn_model_member(tr->model, k)->emb + (size_t)id * dim;
    memcpy(row, vector, (size_t)dim * sizeof *row);
  }
  if (!tr->pretrained[id]) tr->pretrained_words++;
  tr->pretrained[id] = 1;
  *found = 1;
  return NN_OK;
}

int nn_trainer_freeze_embeddings(nn_trainer *tr, int freeze, char *err) {
  int status = embeddings_settable(tr, "freeze_embeddings", err);
  if (status != NN_OK) return status;
  tr->freeze_embeddings = freeze != 0;
  tr->embeddings_option = 1;
  return NN_OK;
}

void nn_trainer_free(nn_trainer *tr) {
  if (!tr) return;
  nn_mem_free(tr->mem, tr->pretrained);
  if (tr->model) nn_model_free(tr->model);
  if (tr->ws) nn_workspace_free(tr->ws);
  for (int s = 1; s < MAX_SHARDS; s++) {
    nn_workspace_free(tr->shard_ws[s]);
    if (tr->shard_grads[s]) nn_backend_free(tr->mem, tr->be, tr->shard_grads[s]);
  }
  for (int s = 0; s < MAX_SHARDS; s++) {
    nn_mem_free(tr->mem, tr->rows[s]);
    nn_mem_free(tr->mem, tr->stamp[s]);
  }
  nn_pool_free(tr->pool);
  if (tr->be) nn_adam_free_on(&tr->adam, tr->be);
  else nn_adam_free(&tr->adam);
  nn_train_data_free(&tr->data);
  nn_mem_free(tr->mem, tr->order);
  nn_mem_free(tr->mem, tr->sort_scratch);
  nn_mem_free(tr->mem, tr->length_count);
  nn_mem_free(tr->mem, tr->batch_perm);
  nn_mem_free(tr->mem, tr->tokens);
  nn_mem_free(tr->mem, tr->lengths);
  nn_mem_free(tr->mem, tr->labels);
  nn_mem_free(tr->mem, tr->logits);
  nn_mem_free(tr->mem, tr->dlogits);
  nn_mem_free(tr->mem, tr->true_positive);
  nn_mem_free(tr->mem, tr->predicted);
  nn_mem_free(tr->mem, tr->support);
  nn_mem_free(tr->mem, tr->best_params);
  nn_mem_free(tr->mem, tr->lazy_rows);
  nn_mem_free(tr->mem, tr->lazy_stamp);
  nn_train_self_free(tr);
  nn_mem_free(tr->mem, tr);
}

/* ---------------------------------------------------------------- for ext/ */

void nn_trainer_validation_rows(const nn_trainer *tr, const int **rows, int *n) {
  *rows = tr->data.val_rows;
  *n = tr->data.n_val;
}

int nn_trainer_truncated_rows(const nn_trainer *tr) { return tr->data.n_truncated; }

int nn_trainer_set_class_weights(nn_trainer *tr, const char *const *labels, const int *lens,
                                 const double *weights, int n, char *err) {
  if (!tr->model || tr->epochs_run > 0) {
    snprintf(err, NN_ERR_LEN, "class weights: only before the first epoch");
    return NN_ERROR;
  }
  float *w = nn_mem_alloc(tr->mem, (size_t)tr->data.C * sizeof *w);
  if (!w) {
    snprintf(err, NN_ERR_LEN, "out of memory setting %d class weights", tr->data.C);
    return NN_NOMEM;
  }
  for (int c = 0; c < tr->data.C; c++) w[c] = 1.0f;
  for (int i = 0; i < n; i++) {
    int c = nn_model_label_lookup(tr->model, labels[i], lens[i]);
    if (c < 0) {
      char quoted[160], known[240] = "";
      nn_json_quote_for_message(quoted, sizeof quoted, labels[i], (size_t)lens[i]);
      for (int k = 0, used = 0; k < tr->data.C && k < 5 && used < (int)sizeof known - 1; k++) {
        char one[64];
        const char *name = nn_model_label(tr->model, k);
        nn_json_quote_for_message(one, sizeof one, name, strlen(name));
        used += snprintf(known + used, sizeof known - (size_t)used, "%s%s", k ? ", " : "", one);
      }
      snprintf(err, NN_ERR_LEN,
               "option \"class_weights\": label %s is not one of the %d labels "
               "of the rows (%s%s)",
               quoted, tr->data.C, known, tr->data.C > 5 ? ", ..." : "");
      nn_mem_free(tr->mem, w);
      return NN_ERROR;
    }
    if (!isfinite(weights[i]) || !(weights[i] > 0) || weights[i] > 1e6) {
      snprintf(err, NN_ERR_LEN,
               "option \"class_weights\": the weight of label \"%.*s\" must be "
               "a number in (0, 1000000], got %g",
               lens[i] > 100 ? 100 : lens[i], labels[i], weights[i]);
      nn_mem_free(tr->mem, w);
      return NN_ERROR;
    }
    w[c] = (float)weights[i];
  }
  memcpy(tr->data.class_weights, w, (size_t)tr->data.C * sizeof *w);
  nn_mem_free(tr->mem, w);
  return NN_OK;
}

size_t nn_trainer_param_count(const nn_trainer *tr) { return tr->param_count; }

const char *nn_trainer_backend(const nn_trainer *tr, char *buf, size_t len) {
  char device[256] = "";
  if (tr->be->describe) tr->be->describe(device, sizeof device);
  if (!device[0] && strcmp(tr->be->name, "cpu") == 0)
    snprintf(device, sizeof device, "%s kernels", nn_backend_cpu_level());
  if (device[0]) snprintf(buf, len, "%s (%s)", tr->be->name, device);
  else snprintf(buf, len, "%s", tr->be->name);
  return buf;
}
