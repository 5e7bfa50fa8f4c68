/* adam.c -- the Adam optimizer over the model's one flat parameter buffer.
 *
 * Exactly torch.optim.Adam with its defaults (betas 0.9/0.999, eps 1e-8, no weight decay, no
 * amsgrad), in the operation order of PyTorch's CPU path (torch/optim/adam.py,
 * _single_tensor_adam, and the ATen kernels it calls), so that a step agrees with PyTorch's to the
 * last bit (tests/test_adam.c checks it against torch 1.13 on x86-64):
 *   m = fma(g, 1 - b1, m * b1)                  exp_avg.mul_(b1).add_(g, alpha=1-b1) (fmadd)
 *   v = fma((1 - b2) * g, g, v * b2)            exp_avg_sq.mul_(b2).addcmul_(g, g, value=1-b2)
 *   bc1 = 1 - b1^t, bc2 = 1 - b2^t              in double, as Python floats
 *   denom = sqrt(v) / sqrt(bc2) + eps           (exp_avg_sq.sqrt() / bc2_sqrt).add_(eps)
 *   p = p + (-lr / bc1) * m / denom             param.addcdiv_(exp_avg, denom, value=-step_size)
 * Scalars computed in double are rounded to float once, as ATen does when it applies a Python
 * scalar to a float32 tensor. The hyper-parameters are stored as float (nn_adam), but PyTorch's
 * are Python floats (doubles): 1 - 0.9 in double rounds to 0.1f, while 1 - (double)0.9f does not.
 * So each one is widened to the double of its shortest decimal form (0.9f -> 0.9), which is the
 * number the user wrote.
 *
 * nn_adam_*_on (model.h) keep the moments in a backend's memory: the CPU runs the functions
 * above unchanged; a device backend gets the same float scalars and applies adam_update_one's
 * formula in its adam_step operation.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "model.h"
#include "nn_internal.h"
#include "nn_mem.h"

/* The AVX + FMA loop is compiled for those instructions whatever the build's baseline, and taken
 * where the CPU has them (the portable build runs on x86-64-v2 CPUs: there the scalar loop). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define ADAM_AVX 1
#endif

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF /* GCC does not contract in ISO C mode (-std=c11) */
#endif

/* The moments are 64-byte aligned host memory from mem (the CPU kernels' alignment). */
static int adam_init(nn_adam *adam, size_t nparams, float lr, const nn_allocator *mem, char *err) {
  memset(adam, 0, sizeof *adam);
  adam->mem = mem;
  adam->lr = lr;
  adam->beta1 = 0.9f;
  adam->beta2 = 0.999f;
  adam->eps = 1e-8f;
  adam->weight_decay = 0.0f;
  adam->n = nparams;
  size_t count = nparams ? nparams : 1;
  adam->m =
      count <= SIZE_MAX / sizeof(float) ? nn_mem_alloc_aligned(mem, count * sizeof(float)) : NULL;
  adam->v = adam->m ? nn_mem_alloc_aligned(mem, count * sizeof(float)) : NULL;
  if (!adam->m || !adam->v) {
    nn_adam_free(adam);
    snprintf(err, NN_ERR_LEN, "out of memory allocating Adam state for %zu parameters", nparams);
    return NN_NOMEM;
  }
  return NN_OK;
}

int nn_adam_init(nn_adam *adam, size_t nparams, float lr, char *err) {
  return adam_init(adam, nparams, lr, NULL, err);
}

void nn_adam_free(nn_adam *adam) {
  if (!adam) return;
  nn_mem_free_aligned(adam->mem, adam->m);
  nn_mem_free_aligned(adam->mem, adam->v);
  adam->m = adam->v = NULL;
  adam->n = 0;
}

/* The element-wise update. sqrt, division and fma are correctly rounded in IEEE arithmetic, so
 * the AVX path and the scalar loop give the same bits; the AVX path exists because compilers
 * will not vectorise sqrtf under the default -fmath-errno. */
static inline void adam_update_one(float *restrict params, float *restrict m, float *restrict v,
                                   const float *restrict grads, size_t i, float beta1,
                                   float one_minus_beta1, float beta2, float one_minus_beta2,
                                   float bc2_sqrt, float eps, float neg_step_size) {
  float g = grads[i];
  float mi = fmaf(g, one_minus_beta1, m[i] * beta1);
  float vi = fmaf(one_minus_beta2 * g, g, v[i] * beta2);
  float denom = sqrtf(vi) / bc2_sqrt + eps;
  params[i] = params[i] + (neg_step_size * mi) / denom;
  m[i] = mi;
  v[i] = vi;
}

#ifdef ADAM_AVX
__attribute__((target("avx,fma"))) static void
adam_update_avx(float *restrict params, float *restrict m, float *restrict v,
                const float *restrict grads, size_t n, float beta1, float one_minus_beta1,
                float beta2, float one_minus_beta2, float bc2_sqrt, float eps,
                float neg_step_size) {
  size_t i = 0;
  const __m256 b1 = _mm256_set1_ps(beta1), omb1 = _mm256_set1_ps(one_minus_beta1);
  const __m256 b2 = _mm256_set1_ps(beta2), omb2 = _mm256_set1_ps(one_minus_beta2);
  const __m256 bc2 = _mm256_set1_ps(bc2_sqrt), ep = _mm256_set1_ps(eps);
  const __m256 nss = _mm256_set1_ps(neg_step_size);
  for (; i + 8 <= n; i += 8) {
    __m256 g = _mm256_loadu_ps(grads + i);
    __m256 mi = _mm256_fmadd_ps(g, omb1, _mm256_mul_ps(_mm256_loadu_ps(m + i), b1));
    __m256 vi =
        _mm256_fmadd_ps(_mm256_mul_ps(omb2, g), g, _mm256_mul_ps(_mm256_loadu_ps(v + i), b2));
    __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vi), bc2), ep);
    __m256 p =
        _mm256_add_ps(_mm256_loadu_ps(params + i), _mm256_div_ps(_mm256_mul_ps(nss, mi), denom));
    _mm256_storeu_ps(params + i, p);
    _mm256_storeu_ps(m + i, mi);
    _mm256_storeu_ps(v + i, vi);
  }
  for (; i < n; i++) /* fmaf here is the instruction */
    adam_update_one(params, m, v, grads, i, beta1, one_minus_beta1, beta2, one_minus_beta2,
                    bc2_sqrt, eps, neg_step_size);
}

/* The same operations 16 lanes wide: on an AMD Zen 5 the dividers and the square root take
 * 16-lane vectors at the 8-lane rate (0.11 ms a step over the lesson's 542,873 parameters
 * against 0.22; with denormal moments, which untouched embedding rows reach after ~800 steps,
 * 0.21 against 0.43), and Adam was a sixth of a training epoch's CPU time. */
__attribute__((target("avx512f"))) static void
adam_update_avx512(float *restrict params, float *restrict m, float *restrict v,
                   const float *restrict grads, size_t n, float beta1, float one_minus_beta1,
                   float beta2, float one_minus_beta2, float bc2_sqrt, float eps,
                   float neg_step_size) {
  size_t i = 0;
  const __m512 b1 = _mm512_set1_ps(beta1), omb1 = _mm512_set1_ps(one_minus_beta1);
  const __m512 b2 = _mm512_set1_ps(beta2), omb2 = _mm512_set1_ps(one_minus_beta2);
  const __m512 bc2 = _mm512_set1_ps(bc2_sqrt), ep = _mm512_set1_ps(eps);
  const __m512 nss = _mm512_set1_ps(neg_step_size);
  /* 64-byte loads that straddle two cache lines cost two: a slice that starts mid-line (the
   * update pass's slices, a lazy row) first steps to a line boundary with the 8-lane loop */
  size_t head = (size_t)(-(uintptr_t)params / sizeof(float)) % 16;
  if (head > n) head = n;
  if (head && head < n) {
    adam_update_avx(params, m, v, grads, head, beta1, one_minus_beta1, beta2, one_minus_beta2,
                    bc2_sqrt, eps, neg_step_size);
    i = head;
  }
  for (; i + 16 <= n; i += 16) {
    __m512 g = _mm512_loadu_ps(grads + i);
    __m512 mi = _mm512_fmadd_ps(g, omb1, _mm512_mul_ps(_mm512_loadu_ps(m + i), b1));
    __m512 vi =
        _mm512_fmadd_ps(_mm512_mul_ps(omb2, g), g, _mm512_mul_ps(_mm512_loadu_ps(v + i), b2));
    __m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vi), bc2), ep);
    __m512 p =
        _mm512_add_ps(_mm512_loadu_ps(params + i), _mm512_div_ps(_mm512_mul_ps(nss, mi), denom));
    _mm512_storeu_ps(params + i, p);
    _mm512_storeu_ps(m + i, mi);
    _mm512_storeu_ps(v + i, vi);
  }
  if (i < n) /* the last (n - head) % 16 */
    adam_update_avx(params + i, m + i, v + i, grads + i, n - i, beta1, one_minus_beta1, beta2,
                    one_minus_beta2, bc2_sqrt, eps, neg_step_size);
}
#endif

static void adam_update(float *restrict params, float *restrict m, float *restrict v,
                        const float *restrict grads, size_t n, float beta1, float one_minus_beta1,
                        float beta2, float one_minus_beta2, float bc2_sqrt, float eps,
                        float neg_step_size) {
#ifdef ADAM_AVX
  /* the 16-lane loop's ends run the AVX + FMA one; the check includes the OS's saving of zmm */
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma")) {
    adam_update_avx512(params, m, v, grads, n, beta1, one_minus_beta1, beta2, one_minus_beta2,
                       bc2_sqrt, eps, neg_step_size);
    return;
  }
  if (__builtin_cpu_supports("avx") && __builtin_cpu_supports("fma")) {
    adam_update_avx(params, m, v, grads, n, beta1, one_minus_beta1, beta2, one_minus_beta2,
                    bc2_sqrt, eps, neg_step_size);
    return;
  }
#endif
  for (size_t i = 0; i < n; i++)
    adam_update_one(params, m, v, grads, i, beta1, one_minus_beta1, beta2, one_minus_beta2,
                    bc2_sqrt, eps, neg_step_size);
}

/* The float scalars of the next step (advances adam->step). */
nn_adam_step_scalars nn_adam_step_begin(nn_adam *adam) {
  adam->step++;
  double beta1 = nn_decimal_double(adam->beta1), beta2 = nn_decimal_double(adam->beta2);
  double step = (double)adam->step;
  /* Python: bias_correction1 = 1 - beta1 ** step; step_size = lr / bias_correction1 */
  double bias_correction1 = 1.0 - pow(beta1, step);
  double bias_correction2 = 1.0 - pow(beta2, step);
  double step_size = nn_decimal_double(adam->lr) / bias_correction1;
  double bc2_sqrt = sqrt(bias_correction2);
  nn_adam_step_scalars k = {adam->beta1,      (float)(1.0 - beta1),
                            adam->beta2,      (float)(1.0 - beta2),
                            (float)bc2_sqrt,  (float)nn_decimal_double(adam->eps),
                            (float)-step_size};
  return k;
}

void nn_adam_step_range(nn_adam *adam, const nn_adam_step_scalars *k, float *params,
                        const float *grads, size_t lo, size_t hi) {
  adam_update(params + lo, adam->m + lo, adam->v + lo, grads + lo, hi - lo, k->beta1,
              k->one_minus_beta1, k->beta2, k->one_minus_beta2, k->bc2_sqrt, k->eps,
              k->neg_step_size);
}

void nn_adam_step(nn_adam *adam, float *params, const float *grads) {
  nn_adam_step_scalars k = nn_adam_step_begin(adam);
  adam_update(params, adam->m, adam->v, grads, adam->n, k.beta1, k.one_minus_beta1, k.beta2,
              k.one_minus_beta2, k.bc2_sqrt, k.eps, k.neg_step_size);
}

void nn_adam_step_lazy(nn_adam *adam, float *params, const float *grads, size_t tables,
                       size_t table, int E, const int *rows, int nrows) {
  nn_adam_step_scalars k = nn_adam_step_begin(adam);
  for (size_t t = 0; t + table <= tables && table > 0; t += table)
    for (int i = 0; i < nrows; i++) {
      size_t at = t + (size_t)rows[i] * E;
      nn_adam_step_range(adam, &k, params, grads, at, at + (size_t)E);
    }
  nn_adam_step_range(adam, &k, params, grads, tables, adam->n);
}

/* ---------------------------------------------------------------- on a backend */

int nn_adam_init_on(nn_adam *adam, const nn_backend *be, const nn_allocator *mem, size_t nparams,
                    float lr, char *err) {
  if (!be->device_memory) return adam_init(adam, nparams, lr, mem, err);
  int rc = adam_init(adam, 0, lr, mem, err); /* the hyper-parameters; host moments of size 1 */
  if (rc != NN_OK) return rc;
  nn_mem_free_aligned(mem, adam->m);
  nn_mem_free_aligned(mem, adam->v);
  adam->n = nparams;
  size_t bytes = (nparams ? nparams : 1) * sizeof(float);
  adam->m = be->alloc(bytes); /* zeroed */
  adam->v = be->alloc(bytes);
  if (!adam->m || !adam->v) {
    nn_adam_free_on(adam, be);
    if (nn_backend_check(be, "allocating Adam state", err) == NN_OK)
      snprintf(err, NN_ERR_LEN, "out of memory allocating Adam state for %zu parameters", nparams);
    return NN_NOMEM;
  }
  return NN_OK;
}

int nn_adam_step_on(nn_adam *adam, const nn_backend *be, float *params, const float *grads,
                    char *err) {
  if (!be->device_memory) {
    nn_adam_step(adam, params, grads);
    return NN_OK;
  }
  nn_adam_step_scalars k = nn_adam_step_begin(adam);
  be->adam_step(params, adam->m, adam->v, grads, adam->n, k.beta1, k.one_minus_beta1, k.beta2,
                k.one_minus_beta2, k.bc2_sqrt, k.eps, k.neg_step_size);
  return nn_backend_check(be, "Adam step", err);
}

int nn_adam_step_lazy_on(nn_adam *adam, const nn_backend *be, float *params, const float *grads,
                         size_t tables, size_t table, int E, const int *rows, int nrows,
                         char *err) {
  if (!be->device_memory) {
    nn_adam_step_lazy(adam, params, grads, tables, table, E, rows, nrows);
    return NN_OK;
  }
  nn_adam_step_scalars k = nn_adam_step_begin(adam);
  /* one launch per row and table: the batch's few hundred rows */
  for (size_t t = 0; t + table <= tables && table > 0; t += table)
    for (int i = 0; i < nrows; i++) {
      size_t at = t + (size_t)rows[i] * E;
      be->adam_step(params + at, adam->m + at, adam->v + at, grads + at, (size_t)E, k.beta1,
                    k.one_minus_beta1, k.beta2, k.one_minus_beta2, k.bc2_sqrt, k.eps,
                    k.neg_step_size);
    }
  if (adam->n > tables)
    be->adam_step(params + tables, adam->m + tables, adam->v + tables, grads + tables,
                  adam->n - tables, k.beta1, k.one_minus_beta1, k.beta2, k.one_minus_beta2,
                  k.bc2_sqrt, k.eps, k.neg_step_size);
  return nn_backend_check(be, "Adam step", err);
}

void nn_adam_free_on(nn_adam *adam, const nn_backend *be) {
  if (!be->device_memory) {
    nn_adam_free(adam);
    return;
  }
  if (adam->m) be->free(adam->m);
  if (adam->v) be->free(adam->v);
  adam->m = adam->v = NULL;
  adam->n = 0;
}
