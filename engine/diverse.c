/* diverse.c -- a batch of texts to label that is both uncertain and diverse: BADGE's order.
 *
 *   SELECT id FROM attn_uncertain('news', 'SELECT rowid, title FROM headlines
 *                                          WHERE category IS NULL', '{"diverse": 100}')
 *   LIMIT 100;
 *
 * The least sure texts by margin are often alike: ten headlines on one story the model cannot
 * place, and labelling the tenth teaches it little the first did not. BADGE (Ash et al., 2020,
 * "Deep batch active learning by diverse, uncertain gradient lower bounds") picks a batch by
 * the gradient each text would give the last layer, were its predicted label right:
 *
 *   g_i = (p_i - onehot(top_i)) outer x_i        (C, F): p the probabilities, x the last
 *                                                 layer's input, top the predicted class
 *
 * Its length is large when the model is unsure (p far from one-hot) and the text is strongly
 * represented; two texts alike in both give nearly the same g. The batch is k-means++ seeding
 * over the g: first the longest, then each next drawn with probability proportional to its
 * squared distance to the nearest one picked. Each pick depends on the picks before it only,
 * so the order is a ranking: its first 10 are the batch of 10 it would pick.
 *
 * g is never formed (C x F floats a row): with a_i = p_i - onehot(top_i),
 *   |g_i - g_j|^2 = |a_i|^2 |x_i|^2 + |a_j|^2 |x_j|^2 - 2 (a_i . a_j)(x_i . x_j),
 * so a pick costs O(n (C + F)) and the memory is the inputs and two doubles a row. Sums are in
 * double, clamped at 0 (rounding can make a distance of a row to itself slightly negative).
 * The draws come from an nn_rng seeded by `seed`: the same inputs give the same order on every
 * machine. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn_internal.h"
#include "nn_mem.h"

/* a_i . a_j for a_i = p_i - onehot(ti), a_j = p_j - onehot(tj) */
static double grad_dot(const float *pi, int ti, const float *pj, int tj, int C) {
  double s = 0.0;
  for (int c = 0; c < C; c++) s += (double)pi[c] * pj[c];
  return s - pi[tj] - pj[ti] + (ti == tj);
}

static double feat_dot(const float *xi, const float *xj, int F) {
  double s = 0.0;
  for (int f = 0; f < F; f++) s += (double)xi[f] * xj[f];
  return s;
}

/* the squared distance of g_i to g_j from the factors and the squared lengths sq */
static double gap(const float *probs, const int *top, const float *feat, const double *sq,
                  int64_t i, int64_t j, int C, int F) {
  double d = sq[i] + sq[j] -
             2.0 * grad_dot(probs + (size_t)i * C, top[i], probs + (size_t)j * C, top[j], C) *
                 feat_dot(feat + (size_t)i * F, feat + (size_t)j * F, F);
  return d > 0.0 ? d : 0.0;
}

int nn_diverse_order(const float *probs, const int *top, const float *feat, int64_t n, int C, int F,
                     int k, uint64_t seed, nn_interrupt_fn stop, void *stop_ctx,
                     const nn_allocator *mem, int64_t *order, int *picked, char *err) {
  *picked = 0;
  if (n < 0 || C < 1 || F < 1 || k < 0) {
    snprintf(err, NN_ERR_LEN, "diverse order: bad sizes (%lld rows, %d classes, %d features, %d)",
             (long long)n, C, F, k);
    return NN_ERROR;
  }
  if (n == 0 || k == 0) return NN_OK;
  double *sq = nn_mem_alloc(mem, sizeof *sq * (size_t)n);
  double *dist = nn_mem_alloc(mem, sizeof *dist * (size_t)n);
  if (!sq || !dist) {
    if (sq) nn_mem_free(mem, sq);
    if (dist) nn_mem_free(mem, dist);
    snprintf(err, NN_ERR_LEN, "out of memory for the diverse order of %lld rows", (long long)n);
    return NN_NOMEM;
  }
  /* A row with a number that is not finite, or a class out of range, is never picked: dist
   * -1 marks a row out of the draw (picked, or unusable). */
  int64_t usable = 0, first = -1;
  for (int64_t i = 0; i < n; i++) {
    const float *p = probs + (size_t)i * C, *x = feat + (size_t)i * F;
    int ok = top[i] >= 0 && top[i] < C;
    for (int c = 0; ok && c < C; c++) ok = isfinite(p[c]);
    for (int f = 0; ok && f < F; f++) ok = isfinite(x[f]);
    if (!ok) {
      sq[i] = 0.0, dist[i] = -1.0;
      continue;
    }
    sq[i] = grad_dot(p, top[i], p, top[i], C) * feat_dot(x, x, F);
    if (!isfinite(sq[i])) {
      sq[i] = 0.0, dist[i] = -1.0;
      continue;
    }
    dist[i] = INFINITY;
    usable++;
    if (first < 0 || sq[i] > sq[first]) first = i; /* ties: the first row */
  }
  if (k > usable) k = (int)usable;
  nn_rng rng;
  nn_rng_seed(&rng, seed);
  int rc = NN_OK;
  for (int64_t next = first; *picked < k;) {
    order[(*picked)++] = next;
    dist[next] = -1.0;
    if (*picked == k) break;
    if (stop && stop(stop_ctx)) {
      snprintf(err, NN_ERR_LEN, "interrupted");
      rc = NN_INTERRUPTED;
      break;
    }
    double total = 0.0;
    for (int64_t i = 0; i < n; i++) {
      if (dist[i] < 0.0) continue;
      double d = gap(probs, top, feat, sq, i, next, C, F);
      if (d < dist[i]) dist[i] = d;
      total += dist[i];
    }
    /* Draw the next in proportion to dist; when every row left is at distance 0 from a pick
     * (or the sum is not finite), the first row left in order, as the draw is then among
     * equals. */
    next = -1;
    if (total > 0.0 && isfinite(total)) {
      double u = (double)(nn_rng_next(&rng) >> 11) * 0x1.0p-53 * total, run = 0.0;
      for (int64_t i = 0; i < n; i++) {
        if (dist[i] < 0.0) continue;
        run += dist[i];
        if (dist[i] > 0.0) next = i; /* (rounding: the last row above 0 when u is not passed) */
        if (run > u && next == i) break;
      }
    }
    if (next < 0)
      for (int64_t i = 0; i < n && next < 0; i++)
        if (dist[i] >= 0.0) next = i;
  }
  nn_mem_free(mem, sq);
  nn_mem_free(mem, dist);
  return rc;
}
