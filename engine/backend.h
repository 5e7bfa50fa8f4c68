/* backend.h -- the compute backend interface of the engine.
 *
 * The layers (recurrent.c, attention.c, and the head in model.c) do no arithmetic on tensors themselves:
 * they call these operations, so a CUDA backend plugs in by filling the same table with device
 * implementations. All tensors are row-major float32; `ld*` are row strides in floats. Index
 * arrays (int) live in the backend's memory too. The backend knows nothing of models.
 *
 * Convention: "_add" / "accumulate" operations do +=, everything else overwrites.
 *
 * Device backends (device_memory = 1, e.g. CUDA in attnext_cuda.so, loaded by backend_load.c):
 * pointers passed to the operations are backend memory the host must not dereference; the
 * engine keeps host copies of what host code reads (model.c) and moves data with upload /
 * download. Operations return nothing: a device backend records the first failure of the
 * calling thread (a sticky error) and `error` hands it over once, so model.c turns it into
 * NN_ERROR with the backend's message after each forward / backward / optimizer step.
 * The fields after embedding_backward are optional (NULL in the CPU table): the engine then
 * runs its own host code, which is what the CPU backend would do.
 */
#ifndef ATTNEXT_BACKEND_H
#define ATTNEXT_BACKEND_H

#include <stddef.h>

typedef struct nn_backend {
  const char *name;
  /* memory: zeroed allocations; NULL on failure */
  void *(*alloc)(size_t bytes);
  void (*free)(void *ptr);
  void (*upload)(void *dst, const void *host_src, size_t bytes);   /* host -> backend */
  void (*download)(void *host_dst, const void *src, size_t bytes); /* backend -> host */
  void (*zero)(float *x, size_t n);

  /* C (M,N) = alpha * op(A) op(B) + beta * C, op = transpose when trans_* is set */
  void (*sgemm)(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                const float *B, int ldb, float beta, float *C, int ldc);

  /* dst[i, :cols] = src[idx ? idx[i] : i, :cols] for i < rows */
  void (*gather_rows)(float *dst, int ldd, const float *src, int lds, const int *idx, int rows,
                      int cols);
  /* dst[i, :cols] += src[idx[i], :cols] for i < rows */
  void (*gather_add_rows)(float *dst, int ldd, const float *src, int lds, const int *idx, int rows,
                          int cols);
  /* dst[idx ? idx[i] : i, :cols] += src[i, :cols] (sequential in i: deterministic) */
  void (*scatter_add_rows)(float *dst, int ldd, const float *src, int lds, const int *idx, int rows,
                           int cols);
  /* y[i, :] += bias for i < rows */
  void (*add_bias)(float *y, int ld, const float *bias, int rows, int cols);
  /* dbias += sum_i dy[i, :] */
  void (*bias_grad)(float *dbias, const float *dy, int ld, int rows, int cols);
  /* y = tanh(y) in place; dx = dy * (1 - y^2) (dx may alias dy) */
  void (*tanh_forward)(float *y, size_t n);
  void (*tanh_backward)(float *dx, const float *dy, const float *y, size_t n);
  /* dropout with an explicit mask of 0 or 1/(1-p) values: y = x * mask; dx = dy * mask */
  void (*mul)(float *y, const float *x, const float *mask, size_t n);

  /* ---- recurrent cells, one time step over n rows. pre: (n, G*H) pre-activations with the
   * input projection and (rnn, lstm) both biases added, overwritten by the activated gates. */
  /* rnn: pre (n,H) += h_prev W_hh^T already; h = tanh(pre) */
  void (*rnn_step_forward)(float *h, float *pre, int n, int H);
  /* dpre = (dh) * (1 - h^2) */
  void (*rnn_step_backward)(float *dpre, const float *dh, const float *h, int n, int H);
  /* gru: pre (n,3H) input part [r z n] (+b_ih); hw (n,3H) = h_prev W_hh^T + b_hh; h_prev may be
   * NULL (zeros). Overwrites pre with activated [r z n]. */
  void (*gru_step_forward)(float *h, float *pre, const float *hw, const float *h_prev, int n,
                           int H);
  /* dx (n,3H) = grads of the input part, dhw (n,3H) = grads of hw; dh_prev (n,H) += direct part
   * dh * z (the W_hh part is added by a GEMM) -- NULL when h_prev is NULL. */
  void (*gru_step_backward)(float *dx, float *dhw, float *dh_prev, const float *dh,
                            const float *gates, const float *hw, const float *h_prev, int n, int H);
  /* lstm: pre (n,4H) [i f g o] -> activated; c = f c_prev + i g; h = o tanh(c) */
  void (*lstm_step_forward)(float *h, float *c, float *pre, const float *c_prev, int n, int H);
  /* dc: (n,H) in: carried cell gradient, out: used; dc_prev (n,H) += dc * f (NULL at t = 0) */
  void (*lstm_step_backward)(float *dpre, float *dc_prev, const float *dh, const float *dc,
                             const float *gates, const float *c, const float *c_prev, int n, int H);

  /* ---- attention over packed rows. Row r belongs to sample row_sample[r]; samples are
   * contiguous per step, see model.h. Segment layout: the P ints of row_sample are followed in
   * memory by lens (B ints: each sample's length, descending) and off (lens[0] + 1 ints: the
   * first row of each step), so a backend may walk sample b's rows in order as
   * r = off[t] + b for t < lens[b] (the CUDA backend does: one thread per sample, no atomics). */
  /* alpha[r] = softmax over the rows of each sample of e (in place allowed), B samples;
   * scratch: (2B) floats */
  void (*segment_softmax)(float *alpha, const float *e, const int *row_sample, int P, int B,
                          float *scratch);
  /* de[r] = alpha[r] * (dalpha[r] - sum_{r' in sample} alpha[r'] dalpha[r']); scratch (B) */
  void (*segment_softmax_backward)(float *de, const float *dalpha, const float *alpha,
                                   const int *row_sample, int P, int B, float *scratch);
  /* ctx[b, :] = sum_{r in b} alpha[r] v[r, :]   (ctx (B,D) overwritten) */
  void (*segment_weighted_sum)(float *ctx, const float *alpha, const float *v, int ldv,
                               const int *row_sample, int P, int B, int D);
  /* dv[r, :] (=) alpha[r] * dctx[b, :] (accumulate when add != 0); dalpha[r] = dctx[b] . v[r] */
  void (*segment_weighted_sum_backward)(float *dv, int ldv, int add, float *dalpha,
                                        const float *dctx, const float *alpha, const float *v,
                                        const int *row_sample, int P, int B, int D);
  /* e[r] = scale * (q[b] . k[r]) with b = row_sample[r] */
  void (*segment_dot)(float *e, const float *q, const float *k, int ldk, const int *row_sample,
                      int P, int D, float scale);
  /* dq[b] += scale * sum_r de[r] k[r];  dk[r] = scale * de[r] q[b] */
  void (*segment_dot_backward)(float *dq, float *dk, const float *de, const float *q,
                               const float *k, int ldk, const int *row_sample, int P, int B, int D,
                               float scale);

  /* ---- embedding: x[r] = table[ids[r]]; dtable[ids[r]] += dx[r] except ids[r] == skip_id.
   * Link layout (for embedding_backward): the P ints of ids are followed by link (P ints):
   * link[r] >> 1 is 1 + the next row r' > r with ids[r'] == ids[r] (0: none), link[r] & 1 is
   * set on the first row of each token, so a backend may sum a token's rows in order without
   * atomics (the CUDA backend does: bit-identical to the CPU's sequential sum). */
  void (*embedding_forward)(float *x, const float *table, const int *ids, int P, int E);
  void (*embedding_backward)(float *dtable, const float *dx, const int *ids, int P, int E,
                             int skip_id);

  /* ---- optional: device backends (see above) */
  int device_memory; /* 1: backend memory is not host memory */
  /* The calling thread's first error since the last call (0 = none): copies its message to
   * msg (len bytes) and clears it. */
  int (*error)(char *msg, size_t len);
  /* One Adam update over n values (adam.c computes the scalars; the element-wise formula and
   * its operation order are adam.c's adam_update_one). */
  void (*adam_step)(float *params, float *m, float *v, const float *grads, size_t n, float beta1,
                    float one_minus_beta1, float beta2, float one_minus_beta2, float bc2_sqrt,
                    float eps, float neg_step_size);
  /* y[i] += x[i] for i < n (the sum of data-parallel gradient shards) */
  void (*axpy)(float *y, const float *x, size_t n);
  /* A line about the device (name, memory), e.g. "NVIDIA H100 80GB HBM3, 79 GiB" */
  const char *(*describe)(char *buf, size_t len);
} nn_backend;

const nn_backend *nn_backend_cpu(void);

/* backend_load.c: the backend of a device option. NN_DEVICE_CPU -> CPU; NN_DEVICE_AUTO -> CUDA
 * when attnext_cuda.so loads and sees a GPU, else CPU; NN_DEVICE_CUDA -> CUDA or NN_ERROR
 *   device "cuda" requested but no CUDA device is available (<reason>)
 * The CUDA library is looked for once per process ($ATTNEXT_CUDA_LIB if set, else
 * attnext_cuda.so next to the library holding the engine, else the default search path). */
int nn_backend_for_device(int device, const nn_backend **out, char *err);
/* "cuda: <device>" when available, else "cuda: <why not>" (never NULL). */
const char *nn_backend_cuda_status(char *buf, size_t len);
/* The symbol attnext_cuda.so exports: its backend, or NULL with the reason in why. */
typedef const nn_backend *(*nn_backend_cuda_entry)(char *why, size_t len);
#define NN_BACKEND_CUDA_ENTRY "attnext_cuda_backend"

/* The ABI of the table above, shared with attnext_cuda.so, which is built separately and may be
 * older than the attnext.so that loads it. Bump NN_BACKEND_ABI whenever nn_backend changes (a
 * field added, removed, moved or retyped, or an operation's meaning changed). The library
 * exports attnext_cuda_backend_abi(), which returns the NN_BACKEND_ABI and sizeof(nn_backend) it
 * was compiled with; backend_load.c checks both before it calls the entry, and refuses a library
 * without the symbol or with another number or size ("stale attnext_cuda.so ..."). */
#define NN_BACKEND_ABI 1
typedef unsigned (*nn_backend_cuda_abi_fn)(size_t *table_size);
#define NN_BACKEND_CUDA_ABI "attnext_cuda_backend_abi"

/* attnext.so exports sqlite3_attnext_init only (the Makefile's version script, engine objects
 * built with -fvisibility=hidden); the CUDA library marks its two symbols with this. */
#define NN_EXPORT __attribute__((visibility("default")))

/* The CPU kernels in use: "x86-64-v4" (AVX-512), "x86-64-v3" (AVX2 + FMA), "x86-64-v2" in the
 * portable build (backend_cpu.c compiled once per level, the level picked at run time from
 * CPUID), "native" or "generic" in a build without the dispatch. */
const char *nn_backend_cpu_level(void);

#endif
