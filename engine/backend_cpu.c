/* backend_cpu.c -- the CPU backend: GEMMs on OpenBLAS (the AVX-512 copy multiplies training's
 * matrices itself, and every copy its one-row products), or with BLAS=none (NN_BLAS_NONE) on the
 * engine's own (gemm.c); every other kernel in plain C loops the compiler vectorises. Formulas follow PyTorch (gate orders GRU r,z,n; LSTM i,f,g,o).
 * Every reduction runs in a fixed order, so results are bit-identical from run to run. */
#ifndef NN_BLAS_NONE
#include <cblas.h>
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "compat.h"
#include "gemm.h"
#include "model.h" /* NN_MAX_HIDDEN */
#include "pool.h"

/* glibc's libmvec has vector expf and tanhf (AVX2 / AVX-512, within 1-2 ulp); declaring them
 * SIMD-callable lets `#pragma omp simd` loops (-fopenmp-simd) call them 8 or 16 lanes at a
 * time instead of the scalar versions, which were a third of a training epoch. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__)
float expf(float) __attribute__((__simd__("notinbranch")));
float tanhf(float) __attribute__((__simd__("notinbranch")));
#endif

/* a row of zeros standing for h_prev / c_prev at t = 0, so the kernels' inner loops need no
 * branch; hidden sizes are bounded by the options (at most 4096) */
static const float zero_row[NN_MAX_HIDDEN];

/* zeroed, 64-byte aligned: our vector kernels load 64 bytes at a time, and a load that
 * straddles two cache lines costs two */
static void *cpu_alloc(size_t bytes) {
  size_t n = (bytes + 63) & ~(size_t)63;
  if (n < bytes) return NULL;
  void *p = nn_os_aligned_alloc(64, n ? n : 64);
  if (p) memset(p, 0, n ? n : 64);
  return p;
}
static void cpu_free(void *ptr) { nn_os_aligned_free(ptr); }
static void cpu_copy(void *dst, const void *src, size_t bytes) {
  if (bytes) memcpy(dst, src, bytes);
}
static void cpu_zero(float *x, size_t n) {
  if (n) memset(x, 0, n * sizeof *x);
}

/* c (1,N) = alpha a (1,K) B (K,N) + beta c, as c += a[k] B[k, :] over k: each step reads one
 * contiguous row of B into accumulators that stay in registers, so there is no horizontal sum
 * and no packing. One-row inference runs its recurrent step and its fc layers this way on
 * transposed weights (model.h); OpenBLAS's sgemv took ~70% of attn_predict. */
typedef float nn_v16f __attribute__((vector_size(64), aligned(4))); /* unaligned loads allowed */
/* The accumulators are vectors of the target's width (one register each): 16 floats with
 * AVX-512, 8 with AVX, 4 otherwise. 16-float vectors on AVX2 (two ymm each, sixteen
 * accumulators) spilled to the stack: attn_predict ran 13x slower than on AVX-512. The vector
 * loops cover the first N - N % 16 columns at every width, each column summing its own products
 * in the same order (even k, odd k, then the two), and the last N % 16 columns are plain sums in
 * k order: the AVX2 and AVX-512 copies give the same bits. The baseline copy (x86-64-v2) has no
 * FMA, so its sums differ from theirs in the last bits. The final alpha s + beta c is contracted
 * differently per copy; every caller passes alpha 1 and beta 0 or 1, where that changes nothing. */
#if defined(__AVX512F__)
#define ROW_LANES 16
#elif defined(__AVX__)
#define ROW_LANES 8
#else
#define ROW_LANES 4
#endif
typedef float nn_vrow __attribute__((vector_size(ROW_LANES * 4), aligned(4)));
#define ROW_BLOCK (4 * ROW_LANES) /* columns per pass: 4 vectors, two k at a time */
/* Eight independent accumulators (two k at a time) hide the add latency; -std=c11 turns GCC's
 * FMA contraction off, so it is asked for here: the loop was latency-bound on mul + add. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("fp-contract=fast")))
#endif
static void
row_times_matrix(float *restrict c, float alpha, const float *restrict a, const float *restrict B,
                 int ldb, int K, int N, float beta) {
  int j = 0;
  for (; j + ROW_BLOCK <= N; j += ROW_BLOCK) {
    nn_vrow s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, t0 = {0}, t1 = {0}, t2 = {0}, t3 = {0};
    int k = 0;
    for (; k + 2 <= K; k += 2) {
      const float *r0 = B + (size_t)k * ldb + j, *r1 = r0 + ldb;
      float a0 = a[k], a1 = a[k + 1];
      s0 += a0 * *(const nn_vrow *)r0;
      s1 += a0 * *(const nn_vrow *)(r0 + ROW_LANES);
      s2 += a0 * *(const nn_vrow *)(r0 + 2 * ROW_LANES);
      s3 += a0 * *(const nn_vrow *)(r0 + 3 * ROW_LANES);
      t0 += a1 * *(const nn_vrow *)r1;
      t1 += a1 * *(const nn_vrow *)(r1 + ROW_LANES);
      t2 += a1 * *(const nn_vrow *)(r1 + 2 * ROW_LANES);
      t3 += a1 * *(const nn_vrow *)(r1 + 3 * ROW_LANES);
    }
    if (k < K) {
      const float *r0 = B + (size_t)k * ldb + j;
      float a0 = a[k];
      s0 += a0 * *(const nn_vrow *)r0;
      s1 += a0 * *(const nn_vrow *)(r0 + ROW_LANES);
      s2 += a0 * *(const nn_vrow *)(r0 + 2 * ROW_LANES);
      s3 += a0 * *(const nn_vrow *)(r0 + 3 * ROW_LANES);
    }
    s0 += t0;
    s1 += t1;
    s2 += t2;
    s3 += t3;
    for (int i = 0; i < ROW_LANES; i++) {
      c[j + i] = alpha * s0[i] + (beta == 0.0f ? 0.0f : beta * c[j + i]);
      c[j + ROW_LANES + i] = alpha * s1[i] + (beta == 0.0f ? 0.0f : beta * c[j + ROW_LANES + i]);
      c[j + 2 * ROW_LANES + i] =
          alpha * s2[i] + (beta == 0.0f ? 0.0f : beta * c[j + 2 * ROW_LANES + i]);
      c[j + 3 * ROW_LANES + i] =
          alpha * s3[i] + (beta == 0.0f ? 0.0f : beta * c[j + 3 * ROW_LANES + i]);
    }
  }
  for (; j + 16 <= N; j += 16) { /* then 16 columns at a time on every target (the same sums) */
    for (int h = 0; h < 16; h += ROW_LANES) {
      nn_vrow s = {0}, t = {0};
      int k = 0;
      for (; k + 2 <= K; k += 2) {
        s += a[k] * *(const nn_vrow *)(B + (size_t)k * ldb + j + h);
        t += a[k + 1] * *(const nn_vrow *)(B + (size_t)(k + 1) * ldb + j + h);
      }
      if (k < K) s += a[k] * *(const nn_vrow *)(B + (size_t)k * ldb + j + h);
      s += t;
      for (int i = 0; i < ROW_LANES; i++)
        c[j + h + i] = alpha * s[i] + (beta == 0.0f ? 0.0f : beta * c[j + h + i]);
    }
  }
  for (; j < N; j++) {
    float s = 0.0f;
    for (int k = 0; k < K; k++) s += a[k] * B[(size_t)k * ldb + j];
    c[j] = alpha * s + (beta == 0.0f ? 0.0f : beta * c[j]);
  }
}

/* c (M,1) = alpha A (M,K) b (K) + beta c: one dot product per row, 16 lanes at a time. For the
 * few rows of one-row inference (attention scores) sgemv's call overhead was most of the cost. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("fp-contract=fast")))
#endif
static void
rows_dot_vector(float *restrict c, int ldc, float alpha, const float *restrict A, int lda,
                const float *restrict b, int M, int K, float beta) {
  for (int i = 0; i < M; i++) {
    const float *a = A + (size_t)i * lda;
    nn_v16f s = {0}, t = {0};
    int k = 0;
    for (; k + 32 <= K; k += 32) {
      s += *(const nn_v16f *)(a + k) * *(const nn_v16f *)(b + k);
      t += *(const nn_v16f *)(a + k + 16) * *(const nn_v16f *)(b + k + 16);
    }
    if (k + 16 <= K) {
      s += *(const nn_v16f *)(a + k) * *(const nn_v16f *)(b + k);
      k += 16;
    }
    s += t;
    float dot = 0.0f;
    for (int l = 0; l < 16; l++) dot += s[l];
    for (; k < K; k++) dot += a[k] * b[k];
    float *ci = c + (size_t)i * ldc;
    *ci = alpha * dot + (beta == 0.0f ? 0.0f : beta * *ci);
  }
}

#if defined(__AVX512F__) && defined(__FMA__)
#include <immintrin.h>
/* The AVX-512 copy's own products for training's shapes (C of a shard's 32 rows or a batch's
 * tokens by 100-512 columns, K up to a few hundred). OpenBLAS's speed there depends on the core
 * it runs, which OPENBLAS_CORETYPE can force and which an OpenBLAS older than the CPU guesses:
 * on an AMD Zen 5 its AVX2 (Haswell) kernels reach 70-100 GFLOP/s on these shapes, its AVX-512
 * ones (Cooperlake, its own pick there) 110-204. This kernel reaches 130-199 whatever OpenBLAS
 * runs, and the products' bits no longer depend on that choice: C in blocks of GEMM_ROWS rows
 * by 32 columns held in 24 registers, each element the sum of its K products in k order (one
 * FMA each), then alpha s + beta c; the 32 columns of B a block reads are contiguous (B, or for
 * B^T a strip of 32 columns by up to GEMM_STRIP_K k copied on the stack). Nothing is allocated:
 * a product may run while the process forks, under the caller's heap limit. Results depend on
 * the shapes only, not on the thread. */
enum {
  GEMM_ROWS = 12,      /* rows of C a block holds in registers */
  GEMM_STRIP_K = 256,  /* k of B^T a strip holds: 32 KiB on the stack */
  GEMM_GROUP_ROWS = 60 /* rows of C that share a strip when K > GEMM_STRIP_K */
};

/* R rows by (up to) 32 columns of C over kn k: the sums start at 0 (first) or from part (R x 32,
 * the sums so far), and end in C (last: alpha s + beta c) or in part. Split this way, each sum
 * still takes its products in k order: the bits do not depend on the split. */
static inline __attribute__((always_inline)) void
gemm_block(int R, int kn, const float *A, size_t a_row, size_t a_k, const float *B, size_t ldb,
           __mmask16 m0, __mmask16 m1, int first, int last, float *part, float alpha, float beta,
           float *C, size_t ldc) {
  __m512 s0[GEMM_ROWS], s1[GEMM_ROWS];
#pragma GCC unroll 12
  for (int r = 0; r < R; r++) {
    s0[r] = first ? _mm512_setzero_ps() : _mm512_load_ps(part + r * 32);
    s1[r] = first ? _mm512_setzero_ps() : _mm512_load_ps(part + r * 32 + 16);
  }
  for (int k = 0; k < kn; k++) {
    const float *b = B + (size_t)k * ldb, *a = A + (size_t)k * a_k;
    __m512 b0 = _mm512_maskz_loadu_ps(m0, b), b1 = _mm512_maskz_loadu_ps(m1, b + 16);
#pragma GCC unroll 12
    for (int r = 0; r < R; r++) {
      __m512 x = _mm512_set1_ps(a[(size_t)r * a_row]);
      s0[r] = _mm512_fmadd_ps(x, b0, s0[r]);
      s1[r] = _mm512_fmadd_ps(x, b1, s1[r]);
    }
  }
  if (!last) {
#pragma GCC unroll 12
    for (int r = 0; r < R; r++) {
      _mm512_store_ps(part + r * 32, s0[r]);
      _mm512_store_ps(part + r * 32 + 16, s1[r]);
    }
    return;
  }
  __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 12
  for (int r = 0; r < R; r++) {
    float *c = C + (size_t)r * ldc;
    __m512 c0 = _mm512_mul_ps(va, s0[r]), c1 = _mm512_mul_ps(va, s1[r]);
    if (beta != 0.0f) { /* beta 0: C is not read (it may hold anything) */
      c0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, c), c0);
      c1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, c + 16), c1);
    }
    _mm512_mask_storeu_ps(c, m0, c0);
    _mm512_mask_storeu_ps(c + 16, m1, c1);
  }
}

/* dst (16,16) = src (16,16)^T, in registers: 64 shuffles for what 256 scalar moves did */
static inline __attribute__((always_inline)) void transpose16(const float *src, size_t lds,
                                                              float *dst, size_t ldd) {
  __m512 r[16], t[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(src + (size_t)i * lds);
#pragma GCC unroll 8
  for (int i = 0; i < 16; i += 2) { /* pairs of rows interleaved */
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 16; i += 4) { /* then pairs of pairs */
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xee);
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
#pragma GCC unroll 2
  for (int i = 0; i < 16; i += 8) /* then 128-bit lanes of four rows */
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
      t[i + j] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0x88);
      t[i + j + 4] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0xdd);
    }
#pragma GCC unroll 8
  for (int j = 0; j < 8; j++) { /* and of eight */
    r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
    r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xdd);
  }
#pragma GCC unroll 16
  for (int i = 0; i < 16; i++) _mm512_storeu_ps(dst + (size_t)i * ldd, r[i]);
}

/* strip (kn, 32) = columns k0 .. k0 + kn of rows j .. j + cols of B (N,K): B^T's piece that a
 * block of 32 columns of C reads. Columns cols .. 31 are left as they are (the blocks' masked
 * loads do not read them). */
static void gemm_strip(const float *B, size_t ldb, int cols, int kn, float *strip) {
  for (int j0 = 0; j0 < cols; j0 += 16)
    for (int k0 = 0; k0 < kn; k0 += 16)
      if (j0 + 16 <= cols && k0 + 16 <= kn)
        transpose16(B + (size_t)j0 * ldb + k0, ldb, strip + (size_t)k0 * 32 + j0, 32);
      else /* the edges */
        for (int j = j0; j < j0 + 16 && j < cols; j++)
          for (int k = k0; k < k0 + 16 && k < kn; k++)
            strip[(size_t)k * 32 + j] = B[(size_t)j * ldb + k];
}

/* R rows of C (1 <= R <= GEMM_ROWS) at a time, R a constant in each case so that the
 * accumulators stay in registers */
static void gemm_rows(int R, int kn, const float *A, size_t a_row, size_t a_k, const float *B,
                      size_t ldb, __mmask16 m0, __mmask16 m1, int first, int last, float *part,
                      float alpha, float beta, float *C, size_t ldc) {
#define GEMM_ROWS_OF(n)                                                                            \
  gemm_block(n, kn, A, a_row, a_k, B, ldb, m0, m1, first, last, part, alpha, beta, C, ldc)
  switch (R) {
  case 1: GEMM_ROWS_OF(1); break;
  case 2: GEMM_ROWS_OF(2); break;
  case 3: GEMM_ROWS_OF(3); break;
  case 4: GEMM_ROWS_OF(4); break;
  case 5: GEMM_ROWS_OF(5); break;
  case 6: GEMM_ROWS_OF(6); break;
  case 7: GEMM_ROWS_OF(7); break;
  case 8: GEMM_ROWS_OF(8); break;
  case 9: GEMM_ROWS_OF(9); break;
  case 10: GEMM_ROWS_OF(10); break;
  case 11: GEMM_ROWS_OF(11); break;
  case 12: GEMM_ROWS_OF(12); break;
  default: break;
  }
#undef GEMM_ROWS_OF
}

/* C (M,N) = alpha op(A) op(B) + beta C for every form but A^T B^T (which nothing calls: 0, and
 * OpenBLAS runs it). B^T (B (N,K)) goes 32 columns at a time through a strip on the stack: whole
 * when K <= GEMM_STRIP_K; else in pieces of GEMM_STRIP_K k, each shared by up to
 * GEMM_GROUP_ROWS rows of C whose sums so far wait in part. */
static int gemm_avx512(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                       int lda, const float *B, int ldb, float beta, float *C, int ldc) {
  if (trans_a && trans_b) return 0;
  _Alignas(64) float strip[GEMM_STRIP_K * 32];
  _Alignas(64) float part[GEMM_GROUP_ROWS * 32];
  size_t a_row = trans_a ? 1 : (size_t)lda, a_k = trans_a ? (size_t)lda : 1;
  for (int j = 0; j < N; j += 32) {
    int left = N - j, cols = left < 32 ? left : 32;
    __mmask16 m0 = left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1);
    __mmask16 m1 = left >= 32 ? 0xffff : left > 16 ? (__mmask16)((1u << (left - 16)) - 1) : 0;
    if (!trans_b) { /* B's 32 columns are contiguous in its rows already */
      for (int i = 0; i < M; i += GEMM_ROWS)
        gemm_rows(M - i < GEMM_ROWS ? M - i : GEMM_ROWS, K, A + (size_t)i * a_row, a_row, a_k,
                  B + j, (size_t)ldb, m0, m1, 1, 1, NULL, alpha, beta, C + (size_t)i * ldc + j,
                  (size_t)ldc);
      continue;
    }
    const float *bj = B + (size_t)j * ldb;
    if (K <= GEMM_STRIP_K) { /* one strip for every row */
      gemm_strip(bj, (size_t)ldb, cols, K, strip);
      for (int i = 0; i < M; i += GEMM_ROWS)
        gemm_rows(M - i < GEMM_ROWS ? M - i : GEMM_ROWS, K, A + (size_t)i * a_row, a_row, a_k,
                  strip, 32, m0, m1, 1, 1, NULL, alpha, beta, C + (size_t)i * ldc + j, (size_t)ldc);
      continue;
    }
    for (int g = 0; g < M; g += GEMM_GROUP_ROWS) {
      int rows = M - g < GEMM_GROUP_ROWS ? M - g : GEMM_GROUP_ROWS;
      for (int k0 = 0; k0 < K; k0 += GEMM_STRIP_K) {
        int kn = K - k0 < GEMM_STRIP_K ? K - k0 : GEMM_STRIP_K;
        gemm_strip(bj + k0, (size_t)ldb, cols, kn, strip);
        for (int i = 0; i < rows; i += GEMM_ROWS)
          gemm_rows(rows - i < GEMM_ROWS ? rows - i : GEMM_ROWS, kn,
                    A + (size_t)(g + i) * a_row + (size_t)k0 * a_k, a_row, a_k, strip, 32, m0, m1,
                    k0 == 0, k0 + kn == K, part + (size_t)i * 32, alpha, beta,
                    C + (size_t)(g + i) * ldc + j, (size_t)ldc);
      }
    }
  }
  return 1;
}
#endif

/* y = alpha op(A) x + beta y and C = alpha op(A) op(B) + beta C (row-major; cblas's arguments)
 * on OpenBLAS, each call with one BLAS thread and the host's setting back after it
 * (nn_blas_enter / nn_blas_leave, pool.h); with BLAS=none on gemm.c's, which need neither. */
static void blas_sgemv(int trans, int M, int N, float alpha, const float *A, int lda,
                       const float *x, int incx, float beta, float *y, int incy) {
#ifdef NN_BLAS_NONE
  nn_gemv(y, incy, trans, M, N, alpha, A, lda, x, incx, beta);
#else
  nn_blas_enter();
  cblas_sgemv(CblasRowMajor, trans ? CblasTrans : CblasNoTrans, M, N, alpha, A, lda, x, incx, beta,
              y, incy);
  nn_blas_leave();
#endif
}
static void blas_sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                       int lda, const float *B, int ldb, float beta, float *C, int ldc) {
#ifdef NN_BLAS_NONE
  nn_gemm(C, ldc, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta);
#else
  nn_blas_enter();
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  nn_blas_leave();
#endif
}

static void cpu_sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                      int lda, const float *B, int ldb, float beta, float *C, int ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) { /* C = beta C */
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++)
        C[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j];
    return;
  }
  /* A one-row or one-column product is a matrix-vector product: sgemv reads the matrix in
   * place, where sgemm would first pack it (for one-row inference, packing W_hh at every step
   * was 42% of the instructions). */
  if (M == 1 && !trans_a && !trans_b) { /* C (1,N) = a (1,K) B (K,N): rows of B, no packing */
    row_times_matrix(C, alpha, A, B, ldb, K, N, beta);
    return;
  }
  if (M == 1 && !trans_a && trans_b && N <= 64) { /* C (1,N) = a B^T: N dot products */
    rows_dot_vector(C, 1, alpha, B, ldb, A, N, K, beta);
    return;
  }
  if (M == 1) { /* C (1,N) = a (1,K) op(B) */
    int inc_a = trans_a ? lda : 1;
    if (trans_b) /* B (N,K): C = B a */
      blas_sgemv(0, N, K, alpha, B, ldb, A, inc_a, beta, C, 1);
    else /* B (K,N): C = B^T a */ blas_sgemv(1, K, N, alpha, B, ldb, A, inc_a, beta, C, 1);
    return;
  }
  if (N == 1 && !trans_a && trans_b) { /* C (M,1) = A (M,K) b, b one contiguous row */
    rows_dot_vector(C, ldc, alpha, A, lda, B, M, K, beta);
    return;
  }
  if (N == 1) { /* C (M,1) = op(A) b */
    int inc_b = trans_b ? 1 : ldb;
    if (trans_a) /* A (K,M) */
      blas_sgemv(1, K, M, alpha, A, lda, B, inc_b, beta, C, ldc);
    else /* A (M,K) */ blas_sgemv(0, M, K, alpha, A, lda, B, inc_b, beta, C, ldc);
    return;
  }
#if defined(__AVX512F__) && defined(__FMA__)
  if (gemm_avx512(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)) return;
#endif
  blas_sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

static void cpu_gather_rows(float *dst, int ldd, const float *src, int lds, const int *idx,
                            int rows, int cols) {
  for (int i = 0; i < rows; i++)
    memcpy(dst + (size_t)i * ldd, src + (size_t)(idx ? idx[i] : i) * lds, cols * sizeof(float));
}

static void cpu_gather_add_rows(float *restrict dst, int ldd, const float *restrict src, int lds,
                                const int *restrict idx, int rows, int cols) {
  for (int i = 0; i < rows; i++) {
    float *d = dst + (size_t)i * ldd;
    const float *s = src + (size_t)idx[i] * lds;
    for (int k = 0; k < cols; k++) d[k] += s[k];
  }
}

static void cpu_scatter_add_rows(float *dst, int ldd, const float *src, int lds, const int *idx,
                                 int rows, int cols) {
  for (int i = 0; i < rows; i++) {
    float *d = dst + (size_t)(idx ? idx[i] : i) * ldd;
    const float *s = src + (size_t)i * lds;
    for (int k = 0; k < cols; k++) d[k] += s[k];
  }
}

static void cpu_add_bias(float *y, int ld, const float *bias, int rows, int cols) {
  for (int i = 0; i < rows; i++) {
    float *r = y + (size_t)i * ld;
    for (int k = 0; k < cols; k++) r[k] += bias[k];
  }
}

static void cpu_bias_grad(float *dbias, const float *dy, int ld, int rows, int cols) {
  for (int i = 0; i < rows; i++) {
    const float *r = dy + (size_t)i * ld;
    for (int k = 0; k < cols; k++) dbias[k] += r[k];
  }
}

static void cpu_tanh_forward(float *y, size_t n) {
#pragma omp simd
  for (size_t i = 0; i < n; i++) y[i] = tanhf(y[i]);
}
static void cpu_tanh_backward(float *dx, const float *dy, const float *y, size_t n) {
  for (size_t i = 0; i < n; i++) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}
static void cpu_mul(float *y, const float *x, const float *mask, size_t n) {
  for (size_t i = 0; i < n; i++) y[i] = x[i] * mask[i];
}

/* ---------------------------------------------------------------- cells */

static void cpu_rnn_step_forward(float *h, float *pre, int n, int H) {
  size_t count = (size_t)n * H;
#pragma omp simd
  for (size_t i = 0; i < count; i++) h[i] = tanhf(pre[i]);
}

static void cpu_rnn_step_backward(float *dpre, const float *dh, const float *h, int n, int H) {
  size_t count = (size_t)n * H;
  for (size_t i = 0; i < count; i++) dpre[i] = dh[i] * (1.0f - h[i] * h[i]);
}

/* r = s(x_r + hw_r); z = s(x_z + hw_z); g = tanh(x_n + r * hw_n); h = (1 - z) g + z h_prev */
static void cpu_gru_step_forward(float *h, float *pre, const float *hw, const float *h_prev, int n,
                                 int H) {
  for (int b = 0; b < n; b++) {
    float *restrict x = pre + (size_t)b * 3 * H;
    const float *restrict u = hw + (size_t)b * 3 * H;
    const float *restrict hp = h_prev ? h_prev + (size_t)b * H : zero_row;
    float *restrict ho = h + (size_t)b * H;
#pragma omp simd
    for (int k = 0; k < H; k++) {
      float r = 1.0f / (1.0f + expf(-(x[k] + u[k])));
      float z = 1.0f / (1.0f + expf(-(x[H + k] + u[H + k])));
      float g = tanhf(x[2 * H + k] + r * u[2 * H + k]);
      x[k] = r;
      x[H + k] = z;
      x[2 * H + k] = g;
      ho[k] = (1.0f - z) * g + z * hp[k];
    }
  }
}

static void cpu_gru_step_backward(float *dx, float *dhw, float *dh_prev, const float *dh,
                                  const float *gates, const float *hw, const float *h_prev, int n,
                                  int H) {
  for (int b = 0; b < n; b++) {
    const float *restrict gt = gates + (size_t)b * 3 * H;
    const float *restrict u = hw + (size_t)b * 3 * H;
    const float *restrict hp = h_prev ? h_prev + (size_t)b * H : zero_row;
    const float *restrict d = dh + (size_t)b * H;
    float *restrict dxo = dx + (size_t)b * 3 * H;
    float *restrict dho = dhw + (size_t)b * 3 * H;
#pragma omp simd
    for (int k = 0; k < H; k++) {
      float r = gt[k], z = gt[H + k], g = gt[2 * H + k];
      float dg = d[k] * (1.0f - z);
      float dz = d[k] * (hp[k] - g);
      float dg_pre = dg * (1.0f - g * g);
      float dr = dg_pre * u[2 * H + k];
      float dr_pre = dr * r * (1.0f - r);
      float dz_pre = dz * z * (1.0f - z);
      dxo[k] = dr_pre;
      dxo[H + k] = dz_pre;
      dxo[2 * H + k] = dg_pre;
      dho[k] = dr_pre;
      dho[H + k] = dz_pre;
      dho[2 * H + k] = dg_pre * r;
    }
    if (dh_prev) {
      float *restrict dp = dh_prev + (size_t)b * H;
#pragma omp simd
      for (int k = 0; k < H; k++) dp[k] += d[k] * gt[H + k];
    }
  }
}

/* i,f,o = s(.), g = tanh(.); c = f c_prev + i g; h = o tanh(c) */
static void cpu_lstm_step_forward(float *h, float *c, float *pre, const float *c_prev, int n,
                                  int H) {
  for (int b = 0; b < n; b++) {
    float *restrict x = pre + (size_t)b * 4 * H;
    const float *restrict cp = c_prev ? c_prev + (size_t)b * H : zero_row;
    float *restrict co = c + (size_t)b * H, *restrict ho = h + (size_t)b * H;
#pragma omp simd
    for (int k = 0; k < H; k++) {
      float i = 1.0f / (1.0f + expf(-x[k])), f = 1.0f / (1.0f + expf(-x[H + k]));
      float g = tanhf(x[2 * H + k]), o = 1.0f / (1.0f + expf(-x[3 * H + k]));
      x[k] = i;
      x[H + k] = f;
      x[2 * H + k] = g;
      x[3 * H + k] = o;
      float cn = f * cp[k] + i * g;
      co[k] = cn;
      ho[k] = o * tanhf(cn);
    }
  }
}

static void cpu_lstm_step_backward(float *dpre, float *dc_prev, const float *dh, const float *dc,
                                   const float *gates, const float *c, const float *c_prev, int n,
                                   int H) {
  for (int b = 0; b < n; b++) {
    const float *restrict gt = gates + (size_t)b * 4 * H;
    const float *restrict d = dh + (size_t)b * H, *restrict dcin = dc + (size_t)b * H;
    const float *restrict cc = c + (size_t)b * H;
    const float *restrict cp = c_prev ? c_prev + (size_t)b * H : zero_row;
    float *restrict dp = dpre + (size_t)b * 4 * H;
    float *restrict dcp = dc_prev ? dc_prev + (size_t)b * H : NULL;
#pragma omp simd
    for (int k = 0; k < H; k++) {
      float i = gt[k], f = gt[H + k], g = gt[2 * H + k], o = gt[3 * H + k];
      float tc = tanhf(cc[k]);
      float dct = dcin[k] + d[k] * o * (1.0f - tc * tc);
      dp[k] = dct * g * i * (1.0f - i);
      dp[H + k] = dct * cp[k] * f * (1.0f - f);
      dp[2 * H + k] = dct * i * (1.0f - g * g);
      dp[3 * H + k] = d[k] * tc * o * (1.0f - o);
    }
    if (dcp) {
      /* dc_prev += (dc + dh o (1 - tanh(c)^2)) f, recomputed to keep the loop above store-free */
#pragma omp simd
      for (int k = 0; k < H; k++) {
        float o = gt[3 * H + k], tc = tanhf(cc[k]);
        dcp[k] += (dcin[k] + d[k] * o * (1.0f - tc * tc)) * gt[H + k];
      }
    }
  }
}

/* ---------------------------------------------------------------- attention over packed rows */

static void cpu_segment_softmax(float *alpha, const float *e, const int *row_sample, int P, int B,
                                float *scratch) {
  float *mx = scratch, *sm = scratch + B;
  for (int b = 0; b < B; b++) {
    mx[b] = -INFINITY;
    sm[b] = 0.0f;
  }
  for (int r = 0; r < P; r++)
    if (e[r] > mx[row_sample[r]]) mx[row_sample[r]] = e[r];
#pragma omp simd
  for (int r = 0; r < P; r++) alpha[r] = expf(e[r] - mx[row_sample[r]]);
  for (int r = 0; r < P; r++) sm[row_sample[r]] += alpha[r];
  for (int r = 0; r < P; r++) alpha[r] /= sm[row_sample[r]];
}

static void cpu_segment_softmax_backward(float *de, const float *dalpha, const float *alpha,
                                         const int *row_sample, int P, int B, float *scratch) {
  float *dot = scratch;
  for (int b = 0; b < B; b++) dot[b] = 0.0f;
  for (int r = 0; r < P; r++) dot[row_sample[r]] += alpha[r] * dalpha[r];
  for (int r = 0; r < P; r++) de[r] = alpha[r] * (dalpha[r] - dot[row_sample[r]]);
}

static void cpu_segment_weighted_sum(float *restrict ctx, const float *restrict alpha,
                                     const float *restrict v, int ldv,
                                     const int *restrict row_sample, int P, int B, int D) {
  memset(ctx, 0, sizeof(float) * (size_t)B * D);
  for (int r = 0; r < P; r++) {
    float a = alpha[r];
    const float *vr = v + (size_t)r * ldv;
    float *c = ctx + (size_t)row_sample[r] * D;
    for (int k = 0; k < D; k++) c[k] += a * vr[k];
  }
}

static void cpu_segment_weighted_sum_backward(float *dv, int ldv, int add, float *dalpha,
                                              const float *dctx, const float *alpha, const float *v,
                                              const int *row_sample, int P, int B, int D) {
  for (int r = 0; r < P; r++) {
    const float *dc = dctx + (size_t)row_sample[r] * D;
    const float *vr = v + (size_t)r * ldv;
    float *dvr = dv + (size_t)r * ldv;
    float a = alpha[r], dot = 0.0f;
    for (int k = 0; k < D; k++) {
      dot += dc[k] * vr[k];
      dvr[k] = (add ? dvr[k] : 0.0f) + a * dc[k];
    }
    dalpha[r] = dot;
  }
}

static void cpu_segment_dot(float *e, const float *q, const float *k, int ldk,
                            const int *row_sample, int P, int D, float scale) {
  for (int r = 0; r < P; r++) {
    const float *qb = q + (size_t)row_sample[r] * D, *kr = k + (size_t)r * ldk;
    float dot = 0.0f;
    for (int i = 0; i < D; i++) dot += qb[i] * kr[i];
    e[r] = scale * dot;
  }
}

static void cpu_segment_dot_backward(float *dq, float *dk, const float *de, const float *q,
                                     const float *k, int ldk, const int *row_sample, int P, int B,
                                     int D, float scale) {
  for (int r = 0; r < P; r++) {
    const float *qb = q + (size_t)row_sample[r] * D, *kr = k + (size_t)r * ldk;
    float *dqb = dq + (size_t)row_sample[r] * D, *dkr = dk + (size_t)r * ldk;
    float s = scale * de[r];
    for (int i = 0; i < D; i++) {
      dqb[i] += s * kr[i];
      dkr[i] = s * qb[i];
    }
  }
}

static void cpu_embedding_forward(float *x, const float *table, const int *ids, int P, int E) {
  for (int r = 0; r < P; r++)
    memcpy(x + (size_t)r * E, table + (size_t)ids[r] * E, sizeof(float) * E);
}

static void cpu_embedding_backward(float *dtable, const float *dx, const int *ids, int P, int E,
                                   int skip_id) {
  for (int r = 0; r < P; r++) {
    if (ids[r] == skip_id) continue;
    float *d = dtable + (size_t)ids[r] * E;
    const float *s = dx + (size_t)r * E;
    for (int k = 0; k < E; k++) d[k] += s[k];
  }
}

static const nn_backend cpu_backend = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .zero = cpu_zero,
    .sgemm = cpu_sgemm,
    .gather_rows = cpu_gather_rows,
    .gather_add_rows = cpu_gather_add_rows,
    .scatter_add_rows = cpu_scatter_add_rows,
    .add_bias = cpu_add_bias,
    .bias_grad = cpu_bias_grad,
    .tanh_forward = cpu_tanh_forward,
    .tanh_backward = cpu_tanh_backward,
    .mul = cpu_mul,
    .rnn_step_forward = cpu_rnn_step_forward,
    .rnn_step_backward = cpu_rnn_step_backward,
    .gru_step_forward = cpu_gru_step_forward,
    .gru_step_backward = cpu_gru_step_backward,
    .lstm_step_forward = cpu_lstm_step_forward,
    .lstm_step_backward = cpu_lstm_step_backward,
    .segment_softmax = cpu_segment_softmax,
    .segment_softmax_backward = cpu_segment_softmax_backward,
    .segment_weighted_sum = cpu_segment_weighted_sum,
    .segment_weighted_sum_backward = cpu_segment_weighted_sum_backward,
    .segment_dot = cpu_segment_dot,
    .segment_dot_backward = cpu_segment_dot_backward,
    .embedding_forward = cpu_embedding_forward,
    .embedding_backward = cpu_embedding_backward,
};

#ifdef NN_CPU_TABLE
/* The portable build compiles this file once more per instruction-set level, e.g.
 * -march=x86-64-v3 -DNN_CPU_TABLE=nn_backend_cpu_v3 (Makefile, CPU_LEVELS): that copy's kernels
 * are reached through this function only, which the copy for the baseline picks below. */
const nn_backend *NN_CPU_TABLE(void);
const nn_backend *NN_CPU_TABLE(void) { return &cpu_backend; }
#else

#ifdef NN_CPU_DISPATCH
/* Run-time dispatch (the portable build): this copy is compiled for the baseline (x86-64-v2), the
 * copies above for AVX2 + FMA and AVX-512; CPUID (and the OS's saving of the wide registers,
 * which the compiler's check includes) picks one. Stateless: the check reads the data libgcc's
 * (or compiler-rt's) constructor filled once per process. */
const nn_backend *nn_backend_cpu_v3(void);
const nn_backend *nn_backend_cpu_v4(void);
#if defined(__GNUC__) && !defined(__clang__)
#define CPU_HAS_V3() __builtin_cpu_supports("x86-64-v3")
#define CPU_HAS_V4() __builtin_cpu_supports("x86-64-v4")
#else /* clang 14 knows the main features, not the level names (nor movbe, f16c) */
#define CPU_HAS_V3()                                                                               \
  (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&                              \
   __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2"))
#define CPU_HAS_V4()                                                                               \
  (CPU_HAS_V3() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&      \
   __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&                     \
   __builtin_cpu_supports("avx512cd"))
#endif
static const nn_backend *cpu_pick(const char **level) {
  __builtin_cpu_init();
  if (CPU_HAS_V4()) {
    *level = "x86-64-v4";
    return nn_backend_cpu_v4();
  }
  if (CPU_HAS_V3()) {
    *level = "x86-64-v3";
    return nn_backend_cpu_v3();
  }
  *level = "x86-64-v2";
  return &cpu_backend;
}
#else
static const nn_backend *cpu_pick(const char **level) {
#ifdef NN_CPU_NATIVE
  *level = "native";
#else
  *level = "generic";
#endif
  return &cpu_backend;
}
#endif

/* Every GEMM runs with one OpenBLAS thread (cpu_sgemm, see pool.h): a model load's large GEMM
 * (the folded table) would otherwise run threaded, and OpenBLAS's idle workers then spin in
 * sched_yield (measured: 18% of an attn_classify run). */
const nn_backend *nn_backend_cpu(void) {
  const char *level;
  return cpu_pick(&level);
}

const char *nn_backend_cpu_level(void) {
  const char *level;
  cpu_pick(&level);
  return level;
}
#endif
