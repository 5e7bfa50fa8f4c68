/* test_gradcheck.c -- finite-difference checks of every layer's backward pass.
 *
 * For every cell {rnn, gru, lstm} x direction {uni, bi} x attention {linear, additive, self, dot},
 * plus 2- and 3-layer stacks, no fc1, and dropout (with the mask held fixed by re-seeding),
 * the analytic gradient of the class-weighted cross-entropy w.r.t. every parameter tensor is
 * compared with central differences on a padded batch of mixed lengths (masks included: the
 * batch has a length-1 row and rows shorter than T whose padding holds garbage ids).
 * Also checks that padding content and the order of rows do not change the results. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "nn_internal.h"

enum { B = 5, T = 6, C = 3, V = 14 };
static const int lengths[B] = {4, 1, 6, 3, 6};
static const int labels[B] = {2, 0, 1, 2, 0};
static const float class_weights[C] = {0.5f, 1.0f, 2.0f};

/* subword buckets of the variants made while it is set (0: none); the vocabulary's words
 * "w2".."w13" then each have 5 subwords of lengths 2 and 3 ("<w", "w2", "2>", "<w2", "w2>") */
static int subword_buckets = 0;

static nn_model *make_model(nn_cell cell, int bi, nn_attention attn, int layers, int fc,
                            float dropout, float embed_dropout) {
  char err[NN_ERR_LEN];
  nn_config cfg;
  nn_config_lesson(&cfg);
  cfg.cell = cell;
  cfg.bidirectional = bi;
  cfg.attention = attn;
  cfg.layers = layers;
  cfg.embed_dim = 5;
  cfg.hidden = 4;
  cfg.fc_hidden = fc;
  cfg.dropout = dropout;
  cfg.embed_dropout = embed_dropout;
  cfg.subword_buckets = subword_buckets;
  cfg.subword_min = 2;
  cfg.subword_max = 3;
  const char *toks[V];
  char names[V][8];
  int lens[V];
  for (int i = 0; i < V; i++) {
    snprintf(names[i], sizeof names[i], i == 0 ? "<PAD>" : i == 1 ? "<UNK>" : "w%d", i);
    toks[i] = names[i];
    lens[i] = (int)strlen(names[i]);
  }
  nn_vocab *vocab = NULL;
  if (nn_vocab_from_list(&vocab, toks, lens, V, err) != NN_OK) {
    fprintf(stderr, "vocab: %s\n", err);
    return NULL;
  }
  const char *labs[C] = {"a", "b", "c"};
  nn_model *m = NULL;
  if (nn_model_create(&m, &cfg, vocab, labs, C, 42, err) != NN_OK) {
    fprintf(stderr, "model: %s\n", err);
    return NULL;
  }
  /* weights twice PyTorch's initial scale: at init the attention scores are nearly flat and
   * their gradients too small (~1e-4) to tell from float32 rounding in differences */
  float *p = nn_model_params(m);
  for (size_t i = 0; i < nn_model_param_count(m); i++) p[i] *= 2.0f;
  return m;
}

static void make_tokens(int *tokens, int garbage) {
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++)
      tokens[b * T + t] = t < lengths[b] ? 1 + (b * 7 + t * 3) % (V - 1) : garbage;
}

/* Probe loss sum(R * logits) with fixed R in [-1, 1]: its gradient is O(1) everywhere, so
 * float32 rounding in the forward pass does not swamp the finite differences (a
 * cross-entropy at initialisation gives gradients of ~1e-4 on the attention weights). The
 * cross-entropy's own gradient is checked separately below. Dropout comes from a fixed seed. */
static float probe[B * C];
static double batch_loss(nn_model *m, nn_workspace *ws, const nn_batch *batch, float *logits,
                         float *dlogits) {
  char err[NN_ERR_LEN];
  nn_rng rng;
  nn_rng_seed(&rng, 7);
  if (nn_model_forward(m, ws, batch, 1, &rng, logits, NULL, err) != NN_OK) {
    fprintf(stderr, "forward: %s\n", err);
    return NAN;
  }
  double loss = 0.0;
  for (int i = 0; i < B * C; i++) {
    loss += (double)probe[i] * logits[i];
    dlogits[i] = probe[i];
  }
  return loss;
}

/* d CE / d logits against central differences (the loss is computed in double), without and
 * with label smoothing, with the class weights and without */
static void check_cross_entropy(float smoothing, const float *weights) {
  float logits[B * C], d[B * C], scratch[B * C];
  for (int i = 0; i < B * C; i++) logits[i] = (float)((i * 37 % 11) - 5) * 0.3f;
  double loss = nn_cross_entropy_smoothed(d, logits, labels, weights, B, C, smoothing);
  /* by hand for row sums: the gradient of each row sums to zero */
  for (int b = 0; b < B; b++) {
    double s = 0.0;
    for (int c = 0; c < C; c++) s += d[b * C + c];
    CHECK(fabs(s) < 1e-6, "cross-entropy gradient row %d sums to %g", b, s);
  }
  for (int i = 0; i < B * C; i++) {
    float saved = logits[i];
    logits[i] = saved + 1e-2f;
    double lp = nn_cross_entropy_smoothed(scratch, logits, labels, weights, B, C, smoothing);
    logits[i] = saved - 1e-2f;
    double lm = nn_cross_entropy_smoothed(scratch, logits, labels, weights, B, C, smoothing);
    logits[i] = saved;
    CHECK_CLOSE(d[i], (lp - lm) / 2e-2, 2e-3, 1e-5, "cross-entropy d loss / d logit");
  }
  if (smoothing == 0.0f) { /* the unsmoothed entry point gives the same bits */
    float d0[B * C];
    float l0 = nn_cross_entropy(d0, logits, labels, weights, B, C);
    CHECK(l0 == (float)loss && memcmp(d0, d, sizeof d) == 0,
          "nn_cross_entropy differs from nn_cross_entropy_smoothed(0)");
  }
  printf("cross-entropy (label smoothing %.2f, %s) loss %.6f, gradient checked\n", smoothing,
         weights ? "class weights" : "unweighted", loss);
}

static void check_variant(nn_cell cell, int bi, nn_attention attn, int layers, int fc,
                          float dropout, float embed_dropout) {
  char name[112], err[NN_ERR_LEN];
  snprintf(name, sizeof name, "%s %s %s layers=%d fc=%d dropout=%.1f embed_dropout=%.1f%s",
           nn_cell_name(cell), bi ? "bi" : "uni", nn_attention_name(attn), layers, fc, dropout,
           embed_dropout, subword_buckets ? " subwords" : "");
  nn_model *m = make_model(cell, bi, attn, layers, fc, dropout, embed_dropout);
  CHECK(m != NULL, "%s: model created", name);
  if (!m) return;
  nn_workspace *ws = NULL;
  CHECK(nn_workspace_create(&ws, NULL, err) == NN_OK, "workspace: %s", err);
  int tokens[B * T];
  make_tokens(tokens, 0);
  nn_batch batch = {tokens, lengths, labels, B, T};
  float logits[B * C], dlogits[B * C];

  batch_loss(m, ws, &batch, logits, dlogits);
  CHECK(nn_model_zero_grads(m, err) == NN_OK, "zero grads: %s", err);
  CHECK(nn_model_backward(m, ws, &batch, dlogits, err) == NN_OK, "backward: %s", err);
  size_t n = nn_model_param_count(m);
  float *params = nn_model_params(m);
  float *grads_copy = malloc(n * sizeof(float));
  memcpy(grads_copy, nn_model_grads(m), n * sizeof(float));

  double worst = 0.0;
  const char *worst_name = "";
  for (int ti = 0; ti < nn_model_tensor_count(m); ti++) {
    nn_tensor_info info;
    nn_model_tensor(m, ti, &info);
    /* check up to 24 elements spread over the tensor (every element of small ones) */
    size_t step = info.size > 24 ? info.size / 24 : 1;
    double num2 = 0.0, diff2 = 0.0, ana2 = 0.0;
    for (size_t k = 0; k < info.size; k += step) {
      size_t i = info.offset + k;
      /* Richardson extrapolation of central differences at h and h/2: error O(h^4), so a
       * step large enough to keep float32 rounding noise down stays accurate */
      float saved = params[i];
      double central[2];
      for (int half = 0; half < 2; half++) {
        const float h = half ? 0.04f : 0.08f;
        params[i] = saved + h;
        double lp = batch_loss(m, ws, &batch, logits, dlogits);
        params[i] = saved - h;
        double lm = batch_loss(m, ws, &batch, logits, dlogits);
        params[i] = saved;
        central[half] = (lp - lm) / (2.0 * (double)h);
      }
      double numeric = (4.0 * central[1] - central[0]) / 3.0, analytic = grads_copy[i];
      num2 += numeric * numeric;
      ana2 += analytic * analytic;
      diff2 += (numeric - analytic) * (numeric - analytic);
    }
    /* ||numeric - analytic|| <= rtol ||analytic|| + atol over the sampled elements; atol is
     * the float32 rounding floor of the differences (~1e-7 loss noise / h, times sqrt(24)) */
    const double rtol = 5e-3, atol = 3e-5;
    double scale = sqrt(num2 > ana2 ? num2 : ana2);
    double rel = scale > 0.0 ? sqrt(diff2) / scale : 0.0;
    if (rel > worst) {
      worst = rel;
      worst_name = info.name;
    }
    CHECK(sqrt(diff2) <= rtol * sqrt(ana2) + atol,
          "%s: %s gradient |numeric - analytic| %.3g > %.0e |analytic| + %.0e (|numeric| %.3g, "
          "|analytic| %.3g)",
          name, info.name, sqrt(diff2), rtol, atol, sqrt(num2), sqrt(ana2));
  }
  printf("%-44s worst relative error %.2e (%s)\n", name, worst, worst_name);

  /* the padding row of the embedding gets no gradient, as padding_idx=0 in PyTorch */
  const float *g = nn_model_grads(m);
  float pad_norm = 0.0f;
  for (int k = 0; k < 5; k++) pad_norm += fabsf(g[k]);
  CHECK(pad_norm == 0.0f, "%s: <PAD> embedding row gradient is %g, want 0", name, pad_norm);

  /* padding content is never read: garbage beyond each length gives the same logits */
  if (dropout == 0.0f && embed_dropout == 0.0f) {
    float logits2[B * C], attn1[B * T], attn2[B * T];
    nn_model_forward(m, ws, &batch, 0, NULL, logits, attn1, err);
    int tokens2[B * T];
    make_tokens(tokens2, 9);
    nn_batch batch2 = {tokens2, lengths, labels, B, T};
    nn_model_forward(m, ws, &batch2, 0, NULL, logits2, attn2, err);
    CHECK(memcmp(logits, logits2, sizeof logits) == 0, "%s: padding content changed logits", name);
    for (int b = 0; b < B; b++) {
      double sum = 0.0;
      for (int t = 0; t < T; t++) {
        sum += attn1[b * T + t];
        if (t >= lengths[b])
          CHECK(attn1[b * T + t] == 0.0f, "%s: attention on padding row %d pos %d", name, b, t);
      }
      CHECK(fabs(sum - 1.0) < 1e-5, "%s: attention of row %d sums to %.7f", name, b, sum);
    }
    /* the folded input projection (inference) gives the logits of the plain one */
    float folded[B * C], attn3[B * T];
    CHECK(nn_model_prepare_inference(m, err) == NN_OK, "prepare inference: %s", err);
    nn_model_forward(m, ws, &batch, 0, NULL, folded, attn3, err);
    for (int i = 0; i < B * C; i++)
      CHECK_CLOSE(folded[i], logits[i], 1e-5, 1e-6, "folded vs plain logits");
    for (int i = 0; i < B * T; i++)
      CHECK_CLOSE(attn3[i], attn1[i], 1e-5, 1e-6, "folded vs plain attention");
    /* rows are independent of the other rows of the batch: row 2 alone gives its logits */
    nn_batch one = {tokens + 2 * T, lengths + 2, labels + 2, 1, T};
    float single[C];
    nn_model_forward(m, ws, &one, 0, NULL, single, NULL, err);
    for (int c = 0; c < C; c++)
      CHECK_CLOSE(single[c], logits[2 * C + c], 1e-5, 1e-6, "row 2 alone vs in the batch");
  }
  free(grads_copy);
  nn_workspace_free(ws);
  nn_model_free(m);
}

int main(void) {
  nn_rng rng;
  nn_rng_seed(&rng, 99);
  for (int i = 0; i < B * C; i++) probe[i] = 2.0f * nn_rng_uniform(&rng) - 1.0f;
  check_cross_entropy(0.0f, class_weights);
  check_cross_entropy(0.1f, class_weights);
  check_cross_entropy(0.3f, NULL);
  check_cross_entropy(1.0f, class_weights);
  const nn_cell cells[] = {NN_CELL_RNN, NN_CELL_GRU, NN_CELL_LSTM};
  const nn_attention attns[] = {NN_ATTN_LINEAR, NN_ATTN_ADDITIVE, NN_ATTN_SELF, NN_ATTN_DOT};
  for (int c = 0; c < 3; c++)
    for (int bi = 0; bi < 2; bi++)
      for (int a = 0; a < 4; a++) check_variant(cells[c], bi, attns[a], 1, 3, 0.0f, 0.0f);
  check_variant(NN_CELL_GRU, 1, NN_ATTN_LINEAR, 2, 3, 0.0f, 0.0f);
  check_variant(NN_CELL_LSTM, 1, NN_ATTN_LINEAR, 3, 3, 0.0f, 0.0f);
  check_variant(NN_CELL_LSTM, 1, NN_ATTN_SELF, 2, 3, 0.0f, 0.0f);
  check_variant(NN_CELL_RNN, 0, NN_ATTN_LINEAR, 2, 3, 0.0f, 0.0f);
  check_variant(NN_CELL_LSTM, 0, NN_ATTN_ADDITIVE, 1, 0, 0.0f, 0.0f);
  check_variant(NN_CELL_GRU, 1, NN_ATTN_SELF, 1, 3, 0.3f, 0.0f);
  check_variant(NN_CELL_RNN, 1, NN_ATTN_ADDITIVE, 1, 0, 0.5f, 0.0f);
  check_variant(NN_CELL_GRU, 1, NN_ATTN_DOT, 2, 0, 0.3f, 0.0f);
  check_variant(NN_CELL_LSTM, 0, NN_ATTN_DOT, 3, 3, 0.0f, 0.0f);
  /* embed_dropout: the mask on the embedded tokens, alone and with fc dropout */
  check_variant(NN_CELL_GRU, 1, NN_ATTN_LINEAR, 1, 3, 0.0f, 0.4f);
  check_variant(NN_CELL_LSTM, 0, NN_ATTN_ADDITIVE, 2, 0, 0.3f, 0.5f);
  check_variant(NN_CELL_RNN, 1, NN_ATTN_SELF, 1, 3, 0.5f, 0.3f);
  /* subwords: each word's input is the mean of its row and its subword rows */
  subword_buckets = 7;
  check_variant(NN_CELL_GRU, 1, NN_ATTN_LINEAR, 1, 3, 0.0f, 0.0f);
  check_variant(NN_CELL_LSTM, 0, NN_ATTN_ADDITIVE, 2, 0, 0.0f, 0.0f);
  check_variant(NN_CELL_RNN, 1, NN_ATTN_DOT, 1, 3, 0.3f, 0.4f);
  subword_buckets = 0;
  return check_finish("test_gradcheck");
}
