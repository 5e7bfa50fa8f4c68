/* fake_device.c -- a stand-in for attnext_cuda.so, so that the engine's host/device plumbing is
 * tested on a machine without a GPU (tests/test_device_plumbing.c loads it through
 * $ATTNEXT_CUDA_LIB).
 *
 * It exports attnext_cuda_backend() like the real library and returns a backend with
 * device_memory = 1 whose memory the host cannot read: every pointer it hands out is the real
 * allocation plus FAKE_TAG, a non-canonical x86-64 address, so any host code that dereferences
 * backend memory instead of going through upload / download crashes at once. Every operation
 * removes the tag and runs the CPU backend's operation, so results must be bit-identical to the
 * CPU's. The segment operations also check backend.h's segment layout (row_sample followed by
 * lens and off: walking r = off[t] + b for t < lens[b] visits each row once, with
 * row_sample[r] == b), and embedding_backward the link layout after ids, and record an error
 * if they do not hold. fake_device_fail_after(n) makes the n-th next operation record an error (the sticky
 * error of backend.h), to test that errors reach the caller as engine errors.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

#define FAKE_TAG ((uintptr_t)1 << 62)

static const nn_backend *cpu;
static nn_backend fake;
static __thread int has_error;
static __thread char error_text[200];
static long fail_countdown = -1; /* set by the (single-threaded) test */
static long live_allocations;

__attribute__((visibility("default"))) void fake_device_fail_after(long n) { fail_countdown = n; }
__attribute__((visibility("default"))) long fake_device_live_allocations(void) {
  return live_allocations;
}

static void op(const char *name) {
  if (fail_countdown < 0) return;
  if (fail_countdown-- == 0 && !has_error) {
    snprintf(error_text, sizeof error_text, "fake device: injected failure in %s", name);
    has_error = 1;
  }
}

#define U(p) ((void *)((p) ? (uintptr_t)(p)-FAKE_TAG : 0))
#define UF(p) ((float *)U(p))
#define UI(p) ((const int *)U(p))

static void *f_alloc(size_t bytes) {
  op("alloc");
  void *p = cpu->alloc(bytes);
  if (!p) return NULL;
  live_allocations++;
  return (void *)((uintptr_t)p + FAKE_TAG);
}
static void f_free(void *p) {
  if (!p) return;
  live_allocations--;
  cpu->free(U(p));
}
static void f_upload(void *dst, const void *src, size_t bytes) {
  op("upload");
  if (bytes) memcpy((void *)((uintptr_t)dst - FAKE_TAG), src, bytes);
}
static void f_download(void *dst, const void *src, size_t bytes) {
  op("download");
  if (bytes) memcpy(dst, (const void *)((uintptr_t)src - FAKE_TAG), bytes);
}
static void f_zero(float *x, size_t n) {
  op("zero");
  cpu->zero(UF(x), n);
}
static void f_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                    const float *B, int ldb, float beta, float *C, int ldc) {
  op("sgemm");
  cpu->sgemm(ta, tb, M, N, K, alpha, UF(A), lda, UF(B), ldb, beta, UF(C), ldc);
}
static void f_gather_rows(float *dst, int ldd, const float *src, int lds, const int *idx, int rows,
                          int cols) {
  op("gather_rows");
  cpu->gather_rows(UF(dst), ldd, UF(src), lds, UI(idx), rows, cols);
}
static void f_gather_add_rows(float *dst, int ldd, const float *src, int lds, const int *idx,
                              int rows, int cols) {
  op("gather_add_rows");
  cpu->gather_add_rows(UF(dst), ldd, UF(src), lds, UI(idx), rows, cols);
}
static void f_scatter_add_rows(float *dst, int ldd, const float *src, int lds, const int *idx,
                               int rows, int cols) {
  op("scatter_add_rows");
  cpu->scatter_add_rows(UF(dst), ldd, UF(src), lds, UI(idx), rows, cols);
}
static void f_add_bias(float *y, int ld, const float *bias, int rows, int cols) {
  op("add_bias");
  cpu->add_bias(UF(y), ld, UF(bias), rows, cols);
}
static void f_bias_grad(float *dbias, const float *dy, int ld, int rows, int cols) {
  op("bias_grad");
  cpu->bias_grad(UF(dbias), UF(dy), ld, rows, cols);
}
static void f_tanh_forward(float *y, size_t n) {
  op("tanh_forward");
  cpu->tanh_forward(UF(y), n);
}
static void f_tanh_backward(float *dx, const float *dy, const float *y, size_t n) {
  op("tanh_backward");
  cpu->tanh_backward(UF(dx), UF(dy), UF(y), n);
}
static void f_mul(float *y, const float *x, const float *mask, size_t n) {
  op("mul");
  cpu->mul(UF(y), UF(x), UF(mask), n);
}
static void f_rnn_step_forward(float *h, float *pre, int n, int H) {
  op("rnn_step_forward");
  cpu->rnn_step_forward(UF(h), UF(pre), n, H);
}
static void f_rnn_step_backward(float *dpre, const float *dh, const float *h, int n, int H) {
  op("rnn_step_backward");
  cpu->rnn_step_backward(UF(dpre), UF(dh), UF(h), n, H);
}
static void f_gru_step_forward(float *h, float *pre, const float *hw, const float *h_prev, int n,
                               int H) {
  op("gru_step_forward");
  cpu->gru_step_forward(UF(h), UF(pre), UF(hw), UF(h_prev), n, H);
}
static void f_gru_step_backward(float *dx, float *dhw, float *dh_prev, const float *dh,
                                const float *gates, const float *hw, const float *h_prev, int n,
                                int H) {
  op("gru_step_backward");
  cpu->gru_step_backward(UF(dx), UF(dhw), UF(dh_prev), UF(dh), UF(gates), UF(hw), UF(h_prev), n, H);
}
static void f_lstm_step_forward(float *h, float *c, float *pre, const float *c_prev, int n, int H) {
  op("lstm_step_forward");
  cpu->lstm_step_forward(UF(h), UF(c), UF(pre), UF(c_prev), n, H);
}
static void f_lstm_step_backward(float *dpre, float *dc_prev, const float *dh, const float *dc,
                                 const float *gates, const float *c, const float *c_prev, int n,
                                 int H) {
  op("lstm_step_backward");
  cpu->lstm_step_backward(UF(dpre), UF(dc_prev), UF(dh), UF(dc), UF(gates), UF(c), UF(c_prev), n,
                          H);
}
/* backend.h's segment layout, as the CUDA backend relies on it */
static void check_layout(const char *name, const int *rs, int P, int B) {
  const int *lens = rs + P, *off = rs + P + B;
  int visited = 0, ok = B > 0 && lens[0] >= 1 && off[0] == 0;
  for (int b = 0; ok && b < B; b++) {
    if (lens[b] < 1 || (b > 0 && lens[b] > lens[b - 1])) ok = 0;
    for (int t = 0; ok && t < lens[b]; t++) {
      int r = off[t] + b;
      if (r < 0 || r >= P || rs[r] != b || (t > 0 && off[t] <= off[t - 1])) ok = 0;
      visited++;
    }
  }
  if ((!ok || visited != P) && !has_error) {
    snprintf(error_text, sizeof error_text, "fake device: %s: segment layout broken", name);
    has_error = 1;
  }
}

static void f_segment_softmax(float *alpha, const float *e, const int *rs, int P, int B,
                              float *scratch) {
  op("segment_softmax");
  check_layout("segment_softmax", UI(rs), P, B);
  cpu->segment_softmax(UF(alpha), UF(e), UI(rs), P, B, UF(scratch));
}
static void f_segment_softmax_backward(float *de, const float *dalpha, const float *alpha,
                                       const int *rs, int P, int B, float *scratch) {
  op("segment_softmax_backward");
  check_layout("segment_softmax_backward", UI(rs), P, B);
  cpu->segment_softmax_backward(UF(de), UF(dalpha), UF(alpha), UI(rs), P, B, UF(scratch));
}
static void f_segment_weighted_sum(float *ctx, const float *alpha, const float *v, int ldv,
                                   const int *rs, int P, int B, int D) {
  op("segment_weighted_sum");
  check_layout("segment_weighted_sum", UI(rs), P, B);
  cpu->segment_weighted_sum(UF(ctx), UF(alpha), UF(v), ldv, UI(rs), P, B, D);
}
static void f_segment_weighted_sum_backward(float *dv, int ldv, int add, float *dalpha,
                                            const float *dctx, const float *alpha, const float *v,
                                            const int *rs, int P, int B, int D) {
  op("segment_weighted_sum_backward");
  cpu->segment_weighted_sum_backward(UF(dv), ldv, add, UF(dalpha), UF(dctx), UF(alpha), UF(v),
                                     UI(rs), P, B, D);
}
static void f_segment_dot(float *e, const float *q, const float *k, int ldk, const int *rs, int P,
                          int D, float scale) {
  op("segment_dot");
  cpu->segment_dot(UF(e), UF(q), UF(k), ldk, UI(rs), P, D, scale);
}
static void f_segment_dot_backward(float *dq, float *dk, const float *de, const float *q,
                                   const float *k, int ldk, const int *rs, int P, int B, int D,
                                   float scale) {
  op("segment_dot_backward");
  check_layout("segment_dot_backward", UI(rs), P, B);
  cpu->segment_dot_backward(UF(dq), UF(dk), UF(de), UF(q), UF(k), ldk, UI(rs), P, B, D, scale);
}
static void f_embedding_forward(float *x, const float *table, const int *ids, int P, int E) {
  op("embedding_forward");
  cpu->embedding_forward(UF(x), UF(table), UI(ids), P, E);
}
/* backend.h's link layout after ids: each token's rows chained in ascending order from its
 * first row, every row on exactly one chain */
static void check_links(const int *ids, int P) {
  const int *link = ids + P;
  int ok = 1, visited = 0;
  for (int r = 0; ok && r < P; r++) {
    if (!(link[r] & 1)) continue;
    for (int q = r, prev = -1; q >= 0; prev = q, q = (link[q] >> 1) - 1) {
      if (q >= P || q <= prev || ids[q] != ids[r] || (q != r && (link[q] & 1))) {
        ok = 0;
        break;
      }
      visited++;
    }
  }
  if ((!ok || visited != P) && !has_error) {
    snprintf(error_text, sizeof error_text, "fake device: embedding_backward: link layout broken");
    has_error = 1;
  }
}

static void f_embedding_backward(float *dtable, const float *dx, const int *ids, int P, int E,
                                 int skip_id) {
  op("embedding_backward");
  check_links(UI(ids), P);
  cpu->embedding_backward(UF(dtable), UF(dx), UI(ids), P, E, skip_id);
}
static int f_error(char *msg, size_t len) {
  if (!has_error) return 0;
  if (msg && len) snprintf(msg, len, "%s", error_text);
  has_error = 0;
  return 1;
}
/* adam.c's adam_update_one (built with -std=c11: GCC does not contract) */
static void f_adam_step(float *params, float *m, float *v, const float *grads, size_t n,
                        float beta1, float omb1, float beta2, float omb2, float bc2_sqrt, float eps,
                        float neg_step_size) {
  op("adam_step");
  float *p = UF(params), *mm = UF(m), *vv = UF(v);
  const float *g = UF(grads);
  for (size_t i = 0; i < n; i++) {
    float mi = __builtin_fmaf(g[i], omb1, mm[i] * beta1);
    float vi = __builtin_fmaf(omb2 * g[i], g[i], vv[i] * beta2);
    float denom = __builtin_sqrtf(vi) / bc2_sqrt + eps;
    p[i] = p[i] + (neg_step_size * mi) / denom;
    mm[i] = mi;
    vv[i] = vi;
  }
}
static void f_axpy(float *y, const float *x, size_t n) {
  op("axpy");
  float *yy = UF(y);
  const float *xx = UF(x);
  for (size_t i = 0; i < n; i++) yy[i] += xx[i];
}
static const char *f_describe(char *buf, size_t len) {
  snprintf(buf, len, "fake device (host memory behind tagged pointers)");
  return buf;
}

/* Built with -DFAKE_DEVICE_ABI=N, -DFAKE_DEVICE_TABLE_SIZE=N or -DFAKE_DEVICE_NO_ABI: a stale
 * library the loader must refuse (tests/test_cuda_abi.sh) without calling its entry. */
#ifndef FAKE_DEVICE_ABI
#define FAKE_DEVICE_ABI NN_BACKEND_ABI
#endif
#ifndef FAKE_DEVICE_TABLE_SIZE
#define FAKE_DEVICE_TABLE_SIZE sizeof(nn_backend)
#endif
#ifndef FAKE_DEVICE_NO_ABI
NN_EXPORT unsigned attnext_cuda_backend_abi(size_t *table_size) {
  *table_size = FAKE_DEVICE_TABLE_SIZE;
  return FAKE_DEVICE_ABI;
}
#endif

NN_EXPORT const nn_backend *attnext_cuda_backend(char *why, size_t len) {
  if (getenv("FAKE_DEVICE_ABSENT")) {
    snprintf(why, len, "fake device: absent on request");
    return NULL;
  }
  cpu = nn_backend_cpu();
  fake = *cpu;
  fake.name = "fake-device";
  fake.alloc = f_alloc;
  fake.free = f_free;
  fake.upload = f_upload;
  fake.download = f_download;
  fake.zero = f_zero;
  fake.sgemm = f_sgemm;
  fake.gather_rows = f_gather_rows;
  fake.gather_add_rows = f_gather_add_rows;
  fake.scatter_add_rows = f_scatter_add_rows;
  fake.add_bias = f_add_bias;
  fake.bias_grad = f_bias_grad;
  fake.tanh_forward = f_tanh_forward;
  fake.tanh_backward = f_tanh_backward;
  fake.mul = f_mul;
  fake.rnn_step_forward = f_rnn_step_forward;
  fake.rnn_step_backward = f_rnn_step_backward;
  fake.gru_step_forward = f_gru_step_forward;
  fake.gru_step_backward = f_gru_step_backward;
  fake.lstm_step_forward = f_lstm_step_forward;
  fake.lstm_step_backward = f_lstm_step_backward;
  fake.segment_softmax = f_segment_softmax;
  fake.segment_softmax_backward = f_segment_softmax_backward;
  fake.segment_weighted_sum = f_segment_weighted_sum;
  fake.segment_weighted_sum_backward = f_segment_weighted_sum_backward;
  fake.segment_dot = f_segment_dot;
  fake.segment_dot_backward = f_segment_dot_backward;
  fake.embedding_forward = f_embedding_forward;
  fake.embedding_backward = f_embedding_backward;
  fake.device_memory = 1;
  fake.error = f_error;
  fake.adam_step = f_adam_step;
  fake.axpy = f_axpy;
  fake.describe = f_describe;
  return &fake;
}
