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
#include "nn.h"

static inline void *nn_mem_alloc(const nn_allocator *a, size_t n) {
  if (!n) n = 1;
  return a ? a->alloc(a->ctx, n) : malloc(n);
}

/* count x size bytes, zeroed; NULL when the product overflows */
static inline void *nn_mem_calloc(const nn_allocator *a, size_t count, size_t size) {
  if (!a) return calloc(count ? count : 1, size ? size : 1);
  if (size && count > SIZE_MAX / size) return NULL;
  void *p = nn_mem_alloc(a, count * size);
  if (p) memset(p, 0, count * size);
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
  unsigned char *p;
  if (!a) {
    p = aligned_alloc(64, n);
  } else {
    unsigned char *raw = a->alloc(a->ctx, n + 64);
    if (!raw) return NULL;
    p = (unsigned char *)(((uintptr_t)raw + 64) & ~(uintptr_t)63);
    memcpy(p - sizeof raw, &raw, sizeof raw);
  }
  if (p) memset(p, 0, n);
  return p;
}

static inline void nn_mem_free_aligned(const nn_allocator *a, void *p) {
  if (!p) return;
  if (!a) {
    free(p);
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
