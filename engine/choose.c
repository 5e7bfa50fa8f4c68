/* choose.c -- the default recipe's word dropout, chosen on the labelled rows themselves.
 *
 * Word dropout (each training token read as <UNK> with probability 0.2) is a lever of the
 * corpus, not of its size: news titles, where many words say the same thing, need it; package
 * descriptions whose section one word names lose by it (tests/bench/RESULTS.md, "Word
 * dropout, chosen on the labelled rows"). No statistic of the texts measured told the two
 * apart, so the rows decide: two-fold cross-validation.
 *
 *   SELECT attn_fit('packages', 'SELECT description, section FROM packages');  -- 1,000 rows
 *   -> {..., "sized": {..., "word_dropout": 0}, "word_dropout_choice": {"folds": 2,
 *       "weighted_f1": {"0.2": 0.571, "0": 0.598}, "seconds": 3.1}, ...}
 *
 * The labelled rows are cut into two halves, stratified (within each class the rows alternate
 * between the halves, in row order, from a drawn first half). For each setting, 0.2 and then 0,
 * and each half: the network as the first epoch would start it (its <UNK> row zero for 0, as
 * nn_model_create makes it then), trained on the other half for the epochs the recipe sized to
 * all the rows, then the half classified, a word the other half never had read as <UNK> (as a
 * new text's unknown word is). Both halves' predictions are scored together: the weighted F1
 * of the setting. 0 is chosen only when it scores strictly higher. Then the trainer is as
 * nn_trainer_create left it, with the setting chosen: the same starting weights, a new Adam,
 * its streams seeded again, so the model is the one that the option "word_dropout" given would
 * have trained, bit for bit.
 *
 * Cost: the folds' Adam moves only the embedding rows a batch uses (lazy_adam: the dense
 * update of the whole vocabulary's rows was most of a step's time at these sizes), each half
 * trains the epochs of all the rows, so half the rows' batches: four folds cost about two
 * trainings of all the rows (tests/bench/RESULTS.md). Everything draws from streams seeded by
 * cfg.seed: the same rows, options and seed give the same choice at any thread count. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "compat.h" /* nn_os_seconds */
#include "model.h"
#include "nn_internal.h"
#include "nn_mem.h"
#include "train.h"

#define SEED_CHOOSE 0x43484f4f53450006ull /* "CHOOSE" */
#define CHOOSE_ASK 8                      /* scoring batches between progress calls */

/* The progress of one fold's pass, reported as the batches of all four folds. */
typedef struct choose_report {
  nn_progress_fn fn;
  void *ctx;
  int done, total;
  int stopped; /* fn said stop while a large block was copied or zeroed */
} choose_report;

/* Whether to stop, asked between scoring batches and, as nn_mem_stop during the choice, while
 * the weights are copied and Adam's moments zeroed between the folds: blocks of the model's
 * size (tens of MB with a large subword table), asked about in pieces as nn_trainer_create's
 * are. The progress is reported as it stands, without a loss. */
static int choose_stop(void *ctx) {
  choose_report *r = ctx;
  if (r->fn && r->fn(r->ctx, r->done, r->total, NAN, 0.0)) r->stopped = 1;
  return r->stopped;
}

/* dst = src (n floats) in pieces of NN_MEM_STOP_BYTES, asking nn_mem_stop between them: 0, or
 * 1 when it said stop. */
static int copy_asking(float *dst, const float *src, size_t n) {
  size_t piece = NN_MEM_STOP_BYTES / sizeof *dst;
  for (size_t lo = 0; lo < n; lo += piece) {
    memcpy(dst + lo, src + lo, (n - lo < piece ? n - lo : piece) * sizeof *dst);
    if (nn_mem_stop && lo + piece < n && nn_mem_stop(nn_mem_stop_ctx)) return 1;
  }
  return 0;
}

static int choose_progress(void *ctx, int batches_done, int batches_total, double loss,
                           double rate) {
  const choose_report *r = ctx;
  (void)batches_total;
  return r->fn(r->ctx, r->done + batches_done, r->total, loss, rate);
}

/* The batch size of a fold's training over n rows: sized to them when the recipe sized it. */
static int fold_batch(const nn_config *cfg, int n) {
  return cfg->data_sized_done & NN_SIZED_BATCH ? nn_config_sized_batch(n) : cfg->batch_size;
}

/* The weights the first epoch starts from with word dropout p: start, with <UNK>'s embedding
 * row zero when p is 0 (model.c's init_params, for a single network). */
static int set_start(nn_trainer *tr, const float *start, float p, char *err) {
  float *w = nn_model_params(tr->model);
  if (copy_asking(w, start, tr->param_count)) return nn_train_interrupted(err);
  if (!(p > 0.0f)) memset(w + (size_t)NN_UNK * tr->model->E, 0, sizeof *w * tr->model->E);
  return NN_OK;
}

/* Train on the n_fold rows not in half k for the sized epochs and classify half k into the
 * counts (tr->true_positive, predicted, support). */
static int run_fold(nn_trainer *tr, const unsigned char *half, int k, int n, int n_fold, int *rows,
                    unsigned char *known, choose_report *report, char *err) {
  const nn_train_data *d = &tr->data;
  memset(known, 0, (size_t)tr->model->V);
  known[NN_PAD] = known[NN_UNK] = 1;
  for (int i = 0; i < n; i++) {
    if (half[i] == k) continue;
    const void *ids = nn_train_row_ids(d, i);
    for (int t = 0; t < d->row_length[i]; t++)
      known[d->ids16 ? ((const uint16_t *)ids)[t] : ((const int32_t *)ids)[t]] = 1;
  }
  tr->cfg.batch_size = fold_batch(&tr->cfg, n_fold);
  int status = nn_train_reset_optimizer(tr, err);
  for (int e = 0; e < tr->cfg.epochs && status == NN_OK; e++) {
    tr->epochs_run = e; /* cosine_lr's step */
    for (int i = 0, j = 0; i < n; i++)
      if (half[i] != k) tr->order[j++] = i;
    double loss = 0, rate = 0;
    int batches = 0;
    status = nn_train_pass(tr, n_fold, report->fn ? choose_progress : NULL, report, &loss, &rate,
                           &batches, err);
    report->done += batches;
  }
  tr->epochs_run = 0;
  if (status != NN_OK) return status;
  tr->known = known;
  int C = d->C, count = 0, asked = 0;
  for (int i = 0; i <= n && status == NN_OK; i++) {
    if (i < n && half[i] != k) continue;
    if (i < n) rows[count++] = i;
    if (count == tr->batch_rows || (i == n && count > 0)) {
      if (++asked % CHOOSE_ASK == 0 && choose_stop(report)) {
        status = nn_train_interrupted(err);
        break;
      }
      status = nn_train_forward_rows(tr, rows, count, err);
      for (int b = 0; b < count && status == NN_OK; b++) {
        const float *logit = tr->logits + (size_t)b * C;
        int best = 0, label = d->row_class[rows[b]];
        for (int c = 1; c < C; c++)
          if (logit[c] > logit[best]) best = c; /* the first maximum, as torch.argmax */
        tr->predicted[best]++;
        tr->support[label]++;
        tr->true_positive[best] += best == label;
      }
      count = 0;
    }
  }
  tr->known = NULL;
  return status;
}

int nn_train_choose(nn_trainer *tr, nn_progress_fn fn, void *ctx, char *err) {
  if (tr->choose_done) {
    /* a choice that failed left one fold's weights behind: no training from them */
    if (!tr->choose_failed) return NN_OK;
    snprintf(err, NN_ERR_LEN, "the choice of word dropout did not finish");
    return NN_ERROR;
  }
  tr->choose_done = 1;
  if (!(tr->cfg.data_sized_done & NN_SIZED_WORD_DROPOUT)) return NN_OK;
  tr->choose_failed = 1; /* until it ends well */
  double began = nn_os_seconds();
  const nn_train_data *d = &tr->data;
  int n = d->n_train, C = d->C; /* no validation split: rows 0 .. n - 1 train */
  nn_config saved = tr->cfg;
  float settings[2] = {saved.word_dropout, 0.0f};
  choose_report report = {fn, ctx, 0, 0, 0};
  float *start = nn_mem_alloc(tr->mem, tr->param_count * sizeof *start);
  unsigned char *half = nn_mem_alloc(tr->mem, (size_t)n);
  unsigned char *known = nn_mem_alloc(tr->mem, (size_t)tr->model->V);
  int *rows = nn_mem_alloc(tr->mem, (size_t)tr->batch_rows * sizeof *rows);
  int *next = nn_mem_alloc(tr->mem, (size_t)C * sizeof *next);
  /* a half's batches, sized to its rows, can outnumber the training's (513 rows make 17
   * batches of 32, a half of 255 of them 32 batches of 8): the folds shuffle their batches in
   * a buffer of their own, one entry a row at most */
  int *perm = nn_mem_alloc(tr->mem, (size_t)(n > 0 ? n : 1) * sizeof *perm);
  int *batch_perm = tr->batch_perm;
  int status = NN_OK;
  if (!start || !half || !known || !rows || !next || !perm) {
    snprintf(err, NN_ERR_LEN, "out of memory choosing word dropout over %d rows", n);
    status = NN_NOMEM;
    goto done;
  }
  nn_mem_stop = choose_stop;
  nn_mem_stop_ctx = &report;
  if (copy_asking(start, nn_model_weights(tr->model), tr->param_count)) {
    status = nn_train_interrupted(err);
    goto done;
  }
  nn_rng rng;
  nn_rng_seed(&rng, saved.seed ^ SEED_CHOOSE);
  for (int c = 0; c < C; c++) next[c] = nn_rng_uniform(&rng) < 0.5f;
  for (int i = 0; i < n; i++) {
    half[i] = (unsigned char)next[d->row_class[i]];
    next[d->row_class[i]] ^= 1;
  }
  uint64_t fold_seed[2] = {nn_rng_next(&rng), nn_rng_next(&rng)};
  int n_fold[2] = {0, 0}; /* the rows fold k trains on: those not in half k */
  for (int i = 0; i < n; i++) n_fold[!half[i]]++;
  for (int k = 0; k < 2; k++) { /* all four folds' batches, for the progress */
    int b = fold_batch(&saved, n_fold[k]);
    report.total += 2 * saved.epochs * ((n_fold[k] + b - 1) / b);
  }
  /* on a device, lazy Adam is a launch per embedding row: there the dense step is cheaper */
  tr->cfg.lazy_adam = !tr->be->device_memory;
  tr->batch_perm = perm;
  for (int s = 0; s < 2 && status == NN_OK; s++) {
    tr->cfg.word_dropout = settings[s];
    memset(tr->true_positive, 0, (size_t)C * sizeof *tr->true_positive);
    memset(tr->predicted, 0, (size_t)C * sizeof *tr->predicted);
    memset(tr->support, 0, (size_t)C * sizeof *tr->support);
    for (int k = 0; k < 2 && status == NN_OK; k++) {
      status = set_start(tr, start, settings[s], err);
      nn_train_seed_streams(tr, fold_seed[k]); /* both settings see the same batches */
      if (status == NN_OK) status = run_fold(tr, half, k, n, n_fold[k], rows, known, &report, err);
    }
    double accuracy;
    nn_class_metrics weighted;
    nn_metrics_from_counts(NULL, &weighted, &accuracy, tr->true_positive, tr->predicted,
                           tr->support, C);
    tr->choose_f1[s] = weighted.f1;
  }
  if (status != NN_OK) goto done;
  float chosen = tr->choose_f1[1] > tr->choose_f1[0] ? settings[1] : settings[0];
  tr->cfg = saved;
  tr->cfg.word_dropout = chosen;
  status = set_start(tr, start, chosen, err);
  nn_train_seed_streams(tr, saved.seed);
  tr->epochs_run = 0;
  tr->done = 0;
  if (status == NN_OK) status = nn_train_reset_optimizer(tr, err);
  if (status == NN_OK) {
    tr->model->cfg.word_dropout = chosen; /* the model stored says what it trained with */
    tr->choose_failed = 0;
  }
  tr->choose_seconds = nn_os_seconds() - began;
done:
  /* a block whose zeroing was stopped came back NULL: interrupted, not out of memory */
  if (status == NN_NOMEM && report.stopped) status = nn_train_interrupted(err);
  nn_mem_stop = NULL;
  nn_mem_stop_ctx = NULL;
  tr->batch_perm = batch_perm;
  if (status != NN_OK) tr->cfg = saved;
  nn_mem_free(tr->mem, start);
  nn_mem_free(tr->mem, half);
  nn_mem_free(tr->mem, known);
  nn_mem_free(tr->mem, rows);
  nn_mem_free(tr->mem, next);
  nn_mem_free(tr->mem, perm);
  return status;
}
