/* test_metrics.c -- nn_metrics_from_confusion (and the trainer's nn_metrics_from_counts) on
 * confusion matrices checked by hand against sklearn's definitions (zero_division=0):
 * a class never predicted, a class with no rows, everything predicted as one class, a perfect
 * classifier and an empty matrix. */
#include "check.h"
#include "metrics.h"
#include "nn.h"

static void check_class(const nn_class_metrics *got, double p, double r, double f1, int64_t support,
                        const char *what) {
  char name[128];
  snprintf(name, sizeof name, "%s precision", what);
  CHECK_CLOSE(got->precision, p, 1e-12, 1e-15, name);
  snprintf(name, sizeof name, "%s recall", what);
  CHECK_CLOSE(got->recall, r, 1e-12, 1e-15, name);
  snprintf(name, sizeof name, "%s f1", what);
  CHECK_CLOSE(got->f1, f1, 1e-12, 1e-15, name);
  CHECK(got->support == support, "%s support: got %lld expected %lld", what,
        (long long)got->support, (long long)support);
}

int main(void) {
  nn_class_metrics per[4], weighted;
  double accuracy;

  /* rows = actual, columns = predicted.
   *      p0 p1 p2 p3
   *  a0:  3  1  0  0   P 3/4  R 3/4  F1 3/4
   *  a1:  1  2  0  1   P 2/5  R 2/4  F1 2*2/(4+5) = 4/9
   *  a2:  0  2  0  0   never predicted: P 0 (undefined), R 0, F1 0
   *  a3:  0  0  0  0   no rows, predicted once: P 0/1 = 0, R 0 (undefined), F1 0
   * weighted by support (4, 4, 2, 0) over 10 rows: P (3 + 1.6)/10 = 0.46, R 0.5,
   * F1 (3 + 16/9)/10 = 43/90; accuracy 5/10. */
  const int64_t cm4[16] = {3, 1, 0, 0, 1, 2, 0, 1, 0, 2, 0, 0, 0, 0, 0, 0};
  nn_metrics_from_confusion(per, &weighted, &accuracy, cm4, 4);
  check_class(&per[0], 0.75, 0.75, 0.75, 4, "4x4 class 0");
  check_class(&per[1], 0.4, 0.5, 4.0 / 9.0, 4, "4x4 class 1");
  check_class(&per[2], 0, 0, 0, 2, "4x4 class 2 (never predicted)");
  check_class(&per[3], 0, 0, 0, 0, "4x4 class 3 (no rows)");
  check_class(&weighted, 0.46, 0.5, 43.0 / 90.0, 10, "4x4 weighted");
  CHECK_CLOSE(accuracy, 0.5, 1e-12, 1e-15, "4x4 accuracy");

  /* the same from per-class counts, as the trainer computes them */
  const int64_t tp[4] = {3, 2, 0, 0}, predicted[4] = {4, 5, 0, 1}, support[4] = {4, 4, 2, 0};
  nn_class_metrics per2[4], weighted2;
  double accuracy2;
  nn_metrics_from_counts(per2, &weighted2, &accuracy2, tp, predicted, support, 4);
  for (int c = 0; c < 4; c++) {
    CHECK(per2[c].precision == per[c].precision && per2[c].recall == per[c].recall &&
              per2[c].f1 == per[c].f1 && per2[c].support == per[c].support,
          "counts vs confusion differ for class %d", c);
  }
  check_class(&weighted2, 0.46, 0.5, 43.0 / 90.0, 10, "counts weighted");
  CHECK(accuracy2 == accuracy, "counts accuracy %g vs %g", accuracy2, accuracy);
  nn_metrics_from_counts(NULL, &weighted2, NULL, tp, predicted, support, 4); /* NULLs allowed */
  CHECK_CLOSE(weighted2.f1, 43.0 / 90.0, 1e-12, 1e-15, "counts weighted f1 (per_class NULL)");

  /* everything predicted as class 0:
   *  a0: 4 0   P 4/10  R 1  F1 8/14
   *  a1: 6 0   P 0     R 0  F1 0
   * weighted: P 0.4*4/10 = 0.16, R 0.4, F1 (8/14)*4/10; accuracy 0.4 */
  const int64_t cm_one[4] = {4, 0, 6, 0};
  nn_metrics_from_confusion(per, &weighted, &accuracy, cm_one, 2);
  check_class(&per[0], 0.4, 1.0, 8.0 / 14.0, 4, "one-class class 0");
  check_class(&per[1], 0, 0, 0, 6, "one-class class 1");
  check_class(&weighted, 0.16, 0.4, 8.0 / 14.0 * 0.4, 10, "one-class weighted");
  CHECK_CLOSE(accuracy, 0.4, 1e-12, 1e-15, "one-class accuracy");

  /* perfect */
  const int64_t cm_perfect[9] = {5, 0, 0, 0, 3, 0, 0, 0, 7};
  nn_metrics_from_confusion(per, &weighted, &accuracy, cm_perfect, 3);
  for (int c = 0; c < 3; c++) check_class(&per[c], 1, 1, 1, cm_perfect[c * 4], "perfect class");
  check_class(&weighted, 1, 1, 1, 15, "perfect weighted");
  CHECK(accuracy == 1.0, "perfect accuracy %g", accuracy);

  /* no rows at all: everything 0, nothing divides by zero */
  const int64_t cm_zero[4] = {0, 0, 0, 0};
  nn_metrics_from_confusion(per, &weighted, &accuracy, cm_zero, 2);
  check_class(&per[0], 0, 0, 0, 0, "empty class 0");
  check_class(&weighted, 0, 0, 0, 0, "empty weighted");
  CHECK(accuracy == 0.0, "empty accuracy %g", accuracy);

  return check_finish("test_metrics");
}
