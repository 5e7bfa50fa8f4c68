/* tool_predict.c -- a small command-line front end of the engine for tests/test_interop.py.
 *
 *   tool_predict MODEL.safetensors < texts
 *       loads the model with nn_model_load, encodes every input line (one text per line, the
 *       trailing "\n" / "\r\n" removed) with the model's tokenizer and vocabulary, runs one
 *       inference forward pass over all lines as one padded batch, and prints per line
 *           ids ID... | logits L... | attn A...
 *       (the token ids the engine fed the network, the C logits, and one attention weight per
 *       token), numbers as %.9g.
 *
 *   tool_predict --save-random CONFIG_JSON OUT.safetensors LABEL LABEL...
 *       creates a model with nn_model_create (config = defaults + CONFIG_JSON, seed 42, the given
 *       labels, a vocabulary of <PAD>, <UNK> and cfg.vocab_size - 2 words: the built-in word list
 *       below, then "w<id>") and writes it with nn_model_save.
 *
 * Exit status 0 on success, 1 with a message on stderr otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn_internal.h"

static const char *const words[] = {
    "stocks", "market", "rally",   "oil",    "prices",   "team",   "wins",     "game",
    "final",  "tennis", "season",  "coach",  "election", "vote",   "minister", "talks",
    "peace",  "war",    "troops",  "iraq",   "software", "google", "apple",    "microsoft",
    "space",  "nasa",   "launch",  "profit", "shares",   "bank",   "rates",    "growth",
    "cup",    "league", "players", "court",  "police",   "chip",   "web",      "phone"};

static unsigned char *read_all(FILE *f, size_t *len) {
  size_t cap = 1 << 16, n = 0;
  unsigned char *buf = malloc(cap);
  if (!buf) return NULL;
  for (;;) {
    if (n == cap) {
      unsigned char *grown = realloc(buf, cap * 2);
      if (!grown) {
        free(buf);
        return NULL;
      }
      buf = grown;
      cap *= 2;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    if (got == 0) break;
    n += got;
  }
  *len = n;
  return buf;
}

static int save_random(const char *config_json, const char *out_path, int nlabels, char **labels) {
  char err[NN_ERR_LEN];
  nn_config cfg;
  nn_config_default(&cfg);
  if (nn_config_parse_json(&cfg, config_json, NULL, err) != NN_OK) {
    fprintf(stderr, "tool_predict: config: %s\n", err);
    return 1;
  }
  int V = cfg.vocab_size, rc = 1;
  char **toks = calloc((size_t)V, sizeof *toks);
  int *lens = calloc((size_t)V, sizeof *lens);
  nn_vocab *vocab = NULL;
  nn_model *model = NULL;
  unsigned char *blob = NULL;
  size_t blob_len = 0;
  if (!toks || !lens) goto done;
  for (int i = 0; i < V; i++) {
    char buf[32];
    const int nwords = (int)(sizeof words / sizeof *words);
    if (i == 0) snprintf(buf, sizeof buf, "<PAD>");
    else if (i == 1) snprintf(buf, sizeof buf, "<UNK>");
    else if (i - 2 < nwords) snprintf(buf, sizeof buf, "%s", words[i - 2]);
    else snprintf(buf, sizeof buf, "w%d", i);
    if (!(toks[i] = strdup(buf))) goto done;
    lens[i] = (int)strlen(buf);
  }
  if (nn_vocab_from_list(&vocab, (const char *const *)toks, lens, V, err) != NN_OK) {
    fprintf(stderr, "tool_predict: nn_vocab_from_list: %s\n", err);
    goto done;
  }
  nn_vocab *owned = vocab;
  vocab = NULL; /* nn_model_create takes it, also on error */
  if (nn_model_create(&model, &cfg, owned, (const char *const *)labels, nlabels, 42, err) !=
      NN_OK) {
    fprintf(stderr, "tool_predict: nn_model_create: %s\n", err);
    model = NULL;
    goto done;
  }
  if (nn_model_save(model, &blob, &blob_len, err) != NN_OK) {
    fprintf(stderr, "tool_predict: nn_model_save: %s\n", err);
    blob = NULL;
    goto done;
  }
  FILE *f = fopen(out_path, "wb");
  if (!f) {
    fprintf(stderr, "tool_predict: cannot write %s\n", out_path);
    goto done;
  }
  int ok = fwrite(blob, 1, blob_len, f) == blob_len;
  ok = (fclose(f) == 0) && ok;
  if (!ok) fprintf(stderr, "tool_predict: writing %s failed\n", out_path);
  rc = ok ? 0 : 1;
done:
  if (rc && !toks) fprintf(stderr, "tool_predict: out of memory\n");
  for (int i = 0; toks && i < V; i++) free(toks[i]);
  free(toks);
  free(lens);
  nn_vocab_free(vocab);
  nn_model_free(model);
  free(blob);
  return rc;
}

static int predict(const char *model_path) {
  char err[NN_ERR_LEN];
  size_t len = 0, in_len = 0;
  FILE *f = fopen(model_path, "rb");
  if (!f) {
    fprintf(stderr, "tool_predict: cannot open %s\n", model_path);
    return 1;
  }
  unsigned char *blob = read_all(f, &len);
  fclose(f);
  unsigned char *input = read_all(stdin, &in_len);
  nn_model *model = NULL;
  nn_workspace *ws = NULL;
  nn_token *toks = NULL;
  int *tokens = NULL, *lengths = NULL, rc = 1, B = 0, T = 1;
  float *logits = NULL, *attn = NULL;
  if (!blob || !input) goto done;
  if (nn_model_load(&model, blob, len, err) != NN_OK) {
    fprintf(stderr, "tool_predict: nn_model_load(%s): %s\n", model_path, err);
    model = NULL;
    goto done;
  }
  const nn_config *cfg = nn_model_config(model);
  const int C = nn_model_num_classes(model), max_len = cfg->max_len;
  /* lines */
  for (size_t i = 0; i < in_len; i++) B += input[i] == '\n';
  if (in_len > 0 && input[in_len - 1] != '\n') B++;
  if (B == 0) {
    rc = 0;
    goto done;
  }
  toks = malloc(sizeof *toks * (size_t)max_len);
  tokens = calloc((size_t)B * (size_t)max_len, sizeof *tokens);
  lengths = calloc((size_t)B, sizeof *lengths);
  if (!toks || !tokens || !lengths) goto done;
  size_t pos = 0;
  for (int b = 0; b < B; b++) {
    size_t end = pos;
    while (end < in_len && input[end] != '\n') end++;
    size_t stop = end;
    if (stop > pos && input[stop - 1] == '\r') stop--;
    int n = nn_text_encode(toks, (const char *)input + pos, (int)(stop - pos), cfg,
                           nn_model_vocab(model));
    lengths[b] = n;
    if (n > T) T = n;
    for (int t = 0; t < n; t++) tokens[(size_t)b * max_len + t] = toks[t].id;
    pos = end + 1;
  }
  /* repack (B, max_len) as (B, T) */
  for (int b = 1; b < B; b++)
    memmove(tokens + (size_t)b * T, tokens + (size_t)b * max_len, sizeof *tokens * (size_t)T);
  logits = malloc(sizeof *logits * (size_t)B * C);
  attn = malloc(sizeof *attn * (size_t)B * T);
  if (!logits || !attn) goto done;
  if (nn_workspace_create(&ws, NULL, err) != NN_OK) {
    fprintf(stderr, "tool_predict: nn_workspace_create: %s\n", err);
    ws = NULL;
    goto done;
  }
  nn_batch batch = {tokens, lengths, NULL, B, T};
  if (nn_model_forward(model, ws, &batch, 0, NULL, logits, attn, err) != NN_OK) {
    fprintf(stderr, "tool_predict: nn_model_forward: %s\n", err);
    goto done;
  }
  for (int b = 0; b < B; b++) {
    printf("ids");
    for (int t = 0; t < lengths[b]; t++) printf(" %d", tokens[(size_t)b * T + t]);
    printf(" | logits");
    for (int c = 0; c < C; c++) printf(" %.9g", logits[(size_t)b * C + c]);
    printf(" | attn");
    for (int t = 0; t < lengths[b]; t++) printf(" %.9g", attn[(size_t)b * T + t]);
    printf("\n");
  }
  rc = 0;
done:
  if (rc && (!blob || !input)) fprintf(stderr, "tool_predict: cannot read input\n");
  nn_workspace_free(ws);
  nn_model_free(model);
  free(blob);
  free(input);
  free(toks);
  free(tokens);
  free(lengths);
  free(logits);
  free(attn);
  return rc;
}

int main(int argc, char **argv) {
  if (argc >= 6 && strcmp(argv[1], "--save-random") == 0)
    return save_random(argv[2], argv[3], argc - 4, argv + 4);
  if (argc == 2 && argv[1][0] != '-') return predict(argv[1]);
  fprintf(stderr, "usage: tool_predict MODEL.safetensors < texts\n"
                  "       tool_predict --save-random CONFIG_JSON OUT.safetensors LABEL LABEL...\n");
  return 1;
}
