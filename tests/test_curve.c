/* test_curve.c -- nn_curve_class, nn_curve_at and the areas (engine/curve.c: attn_curve and
 * attn_curve_svg) against scikit-learn's roc_curve, precision_recall_curve, roc_auc_score and
 * average_precision_score in tests/fixtures/curve/ (tests/gen_curve_fixtures.py: random scores,
 * tied scores, binary, classes absent from y_true, probabilities of 0 and 1, one prediction).
 * For each class the points must be sklearn's exactly: every threshold, and the rates and
 * precision computed from the counts as sklearn divides them (bit for bit); the areas to 1e-12.
 * Then by hand: nn_curve_at between and beyond the points, a probability that is not finite
 * (an error naming the row), no rows. */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "nn_internal.h"

#define CURVE_DIR "tests/fixtures/curve"

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

static double at(const nn_st_tensor *t, int64_t row, int col) {
  double v;
  memcpy(&v, t->data + 8 * (row * t->shape[1] + col), 8);
  return v;
}

/* Two doubles equal, NaN equal to NaN. */
static int same(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

static void check_fixture(const char *path, int64_t *points_checked) {
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
                     *ta = nn_st_find(&f, "areas");
  CHECK(ty && tp && ta && tp->ndim == 2 && ta->ndim == 2, "%s: y_true, probs, areas", path);
  if (!(ty && tp && ta && tp->ndim == 2)) goto done;
  int64_t N = tp->shape[0];
  int C = (int)tp->shape[1];
  int *y = malloc((size_t)N * sizeof *y);
  float *probs = malloc((size_t)N * C * sizeof *probs);
  nn_curve_point *points = malloc((size_t)N * sizeof *points);
  for (int64_t i = 0; i < N; i++) {
    int64_t v;
    memcpy(&v, ty->data + 8 * i, 8);
    y[i] = (int)v;
  }
  memcpy(probs, tp->data, (size_t)N * C * sizeof *probs);
  double worst_area = 0;
  for (int c = 0; c < C; c++) {
    char name[32];
    snprintf(name, sizeof name, "roc_%d", c);
    const nn_st_tensor *roc = nn_st_find(&f, name);
    snprintf(name, sizeof name, "pr_%d", c);
    const nn_st_tensor *pr = nn_st_find(&f, name);
    CHECK(roc && pr, "%s: roc_%d, pr_%d", path, c, c);
    if (!roc || !pr) continue;
    int64_t n = 0, P = 0;
    rc = nn_curve_class(points, &n, &P, probs, y, N, C, c, err);
    CHECK(rc == NN_OK, "%s class %d: %s", path, c, err);
    int64_t K = roc->shape[0] - 1, Nn = N - P;
    CHECK(n == K && pr->shape[0] == K + 1, "%s class %d: %lld points, sklearn %lld", path, c,
          (long long)n, (long long)K);
    if (n != K) continue;
    int bad = 0;
    for (int64_t k = 0; k < n; k++) {
      const nn_curve_point *p = &points[k];
      /* roc_curve: row k + 1 (row 0 is its added (0, 0)); sklearn divides the counts as
       * float64 by the totals, NaN without positives / negatives */
      double fpr = Nn > 0 ? (double)p->fp / (double)Nn : NAN;
      double tpr = P > 0 ? (double)p->tp / (double)P : NAN;
      int ok = same(at(roc, k + 1, 2), p->threshold) && same(at(roc, k + 1, 0), fpr) &&
               same(at(roc, k + 1, 1), tpr);
      /* precision_recall_curve: reversed; recall 1 without positives (sklearn's warning) */
      int64_t r = n - 1 - k;
      double precision = (double)p->tp / (double)(p->tp + p->fp);
      double recall = P > 0 ? (double)p->tp / (double)P : 1.0;
      ok &= same(at(pr, r, 2), p->threshold) && same(at(pr, r, 0), precision) &&
            same(at(pr, r, 1), recall);
      if (k > 0) ok &= p->threshold < points[k - 1].threshold;
      if (!ok && bad++ < 3)
        fprintf(stderr,
                "  %s class %d point %lld: threshold %.9g tp %lld fp %lld vs sklearn "
                "roc (%.17g, %.17g, %.9g) pr (%.17g, %.17g, %.9g)\n",
                path, c, (long long)k, p->threshold, (long long)p->tp, (long long)p->fp,
                at(roc, k + 1, 0), at(roc, k + 1, 1), at(roc, k + 1, 2), at(pr, r, 0), at(pr, r, 1),
                at(pr, r, 2));
    }
    CHECK(bad == 0, "%s class %d: %d of %lld points differ from sklearn's", path, c, bad,
          (long long)n);
    CHECK(at(pr, K, 0) == 1.0 && at(pr, K, 1) == 0.0,
          "%s class %d: sklearn's last PR point "
          "(1, 0), which attn_curve leaves out",
          path, c);
    CHECK(P + Nn == N && (n == 0 || (points[n - 1].tp == P && points[n - 1].fp == Nn)),
          "%s class %d: the last point counts every row", path, c);
    *points_checked += n;
    double auc = nn_curve_roc_auc(points, n), ap = nn_curve_average_precision(points, n);
    double want_auc = at(ta, c, 0), want_ap = at(ta, c, 1);
    CHECK(isnan(want_auc) ? isnan(auc) : fabs(auc - want_auc) <= 1e-12,
          "%s class %d: AUC %.17g, sklearn %.17g", path, c, auc, want_auc);
    CHECK(isnan(want_ap) ? isnan(ap) : fabs(ap - want_ap) <= 1e-12,
          "%s class %d: average precision %.17g, sklearn %.17g", path, c, ap, want_ap);
    if (!isnan(want_auc) && fabs(auc - want_auc) > worst_area) worst_area = fabs(auc - want_auc);
    if (!isnan(want_ap) && fabs(ap - want_ap) > worst_area) worst_area = fabs(ap - want_ap);
  }
  printf("%-52s N=%lld C=%d: every point equal to sklearn's, areas within %.3g\n", path,
         (long long)N, C, worst_area);
  free(y);
  free(probs);
  free(points);
done:
  nn_st_free(&f);
  free(blob);
}

static void check_by_hand(void) {
  /* 6 rows, class 1 against the rest: scores 0.9 (pos), 0.7 (neg), 0.7 (pos), 0.4 (neg),
   * 0.2 (pos), 0.2 (neg) */
  int y[6] = {1, 0, 1, 0, 1, 0};
  float probs[12] = {0.1f, 0.9f, 0.3f, 0.7f, 0.3f, 0.7f, 0.6f, 0.4f, 0.8f, 0.2f, 0.8f, 0.2f};
  nn_curve_point points[6];
  int64_t n, P;
  char err[NN_ERR_LEN] = "";
  CHECK(nn_curve_class(points, &n, &P, probs, y, 6, 2, 1, err) == NN_OK, "by hand: %s", err);
  CHECK(n == 4 && P == 3, "by hand: %lld points, %lld positives", (long long)n, (long long)P);
  const double t[4] = {0.9f, 0.7f, 0.4f, 0.2f};
  const int64_t tp[4] = {1, 2, 2, 3}, fp[4] = {0, 1, 2, 3};
  for (int k = 0; k < 4 && n == 4; k++)
    CHECK(points[k].threshold == t[k] && points[k].tp == tp[k] && points[k].fp == fp[k],
          "by hand point %d: %g %lld %lld", k, points[k].threshold, (long long)points[k].tp,
          (long long)points[k].fp);
  struct {
    double t;
    int64_t tp, fp;
  } q[] = {{1.0, 0, 0},  {0.95, 0, 0}, {0.9f, 1, 0}, {0.8, 1, 0},
           {0.7f, 2, 1}, {0.5, 2, 1},  {0.2f, 3, 3}, {0.0, 3, 3}};
  for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
    int64_t a, b;
    nn_curve_at(points, n, q[i].t, &a, &b);
    CHECK(a == q[i].tp && b == q[i].fp, "nn_curve_at(%g) = %lld, %lld; want %lld, %lld", q[i].t,
          (long long)a, (long long)b, (long long)q[i].tp, (long long)q[i].fp);
  }
  /* AUC by hand: pairs (pos, neg) ordered right: 0.9 > all 3; 0.7 > 0.4, 0.2, ties 0.7 (1/2);
   * 0.2 ties 0.2 (1/2): (3 + 2.5 + 0.5) / 9 */
  CHECK_CLOSE(nn_curve_roc_auc(points, n), 6.0 / 9.0, 1e-15, 0, "AUC by hand");
  /* AP: recall steps 1/3 at precision 1, 1/3 at 2/3, 1/3 at 3/6 */
  CHECK_CLOSE(nn_curve_average_precision(points, n), (1.0 + 2.0 / 3 + 0.5) / 3, 1e-15, 0,
              "average precision by hand");
  /* a probability that is not finite: an error naming the row; no rows: no points */
  probs[5] = NAN;
  CHECK(nn_curve_class(points, &n, &P, probs, y, 6, 2, 1, err) == NN_ERROR &&
            strstr(err, "row 3") != NULL,
        "NaN probability: %s", err);
  probs[5] = INFINITY;
  CHECK(nn_curve_class(points, &n, &P, probs, y, 6, 2, 1, err) == NN_ERROR, "Inf: %s", err);
  CHECK(nn_curve_class(points, &n, &P, probs, y, 0, 2, 1, err) == NN_OK && n == 0 && P == 0,
        "no rows: %lld points", (long long)n);
  CHECK(isnan(nn_curve_roc_auc(points, 0)) && isnan(nn_curve_average_precision(points, 0)),
        "no rows: no areas");
  CHECK(nn_curve_class(points, &n, &P, probs, y, 6, 2, 2, err) == NN_ERROR, "class 2 of 2: %s",
        err);
}

int main(void) {
  DIR *dir = opendir(CURVE_DIR);
  CHECK(dir != NULL, "cannot open %s (run from the repository root)", CURVE_DIR);
  int files = 0;
  int64_t points = 0;
  if (dir) {
    struct dirent *d;
    while ((d = readdir(dir)) != NULL) {
      size_t n = strlen(d->d_name);
      if (n <= 12 || strcmp(d->d_name + n - 12, ".safetensors") != 0) continue;
      char path[512];
      snprintf(path, sizeof path, "%s/%s", CURVE_DIR, d->d_name);
      check_fixture(path, &points);
      files++;
    }
    closedir(dir);
  }
  CHECK(files >= 6, "%d curve fixtures, expected 6 (run tests/gen_curve_fixtures.py)", files);
  printf("nn_curve_class vs scikit-learn: %d fixtures, %lld points, each equal\n", files,
         (long long)points);
  check_by_hand();
  return check_finish("test_curve");
}
