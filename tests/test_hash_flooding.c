/* test_hash_flooding.c -- the vocabulary's hash table cannot be flooded.
 *
 * Before it was keyed, the vocabulary (nn_vocab_from_list, used by every model load) and the token
 * counter of training (nn_vocab_build) hashed with FNV-1a, unkeyed, and probed linearly: tokens
 * whose hashes agree in their low bits all land in one probe chain, and n of them cost n^2 / 2
 * comparisons. This test builds such tokens -- FNV-1a's low K bits depend only on the low K bits
 * of its state, and each step is invertible, so a meet in the middle (4-character prefixes
 * bucketed by state, 3-character suffixes run backwards from a target) finds hundreds of
 * thousands of 7-character [a-z0-9] tokens with the same low 18 bits in well under a second --
 * and checks that building and loading a vocabulary of them takes about as long as of random
 * tokens of the same size: CPU time of this process, the two kinds alternated three times and
 * the best of each compared, so that another process's load on the machine (make check runs
 * tests side by side) slows both alike and a burst of it cannot land on one. It also checks that the result does not depend on the table's key:
 * two builds give the same vocabulary, in the same order. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "nn_internal.h"

#define TOKEN_LEN 7
#define PREFIX_LEN 4
#define SUFFIX_LEN 3
#define LOW_BITS 18 /* tables of up to 2^18 slots: 131072 for the counts below */
#define N_TOKENS 30000

static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
#define A 36

static uint32_t fnv_step(uint32_t h, unsigned char c) { return (h ^ c) * 16777619u; }

/* CPU seconds of this process, not wall time; where there is no CPU clock (WebAssembly: a
 * single thread, whose CPU time is its wall time less what the machine's other work takes),
 * the monotonic clock */
static double now(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* n tokens of TOKEN_LEN characters (n * (TOKEN_LEN + 1) bytes at out, NUL-terminated) whose
 * FNV-1a hashes share their low LOW_BITS bits; returns how many were found. */
static int colliding_tokens(char *out, int n) {
  uint32_t mask = (1u << LOW_BITS) - 1;
  uint32_t inv = 16777619u; /* the prime's inverse mod 2^32, by Newton's iteration */
  for (int i = 0; i < 5; i++) inv *= 2u - 16777619u * inv;
  int nprefix = A * A * A * A;
  uint32_t *state = malloc(sizeof *state * (size_t)nprefix);
  int *start = calloc((size_t)mask + 2, sizeof *start),
      *by_state = malloc(sizeof(int) * (size_t)nprefix);
  int found = 0;
  if (!state || !start || !by_state) goto done;
  for (int p = 0; p < nprefix; p++) {
    uint32_t h = 2166136261u;
    for (int i = 0, q = p; i < PREFIX_LEN; i++, q /= A)
      h = fnv_step(h, (unsigned char)alphabet[q % A]);
    state[p] = h & mask;
    start[state[p] + 1]++;
  }
  for (uint32_t s = 0; s <= mask; s++) start[s + 1] += start[s];
  for (int p = 0; p < nprefix; p++) by_state[start[state[p]]++] = p; /* start[s] = end of s */
  const uint32_t target = 0x2a2a2;
  for (int s = 0; s < A * A * A && found < n; s++) {
    unsigned char suffix[SUFFIX_LEN];
    for (int i = 0, q = s; i < SUFFIX_LEN; i++, q /= A) suffix[i] = (unsigned char)alphabet[q % A];
    uint32_t h = target; /* run the suffix backwards: h_prev = h / prime ^ c */
    for (int i = SUFFIX_LEN - 1; i >= 0; i--) h = (h * inv) ^ suffix[i];
    h &= mask;
    int lo = h ? start[h - 1] : 0, hi = start[h];
    for (int k = lo; k < hi && found < n; k++) {
      char *tok = out + (size_t)found * (TOKEN_LEN + 1);
      for (int i = 0, q = by_state[k]; i < PREFIX_LEN; i++, q /= A) tok[i] = alphabet[q % A];
      memcpy(tok + PREFIX_LEN, suffix, SUFFIX_LEN);
      tok[TOKEN_LEN] = 0;
      uint32_t check = 2166136261u;
      for (int i = 0; i < TOKEN_LEN; i++) check = fnv_step(check, (unsigned char)tok[i]);
      if ((check & mask) != target) break; /* the construction is wrong: stop, the caller checks */
      found++;
    }
  }
done:
  free(state);
  free(start);
  free(by_state);
  return found;
}

/* n distinct random tokens of the same shape (a counter in base 36 scrambled by an odd
 * multiplier: distinct, no structure in FNV). */
static void random_tokens(char *out, int n) {
  for (int t = 0; t < n; t++) {
    uint64_t x = ((uint64_t)t * 0x9E3779B97F4A7C15ull) % 78364164096ull; /* 36^7 */
    char *tok = out + (size_t)t * (TOKEN_LEN + 1);
    for (int i = 0; i < TOKEN_LEN; i++, x /= A) tok[i] = alphabet[x % A];
    tok[TOKEN_LEN] = 0;
  }
}

/* CPU seconds to build a vocabulary from the tokens as training rows (nn_vocab_build) and from
 * a list (nn_vocab_from_list, the loader's path), once; checks every lookup. */
static double vocab_seconds(const char *tokens, int n, const char *what) {
  const char **texts = malloc(sizeof *texts * (size_t)(n + 2));
  int *lens = malloc(sizeof *lens * (size_t)(n + 2));
  char err[NN_ERR_LEN];
  texts[0] = "<PAD>";
  texts[1] = "<UNK>";
  lens[0] = lens[1] = 5;
  for (int i = 0; i < n; i++) {
    texts[i + 2] = tokens + (size_t)i * (TOKEN_LEN + 1);
    lens[i + 2] = TOKEN_LEN;
  }
  nn_config cfg;
  nn_config_default(&cfg);
  cfg.stopwords = 0;
  cfg.vocab_size = n + 2;
  nn_vocab *built = NULL, *listed = NULL;
  double t0 = now();
  int rc1 = nn_vocab_build(&built, texts + 2, lens + 2, n, &cfg, err);
  int rc2 = rc1 == NN_OK ? nn_vocab_from_list(&listed, texts, lens, n + 2, err) : rc1;
  double t = now() - t0;
  CHECK(rc1 == NN_OK && rc2 == NN_OK, "%s: %s", what, err);
  if (rc2 == NN_OK) {
    /* every token found at its id, in first-occurrence order (all counts are 1) */
    int bad = 0;
    for (int i = 0; i < n + 2; i++) {
      int len;
      const char *tok = nn_vocab_token(built, i, &len);
      if (nn_vocab_lookup(listed, texts[i], lens[i]) != i ||
          nn_vocab_lookup(built, texts[i], lens[i]) != i || !tok || len != lens[i] ||
          memcmp(tok, texts[i], (size_t)len) != 0)
        bad++;
    }
    CHECK(bad == 0 && nn_vocab_count(built) == n + 2, "%s: %d tokens at the wrong id", what, bad);
  }
  nn_vocab_free(built);
  nn_vocab_free(listed);
  free(texts);
  free(lens);
  return t;
}

int main(void) {
  char *bad = malloc((size_t)N_TOKENS * (TOKEN_LEN + 1));
  char *good = malloc((size_t)N_TOKENS * (TOKEN_LEN + 1));
  int found = colliding_tokens(bad, N_TOKENS);
  CHECK(found == N_TOKENS, "built %d of %d FNV-colliding tokens", found, N_TOKENS);
  if (found != N_TOKENS) return check_finish("test_hash_flooding");
  random_tokens(good, N_TOKENS);
  double t_random = 1e30, t_flood = 1e30;
  for (int rep = 0; rep < 3; rep++) { /* alternated, the best of each */
    double r = vocab_seconds(good, N_TOKENS, "random tokens");
    double f = vocab_seconds(bad, N_TOKENS, "colliding tokens");
    if (r < t_random) t_random = r;
    if (f < t_flood) t_flood = f;
    if (f > 1.0) break; /* flooded: once is enough */
  }
  printf("vocabulary of %d tokens (build from rows + load from a list), CPU time, best of "
         "3 alternated: random %.4f s, FNV-colliding %.4f s (%.1fx)\n",
         N_TOKENS, t_random, t_flood, t_flood / (t_random > 1e-9 ? t_random : 1e-9));
  /* unkeyed FNV-1a: ~450 million comparisons, seconds; keyed: the same work as random tokens */
  CHECK(t_flood <= 4.0 * t_random + 0.05,
        "colliding tokens took %.4f s, random ones %.4f s: the hash can be flooded", t_flood,
        t_random);
  free(bad);
  free(good);
  return check_finish("test_hash_flooding");
}
