/* cuda_emulate.h -- just enough of the CUDA runtime and cuBLAS, on the host, to compile
 * engine/backend_cuda.cu with a C++ compiler and run its kernels on a machine without a GPU
 * (build/tests/emu_cuda.so; tests/test_cuda_emulated.sh runs tests/test_cuda against it).
 *
 * A kernel launch, LAUNCH(k, grid, block)(args), calls k once per (block, thread) of the grid,
 * in order or in reverse (emu_reversed), with blockIdx / threadIdx / blockDim / gridDim set:
 * right for kernels whose threads are independent (every kernel of backend_cuda.cu: no shared
 * memory, no barriers, no warp shuffles). Device memory is host memory (calloc); cublasSgemm is OpenBLAS's column-major
 * sgemm, so the row-major transposition trick of backend_cuda.cu is exercised as on a GPU.
 * atomicAdd is a plain addition (threads run one at a time). What this cannot find: races,
 * launch limits, architecture-specific faults, performance.
 */
#ifndef ATTNEXT_CUDA_EMULATE_H
#define ATTNEXT_CUDA_EMULATE_H

#ifdef NN_BLAS_NONE
#include "gemm.h"
#else
#include <cblas.h>
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>

#define __global__ static
#define __device__ static
#define __forceinline__ inline

struct emu_dim {
  unsigned x;
};
static thread_local emu_dim blockIdx, threadIdx, blockDim, gridDim;

/* Which order the next launch runs its threads in: a GPU promises none, so launches alternate
 * between first-to-last and last-to-first by a hash of a launch counter. A kernel whose result
 * depends on its threads' order (atomic additions into a shared target, one thread reading what
 * another writes) then gives different bits from one run to the next, as on a GPU, and the
 * tests that compare two runs see it. */
static inline int emu_reversed(void) {
  static std::atomic<unsigned> launches{0};
  unsigned h = launches.fetch_add(1, std::memory_order_relaxed) * 0x9E3779B1u;
  return (int)((h ^ (h >> 15)) >> 7 & 1u);
}

template <typename F> struct emu_launcher {
  unsigned grid, block;
  F kernel;
  template <typename... A> void operator()(A... args) const {
    gridDim.x = grid;
    blockDim.x = block;
    int reversed = emu_reversed();
    for (unsigned i = 0; i < grid; i++)
      for (unsigned j = 0; j < block; j++) {
        blockIdx.x = reversed ? grid - 1 - i : i;
        threadIdx.x = reversed ? block - 1 - j : j;
        kernel(args...);
      }
  }
};
#define LAUNCH(k, g, b)                                                                            \
  emu_launcher<decltype(&k)> { (unsigned)(g), (unsigned)(b), &k }

static inline float atomicAdd(float *p, float v) {
  float old = *p;
  *p = old + v;
  return old;
}

/* ---- runtime */
typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorMemoryAllocation = 2, cudaErrorInvalidValue = 1 };
typedef void *cudaStream_t;
#define cudaStreamLegacy ((cudaStream_t)0x1)
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2 };
struct cudaDeviceProp {
  char name[256];
  int major, minor;
  size_t totalGlobalMem;
};

static inline const char *cudaGetErrorString(cudaError_t e) {
  return e == cudaErrorMemoryAllocation ? "out of memory (emulated)"
         : e                            ? "invalid argument (emulated)"
                                        : "no error";
}
/* as the runtime: a failed call is also left as the thread's "last error" until read */
static thread_local cudaError_t emu_last_error = cudaSuccess;
static inline cudaError_t cudaGetLastError(void) {
  cudaError_t e = emu_last_error;
  emu_last_error = cudaSuccess;
  return e;
}
/* ATTNEXT_EMU_CUDA_MAX_ALLOC=N: an allocation of more than N bytes fails, as on a small GPU */
static inline cudaError_t cudaMalloc(void **p, size_t bytes) {
  const char *cap = getenv("ATTNEXT_EMU_CUDA_MAX_ALLOC");
  *p = cap && bytes > strtoull(cap, NULL, 10) ? NULL : malloc(bytes);
  if (!*p) emu_last_error = cudaErrorMemoryAllocation;
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
static inline cudaError_t cudaFree(void *p) {
  free(p);
  return cudaSuccess;
}
static inline cudaError_t cudaMemsetAsync(void *p, int v, size_t bytes, cudaStream_t) {
  memset(p, v, bytes);
  return cudaSuccess;
}
static inline cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind) {
  memcpy(dst, src, bytes);
  return cudaSuccess;
}
static inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
static inline cudaError_t cudaGetDeviceCount(int *n) {
  *n = 1;
  return cudaSuccess;
}
static inline cudaError_t cudaGetDevice(int *d) {
  *d = 0;
  return cudaSuccess;
}
static inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int) {
  memset(p, 0, sizeof *p);
  strcpy(p->name, "emulated GPU (host)");
  p->major = 9;
  p->totalGlobalMem = (size_t)1 << 30;
  return cudaSuccess;
}
static inline cudaError_t cudaRuntimeGetVersion(int *v) {
  *v = 0;
  return cudaSuccess;
}

/* ---- cuBLAS */
typedef struct emu_cublas *cublasHandle_t;
typedef int cublasStatus_t;
typedef int cublasMath_t;
typedef int cublasOperation_t;
enum { CUBLAS_STATUS_SUCCESS = 0 };
enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum { CUBLAS_DEFAULT_MATH = 0 };
#define CUBLAS_VER_MAJOR 0

static inline cublasStatus_t cublasCreate_v2(cublasHandle_t *h) {
  *h = (cublasHandle_t)malloc(1);
  return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasDestroy_v2(cublasHandle_t h) {
  free(h);
  return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasSetStream_v2(cublasHandle_t, cudaStream_t) { return 0; }
static inline cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return 0; }
static inline const char *cublasGetStatusString(cublasStatus_t) { return "emulated cuBLAS"; }
static inline cublasStatus_t cublasSgemm_v2(cublasHandle_t, cublasOperation_t ta,
                                            cublasOperation_t tb, int m, int n, int k,
                                            const float *alpha, const float *A, int lda,
                                            const float *B, int ldb, const float *beta, float *C,
                                            int ldc) {
#ifdef NN_BLAS_NONE /* column-major C = op(A) op(B) is row-major C^T = op(B)^T op(A)^T */
  nn_gemm(C, ldc, tb != 0, ta != 0, n, m, k, *alpha, B, ldb, A, lda, *beta);
#else
  cblas_sgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, *alpha, A, lda, B, ldb, *beta, C, ldc);
#endif
  return CUBLAS_STATUS_SUCCESS;
}

#endif
