/* metrics.c -- precision, recall, F1, support and accuracy, as sklearn reports them.
 *
 * For each class c (sklearn.metrics.classification_report with zero_division=0):
 *   precision = TP / (TP + FP)        0 when nothing was predicted c
 *   recall    = TP / (TP + FN)        0 when class c has no rows
 *   f1        = 2 TP / (2 TP + FP + FN)  (= 2 P R / (P + R)); 0 when undefined
 * "weighted" averages each of them with the class supports as weights (sklearn's
 * average="weighted"); its support is the total. accuracy = trace / total (0 for no rows).
 *
 * nn_metrics_evaluate: every figure of BigQuery ML's ML.EVALUATE from true classes and predicted
 * probabilities (macro and weighted precision, recall, F1, accuracy, log loss, one-vs-rest ROC
 * AUC), each as scikit-learn computes it (nn.h says how, tests/gen_metrics_fixtures.py checks).
 */
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn_internal.h"
#include "nn_mem.h"

static double ratio(double numerator, double denominator) {
  return denominator > 0 ? numerator / denominator : 0.0;
}

/* Running sums for the support-weighted averages and the accuracy. */
typedef struct metric_sums {
  double precision, recall, f1;
  int64_t total, correct;
} metric_sums;

/* One class's metrics from its counts; added to the sums. */
static nn_class_metrics class_metrics(metric_sums *sums, int64_t true_positive, int64_t predicted,
                                      int64_t support) {
  nn_class_metrics m;
  m.precision = ratio((double)true_positive, (double)predicted);
  m.recall = ratio((double)true_positive, (double)support);
  m.f1 = ratio(2.0 * (double)true_positive, (double)support + (double)predicted);
  m.support = support;
  sums->precision += m.precision * (double)support;
  sums->recall += m.recall * (double)support;
  sums->f1 += m.f1 * (double)support;
  sums->total += support;
  sums->correct += true_positive;
  return m;
}

static void finish(nn_class_metrics *weighted, double *accuracy, const metric_sums *sums) {
  if (weighted) {
    weighted->precision = ratio(sums->precision, (double)sums->total);
    weighted->recall = ratio(sums->recall, (double)sums->total);
    weighted->f1 = ratio(sums->f1, (double)sums->total);
    weighted->support = sums->total;
  }
  if (accuracy) *accuracy = ratio((double)sums->correct, (double)sums->total);
}

void nn_metrics_from_counts(nn_class_metrics *per_class, nn_class_metrics *weighted,
                            double *accuracy, const int64_t *true_positive,
                            const int64_t *predicted, const int64_t *support, int C) {
  metric_sums sums = {0};
  for (int c = 0; c < C; c++) {
    nn_class_metrics m = class_metrics(&sums, true_positive[c], predicted[c], support[c]);
    if (per_class) per_class[c] = m;
  }
  finish(weighted, accuracy, &sums);
}

void nn_metrics_from_confusion(nn_class_metrics *per_class, nn_class_metrics *weighted,
                               double *accuracy, const int64_t *confusion, int C) {
  metric_sums sums = {0};
  for (int c = 0; c < C; c++) {
    int64_t row = 0, column = 0; /* support, predicted */
    for (int k = 0; k < C; k++) {
      row += confusion[(size_t)c * C + k];
      column += confusion[(size_t)k * C + c];
    }
    nn_class_metrics m = class_metrics(&sums, confusion[(size_t)c * C + c], column, row);
    if (per_class) per_class[c] = m;
  }
  finish(weighted, accuracy, &sums);
}

/* ---------------------------------------------------------------- ML.EVALUATE (nn.h) */

typedef struct scored_row {
  double score;
  int positive;
} scored_row;

static int scored_row_descending(const void *pa, const void *pb) {
  const scored_row *a = pa, *b = pb;
  return (a->score < b->score) - (a->score > b->score);
}

/* Area under the ROC curve of rows[0..N) (positives of them positive), as sklearn's
 * auc(roc_curve(...)): the rows sorted by score, descending; each group of tied scores is one
 * threshold, a step from (fp, tp) to (fp + fp_g, tp + tp_g) whose trapezoid is
 * fp_g (tp + tp_g / 2); the sum over P N. (roc_curve's drop_intermediate only removes collinear
 * points: the area is the same.) */
static double roc_auc_of(scored_row *rows, int64_t N, int64_t positives) {
  qsort(rows, (size_t)N, sizeof *rows, scored_row_descending);
  double area = 0.0, tp = 0.0;
  for (int64_t i = 0, j; i < N; i = j) {
    double tp_group = 0.0, fp_group = 0.0;
    for (j = i; j < N && rows[j].score == rows[i].score; j++) {
      if (rows[j].positive) tp_group += 1.0;
      else fp_group += 1.0;
    }
    area += fp_group * (tp + tp_group / 2.0);
    tp += tp_group;
  }
  return area / ((double)positives * (double)(N - positives));
}

int nn_metrics_evaluate(nn_evaluation *out, const int *y_true, const float *probs, int64_t N, int C,
                        nn_interrupt_fn stop, void *stop_ctx, const nn_allocator *mem, char *err) {
  memset(out, 0, sizeof *out);
  out->roc_auc = NAN;
  if (N < 1 || C < 2) {
    snprintf(err, NN_ERR_LEN,
             "metrics: need at least 1 row and 2 classes, got %lld rows, %d classes", (long long)N,
             C);
    return NN_ERROR;
  }
  for (int64_t i = 0; i < N; i++) {
    if (y_true[i] < 0 || y_true[i] >= C) {
      snprintf(err, NN_ERR_LEN, "metrics: class id %d of row %lld is outside 0..%d", y_true[i],
               (long long)i + 1, C - 1);
      return NN_ERROR;
    }
    for (int c = 0; c < C; c++) {
      float p = probs[(size_t)i * C + c];
      if (!(p >= 0.0f) || !isfinite(p)) {
        snprintf(err, NN_ERR_LEN,
                 "metrics: probability %g of row %lld, class %d is not a "
                 "finite number >= 0",
                 (double)p, (long long)i + 1, c);
        return NN_ERROR;
      }
    }
  }
  int64_t *counts = nn_mem_calloc(mem, (size_t)C * 3, sizeof *counts);
  nn_class_metrics *per_class = nn_mem_alloc(mem, (size_t)C * sizeof *per_class);
  scored_row *rows = nn_mem_alloc(mem, (size_t)N * sizeof *rows);
  if (!counts || !per_class || !rows) {
    nn_mem_free(mem, counts);
    nn_mem_free(mem, per_class);
    nn_mem_free(mem, rows);
    snprintf(err, NN_ERR_LEN, "metrics: out of memory for %lld rows and %d classes", (long long)N,
             C);
    return NN_NOMEM;
  }
  int64_t *true_positive = counts, *predicted = counts + C, *support = counts + 2 * C;
  const double eps = DBL_EPSILON; /* np.finfo(np.float64).eps */
  double loss = 0.0;
  for (int64_t i = 0; i < N; i++) {
    const float *p = probs + (size_t)i * C;
    int best = 0, y = y_true[i];
    double sum = 0.0;
    for (int c = 0; c < C; c++) {
      if (p[c] > p[best]) best = c; /* first maximum, as argmax */
      double clipped = (double)p[c] < eps         ? eps
                       : (double)p[c] > 1.0 - eps ? 1.0 - eps
                                                  : (double)p[c];
      sum += clipped;
    }
    double py = (double)p[y] < eps ? eps : (double)p[y] > 1.0 - eps ? 1.0 - eps : (double)p[y];
    loss -= log(py / sum);
    predicted[best]++;
    support[y]++;
    true_positive[best] += best == y;
  }
  out->rows = N;
  out->log_loss = loss / (double)N;
  nn_class_metrics weighted;
  nn_metrics_from_counts(per_class, &weighted, &out->accuracy, true_positive, predicted, support,
                         C);
  out->weighted_precision = weighted.precision;
  out->weighted_recall = weighted.recall;
  out->weighted_f1 = weighted.f1;
  int labels = 0; /* sklearn's default labels: the classes in y_true or y_pred */
  for (int c = 0; c < C; c++) {
    if (support[c] == 0 && predicted[c] == 0) continue;
    labels++;
    out->macro_precision += per_class[c].precision;
    out->macro_recall += per_class[c].recall;
    out->macro_f1 += per_class[c].f1;
  }
  out->macro_precision /= labels; /* labels >= 1: every row has a true class */
  out->macro_recall /= labels;
  out->macro_f1 /= labels;

  int status = NN_OK;
  double auc_sum = 0.0;
  for (int c = C == 2 ? 1 : 0; c < C; c++) { /* two classes: class 1's AUC (the binary case) */
    if (support[c] == 0 || support[c] == N) continue; /* no AUC: one kind of row only */
    if (stop && stop(stop_ctx)) {
      snprintf(err, NN_ERR_LEN, "interrupted");
      status = NN_INTERRUPTED;
      break;
    }
    for (int64_t i = 0; i < N; i++) {
      rows[i].score = (double)probs[(size_t)i * C + c];
      rows[i].positive = y_true[i] == c;
    }
    auc_sum += roc_auc_of(rows, N, support[c]);
    out->roc_auc_classes++;
  }
  if (out->roc_auc_classes > 0) out->roc_auc = auc_sum / out->roc_auc_classes;
  nn_mem_free(mem, counts);
  nn_mem_free(mem, per_class);
  nn_mem_free(mem, rows);
  if (status != NN_OK) {
    nn_evaluation none;
    memset(&none, 0, sizeof none);
    *out = none;
    out->roc_auc = NAN;
  }
  return status;
}

/* ---------------------------------------------------------------- better by the monitor */

double nn_monitor_figure(nn_monitor monitor, const nn_figures *f) {
  switch (monitor) {
  case NN_MONITOR_VAL_F1: return f->f1;
  case NN_MONITOR_VAL_ACCURACY: return f->accuracy;
  default: return f->loss;
  }
}

int nn_monitor_tie(nn_monitor monitor, const nn_figures *a, const nn_figures *b) {
  int rate = monitor == NN_MONITOR_VAL_F1 || monitor == NN_MONITOR_VAL_ACCURACY;
  return rate && nn_monitor_figure(monitor, a) == nn_monitor_figure(monitor, b);
}

int nn_monitor_better(nn_monitor monitor, const nn_figures *a, const nn_figures *b) {
  double x = nn_monitor_figure(monitor, a), y = nn_monitor_figure(monitor, b);
  if (isnan(x)) return 0;
  if (isnan(y)) return 1;
  if (nn_monitor_tie(monitor, a, b)) return a->loss < b->loss; /* a NaN loss breaks no tie */
  return monitor == NN_MONITOR_VAL_F1 || monitor == NN_MONITOR_VAL_ACCURACY ? x > y : x < y;
}
