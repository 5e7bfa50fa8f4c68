/* test_float16.c -- IEEE binary16 conversion (engine/float16.c), the weights of a "storage":
 * "float16" model:
 *   - every one of the 65,536 halves: to float32 is its value (decoded here independently with
 *     ldexp), and back is the same 16 bits, NaN payloads and signs included;
 *   - float32 to half against a reference that finds the two nearest halves and compares with
 *     their exact midpoint: every midpoint between neighbouring halves (ties: to the even one)
 *     and the floats one step either side of it, and a sweep of 4.2 million float32 bit
 *     patterns across the whole range; also against the compiler's _Float16 where it has one;
 *   - overflow (65520 and up to infinity, 65519.996 down to 65504), subnormals, signed zeros;
 *   - nn_float16_round: in place, finite values that would overflow clamped and counted, infinities and
 *     NaNs left as they are. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "nn_internal.h"

static uint32_t bits_of(float f) {
  uint32_t b;
  memcpy(&b, &f, sizeof b);
  return b;
}
static float float_of(uint32_t b) {
  float f;
  memcpy(&f, &b, sizeof f);
  return f;
}

/* The value of a finite non-negative half k (0 .. 0x7c00, the last read as 2^16: rounding treats
 * infinity as the next step after 65504), from the definition. */
static double half_value(uint32_t k) {
  uint32_t e = k >> 10, m = k & 0x3ffu;
  return e ? ldexp(1024.0 + m, (int)e - 25) : ldexp((double)m, -24);
}

/* Round to nearest, ties to even, by search: the largest half at or below |f|, the next one
 * up, and |f| against their midpoint (exact in double). */
static uint16_t reference_from_float(float f) {
  uint32_t b = bits_of(f);
  uint16_t sign = (uint16_t)((b >> 16) & 0x8000u);
  double a = fabs((double)f);
  if (isnan(f)) return 0; /* not asked */
  if (a >= 65520.0) return (uint16_t)(sign | 0x7c00u);
  uint32_t lo = 0, hi = 0x7bffu; /* largest k with half_value(k) <= a */
  while (lo < hi) {
    uint32_t mid = (lo + hi + 1) / 2;
    if (half_value(mid) <= a) lo = mid;
    else hi = mid - 1;
  }
  double below = half_value(lo), above = half_value(lo + 1), mid = (below + above) / 2;
  uint32_t k = a < mid ? lo : a > mid ? lo + 1 : (lo & 1u) ? lo + 1 : lo;
  return (uint16_t)(sign | k);
}

static void test_all_halves(void) {
  int wrong_value = 0, wrong_back = 0, nans = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    float f = nn_float16_to_float((uint16_t)h);
    uint32_t e = (h >> 10) & 0x1fu;
    double want = e == 0x1fu ? ((h & 0x3ffu) ? NAN : INFINITY) : half_value(h & 0x7fffu);
    if (h & 0x8000u) want = -want;
    int same = e == 0x1fu && (h & 0x3ffu) ? isnan(f) && !!signbit(f) == !!(h & 0x8000u) &&
                                                (bits_of(f) & 0x7fffffu) == (h & 0x3ffu) << 13
                                          : (double)f == want && !!signbit(f) == !!(h & 0x8000u);
    if (!same && wrong_value++ < 5)
      fprintf(stderr, "  half 0x%04x -> %.9g (bits 0x%08x), expected %.9g\n", h, f, bits_of(f),
              want);
    nans += isnan(f) != 0;
    uint16_t back = nn_float16_from_float(f);
    if (back != h && wrong_back++ < 5)
      fprintf(stderr, "  half 0x%04x -> %.9g -> 0x%04x\n", h, f, back);
  }
  printf("all 65536 halves: %d values wrong, %d not back to the same bits (%d NaNs among them)\n",
         wrong_value, wrong_back, nans);
  CHECK(wrong_value == 0 && wrong_back == 0, "%d values, %d round trips wrong", wrong_value,
        wrong_back);
  CHECK(nans == 2 * 1023, "%d NaN halves, expected 2046", nans);
}

/* Each midpoint between neighbouring halves (a float32 exactly: halves have 11 bits), and the
 * float32 one step either side. */
static void test_ties(void) {
  int wrong = 0, ties = 0;
  for (uint32_t k = 0; k < 0x7c00u; k++) {
    double mid = (half_value(k) + half_value(k + 1)) / 2;
    float m = (float)mid;
    CHECK((double)m == mid, "midpoint of 0x%04x is a float32", k);
    float around[3] = {nextafterf(m, 0.0f), m, nextafterf(m, INFINITY)};
    for (int s = 0; s < 2; s++)
      for (int i = 0; i < 3; i++) {
        float f = s ? -around[i] : around[i];
        uint16_t got = nn_float16_from_float(f), want = reference_from_float(f);
        if (i == 1) {
          ties++;
          /* a tie goes to the even one of the two */
          uint16_t even = (uint16_t)((k & 1u) ? k + 1 : k) | (s ? 0x8000u : 0);
          if (want != even) wrong++;
        }
        if (got != want && wrong++ < 5)
          fprintf(stderr, "  %.9g (0x%08x): got 0x%04x, expected 0x%04x\n", f, bits_of(f), got,
                  want);
      }
  }
  printf("ties: %d midpoints and their neighbours, %d wrong\n", ties, wrong);
  CHECK(wrong == 0, "%d wrong around midpoints", wrong);
  /* by hand */
  CHECK(nn_float16_from_float(1.0f + 1.0f / 2048) == 0x3c00, "1 + 2^-11 (tie) -> 1 (even)");
  CHECK(nn_float16_from_float(1.0f + 3.0f / 2048) == 0x3c02,
        "1 + 3 2^-11 (tie) -> 1 + 2^-9 (even)");
  CHECK(nn_float16_from_float(0.1f) == 0x2e66, "0.1 -> 0x2e66, got 0x%04x",
        nn_float16_from_float(0.1f));
  CHECK(nn_float16_from_float(-2.0f) == 0xc000, "-2 -> 0xc000");
}

static void test_sweep(void) {
  int wrong = 0;
  long n = 0;
#ifdef __FLT16_MANT_DIG__
  int wrong_compiler = 0;
#endif
  /* 2^32 / 1021 patterns, both signs, every exponent; NaNs only checked to stay NaN */
  for (uint64_t b = 0; b < ((uint64_t)1 << 32); b += 1021) {
    float f = float_of((uint32_t)b);
    uint16_t got = nn_float16_from_float(f);
    n++;
    if (isnan(f)) {
      if (((got & 0x7c00u) != 0x7c00u || !(got & 0x3ffu) || !!(got & 0x8000u) != !!signbit(f)) &&
          wrong++ < 5)
        fprintf(stderr, "  NaN 0x%08x -> 0x%04x, not a NaN of the same sign\n", (uint32_t)b, got);
      continue;
    }
    uint16_t want = reference_from_float(f);
    if (got != want && wrong++ < 5)
      fprintf(stderr, "  %.9g (0x%08x): got 0x%04x, expected 0x%04x\n", f, (uint32_t)b, got, want);
#ifdef __FLT16_MANT_DIG__
    _Float16 c = (_Float16)f;
    uint16_t cb;
    memcpy(&cb, &c, sizeof cb);
    if (cb != got && wrong_compiler++ < 5)
      fprintf(stderr, "  %.9g: 0x%04x, the compiler's _Float16 0x%04x\n", f, got, cb);
#endif
  }
  printf("sweep: %ld float32 patterns, %d wrong\n", n, wrong);
  CHECK(wrong == 0, "%d of %ld wrong", wrong, n);
#ifdef __FLT16_MANT_DIG__
  printf("sweep against the compiler's _Float16: %d differ\n", wrong_compiler);
  CHECK(wrong_compiler == 0, "%d differ from _Float16", wrong_compiler);
#else
  printf("sweep against the compiler's _Float16: not available here\n");
#endif
}

static void test_edges(void) {
  struct {
    float f;
    uint16_t h;
    const char *what;
  } cases[] = {
      {65504.0f, 0x7bff, "the largest half"},
      {65519.996f, 0x7bff, "just under halfway to 2^16"},
      {65520.0f, 0x7c00, "halfway to 2^16: infinity (65504 is odd)"},
      {1e6f, 0x7c00, "overflow"},
      {-1e6f, 0xfc00, "negative overflow"},
      {FLT_MAX, 0x7c00, "FLT_MAX"},
      {INFINITY, 0x7c00, "infinity"},
      {-INFINITY, 0xfc00, "-infinity"},
      {0.0f, 0x0000, "zero"},
      {-0.0f, 0x8000, "negative zero"},
      {6.103515625e-05f, 0x0400, "2^-14, the smallest normal"},
      {6.097555160522461e-05f, 0x03ff, "the largest subnormal"},
      {5.9604644775390625e-08f, 0x0001, "2^-24, the smallest subnormal"},
      {2.98023223876953125e-08f, 0x0000, "2^-25 (tie): zero (even)"},
      {2.9802326e-08f, 0x0001, "just over 2^-25"},
      {-2.98023223876953125e-08f, 0x8000, "-2^-25: negative zero"},
      {8.940696716308594e-08f, 0x0002, "1.5 2^-24 (tie): 2 2^-24 (even)"},
      {1.4901161193847656e-07f, 0x0002, "2.5 2^-24 (tie): 2 2^-24 (even)"},
      {1e-10f, 0x0000, "far below"},
      {FLT_TRUE_MIN, 0x0000, "the smallest float32 subnormal"},
      {6.1005353927612305e-05f, 0x0400, "rounds up from the subnormals into the normals"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint16_t got = nn_float16_from_float(cases[i].f);
    CHECK(got == cases[i].h, "%s: %.9g -> 0x%04x, expected 0x%04x", cases[i].what, cases[i].f, got,
          cases[i].h);
  }
  CHECK(nn_float16_to_float(0x0001) == 5.9604644775390625e-08f, "0x0001 -> 2^-24");
  CHECK(nn_float16_to_float(0x7bff) == 65504.0f, "0x7bff -> 65504");
  CHECK(isinf(nn_float16_to_float(0xfc00)) && nn_float16_to_float(0xfc00) < 0, "0xfc00 -> -inf");
  uint16_t qnan = nn_float16_from_float(NAN);
  CHECK((qnan & 0x7e00u) == 0x7e00u, "NAN -> a quiet NaN half, got 0x%04x", qnan);
  /* a float32 NaN whose payload is all in the 13 bits a half drops is still a NaN */
  uint16_t low = nn_float16_from_float(float_of(0x7f800001u));
  CHECK((low & 0x7c00u) == 0x7c00u && (low & 0x3ffu), "NaN 0x7f800001 -> 0x%04x, a NaN", low);
}

static void test_round_in_place(void) {
  float v[] = {0.1f, 1e6f, -70000.0f, 65519.0f, INFINITY, -INFINITY, NAN, 3e-8f, -1.0f};
  size_t clamped = nn_float16_round(v, sizeof v / sizeof v[0]);
  CHECK(clamped == 2, "clamped %zu, expected 2 (1e6 and -70000; 65519 rounds to 65504)", clamped);
  CHECK(v[0] == 0.0999755859375f, "0.1 -> %.13g", v[0]);
  CHECK(v[1] == 65504.0f && v[2] == -65504.0f && v[3] == 65504.0f,
        "clamped / rounded to the largest half: %g %g %g", v[1], v[2], v[3]);
  CHECK(isinf(v[4]) && v[4] > 0 && isinf(v[5]) && v[5] < 0 && isnan(v[6]),
        "infinities and NaN kept: %g %g %g", v[4], v[5], v[6]);
  CHECK(v[7] == 5.9604644775390625e-08f && v[8] == -1.0f, "3e-8 -> 2^-24, -1 kept: %g %g", v[7],
        v[8]);
  float again[9];
  memcpy(again, v, sizeof v);
  CHECK(nn_float16_round(again, 9) == 0 && memcmp(again, v, sizeof v) == 0,
        "rounding twice changes nothing");
}

int main(void) {
  test_all_halves();
  test_ties();
  test_edges();
  test_round_in_place();
  test_sweep();
  return check_finish("test_float16");
}
