/* curve.c -- ROC and precision-recall points of one class against the rest (attn_curve,
 * attn_curve_svg), as scikit-learn computes them.
 *
 * sklearn's roc_curve and precision_recall_curve are both made of _binary_clf_curve: the rows
 * sorted by score, descending; one point per distinct score t (a threshold: the class is
 * predicted when its probability >= t) with tp(t), fp(t) = the positive and negative rows
 * scoring >= t. roc_curve(y == c, p[:, c], drop_intermediate=False) is (fp / negatives,
 * tp / positives) at these thresholds with (0, 0) put first; precision_recall_curve is
 * (tp / (tp + fp), tp / positives) at the same thresholds in reverse, with (1, 0) put last.
 * nn_curve_class makes the points; the areas follow sklearn's roc_auc_score and
 * average_precision_score on them.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "nn_internal.h"

static int point_descending(const void *pa, const void *pb) {
  const nn_curve_point *a = pa, *b = pb;
  return (a->threshold < b->threshold) - (a->threshold > b->threshold);
}

int nn_curve_class(nn_curve_point *points, int64_t *npoints, int64_t *positives, const float *probs,
                   const int *y_true, int64_t N, int C, int c, char *err) {
  *npoints = 0;
  *positives = 0;
  if (N < 0 || C < 1 || c < 0 || c >= C) {
    snprintf(err, NN_ERR_LEN, "curve: class %d of %d classes and %lld rows", c, C, (long long)N);
    return NN_ERROR;
  }
  for (int64_t i = 0; i < N; i++) {
    float p = probs[(size_t)i * C + c];
    if (!isfinite(p)) { /* a total order is needed to sort; softmax gives none of these */
      snprintf(err, NN_ERR_LEN,
               "the model's probability of class %d for row %lld is %s, not a "
               "finite number (its weights overflow)",
               c, (long long)i + 1,
               isnan(p) ? "NaN"
               : p > 0  ? "Inf"
                        : "-Inf");
      return NN_ERROR;
    }
    int positive = y_true[i] == c;
    points[i].threshold = (double)p;
    points[i].tp = positive;
    points[i].fp = !positive;
  }
  qsort(points, (size_t)N, sizeof *points, point_descending);
  /* In place: the k-th point is written at or before the first row of its group. */
  int64_t k = 0, tp = 0, fp = 0;
  for (int64_t i = 0, j; i < N; i = j) {
    double t = points[i].threshold;
    for (j = i; j < N && points[j].threshold == t; j++) {
      tp += points[j].tp;
      fp += points[j].fp;
    }
    points[k].threshold = t;
    points[k].tp = tp;
    points[k].fp = fp;
    k++;
  }
  *npoints = k;
  *positives = tp;
  return NN_OK;
}

void nn_curve_at(const nn_curve_point *points, int64_t n, double t, int64_t *tp, int64_t *fp) {
  /* the last point whose threshold is >= t (thresholds descend) */
  int64_t lo = 0, hi = n; /* points[0..lo) are >= t, points[hi..n) are < t */
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (points[mid].threshold >= t) lo = mid + 1;
    else hi = mid;
  }
  *tp = lo > 0 ? points[lo - 1].tp : 0;
  *fp = lo > 0 ? points[lo - 1].fp : 0;
}

double nn_curve_roc_auc(const nn_curve_point *points, int64_t n) {
  if (n < 1) return NAN;
  double P = (double)points[n - 1].tp, Nn = (double)points[n - 1].fp;
  if (!(P > 0) || !(Nn > 0)) return NAN;
  double area = 0.0, tp0 = 0.0, fp0 = 0.0; /* trapezoids from (0, 0), as sklearn's auc() */
  for (int64_t k = 0; k < n; k++) {
    double tp = (double)points[k].tp, fp = (double)points[k].fp;
    area += (fp - fp0) * (tp + tp0) / 2.0;
    tp0 = tp, fp0 = fp;
  }
  return area / (P * Nn);
}

double nn_curve_average_precision(const nn_curve_point *points, int64_t n) {
  if (n < 1) return NAN;
  double P = (double)points[n - 1].tp;
  if (!(P > 0)) return NAN;
  double ap = 0.0, recall0 = 0.0; /* sum of (R_k - R_k-1) P_k, thresholds descending */
  for (int64_t k = 0; k < n; k++) {
    double tp = (double)points[k].tp, recall = tp / P;
    ap += (recall - recall0) * (tp / (double)(points[k].tp + points[k].fp));
    recall0 = recall;
  }
  return ap;
}
