/* fuzz_safetensors.c -- libFuzzer target: the safetensors loader on arbitrary bytes.
 *
 *   make fuzz FUZZ_SECONDS=60          (clang -fsanitize=fuzzer,address,undefined)
 *   build-fuzz/fuzz_safetensors tests/fuzz/corpus/safetensors
 *
 * nn_st_parse and nn_model_load must return an error or a model, never read outside the
 * buffer (the input is copied to an exact-size heap block so ASan sees any overread). A model
 * that loads must be usable: one forward pass on a short text, saved again, and the saved
 * bytes must load again. The resource bounds hold for every model that loads: it holds at most
 * (2 + NN_INFER_TABLES_FACTOR) x the BLOB (twice that for "storage": "float16", whose file
 * holds half the bytes a parameter) + NN_INFER_TABLES_SLACK bytes (nn_model_memory), has
 * no more classes than training allows, and nn_model_load_ex stopped at its first question
 * returns NN_INTERRUPTED. tests/test_fuzz_replay.c runs this function over the corpus and the
 * crash regressions without libFuzzer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "model.h"
#include "nn_internal.h"

#ifndef FUZZ_TRAP
#define FUZZ_TRAP() __builtin_trap()
#endif

static int fuzz_stop_now(void *ctx) {
  (*(int *)ctx)++;
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[NN_ERR_LEN];
  unsigned char *blob = malloc(size ? size : 1);
  if (!blob) return 0;
  if (size) memcpy(blob, data, size);

  nn_st_file file;
  memset(&file, 0, sizeof file);
  if (nn_st_parse(&file, blob, size, NULL, err) == NN_OK) {
    for (int i = 0; i < file.count; i++) { /* touch every tensor's bytes: must be in bounds */
      const nn_st_tensor *t = &file.tensors[i];
      volatile unsigned char sum = 0;
      for (size_t k = 0; k < t->nbytes; k += 64) sum ^= t->data[k];
      if (t->nbytes) sum ^= t->data[t->nbytes - 1];
      (void)sum;
    }
    nn_st_free(&file);
  }

  nn_model *model = NULL;
  if (nn_model_load(&model, blob, size, err) == NN_OK) {
    const nn_config *cfg = nn_model_config(model);
    /* a float16 file holds 2 bytes a parameter, the loaded model 4 */
    double width = cfg->storage == NN_STORAGE_FLOAT16 ? 2.0 : 1.0;
    double bound = (2.0 + NN_INFER_TABLES_FACTOR) * width * (double)size + NN_INFER_TABLES_SLACK;
    if ((double)nn_model_memory(model) > bound) FUZZ_TRAP(); /* memory out of proportion */
    if (nn_model_num_classes(model) > NN_MAX_CLASSES) FUZZ_TRAP();
    if (nn_vocab_count(nn_model_vocab(model)) > cfg->vocab_size) FUZZ_TRAP();
    int asked = 0;
    nn_model *stopped = NULL;
    if (nn_model_load_ex(&stopped, blob, size, fuzz_stop_now, &asked, NULL, err) !=
            NN_INTERRUPTED ||
        stopped || asked != 1)
      FUZZ_TRAP();
    int T = cfg->max_len; /* 1..4096: nn_text_encode writes up to max_len tokens */
    nn_token *tokens = malloc(sizeof *tokens * (size_t)T);
    int *ids = malloc(sizeof *ids * (size_t)T);
    float *attn = malloc(sizeof *attn * (size_t)T);
    int C = nn_model_num_classes(model);
    float *logits = malloc(sizeof *logits * (size_t)(C > 0 ? C : 1));
    nn_workspace *ws = NULL;
    if (tokens && ids && attn && logits && nn_workspace_create(&ws, NULL, err) == NN_OK) {
      int n = nn_text_encode(tokens, "fuzz the loader now", 19, cfg, nn_model_vocab(model));
      if (n < 1 || n > T) FUZZ_TRAP();
      if (n > T) n = T;
      for (int i = 0; i < n; i++) ids[i] = tokens[i].id;
      nn_batch batch = {ids, &n, NULL, 1, n};
      nn_model_forward(model, ws, &batch, 0, NULL, logits, attn, err);
    }
    free(tokens);
    free(ids);
    free(attn);
    nn_workspace_free(ws);
    free(logits);
    unsigned char *saved = NULL;
    size_t saved_len = 0;
    if (nn_model_save(model, &saved, &saved_len, err) == NN_OK) {
      nn_model *again = NULL;
      if (nn_model_load(&again, saved, saved_len, err) != NN_OK) FUZZ_TRAP(); /* round trip */
      nn_model_free(again);
    }
    free(saved);
    nn_model_free(model);
  }
  free(blob);
  return 0;
}
