/* nn_mem.h -- the engine's allocations, each through an nn_allocator (nn.h; NULL: the C
 * library). Objects record the allocator they were made with and free with it, so memory is
 * never freed by another allocator than the one that gave it. Sizes of 0 ask for 1 byte (some
 * allocators, SQLite's among them, return NULL for 0); counts are multiplied with an overflow
 * check, as calloc does. */
#ifndef ATTNEXT_NN_MEM_H
#define ATTNEXT_NN_MEM_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "compat.h" /* nn_os_aligned_alloc */
#include "nn.h"

/* While a trainer is made (nn_trainer_create), the calling thread's interrupt callback, else
 * NULL: zeroing a large block asks it every NN_MEM_STOP_BYTES (a fresh block's first touch is
 * its page faults: an 800 MB table takes a second or more), and once it says stop the block is
 * freed and the allocation returns NULL, which nn_trainer_create reports as interrupted. */
extern _Thread_local nn_interrupt_fn nn_mem_stop;
extern _Thread_local void *nn_mem_stop_ctx;
#define NN_MEM_STOP_BYTES ((size_t)4 << 20)

/* Zero p (n bytes), asking nn_mem_stop between pieces: 0, or 1 when it said stop. */
static inline int nn_mem_zero(void *p, size_t n) {
  if (!nn_mem_stop || n <= NN_MEM_STOP_BYTES) {
    memset(p, 0, n);
    return 0;
  }
  for (size_t lo = 0; lo < n; lo += NN_MEM_STOP_BYTES) {
    memset((unsigned char *)p + lo, 0, n - lo < NN_MEM_STOP_BYTES ? n - lo : NN_MEM_STOP_BYTES);
    if (nn_mem_stop(nn_mem_stop_ctx)) return 1;
  }
  return 0;
}

static inline void *nn_mem_alloc(const nn_allocator *a, size_t n) {
  if (!n) n = 1;
  return a ? a->alloc(a->ctx, n) : malloc(n);
}

/* count x size bytes, zeroed; NULL when the product overflows */
static inline void *nn_mem_calloc(const nn_allocator *a, size_t count, size_t size) {
  if (!a) return calloc(count ? count : 1, size ? size : 1);
  if (size && count > SIZE_MAX / size) return NULL;
  void *p = nn_mem_alloc(a, count * size);
  if (p && nn_mem_zero(p, count * size)) {
    a->release(a->ctx, p);
    return NULL;
  }
  return p;
}

static inline void *nn_mem_realloc(const nn_allocator *a, void *p, size_t n) {
  if (!n) n = 1;
  return a ? a->resize(a->ctx, p, n) : realloc(p, n);
}

static inline void nn_mem_free(const nn_allocator *a, void *p) {
  if (!p) return;
  if (a) a->release(a->ctx, p);
  else free(p);
}

/* A copy of s (n bytes) NUL-terminated; NULL when out of memory. */
static inline char *nn_mem_strndup(const nn_allocator *a, const char *s, size_t n) {
  char *d = n < SIZE_MAX ? nn_mem_alloc(a, n + 1) : NULL;
  if (!d) return NULL;
  if (n) memcpy(d, s, n);
  d[n] = 0;
  return d;
}

/* Zeroed, 64-byte aligned, the size rounded up to 64 bytes (the CPU kernels load 64 bytes at a
 * time, and a load that straddles two cache lines costs two): the C library's aligned_alloc, or
 * an allocator's block over-allocated by 64 bytes with the block's address kept just before the
 * aligned pointer (alloc returns at least 8-byte aligned memory). Freed by nn_mem_free_aligned. */
static inline void *nn_mem_alloc_aligned(const nn_allocator *a, size_t bytes) {
  size_t n = (bytes + 63) & ~(size_t)63;
  if (n < bytes || n > SIZE_MAX - 64) return NULL;
  if (!n) n = 64;
  unsigned char *p, *raw = NULL;
  if (!a) {
    p = nn_os_aligned_alloc(64, n);
  } else {
    raw = a->alloc(a->ctx, n + 64);
    if (!raw) return NULL;
    p = (unsigned char *)(((uintptr_t)raw + 64) & ~(uintptr_t)63);
    memcpy(p - sizeof raw, &raw, sizeof raw);
  }
  if (p && nn_mem_zero(p, n)) { /* interrupted (nn_mem_stop) */
    if (a) a->release(a->ctx, raw);
    else nn_os_aligned_free(p);
    return NULL;
  }
  return p;
}

static inline void nn_mem_free_aligned(const nn_allocator *a, void *p) {
  if (!p) return;
  if (!a) {
    nn_os_aligned_free(p);
    return;
  }
  void *raw;
  memcpy(&raw, (unsigned char *)p - sizeof raw, sizeof raw);
  a->release(a->ctx, raw);
}

/* Backend memory (zeroed): a device backend's own (be->alloc, e.g. cudaMalloc), or for a
 * backend that computes in host memory (the CPU's) aligned host memory from the allocator. */
static inline void *nn_backend_alloc(const nn_allocator *a, const nn_backend *be, size_t bytes) {
  return be->device_memory ? be->alloc(bytes) : nn_mem_alloc_aligned(a, bytes);
}
static inline void nn_backend_free(const nn_allocator *a, const nn_backend *be, void *p) {
  if (!p) return;
  if (be->device_memory) be->free(p);
  else nn_mem_free_aligned(a, p);
}

#endif
