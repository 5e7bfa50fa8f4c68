/* metrics.c -- precision, recall, F1, support and accuracy, as sklearn reports them.
 *
 * For each class c (sklearn.metrics.classification_report with zero_division=0):
 *   precision = TP / (TP + FP)        0 when nothing was predicted c
 *   recall    = TP / (TP + FN)        0 when class c has no rows
 *   f1        = 2 TP / (2 TP + FP + FN)  (= 2 P R / (P + R)); 0 when undefined
 * "weighted" averages each of them with the class supports as weights (sklearn's
 * average="weighted"); its support is the total. accuracy = trace / total (0 for no rows).
 */
#include <stddef.h>
#include <string.h>

#include "metrics.h"

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
