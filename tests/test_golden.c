/* test_golden.c -- the engine against PyTorch, on the golden fixtures in tests/fixtures/golden/.
 *
 * Each fixture (written by tests/gen_fixtures.py from tests/attn_reference.py) holds a small
 * network's parameters, a padded batch of mixed lengths and what PyTorch computed from them:
 * logits, attention weights, the class-weighted cross-entropy loss, every parameter gradient,
 * and the losses and final parameters of 5 torch.optim.Adam(lr=1e-2) steps. For each fixture
 * this test builds the same model with nn_model_create, copies the parameters in by name, and
 * compares forward, loss, backward and 5 nn_adam_step's.
 *
 * Tolerance: |got - expected| <= ATOL, or relative error <= RTOL (check.h's CHECK_CLOSE),
 * RTOL = 1e-4, ATOL = 1e-6 (for values near zero). One exception, for the final parameters
 * of the Adam steps only: parameters whose first gradient is below G_NOISE = 1e-6 in
 * magnitude (e.g. attn.bias of linear attention, whose gradient is zero up to rounding since
 * softmax ignores a shift) move by up to ~lr per step in a direction that rounding decides,
 * because Adam divides the gradient by its own magnitude; they are compared with
 * ATOL = lr * steps. Embedding rows of ids absent from the batch stay strictly compared.
 *
 *   build/tests/test_golden                       every .safetensors file in tests/fixtures/golden
 *   build/tests/test_golden FILE...               the given fixtures
 *   GOLDEN_VERBOSE=1 build/tests/test_golden      also the worst error of every tensor
 * Fails (not skips) when there are no fixtures. The models run on the CPU (device "cpu");
 * tests/test_cuda.c runs the same fixtures (tests/golden.h) on the CUDA backend.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden.h"

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
  const char *v = getenv("GOLDEN_VERBOSE");
  verbose = v && *v && strcmp(v, "0") != 0;
  printf("test_golden: engine vs PyTorch fixtures; pass: |got - expected| <= %g or rel err <= "
         "%g (Adam final parameters with |first gradient| < %g: atol %g).\n"
         "Reported: max rel err over values with |expected| >= %g / max abs err over all.\n",
         ATOL, RTOL, G_NOISE, (double)ADAM_LR * ADAM_STEPS, REL_FLOOR);
  if (argc > 1) {
    for (int i = 1; i < argc; i++) run_fixture(argv[i]);
    return check_finish("test_golden");
  }
  DIR *dir = opendir(FIXTURE_DIR);
  CHECK(dir != NULL, "cannot open %s (run from the repository root)", FIXTURE_DIR);
  if (!dir) return check_finish("test_golden");
  char **paths = NULL;
  int count = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(dir)) != NULL) {
    size_t n = strlen(e->d_name);
    if (n <= 12 || strcmp(e->d_name + n - 12, ".safetensors") != 0) continue;
    if (count == cap) {
      cap = cap ? 2 * cap : 32;
      char **grown = realloc(paths, sizeof *paths * (size_t)cap);
      if (!grown) break;
      paths = grown;
    }
    size_t plen = strlen(FIXTURE_DIR) + n + 2;
    paths[count] = malloc(plen);
    if (!paths[count]) break;
    snprintf(paths[count], plen, "%s/%s", FIXTURE_DIR, e->d_name);
    count++;
  }
  closedir(dir);
  CHECK(count > 0, "no fixtures in %s: run /usr/bin/python3 tests/gen_fixtures.py", FIXTURE_DIR);
  if (count > 0) qsort(paths, (size_t)count, sizeof *paths, cmp_str);
  for (int i = 0; i < count; i++) {
    run_fixture(paths[i]);
    free(paths[i]);
  }
  free(paths);
  printf("%d fixtures\n", count);
  return check_finish("test_golden");
}
