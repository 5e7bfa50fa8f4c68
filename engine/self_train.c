/* self_train.c -- the classifier's own surest predictions as labels for the unlabelled rows.
 *
 * With a few hundred labels, the pretrained word vectors place unseen words near seen ones, and
 * the classifier trained on them labels most of the table's unlabelled rows well; the rows it is
 * surest of are labelled better still (about nine in ten on the corpora measured, where the
 * classifier's own accuracy is six to seven in ten). Those rows, with its labels, are more
 * labels: the classifier trains again, from the weights it started from, on the labelled rows
 * and them.
 *
 *   SELECT attn_fit('news', 'SELECT title, category FROM headlines');  -- NULL categories too
 *   -> {..., "sized": {..., "self_training": 6}, "self_training": {"pseudo_labelled_rows": 1200,
 *       "first_epoch": 41, ...}, ...}
 *
 * Round 1 is the training as it would be without it. At its end the unlabelled rows are scored
 * with the kept weights (no dropout), and round(self_training x training rows) of them, at most
 * half, are chosen: for each class, in the proportion of the training rows that have it, the rows
 * predicted as that class with the highest probability (ties: the earlier row). Then round 2:
 * the weights the first epoch started from (after the pretraining), a new Adam, the learning
 * rate and the early-stopping state as at the start, the batch and the epochs sized again to
 * the rows round 2 has (when the recipe sized them), and the same epochs otherwise. Epochs
 * keep counting: round 2's first epoch is the one after round 1's last. The pseudo-labelled
 * rows never join the validation split. Everything is drawn from the trainer's streams, so the
 * same rows, options and seed give the same bits, at any thread count.
 *
 * train.c drives the step into round 2 (its forward pass scores the rows, its optimizer
 * restarts); this file plans the buffers, reads each batch's logits into classes and scores,
 * chooses the rows, and frees what it made. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn_internal.h"
#include "nn_mem.h"
#include "train.h"

int nn_train_self_plan(nn_trainer *tr, char *err) {
  if (!(tr->cfg.self_training > 0.0f) || tr->data.n_unlab == 0 || tr->data.n_train == 0)
    return NN_OK;
  /* at most the surer half: beyond it the choice would no longer be of the surest rows (WordNet
   * glosses, 1,000 labels and 7,000 unlabelled rows: 6,000 of them lost 0.01-0.02 against 3,000) */
  double want = floor((double)tr->cfg.self_training * tr->data.n_train + 0.5);
  tr->pseudo_max = want < (double)(tr->data.n_unlab / 2) ? (int)want : tr->data.n_unlab / 2;
  if (tr->pseudo_max == 0) return NN_OK;
  int grown = nn_train_data_grow_classes(&tr->data); /* the unlabelled rows get classes too */
  tr->pseudo_rows = nn_mem_alloc(tr->mem, (size_t)tr->pseudo_max * sizeof *tr->pseudo_rows);
  tr->start_params = nn_mem_alloc(tr->mem, (tr->param_count ? tr->param_count : 1) * sizeof(float));
  if (grown != NN_OK || !tr->pseudo_rows || !tr->start_params) {
    snprintf(err, NN_ERR_LEN, "out of memory planning the self-training over %d rows",
             tr->data.n_unlab);
    return NN_NOMEM;
  }
  return NN_OK;
}

struct nn_scored_row {
  float probability;
  int row;
};
typedef struct nn_scored_row scored_row;

/* Higher probability first, then the earlier row; a row without one (NaN: its logits were not
 * all finite) after every row with one. A total order, so any qsort gives one result: with NaN
 * compared as a number, a and b would each come before the other. */
static int by_probability(const void *a, const void *b) {
  const scored_row *x = a, *y = b;
  int x_nan = isnan(x->probability), y_nan = isnan(y->probability);
  if (x_nan != y_nan) return x_nan - y_nan;
  if (!x_nan && x->probability != y->probability) return x->probability > y->probability ? -1 : 1;
  return (x->row > y->row) - (x->row < y->row);
}

static int ascending(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* Whether row i is one <UNK> and nothing else: what a text without a word encodes to. */
static int no_word(const nn_train_data *d, int i) {
  if (d->row_length[i] != 1) return 0;
  const void *ids = nn_train_row_ids(d, i);
  return (d->ids16 ? ((const uint16_t *)ids)[0] : ((const int32_t *)ids)[0]) == NN_UNK;
}

void nn_train_self_score(nn_trainer *tr, nn_self_scores *sc, int first, int count) {
  int C = tr->data.C, n = tr->data.n;
  for (int b = 0; b < count; b++) {
    const float *z = tr->logits + (size_t)b * C;
    int best = 0;
    for (int c = 1; c < C; c++)
      if (z[c] > z[best]) best = c; /* first maximum, as torch.argmax */
    double sum = 0;
    /* the best logit's own term is 1 even when it is +inf (inf - inf would be NaN) */
    for (int c = 0; c < C; c++) sum += c == best ? 1.0 : exp((double)z[c] - (double)z[best]);
    tr->data.row_class[n + first + b] = (uint16_t)best;
    /* a text with no word (empty, or stop words alone: one <UNK>) is the prior, not evidence */
    float p = no_word(&tr->data, n + first + b) ? NAN : (float)(1.0 / sum);
    sc->scores[first + b] = (scored_row){p, n + first + b};
  }
}

/* The pseudo-labelled rows: each class's quota of its surest rows, ascending in pseudo_rows.
 * The classes take their quotas in class order until pseudo_max rows are taken; a class with
 * fewer rows predicted than its quota takes them all. counts: (2C) the training rows of each
 * class, then scratch. One pass over the sorted rows, not one per class: C x n_unlab steps
 * (thousands of labels, millions of rows) would take seconds that ask no interrupt. */
static void choose_rows(nn_trainer *tr, scored_row *scores, int *counts) {
  int C = tr->data.C, n_unlab = tr->data.n_unlab, left = tr->pseudo_max;
  int *take = counts, *predicted = counts + C; /* take[c] overwrites class c's training rows */
  qsort(scores, (size_t)n_unlab, sizeof *scores, by_probability);
  memset(predicted, 0, (size_t)C * sizeof *predicted);
  for (int i = 0; i < n_unlab && !isnan(scores[i].probability); i++)
    predicted[tr->data.row_class[scores[i].row]]++;
  for (int c = 0; c < C; c++) {
    int quota = (int)floor((double)tr->pseudo_max * counts[c] / tr->data.n_train + 0.5);
    take[c] = quota < predicted[c] ? quota : predicted[c];
    if (take[c] > left) take[c] = left;
    left -= take[c];
  }
  tr->n_pseudo = 0;
  for (int i = 0; i < n_unlab && !isnan(scores[i].probability); i++) {
    int c = tr->data.row_class[scores[i].row];
    if (take[c] > 0) {
      tr->pseudo_rows[tr->n_pseudo++] = scores[i].row;
      take[c]--;
    }
  }
  qsort(tr->pseudo_rows, (size_t)tr->n_pseudo, sizeof *tr->pseudo_rows, ascending);
}

int nn_train_self_scores_alloc(nn_trainer *tr, nn_self_scores *sc, char *err) {
  sc->scores = nn_mem_alloc(tr->mem, (size_t)tr->data.n_unlab * sizeof *sc->scores);
  sc->rows = nn_mem_alloc(tr->mem, (size_t)tr->batch_rows * sizeof *sc->rows);
  /* (2C): each class's training rows, then choose_rows' scratch */
  sc->counts = nn_mem_calloc(tr->mem, 2 * (size_t)tr->data.C, sizeof *sc->counts);
  if (sc->scores && sc->rows && sc->counts) return NN_OK;
  snprintf(err, NN_ERR_LEN, "out of memory scoring %d unlabelled rows", tr->data.n_unlab);
  return NN_NOMEM;
}

void nn_train_self_choose(nn_trainer *tr, nn_self_scores *sc) {
  for (int i = 0; i < tr->data.n; i++)
    if (!nn_train_is_val(&tr->data, i)) sc->counts[tr->data.row_class[i]]++;
  choose_rows(tr, sc->scores, sc->counts);
}

void nn_train_self_scores_free(nn_trainer *tr, nn_self_scores *sc) {
  nn_mem_free(tr->mem, sc->scores);
  nn_mem_free(tr->mem, sc->rows);
  nn_mem_free(tr->mem, sc->counts);
  memset(sc, 0, sizeof *sc);
}

void nn_train_self_free(nn_trainer *tr) {
  nn_mem_free(tr->mem, tr->pseudo_rows);
  nn_mem_free(tr->mem, tr->start_params);
  tr->pseudo_rows = NULL;
  tr->start_params = NULL;
}
