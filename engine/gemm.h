/* gemm.h -- the engine's own matrix products, for builds with no BLAS library (make BLAS=none:
 * Windows, WebAssembly, a cross build without an OpenBLAS for its target). Row-major, as the
 * backend's sgemm (backend.h); each sum takes its K products in k order, one multiply-add each,
 * so a result depends on the operands and the shapes only: not on the thread, nor on how the
 * caller splits the rows.
 *
 * engine/gemm.c is compiled once per CPU level of the portable x86 build, as backend_cpu.c is
 * (Makefile, CPU_LEVELS): with NN_CPU_LEVEL=v3 the names below become nn_gemm_v3 and
 * nn_gemv_v3, which that level's copy of backend_cpu.c calls. The baseline copy keeps the
 * plain names (tests/test_gemm.c calls it). */
#ifndef ATTNEXT_GEMM_H
#define ATTNEXT_GEMM_H

#ifdef NN_CPU_LEVEL
#define NN_GEMM_CAT2(name, level) name##_##level
#define NN_GEMM_CAT(name, level) NN_GEMM_CAT2(name, level)
#define nn_gemm NN_GEMM_CAT(nn_gemm, NN_CPU_LEVEL)
#define nn_gemv NN_GEMM_CAT(nn_gemv, NN_CPU_LEVEL)
#endif

#ifdef __cplusplus /* tests/cuda_emulate.h */
extern "C" {
#endif

/* C (M,N) = alpha op(A) op(B) + beta C, op(A) (M,K), op(B) (K,N); A is (K,M) when trans_a, B
 * is (N,K) when trans_b. beta 0: C is not read (it may hold anything, NaN included). */
void nn_gemm(float *C, /* (M, N), row stride ldc */
             int ldc, int trans_a, int trans_b, int M, int N, int K, float alpha,
             const float *A,          /* (M, K) or (K, M), row stride lda */
             int lda, const float *B, /* (K, N) or (N, K), row stride ldb */
             int ldb, float beta);

/* y = alpha op(A) x + beta y, A (M,N) with row stride lda: y (M) = A x (N) when !trans,
 * y (N) = A^T x (M) when trans; x and y strided by incx, incy (>= 1). beta 0: y is not read. */
void nn_gemv(float *y,                                                       /* (M) or (N) */
             int incy, int trans, int M, int N, float alpha, const float *A, /* (M, N) */
             int lda, const float *x,                                        /* (N) or (M) */
             int incx, float beta);

#ifdef __cplusplus
}
#endif
#endif
