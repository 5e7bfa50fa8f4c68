/* test_row_kernels.c -- the CPU backend's own product kernels against sums in double.
 * One-row inference (attn_predict) runs through kernels of the CPU backend rather than
 * OpenBLAS: the small-product paths of sgemm (a row times a matrix, a few dot products). Their
 * vector loops have tails for sizes that are not multiples of 16, 32 or 64, so every shape
 * class is tried here, with beta 0 (the output is not read: it holds NaNs) and beta 1. The
 * AVX-512 copy also multiplies training's matrices itself (blocks of 12 rows by 32 columns, B^T
 * through strips copied on the stack): every form, ragged sizes, padded strides and alpha/beta.
 * Those run only where the CPU has AVX-512 (the kernel level is printed); elsewhere the same
 * checks test OpenBLAS. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "check.h"
#include "nn_internal.h"

/* the tolerance of a float sum of K products against the double one: a few ulps of the sum of
 * the magnitudes */
static double sum_tolerance(const float *a, const float *w, int stride, int K) {
  double mag = 0.0;
  for (int k = 0; k < K; k++) mag += fabs((double)a[k] * w[(size_t)k * stride]);
  return 4.0 * K * 6e-8 * mag + 1e-30;
}

static void fill(float *x, size_t n, nn_rng *rng) {
  for (size_t i = 0; i < n; i++) x[i] = 2.0f * nn_rng_uniform(rng) - 1.0f;
}

/* C (1,N) = a B^T (B (N,K)) and C (M,1) = A b: the dot-product paths of sgemm; and
 * C (1,N) = a B (B (K,N)): the row-times-matrix path */
static void check_sgemm_rows(const nn_backend *be, int K, int N, float beta, nn_rng *rng) {
  float *b = malloc(sizeof(float) * (size_t)K * N), *a = malloc(sizeof(float) * (size_t)K);
  float *c0 = malloc(sizeof(float) * (size_t)N), *c = malloc(sizeof(float) * (size_t)N);
  fill(b, (size_t)K * N, rng);
  fill(a, (size_t)K, rng);
  fill(c0, (size_t)N, rng);
  for (int form = 0; form < 3; form++) {
    for (int j = 0; j < N; j++) c[j] = beta == 0.0f ? NAN : c0[j];
    if (form == 0) /* (1,K) x (N,K)^T */
      be->sgemm(0, 1, 1, N, K, 1.0f, a, K, b, K, beta, c, N);
    else if (form == 1) /* (N,K) x (1,K)^T: N rows of one column each */
      be->sgemm(0, 1, N, 1, K, 1.0f, b, K, a, K, beta, c, 1);
    else /* (1,K) x (K,N) */ be->sgemm(0, 0, 1, N, K, 1.0f, a, K, b, N, beta, c, N);
    int bad = 0;
    for (int j = 0; j < N; j++) {
      double ref = beta * (double)c0[j], tol;
      if (form < 2) {
        for (int k = 0; k < K; k++) ref += (double)a[k] * b[(size_t)j * K + k];
        tol = sum_tolerance(a, b + (size_t)j * K, 1, K);
      } else {
        for (int k = 0; k < K; k++) ref += (double)a[k] * b[(size_t)k * N + j];
        tol = sum_tolerance(a, b + j, N, K);
      }
      tol += fabs(beta * (double)c0[j]) * 1e-7;
      if (!(fabs(c[j] - ref) <= tol) && !bad++)
        fprintf(stderr, "  form %d K %d N %d beta %g element %d: %.9g, want %.9g\n", form, K, N,
                beta, j, c[j], ref);
    }
    CHECK(bad == 0, "sgemm one-row form %d K %d N %d beta %g: %d elements off", form, K, N, beta,
          bad);
  }
  free(b);
  free(a);
  free(c0);
  free(c);
}

/* C (M,N) = alpha op(A) op(B) + beta C, every form, with rows longer than the matrices (lda,
 * ldb, ldc padded) against the double sum */
static void check_sgemm_matrix(const nn_backend *be, int ta, int tb, int M, int N, int K,
                               float alpha, float beta, nn_rng *rng) {
  int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 2;
  size_t na = (size_t)(ta ? K : M) * lda, nb = (size_t)(tb ? N : K) * ldb, nc = (size_t)M * ldc;
  float *a = malloc(sizeof(float) * na), *b = malloc(sizeof(float) * nb);
  float *c0 = malloc(sizeof(float) * nc), *c = malloc(sizeof(float) * nc);
  fill(a, na, rng);
  fill(b, nb, rng);
  fill(c0, nc, rng);
  for (size_t i = 0; i < nc; i++) /* beta 0: C holds NaNs that must not show through */
    c[i] = beta == 0.0f && i % (size_t)ldc < (size_t)N ? NAN : c0[i];
  be->sgemm(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
  int bad = 0;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < ldc; j++) {
      size_t at = (size_t)i * ldc + j;
      if (j >= N) { /* the padding is not written */
        if (memcmp(&c[at], &c0[at], sizeof(float)) != 0 && !bad++)
          fprintf(stderr, "  padding (%d,%d) written\n", i, j);
        continue;
      }
      double ref = 0.0, mag = 0.0;
      for (int k = 0; k < K; k++) {
        double x = ta ? a[(size_t)k * lda + i] : a[(size_t)i * lda + k];
        double y = tb ? b[(size_t)j * ldb + k] : b[(size_t)k * ldb + j];
        ref += x * y;
        mag += fabs(x * y);
      }
      ref = alpha * ref + beta * (double)c0[at];
      double tol = 4.0 * (K + 2) * 6e-8 * (fabs(alpha) * mag + fabs(beta * c0[at])) + 1e-30;
      if (!(fabs(c[at] - ref) <= tol) && !bad++)
        fprintf(stderr, "  ta %d tb %d M %d N %d K %d: (%d,%d) %.9g, want %.9g\n", ta, tb, M, N, K,
                i, j, c[at], ref);
    }
  CHECK(bad == 0, "sgemm ta %d tb %d M %d N %d K %d alpha %g beta %g: %d elements off", ta, tb, M,
        N, K, alpha, beta, bad);
  free(a);
  free(b);
  free(c0);
  free(c);
}

/* A B^T against A (B^T) with B^T written out (two rows or more: one row takes the dot-product
 * and matrix-vector paths): the products of B^T go through strips of it
 * (engine/backend_cpu.c, in pieces of k when K is long), the others read B in place; each
 * element must be the same sum in the same order, so the two agree to the bit. That is a
 * property of our kernels, which the engine relies on; without them (no AVX-512) the products
 * are OpenBLAS's, whose AVX-512 sgemm (SkylakeX, Cooperlake) sums the two forms in different
 * orders: it is held to the double sum's tolerance instead, form against form. */
static void check_sgemm_bt_bits(const nn_backend *be, int own, int M, int N, int K, float alpha,
                                float beta, nn_rng *rng) {
  int lda = K + 1, ldb = K + 3, ldbt = N + 7, ldc = N + 2;
  float *a = malloc(sizeof(float) * (size_t)M * lda), *b = malloc(sizeof(float) * (size_t)N * ldb);
  float *bt = malloc(sizeof(float) * (size_t)K * ldbt);
  float *c1 = malloc(sizeof(float) * (size_t)M * ldc),
        *c2 = malloc(sizeof(float) * (size_t)M * ldc);
  fill(a, (size_t)M * lda, rng);
  fill(b, (size_t)N * ldb, rng);
  fill(c1, (size_t)M * ldc, rng);
  memcpy(c2, c1, sizeof(float) * (size_t)M * ldc);
  for (int k = 0; k < K; k++)
    for (int j = 0; j < N; j++) bt[(size_t)k * ldbt + j] = b[(size_t)j * ldb + k];
  be->sgemm(0, 1, M, N, K, alpha, a, lda, b, ldb, beta, c1, ldc);
  be->sgemm(0, 0, M, N, K, alpha, a, lda, bt, ldbt, beta, c2, ldc);
  int differ = 0;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < ldc; j++) {
      size_t at = (size_t)i * ldc + j;
      if (own || j >= N) { /* our kernels, and the padding either way: the same bits */
        differ += memcmp(&c1[at], &c2[at], sizeof(float)) != 0;
        continue;
      }
      double mag = 0.0;
      for (int k = 0; k < K; k++)
        mag += fabs((double)a[(size_t)i * lda + k] * b[(size_t)j * ldb + k]);
      double tol = 2.0 * 4.0 * (K + 2) * 6e-8 * (fabs(alpha) * mag + fabs((double)beta)) + 1e-30;
      differ += !(fabs((double)c1[at] - c2[at]) <= tol);
    }
  CHECK(differ == 0, "sgemm A B^T and A (B^T) M %d N %d K %d beta %g: %d elements differ%s", M, N,
        K, beta, differ, own ? " in their bits" : " beyond the tolerance");
  free(a);
  free(b);
  free(bt);
  free(c1);
  free(c2);
}

int main(void) {
  const nn_backend *be = nn_backend_cpu();
  const char *level = nn_backend_cpu_level();
  int own = !strcmp(level, "x86-64-v4") || !strcmp(level, "native"); /* native: if AVX-512 */
  printf("test_row_kernels: the CPU backend's %s kernels%s\n", level,
         own ? "" : " (no AVX-512: the products of 2 rows or more are OpenBLAS's)");
  nn_rng rng;
  nn_rng_seed(&rng, 2024);
  const int Ks[] = {1, 2, 3, 16, 31, 64, 100, 127, 128, 129, 256};
  const int Ns[] = {1, 4, 6, 15, 16, 63, 64, 65, 100, 127, 128, 129, 200, 384, 512, 515};
  for (size_t i = 0; i < sizeof Ks / sizeof *Ks; i++)
    for (size_t j = 0; j < sizeof Ns / sizeof *Ns; j++)
      for (int beta = 0; beta < 2; beta++) {
        check_sgemm_rows(be, Ks[i], Ns[j], (float)beta, &rng);
      }
  const int Ms[] = {2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 32, 37}; /* every row remainder */
  const int MNs[] = {2, 15, 16, 17, 31, 32, 33, 100, 128, 130};
  const int MKs[] = {1, 3, 16, 17, 100, 128, 300};
  for (int form = 0; form < 4; form++)
    for (size_t i = 0; i < sizeof Ms / sizeof *Ms; i++)
      for (size_t j = 0; j < sizeof MNs / sizeof *MNs; j++)
        for (size_t k = 0; k < sizeof MKs / sizeof *MKs; k++)
          check_sgemm_matrix(be, form & 1, form >> 1, Ms[i], MNs[j], MKs[k], (k & 1) ? 0.5f : 1.0f,
                             (float)((i + j) % 2), &rng);
  /* a batch's tokens by the gate width; a long B^T */
  check_sgemm_matrix(be, 0, 0, 180, 384, 100, 1.0f, 0.0f, &rng);
  check_sgemm_matrix(be, 0, 1, 180, 384, 100, 1.0f, 1.0f, &rng);
  check_sgemm_matrix(be, 1, 0, 128, 512, 700, 1.0f, 1.0f, &rng);
  check_sgemm_matrix(be, 0, 1, 20, 2100, 520, 1.0f, 0.0f, &rng);
  /* B^T in pieces of k, rows of C in groups: K past one strip, M past one group */
  check_sgemm_matrix(be, 0, 1, 130, 70, 700, 0.5f, 1.0f, &rng);
  check_sgemm_matrix(be, 0, 1, 61, 33, 513, 1.0f, 0.0f, &rng);
  const int BMs[] = {2, 3, 12, 13, 32, 60, 61, 130}, BNs[] = {2, 17, 32, 33, 100, 512};
  const int BKs[] = {1, 16, 100, 255, 256, 257, 512, 700};
  for (size_t i = 0; i < sizeof BMs / sizeof *BMs; i++)
    for (size_t j = 0; j < sizeof BNs / sizeof *BNs; j++)
      for (size_t k = 0; k < sizeof BKs / sizeof *BKs; k++)
        check_sgemm_bt_bits(be, own, BMs[i], BNs[j], BKs[k], (k & 1) ? 0.5f : 1.0f,
                            (float)((i + j) % 2), &rng);
  return check_finish("test_row_kernels");
}
