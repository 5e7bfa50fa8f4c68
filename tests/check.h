/* check.h -- the tiny assertion kit of attnext's C tests.
 * Each CHECK prints what it compared; a failed check marks the test failed (exit 1) but the
 * test goes on, so one run shows every mismatch. CHECK_CLOSE compares with a relative error.
 * Exit 77 (test_skip) means the test could not run on this machine, with the reason. */
#ifndef ATTNEXT_CHECK_H
#define ATTNEXT_CHECK_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int check_failures = 0, check_count = 0;

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    check_count++;                                                                                 \
    if (!(cond)) {                                                                                 \
      check_failures++;                                                                            \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                              \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
    }                                                                                              \
  } while (0)

/* |a - b| <= tol * max(1, |a|, |b|) would hide small-value errors; we use
 * |a - b| <= atol + rtol * |b| and report the relative error. */
static inline double check_rel_err(double a, double b, double atol) {
  double d = fabs(a - b), s = fabs(b);
  return d <= atol ? 0.0 : d / (s > atol ? s : atol);
}
#define CHECK_CLOSE(a, b, rtol, atol, what)                                                        \
  do {                                                                                             \
    double check_a_ = (a), check_b_ = (b);                                                         \
    double check_e_ = check_rel_err(check_a_, check_b_, (atol));                                   \
    CHECK(check_e_ <= (rtol), "%s: got %.9g expected %.9g (rel err %.3g > %.3g)", what, check_a_,  \
          check_b_, check_e_, (double)(rtol));                                                     \
  } while (0)

static inline int check_finish(const char *name) {
  printf("%s: %d checks, %d failed\n", name, check_count, check_failures);
  return check_failures ? 1 : 0;
}
static inline int test_skip(const char *why) {
  printf("skipped: %s\n", why);
  return 77;
}
#endif
