/* test_diverse.c -- BADGE's order (engine/diverse.c, nn_diverse_order): attn_uncertain's
 * diverse batch.
 *   - against a reference written out plainly: each row's gradient embedding (p - onehot(top))
 *     outer x formed as C x F numbers, squared distances summed over them, the same draws from
 *     the same nn_rng: the same order, for several sizes and seeds
 *   - the first pick is the longest embedding; no row twice; the order of k is the first k of
 *     the order of more (a ranking); the same seed, the same order
 *   - rows with a number that is not finite or a class out of range are never picked; k above
 *     the usable rows gives those; rows equal to a pick (distance 0) come after every row at a
 *     distance above 0; n = 0 and k = 0 pick nothing; bad sizes are NN_ERROR
 *   - an interrupt between picks is NN_INTERRUPTED with the picks so far; out of memory is
 *     NN_NOMEM, nothing leaked (ASan)
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "failing_alloc.h"
#include "nn_internal.h"
#include "nn_mem.h"

static uint64_t lcg = 99;
static double next_unit(void) {
  lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(lcg >> 11) * 0x1.0p-53;
}

/* n rows of C probabilities (a softmax of random logits, spread by `spread`), their argmax, F
 * features in [-1, 1) */
static void make_rows(int n, int C, int F, double spread, float *probs, int *top, float *feat) {
  for (int i = 0; i < n; i++) {
    double z[64], sum = 0.0;
    for (int c = 0; c < C; c++) sum += z[c] = exp(spread * (next_unit() - 0.5));
    top[i] = 0;
    for (int c = 0; c < C; c++) {
      probs[i * C + c] = (float)(z[c] / sum);
      if (probs[i * C + c] > probs[i * C + top[i]]) top[i] = c;
    }
    for (int f = 0; f < F; f++) feat[i * F + f] = (float)(2.0 * next_unit() - 1.0);
  }
}

/* The reference: embeddings formed, distances summed over C x F numbers, the same draws. */
static int reference(const float *probs, const int *top, const float *feat, int n, int C, int F,
                     int k, uint64_t seed, int64_t *order) {
  double *g = malloc(sizeof *g * (size_t)n * C * F), *dist = malloc(sizeof *dist * (size_t)n);
  for (int i = 0; i < n; i++)
    for (int c = 0; c < C; c++)
      for (int f = 0; f < F; f++)
        g[((size_t)i * C + c) * F + f] =
            ((double)probs[i * C + c] - (c == top[i])) * (double)feat[i * F + f];
  int first = 0;
  double best = -1.0;
  for (int i = 0; i < n; i++) {
    double s = 0.0;
    for (int j = 0; j < C * F; j++) s += g[(size_t)i * C * F + j] * g[(size_t)i * C * F + j];
    if (s > best) best = s, first = i;
    dist[i] = INFINITY;
  }
  nn_rng rng;
  nn_rng_seed(&rng, seed);
  int picked = 0;
  for (int next = first; picked < k && picked < n;) {
    order[picked++] = next;
    dist[next] = -1.0;
    if (picked == k || picked == n) break;
    double total = 0.0;
    for (int i = 0; i < n; i++) {
      if (dist[i] < 0.0) continue;
      double s = 0.0;
      for (int j = 0; j < C * F; j++) {
        double d = g[(size_t)i * C * F + j] - g[(size_t)next * C * F + j];
        s += d * d;
      }
      if (s < dist[i]) dist[i] = s;
      total += dist[i];
    }
    double u = (double)(nn_rng_next(&rng) >> 11) * 0x1.0p-53 * total, run = 0.0;
    next = -1;
    for (int i = 0; i < n; i++) {
      if (dist[i] <= 0.0) continue;
      run += dist[i];
      next = i;
      if (run > u) break;
    }
  }
  free(g);
  free(dist);
  return picked;
}

static int stop_after = 0, stop_calls = 0;
static int stop_fn(void *ctx) {
  (void)ctx;
  return ++stop_calls > stop_after;
}

int main(void) {
  (void)fail_each_allocation; /* the header's loop is for trainers */
  char err[NN_ERR_LEN];
  enum { N = 300, CMAX = 8, FMAX = 12 };
  static float probs[N * CMAX], feat[N * FMAX];
  static int top[N];
  static int64_t order[N], ref[N], more[N];

  /* against the reference */
  const int shapes[][3] = {{40, 2, 3}, {120, 4, 12}, {300, 8, 5}, {60, 3, 1}};
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    int n = shapes[s][0], C = shapes[s][1], F = shapes[s][2];
    make_rows(n, C, F, 4.0, probs, top, feat);
    for (uint64_t seed = 0; seed < 3; seed++) {
      int k = n / 3, picked = -1;
      int st = nn_diverse_order(probs, top, feat, n, C, F, k, seed, NULL, NULL, NULL, order,
                                &picked, err);
      int want = reference(probs, top, feat, n, C, F, k, seed, ref);
      CHECK(st == NN_OK && picked == want, "n %d C %d F %d seed %d: status %d, %d picked, %d", n, C,
            F, (int)seed, st, picked, want);
      int same = 1;
      for (int j = 0; j < want && j < picked; j++) same &= order[j] == ref[j];
      CHECK(same, "n %d C %d F %d seed %d: the reference's order", n, C, F, (int)seed);
      /* no row twice */
      int twice = 0;
      for (int a = 0; a < picked; a++)
        for (int b = a + 1; b < picked; b++) twice |= order[a] == order[b];
      CHECK(!twice, "n %d: a row picked twice", n);
      /* a ranking: the order of more rows begins with this one */
      int picked_more = 0;
      st = nn_diverse_order(probs, top, feat, n, C, F, 2 * k, seed, NULL, NULL, NULL, more,
                            &picked_more, err);
      int prefix = st == NN_OK && picked_more == 2 * k;
      for (int j = 0; prefix && j < picked; j++) prefix = more[j] == order[j];
      CHECK(prefix, "n %d seed %d: the order of %d begins with the order of %d", n, (int)seed,
            2 * k, k);
    }
  }

  /* the first is the longest; another seed, another order (of the rest) */
  {
    int n = 100, C = 4, F = 6, picked = 0, picked2 = 0;
    make_rows(n, C, F, 6.0, probs, top, feat);
    nn_diverse_order(probs, top, feat, n, C, F, 20, 1, NULL, NULL, NULL, order, &picked, err);
    nn_diverse_order(probs, top, feat, n, C, F, 20, 2, NULL, NULL, NULL, more, &picked2, err);
    int longest = 0;
    double best = -1.0;
    for (int i = 0; i < n; i++) {
      double a = 0.0, x = 0.0;
      for (int c = 0; c < C; c++) {
        double d = probs[i * C + c] - (c == top[i]);
        a += d * d;
      }
      for (int f = 0; f < F; f++) x += (double)feat[i * F + f] * feat[i * F + f];
      if (a * x > best) best = a * x, longest = i;
    }
    CHECK(picked == 20 && order[0] == longest, "first pick %lld, the longest %d",
          (long long)order[0], longest);
    int differ = 0;
    for (int j = 0; j < 20; j++) differ |= order[j] != more[j];
    CHECK(differ && more[0] == longest, "seeds 1 and 2: the same first, then other draws");
  }

  /* unusable rows, k above the usable, duplicates of a pick last */
  {
    int n = 12, C = 3, F = 4, picked = 0;
    make_rows(n, C, F, 4.0, probs, top, feat);
    probs[2 * C + 1] = NAN;
    feat[5 * F + 0] = INFINITY;
    top[7] = C; /* out of range */
    top[8] = -1;
    int st =
        nn_diverse_order(probs, top, feat, n, C, F, n, 0, NULL, NULL, NULL, order, &picked, err);
    int bad = 0;
    for (int j = 0; j < picked; j++)
      bad |= order[j] == 2 || order[j] == 5 || order[j] == 7 || order[j] == 8;
    CHECK(st == NN_OK && picked == n - 4 && !bad, "unusable rows: %d picked of %d, bad %d", picked,
          n - 4, bad);

    /* rows 0..9 as row 0, 10..19 distinct: the copies of row 0 come last */
    n = 20;
    make_rows(n, C, F, 4.0, probs, top, feat);
    for (int i = 1; i < 10; i++) {
      memcpy(probs + i * C, probs, sizeof *probs * C);
      memcpy(feat + i * F, feat, sizeof *feat * F);
      top[i] = top[0];
    }
    /* make row 0 the longest, so that it is picked first */
    for (int f = 0; f < F; f++)
      for (int i = 0; i < 10; i++) feat[i * F + f] = 5.0f;
    st = nn_diverse_order(probs, top, feat, n, C, F, n, 3, NULL, NULL, NULL, order, &picked, err);
    int late = 1;
    for (int j = 1; j <= 10; j++) late &= order[j] >= 10;
    for (int j = 11; j < n; j++) late &= order[j] < 10;
    CHECK(st == NN_OK && picked == n && order[0] < 10 && late,
          "a copy of a pick comes after every row at a distance above 0");
  }

  /* nothing to do, bad sizes */
  {
    int picked = 9;
    CHECK(nn_diverse_order(probs, top, feat, 0, 3, 4, 5, 0, NULL, NULL, NULL, order, &picked,
                           err) == NN_OK &&
              picked == 0,
          "n = 0");
    CHECK(nn_diverse_order(probs, top, feat, 5, 3, 4, 0, 0, NULL, NULL, NULL, order, &picked,
                           err) == NN_OK &&
              picked == 0,
          "k = 0");
    CHECK(nn_diverse_order(probs, top, feat, 5, 0, 4, 2, 0, NULL, NULL, NULL, order, &picked,
                           err) == NN_ERROR,
          "C = 0: %s", err);
    CHECK(nn_diverse_order(probs, top, feat, -1, 3, 4, 2, 0, NULL, NULL, NULL, order, &picked,
                           err) == NN_ERROR,
          "n < 0");
  }

  /* an interrupt between picks */
  {
    int n = 50, C = 4, F = 3, picked = 0;
    make_rows(n, C, F, 4.0, probs, top, feat);
    nn_diverse_order(probs, top, feat, n, C, F, 10, 0, NULL, NULL, NULL, ref, &picked, err);
    stop_after = 3, stop_calls = 0;
    int st = nn_diverse_order(probs, top, feat, n, C, F, 10, 0, stop_fn, NULL, NULL, order, &picked,
                              err);
    int prefix = picked == 4;
    for (int j = 0; prefix && j < picked; j++) prefix = order[j] == ref[j];
    CHECK(st == NN_INTERRUPTED && !strcmp(err, "interrupted") && prefix,
          "interrupted after 3 checks: status %d, %d picked, the order so far %d", st, picked,
          prefix);
  }

  /* out of memory at each allocation */
  {
    int n = 50, C = 4, F = 3;
    make_rows(n, C, F, 4.0, probs, top, feat);
    for (int k = 1; k <= 2; k++) { /* the distances, then the lengths */
      alloc_count = 0, fail_at = k;
      int picked = 0;
      int st = nn_diverse_order(probs, top, feat, n, C, F, 10, 0, NULL, NULL, &failing, order,
                                &picked, err);
      CHECK(st == NN_NOMEM && picked == 0, "allocation %d fails: status %d (%s)", k, st, err);
    }
    fail_at = 0;
  }
  return check_finish("test_diverse");
}
