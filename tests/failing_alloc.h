/* failing_alloc.h -- an allocator for the C tests' out-of-memory loops: every allocation from
 * the fail_at-th on fails (0: none does), counting them in alloc_count, so that a loop over
 * fail_at = 1, 2, ... fails each allocation of a step in turn. Include once per test. */
#ifndef ATTNEXT_FAILING_ALLOC_H
#define ATTNEXT_FAILING_ALLOC_H
#include <stdlib.h>

#include "nn.h"

static long alloc_count = 0, fail_at = 0;
static void *failing_alloc(void *ctx, size_t n) {
  (void)ctx;
  return fail_at && ++alloc_count >= fail_at ? NULL : malloc(n ? n : 1);
}
static void *failing_resize(void *ctx, void *p, size_t n) {
  (void)ctx;
  return fail_at && ++alloc_count >= fail_at ? NULL : realloc(p, n ? n : 1);
}
static void plain_release(void *ctx, void *p) {
  (void)ctx;
  free(p);
}
static const nn_allocator failing = {failing_alloc, failing_resize, plain_release, NULL};

#endif
