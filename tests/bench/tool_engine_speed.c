/* tool_engine_speed.c -- micro-benchmark of the engine alone (no SQLite, no text): training
 * steps (forward + backward + Adam) on batches shaped like AG News titles under the lesson's
 * configuration, and one-row inference, so a change to the layers can be measured in seconds.
 *   build/tests/bench/tool_engine_speed [cell] [hidden] [batches] [rows per inference round]
 * Prints ms per training batch, training rows/s and single-row inference rows/s. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nn_internal.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  char err[NN_ERR_LEN];
  nn_config cfg;
  nn_config_default(&cfg);
  if (argc > 1) {
    char json[128];
    snprintf(json, sizeof json, "{\"cell\":\"%s\"}", argv[1]);
    if (nn_config_parse_json(&cfg, json, NULL, err) != NN_OK)
      return fprintf(stderr, "%s\n", err), 1;
  }
  if (argc > 2) cfg.hidden = atoi(argv[2]);
  int batches = argc > 3 ? atoi(argv[3]) : 100;
  enum { V = 5000, B = 64, T = 16, C = 4 };
  const char **toks = malloc(sizeof(char *) * V);
  int *lens = malloc(sizeof(int) * V);
  char(*names)[12] = malloc(12 * (size_t)V);
  for (int i = 0; i < V; i++) {
    snprintf(names[i], 12, i == 0 ? "<PAD>" : i == 1 ? "<UNK>" : "w%d", i);
    toks[i] = names[i];
    lens[i] = (int)strlen(names[i]);
  }
  nn_vocab *vocab;
  if (nn_vocab_from_list(&vocab, toks, lens, V, err) != NN_OK)
    return fprintf(stderr, "%s\n", err), 1;
  const char *labels[C] = {"a", "b", "c", "d"};
  nn_model *m;
  if (nn_model_create(&m, &cfg, vocab, labels, C, 1, err) != NN_OK)
    return fprintf(stderr, "%s\n", err), 1;
  nn_workspace *ws;
  nn_workspace_create(&ws, NULL, err);
  nn_adam adam;
  nn_adam_init(&adam, nn_model_param_count(m), 1e-3f, err);
  nn_rng rng;
  nn_rng_seed(&rng, 5);
  int tokens[B * T], lengths[B], y[B];
  float logits[B * C], dlogits[B * C], w[C] = {1, 1, 1, 1};
  long long tokens_seen = 0;
  double t0 = 0;
  for (int it = -5; it < batches; it++) { /* 5 warm-up batches */
    if (it == 0) t0 = now();
    for (int b = 0; b < B; b++) {
      lengths[b] = 4 + (int)nn_rng_below(&rng, 9); /* AG News titles: ~4-12 tokens kept */
      y[b] = (int)nn_rng_below(&rng, C);
      for (int t = 0; t < T; t++) tokens[b * T + t] = 2 + (int)nn_rng_below(&rng, V - 2);
      if (it >= 0) tokens_seen += lengths[b];
    }
    nn_batch batch = {tokens, lengths, y, B, T};
    nn_model_zero_grads(m, err);
    if (nn_model_forward(m, ws, &batch, 1, &rng, logits, NULL, err) != NN_OK)
      return fprintf(stderr, "%s\n", err), 1;
    nn_cross_entropy(dlogits, logits, y, w, B, C);
    nn_model_backward(m, ws, &batch, dlogits, err);
    nn_adam_step(&adam, nn_model_params(m), nn_model_grads(m));
  }
  double train_s = now() - t0;
  /* one row at a time, as attn_predict does: first with the input projection as a GEMM, then
   * on the model prepared as nn_model_load prepares it (folded table), alternating rounds so
   * that machine load hits both alike */
  int rows = argc > 4 ? atoi(argv[4]) : 4000;
  double plain_s = 0, infer_s = 0;
  for (int round = 0; round < 10; round++) {
    for (int folded = 0; folded < 2; folded++) {
      if (folded && nn_model_prepare_inference(m, err) != NN_OK)
        return fprintf(stderr, "%s\n", err), 1;
      if (!folded) nn_model_params(m); /* drops the folded table */
      t0 = now();
      for (int r = 0; r < rows; r++) {
        int len = 4 + r % 9;
        nn_batch one = {tokens + (r % B) * T, &len, NULL, 1, T};
        nn_model_forward(m, ws, &one, 0, NULL, logits, NULL, err);
      }
      *(folded ? &infer_s : &plain_s) += now() - t0;
    }
  }
  rows *= 10;
  printf("cell %s hidden %d: train %.3f ms/batch, %.0f rows/s, %.0f tokens/s; "
         "inference one row at a time %.0f rows/s (without the folded table %.0f)\n",
         nn_cell_name(cfg.cell), cfg.hidden, 1e3 * train_s / batches, B * batches / train_s,
         tokens_seen / train_s, rows / infer_s, rows / plain_s);
  nn_adam_free(&adam);
  nn_workspace_free(ws);
  nn_model_free(m);
  free(toks);
  free(lens);
  free(names);
  return 0;
}
