/* attn_lineage.c -- where each version came from: its row of attn_lineage (the training query,
 * its row count and a SHA-256 of its rows, the options as given, the warm start's base,
 * attnext's version, the backend, start and end times), written in the transaction of the save
 * (attn_store.c).
 *
 *   SELECT m.version, l.query, l.rows, l.rows_sha256, l.backend, l.started_at
 *   FROM attn_models AS m JOIN attn_lineage AS l USING (name, version) WHERE name = 'news';
 *
 * The hash covers the rows in the order the query returned them: for each row, the text's bytes
 * and the label's (as SQLite's text of them), each preceded by its length as 8 bytes
 * little-endian, so that ('ab', 'c') and ('a', 'bc') differ. SHA-256 as FIPS 180-4 defines it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn_ext.h"
#include "compat.h" /* nn_os_gmtime */
#include "json.h"

/* ------------------------------------------------------------------ SHA-256 (FIPS 180-4) */

typedef struct attn_sha256 {
  uint32_t h[8];
  uint64_t bytes;
  unsigned char block[64];
  size_t used;
} attn_sha256;

static const uint32_t sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void sha256_block(attn_sha256 *s, const unsigned char *p) {
  uint32_t w[64];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
           (uint32_t)p[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3], e = s->h[4], f = s->h[5],
           g = s->h[6], h = s->h[7];
  for (int i = 0; i < 64; i++) {
    uint32_t t1 =
        h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + sha256_k[i] + w[i];
    uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  s->h[0] += a;
  s->h[1] += b;
  s->h[2] += c;
  s->h[3] += d;
  s->h[4] += e;
  s->h[5] += f;
  s->h[6] += g;
  s->h[7] += h;
}

static void sha256_init(attn_sha256 *s) {
  static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(s->h, h0, sizeof h0);
  s->bytes = 0;
  s->used = 0;
}

static void sha256_update(attn_sha256 *s, const void *data, size_t len) {
  const unsigned char *p = data;
  s->bytes += len;
  while (len > 0) {
    size_t take = 64 - s->used < len ? 64 - s->used : len;
    memcpy(s->block + s->used, p, take);
    s->used += take;
    p += take;
    len -= take;
    if (s->used == 64) {
      sha256_block(s, s->block);
      s->used = 0;
    }
  }
}

static void sha256_hex(attn_sha256 *s, char *out) {
  uint64_t bits = s->bytes * 8;
  unsigned char pad = 0x80, zero = 0, len[8];
  sha256_update(s, &pad, 1);
  while (s->used != 56) sha256_update(s, &zero, 1);
  for (int i = 0; i < 8; i++) len[i] = (unsigned char)(bits >> (56 - 8 * i));
  sha256_update(s, len, 8);
  static const char hex[] = "0123456789abcdef";
  for (int i = 0; i < 8; i++)
    for (int k = 0; k < 4; k++) {
      unsigned byte = (s->h[i] >> (24 - 8 * k)) & 0xff;
      out[8 * i + 2 * k] = hex[byte >> 4];
      out[8 * i + 2 * k + 1] = hex[byte & 15];
    }
  out[64] = 0;
}

static void sha256_field(attn_sha256 *s, const char *bytes, int len) {
  unsigned char prefix[8];
  uint64_t n = len > 0 ? (uint64_t)len : 0;
  for (int i = 0; i < 8; i++) prefix[i] = (unsigned char)(n >> (8 * i));
  sha256_update(s, prefix, 8);
  if (n) sha256_update(s, bytes, (size_t)n);
}

static int attn_int_ascending(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

int attn_train_rows_sha256_of(const attn_train_rows *r, const int *rows, int n, char *out) {
  int *sorted = sqlite3_malloc64(sizeof *sorted * (sqlite3_uint64)(n > 0 ? n : 1));
  if (!sorted) return SQLITE_NOMEM;
  if (n > 0) memcpy(sorted, rows, sizeof *sorted * (size_t)n);
  qsort(sorted, (size_t)(n > 0 ? n : 0), sizeof *sorted, attn_int_ascending);
  attn_sha256 s;
  sha256_init(&s);
  for (int i = 0; i < n; i++) {
    int len;
    const char *bytes = attn_train_rows_text(r, sorted[i], &len);
    sha256_field(&s, bytes, len);
    bytes = attn_train_rows_label(r, sorted[i], &len);
    sha256_field(&s, bytes, len);
  }
  sha256_hex(&s, out);
  sqlite3_free(sorted);
  return SQLITE_OK;
}

int attn_train_rows_sha256(const attn_train_rows *r, int first, int n, attn_interrupt *interrupt,
                           char *out) {
  attn_sha256 s;
  sha256_init(&s);
  size_t hashed = 0; /* bytes since the last interrupt check: a few long texts take a while */
  for (int i = first; i < first + n; i++) {
    int len;
    const char *bytes = attn_train_rows_text(r, i, &len);
    sha256_field(&s, bytes, len);
    hashed += len > 0 ? (size_t)len : 0;
    bytes = attn_train_rows_label(r, i, &len);
    sha256_field(&s, bytes, len);
    hashed += len > 0 ? (size_t)len : 0;
    if ((i % 4096 == 4095 || hashed > ((size_t)1 << 22)) && interrupt) {
      hashed = 0;
      if (attn_interrupted(interrupt, 1)) return SQLITE_INTERRUPT;
    }
  }
  sha256_hex(&s, out);
  return SQLITE_OK;
}

/* ------------------------------------------------------------------ the row */

void attn_utc_now(char *out) {
  struct timespec ts;
  struct tm tm;
  clock_gettime(CLOCK_REALTIME, &ts);
  time_t secs = ts.tv_sec;
  nn_os_gmtime(&secs, &tm);
  sqlite3_snprintf(32, out, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                   tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ts.tv_nsec / 1000000));
}

void attn_version_short(char *out) {
  char full[1024];
  nn_version_string(full, sizeof full);
  size_t n = strcspn(full, ";");
  if (n > 63) n = 63;
  memcpy(out, full, n);
  out[n] = 0;
}

/* Each keeps the first failing bind's code in *rc (a text past SQLITE_LIMIT_LENGTH: the row
 * must not be written with that column NULL). */
static void bind_text_or_null(int *rc, sqlite3_stmt *stmt, int i, const char *text) {
  int bound =
      text ? sqlite3_bind_text(stmt, i, text, -1, SQLITE_STATIC) : sqlite3_bind_null(stmt, i);
  if (*rc == SQLITE_OK) *rc = bound;
}

static void bind_int_or_null(int *rc, sqlite3_stmt *stmt, int i, int64_t v) {
  int bound = v >= 0 ? sqlite3_bind_int64(stmt, i, v) : sqlite3_bind_null(stmt, i);
  if (*rc == SQLITE_OK) *rc = bound;
}

int attn_lineage_write(sqlite3 *db, const char *fn, const char *name, int64_t version,
                       const attn_lineage_info *l, char **errmsg) {
  sqlite3_stmt *stmt = NULL;
  char attnext[64];
  attn_version_short(attnext);
  /* the options without the whitespace between tokens, as SQLite's json() wrote them */
  char *options = NULL;
  if (l->options) {
    nn_json *doc = NULL;
    char err[NN_ERR_LEN];
    int st = nn_json_parse(&doc, l->options, strlen(l->options), &attn_mem, err);
    if (st == NN_ERROR) {
      *errmsg = sqlite3_mprintf("%s: cannot save the lineage: malformed JSON", fn);
      return SQLITE_ERROR;
    }
    nn_strbuf sb;
    nn_strbuf_init(&sb, &attn_mem);
    if (st == NN_OK) nn_strbuf_append_json_compact(&sb, doc, l->options);
    options = st == NN_OK && !sb.oom ? sqlite3_mprintf("%s", sb.data) : NULL;
    nn_strbuf_free(&sb);
    nn_json_free(doc);
    if (!options) return SQLITE_NOMEM;
  }
  /* a row of the same key left by a store edited by hand: the new version's row replaces it */
  int rc = sqlite3_prepare_v2(
      db,
      "INSERT OR REPLACE INTO main.attn_lineage(name, version, function, query, rows, "
      "rows_sha256, validation_query, validation_rows, validation_sha256, options, from_name, "
      "from_version, attnext, backend, started_at, ended_at) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, "
      "?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
      -1, &stmt, NULL);
  if (rc != SQLITE_OK) {
    *errmsg = sqlite3_mprintf("%s: cannot save the lineage: %s", fn, sqlite3_errmsg(db));
    sqlite3_free(options);
    return rc;
  }
  bind_text_or_null(&rc, stmt, 1, name);
  bind_int_or_null(&rc, stmt, 2, version);
  bind_text_or_null(&rc, stmt, 3, l->function);
  bind_text_or_null(&rc, stmt, 4, l->query);
  bind_int_or_null(&rc, stmt, 5, l->rows);
  bind_text_or_null(&rc, stmt, 6, l->rows_sha256);
  bind_text_or_null(&rc, stmt, 7, l->validation_query);
  bind_int_or_null(&rc, stmt, 8, l->validation_rows);
  bind_text_or_null(&rc, stmt, 9, l->validation_sha256);
  bind_text_or_null(&rc, stmt, 10, options);
  bind_text_or_null(&rc, stmt, 11, l->from_name);
  bind_int_or_null(&rc, stmt, 12, l->from_version);
  bind_text_or_null(&rc, stmt, 13, attnext);
  bind_text_or_null(&rc, stmt, 14, l->backend);
  bind_text_or_null(&rc, stmt, 15, l->started_at);
  bind_text_or_null(&rc, stmt, 16, l->ended_at);
  if (rc != SQLITE_OK) {
    *errmsg = sqlite3_mprintf("%s: cannot save the lineage: %s", fn, sqlite3_errstr(rc));
    sqlite3_finalize(stmt);
    sqlite3_free(options);
    return rc;
  }
  rc = sqlite3_step(stmt);
  if (rc == SQLITE_DONE) {
    rc = SQLITE_OK;
  } else {
    *errmsg = sqlite3_mprintf("%s: cannot save the lineage: %s", fn, sqlite3_errmsg(db));
  }
  sqlite3_finalize(stmt);
  sqlite3_free(options);
  return rc;
}
