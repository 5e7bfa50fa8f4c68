/* test_metrics.c -- nn_metrics_from_confusion (and the trainer's nn_metrics_from_counts) on
 * confusion matrices checked by hand against sklearn's definitions (zero_division=0):
 * a class never predicted, a class with no rows, everything predicted as one class, a perfect
 * classifier and an empty matrix.
 * nn_metrics_evaluate (attn_metrics, ML.EVALUATE's figures) against scikit-learn's values in
 * tests/fixtures/metrics/ (tests/gen_metrics_fixtures.py: random scores, tied scores, binary,
 * classes absent from y_true, probabilities of 0 and 1, one predicted class), to 1e-6 absolute;
 * an AUC that no class has is NaN; bad input is an error naming the row.
 * nn_monitor_better: which figures are better under each monitor, its tie and NaN rules. */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "nn_internal.h"

#define METRICS_DIR "tests/fixtures/metrics"
#define METRICS_TOL 1e-6

static unsigned char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *buf = n > 0 ? malloc((size_t)n) : NULL;
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  *len = buf ? (size_t)n : 0;
  return buf;
}

/* One fixture: y_true (N) I64, probs (N, C) F32, expected (10) F64 in nn_evaluation's order. */
static void check_fixture(const char *path, double *worst) {
  size_t len = 0;
  unsigned char *blob = read_all(path, &len);
  CHECK(blob != NULL, "cannot read %s", path);
  if (!blob) return;
  nn_st_file f;
  char err[NN_ERR_LEN] = "";
  int rc = nn_st_parse(&f, blob, len, NULL, err);
  CHECK(rc == NN_OK, "%s: %s", path, err);
  if (rc != NN_OK) {
    free(blob);
    return;
  }
  const nn_st_tensor *ty = nn_st_find(&f, "y_true"), *tp = nn_st_find(&f, "probs"),
                     *te = nn_st_find(&f, "expected");
  CHECK(ty && tp && te && ty->dtype == NN_DTYPE_I64 && tp->dtype == NN_DTYPE_F32 &&
            te->dtype == NN_DTYPE_F64 && tp->ndim == 2 && te->shape[0] == 10,
        "%s: tensors y_true, probs, expected", path);
  if (ty && tp && te && tp->ndim == 2) {
    int64_t N = tp->shape[0];
    int C = (int)tp->shape[1];
    int *y = malloc((size_t)N * sizeof *y);
    float *probs = malloc((size_t)N * C * sizeof *probs);
    double expected[10];
    for (int64_t i = 0; i < N; i++) {
      int64_t v;
      memcpy(&v, ty->data + 8 * i, 8);
      y[i] = (int)v;
    }
    memcpy(probs, tp->data, (size_t)N * C * sizeof *probs);
    memcpy(expected, te->data, sizeof expected);
    nn_evaluation e;
    rc = nn_metrics_evaluate(&e, y, probs, N, C, NULL, NULL, NULL, err);
    CHECK(rc == NN_OK, "%s: %s", path, err);
    const double got[10] = {e.accuracy,
                            e.macro_precision,
                            e.macro_recall,
                            e.macro_f1,
                            e.weighted_precision,
                            e.weighted_recall,
                            e.weighted_f1,
                            e.log_loss,
                            e.roc_auc,
                            (double)e.roc_auc_classes};
    static const char *names[10] = {
        "accuracy",        "macro_precision", "macro_recall", "macro_f1", "weighted_precision",
        "weighted_recall", "weighted_f1",     "log_loss",     "roc_auc",  "roc_auc_classes"};
    double case_worst = 0;
    for (int k = 0; k < 10; k++) {
      if (isnan(expected[k])) {
        CHECK(isnan(got[k]), "%s: %s = %.17g, sklearn has none (NaN)", path, names[k], got[k]);
        continue;
      }
      double d = fabs(got[k] - expected[k]);
      if (d > case_worst) case_worst = d;
      CHECK(d <= METRICS_TOL, "%s: %s = %.17g, sklearn %.17g (|diff| %.3g)", path, names[k], got[k],
            expected[k], d);
    }
    printf("%-50s N=%lld C=%d: max |engine - sklearn| %.3g over 10 figures (roc_auc over %d "
           "classes)\n",
           path, (long long)N, C, case_worst, e.roc_auc_classes);
    if (case_worst > *worst) *worst = case_worst;
    CHECK(e.rows == N, "rows %lld", (long long)e.rows);
    free(y);
    free(probs);
  }
  nn_st_free(&f);
  free(blob);
}

static int stop_now(void *ctx) {
  (void)ctx;
  return 1;
}

static void check_evaluate(void) {
  DIR *dir = opendir(METRICS_DIR);
  CHECK(dir != NULL, "cannot open %s (run from the repository root)", METRICS_DIR);
  int files = 0;
  double worst = 0;
  if (dir) {
    struct dirent *d;
    while ((d = readdir(dir)) != NULL) {
      size_t n = strlen(d->d_name);
      if (n <= 12 || strcmp(d->d_name + n - 12, ".safetensors") != 0) continue;
      char path[512];
      snprintf(path, sizeof path, "%s/%s", METRICS_DIR, d->d_name);
      check_fixture(path, &worst);
      files++;
    }
    closedir(dir);
  }
  CHECK(files >= 6, "%d metrics fixtures, expected 6 (run tests/gen_metrics_fixtures.py)", files);
  printf("nn_metrics_evaluate vs scikit-learn: %d fixtures, max |diff| %.3g (tolerance %g)\n",
         files, worst, METRICS_TOL);

  /* every row of one class: no class has an AUC (sklearn raises); the rest is defined */
  int y_one[4] = {1, 1, 1, 1};
  float p_one[12] = {0.2f, 0.7f, 0.1f, 0.5f, 0.4f, 0.1f, 0.1f, 0.8f, 0.1f, 0.3f, 0.3f, 0.4f};
  nn_evaluation e;
  char err[NN_ERR_LEN] = "";
  CHECK(nn_metrics_evaluate(&e, y_one, p_one, 4, 3, NULL, NULL, NULL, err) == NN_OK,
        "one class: %s", err);
  CHECK(isnan(e.roc_auc) && e.roc_auc_classes == 0, "one class: roc_auc %g over %d classes",
        e.roc_auc, e.roc_auc_classes);
  CHECK_CLOSE(e.accuracy, 0.5, 1e-12, 0, "one class accuracy");
  /* log loss by hand: rows 0 and 2 give -log 0.7 and -log 0.8 ... */
  double ll = -(log(0.7f) + log(0.4f) + log(0.8f) + log(0.3f)) / 4;
  CHECK_CLOSE(e.log_loss, ll, 1e-6, 1e-9, "one class log loss");
  /* errors, naming the row */
  int y_bad[2] = {0, 3};
  float p_bad[4] = {0.5f, 0.5f, 0.5f, 0.5f};
  CHECK(nn_metrics_evaluate(&e, y_bad, p_bad, 2, 2, NULL, NULL, NULL, err) == NN_ERROR &&
            strcmp(err, "metrics: class id 3 of row 2 is outside 0..1") == 0,
        "bad class: %s", err);
  int y_ok[2] = {0, 1};
  p_bad[3] = NAN;
  CHECK(nn_metrics_evaluate(&e, y_ok, p_bad, 2, 2, NULL, NULL, NULL, err) == NN_ERROR &&
            strcmp(err, "metrics: probability nan of row 2, class 1 is not a finite number >= 0") ==
                0,
        "NaN probability: %s", err);
  p_bad[3] = -0.25f;
  CHECK(nn_metrics_evaluate(&e, y_ok, p_bad, 2, 2, NULL, NULL, NULL, err) == NN_ERROR, "negative");
  CHECK(nn_metrics_evaluate(&e, y_ok, p_bad, 0, 2, NULL, NULL, NULL, err) == NN_ERROR &&
            strcmp(err, "metrics: need at least 1 row and 2 classes, got 0 rows, 2 classes") == 0,
        "no rows: %s", err);
  p_bad[3] = 0.5f;
  CHECK(nn_metrics_evaluate(&e, y_ok, p_bad, 2, 2, stop_now, NULL, NULL, err) == NN_INTERRUPTED &&
            strcmp(err, "interrupted") == 0,
        "interrupt: %s", err);
}

/* nn_monitor_better, the rule of the best epoch, "deploy": "if_better" and attn_tune's choice:
 * strictly better on the monitored figure; an equal F1 or accuracy wins with a lower loss; NaN
 * is never better, and a number is better than NaN. */
static void check_monitor_better(void) {
  static const struct {
    nn_monitor monitor;
    nn_figures a, b;
    int better, tie;
    const char *what;
  } cases[] = {
      {NN_MONITOR_VAL_LOSS, {0.4, 0.5, 0.5}, {0.5, 0.9, 0.9}, 1, 0, "a lower loss"},
      {NN_MONITOR_VAL_LOSS, {0.5, 0.9, 0.9}, {0.5, 0.1, 0.1}, 0, 0, "an equal loss"},
      {NN_MONITOR_VAL_LOSS, {0.6, 0.9, 0.9}, {0.5, 0.1, 0.1}, 0, 0, "a higher loss"},
      {NN_MONITOR_VAL_F1, {0.9, 0.5, 0.8}, {0.1, 0.9, 0.7}, 1, 0, "a higher F1"},
      {NN_MONITOR_VAL_F1, {0.1, 0.9, 0.7}, {0.9, 0.5, 0.8}, 0, 0, "a lower F1"},
      {NN_MONITOR_VAL_F1, {0.4, 0.5, 0.8}, {0.5, 0.5, 0.8}, 1, 1, "an equal F1, a lower loss"},
      {NN_MONITOR_VAL_F1, {0.5, 0.5, 0.8}, {0.5, 0.5, 0.8}, 0, 1, "equal figures"},
      {NN_MONITOR_VAL_F1, {0.6, 0.5, 0.8}, {0.5, 0.5, 0.8}, 0, 1, "an equal F1, a higher loss"},
      {NN_MONITOR_VAL_F1, {NAN, 0.5, 0.8}, {0.5, 0.5, 0.8}, 0, 1, "an equal F1, a NaN loss"},
      {NN_MONITOR_VAL_F1, {0.5, 0.5, 0.8}, {NAN, 0.5, 0.8}, 0, 1, "equal F1, other loss NaN"},
      {NN_MONITOR_VAL_ACCURACY, {0.4, 0.7, 0.1}, {0.5, 0.7, 0.9}, 1, 1, "tie, lower loss"},
      {NN_MONITOR_VAL_ACCURACY, {0.9, 0.8, 0.1}, {0.1, 0.7, 0.9}, 1, 0, "a higher accuracy"},
      {NN_MONITOR_VAL_F1, {0.1, 0.5, NAN}, {0.5, 0.5, 0.2}, 0, 0, "a NaN F1"},
      {NN_MONITOR_VAL_F1, {0.5, 0.5, 0.2}, {0.1, 0.5, NAN}, 1, 0, "an F1 against a NaN F1"},
      {NN_MONITOR_VAL_F1, {0.1, 0.5, NAN}, {0.1, 0.5, NAN}, 0, 0, "both F1 NaN"},
      {NN_MONITOR_VAL_LOSS, {NAN, 0.5, 0.5}, {0.5, 0.5, 0.5}, 0, 0, "a NaN loss"},
      {NN_MONITOR_VAL_LOSS, {0.5, 0.5, 0.5}, {NAN, 0.5, 0.5}, 1, 0, "a loss against a NaN loss"},
      {NN_MONITOR_VAL_LOSS, {INFINITY, 0.5, 0.5}, {INFINITY, 0.5, 0.5}, 0, 0, "infinite losses"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int better = nn_monitor_better(cases[i].monitor, &cases[i].a, &cases[i].b);
    int tie = nn_monitor_tie(cases[i].monitor, &cases[i].a, &cases[i].b);
    CHECK(better == cases[i].better && tie == cases[i].tie,
          "monitor %s, %s: better %d (expected %d), tie %d (expected %d)",
          nn_monitor_name(cases[i].monitor), cases[i].what, better, cases[i].better, tie,
          cases[i].tie);
  }
  nn_figures f = {0.25, 0.5, 0.75};
  CHECK(nn_monitor_figure(NN_MONITOR_VAL_LOSS, &f) == 0.25 &&
            nn_monitor_figure(NN_MONITOR_VAL_ACCURACY, &f) == 0.5 &&
            nn_monitor_figure(NN_MONITOR_VAL_F1, &f) == 0.75,
        "nn_monitor_figure reads the loss, the accuracy and the F1");
}

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

  check_evaluate();
  check_monitor_better();
  return check_finish("test_metrics");
}
