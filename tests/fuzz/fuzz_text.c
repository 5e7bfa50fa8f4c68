/* fuzz_text.c -- libFuzzer target: preprocessing, tokenizer and vocabulary.
 *
 * The first two bytes choose the mode (lower, stopwords, char_level, unicode, max_len); the rest
 * is split at '\n' into texts (any bytes: invalid UTF-8, NUL bytes). For every mode:
 * nn_text_clean, nn_text_tokenize (spans inside the text, ordered), nn_vocab_build over the
 * texts, nn_text_encode of each (1..max_len tokens, ids inside the vocabulary). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nn_internal.h"

#ifndef FUZZ_TRAP
#define FUZZ_TRAP() __builtin_trap()
#endif

typedef struct fuzz_text_ctx {
  int len, count, bad;
} fuzz_text_ctx;

static void fuzz_text_token(void *p, const char *tok, int tok_len, int start, int end) {
  fuzz_text_ctx *c = p;
  c->count++;
  if (tok_len < 0 || (tok_len > 0 && !tok)) c->bad = 1;
  if (start == -1 && end == -1) return;
  if (start < 0 || end < start || end > c->len) c->bad = 1;
}

#define FUZZ_MAX_TEXTS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2 || size > (1 << 20)) return 0;
  char err[NN_ERR_LEN];
  nn_config cfg;
  nn_config_default(&cfg);
  cfg.lower = data[0] & 1;
  cfg.stopwords = (data[0] >> 1) & 1;
  cfg.char_level = (data[0] >> 2) & 1;
  cfg.unicode = (data[0] >> 3) & 1;
  cfg.max_len = 1 + data[1] % 32;
  cfg.vocab_size = 3 + (data[0] >> 4) * 4;
  size -= 2;
  /* exact-size copy so that ASan sees a read past the end */
  char *text = malloc(size ? size : 1);
  if (!text) return 0;
  memcpy(text, data + 2, size);

  const char *texts[FUZZ_MAX_TEXTS];
  int lens[FUZZ_MAX_TEXTS], n = 0;
  size_t start = 0;
  for (size_t i = 0; i <= size && n < FUZZ_MAX_TEXTS; i++) {
    if (i == size || text[i] == '\n') {
      texts[n] = text + start;
      lens[n++] = (int)(i - start);
      start = i + 1;
    }
  }
  for (int k = 0; k < n; k++) {
    char *clean = nn_text_clean(texts[k], lens[k], &cfg, NULL);
    free(clean);
    fuzz_text_ctx c = {lens[k], 0, 0};
    int got = nn_text_tokenize(texts[k], lens[k], &cfg, fuzz_text_token, &c, NULL);
    if (c.bad || (got >= 0 && got != c.count)) FUZZ_TRAP();
  }
  nn_vocab *vocab = NULL;
  if (nn_vocab_build(&vocab, texts, lens, n, &cfg, err) == NN_OK) {
    int V = nn_vocab_count(vocab);
    if (V < 2 || V > cfg.vocab_size) FUZZ_TRAP();
    nn_token tokens[32];
    for (int k = 0; k < n; k++) {
      int m = nn_text_encode(tokens, texts[k], lens[k], &cfg, vocab);
      if (m < 1 || m > cfg.max_len) FUZZ_TRAP();
      for (int t = 0; t < m && t < 32; t++) {
        if (tokens[t].id < 0 || tokens[t].id >= V) FUZZ_TRAP();
        if (tokens[t].start != -1 &&
            (tokens[t].start < 0 || tokens[t].end > lens[k] || tokens[t].end < tokens[t].start))
          FUZZ_TRAP();
      }
    }
    /* every vocabulary token maps back to its id */
    for (int id = 2; id < V; id++) {
      int tl = 0;
      const char *tok = nn_vocab_token(vocab, id, &tl);
      if (!tok || nn_vocab_lookup(vocab, tok, tl) != id) FUZZ_TRAP();
    }
    nn_vocab_free(vocab);
  }
  free(text);
  return 0;
}
