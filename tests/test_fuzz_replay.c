/* test_fuzz_replay.c -- runs the libFuzzer targets of tests/fuzz/ over their seed corpus
 * (tests/fuzz/corpus/<target>/) and every crash found so far (tests/fuzz/crashes/<target>/),
 * without libFuzzer: each file is one input. A broken invariant (FUZZ_TRAP) is reported with
 * the file's name; a crash is a crash of this test (run it under `make test-asan` to see the
 * bad read). Prints how many inputs each target ran. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int fuzz_broken = 0;
#define FUZZ_TRAP()                                                                                \
  do {                                                                                             \
    fprintf(stderr, "invariant broken at %s:%d\n", __FILE__, __LINE__);                            \
    fuzz_broken++;                                                                                 \
  } while (0)

#define LLVMFuzzerTestOneInput fuzz_safetensors_one
#include "fuzz/fuzz_safetensors.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_config_one
#include "fuzz/fuzz_config.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_text_one
#include "fuzz/fuzz_text.c"
#undef LLVMFuzzerTestOneInput

typedef int (*fuzz_fn)(const uint8_t *, size_t);

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Run fn over every regular file of dir (sorted); returns the number of files run. */
static int replay_dir(const char *dir, fuzz_fn fn) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  char *names[4096];
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) && n < 4096)
    if (e->d_name[0] != '.') names[n++] = strdup(e->d_name);
  closedir(d);
  qsort(names, (size_t)n, sizeof *names, cmp_names);
  int ran = 0;
  for (int i = 0; i < n; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    free(names[i]);
    FILE *f = fopen(path, "rb");
    if (!f) continue;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(len > 0 ? (size_t)len : 1);
    size_t got = buf ? fread(buf, 1, (size_t)len, f) : 0;
    fclose(f);
    if (!buf) continue;
    int before = fuzz_broken;
    fn(buf, got);
    CHECK(fuzz_broken == before, "%s: an invariant of the target broke on this input", path);
    free(buf);
    ran++;
  }
  return ran;
}

int main(void) {
  static const struct {
    const char *name;
    fuzz_fn fn;
    int min_corpus;
  } targets[] = {
      {"safetensors", fuzz_safetensors_one, 3},
      {"config", fuzz_config_one, 5},
      {"text", fuzz_text_one, 5},
  };
  for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++) {
    char dir[256];
    snprintf(dir, sizeof dir, "tests/fuzz/corpus/%s", targets[t].name);
    int corpus = replay_dir(dir, targets[t].fn);
    snprintf(dir, sizeof dir, "tests/fuzz/crashes/%s", targets[t].name);
    int crashes = replay_dir(dir, targets[t].fn);
    printf("fuzz target %-12s corpus %4d inputs, crash regressions %3d inputs\n", targets[t].name,
           corpus, crashes);
    CHECK(corpus >= targets[t].min_corpus, "tests/fuzz/corpus/%s has %d inputs, expected >= %d",
          targets[t].name, corpus, targets[t].min_corpus);
  }
  printf("%d checks, %d failed\n", check_count, check_failures);
  return check_failures ? 1 : 0;
}
