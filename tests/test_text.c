/* test_text.c -- unit cases of the preprocessing, tokenizer and vocabulary (engine/text.c).
 * Expected strings were worked out by hand from the lesson's regex pipeline (and checked with
 * it in Python); tests/test_text_reference.py compares with the Python itself at scale.
 * Covers: the stop-word table, stop words and \b (apostrophes, "_", non-ASCII letters, \s*),
 * parentheses, punctuation, spans, lower/stopwords options, unicode mode, invalid UTF-8, NUL
 * bytes, char level, vocabulary ties and sizes, encode truncation, empty text -> <UNK>, long
 * tokens, and random bytes (run under ASan/UBSan and valgrind: no read past len). */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "nn_internal.h"
#include "text.h"

static nn_config text_config(void) {
  nn_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.lower = 1;
  cfg.stopwords = 1;
  cfg.drop_parentheses = 1;
  cfg.max_len = 64;
  cfg.vocab_size = 5000;
  return cfg;
}

/* The text in a heap block of exactly len bytes, so that ASan/valgrind see any over-read. */
static char *exact_copy(const char *text, int len) {
  char *copy = malloc(len > 0 ? (size_t)len : 1);
  if (len > 0) memcpy(copy, text, (size_t)len);
  return copy;
}

static void check_clean_len(const char *text, int len, const nn_config *cfg, const char *want,
                            int line) {
  char *copy = exact_copy(text, len);
  char *got = nn_text_clean(copy, len, cfg, NULL);
  CHECK(got && strcmp(got, want) == 0, "line %d: clean(\"%.*s\") = \"%s\", expected \"%s\"", line,
        len, text, got ? got : "(null)", want);
  free(got);
  free(copy);
}
#define CHECK_CLEAN(text, cfg, want) check_clean_len(text, (int)strlen(text), cfg, want, __LINE__)

typedef struct collected {
  int n;
  char tok[64][64];
  int start[64], end[64];
} collected;

static void collect(void *ctx, const char *tok, int len, int start, int end) {
  collected *c = ctx;
  if (c->n < 64) {
    snprintf(c->tok[c->n], sizeof c->tok[0], "%.*s", len, tok);
    c->start[c->n] = start;
    c->end[c->n] = end;
  }
  c->n++;
}

/* want: "tok start end" triples separated by "|", e.g. "great 0 5|week 6 10". */
static void check_tokens(const char *text, int len, const nn_config *cfg, const char *want,
                         int line) {
  char *copy = exact_copy(text, len);
  collected c = {0};
  int n = nn_text_tokenize(copy, len, cfg, collect, &c, NULL);
  char got[2048] = "";
  for (int i = 0; i < c.n && i < 64; i++) {
    char item[128];
    snprintf(item, sizeof item, "%s%s %d %d", i ? "|" : "", c.tok[i], c.start[i], c.end[i]);
    strncat(got, item, sizeof got - strlen(got) - 1);
  }
  CHECK(n == c.n && strcmp(got, want) == 0,
        "line %d: tokens of \"%.*s\" = \"%s\" (returned %d), expected \"%s\"", line, len, text, got,
        n, want);
  free(copy);
}
#define CHECK_TOKENS(text, cfg, want) check_tokens(text, (int)strlen(text), cfg, want, __LINE__)

static void test_stopword_table(void) {
  int found = 0;
  for (int i = 0; i < NN_STOPWORD_COUNT; i++) {
    const char *w = nn_stopword(i);
    found += w && nn_stopword_find(w, (int)strlen(w)) == i;
  }
  CHECK(found == 179, "%d of the 179 stop words found at their own index", found);
  CHECK(nn_stopword(179) == NULL && nn_stopword(-1) == NULL, "out of range");
  CHECK(strcmp(nn_stopword(0), "i") == 0 && strcmp(nn_stopword(178), "wouldn't") == 0,
        "NLTK order: first \"%s\", last \"%s\"", nn_stopword(0), nn_stopword(178));
  CHECK(nn_stopword_find("don", 3) < nn_stopword_find("don't", 5), "\"don\" before \"don't\"");
  CHECK(nn_stopword_find("news", 4) == -1 && nn_stopword_find("the", 2) == -1,
        "\"news\" and \"th\" are not stop words");
  CHECK(nn_stopword_find("yourselves", 10) >= 0 && nn_stopword_find("", 0) == -1, "lengths");
}

static void test_lesson(void) {
  nn_config cfg = text_config();
  /* the lesson's own examples */
  CHECK_CLEAN("Great week for the NYSE!", &cfg, "great week nyse");
  CHECK_CLEAN("Sharon Accepts Plan to Reduce Gaza Army Operation, Haaretz Says", &cfg,
              "sharon accepts plan reduce gaza army operation haaretz says");
  /* parentheses: removed up to the first ")", unmatched "(" kept as a separator */
  CHECK_CLEAN("Wall St. Bears Claw Back Into the Black (Reuters)", &cfg,
              "wall st bears claw back black");
  CHECK_CLEAN("a (b) c (e", &cfg, "c e");
  CHECK_CLEAN("x ((y) z) w", &cfg, "x z w");
  CHECK_CLEAN("x ) w ( z", &cfg, "x w z");
  CHECK_CLEAN("ab(x)cd", &cfg, "abcd"); /* removal joins the two sides */
  CHECK_CLEAN("(all of it)", &cfg, "");
  /* punctuation and other separators */
  CHECK_CLEAN("U.S. <b>Oil</b>=$50; up-to-date!? #39;s", &cfg, "u b oil b 50 date 39");
  CHECK_CLEAN("  Lots   of\tspace \r\n", &cfg, "lots space");
  /* stop words: whole words only, any case, at \b, with the white space after them */
  CHECK_CLEAN("The THE tHe theme other others", &cfg, "theme others");
  CHECK_CLEAN("Don't stop: it's what you'll do", &cfg, "stop");
  CHECK_CLEAN("the_end _the the2 2the", &cfg, "the end the the2 2the"); /* "_" is \w */
  CHECK_CLEAN("ab(x)the  cd", &cfg, "abcd");        /* \s* ate the spaces: the sides join */
  CHECK_CLEAN("ab(x)the\x1c\x0b cd", &cfg, "abcd"); /* \x1c and \v are \s in Python */
  CHECK_CLEAN("ab(x)the-cd", &cfg, "ab cd");
  CHECK_CLEAN("ab(x)'t cd", &cfg, "ab cd"); /* "'" stays and separates */
  CHECK_CLEAN("shouldn't've", &cfg, "");
}

static void test_options(void) {
  nn_config cfg = text_config();
  cfg.lower = 0;
  CHECK_CLEAN("The the THE Cat", &cfg, "The THE Cat");
  cfg = text_config();
  cfg.stopwords = 0;
  CHECK_CLEAN("The cat (on the mat) is here", &cfg, "the cat is here");
  cfg.lower = 0;
  CHECK_CLEAN("The cat", &cfg, "The cat");
  /* drop_parentheses false: "(" and ")" separate like other punctuation; stop words inside and
   * right after them are removed as anywhere (Python: preprocess() without the \(...\) line) */
  cfg = text_config();
  cfg.drop_parentheses = 0;
  CHECK_CLEAN("The cat (on the mat) is here", &cfg, "cat mat");
  CHECK_CLEAN("Wall St. Bears Claw Back Into the Black (Reuters)", &cfg,
              "wall st bears claw back black reuters");
  CHECK_CLEAN("ab(x)cd", &cfg, "ab x cd");
  CHECK_CLEAN("a (b) c (e", &cfg, "b c e");
  CHECK_CLEAN("(the)", &cfg, "");
  CHECK_CLEAN("libfoo (development files)", &cfg, "libfoo development files");
}

static void test_unicode(void) {
  nn_config cfg = text_config();
  /* default mode: non-ASCII bytes separate, but non-ASCII letters are \w for \b */
  CHECK_CLEAN("Caf\xc3\xa9 na\xc3\xafve", &cfg, "caf na ve");
  CHECK_CLEAN("\xc3\xa9the x", &cfg, "the x");                  /* no \b after e-acute */
  CHECK_CLEAN("\xe2\x80\x9cthe\xe2\x80\x9d x", &cfg, "x");      /* curly quotes are not \w */
  CHECK_CLEAN("Don\xe2\x80\x99t stop", &cfg, "stop");           /* nor the curly apostrophe */
  CHECK_CLEAN("ab(x)the\xc2\xa0\xe3\x80\x80 cd", &cfg, "abcd"); /* NBSP, U+3000 are \s */
  CHECK_CLEAN("\xe2\x84\xaaing", &cfg, "king");                 /* KELVIN SIGN lower-cases to "k" */
  CHECK_CLEAN("\xc4\xb0t", &cfg, "");                           /* U+0130 -> "i" U+0307: "i", "t" */
  CHECK_CLEAN("ab(x)\xc4\xb0"
              "cd",
              &cfg, "ab cd");
  CHECK_CLEAN("x\xc4\xb0z", &cfg, "xi z");
  /* unicode mode: letters and digits of any script are kept as they are */
  cfg.unicode = 1;
  CHECK_CLEAN("Caf\xc3\xa9 Z\xc3\xbcrich \xc3\x89T\xc3\x89 \xe2\x80\x94 \xe4\xb8\xad\xe6\x96\x87",
              &cfg, "caf\xc3\xa9 z\xc3\xbcrich \xc3\x89t\xc3\x89 \xe4\xb8\xad\xe6\x96\x87");
  CHECK_CLEAN("\xe2\x80\x9cthe\xe2\x80\x9d x \xc2\xb2", &cfg, "x \xc2\xb2");
  CHECK_CLEAN("\xe2\x84\xaaing \xc4\xb0t", &cfg, "\xe2\x84\xaaing \xc4\xb0t"); /* no case map */
  /* invalid UTF-8 separates: lone continuation, truncated, overlong, surrogate, > U+10FFFF */
  CHECK_CLEAN("b\x80"
              "c\xc3"
              "e\xe2\x82"
              "f\xc0\xaf"
              "g\xed\xa0\x80"
              "h\xf4\x90\x80\x80"
              "j\xff",
              &cfg, "b c e f g h j");
  CHECK_CLEAN("caf\xc3", &cfg, "caf"); /* truncated at the very end of the text */
  CHECK_CLEAN("caf\xe2\x82", &cfg, "caf");
  CHECK_CLEAN("x\xf0\x9f\x98\x80z", &cfg, "x z"); /* an emoji is not a letter */
  CHECK_TOKENS("\xc3\xa9t\xc3\xa9 x", &cfg, "\xc3\xa9t\xc3\xa9 0 5|x 6 7");
  cfg.unicode = 0;
  CHECK_CLEAN("a\x80"
              "b\xc3"
              "c\xe2\x82"
              "d",
              &cfg, "b c"); /* "a", "d": stop words */
}

static void test_nul_bytes(void) {
  nn_config cfg = text_config();
  static const char text[] = "news\0the\0oil (x\0y) end";
  check_clean_len(text, (int)sizeof text - 1, &cfg, "news oil end", __LINE__);
  check_tokens(text, (int)sizeof text - 1, &cfg, "news 0 4|oil 9 12|end 19 22", __LINE__);
  check_clean_len("\0\0\0", 3, &cfg, "", __LINE__);
  check_clean_len("abc", 0, &cfg, "", __LINE__); /* len, not strlen */
  check_clean_len("abcdef", 3, &cfg, "abc", __LINE__);
  char *null_text = nn_text_clean(NULL, 0, &cfg, NULL);
  CHECK(null_text && null_text[0] == '\0', "clean(NULL, 0) is \"\"");
  free(null_text);
}

static void test_spans(void) {
  nn_config cfg = text_config();
  CHECK_TOKENS("Great week for the NYSE!", &cfg, "great 0 5|week 6 10|nyse 19 23");
  CHECK_TOKENS("ab(x)cd ef", &cfg, "abcd 0 7|ef 8 10");
  CHECK_TOKENS("(Reuters) Oil", &cfg, "oil 10 13");
  CHECK_TOKENS("the", &cfg, "");
  CHECK_TOKENS("", &cfg, "");
  cfg.char_level = 1;
  CHECK_TOKENS("Ab cd", &cfg, "a 0 1|b 1 2|  -1 -1|c 3 4|d 4 5");
  CHECK_TOKENS("the z(x)b, c", &cfg, "z 4 5|b 8 9|  -1 -1|c 11 12");
  cfg.unicode = 1;
  CHECK_TOKENS("\xc3\xa9 x", &cfg, "\xc3\xa9 0 2|  -1 -1|x 3 4");
  CHECK_CLEAN("The Cat sat", &cfg, "cat sat"); /* the cleaned string is the same */
}

static void test_long_tokens(void) {
  nn_config cfg = text_config();
  int len = 5000;
  char *text = malloc((size_t)len);
  for (int i = 0; i < len; i++) text[i] = (char)('A' + i % 26);
  text[2500] = ' ';
  char *clean = nn_text_clean(text, len, &cfg, NULL);
  int ok = clean && (int)strlen(clean) == len;
  for (int i = 0; ok && i < len; i++) ok = clean[i] == (i == 2500 ? ' ' : 'a' + i % 26);
  CHECK(ok, "a 5000-byte text with two long tokens is lower-cased whole");
  free(clean);
  collected c = {0};
  CHECK(nn_text_tokenize(text, len, &cfg, collect, &c, NULL) == 2 && c.start[1] == 2501 &&
            c.end[1] == 5000,
        "two long tokens, second span [%d, %d)", c.start[1], c.end[1]);
  /* encode: a long token is <UNK> unless the vocabulary has it */
  char *tok = malloc(300);
  for (int i = 0; i < 300; i++) tok[i] = (char)('a' + i % 26);
  const char *list[3] = {"<PAD>", "<UNK>", tok};
  int lens[3] = {5, 5, 300};
  char err[NN_ERR_LEN];
  nn_vocab *vocab = NULL;
  CHECK(nn_vocab_from_list(&vocab, list, lens, 3, err) == NN_OK, "%s", err);
  nn_token out[64];
  int n = nn_text_encode(out, text, 301, &cfg, vocab); /* "ABC...": 300 letters + 'O' */
  CHECK(n == 1 && out[0].id == 1, "301-letter token is <UNK>: n=%d id=%d", n, out[0].id);
  n = nn_text_encode(out, text, 300, &cfg, vocab);
  CHECK(n == 1 && out[0].id == 2 && out[0].start == 0 && out[0].end == 300,
        "300-letter token found: n=%d id=%d", n, out[0].id);
  nn_vocab_free(vocab);
  free(tok);
  free(text);
}

static void test_vocab(void) {
  nn_config cfg = text_config();
  char err[NN_ERR_LEN];
  nn_vocab *vocab = NULL;
  /* counts: b 2, e 2, c 2, f 1 -- ties in first-occurrence order */
  const char *texts[] = {"b e", "E (z) b c", "the c f"};
  cfg.vocab_size = 5;
  CHECK(nn_vocab_build(&vocab, texts, NULL, 3, &cfg, err) == NN_OK, "%s", err);
  const char *want[] = {"<PAD>", "<UNK>", "b", "e", "c"};
  CHECK(nn_vocab_count(vocab) == 5, "count %d", nn_vocab_count(vocab));
  for (int i = 0; i < 5 && i < nn_vocab_count(vocab); i++) {
    int len = -1;
    const char *tok = nn_vocab_token(vocab, i, &len);
    CHECK(tok && strcmp(tok, want[i]) == 0 && len == (int)strlen(want[i]),
          "id %d: \"%s\", expected \"%s\"", i, tok ? tok : "(null)", want[i]);
    CHECK(nn_vocab_lookup(vocab, want[i], (int)strlen(want[i])) == i, "lookup %s", want[i]);
  }
  CHECK(nn_vocab_lookup(vocab, "f", 1) == NN_UNK && nn_vocab_lookup(vocab, "z", 1) == NN_UNK,
        "absent -> <UNK>");
  CHECK(nn_vocab_lookup(vocab, "eb", 1) == 3, "lookup uses len");
  CHECK(nn_vocab_token(vocab, 5, NULL) == NULL && nn_vocab_token(vocab, -1, NULL) == NULL,
        "token out of range");
  nn_vocab_free(vocab);
  /* more room than tokens; frequencies: x 3, z 1 after 3 texts */
  const char *texts2[] = {"z x", "x", "x"};
  int lens2[] = {3, 1, 1};
  cfg.vocab_size = 100;
  CHECK(nn_vocab_build(&vocab, texts2, lens2, 3, &cfg, err) == NN_OK, "%s", err);
  CHECK(nn_vocab_count(vocab) == 4 && strcmp(nn_vocab_token(vocab, 2, NULL), "x") == 0 &&
            strcmp(nn_vocab_token(vocab, 3, NULL), "z") == 0,
        "x before z");
  nn_vocab_free(vocab);
  /* no texts; only <PAD>, <UNK> */
  CHECK(nn_vocab_build(&vocab, NULL, NULL, 0, &cfg, err) == NN_OK && nn_vocab_count(vocab) == 2,
        "0 texts: %s", err);
  nn_vocab_free(vocab);
  cfg.vocab_size = 2;
  CHECK(nn_vocab_build(&vocab, texts, NULL, 3, &cfg, err) == NN_OK && nn_vocab_count(vocab) == 2,
        "vocab_size 2");
  nn_vocab_free(vocab);
  cfg.vocab_size = 1;
  CHECK(nn_vocab_build(&vocab, texts, NULL, 3, &cfg, err) == NN_ERROR && vocab == NULL,
        "vocab_size 1 is an error: %s", err);
  /* char level: counts over the characters of the cleaned strings, spaces included */
  cfg = text_config();
  cfg.char_level = 1;
  const char *texts3[] = {"ba ab", "c"};
  CHECK(nn_vocab_build(&vocab, texts3, NULL, 2, &cfg, err) == NN_OK, "%s", err);
  const char *want3[] = {"<PAD>", "<UNK>", "b", "a", " ", "c"};
  int ok = nn_vocab_count(vocab) == 6;
  for (int i = 0; ok && i < 6; i++) ok = strcmp(nn_vocab_token(vocab, i, NULL), want3[i]) == 0;
  CHECK(ok, "char vocabulary <PAD> <UNK> b a ' ' c");
  nn_token out[8];
  cfg.max_len = 8;
  int n = nn_text_encode(out, "ab x", 4, &cfg, vocab);
  CHECK(n == 4 && out[0].id == 3 && out[1].id == 2 && out[2].id == 4 && out[2].start == -1 &&
            out[3].id == 1 && out[3].start == 3,
        "char encode: n=%d", n);
  nn_vocab_free(vocab);
  /* from_list errors */
  const char *bad1[] = {"<UNK>", "<PAD>", "x"};
  CHECK(nn_vocab_from_list(&vocab, bad1, NULL, 3, err) == NN_ERROR && vocab == NULL,
        "<PAD> must come first: %s", err);
  const char *bad2[] = {"<PAD>", "<UNK>", "x", "y", "x"};
  CHECK(nn_vocab_from_list(&vocab, bad2, NULL, 5, err) == NN_ERROR && strstr(err, "twice"),
        "duplicate: %s", err);
  CHECK(nn_vocab_from_list(&vocab, bad2, NULL, 1, err) == NN_ERROR, "one token: %s", err);
  const char *bad3[] = {"<PAD>", "<UNK>", NULL};
  CHECK(nn_vocab_from_list(&vocab, bad3, NULL, 3, err) == NN_ERROR, "NULL token: %s", err);
  CHECK(nn_vocab_lookup(NULL, "x", 1) == NN_UNK && nn_vocab_count(NULL) == 0, "NULL vocab");
  nn_vocab_free(NULL);
}

static void test_encode(void) {
  nn_config cfg = text_config();
  char err[NN_ERR_LEN];
  nn_vocab *vocab = NULL;
  const char *list[] = {"<PAD>", "<UNK>", "oil", "price", "rise"};
  CHECK(nn_vocab_from_list(&vocab, list, NULL, 5, err) == NN_OK, "%s", err);
  nn_token out[64];
  const char *text = "Oil prices rise as the Oil price rises (Reuters)";
  int n = nn_text_encode(out, text, (int)strlen(text), &cfg, vocab);
  int want[] = {2, 1, 4, 2, 3, 1};
  int ok = n == 6;
  for (int i = 0; ok && i < 6; i++) ok = out[i].id == want[i];
  CHECK(ok, "ids of \"%s\": n=%d", text, n);
  CHECK(out[0].start == 0 && out[0].end == 3 && out[5].start == 33 && out[5].end == 38,
        "spans [%d,%d) [%d,%d)", out[0].start, out[0].end, out[5].start, out[5].end);
  cfg.max_len = 3; /* truncation: only max_len tokens written */
  nn_token small[4] = {{-7, -7, -7}, {-7, -7, -7}, {-7, -7, -7}, {-7, -7, -7}};
  n = nn_text_encode(small, text, (int)strlen(text), &cfg, vocab);
  CHECK(n == 3 && small[2].id == 4 && small[3].id == -7, "max_len 3: n=%d, 4th untouched", n);
  cfg.max_len = 64;
  /* no tokens: one <UNK> without span */
  const char *empties[] = {"", "the of and", "(only this)", "!!! ...", "\xff\xfe"};
  for (int i = 0; i < 5; i++) {
    n = nn_text_encode(out, empties[i], (int)strlen(empties[i]), &cfg, vocab);
    CHECK(n == 1 && out[0].id == NN_UNK && out[0].start == -1 && out[0].end == -1,
          "\"%s\" -> one <UNK>: n=%d id=%d", empties[i], n, out[0].id);
  }
  n = nn_text_encode(out, NULL, 0, &cfg, vocab);
  CHECK(n == 1 && out[0].id == NN_UNK, "NULL text -> <UNK>");
  cfg.max_len = 0;
  CHECK(nn_text_encode(out, text, 5, &cfg, vocab) == 0, "max_len 0 writes nothing");
  nn_vocab_free(vocab);
}

/* Random bytes in every mode: nothing crashes or reads past len (ASan, valgrind), clean() is
 * the tokens joined by spaces, and encode agrees with tokenize. */
static void test_random_bytes(void) {
  static const char alphabet[] =
      "the a(b)c'_ \t\x1c-.\0\x80\xc3\xa9\xe2\x80\x99\xf0\x9f\xff\xed\xa0";
  uint64_t state = 1234;
  int bad = 0, total = 0;
  char err[NN_ERR_LEN];
  nn_vocab *vocab = NULL;
  const char *list[] = {"<PAD>", "<UNK>", "a", "b", "c", "bc", "abc", " ", "\xc3\xa9"};
  CHECK(nn_vocab_from_list(&vocab, list, NULL, 9, err) == NN_OK, "%s", err);
  for (int iter = 0; iter < 20000; iter++) {
    int len = (int)(state % 40);
    char *text = malloc(len ? (size_t)len : 1);
    for (int i = 0; i < len; i++) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      text[i] = (state >> 40) % 3 == 0 ? (char)(state >> 48)
                                       : alphabet[(state >> 33) % (sizeof alphabet - 1)];
    }
    nn_config cfg = text_config();
    cfg.lower = iter & 1;
    cfg.stopwords = (iter >> 1) & 1;
    cfg.unicode = (iter >> 2) & 1;
    cfg.char_level = (iter >> 3) & 1;
    cfg.max_len = 1 + iter % 7;
    collected c = {0};
    int n = nn_text_tokenize(text, len, &cfg, collect, &c, NULL);
    char *clean = nn_text_clean(text, len, &cfg, NULL);
    /* rebuild the cleaned string from the tokens */
    char joined[4096] = "";
    for (int i = 0; i < c.n && i < 64; i++) {
      if (i && !cfg.char_level) strcat(joined, " ");
      strcat(joined, c.tok[i]);
    }
    nn_token out[8];
    int m = nn_text_encode(out, text, len, &cfg, vocab);
    int ok = n == c.n && clean && strcmp(clean, joined) == 0;
    ok = ok && m == (n == 0 ? 1 : (n < cfg.max_len ? n : cfg.max_len));
    for (int i = 0; ok && n > 0 && i < m; i++)
      ok = out[i].id == nn_vocab_lookup(vocab, c.tok[i], (int)strlen(c.tok[i])) &&
           out[i].start == c.start[i] && out[i].end == c.end[i] &&
           (out[i].start == -1
                ? out[i].end == -1
                : 0 <= out[i].start && out[i].start < out[i].end && out[i].end <= len);
    if (!ok && bad++ < 5)
      CHECK(ok, "random text %d (len %d, mode %d): clean \"%s\" tokens \"%s\" n=%d m=%d", iter, len,
            iter & 15, clean ? clean : "(null)", joined, n, m);
    total++;
    free(clean);
    free(text);
    state += (uint64_t)iter;
  }
  CHECK(bad == 0, "%d of %d random texts inconsistent", bad, total);
  printf("random bytes: %d texts, %d inconsistent\n", total, bad);
  nn_vocab_free(vocab);
}

int main(void) {
  test_stopword_table();
  test_lesson();
  test_options();
  test_unicode();
  test_nul_bytes();
  test_spans();
  test_long_tokens();
  test_vocab();
  test_encode();
  test_random_bytes();
  return check_finish("test_text");
}
