/* rng.c -- the engine's random numbers: xoshiro256** seeded through splitmix64. Same seed,
 * same stream on every machine; used for initialisation, shuffling, splits and dropout. */
#include <math.h>

#include "nn_internal.h"

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void nn_rng_seed(nn_rng *rng, uint64_t seed) {
  uint64_t x = seed;
  for (int i = 0; i < 4; i++) rng->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t nn_rng_next(nn_rng *rng) {
  uint64_t *s = rng->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

float nn_rng_uniform(nn_rng *rng) { return (float)(nn_rng_next(rng) >> 40) * 0x1.0p-24f; }

void nn_rng_dropout_mask(nn_rng *rng, float *mask, size_t n, float keep, float scale) {
  uint64_t s0 = rng->s[0], s1 = rng->s[1], s2 = rng->s[2], s3 = rng->s[3];
  for (size_t i = 0; i < n; i++) { /* nn_rng_next and nn_rng_uniform, inlined */
    uint64_t result = rotl(s1 * 5, 7) * 9, t = s1 << 17;
    s2 ^= s0;
    s3 ^= s1;
    s1 ^= s2;
    s0 ^= s3;
    s2 ^= t;
    s3 = rotl(s3, 45);
    float u = (float)(result >> 40) * 0x1.0p-24f;
    mask[i] = u < keep ? scale : 0.0f;
  }
  rng->s[0] = s0;
  rng->s[1] = s1;
  rng->s[2] = s2;
  rng->s[3] = s3;
}

float nn_rng_normal(nn_rng *rng) {
  /* Box-Muller on doubles; u1 in (0, 1] so log() is finite */
  double u1 = ((double)(nn_rng_next(rng) >> 11) + 1.0) * 0x1.0p-53;
  double u2 = (double)(nn_rng_next(rng) >> 11) * 0x1.0p-53;
  return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

uint32_t nn_rng_below(nn_rng *rng, uint32_t n) {
  if (n <= 1) return 0;
  /* Lemire's multiply-shift with rejection: unbiased */
  uint64_t m = (uint64_t)(uint32_t)(nn_rng_next(rng) >> 32) * n;
  uint32_t low = (uint32_t)m;
  if (low < n) {
    uint32_t threshold = (uint32_t)(-n) % n;
    while (low < threshold) {
      m = (uint64_t)(uint32_t)(nn_rng_next(rng) >> 32) * n;
      low = (uint32_t)m;
    }
  }
  return (uint32_t)(m >> 32);
}
