/* failing_alloc.h -- the C tests' out-of-memory loops: an allocator whose every allocation from
 * the fail_at-th on fails (0: none does), counting them in alloc_count, and
 * fail_each_allocation, which fails each allocation of a step in turn. Include once per test,
 * after check.h. */
#ifndef ATTNEXT_FAILING_ALLOC_H
#define ATTNEXT_FAILING_ALLOC_H
#include <stdlib.h>
#include <string.h>

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
/* the allocator a test's trainers are made with (NULL: the C library) */
static const nn_allocator *use_mem = NULL;

/* Each allocation of a step failed in turn: for k = 1 to most, a trainer from setup (made with
 * `failing`, nothing failing yet), then step with its k-th allocation and every later one
 * failing, until step makes fewer than k. Each run that failed one must return NN_NOMEM with
 * "out of memory" in its message, the trainer freed whole (ASan). Returns how many were. */
static int fail_each_allocation(nn_trainer *(*setup)(void), int (*step)(nn_trainer *, char *),
                                long most) {
  int failures = 0;
  for (long k = 1; k < most; k++) {
    char err[NN_ERR_LEN] = "";
    use_mem = &failing;
    fail_at = 0;
    nn_trainer *tr = setup();
    if (!tr) break;
    alloc_count = 0;
    fail_at = k;
    int rc = step(tr, err);
    long used = alloc_count;
    fail_at = 0;
    nn_trainer_free(tr);
    use_mem = NULL;
    if (used < k) { /* fewer allocations than k: the step succeeded, every k is covered */
      CHECK(rc == NN_OK, "no allocation failed, yet %d (%s)", rc, err);
      break;
    }
    CHECK(rc == NN_NOMEM && strstr(err, "out of memory"), "allocation %ld fails: %d '%s'", k, rc,
          err);
    failures++;
  }
  use_mem = NULL;
  return failures;
}

#endif
