/* test_model_limits.c -- the largest models the options allow, and workspaces after a failed
 * batch (regressions of two memory-safety bugs found in review):
 *   - 8 bidirectional layers with self attention hold 75 tensors: create, forward, save and
 *     load must work (the tensor table once held 64 and overflowed: a crash from attn_train
 *     options or from a 224-byte BLOB given to attn_import);
 *   - a file whose config asks for such a model but holds no tensors is refused cleanly;
 *   - a forward that fails on a bad token id leaves no batch behind: a backward is refused
 *     instead of reading the half-prepared index arrays;
 * and <UNK>'s initial row: zero in the default recipe without word dropout (nothing would train
 * it: a random row made unknown words noise), PyTorch's N(0, 1) draw otherwise. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "config_base.h"
#include "nn_internal.h"

static nn_model *deep_model(const char *options, char *err) {
  nn_config cfg;
  test_config_base(&cfg);
  if (nn_config_parse_json(&cfg, options, NULL, err) != NN_OK) return NULL;
  const char *toks[6] = {"<PAD>", "<UNK>", "a", "b", "c", "d"};
  int lens[6] = {5, 5, 1, 1, 1, 1};
  nn_vocab *vocab;
  if (nn_vocab_from_list(&vocab, toks, lens, 6, err) != NN_OK) return NULL;
  const char *labels[2] = {"x", "y"};
  nn_model *m = NULL;
  if (nn_model_create(&m, &cfg, vocab, labels, 2, 3, err) != NN_OK) return NULL;
  return m;
}

/* The sum of |x| over <UNK>'s embedding rows (every member's) of a model made with these
 * options; -1 if it cannot be made. */
static double unk_row(const char *options, char *err) {
  nn_model *m = deep_model(options, err);
  if (!m) return -1.0;
  double sum = 0.0;
  const char *suffix = "embeddings.weight";
  for (int i = 0; i < nn_model_tensor_count(m); i++) {
    nn_tensor_info t;
    nn_model_tensor(m, i, &t);
    size_t n = strlen(t.name), k = strlen(suffix);
    if (n < k || strcmp(t.name + n - k, suffix) != 0) continue;
    const float *row = nn_model_params(m) + t.offset + (size_t)NN_UNK * t.shape[1];
    for (int j = 0; j < t.shape[1]; j++) sum += row[j] < 0 ? -row[j] : row[j];
  }
  nn_model_free(m);
  return sum;
}

static void test_unk_row(char *err) {
  double zero = unk_row("{\"word_dropout\":0,\"embed_dim\":6}", err);
  CHECK(zero == 0.0, "default recipe, word_dropout 0: <UNK> row |x| sum %g, want 0 (%s)", zero,
        zero < 0 ? err : "");
  double ensemble = unk_row("{\"word_dropout\":0,\"embed_dim\":6,\"ensemble\":2}", err);
  CHECK(ensemble == 0.0, "ensemble, word_dropout 0: <UNK> row |x| sum %g, want 0", ensemble);
  double dropped = unk_row("{\"word_dropout\":0.2,\"embed_dim\":6}", err);
  CHECK(dropped > 0.0, "default recipe, word_dropout 0.2: <UNK> row drawn, got |x| sum %g",
        dropped);
  double lesson = unk_row("{\"recipe\":\"lesson\",\"embed_dim\":6}", err);
  CHECK(lesson > 0.0, "the lesson: <UNK> row drawn as PyTorch's, got |x| sum %g", lesson);
}

int main(void) {
  char err[NN_ERR_LEN];
  test_unk_row(err);
  const char *attns[] = {"linear", "additive", "self", "dot"};
  for (int a = 0; a < 4; a++) {
    char options[160];
    snprintf(options, sizeof options,
             "{\"layers\":8,\"bidirectional\":true,\"attention\":\"%s\",\"cell\":\"lstm\","
             "\"hidden\":3,\"embed_dim\":2,\"fc_hidden\":2}",
             attns[a]);
    nn_model *m = deep_model(options, err);
    CHECK(m != NULL, "8 bidirectional layers, %s attention: %s", attns[a], m ? "" : err);
    if (!m) continue;
    int expect = 1 + 8 * 2 * 4 + (a == 0 ? 2 : a == 1 ? 3 : a == 2 ? 6 : 0) + 4;
    CHECK(nn_model_tensor_count(m) == expect, "%s: %d tensors, expected %d", attns[a],
          nn_model_tensor_count(m), expect);
    nn_tensor_info last;
    nn_model_tensor(m, nn_model_tensor_count(m) - 1, &last);
    CHECK(strcmp(last.name, "fc2.bias") == 0, "%s: last tensor %s", attns[a], last.name);
    int tokens[2 * 3] = {2, 3, 4, 5, 0, 0}, lengths[2] = {3, 1};
    nn_batch batch = {tokens, lengths, NULL, 2, 3};
    float logits[4], logits2[4];
    nn_workspace *ws;
    nn_workspace_create(&ws, NULL, err);
    CHECK(nn_model_forward(m, ws, &batch, 0, NULL, logits, NULL, err) == NN_OK, "forward: %s", err);
    unsigned char *blob;
    size_t len;
    CHECK(nn_model_save(m, &blob, &len, err) == NN_OK, "save: %s", err);
    nn_model *loaded = NULL;
    CHECK(nn_model_load(&loaded, blob, len, err) == NN_OK, "load: %s", err);
    if (loaded) {
      nn_model_forward(loaded, ws, &batch, 0, NULL, logits2, NULL, err);
      for (int i = 0; i < 4; i++)
        CHECK_CLOSE(logits2[i], logits[i], 1e-5, 1e-6, "loaded model's logits");
      nn_model_free(loaded);
    }
    free(blob);
    nn_workspace_free(ws);
    nn_model_free(m);
  }

  /* the reviewer's hostile file: a config asking for 8 bidirectional layers, no tensors */
  static const char header[] =
      "{\"__metadata__\": {\"format_version\": \"1\", \"config\": \"{\\\"layers\\\": 8, "
      "\\\"bidirectional\\\": true, \\\"hidden\\\": 4, \\\"embed_dim\\\": 4, \\\"device\\\": "
      "\\\"cpu\\\"}\", \"vocab\": \"[\\\"<PAD>\\\", \\\"<UNK>\\\"]\", \"labels\": \"[\\\"a\\\", "
      "\\\"b\\\"]\"}}";
  unsigned char blob[512];
  size_t n = strlen(header);
  /* the header's length as 8 bytes, little-endian: through 64 bits, as size_t may have 32
   * (WebAssembly) and a shift by 32 or more of a 32-bit value is undefined */
  for (int i = 0; i < 8; i++) blob[i] = (unsigned char)((uint64_t)n >> (8 * i));
  memcpy(blob + 8, header, n);
  nn_model *bad = NULL;
  int rc = nn_model_load(&bad, blob, 8 + n, err);
  CHECK(rc == NN_ERROR && bad == NULL, "hostile file refused (rc %d): %s", rc, err);
  CHECK(strstr(err, "missing") != NULL, "error names a missing tensor: %s", err);

  /* a failed forward leaves no batch for backward */
  nn_model *m = deep_model("{\"hidden\":4,\"embed_dim\":3}", err);
  CHECK(m != NULL, "small model: %s", err);
  if (m) {
    nn_workspace *ws;
    nn_workspace_create(&ws, NULL, err);
    int tokens[2 * 3] = {2, 3, 4, 5, 0, 0}, lengths[2] = {3, 1}, labels[2] = {0, 1};
    nn_batch good = {tokens, lengths, labels, 2, 3};
    float logits[4], dlogits[4] = {0.1f, -0.1f, 0.2f, -0.2f};
    nn_rng rng;
    nn_rng_seed(&rng, 1);
    CHECK(nn_model_forward(m, ws, &good, 1, &rng, logits, NULL, err) == NN_OK, "forward: %s", err);
    int bad_tokens[2 * 3] = {2, 3, 99, 5, 0, 0}; /* 99 is outside the vocabulary */
    nn_batch bad_batch = {bad_tokens, lengths, labels, 2, 3};
    CHECK(nn_model_forward(m, ws, &bad_batch, 1, &rng, logits, NULL, err) == NN_ERROR,
          "a bad token id is an error");
    CHECK(strstr(err, "token id 99") != NULL, "the error names the id: %s", err);
    CHECK(nn_model_zero_grads(m, err) == NN_OK, "zero grads: %s", err);
    rc = nn_model_backward(m, ws, &good, dlogits, err);
    CHECK(rc == NN_ERROR, "backward after a failed forward is refused (rc %d)", rc);
    nn_workspace_free(ws);
    nn_model_free(m);
  }
  return check_finish("test_model_limits");
}
