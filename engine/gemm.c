/* gemm.c -- general matrix products of our own (gemm.h), for builds without BLAS, in portable C
 * with the compiler's vectors: 4 floats on SSE, NEON and WebAssembly SIMD, 8 with AVX, 16 with
 * AVX-512.
 *
 * nn_gemm computes C in tiles of GEMM_MR rows by two vectors of columns, the tile's sums held in
 * registers while k runs (one multiply-add per product, in k order), the same scheme as the
 * AVX-512 kernel of backend_cpu.c but for any target. op(B)'s columns for a tile are read in
 * place when they are contiguous (B's rows); B^T, and the last columns short of a tile, are
 * first copied (zero-padded) into a strip of GEMM_STRIP_K k on the stack. Long K goes in such
 * pieces, the sums so far kept in `part` between them, which keeps each sum in k order: the bits
 * do not depend on the split, and every element of C, full tile or edge, is computed by the same
 * lanes' code. Nothing is allocated and there is no state: any thread may call it, and a forked
 * child too. */
#include <string.h>

#include "gemm.h"

#if defined(__AVX512F__)
#define GEMM_LANES 16
#define GEMM_MR 12 /* 24 accumulators of the 32 registers */
#elif defined(__AVX__)
#define GEMM_LANES 8
#define GEMM_MR 6 /* 12 accumulators of 16 */
#elif defined(__aarch64__)
#define GEMM_LANES 4
#define GEMM_MR 12 /* 24 accumulators of 32 */
#else
#define GEMM_LANES 4
#define GEMM_MR 6
#endif
#define GEMM_NR (2 * GEMM_LANES) /* columns of a tile */
enum {
  GEMM_STRIP_K = 256, /* k of a strip: 32 KiB on the stack at 16 lanes */
  GEMM_GROUP = 60     /* rows of C that share one strip (their sums wait in part) */
};
/* aligned(4): loads and stores of any float address (rows of B and C are not aligned) */
typedef float gemm_vec __attribute__((vector_size(GEMM_LANES * 4), aligned(4)));

/* -std=c11 turns GCC's contraction off; the multiply-adds are asked for here (one instruction
 * where the target has FMA: x86-64-v3 and v4, arm64), the same in every loop of this file */
#if defined(__GNUC__) && !defined(__clang__)
#define GEMM_CONTRACT __attribute__((optimize("fp-contract=fast")))
#else
#define GEMM_CONTRACT
#endif
#if defined(__clang__)
#pragma clang fp contract(fast)
#endif

/* the last step of every element: alpha s + beta c (beta 0: c is not read) */
static inline __attribute__((always_inline)) gemm_vec gemm_out(gemm_vec s, float alpha,
                                                               const float *c, float beta) {
  gemm_vec r = alpha * s;
  if (beta != 0.0f) r += beta * *(const gemm_vec *)c;
  return r;
}

/* R rows (a constant in each case of gemm_rows) by GEMM_NR columns over kn k. a: the tile's
 * first element of op(A), a_row and a_k its strides; b: the first of op(B)'s rows, ldb apart.
 * The sums start at 0 (first) or from part, and end in part or (last) in C: all cols columns
 * when cols == GEMM_NR, else through a padded copy. */
static inline __attribute__((always_inline)) void
gemm_tile(int R, int kn, const float *a, size_t a_row, size_t a_k, const float *b, size_t ldb,
          int first, int last, float *part, int cols, float alpha, float beta, float *C,
          size_t ldc) {
  gemm_vec s0[GEMM_MR], s1[GEMM_MR];
#pragma GCC unroll 12
  for (int r = 0; r < R; r++) {
    s0[r] = first ? (gemm_vec){0} : *(const gemm_vec *)(part + r * GEMM_NR);
    s1[r] = first ? (gemm_vec){0} : *(const gemm_vec *)(part + r * GEMM_NR + GEMM_LANES);
  }
  for (int k = 0; k < kn; k++) {
    const float *bk = b + (size_t)k * ldb, *ak = a + (size_t)k * a_k;
    gemm_vec b0 = *(const gemm_vec *)bk, b1 = *(const gemm_vec *)(bk + GEMM_LANES);
#pragma GCC unroll 12
    for (int r = 0; r < R; r++) {
      float x = ak[(size_t)r * a_row];
      s0[r] += x * b0;
      s1[r] += x * b1;
    }
  }
  if (!last) {
#pragma GCC unroll 12
    for (int r = 0; r < R; r++) {
      *(gemm_vec *)(part + r * GEMM_NR) = s0[r];
      *(gemm_vec *)(part + r * GEMM_NR + GEMM_LANES) = s1[r];
    }
    return;
  }
#pragma GCC unroll 12
  for (int r = 0; r < R; r++) {
    float *c = C + (size_t)r * ldc;
    if (cols == GEMM_NR) {
      *(gemm_vec *)c = gemm_out(s0[r], alpha, c, beta);
      *(gemm_vec *)(c + GEMM_LANES) = gemm_out(s1[r], alpha, c + GEMM_LANES, beta);
    } else { /* the last columns: the same arithmetic on a padded copy of the row */
      float pad[GEMM_NR] = {0};
      if (beta != 0.0f) memcpy(pad, c, sizeof(float) * (size_t)cols);
      *(gemm_vec *)pad = gemm_out(s0[r], alpha, pad, beta);
      *(gemm_vec *)(pad + GEMM_LANES) = gemm_out(s1[r], alpha, pad + GEMM_LANES, beta);
      memcpy(c, pad, sizeof(float) * (size_t)cols);
    }
  }
}

/* R rows of C, 1 <= R <= GEMM_MR, R a constant in each case so that the sums stay in registers */
GEMM_CONTRACT static void gemm_rows(int R, int kn, const float *a, size_t a_row, size_t a_k,
                                    const float *b, size_t ldb, int first, int last, float *part,
                                    int cols, float alpha, float beta, float *C, size_t ldc) {
#define GEMM_ROWS_OF(n)                                                                            \
  gemm_tile(n, kn, a, a_row, a_k, b, ldb, first, last, part, cols, alpha, beta, C, ldc)
  switch (R) {
  case 1: GEMM_ROWS_OF(1); break;
  case 2: GEMM_ROWS_OF(2); break;
  case 3: GEMM_ROWS_OF(3); break;
  case 4: GEMM_ROWS_OF(4); break;
  case 5: GEMM_ROWS_OF(5); break;
  case 6: GEMM_ROWS_OF(6); break;
#if GEMM_MR > 6
  case 7: GEMM_ROWS_OF(7); break;
  case 8: GEMM_ROWS_OF(8); break;
  case 9: GEMM_ROWS_OF(9); break;
  case 10: GEMM_ROWS_OF(10); break;
  case 11: GEMM_ROWS_OF(11); break;
  case 12: GEMM_ROWS_OF(12); break;
#endif
  default: break;
  }
#undef GEMM_ROWS_OF
}

/* strip (kn, GEMM_NR) = op(B)'s rows k0 .. k0 + kn, columns j .. j + cols, zero-padded to
 * GEMM_NR columns */
static void gemm_strip(float *strip, const float *B, size_t ldb, int trans_b, int k0, int kn, int j,
                       int cols) {
  for (int k = 0; k < kn; k++) {
    float *s = strip + (size_t)k * GEMM_NR;
    if (trans_b) /* B (N,K): op(B)[k][j] = B[j][k] */
      for (int c = 0; c < cols; c++) s[c] = B[(size_t)(j + c) * ldb + k0 + k];
    else memcpy(s, B + (size_t)(k0 + k) * ldb + j, sizeof(float) * (size_t)cols);
    for (int c = cols; c < GEMM_NR; c++) s[c] = 0.0f;
  }
}

void nn_gemm(float *C, int ldc, int trans_a, int trans_b, int M, int N, int K, float alpha,
             const float *A, int lda, const float *B, int ldb, float beta) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) { /* C = beta C */
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) {
        float *c = C + (size_t)i * ldc + j;
        *c = beta == 0.0f ? 0.0f : beta * *c;
      }
    return;
  }
  _Alignas(64) float strip[GEMM_STRIP_K * GEMM_NR];
  _Alignas(64) float part[GEMM_GROUP * GEMM_NR];
  size_t a_row = trans_a ? 1 : (size_t)lda, a_k = trans_a ? (size_t)lda : 1;
  for (int j = 0; j < N; j += GEMM_NR) {
    int cols = N - j < GEMM_NR ? N - j : GEMM_NR;
    if (!trans_b && cols == GEMM_NR) { /* op(B)'s columns contiguous in B's rows: in place */
      for (int i = 0; i < M; i += GEMM_MR)
        gemm_rows(M - i < GEMM_MR ? M - i : GEMM_MR, K, A + (size_t)i * a_row, a_row, a_k, B + j,
                  (size_t)ldb, 1, 1, NULL, cols, alpha, beta, C + (size_t)i * ldc + j, (size_t)ldc);
      continue;
    }
    for (int g = 0; g < M; g += GEMM_GROUP) { /* through strips of GEMM_STRIP_K k */
      int rows = M - g < GEMM_GROUP ? M - g : GEMM_GROUP;
      for (int k0 = 0; k0 < K; k0 += GEMM_STRIP_K) {
        int kn = K - k0 < GEMM_STRIP_K ? K - k0 : GEMM_STRIP_K;
        gemm_strip(strip, B, (size_t)ldb, trans_b, k0, kn, j, cols);
        for (int i = 0; i < rows; i += GEMM_MR)
          gemm_rows(rows - i < GEMM_MR ? rows - i : GEMM_MR, kn,
                    A + (size_t)(g + i) * a_row + (size_t)k0 * a_k, a_row, a_k, strip, GEMM_NR,
                    k0 == 0, k0 + kn == K, part + (size_t)i * GEMM_NR, cols, alpha, beta,
                    C + (size_t)(g + i) * ldc + j, (size_t)ldc);
      }
    }
  }
}

/* y (M) = alpha A x + beta y: a dot product per row, two vectors of sums (k in blocks of two
 * vectors, then one), their lanes added in order, then the last K % GEMM_LANES products. A
 * strided x is copied GEMM_STRIP_K at a time into a buffer; the sums carry over the pieces
 * (GEMM_STRIP_K is a multiple of the block), so the order is the same as for a contiguous x. */
GEMM_CONTRACT static void gemv_rows(float *y, int incy, int M, int N, float alpha, const float *A,
                                    int lda, const float *x, int incx, float beta) {
  _Alignas(64) float xs[GEMM_STRIP_K];
  for (int i = 0; i < M; i++) {
    const float *a = A + (size_t)i * lda;
    gemm_vec s = {0}, t = {0};
    float tail = 0.0f;
    for (int k0 = 0; k0 < N; k0 += GEMM_STRIP_K) {
      int kn = N - k0 < GEMM_STRIP_K ? N - k0 : GEMM_STRIP_K;
      const float *xk = x + (size_t)k0 * incx;
      if (incx != 1) {
        for (int k = 0; k < kn; k++) xs[k] = x[(size_t)(k0 + k) * incx];
        xk = xs;
      }
      const float *ak = a + k0;
      int k = 0;
      for (; k + 2 * GEMM_LANES <= kn; k += 2 * GEMM_LANES) {
        s += *(const gemm_vec *)(ak + k) * *(const gemm_vec *)(xk + k);
        t += *(const gemm_vec *)(ak + k + GEMM_LANES) * *(const gemm_vec *)(xk + k + GEMM_LANES);
      }
      for (; k + GEMM_LANES <= kn; k += GEMM_LANES)
        s += *(const gemm_vec *)(ak + k) * *(const gemm_vec *)(xk + k);
      for (; k < kn; k++) tail += ak[k] * xk[k]; /* only in the last piece */
    }
    s += t;
    float dot = 0.0f;
    for (int l = 0; l < GEMM_LANES; l++) dot += s[l];
    dot += tail;
    float *yi = y + (size_t)i * incy;
    *yi = alpha * dot + (beta == 0.0f ? 0.0f : beta * *yi);
  }
}

/* y (N) = alpha A^T x + beta y, A (M,N): y += x[k] A[k, :] over k, four vectors of columns at a
 * time (A's rows read in place, the sums in registers), then the last columns one by one. */
GEMM_CONTRACT static void gemv_cols(float *y, int incy, int M, int N, float alpha, const float *A,
                                    int lda, const float *x, int incx, float beta) {
  int j = 0;
  for (; j + 4 * GEMM_LANES <= N; j += 4 * GEMM_LANES) {
    gemm_vec s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    for (int k = 0; k < M; k++) {
      const float *r = A + (size_t)k * lda + j;
      float xk = x[(size_t)k * incx];
      s0 += xk * *(const gemm_vec *)r;
      s1 += xk * *(const gemm_vec *)(r + GEMM_LANES);
      s2 += xk * *(const gemm_vec *)(r + 2 * GEMM_LANES);
      s3 += xk * *(const gemm_vec *)(r + 3 * GEMM_LANES);
    }
    for (int l = 0; l < GEMM_LANES; l++) {
      float *y0 = y + (size_t)(j + l) * incy, *y1 = y + (size_t)(j + GEMM_LANES + l) * incy;
      float *y2 = y + (size_t)(j + 2 * GEMM_LANES + l) * incy;
      float *y3 = y + (size_t)(j + 3 * GEMM_LANES + l) * incy;
      *y0 = alpha * s0[l] + (beta == 0.0f ? 0.0f : beta * *y0);
      *y1 = alpha * s1[l] + (beta == 0.0f ? 0.0f : beta * *y1);
      *y2 = alpha * s2[l] + (beta == 0.0f ? 0.0f : beta * *y2);
      *y3 = alpha * s3[l] + (beta == 0.0f ? 0.0f : beta * *y3);
    }
  }
  for (; j < N; j++) {
    float s = 0.0f;
    for (int k = 0; k < M; k++) s += x[(size_t)k * incx] * A[(size_t)k * lda + j];
    float *yj = y + (size_t)j * incy;
    *yj = alpha * s + (beta == 0.0f ? 0.0f : beta * *yj);
  }
}

void nn_gemv(float *y, int incy, int trans, int M, int N, float alpha, const float *A, int lda,
             const float *x, int incx, float beta) {
  if (M <= 0 || N <= 0) { /* an empty sum: y = beta y */
    int n = trans ? N : M;
    for (int i = 0; i < n; i++) {
      float *yi = y + (size_t)i * incy;
      *yi = beta == 0.0f ? 0.0f : beta * *yi;
    }
    return;
  }
  if (trans) gemv_cols(y, incy, M, N, alpha, A, lda, x, incx, beta);
  else gemv_rows(y, incy, M, N, alpha, A, lda, x, incx, beta);
}
