/* backend_cuda.cu -- the CUDA backend: the operations of backend.h on an NVIDIA GPU, GEMMs on
 * cuBLAS, every other operation in the kernels below. Built by the Makefile, only where nvcc is
 * found, into its own shared object attnext_cuda.so, which backend_load.c opens with dlopen at
 * the first model whose device is "auto" or "cuda"; attnext.so never links the CUDA runtime.
 * The exported symbols are attnext_cuda_backend() (NN_BACKEND_CUDA_ENTRY) and
 * attnext_cuda_backend_abi() (NN_BACKEND_CUDA_ABI, checked first by the loader).
 *
 * Formulas and gate orders are backend_cpu.c's (PyTorch's). Compiled with --fmad=false and
 * without fast math, so every element-wise kernel rounds as the CPU's C code does (expf / tanhf
 * differ by an ulp or two from glibc's), and Adam, whose operations are all correctly rounded,
 * gives the CPU's bits from the same inputs. Reductions:
 *   - GEMMs: cuBLAS, in full float32 (CUBLAS_DEFAULT_MATH: no TF32), its own summation order;
 *   - bias gradients, per-row dot products: one thread / one warp per output, fixed order;
 *   - sums over the rows of a sample (segment softmax and weighted sum, dq of self attention):
 *     one thread per sample (and column), walking its rows in the CPU's order through the
 *     segment layout of backend.h;
 *   - the embedding gradient: one thread per token and column, its rows in order through the
 *     link layout of backend.h.
 * No float atomics anywhere but scatter_add_rows (whose targets the engine never repeats), so a
 * training run on the GPU is deterministic: same seed, same bits.
 *
 * Threads: all work goes to the legacy default stream, whichever host thread issues it, so
 * work is ordered as the host issued it even across threads (the trainer's pool may run a
 * shard on another thread than the one that ran Adam; several threads may predict with one
 * model). Every host thread has its own cuBLAS handle (kept in a pool for later threads when it
 * exits) and its own sticky error (the first failure since the engine last asked, handed over by cuda_error).
 * Memory: cudaMalloc'd (zeroed) device buffers, never managed memory; copies are synchronous
 * cudaMemcpy.
 *
 * Loading: the CUDA runtime is linked statically and cuBLAS is opened with dlopen only once a
 * device is found, so that on a machine without a GPU this library costs a few MB, not the
 * ~200 MB of resident memory that mapping libcublas / libcublasLt costs.
 *
 * Every kernel's threads are independent (no shared memory, barriers or warp shuffles), so that
 * compiled with -DATTNEXT_CUDA_EMULATE by a C++ compiler (tests/cuda_emulate.h) the same source
 * runs on the host, thread after thread: tests/test_cuda_emulated.sh runs test_cuda against it.
 */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#ifdef ATTNEXT_CUDA_EMULATE
#include "cuda_emulate.h" /* the kernels on the host, for tests without a GPU */
#else
#include <cublas_v2.h>
#include <cuda_runtime.h>
#define LAUNCH(k, grid, block) k<<<(grid), (block), 0, STREAM>>>
#endif

extern "C" {
#include "backend.h"
}

#define THREADS 256

/* ---------------------------------------------------------------- errors, handles */

#define STREAM cudaStreamLegacy

/* cuBLAS entry points, from dlopen (see the header) */
static struct {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasDestroy_v2) destroy;
  decltype(&cublasSetStream_v2) set_stream;
  decltype(&cublasSetMathMode) set_math_mode;
  decltype(&cublasSgemm_v2) sgemm;
  decltype(&cublasGetStatusString) status_string;
} cb;

#define STR2(x) #x
#define STR(x) STR2(x)

static int load_cublas(char *why, size_t len) {
#ifdef ATTNEXT_CUDA_EMULATE
  cb.create = cublasCreate_v2;
  cb.destroy = cublasDestroy_v2;
  cb.set_stream = cublasSetStream_v2;
  cb.set_math_mode = cublasSetMathMode;
  cb.sgemm = cublasSgemm_v2;
  cb.status_string = cublasGetStatusString;
  return 1;
#endif
  const char *names[] = {"libcublas.so." STR(CUBLAS_VER_MAJOR), "libcublas.so"};
  void *lib = NULL;
  for (int i = 0; i < 2 && !lib; i++) lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *e = dlerror();
    snprintf(why, len, "cuBLAS: %s", e ? e : "cannot load libcublas");
    return 0;
  }
  cb.create = (decltype(cb.create))dlsym(lib, "cublasCreate_v2");
  cb.destroy = (decltype(cb.destroy))dlsym(lib, "cublasDestroy_v2");
  cb.set_stream = (decltype(cb.set_stream))dlsym(lib, "cublasSetStream_v2");
  cb.set_math_mode = (decltype(cb.set_math_mode))dlsym(lib, "cublasSetMathMode");
  cb.sgemm = (decltype(cb.sgemm))dlsym(lib, "cublasSgemm_v2");
  cb.status_string = (decltype(cb.status_string))dlsym(lib, "cublasGetStatusString");
  if (!cb.create || !cb.destroy || !cb.set_stream || !cb.set_math_mode || !cb.sgemm ||
      !cb.status_string) {
    snprintf(why, len, "cuBLAS: %s lacks a function this build needs", names[0]);
    return 0;
  }
  return 1;
}

/* cuBLAS handles of exited threads, for the next new thread: the extension starts threads per
 * call (attn_classify), and creating a handle costs milliseconds and device memory. */
#define HANDLE_POOL 64
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static cublasHandle_t pool[HANDLE_POOL];
static int pooled;

struct thread_state {
  cublasHandle_t handle;
  int handle_ready;
  int has_error;
  char error[400];
  float *scratch; /* bias_grad's partial sums, grown on demand */
  size_t scratch_cap;
  ~thread_state() {
    if (handle_ready) {
      pthread_mutex_lock(&pool_lock);
      int kept = pooled < HANDLE_POOL;
      if (kept) pool[pooled++] = handle;
      pthread_mutex_unlock(&pool_lock);
      if (!kept) cb.destroy(handle);
    }
    if (scratch) cudaFree(scratch);
  }
};
static thread_local thread_state tls;

static void record(const char *what, const char *message) {
  if (tls.has_error) return; /* the first error is the one that explains the rest */
  snprintf(tls.error, sizeof tls.error, "%s: %s", what, message);
  tls.has_error = 1;
}

/* A failed call also leaves its error as the runtime's "last error", which the next
 * check_launch would report against an innocent kernel: read it back (reset) here. Sticky
 * errors (a faulted context) stay and fail every later call, each reported once per request. */
static void check_cuda(const char *what, cudaError_t e) {
  if (e == cudaSuccess) return;
  record(what, cudaGetErrorString(e));
  (void)cudaGetLastError();
}

/* after a kernel launch: launch errors now, execution errors at the next synchronising call */
static void check_launch(const char *kernel) { check_cuda(kernel, cudaGetLastError()); }

static cublasHandle_t blas(void) {
  if (!tls.handle_ready) {
    pthread_mutex_lock(&pool_lock);
    if (pooled > 0) {
      tls.handle = pool[--pooled];
      tls.handle_ready = 1;
    }
    pthread_mutex_unlock(&pool_lock);
    if (tls.handle_ready) return tls.handle; /* already on STREAM, default math */
    cublasStatus_t s = cb.create(&tls.handle);
    if (s != CUBLAS_STATUS_SUCCESS) {
      record("cublasCreate", cb.status_string(s));
      return NULL;
    }
    cb.set_stream(tls.handle, STREAM);
    cb.set_math_mode(tls.handle, CUBLAS_DEFAULT_MATH); /* float32 throughout, no TF32 */
    tls.handle_ready = 1;
  }
  return tls.handle;
}

/* The calling thread's device scratch of at least n floats (NULL with the error recorded). */
static float *scratch(size_t n) {
  if (n > tls.scratch_cap) {
    if (tls.scratch) cudaFree(tls.scratch);
    tls.scratch = NULL;
    tls.scratch_cap = 0;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, n * sizeof(float));
    if (e != cudaSuccess) {
      check_cuda("cudaMalloc (scratch)", e);
      return NULL;
    }
    tls.scratch = (float *)p;
    tls.scratch_cap = n;
  }
  return tls.scratch;
}

static int cuda_error(char *msg, size_t len) {
  if (!tls.has_error) return 0;
  if (msg && len) snprintf(msg, len, "%s", tls.error);
  tls.has_error = 0;
  return 1;
}

static unsigned grid_for(size_t n) {
  size_t blocks = (n + THREADS - 1) / THREADS;
  if (blocks < 1) blocks = 1;
  return blocks > 65535 ? 65535u : (unsigned)blocks; /* the kernels loop over the rest */
}

#define GRID_LOOP(i, n)                                                                            \
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n);                          \
       i += (size_t)gridDim.x * blockDim.x)

/* ---------------------------------------------------------------- memory */

static void *cuda_alloc(size_t bytes) {
  void *p = NULL;
  cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
  if (e != cudaSuccess) {
    check_cuda("cudaMalloc", e);
    return NULL;
  }
  e = cudaMemsetAsync(p, 0, bytes ? bytes : 1, STREAM);
  if (e != cudaSuccess) {
    check_cuda("cudaMemset", e);
    cudaFree(p);
    return NULL;
  }
  return p;
}

static void cuda_free(void *p) {
  if (p) check_cuda("cudaFree", cudaFree(p));
}

static void cuda_upload(void *dst, const void *src, size_t bytes) {
  /* synchronous: the host may reuse src at once (legacy default stream, ordered with kernels) */
  if (bytes) check_cuda("cudaMemcpy (upload)", cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}

static void cuda_download(void *dst, const void *src, size_t bytes) {
  if (bytes)
    check_cuda("cudaMemcpy (download)", cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

static void cuda_zero(float *x, size_t n) {
  if (n) check_cuda("cudaMemset", cudaMemsetAsync(x, 0, n * sizeof(float), STREAM));
}

/* ---------------------------------------------------------------- GEMM */

__global__ void k_scale_matrix(float *C, int ldc, int M, int N, float beta) {
  GRID_LOOP(i, (size_t)M * N) {
    size_t r = i / N, c = i % N;
    float *x = C + r * ldc + c;
    *x = beta == 0.0f ? 0.0f : beta * *x;
  }
}

/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the same buffers with the
 * operands swapped and M, N exchanged. */
static void cuda_sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                       int lda, const float *B, int ldb, float beta, float *C, int ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    LAUNCH(k_scale_matrix, grid_for((size_t)M * N), THREADS)(C, ldc, M, N, beta);
    check_launch("scale_matrix");
    return;
  }
  cublasHandle_t h = blas();
  if (!h) return;
  cublasStatus_t s =
      cb.sgemm(h, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K,
               &alpha, B, ldb, A, lda, &beta, C, ldc);
  if (s != CUBLAS_STATUS_SUCCESS) record("cublasSgemm", cb.status_string(s));
}

/* ---------------------------------------------------------------- rows, biases, element-wise */

__global__ void k_gather_rows(float *dst, int ldd, const float *src, int lds, const int *idx,
                              int rows, int cols) {
  GRID_LOOP(i, (size_t)rows * cols) {
    size_t r = i / cols, c = i % cols;
    size_t from = idx ? (size_t)idx[r] : r;
    dst[r * ldd + c] = src[from * lds + c];
  }
}
static void cuda_gather_rows(float *dst, int ldd, const float *src, int lds, const int *idx,
                             int rows, int cols) {
  if (rows <= 0 || cols <= 0) return;
  LAUNCH(k_gather_rows, grid_for((size_t)rows * cols), THREADS)
  (dst, ldd, src, lds, idx, rows, cols);
  check_launch("gather_rows");
}

__global__ void k_gather_add_rows(float *dst, int ldd, const float *src, int lds, const int *idx,
                                  int rows, int cols) {
  GRID_LOOP(i, (size_t)rows * cols) {
    size_t r = i / cols, c = i % cols;
    dst[r * ldd + c] += src[(size_t)idx[r] * lds + c];
  }
}
static void cuda_gather_add_rows(float *dst, int ldd, const float *src, int lds, const int *idx,
                                 int rows, int cols) {
  if (rows <= 0 || cols <= 0) return;
  LAUNCH(k_gather_add_rows, grid_for((size_t)rows * cols), THREADS)
  (dst, ldd, src, lds, idx, rows, cols);
  check_launch("gather_add_rows");
}

/* The engine scatters through permutations (rev) and distinct rows (last_row): each target gets
 * one addition, so the atomics cost nothing in determinism; they keep repeated indices right. */
__global__ void k_scatter_add_rows(float *dst, int ldd, const float *src, int lds, const int *idx,
                                   int rows, int cols) {
  GRID_LOOP(i, (size_t)rows * cols) {
    size_t r = i / cols, c = i % cols;
    size_t to = idx ? (size_t)idx[r] : r;
    atomicAdd(dst + to * ldd + c, src[r * lds + c]);
  }
}
static void cuda_scatter_add_rows(float *dst, int ldd, const float *src, int lds, const int *idx,
                                  int rows, int cols) {
  if (rows <= 0 || cols <= 0) return;
  LAUNCH(k_scatter_add_rows, grid_for((size_t)rows * cols), THREADS)
  (dst, ldd, src, lds, idx, rows, cols);
  check_launch("scatter_add_rows");
}

__global__ void k_add_bias(float *y, int ld, const float *bias, int rows, int cols) {
  GRID_LOOP(i, (size_t)rows * cols) {
    size_t r = i / cols, c = i % cols;
    y[r * ld + c] += bias[c];
  }
}
static void cuda_add_bias(float *y, int ld, const float *bias, int rows, int cols) {
  if (rows <= 0 || cols <= 0) return;
  LAUNCH(k_add_bias, grid_for((size_t)rows * cols), THREADS)(y, ld, bias, rows, cols);
  check_launch("add_bias");
}

/* dbias[c] += sum_r dy[r, c], deterministic: few rows, one thread per column over the rows in
 * order (the CPU's order); many rows, partial sums over chunks of rows (one thread per chunk
 * and column) into the thread's scratch buffer, then one thread per column over the chunks. */
#define BIAS_CHUNK 256
__global__ void k_bias_grad_columns(float *dbias, const float *dy, int ld, int rows, int cols) {
  GRID_LOOP(c, (size_t)cols) {
    float s = 0.0f;
    for (int r = 0; r < rows; r++) s += dy[(size_t)r * ld + c];
    dbias[c] += s;
  }
}
__global__ void k_bias_grad_partial(float *part, const float *dy, int ld, int rows, int cols) {
  int chunks = (rows + BIAS_CHUNK - 1) / BIAS_CHUNK;
  GRID_LOOP(i, (size_t)chunks * cols) {
    size_t ch = i / cols, c = i % cols;
    int end = (int)(ch + 1) * BIAS_CHUNK < rows ? (int)(ch + 1) * BIAS_CHUNK : rows;
    float s = 0.0f;
    for (int r = (int)ch * BIAS_CHUNK; r < end; r++) s += dy[(size_t)r * ld + c];
    part[i] = s;
  }
}
__global__ void k_bias_grad_finish(float *dbias, const float *part, int chunks, int cols) {
  GRID_LOOP(c, (size_t)cols) {
    float s = 0.0f;
    for (int ch = 0; ch < chunks; ch++) s += part[(size_t)ch * cols + c];
    dbias[c] += s;
  }
}
static float *scratch(size_t n);
static void cuda_bias_grad(float *dbias, const float *dy, int ld, int rows, int cols) {
  if (rows <= 0 || cols <= 0) return;
  int chunks = (rows + BIAS_CHUNK - 1) / BIAS_CHUNK;
  float *part = cols < 1024 && chunks > 1 ? scratch((size_t)chunks * cols) : NULL;
  if (part) {
    LAUNCH(k_bias_grad_partial, grid_for((size_t)chunks * cols), THREADS)(part, dy, ld, rows, cols);
    LAUNCH(k_bias_grad_finish, grid_for(cols), THREADS)(dbias, part, chunks, cols);
  } else {
    LAUNCH(k_bias_grad_columns, grid_for(cols), THREADS)(dbias, dy, ld, rows, cols);
  }
  check_launch("bias_grad");
}

__global__ void k_tanh_forward(float *y, size_t n) { GRID_LOOP(i, n) y[i] = tanhf(y[i]); }
static void cuda_tanh_forward(float *y, size_t n) {
  if (!n) return;
  LAUNCH(k_tanh_forward, grid_for(n), THREADS)(y, n);
  check_launch("tanh_forward");
}

__global__ void k_tanh_backward(float *dx, const float *dy, const float *y, size_t n) {
  GRID_LOOP(i, n) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}
static void cuda_tanh_backward(float *dx, const float *dy, const float *y, size_t n) {
  if (!n) return;
  LAUNCH(k_tanh_backward, grid_for(n), THREADS)(dx, dy, y, n);
  check_launch("tanh_backward");
}

__global__ void k_mul(float *y, const float *x, const float *mask, size_t n) {
  GRID_LOOP(i, n) y[i] = x[i] * mask[i];
}
static void cuda_mul(float *y, const float *x, const float *mask, size_t n) {
  if (!n) return;
  LAUNCH(k_mul, grid_for(n), THREADS)(y, x, mask, n);
  check_launch("mul");
}

/* ---------------------------------------------------------------- recurrent cells */

__global__ void k_rnn_forward(float *h, const float *pre, size_t n) {
  GRID_LOOP(i, n) h[i] = tanhf(pre[i]);
}
static void cuda_rnn_step_forward(float *h, float *pre, int n, int H) {
  size_t count = (size_t)n * H;
  if (!count) return;
  LAUNCH(k_rnn_forward, grid_for(count), THREADS)(h, pre, count);
  check_launch("rnn_step_forward");
}

static void cuda_rnn_step_backward(float *dpre, const float *dh, const float *h, int n, int H) {
  cuda_tanh_backward(dpre, dh, h, (size_t)n * H);
}

__global__ void k_gru_forward(float *h, float *pre, const float *hw, const float *h_prev, int n,
                              int H) {
  GRID_LOOP(i, (size_t)n * H) {
    size_t b = i / H, k = i % H;
    float *x = pre + b * 3 * H;
    const float *u = hw + b * 3 * H;
    float hp = h_prev ? h_prev[b * H + k] : 0.0f;
    float r = 1.0f / (1.0f + expf(-(x[k] + u[k])));
    float z = 1.0f / (1.0f + expf(-(x[H + k] + u[H + k])));
    float g = tanhf(x[2 * H + k] + r * u[2 * H + k]);
    x[k] = r;
    x[H + k] = z;
    x[2 * H + k] = g;
    h[b * H + k] = (1.0f - z) * g + z * hp;
  }
}
static void cuda_gru_step_forward(float *h, float *pre, const float *hw, const float *h_prev, int n,
                                  int H) {
  if (n <= 0) return;
  LAUNCH(k_gru_forward, grid_for((size_t)n * H), THREADS)(h, pre, hw, h_prev, n, H);
  check_launch("gru_step_forward");
}

__global__ void k_gru_backward(float *dx, float *dhw, float *dh_prev, const float *dh,
                               const float *gates, const float *hw, const float *h_prev, int n,
                               int H) {
  GRID_LOOP(i, (size_t)n * H) {
    size_t b = i / H, k = i % H;
    const float *gt = gates + b * 3 * H, *u = hw + b * 3 * H;
    float hp = h_prev ? h_prev[b * H + k] : 0.0f, d = dh[b * H + k];
    float r = gt[k], z = gt[H + k], g = gt[2 * H + k];
    float dg = d * (1.0f - z);
    float dz = d * (hp - g);
    float dg_pre = dg * (1.0f - g * g);
    float dr = dg_pre * u[2 * H + k];
    float dr_pre = dr * r * (1.0f - r);
    float dz_pre = dz * z * (1.0f - z);
    float *dxo = dx + b * 3 * H, *dho = dhw + b * 3 * H;
    dxo[k] = dr_pre;
    dxo[H + k] = dz_pre;
    dxo[2 * H + k] = dg_pre;
    dho[k] = dr_pre;
    dho[H + k] = dz_pre;
    dho[2 * H + k] = dg_pre * r;
    if (dh_prev) dh_prev[b * H + k] += d * z;
  }
}
static void cuda_gru_step_backward(float *dx, float *dhw, float *dh_prev, const float *dh,
                                   const float *gates, const float *hw, const float *h_prev, int n,
                                   int H) {
  if (n <= 0) return;
  LAUNCH(k_gru_backward, grid_for((size_t)n * H), THREADS)
  (dx, dhw, dh_prev, dh, gates, hw, h_prev, n, H);
  check_launch("gru_step_backward");
}

__global__ void k_lstm_forward(float *h, float *c, float *pre, const float *c_prev, int n, int H) {
  GRID_LOOP(idx, (size_t)n * H) {
    size_t b = idx / H, k = idx % H;
    float *x = pre + b * 4 * H;
    float cp = c_prev ? c_prev[b * H + k] : 0.0f;
    float i = 1.0f / (1.0f + expf(-x[k])), f = 1.0f / (1.0f + expf(-x[H + k]));
    float g = tanhf(x[2 * H + k]), o = 1.0f / (1.0f + expf(-x[3 * H + k]));
    x[k] = i;
    x[H + k] = f;
    x[2 * H + k] = g;
    x[3 * H + k] = o;
    float cn = f * cp + i * g;
    c[b * H + k] = cn;
    h[b * H + k] = o * tanhf(cn);
  }
}
static void cuda_lstm_step_forward(float *h, float *c, float *pre, const float *c_prev, int n,
                                   int H) {
  if (n <= 0) return;
  LAUNCH(k_lstm_forward, grid_for((size_t)n * H), THREADS)(h, c, pre, c_prev, n, H);
  check_launch("lstm_step_forward");
}

__global__ void k_lstm_backward(float *dpre, float *dc_prev, const float *dh, const float *dc,
                                const float *gates, const float *c, const float *c_prev, int n,
                                int H) {
  GRID_LOOP(idx, (size_t)n * H) {
    size_t b = idx / H, k = idx % H;
    const float *gt = gates + b * 4 * H;
    float i = gt[k], f = gt[H + k], g = gt[2 * H + k], o = gt[3 * H + k];
    float d = dh[b * H + k], tc = tanhf(c[b * H + k]);
    float cp = c_prev ? c_prev[b * H + k] : 0.0f;
    float dct = dc[b * H + k] + d * o * (1.0f - tc * tc);
    float *dp = dpre + b * 4 * H;
    dp[k] = dct * g * i * (1.0f - i);
    dp[H + k] = dct * cp * f * (1.0f - f);
    dp[2 * H + k] = dct * i * (1.0f - g * g);
    dp[3 * H + k] = d * tc * o * (1.0f - o);
    if (dc_prev) dc_prev[b * H + k] += dct * f;
  }
}
static void cuda_lstm_step_backward(float *dpre, float *dc_prev, const float *dh, const float *dc,
                                    const float *gates, const float *c, const float *c_prev, int n,
                                    int H) {
  if (n <= 0) return;
  LAUNCH(k_lstm_backward, grid_for((size_t)n * H), THREADS)
  (dpre, dc_prev, dh, dc, gates, c, c_prev, n, H);
  check_launch("lstm_step_backward");
}

/* ---------------------------------------------------------------- attention over packed rows */

/* Sample b's rows in order: r = off[t] + b for t < lens[b], where lens and off follow the P
 * ints of row_sample (backend.h's segment layout). One thread per sample (or per sample and
 * column) walks them in the CPU's order: no atomics, the same sums from run to run, and the
 * CPU's summation order. */
#define SEGMENT(rs, P, B) const int *lens = (rs) + (P), *off = (rs) + (P) + (B)

__global__ void k_segment_softmax(float *alpha, const float *e, const int *row_sample, int P,
                                  int B) {
  SEGMENT(row_sample, P, B);
  GRID_LOOP(b, (size_t)B) {
    int len = lens[b];
    float mx = -INFINITY, sum = 0.0f;
    for (int t = 0; t < len; t++) {
      float x = e[off[t] + b];
      if (x > mx) mx = x;
    }
    for (int t = 0; t < len; t++) {
      size_t r = off[t] + b;
      float a = expf(e[r] - mx);
      alpha[r] = a;
      sum += a;
    }
    for (int t = 0; t < len; t++) alpha[off[t] + b] /= sum;
  }
}
static void cuda_segment_softmax(float *alpha, const float *e, const int *row_sample, int P, int B,
                                 float *scratch) {
  if (P <= 0 || B <= 0) return;
  LAUNCH(k_segment_softmax, grid_for(B), THREADS)(alpha, e, row_sample, P, B);
  check_launch("segment_softmax");
}

__global__ void k_segment_softmax_back(float *de, const float *dalpha, const float *alpha,
                                       const int *row_sample, int P, int B) {
  SEGMENT(row_sample, P, B);
  GRID_LOOP(b, (size_t)B) {
    int len = lens[b];
    float dot = 0.0f;
    for (int t = 0; t < len; t++) {
      size_t r = off[t] + b;
      dot += alpha[r] * dalpha[r];
    }
    for (int t = 0; t < len; t++) {
      size_t r = off[t] + b;
      de[r] = alpha[r] * (dalpha[r] - dot);
    }
  }
}
static void cuda_segment_softmax_backward(float *de, const float *dalpha, const float *alpha,
                                          const int *row_sample, int P, int B, float *scratch) {
  if (P <= 0 || B <= 0) return;
  LAUNCH(k_segment_softmax_back, grid_for(B), THREADS)(de, dalpha, alpha, row_sample, P, B);
  check_launch("segment_softmax_backward");
}

/* ctx[b, k] = sum_t alpha[r] v[r, k]: one thread per (b, k), adjacent threads adjacent k */
__global__ void k_segment_weighted_sum(float *ctx, const float *alpha, const float *v, int ldv,
                                       const int *row_sample, int P, int B, int D) {
  SEGMENT(row_sample, P, B);
  GRID_LOOP(i, (size_t)B * D) {
    size_t b = i / D, k = i % D;
    int len = lens[b];
    float c = 0.0f;
    for (int t = 0; t < len; t++) {
      size_t r = off[t] + b;
      c += alpha[r] * v[r * ldv + k];
    }
    ctx[i] = c;
  }
}
static void cuda_segment_weighted_sum(float *ctx, const float *alpha, const float *v, int ldv,
                                      const int *row_sample, int P, int B, int D) {
  if (B <= 0 || D <= 0) return;
  if (P <= 0) {
    cuda_zero(ctx, (size_t)B * D);
    return;
  }
  LAUNCH(k_segment_weighted_sum, grid_for((size_t)B * D), THREADS)
  (ctx, alpha, v, ldv, row_sample, P, B, D);
  check_launch("segment_weighted_sum");
}

/* dv[r, k] (=|+=) alpha[r] dctx[b, k] element-wise; dalpha[r] = dctx[b] . v[r], one thread
 * per row in the CPU's order */
__global__ void k_wsum_back_dv(float *dv, int ldv, int add, const float *dctx, const float *alpha,
                               const int *row_sample, int P, int D) {
  GRID_LOOP(i, (size_t)P * D) {
    size_t r = i / D, k = i % D;
    float *d = dv + r * ldv + k;
    *d = (add ? *d : 0.0f) + alpha[r] * dctx[(size_t)row_sample[r] * D + k];
  }
}
__global__ void k_wsum_back_dalpha(float *dalpha, const float *dctx, const float *v, int ldv,
                                   const int *row_sample, int P, int D) {
  GRID_LOOP(r, (size_t)P) {
    const float *dc = dctx + (size_t)row_sample[r] * D, *vr = v + r * ldv;
    float dot = 0.0f;
    for (int k = 0; k < D; k++) dot += dc[k] * vr[k];
    dalpha[r] = dot;
  }
}
static void cuda_segment_weighted_sum_backward(float *dv, int ldv, int add, float *dalpha,
                                               const float *dctx, const float *alpha,
                                               const float *v, const int *row_sample, int P, int B,
                                               int D) {
  if (P <= 0 || D <= 0) return;
  /* dalpha reads v before dv overwrites it when they are the same buffer */
  LAUNCH(k_wsum_back_dalpha, grid_for(P), THREADS)(dalpha, dctx, v, ldv, row_sample, P, D);
  LAUNCH(k_wsum_back_dv, grid_for((size_t)P * D), THREADS)
  (dv, ldv, add, dctx, alpha, row_sample, P, D);
  check_launch("segment_weighted_sum_backward");
}

/* e[r] = scale (q[b] . k[r]), one thread per row in the CPU's order */
__global__ void k_segment_dot(float *e, const float *q, const float *k, int ldk,
                              const int *row_sample, int P, int D, float scale) {
  GRID_LOOP(r, (size_t)P) {
    const float *qb = q + (size_t)row_sample[r] * D, *kr = k + r * ldk;
    float dot = 0.0f;
    for (int i = 0; i < D; i++) dot += qb[i] * kr[i];
    e[r] = scale * dot;
  }
}
static void cuda_segment_dot(float *e, const float *q, const float *k, int ldk,
                             const int *row_sample, int P, int D, float scale) {
  if (P <= 0) return;
  LAUNCH(k_segment_dot, grid_for(P), THREADS)(e, q, k, ldk, row_sample, P, D, scale);
  check_launch("segment_dot");
}

/* dk[r] = scale de[r] q[b] element-wise; dq[b, k] += sum_t scale de[r] k[r, k], one thread per
 * (b, k) in the CPU's order */
__global__ void k_segment_dk(float *dk, const float *de, const float *q, int ldk,
                             const int *row_sample, int P, int D, float scale) {
  GRID_LOOP(i, (size_t)P * D) {
    size_t r = i / D, c = i % D;
    dk[r * ldk + c] = (scale * de[r]) * q[(size_t)row_sample[r] * D + c];
  }
}
__global__ void k_segment_dq(float *dq, const float *de, const float *k, int ldk,
                             const int *row_sample, int P, int B, int D, float scale) {
  SEGMENT(row_sample, P, B);
  GRID_LOOP(i, (size_t)B * D) {
    size_t b = i / D, c = i % D;
    int len = lens[b];
    float acc = dq[i];
    for (int t = 0; t < len; t++) {
      size_t r = off[t] + b;
      acc += (scale * de[r]) * k[r * ldk + c];
    }
    dq[i] = acc;
  }
}
static void cuda_segment_dot_backward(float *dq, float *dk, const float *de, const float *q,
                                      const float *k, int ldk, const int *row_sample, int P, int B,
                                      int D, float scale) {
  if (P <= 0 || D <= 0) return;
  LAUNCH(k_segment_dq, grid_for((size_t)B * D), THREADS)
  (dq, de, k, ldk, row_sample, P, B, D, scale);
  LAUNCH(k_segment_dk, grid_for((size_t)P * D), THREADS)(dk, de, q, ldk, row_sample, P, D, scale);
  check_launch("segment_dot_backward");
}

/* ---------------------------------------------------------------- embedding */

static void cuda_embedding_forward(float *x, const float *table, const int *ids, int P, int E) {
  cuda_gather_rows(x, E, table, E, ids, P, E);
}

/* One thread per (first row of a token, column): the token's rows in order through the link
 * layout of backend.h, added to dtable as the CPU adds them (bit-identical), no atomics. */
__global__ void k_embedding_back(float *dtable, const float *dx, const int *ids, int P, int E,
                                 int skip_id) {
  const int *link = ids + P;
  GRID_LOOP(i, (size_t)P * E) {
    size_t r = i / E, c = i % E;
    int id = ids[r];
    if (!(link[r] & 1) || id == skip_id) continue;
    float *d = dtable + (size_t)id * E + c;
    float acc = *d;
    for (long q = (long)r; q >= 0; q = (long)(link[q] >> 1) - 1) acc += dx[(size_t)q * E + c];
    *d = acc;
  }
}
static void cuda_embedding_backward(float *dtable, const float *dx, const int *ids, int P, int E,
                                    int skip_id) {
  if (P <= 0 || E <= 0) return;
  LAUNCH(k_embedding_back, grid_for((size_t)P * E), THREADS)(dtable, dx, ids, P, E, skip_id);
  check_launch("embedding_backward");
}

/* ---------------------------------------------------------------- optimizer, reduction */

/* adam.c's adam_update_one, operation for operation (no contraction: --fmad=false) */
__global__ void k_adam(float *params, float *m, float *v, const float *grads, size_t n, float beta1,
                       float one_minus_beta1, float beta2, float one_minus_beta2, float bc2_sqrt,
                       float eps, float neg_step_size) {
  GRID_LOOP(i, n) {
    float g = grads[i];
    float mi = fmaf(g, one_minus_beta1, m[i] * beta1);
    float vi = fmaf(one_minus_beta2 * g, g, v[i] * beta2);
    float denom = sqrtf(vi) / bc2_sqrt + eps;
    params[i] = params[i] + (neg_step_size * mi) / denom;
    m[i] = mi;
    v[i] = vi;
  }
}
static void cuda_adam_step(float *params, float *m, float *v, const float *grads, size_t n,
                           float beta1, float one_minus_beta1, float beta2, float one_minus_beta2,
                           float bc2_sqrt, float eps, float neg_step_size) {
  if (!n) return;
  LAUNCH(k_adam, grid_for(n), THREADS)
  (params, m, v, grads, n, beta1, one_minus_beta1, beta2, one_minus_beta2, bc2_sqrt, eps,
   neg_step_size);
  check_launch("adam_step");
}

__global__ void k_axpy(float *y, const float *x, size_t n) { GRID_LOOP(i, n) y[i] += x[i]; }
static void cuda_axpy(float *y, const float *x, size_t n) {
  if (!n) return;
  LAUNCH(k_axpy, grid_for(n), THREADS)(y, x, n);
  check_launch("axpy");
}

/* ---------------------------------------------------------------- the table */

static char device_line[400];

static const char *cuda_describe(char *buf, size_t len) {
  snprintf(buf, len, "%s", device_line);
  return buf;
}

static nn_backend table;

__global__ void k_probe(int *x) {
  if (x) *x = 1;
}

/* The ABI this library was built for (engine/backend.h): backend_load.c compares it and the
 * table's size with its own before it calls attnext_cuda_backend. */
extern "C" NN_EXPORT unsigned attnext_cuda_backend_abi(size_t *table_size) {
  *table_size = sizeof(nn_backend);
  return NN_BACKEND_ABI;
}

/* Whether this machine can run the backend: a device, a context, a kernel of this build's
 * architectures, a cuBLAS handle. NULL with the reason otherwise. Called once per process
 * (backend_load.c). */
extern "C" NN_EXPORT const nn_backend *attnext_cuda_backend(char *why, size_t len) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    snprintf(why, len, "cudaGetDeviceCount: %s", cudaGetErrorString(e));
    return NULL;
  }
  if (count < 1) {
    snprintf(why, len, "cudaGetDeviceCount: no device");
    return NULL;
  }
  int dev = 0;
  cudaDeviceProp prop;
  if ((e = cudaGetDevice(&dev)) != cudaSuccess ||
      (e = cudaGetDeviceProperties(&prop, dev)) != cudaSuccess) {
    snprintf(why, len, "cudaGetDeviceProperties: %s", cudaGetErrorString(e));
    return NULL;
  }
  LAUNCH(k_probe, 1, 1)((int *)NULL);
  if ((e = cudaGetLastError()) != cudaSuccess ||
      (e = cudaStreamSynchronize(STREAM)) != cudaSuccess) {
    snprintf(why, len, "%s (compute capability %d.%d): %s", prop.name, prop.major, prop.minor,
             cudaGetErrorString(e));
    return NULL;
  }
  if (!load_cublas(why, len)) return NULL;
  if (!blas()) {
    snprintf(why, len, "%s", tls.error);
    tls.has_error = 0;
    return NULL;
  }
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  snprintf(device_line, sizeof device_line,
           "%s (compute capability %d.%d, %.0f GiB, %d devices), CUDA runtime %d.%d", prop.name,
           prop.major, prop.minor, prop.totalGlobalMem / 1073741824.0, count, runtime / 1000,
           runtime % 1000 / 10);
  table.name = "cuda";
  table.alloc = cuda_alloc;
  table.free = cuda_free;
  table.upload = cuda_upload;
  table.download = cuda_download;
  table.zero = cuda_zero;
  table.sgemm = cuda_sgemm;
  table.gather_rows = cuda_gather_rows;
  table.gather_add_rows = cuda_gather_add_rows;
  table.scatter_add_rows = cuda_scatter_add_rows;
  table.add_bias = cuda_add_bias;
  table.bias_grad = cuda_bias_grad;
  table.tanh_forward = cuda_tanh_forward;
  table.tanh_backward = cuda_tanh_backward;
  table.mul = cuda_mul;
  table.rnn_step_forward = cuda_rnn_step_forward;
  table.rnn_step_backward = cuda_rnn_step_backward;
  table.gru_step_forward = cuda_gru_step_forward;
  table.gru_step_backward = cuda_gru_step_backward;
  table.lstm_step_forward = cuda_lstm_step_forward;
  table.lstm_step_backward = cuda_lstm_step_backward;
  table.segment_softmax = cuda_segment_softmax;
  table.segment_softmax_backward = cuda_segment_softmax_backward;
  table.segment_weighted_sum = cuda_segment_weighted_sum;
  table.segment_weighted_sum_backward = cuda_segment_weighted_sum_backward;
  table.segment_dot = cuda_segment_dot;
  table.segment_dot_backward = cuda_segment_dot_backward;
  table.embedding_forward = cuda_embedding_forward;
  table.embedding_backward = cuda_embedding_backward;
  table.device_memory = 1;
  table.error = cuda_error;
  table.adam_step = cuda_adam_step;
  table.axpy = cuda_axpy;
  table.describe = cuda_describe;
  return &table;
}
