/* tool_tokenize.c -- runs the engine's preprocessing on lines of stdin, for
 * tests/test_text_reference.py (which compares it with the Made-With-ML lesson's Python).
 *
 *   build/tests/tool_tokenize [options] < lines.txt
 *     (default)     one line out per line in: the cleaned text (nn_text_clean)
 *     --spans       one line per line in: token<TAB>start<TAB>end for each token, separated by
 *                   TABs (nn_text_tokenize; a char-level space prints as " " -1 -1)
 *     --vocab N     the vocabulary of vocab_size N built from all lines, one token per line
 *                   in id order (<PAD>, <UNK>, ...)
 *     --no-lower --no-stopwords --char --unicode --keep-parentheses   set the nn_config text options
 * A line is everything up to "\n" (which is not part of it); any other byte, NUL included,
 * belongs to the line. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* getline */
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn_internal.h"

static void print_span(void *ctx, const char *tok, int len, int start, int end) {
  int *first = ctx;
  if (!*first) putchar('\t');
  *first = 0;
  printf("%.*s\t%d\t%d", len, tok, start, end);
}

int main(int argc, char **argv) {
  nn_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.lower = 1;
  cfg.stopwords = 1;
  cfg.drop_parentheses = 1;
  cfg.max_len = 64;
  cfg.vocab_size = 5000;
  int spans = 0, vocab_size = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--spans")) spans = 1;
    else if (!strcmp(argv[i], "--no-lower")) cfg.lower = 0;
    else if (!strcmp(argv[i], "--no-stopwords")) cfg.stopwords = 0;
    else if (!strcmp(argv[i], "--char")) cfg.char_level = 1;
    else if (!strcmp(argv[i], "--unicode")) cfg.unicode = 1;
    else if (!strcmp(argv[i], "--keep-parentheses")) cfg.drop_parentheses = 0;
    else if (!strcmp(argv[i], "--vocab") && i + 1 < argc) vocab_size = atoi(argv[++i]);
    else {
      fprintf(stderr,
              "usage: %s [--spans] [--vocab N] [--no-lower] [--no-stopwords] [--char] "
              "[--unicode] [--keep-parentheses] < lines\n",
              argv[0]);
      return 2;
    }
  }
  char **lines = NULL;
  int *lens = NULL, n = 0, cap = 0;
  char *line = NULL;
  size_t line_cap = 0;
  ssize_t got;
  while ((got = getline(&line, &line_cap, stdin)) >= 0) {
    int len = (int)got;
    if (len > 0 && line[len - 1] == '\n') len--;
    if (vocab_size > 0) {
      if (n == cap) {
        cap = cap ? cap * 2 : 1024;
        lines = realloc(lines, sizeof *lines * (size_t)cap);
        lens = realloc(lens, sizeof *lens * (size_t)cap);
        if (!lines || !lens) return 3;
      }
      lines[n] = malloc((size_t)len + 1);
      if (!lines[n]) return 3;
      memcpy(lines[n], line, (size_t)len);
      lens[n++] = len;
    } else if (spans) {
      int first = 1;
      if (nn_text_tokenize(line, len, &cfg, print_span, &first, NULL) < 0) return 3;
      putchar('\n');
    } else {
      char *clean = nn_text_clean(line, len, &cfg, NULL);
      if (!clean) return 3;
      puts(clean);
      free(clean);
    }
  }
  free(line);
  if (vocab_size > 0) {
    char err[NN_ERR_LEN];
    nn_vocab *vocab;
    cfg.vocab_size = vocab_size;
    if (nn_vocab_build(&vocab, (const char *const *)lines, lens, n, &cfg, err) != NN_OK) {
      fprintf(stderr, "%s\n", err);
      return 1;
    }
    for (int id = 0; id < nn_vocab_count(vocab); id++) {
      int len;
      const char *tok = nn_vocab_token(vocab, id, &len);
      fwrite(tok, 1, (size_t)len, stdout);
      putchar('\n');
    }
    nn_vocab_free(vocab);
    for (int i = 0; i < n; i++) free(lines[i]);
    free(lines);
    free(lens);
  }
  return 0;
}
