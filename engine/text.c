/* text.c -- preprocessing, tokenizer and vocabulary (ext/ARCHITECTURE.md: the model and its
 * training; nn.h "text and vocabulary").
 *
 * The reference is the Made-With-ML lesson's preprocess() and Tokenizer:
 *
 *   text = text.lower()
 *   text = re.sub(r"\b(" + "|".join(STOPWORDS) + r")\b\s*", "", text)   # 179 NLTK words
 *   text = re.sub(r"\([^)]*\)", "", text)                                # text in parentheses
 *   text = re.sub(r"([-;;.,!?<=>])", r" \1 ", text)                      # (no effect on tokens)
 *   text = re.sub("[^A-Za-z0-9]+", " ", text); text = re.sub(" +", " ", text).strip()
 *   tokens = text.split(" ")            # char level: list(text)
 *
 * Instead of rewriting strings we make one pass over the ORIGINAL bytes, so that every token
 * keeps its byte span [start, end) in the input (attn_weights reports it). The pass decides,
 * character by character, what the regex pipeline would do:
 *   - a stop word is removed where the regex finds it: at a word boundary as Python's `re`
 *     sees one (\w = [A-Za-z0-9_] and every non-ASCII letter or digit, engine/unicode_tables.c),
 *     ending at a boundary, the earliest word of NLTK's list winning ("don" before "don't"),
 *     together with the white space (\s, Unicode included) that follows it;
 *   - "(" removes everything up to the next ")" when there is one after it (unless
 *     cfg->drop_parentheses is 0: then "(" and ")" are separators like other punctuation);
 *   - removed text is transparent: "ab(x)cd" gives the one token "abcd" (span from a to d);
 *   - a token is a maximal run of letters: [A-Za-z0-9] (lower-cased when cfg->lower), and in
 *     unicode mode also every valid UTF-8 sequence of a non-ASCII letter or digit (kept as is);
 *     everything else (punctuation, "_", white space, invalid UTF-8, NUL) separates tokens.
 * With cfg->lower the two non-ASCII characters whose Python lower-case is ASCII are mapped as
 * Python maps them: U+212A KELVIN SIGN -> "k", U+0130 -> "i" + U+0307 (a separator). Other
 * non-ASCII characters are never case-mapped (Python's lower() keeps their \w class).
 * So the default mode equals the lesson's Python on any valid UTF-8 text, and invalid bytes act
 * as Python's surrogateescape characters (separators); tests/test_text_reference.py checks this.
 *
 * Vocabulary: <PAD> = 0, <UNK> = 1, then the vocab_size - 2 most frequent tokens, ties by first
 * occurrence (Counter.most_common), less those seen fewer than min_count times. Lookup is an open-addressing hash table with a keyed hash
 * (SipHash-1-3, a secret key per table): crafted tokens cannot make it quadratic.
 * Difference from the lesson, on purpose: a text with no tokens counts no "" token in the
 * vocabulary (the lesson's "".split(" ") counts one) and encodes as one <UNK> (also at char level).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compat.h"
#include "nn_internal.h"
#include "nn_mem.h"
#include "text.h"
#include "utf8.h"

/* ---------------------------------------------------------------- characters */

enum {
  C_WORD = 1,     /* \w for Python's re: letters, digits, "_" (ASCII and Unicode) */
  C_LETTER = 2,   /* kept in tokens */
  C_SPACE = 4,    /* \s for Python's re */
  C_SEP_AFTER = 8 /* followed by an invisible separator (U+0130 lower-cased is "i" U+0307) */
};

typedef struct text_mode {
  int lower, stopwords, drop_parentheses, char_level, unicode;
} text_mode;

typedef struct text_char {
  int end;             /* byte after the character */
  unsigned cls;        /* C_* */
  unsigned char ascii; /* the (lower-cased) ASCII byte the character stands for, 0 if none */
} text_char;

/* C_* of each ASCII byte: [A-Za-z0-9] letters, "_" word, \s = [\t\n\v\f\r\x1c-\x1f ]. */
#define L (C_WORD | C_LETTER)
#define S C_SPACE
static const unsigned char ascii_class[128] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, S, S, S, S, S, 0, 0,      /* 0x00 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, S, S, S, S,      /* 0x10 */
    S, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,      /* 0x20 */
    L, L, L, L, L, L, L, L, L, L, 0, 0, 0, 0, 0, 0,      /* 0x30 */
    0, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L,      /* 0x40 */
    L, L, L, L, L, L, L, L, L, L, L, 0, 0, 0, 0, C_WORD, /* 0x50 */
    0, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L,      /* 0x60 */
    L, L, L, L, L, L, L, L, L, L, L, 0, 0, 0, 0, 0,      /* 0x70 */
};
#undef L
#undef S

static inline text_char text_decode(const unsigned char *s, int len, int pos, const text_mode *m) {
  text_char c;
  unsigned char b = s[pos];
  if (b < 0x80) {
    c.end = pos + 1;
    c.cls = ascii_class[b];
    c.ascii = (m->lower && b >= 'A' && b <= 'Z') ? (unsigned char)(b + 32) : b;
    return c;
  }
  uint32_t cp = 0;
  int n = nn_utf8_decode(s + pos, (size_t)(len - pos), &cp); /* 2..4 here: s[pos] >= 0x80 */
  c.ascii = 0;
  if (n == 0) { /* invalid byte: a separator, as Python's surrogateescape character */
    c.end = pos + 1;
    c.cls = 0;
    return c;
  }
  c.end = pos + n;
  if (m->lower && !m->unicode) {
    if (cp == 0x212a) { /* KELVIN SIGN: "K".lower() == "k" */
      c.ascii = 'k';
      c.cls = C_WORD | C_LETTER;
      return c;
    }
    if (cp == 0x130) { /* LATIN CAPITAL I WITH DOT ABOVE: lower() == "i\u0307" */
      c.ascii = 'i';
      c.cls = C_WORD | C_LETTER | C_SEP_AFTER;
      return c;
    }
  }
  if (nn_unicode_is_word(cp)) c.cls = C_WORD | (m->unicode ? C_LETTER : 0);
  else c.cls = nn_unicode_is_space(cp) ? C_SPACE : 0;
  return c;
}

/* ---------------------------------------------------------------- stop words */

/* Reads the maximal run of word characters at pos as lower-case ASCII letters into w (from
 * w[n]); returns the new length, or -1 when the run is not all a-z or too long for a stop word.
 * *end: the byte after the run; *sep: the run ends with a C_SEP_AFTER character. */
static int read_letters(const unsigned char *s, int len, int pos, const text_mode *m, char *w,
                        int n, int *end, int *sep) {
  *sep = 0;
  while (pos < len) {
    text_char c = text_decode(s, len, pos, m);
    if (!(c.cls & C_WORD)) break;
    if (c.ascii < 'a' || c.ascii > 'z' || n >= NN_STOPWORD_MAX_LEN) return -1;
    w[n++] = (char)c.ascii;
    pos = c.end;
    if (c.cls & C_SEP_AFTER) {
      *sep = 1;
      break;
    }
  }
  *end = pos;
  return n;
}

/* The regex \b(stop|words)\b\s* at pos, where pos starts a word (the character before is not
 * a word character). Returns the end of the match, or -1 when there is none.
 * *sep: the match ends with a C_SEP_AFTER character; *ate_space: \s* matched something. */
static int match_stopword(const unsigned char *s, int len, int pos, const text_mode *m, int *sep,
                          int *ate_space) {
  char w[NN_STOPWORD_MAX_LEN];
  int end1, sep1, end2 = 0, sep2 = 0, idx2 = -1;
  int n1 = read_letters(s, len, pos, m, w, 0, &end1, &sep1);
  if (n1 <= 0) return -1;
  int idx1 = nn_stopword_find(w, n1);
  /* The words with an apostrophe ("don't") match only as run "'" run. */
  if (!sep1 && end1 < len && s[end1] == '\'' && n1 < NN_STOPWORD_MAX_LEN) {
    w[n1] = '\'';
    int n2 = read_letters(s, len, end1 + 1, m, w, n1 + 1, &end2, &sep2);
    if (n2 > n1 + 1) idx2 = nn_stopword_find(w, n2);
  }
  int end;
  if (idx1 >= 0 && (idx2 < 0 || idx1 < idx2)) {
    end = end1;
    *sep = sep1;
  } else if (idx2 >= 0) {
    end = end2;
    *sep = sep2;
  } else {
    return -1;
  }
  *ate_space = 0;
  if (!*sep) {
    while (end < len) {
      text_char c = text_decode(s, len, end, m);
      if (!(c.cls & C_SPACE)) break;
      end = c.end;
      *ate_space = 1;
    }
  }
  return end;
}

/* ---------------------------------------------------------------- the scanner */

/* Receives each token; returns non-zero to stop the scan. */
typedef int (*scan_fn)(void *ctx, const char *tok, int len, int start, int end);

#define TOKEN_STACK 256

typedef struct scanner {
  text_mode mode;
  scan_fn fn;
  void *ctx;
  /* the word being built (word level) */
  char *buf;
  int cap, len;
  int can_grow;            /* grow buf on the heap (else: count bytes past cap, drop them) */
  char *heap;              /* buf when grown */
  const nn_allocator *mem; /* of heap */
  int in_token;            /* a word is open */
  int tok_start, tok_end;
  int words; /* words opened so far */
  int count; /* tokens handed to fn */
  int stop, oom;
} scanner;

static void scanner_init(scanner *sc, const nn_config *cfg, scan_fn fn, void *ctx, char *stack,
                         int cap, int can_grow, const nn_allocator *mem) {
  memset(sc, 0, sizeof *sc);
  sc->mem = mem;
  if (cfg) {
    sc->mode.lower = cfg->lower;
    sc->mode.stopwords = cfg->stopwords;
    sc->mode.drop_parentheses = cfg->drop_parentheses;
    sc->mode.char_level = cfg->char_level;
    sc->mode.unicode = cfg->unicode;
  } else { /* nn_config_default's text options */
    sc->mode.lower = 1;
    sc->mode.stopwords = 1;
    sc->mode.drop_parentheses = 1;
  }
  sc->fn = fn;
  sc->ctx = ctx;
  sc->buf = stack;
  sc->cap = cap;
  sc->can_grow = can_grow;
}

static void emit(scanner *sc, const char *tok, int len, int start, int end) {
  sc->count++;
  if (sc->fn && sc->fn(sc->ctx, tok, len, start, end)) sc->stop = 1;
}

static void end_token(scanner *sc) {
  if (!sc->in_token) return;
  sc->in_token = 0;
  if (!sc->mode.char_level) emit(sc, sc->buf, sc->len, sc->tok_start, sc->tok_end);
}

static void append(scanner *sc, const char *bytes, int n) {
  if (sc->len + n > sc->cap && sc->can_grow) {
    int cap = sc->cap;
    while (cap < sc->len + n) cap *= 2;
    char *grown = nn_mem_realloc(sc->mem, sc->heap, (size_t)cap);
    if (!grown) {
      sc->oom = sc->stop = 1;
      return;
    }
    if (!sc->heap) memcpy(grown, sc->buf, (size_t)sc->len);
    sc->heap = sc->buf = grown;
    sc->cap = cap;
  }
  if (sc->len + n <= sc->cap) memcpy(sc->buf + sc->len, bytes, (size_t)n);
  sc->len += n; /* past cap (cannot grow): the token is longer than any it can match */
}

/* A word-level token starts at byte `start` of the original, unless one is open. */
static void open_token(scanner *sc, int start) {
  if (sc->in_token) return;
  sc->in_token = 1;
  sc->words++;
  sc->len = 0;
  sc->tok_start = start;
}

/* A letter of a token: its bytes in the cleaned text and its span in the original. */
static void add_letter(scanner *sc, const char *bytes, int n, int start, int end) {
  if (sc->mode.char_level) {
    if (!sc->in_token) {
      sc->in_token = 1;
      if (sc->words++ > 0) emit(sc, " ", 1, -1, -1);
      if (sc->stop) return;
    }
    emit(sc, bytes, n, start, end);
    return;
  }
  open_token(sc, start);
  append(sc, bytes, n);
  sc->tok_end = end;
}

/* A run of ASCII letters and digits inside or at the start of a word token: the same as
 * add_letter on each byte (lower-cased when the mode says so), in one append per 64 bytes. */
static void add_ascii_run(scanner *sc, const unsigned char *run, int n, int start) {
  open_token(sc, start);
  char chunk[64];
  for (int done = 0; done < n && !sc->oom;) {
    int k = n - done < (int)sizeof chunk ? n - done : (int)sizeof chunk;
    for (int i = 0; i < k; i++) {
      unsigned char b = run[done + i];
      chunk[i] = (char)(sc->mode.lower && b >= 'A' && b <= 'Z' ? b + 32 : b);
    }
    append(sc, chunk, k);
    done += k;
  }
  sc->tok_end = start + n;
}

static void scan(scanner *sc, const char *text, int len) {
  const unsigned char *s = (const unsigned char *)text;
  if (!s || len < 0) len = 0;
  /* the last ")": a "(" before it starts a removed group */
  const unsigned char *close_at =
      len > 0 ? (const unsigned char *)nn_memrchr(s, ')', (size_t)len) : NULL;
  int last_close = close_at ? (int)(close_at - s) : -1;
  int pos = 0, prev_word = 0; /* prev_word: the character before pos (original) is \w */
  while (pos < len && !sc->stop) {
    if (s[pos] == '(' && pos < last_close && sc->mode.drop_parentheses) { /* \([^)]*\) */
      const unsigned char *close = memchr(s + pos + 1, ')', (size_t)(last_close - pos));
      pos = (int)(close - s) + 1;
      prev_word = 0;
      continue;
    }
    text_char c = text_decode(s, len, pos, &sc->mode);
    if (sc->mode.stopwords && !prev_word && c.ascii >= 'a' && c.ascii <= 'z') {
      int sep = 0, ate_space = 0;
      int end = match_stopword(s, len, pos, &sc->mode, &sep, &ate_space);
      if (end > 0) {
        if (sep) end_token(sc);
        prev_word = !(sep || ate_space);
        pos = end;
        continue;
      }
    }
    if (s[pos] < 0x80 && (c.cls & C_LETTER) && !sc->mode.char_level) {
      /* the common case, a run of ASCII letters and digits: no stop word can start inside it
       * (the characters before are \w), and none of its bytes is "(" */
      int end = pos + 1;
      while (end < len && s[end] < 0x80 && (ascii_class[s[end]] & C_LETTER)) end++;
      add_ascii_run(sc, s + pos, end - pos, pos);
      prev_word = 1;
      pos = end;
      continue;
    }
    if (c.cls & C_LETTER) {
      if (c.ascii) {
        char a = (char)c.ascii;
        add_letter(sc, &a, 1, pos, c.end);
      } else {
        add_letter(sc, text + pos, c.end - pos, pos, c.end);
      }
    } else {
      end_token(sc);
    }
    if (c.cls & C_SEP_AFTER) end_token(sc);
    prev_word = (c.cls & C_WORD) && !(c.cls & C_SEP_AFTER);
    pos = c.end;
  }
  if (!sc->stop) end_token(sc);
}

static void scanner_free(scanner *sc) {
  nn_mem_free(sc->mem, sc->heap);
  sc->heap = NULL;
}

/* ---------------------------------------------------------------- tokenize and clean */

typedef struct tokenize_ctx {
  nn_token_fn fn;
  void *ctx;
} tokenize_ctx;

static int tokenize_cb(void *ctx, const char *tok, int len, int start, int end) {
  tokenize_ctx *t = ctx;
  if (t->fn) t->fn(t->ctx, tok, len, start, end);
  return 0;
}

/* Returns the number of tokens, or -1 when a token longer than TOKEN_STACK bytes needed memory
 * that could not be had. cfg NULL: the default text options. */
int nn_text_tokenize(const char *text, int len, const nn_config *cfg, nn_token_fn fn, void *ctx,
                     const nn_allocator *mem) {
  char stack[TOKEN_STACK];
  tokenize_ctx t = {fn, ctx};
  scanner sc;
  scanner_init(&sc, cfg, tokenize_cb, &t, stack, TOKEN_STACK, 1, mem);
  scan(&sc, text, len);
  scanner_free(&sc);
  return sc.oom ? -1 : sc.count;
}

typedef struct clean_ctx {
  char *out;
  int len;
} clean_ctx;

static int clean_cb(void *ctx, const char *tok, int len, int start, int end) {
  clean_ctx *c = ctx;
  if (c->len > 0) c->out[c->len++] = ' ';
  memcpy(c->out + c->len, tok, (size_t)len);
  c->len += len;
  return 0;
}

char *nn_text_clean(const char *text, int len, const nn_config *cfg, const nn_allocator *mem) {
  if (!text || len < 0) len = 0;
  /* Each token has at least as many bytes in the original as in the output, and two tokens
   * are separated in the original by at least one byte (or follow a U+0130, 2 bytes in, 1 out):
   * len + 1 bytes suffice. */
  clean_ctx c = {nn_mem_alloc(mem, (size_t)len + 1), 0};
  if (!c.out) return NULL;
  char stack[TOKEN_STACK];
  scanner sc;
  scanner_init(&sc, cfg, clean_cb, &c, stack, TOKEN_STACK, 1, mem);
  sc.mode.char_level = 0; /* the cleaned string is the same at char level */
  scan(&sc, text, len);
  scanner_free(&sc);
  if (sc.oom) {
    nn_mem_free(mem, c.out);
    return NULL;
  }
  c.out[c.len] = '\0';
  return c.out;
}

/* ---------------------------------------------------------------- vocabulary */

/* The tables' hash: SipHash-1-3 (Aumasson and Bernstein, "SipHash: a fast short-input PRF",
 * 2012; 1 compression round, 3 finalization rounds, as Python's and Rust's hash tables use)
 * keyed per table from the system's generator (nn_os_random, compat.h: getrandom on Linux). An
 * unkeyed hash (FNV-1a, as before) lets a crafted model or crafted training rows choose
 * tokens that all fall in one probe chain: n tokens then
 * cost n^2 / 2 comparisons (131k tokens: 22 s instead of 0.2 s). With a secret key nobody can
 * choose such tokens. Only where a token sits in the table depends on the key: ids, the
 * vocabulary order and every result stay the same from run to run. */
typedef nn_hash_key hash_key;

/* A fresh key from the kernel; if it cannot give one (very old kernels, seccomp), a
 * key mixed from the clock and addresses: weaker against an attacker who sees the process, never
 * an error. */
static hash_key hash_key_new(const void *salt) {
  hash_key k = {0, 0};
  unsigned char bytes[16];
  if (nn_os_random(bytes, sizeof bytes) == 0) {
    memcpy(&k.k0, bytes, 8);
    memcpy(&k.k1, bytes + 8, 8);
    return k;
  }
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  nn_rng rng;
  nn_rng_seed(&rng, (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 30 ^ (uint64_t)(uintptr_t)salt ^
                        (uint64_t)(uintptr_t)&k << 17);
  k.k0 = nn_rng_next(&rng);
  k.k1 = nn_rng_next(&rng);
  return k;
}

#define SIP_ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIP_ROUND                                                                                  \
  do {                                                                                             \
    v0 += v1, v1 = SIP_ROTL(v1, 13), v1 ^= v0, v0 = SIP_ROTL(v0, 32);                              \
    v2 += v3, v3 = SIP_ROTL(v3, 16), v3 ^= v2;                                                     \
    v0 += v3, v3 = SIP_ROTL(v3, 21), v3 ^= v0;                                                     \
    v2 += v1, v1 = SIP_ROTL(v1, 17), v1 ^= v2, v2 = SIP_ROTL(v2, 32);                              \
  } while (0)

static uint32_t hash_bytes(const hash_key *key, const char *s, int n) {
  const unsigned char *p = (const unsigned char *)s;
  uint64_t v0 = key->k0 ^ 0x736f6d6570736575ull, v1 = key->k1 ^ 0x646f72616e646f6dull;
  uint64_t v2 = key->k0 ^ 0x6c7967656e657261ull, v3 = key->k1 ^ 0x7465646279746573ull;
  size_t len = (size_t)n, full = len & ~(size_t)7;
  for (size_t i = 0; i < full; i += 8) {
    uint64_t m = 0;
    for (int b = 0; b < 8; b++) m |= (uint64_t)p[i + (size_t)b] << (8 * b); /* little-endian */
    v3 ^= m;
    SIP_ROUND;
    v0 ^= m;
  }
  uint64_t last = (uint64_t)(len & 0xff) << 56;
  for (size_t i = full; i < len; i++) last |= (uint64_t)p[i] << (8 * (i - full));
  v3 ^= last;
  SIP_ROUND;
  v0 ^= last;
  v2 ^= 0xff;
  SIP_ROUND;
  SIP_ROUND;
  SIP_ROUND;
  uint64_t h = v0 ^ v1 ^ v2 ^ v3;
  return (uint32_t)(h ^ (h >> 32));
}

nn_hash_key nn_hash_key_new(const void *salt) { return hash_key_new(salt); }

uint32_t nn_hash_bytes(const nn_hash_key *key, const char *s, int n) {
  return hash_bytes(key, s, n);
}

struct nn_vocab {
  int count;   /* tokens, <PAD> and <UNK> included */
  int max_len; /* longest token in bytes */
  char *arena; /* the tokens, each NUL-terminated */
  int *offset; /* (count + 1) start of each token in arena */
  int *table;  /* open addressing: token id or -1; size mask + 1, a power of 2 */
  uint32_t mask;
  hash_key key;            /* this table's secret hash key */
  const nn_allocator *mem; /* of the vocabulary and its arrays */
};

static int vocab_len(const nn_vocab *v, int id) { return v->offset[id + 1] - v->offset[id] - 1; }

/* Id of (tok, len) in v, or -1; *slot: where the probe ended (an empty slot when absent). */
static int vocab_find(const nn_vocab *v, const char *tok, int len, uint32_t *slot) {
  uint32_t i = hash_bytes(&v->key, tok, len) & v->mask;
  for (;;) {
    int id = v->table[i];
    if (id < 0) break;
    if (vocab_len(v, id) == len && memcmp(v->arena + v->offset[id], tok, (size_t)len) == 0) {
      if (slot) *slot = i;
      return id;
    }
    i = (i + 1) & v->mask;
  }
  if (slot) *slot = i;
  return -1;
}

void nn_vocab_free(nn_vocab *vocab) {
  if (!vocab) return;
  const nn_allocator *mem = vocab->mem;
  nn_mem_free(mem, vocab->arena);
  nn_mem_free(mem, vocab->offset);
  nn_mem_free(mem, vocab->table);
  nn_mem_free(mem, vocab);
}

const nn_allocator *nn_vocab_allocator(const nn_vocab *vocab) { return vocab ? vocab->mem : NULL; }

/* How often long loops ask their nn_interrupt_fn: every this many tokens or texts. */
#define INTERRUPT_EVERY 4096

static int interrupted(nn_interrupt_fn stop, void *ctx, char *err) {
  if (!stop || !stop(ctx)) return 0;
  snprintf(err, NN_ERR_LEN, "interrupted");
  return 1;
}

int nn_vocab_from_list(nn_vocab **out, const char *const *tokens, const int *lens, int n,
                       char *err) {
  return nn_vocab_from_list_ex(out, tokens, lens, n, NULL, NULL, NULL, err);
}

int nn_vocab_from_list_ex(nn_vocab **out, const char *const *tokens, const int *lens, int n,
                          nn_interrupt_fn stop, void *stop_ctx, const nn_allocator *mem,
                          char *err) {
  *out = NULL;
  if (n < 2 || !tokens) {
    snprintf(err, NN_ERR_LEN, "vocabulary: expected at least 2 tokens (<PAD>, <UNK>), got %d", n);
    return NN_ERROR;
  }
  size_t total = 0;
  for (int i = 0; i < n; i++) {
    int len = lens ? lens[i] : (tokens[i] ? (int)strlen(tokens[i]) : -1);
    if (!tokens[i] || len < 0) {
      snprintf(err, NN_ERR_LEN, "vocabulary: token %d is missing", i);
      return NN_ERROR;
    }
    total += (size_t)len + 1;
  }
  if (total > (size_t)0x7fffffff || n > (1 << 28)) {
    snprintf(err, NN_ERR_LEN, "vocabulary: %d tokens of %zu bytes is too large", n, total);
    return NN_ERROR;
  }
  static const char *const special[2] = {"<PAD>", "<UNK>"};
  for (int i = 0; i < 2; i++) {
    int len = lens ? lens[i] : (int)strlen(tokens[i]);
    if (len != 5 || memcmp(tokens[i], special[i], 5) != 0) {
      snprintf(err, NN_ERR_LEN, "vocabulary: token %d must be \"%s\", got \"%.*s\"", i, special[i],
               len > 40 ? 40 : len, tokens[i]);
      return NN_ERROR;
    }
  }
  uint32_t size = 16;
  while (size < 2u * (uint32_t)n) size *= 2;
  nn_vocab *v = nn_mem_calloc(mem, 1, sizeof *v);
  if (!v) goto nomem;
  v->mem = mem;
  v->arena = nn_mem_alloc(mem, total);
  v->offset = nn_mem_alloc(mem, sizeof(int) * ((size_t)n + 1));
  v->table = nn_mem_alloc(mem, sizeof(int) * (size_t)size);
  if (!v->arena || !v->offset || !v->table) goto nomem;
  v->mask = size - 1;
  v->key = hash_key_new(v);
  memset(v->table, 0xff, sizeof(int) * (size_t)size);
  int at = 0;
  for (int i = 0; i < n; i++) {
    int len = lens ? lens[i] : (int)strlen(tokens[i]);
    uint32_t slot;
    v->offset[i] = at;
    memcpy(v->arena + at, tokens[i], (size_t)len);
    v->arena[at + len] = '\0';
    at += len + 1;
    v->offset[i + 1] = at;
    if (vocab_find(v, tokens[i], len, &slot) >= 0) {
      snprintf(err, NN_ERR_LEN, "vocabulary: token %d \"%.*s\" appears twice", i,
               len > 40 ? 40 : len, tokens[i]);
      nn_vocab_free(v);
      return NN_ERROR;
    }
    v->table[slot] = i;
    if (len > v->max_len) v->max_len = len;
    if (i % INTERRUPT_EVERY == INTERRUPT_EVERY - 1 && interrupted(stop, stop_ctx, err)) {
      nn_vocab_free(v);
      return NN_INTERRUPTED;
    }
  }
  v->count = n;
  *out = v;
  return NN_OK;
nomem:
  nn_vocab_free(v);
  snprintf(err, NN_ERR_LEN, "vocabulary: out of memory for %d tokens", n);
  return NN_NOMEM;
}

int nn_vocab_count(const nn_vocab *vocab) { return vocab ? vocab->count : 0; }

size_t nn_vocab_memory(const nn_vocab *vocab) {
  if (!vocab) return 0;
  return sizeof *vocab + (size_t)vocab->offset[vocab->count] +
         sizeof(int) * ((size_t)vocab->count + 1 + (size_t)vocab->mask + 1);
}

const char *nn_vocab_token(const nn_vocab *vocab, int id, int *len) {
  if (!vocab || id < 0 || id >= vocab->count) return NULL;
  if (len) *len = vocab_len(vocab, id);
  return vocab->arena + vocab->offset[id];
}

int nn_vocab_lookup(const nn_vocab *vocab, const char *tok, int len) {
  if (!vocab || len < 0 || (!tok && len > 0) || len > vocab->max_len) return NN_UNK;
  int id = vocab_find(vocab, tok ? tok : "", len, NULL);
  return id < 0 ? NN_UNK : id;
}

/* Token counts while building: entries in first-occurrence order. */
typedef struct count_entry {
  int offset, len; /* in the arena */
  int64_t count;
} count_entry;

typedef struct counter {
  count_entry *entries;
  int n, cap;
  char *arena;
  size_t arena_len, arena_cap;
  int *table; /* entry index or -1 */
  uint32_t mask;
  hash_key key; /* this table's secret hash key */
  int oom;
  const nn_allocator *mem;
} counter;

static int counter_grow_table(counter *c) {
  uint32_t size = (c->mask + 1) * 2;
  int *table = nn_mem_alloc(c->mem, sizeof(int) * (size_t)size);
  if (!table) return 0;
  memset(table, 0xff, sizeof(int) * (size_t)size);
  for (int e = 0; e < c->n; e++) {
    uint32_t i =
        hash_bytes(&c->key, c->arena + c->entries[e].offset, c->entries[e].len) & (size - 1);
    while (table[i] >= 0) i = (i + 1) & (size - 1);
    table[i] = e;
  }
  nn_mem_free(c->mem, c->table);
  c->table = table;
  c->mask = size - 1;
  return 1;
}

static int count_cb(void *ctx, const char *tok, int len, int start, int end) {
  counter *c = ctx;
  uint32_t i = hash_bytes(&c->key, tok, len) & c->mask;
  for (;;) {
    int e = c->table[i];
    if (e < 0) break;
    if (c->entries[e].len == len &&
        memcmp(c->arena + c->entries[e].offset, tok, (size_t)len) == 0) {
      c->entries[e].count++;
      return 0;
    }
    i = (i + 1) & c->mask;
  }
  if (c->n == c->cap) {
    int cap = c->cap ? c->cap * 2 : 1024;
    count_entry *entries = nn_mem_realloc(c->mem, c->entries, sizeof *entries * (size_t)cap);
    if (!entries) goto nomem;
    c->entries = entries;
    c->cap = cap;
  }
  if (c->arena_len + (size_t)len + 1 > c->arena_cap || c->arena_len > (size_t)0x7fff0000) {
    size_t cap = c->arena_cap ? c->arena_cap * 2 : 16384;
    while (cap < c->arena_len + (size_t)len + 1) cap *= 2;
    char *arena = cap <= (size_t)0x7fffffff ? nn_mem_realloc(c->mem, c->arena, cap) : NULL;
    if (!arena) goto nomem;
    c->arena = arena;
    c->arena_cap = cap;
  }
  memcpy(c->arena + c->arena_len, tok, (size_t)len);
  c->arena[c->arena_len + (size_t)len] = '\0';
  c->entries[c->n] = (count_entry){(int)c->arena_len, len, 1};
  c->arena_len += (size_t)len + 1;
  c->table[i] = c->n++;
  if ((uint32_t)c->n * 2 > c->mask + 1 && !counter_grow_table(c)) goto nomem;
  return 0;
nomem:
  c->oom = 1;
  return 1;
}

static int by_count_then_first(const void *a, const void *b) {
  const count_entry *x = a, *y = b;
  if (x->count != y->count) return x->count > y->count ? -1 : 1;
  return x->offset < y->offset ? -1 : x->offset > y->offset; /* arena offset = first seen */
}

int nn_vocab_build(nn_vocab **out, const char *const *texts, const int *lens, int n,
                   const nn_config *cfg, char *err) {
  return nn_vocab_build_ex(out, texts, lens, n, cfg, NULL, NULL, NULL, err);
}

/* nn_vocab_build_ex's texts as nn_vocab_build_rows asks for them. */
typedef struct text_arrays {
  const char *const *texts;
  const int *lens;
} text_arrays;

static const char *text_arrays_get(void *ctx, int t, int *len) {
  const text_arrays *a = ctx;
  *len = a->lens ? a->lens[t] : (a->texts[t] ? (int)strlen(a->texts[t]) : 0);
  return a->texts[t];
}

int nn_vocab_build_ex(nn_vocab **out, const char *const *texts, const int *lens, int n,
                      const nn_config *cfg, nn_interrupt_fn stop, void *stop_ctx,
                      const nn_allocator *mem, char *err) {
  *out = NULL;
  if (n < 0 || (n > 0 && !texts)) {
    snprintf(err, NN_ERR_LEN, "nn_vocab_build: expected n >= 0 texts, got %d", n);
    return NN_ERROR;
  }
  text_arrays a = {texts, lens};
  return nn_vocab_build_rows(out, text_arrays_get, &a, n, cfg, stop, stop_ctx, mem, err);
}

int nn_vocab_build_rows(nn_vocab **out, nn_row_fn text, void *ctx, int n, const nn_config *cfg,
                        nn_interrupt_fn stop, void *stop_ctx, const nn_allocator *mem, char *err) {
  *out = NULL;
  if (!cfg || cfg->vocab_size < 2) {
    snprintf(err, NN_ERR_LEN, "nn_vocab_build: vocab_size must be at least 2, got %d",
             cfg ? cfg->vocab_size : 0);
    return NN_ERROR;
  }
  if (n < 0) {
    snprintf(err, NN_ERR_LEN, "nn_vocab_build: expected n >= 0 texts, got %d", n);
    return NN_ERROR;
  }
  int status = NN_NOMEM;
  const char **list = NULL;
  int *list_lens = NULL;
  counter c = {0};
  c.mem = mem;
  c.table = nn_mem_alloc(mem, sizeof(int) * 1024);
  if (!c.table) goto done;
  memset(c.table, 0xff, sizeof(int) * 1024);
  c.mask = 1023;
  c.key = hash_key_new(&c);
  size_t scanned = 0; /* bytes since the last interrupt check */
  for (int t = 0; t < n; t++) {
    int len = 0;
    const char *bytes = text(ctx, t, &len);
    if (!bytes || len < 0) len = 0;
    scanned += (size_t)len;
    if ((t % INTERRUPT_EVERY == INTERRUPT_EVERY - 1 || scanned > ((size_t)1 << 20))) {
      scanned = 0;
      if (interrupted(stop, stop_ctx, err)) {
        status = NN_INTERRUPTED;
        goto done;
      }
    }
    char stack[TOKEN_STACK];
    scanner sc;
    scanner_init(&sc, cfg, count_cb, &c, stack, TOKEN_STACK, 1, mem);
    scan(&sc, bytes ? bytes : "", len);
    scanner_free(&sc);
    if (sc.oom || c.oom) goto done;
  }
  /* Sort by count, most frequent first; ties in first-occurrence order (a stable order:
   * entries were created in that order, and their arena offsets grow with it). */
  if (c.n > 1) qsort(c.entries, (size_t)c.n, sizeof *c.entries, by_count_then_first);
  int keep = c.n < cfg->vocab_size - 2 ? c.n : cfg->vocab_size - 2;
  /* min_count: the entries are sorted by count, so the rare ones are a suffix */
  while (keep > 0 && c.entries[keep - 1].count < (int64_t)cfg->min_count) keep--;
  list = nn_mem_alloc(mem, sizeof *list * ((size_t)keep + 2));
  list_lens = nn_mem_alloc(mem, sizeof *list_lens * ((size_t)keep + 2));
  if (!list || !list_lens) goto done;
  list[0] = "<PAD>";
  list[1] = "<UNK>";
  list_lens[0] = list_lens[1] = 5;
  for (int i = 0; i < keep; i++) {
    list[i + 2] = c.arena + c.entries[i].offset;
    list_lens[i + 2] = c.entries[i].len;
  }
  status = nn_vocab_from_list_ex(out, list, list_lens, keep + 2, stop, stop_ctx, mem, err);
  nn_mem_free(mem, (void *)list);
  nn_mem_free(mem, list_lens);
  nn_mem_free(mem, c.entries);
  nn_mem_free(mem, c.arena);
  nn_mem_free(mem, c.table);
  return status;
done:
  nn_mem_free(mem, (void *)list);
  nn_mem_free(mem, list_lens);
  nn_mem_free(mem, c.entries);
  nn_mem_free(mem, c.arena);
  nn_mem_free(mem, c.table);
  if (status == NN_NOMEM)
    snprintf(err, NN_ERR_LEN, "nn_vocab_build: out of memory counting the tokens of %d texts", n);
  return status;
}

/* ---------------------------------------------------------------- subwords */

int nn_subword_ids(int *out, int cap, const char *tok, int len, const nn_config *cfg,
                   const nn_allocator *mem) {
  if (!cfg || cfg->subword_buckets <= 0 || len < 0 || (len > 0 && !tok)) return 0;
  /* character starts of "<" tok ">": a token holds valid UTF-8 only (the scanner's letters),
   * but a byte that does not decode counts as one character all the same */
  int chars = 0, count = 0;
  const unsigned char *s = (const unsigned char *)tok;
  int stack_starts[66], *starts = stack_starts, heap = len + 3 > 66;
  if (heap && !(starts = nn_mem_alloc(mem, ((size_t)len + 3) * sizeof *starts))) return -1;
  starts[chars++] = -1; /* "<" */
  for (int i = 0; i < len;) {
    uint32_t cp;
    int n = nn_utf8_decode(s + i, (size_t)(len - i), &cp);
    starts[chars++] = i;
    i += n > 0 ? n : 1;
  }
  starts[chars] = len;   /* ">" starts at len; the end of ">" is len + 1 */
  int total = chars + 1; /* characters of "<" tok ">" */
  for (int a = 0; a < total; a++)
    for (int n = cfg->subword_min; n <= cfg->subword_max && a + n <= total; n++) {
      /* bytes of characters a .. a + n - 1 of "<" tok ">", hashed as one string */
      uint32_t h = 2166136261u; /* FNV-1a */
      int from = a == 0 ? 0 : starts[a], to = a + n == total ? len : starts[a + n];
      if (a == 0) h = (h ^ '<') * 16777619u;
      for (int i = from; i < to; i++) h = (h ^ s[i]) * 16777619u;
      if (a + n == total) h = (h ^ '>') * 16777619u;
      if (count < cap) out[count] = (int)(h % (uint32_t)cfg->subword_buckets);
      count++;
    }
  if (heap) nn_mem_free(mem, starts);
  return count;
}

/* ---------------------------------------------------------------- encode */

typedef struct encode_ctx {
  nn_token *out;
  int n, max_len;
  const nn_vocab *vocab;
  int cap; /* tokens longer than this were cut by the scanner: they are <UNK> */
} encode_ctx;

static int encode_cb(void *ctx, const char *tok, int len, int start, int end) {
  encode_ctx *e = ctx;
  int id = len > e->cap ? NN_UNK : nn_vocab_lookup(e->vocab, tok, len);
  e->out[e->n++] = (nn_token){id, start, end};
  return e->n >= e->max_len;
}

int nn_text_encode(nn_token *out, const char *text, int len, const nn_config *cfg,
                   const nn_vocab *vocab) {
  int max_len = cfg ? cfg->max_len : 64;
  if (max_len < 1 || !out) return 0;
  char stack[TOKEN_STACK];
  char *buf = stack;
  int cap = TOKEN_STACK;
  /* Tokens longer than the longest vocabulary token need not be kept: they are <UNK>. (Only a
   * vocabulary with tokens over TOKEN_STACK bytes needs a heap buffer; if that allocation
   * fails, such long tokens encode as <UNK>.) */
  if (vocab && vocab->max_len > TOKEN_STACK) {
    buf = nn_mem_alloc(vocab->mem, (size_t)vocab->max_len);
    cap = vocab->max_len;
    if (!buf) {
      buf = stack;
      cap = TOKEN_STACK;
    }
  }
  encode_ctx e = {out, 0, max_len, vocab, cap};
  scanner sc;
  scanner_init(&sc, cfg, encode_cb, &e, buf, cap, 0, NULL);
  scan(&sc, text, len);
  if (buf != stack) nn_mem_free(vocab->mem, buf);
  if (e.n == 0) out[e.n++] = (nn_token){NN_UNK, -1, -1};
  return e.n;
}
