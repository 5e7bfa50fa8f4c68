/* test_gemm.c -- the engine's own products (engine/gemm.c, what make BLAS=none multiplies on):
 * C = alpha op(A) op(B) + beta C in its four forms and y = alpha op(A) x + beta y, against the
 * same sums in double precision, over shapes that cover every edge of its tiles (a row or column
 * short of a tile, K longer than a strip, strides wider than the rows); beta 0 never reads C;
 * and the bits do not depend on the thread nor on how the rows are split: the rows of C in
 * shards of 8 over a pool of 1, 2 and 4 threads give the bits of one call. The CPU backend's
 * sgemm (OpenBLAS's, or with BLAS=none gemm.c's at the CPU's level) is held to the same bound. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "check.h"
#include "gemm.h"
#include "pool.h"

static unsigned long long state = 88172645463325252ull;
static float uniform(void) { /* xorshift64: in [-1, 1) */
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return (float)((state >> 40) * (1.0 / 8388608.0) - 1.0);
}
static float *random_matrix(size_t n) {
  float *m = malloc(sizeof(float) * (n ? n : 1));
  for (size_t i = 0; i < n; i++) m[i] = uniform();
  return m;
}

/* the elements of op(A) and op(B) */
static float a_at(const float *A, int lda, int trans, int i, int k) {
  return trans ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
}
static float b_at(const float *B, int ldb, int trans, int k, int j) {
  return trans ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
}

/* got against alpha op(A) op(B) + beta c0 in double: an error of at most (K + 2) float
 * roundings of the sum of the magnitudes (a sum of K products in float, then alpha and beta) */
static double worst_error(const float *got, int ldc, const float *c0, int ta, int tb, int M, int N,
                          int K, float alpha, const float *A, int lda, const float *B, int ldb,
                          float beta) {
  double worst = 0.0;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double s = 0.0, mag = 0.0;
      for (int k = 0; k < K; k++) {
        double p = (double)a_at(A, lda, ta, i, k) * b_at(B, ldb, tb, k, j);
        s += p;
        mag += fabs(p);
      }
      double c = beta == 0.0f ? 0.0 : c0[(size_t)i * ldc + j];
      double want = alpha * s + beta * c;
      double bound = (K + 2) * 0x1p-23 * (fabs(alpha) * mag + fabs(beta * c)) + 1e-30;
      double e = fabs(got[(size_t)i * ldc + j] - want) / bound;
      if (!(e <= worst)) worst = e; /* NaN too */
    }
  return worst;
}

typedef void (*gemm_fn)(int, int, int, int, int, float, const float *, int, const float *, int,
                        float, float *, int);
static void own_gemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                     const float *B, int ldb, float beta, float *C, int ldc) {
  nn_gemm(C, ldc, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta);
}

/* one product of each form for M x N x K: within the bound, and beta 0 ignores a C of NaN */
static void check_shape(const char *what, gemm_fn gemm, int M, int N, int K, float alpha,
                        float beta) {
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
      float *A = random_matrix((size_t)(ta ? K : M) * lda);
      float *B = random_matrix((size_t)(tb ? N : K) * ldb);
      float *c0 = random_matrix((size_t)M * ldc), *C = malloc(sizeof(float) * M * ldc);
      if (beta == 0.0f)
        for (size_t i = 0; i < (size_t)M * ldc; i++) c0[i] = NAN;
      memcpy(C, c0, sizeof(float) * M * ldc);
      gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
      double e = worst_error(C, ldc, c0, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta);
      CHECK(e <= 1.0,
            "%s %s%s M=%d N=%d K=%d alpha=%g beta=%g: error %.3g of the bound (K+2) ulp of the "
            "magnitudes",
            what, ta ? "A^T" : "A", tb ? " B^T" : " B", M, N, K, alpha, beta, e);
      for (int j = N; j < ldc; j++) /* the padding of C's rows is not written */
        CHECK(memcmp(&C[j], &c0[j], sizeof(float)) == 0, "%s M=%d N=%d K=%d: wrote C[0][%d]", what,
              M, N, K, j);
      free(A);
      free(B);
      free(c0);
      free(C);
    }
}

/* y = alpha op(A) x + beta y with strides, against double */
static void check_gemv(int trans, int M, int N, int incx, int incy, float beta) {
  int lda = N + 5, nx = trans ? M : N, ny = trans ? N : M;
  float *A = random_matrix((size_t)M * lda), *x = random_matrix((size_t)nx * incx);
  float *y0 = random_matrix((size_t)ny * incy), *y = malloc(sizeof(float) * ny * incy);
  memcpy(y, y0, sizeof(float) * ny * incy);
  nn_gemv(y, incy, trans, M, N, 0.5f, A, lda, x, incx, beta);
  double worst = 0.0;
  for (int i = 0; i < ny; i++) {
    double s = 0.0, mag = 0.0;
    for (int k = 0; k < nx; k++) {
      double p =
          (double)(trans ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]) * x[(size_t)k * incx];
      s += p;
      mag += fabs(p);
    }
    double c = y0[(size_t)i * incy], want = 0.5 * s + beta * c;
    double bound = (nx + 2) * 0x1p-23 * (0.5 * mag + fabs(beta * c)) + 1e-30;
    double e = fabs(y[(size_t)i * incy] - want) / bound;
    if (!(e <= worst)) worst = e;
  }
  CHECK(worst <= 1.0, "gemv %s M=%d N=%d incx=%d incy=%d beta=%g: error %.3g of the bound",
        trans ? "A^T x" : "A x", M, N, incx, incy, beta, worst);
  free(A);
  free(x);
  free(y0);
  free(y);
}

/* rows of C in shards of 8 on a pool, as the trainer splits a batch */
typedef struct shard_job {
  int ta, tb, M, N, K, lda, ldb;
  const float *A, *B;
  float *C;
} shard_job;
static void shard_task(void *ctx, int t) {
  shard_job *j = ctx;
  int i0 = t * 8, rows = j->M - i0 < 8 ? j->M - i0 : 8;
  const float *a = j->ta ? j->A + i0 : j->A + (size_t)i0 * j->lda;
  nn_gemm(j->C + (size_t)i0 * j->N, j->N, j->ta, j->tb, rows, j->N, j->K, 1.0f, a, j->lda, j->B,
          j->ldb, 0.0f);
}
static void check_threads(int ta, int tb, int M, int N, int K) {
  int lda = ta ? M : K, ldb = tb ? K : N;
  float *A = random_matrix((size_t)(ta ? K : M) * lda),
        *B = random_matrix((size_t)(tb ? N : K) * ldb);
  float *whole = malloc(sizeof(float) * M * N), *C = malloc(sizeof(float) * M * N);
  nn_gemm(whole, N, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f);
  int threads[] = {1, 2, 4};
  for (int t = 0; t < 3; t++) {
    char err[256];
    nn_pool *pool;
    if (nn_pool_create(&pool, threads[t], NULL, err) != 0) {
      CHECK(0, "nn_pool_create(%d): %s", threads[t], err);
      continue;
    }
    memset(C, 0xff, sizeof(float) * M * N);
    shard_job job = {ta, tb, M, N, K, lda, ldb, A, B, C};
    nn_pool_run(pool, shard_task, &job, (M + 7) / 8);
    nn_pool_free(pool);
    CHECK(memcmp(C, whole, sizeof(float) * M * N) == 0,
          "%s%s M=%d N=%d K=%d: shards of 8 rows on %d threads differ from one call",
          ta ? "A^T" : "A", tb ? " B^T" : " B", M, N, K, threads[t]);
  }
  free(A);
  free(B);
  free(whole);
  free(C);
}

int main(void) {
  /* around the tiles (4 to 16 lanes, 6 or 12 rows, two vectors of columns) and the strips (256 k,
   * 60 rows a group) */
  int Ms[] = {1, 2, 5, 12, 13, 61, 70};
  int Ns[] = {1, 3, 8, 17, 32, 33, 100};
  int Ks[] = {1, 7, 64, 255, 257, 600};
  for (size_t m = 0; m < sizeof Ms / sizeof *Ms; m++)
    for (size_t n = 0; n < sizeof Ns / sizeof *Ns; n++)
      for (size_t k = 0; k < sizeof Ks / sizeof *Ks; k++) {
        float beta = (m + n + k) % 3 == 0 ? 0.0f : (m + n + k) % 3 == 1 ? 1.0f : -0.75f;
        float alpha = k % 2 ? 1.0f : 0.5f;
        check_shape("nn_gemm", own_gemm, Ms[m], Ns[n], Ks[k], alpha, beta);
        if (k % 2 == 0) /* the backend: its own kernels, OpenBLAS or gemm.c */
          check_shape("backend sgemm", nn_backend_cpu()->sgemm, Ms[m], Ns[n], Ks[k], alpha, beta);
      }
  /* K = 0: C = beta C */
  float c[4] = {1, 2, 3, 4};
  nn_gemm(c, 2, 0, 0, 2, 2, 0, 1.0f, c, 1, c, 1, 0.5f);
  CHECK(c[0] == 0.5f && c[3] == 2.0f, "K=0: C = beta C, got %g %g", c[0], c[3]);
  int gemv_shapes[][2] = {{1, 1}, {3, 5}, {17, 33}, {64, 300}, {100, 7}, {5, 600}};
  for (int s = 0; s < 6; s++)
    for (int trans = 0; trans < 2; trans++) {
      check_gemv(trans, gemv_shapes[s][0], gemv_shapes[s][1], 1, 1, 0.0f);
      check_gemv(trans, gemv_shapes[s][0], gemv_shapes[s][1], 3, 2, 1.0f);
    }
  /* training's shapes: a shard's rows by gates, and the gradients' A^T B */
  check_threads(0, 0, 64, 384, 100);
  check_threads(0, 1, 61, 300, 300);
  check_threads(1, 0, 37, 128, 70);
  check_threads(1, 1, 50, 45, 260);
  return check_finish("test_gemm");
}
