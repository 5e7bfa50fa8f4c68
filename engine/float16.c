/* float16.c -- IEEE 754 binary16 ("half") to and from float32: the weights of a model version
 * stored with option "storage": "float16" (safetensors dtype F16, engine/safetensors.c).
 *
 *   uint16_t h = nn_float16_from_float(0.1f);   -> 0x2e66 (0.0999755859375)
 *   float x = nn_float16_to_float(h);            -> 0.0999755859375f, exactly
 *
 * The conversion rounds to nearest, ties to even, as IEEE 754 and every hardware converter do:
 * values from 65520 on (halfway above the largest half, 65504) become infinity, values below
 * 2^-14 become subnormal halves (multiples of 2^-24) and those at or under 2^-25 zero, signs
 * kept. A NaN stays a NaN with its sign and the top ten bits of its payload (a quiet NaN when
 * those are zero), so every one of the 65,536 halves survives a trip through float32 bit for bit
 * (tests/test_float16.c). Bit arithmetic only: no _Float16, no F16C, the same on every target. */
#include "nn_internal.h"

#include <float.h>
#include <string.h>

uint16_t nn_float16_from_float(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) { /* NaN: the payload's top bits, never zero (that would be infinity) */
    uint16_t payload = (uint16_t)((a >> 13) & 0x3ffu);
    return (uint16_t)(sign | 0x7c00u | (payload ? payload : 0x200u));
  }
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 (and infinity) */
  if (a >= 0x38800000u) {                                  /* a normal half: 2^-14 <= |f| < 65520 */
    /* rebias the exponent (127 -> 15) and round the 13 bits dropped, ties to even; a carry out of
     * the mantissa is a carry into the exponent, which is the right result */
    uint32_t rounded = a + 0xfffu + ((a >> 13) & 1u);
    return (uint16_t)(sign | ((rounded - 0x38000000u) >> 13));
  }
  if (a <= 0x33000000u) return sign; /* |f| <= 2^-25: half of the smallest subnormal, or less */
  /* a subnormal half: |f| = m 2^(e - 150), in units of 2^-24 that is m >> (126 - e) */
  uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
  uint32_t shift = 126u - e; /* 14 (|f| just under 2^-14) to 24 (just over 2^-25) */
  uint32_t k = m >> shift, rest = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
  if (rest > halfway || (rest == halfway && (k & 1u))) k++; /* 0x400: the smallest normal */
  return (uint16_t)(sign | k);
}

float nn_float16_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
  if (e == 0x1fu) {
    x = sign | 0x7f800000u | (m << 13); /* infinity, or NaN with the same payload */
  } else if (e) {
    x = sign | ((e + 112u) << 23) | (m << 13);
  } else if (!m) {
    x = sign;
  } else { /* subnormal: m 2^-24, normalised */
    uint32_t exponent = 113u;
    while (!(m & 0x400u)) {
      m <<= 1;
      exponent--;
    }
    x = sign | (exponent << 23) | ((m & 0x3ffu) << 13);
  }
  float f;
  memcpy(&f, &x, sizeof f);
  return f;
}

size_t nn_float16_round(float *values, size_t n) {
  size_t clamped = 0;
  for (size_t i = 0; i < n; i++) {
    float x = values[i];
    /* a finite weight past the largest half is clamped to it: as infinity it would make the
     * version unloadable (weights must be finite), and a weight that large already saturates
     * whatever reads it. Infinities and NaNs stay what they are (refused alike in float32). */
    if (x >= 65520.0f && x <= FLT_MAX) x = NN_FLOAT16_MAX, clamped++; /* would be infinity */
    else if (x <= -65520.0f && x >= -FLT_MAX) x = -NN_FLOAT16_MAX, clamped++;
    values[i] = nn_float16_to_float(nn_float16_from_float(x));
  }
  return clamped;
}
