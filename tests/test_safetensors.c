/* test_safetensors.c -- the weights BLOB (engine/safetensors.c).
 *  1. tests/fixtures/tiny.safetensors, written in the reference writer's layout by
 *     tests/fixtures/make_tiny_safetensors.py (struct + json), parses: dtypes, shapes, values,
 *     metadata with escapes, an empty tensor.
 *  2. save -> load round trip for every cell x attention x direction x fc1 x layers variant:
 *     parameters bit for bit (NaN, -0 and denormals included), config, vocabulary and labels
 *     with quotes, backslashes, control characters, UTF-8 and invalid UTF-8.
 *  3. hostile BLOBs, each checked by its exact error text: header length huge / past the end,
 *     not JSON, overlapping and out-of-range offsets, unsupported dtype, too many dimensions,
 *     shape/size mismatch, missing / extra / duplicate tensors, wrong dtype or shape for the
 *     model, non-string metadata, newer format_version, bad config / vocab / labels, duplicate
 *     labels, data bytes no tensor covers.
 *  4. the saved BLOB truncated at every length, and seeded random bit flips and byte
 *     overwrites: every load returns (an error for every truncation), never crashes.
 * Every BLOB is parsed from an exact-size heap copy so ASan and valgrind see any over-read. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "config.h"
#include "config_base.h"
#include "json.h"
#include "nn_internal.h"

/* ------------------------------------------------------------------------------- helpers */

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* load from an exact-size copy; returns rc, frees any model */
static int load_copy(const unsigned char *blob, size_t len, char *err) {
  unsigned char *copy = malloc(len ? len : 1);
  if (len) memcpy(copy, blob, len);
  nn_model *m = (nn_model *)1;
  int rc = nn_model_load(&m, copy, len, err);
  if (rc == NN_OK) {
    CHECK(m != NULL, "load ok but no model");
    nn_model_free(m);
  } else {
    CHECK(m == NULL, "load failed (%s) but *out is not NULL", err);
  }
  free(copy);
  return rc;
}

static int parse_copy(const unsigned char *blob, size_t len, char *err) {
  unsigned char *copy = malloc(len ? len : 1);
  if (len) memcpy(copy, blob, len);
  nn_st_file f;
  int rc = nn_st_parse(&f, copy, len, NULL, err);
  if (rc == NN_OK) nn_st_free(&f);
  free(copy);
  return rc;
}

/* blob = u64 header length + header (padded with spaces to 8) + data */
static unsigned char *make_blob(const char *header, const unsigned char *data, size_t data_len,
                                size_t *len) {
  size_t n = strlen(header), padded = (n + 7) / 8 * 8;
  *len = 8 + padded + data_len;
  unsigned char *b = malloc(*len);
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)padded >> (8 * i));
  memcpy(b + 8, header, n);
  memset(b + 8 + n, ' ', padded - n);
  if (data_len) memcpy(b + 8 + padded, data, data_len);
  return b;
}

static void expect_parse_error(const char *what, const char *header, const unsigned char *data,
                               size_t data_len, const char *want) {
  size_t len;
  unsigned char *b = make_blob(header, data, data_len, &len);
  char err[NN_ERR_LEN] = "";
  int rc = parse_copy(b, len, err);
  CHECK(rc == NN_ERROR, "%s: rc %d", what, rc);
  CHECK(strcmp(err, want) == 0, "%s:\n  got      %s\n  expected %s", what, err, want);
  char err2[NN_ERR_LEN] = "";
  rc = load_copy(b, len, err2);
  CHECK(rc == NN_ERROR && strcmp(err2, want) == 0, "%s: load says %s", what, err2);
  free(b);
}

/* ------------------------------------------------------------------------------- fixture */

static void test_fixture(void) {
  FILE *fp = fopen("tests/fixtures/tiny.safetensors", "rb");
  CHECK(fp != NULL, "tests/fixtures/tiny.safetensors opens (run from the repository root)");
  if (!fp) return;
  unsigned char buf[4096];
  size_t len = fread(buf, 1, sizeof buf, fp);
  fclose(fp);
  unsigned char *blob = malloc(len);
  memcpy(blob, buf, len);
  nn_st_file f;
  char err[NN_ERR_LEN] = "";
  int rc = nn_st_parse(&f, blob, len, NULL, err);
  CHECK(rc == NN_OK, "fixture parses: %s", err);
  if (rc == NN_OK) {
    CHECK(f.count == 5 && f.meta_count == 2, "5 tensors (%d), 2 metadata entries (%d)", f.count,
          f.meta_count);
    const nn_st_tensor *e = nn_st_find(&f, "embeddings.weight"), *c = nn_st_find(&f, "counts"),
                       *i = nn_st_find(&f, "ids"), *s = nn_st_find(&f, "scale"),
                       *z = nn_st_find(&f, "empty");
    CHECK(e && c && i && s && z && !nn_st_find(&f, "nothing"), "all found, absent is NULL");
    if (e && c && i && s && z) {
      float fv[6];
      memcpy(fv, e->data, sizeof fv);
      const float fw[6] = {0.5f, -1.25f, 3.0f, 1e-3f, -0.0f, 65504.0f};
      CHECK(e->dtype == NN_DTYPE_F32 && e->ndim == 2 && e->shape[0] == 2 && e->shape[1] == 3 &&
                e->nbytes == 24 && memcmp(fv, fw, sizeof fv) == 0,
            "F32 [2,3]: %g %g %g %g %g %g", fv[0], fv[1], fv[2], fv[3], fv[4], fv[5]);
      int64_t cv[3];
      memcpy(cv, c->data, sizeof cv);
      CHECK(c->dtype == NN_DTYPE_I64 && c->ndim == 1 && c->shape[0] == 3 && cv[0] == 1 &&
                cv[1] == -2 && cv[2] == (int64_t)1 << 40,
            "I64 [3]: %lld %lld %lld", (long long)cv[0], (long long)cv[1], (long long)cv[2]);
      int32_t iv[4];
      memcpy(iv, i->data, sizeof iv);
      CHECK(i->dtype == NN_DTYPE_I32 && i->ndim == 2 && iv[0] == 7 && iv[1] == -8 &&
                iv[2] == INT32_MAX && iv[3] == INT32_MIN,
            "I32 [2,2]: %d %d %d %d", iv[0], iv[1], iv[2], iv[3]);
      double dv;
      memcpy(&dv, s->data, 8);
      CHECK(s->dtype == NN_DTYPE_F64 && s->ndim == 0 && s->nbytes == 8 && dv == 0.1,
            "F64 scalar: %.17g", dv);
      CHECK(z->ndim == 2 && z->shape[0] == 0 && z->shape[1] == 4 && z->nbytes == 0,
            "empty F32 [0,4]");
      CHECK(c->data == blob + 8 + 392 && s->data == c->data + 24, "data points into the blob");
    }
    const char *note = nn_st_meta(&f, "note");
    CHECK(note && strcmp(note, "h\xc3\xa9llo \"quoted\" \\ \xe2\x82\xac") == 0, "metadata note: %s",
          note);
    CHECK(nn_st_meta(&f, "format_version") && strcmp(nn_st_meta(&f, "format_version"), "1") == 0 &&
              nn_st_meta(&f, "config") == NULL,
          "format_version 1, no config");
    nn_st_free(&f);
    CHECK(f.count == 0 && f.tensors == NULL, "nn_st_free clears");
  }
  rc = load_copy(blob, len, err);
  CHECK(rc == NN_ERROR && strcmp(err, "weights: __metadata__ has no \"config\"") == 0,
        "fixture is not a model: %s", err);
  int failed = 0;
  for (size_t n = 0; n < len; n++) failed += parse_copy(blob, n, err) != NN_OK;
  CHECK(failed == (int)len, "fixture truncated: %d of %zu lengths fail", failed, len);
  free(blob);
}

/* ------------------------------------------------------------------------------- models */

static const char *const vocab_tokens[] = {"<PAD>",         "<UNK>",           "the",
                                           "caf\xc3\xa9",   "a\"b\\c",         "tab\there",
                                           "\xff raw \x01", "\xf0\x9f\x98\x80"};
#define NTOKENS 8
static const char *const label_names[] = {"World", "quote\"back\\slash/",
                                          "line\nbreak \xe2\x82\xac", "\xfe\xff raw"};

static nn_model *make_model(nn_config *cfg, int C) {
  int lens[NTOKENS];
  for (int i = 0; i < NTOKENS; i++) lens[i] = (int)strlen(vocab_tokens[i]);
  lens[6] = 7; /* "\xff raw \x01" */
  nn_vocab *vocab = NULL;
  nn_model *m = NULL;
  char err[NN_ERR_LEN] = "";
  int rc = nn_vocab_from_list(&vocab, vocab_tokens, lens, NTOKENS, err);
  CHECK(rc == NN_OK, "vocab: %s", err);
  if (rc != NN_OK) return NULL;
  rc = nn_model_create(&m, cfg, vocab, label_names, C, 7, err);
  CHECK(rc == NN_OK, "model: %s", err);
  if (rc != NN_OK) return NULL;
  /* fill with random finite bits, plus values only a bitwise copy keeps (-0, the smallest
   * subnormal, the finite extremes); NaN and infinities are refused by the loader (below) */
  float *p = nn_model_params(m);
  size_t n = nn_model_param_count(m);
  for (size_t k = 0; k < n; k++) {
    uint32_t bits = (uint32_t)rnd();
    if ((bits & 0x7f800000u) == 0x7f800000u) bits &= ~0x00800000u; /* exponent 255 -> 254 */
    memcpy(&p[k], &bits, 4);
  }
  const uint32_t specials[] = {0x80000000u, 0x00000001u, 0x7f7fffffu, 0xff7fffffu};
  for (size_t k = 0; k < 4 && k < n; k++) memcpy(&p[k], &specials[k], 4);
  return m;
}

static void small_config(nn_config *cfg) {
  test_config_base(cfg);
  cfg->embed_dim = 3;
  cfg->hidden = 4;
  cfg->fc_hidden = 5;
  cfg->vocab_size = 100;
  cfg->seed = 99;
  cfg->lr = 0.003f;
  cfg->dropout = 0.3f;
}

static int same_model(nn_model *a, nn_model *b, char *what, size_t n) {
  char *ja = nn_config_to_json(nn_model_config(a), NULL),
       *jb = nn_config_to_json(nn_model_config(b), NULL);
  int same = ja && jb && strcmp(ja, jb) == 0;
  free(ja);
  free(jb);
  if (!same) return snprintf(what, n, "config differs"), 0;
  const nn_vocab *va = nn_model_vocab(a), *vb = nn_model_vocab(b);
  if (nn_vocab_count(va) != nn_vocab_count(vb)) return snprintf(what, n, "vocab count"), 0;
  for (int i = 0; i < nn_vocab_count(va); i++) {
    int la, lb;
    const char *ta = nn_vocab_token(va, i, &la), *tb = nn_vocab_token(vb, i, &lb);
    if (!ta || !tb || la != lb || memcmp(ta, tb, (size_t)la) != 0)
      return snprintf(what, n, "vocab token %d", i), 0;
  }
  if (nn_model_num_classes(a) != nn_model_num_classes(b)) return snprintf(what, n, "classes"), 0;
  for (int c = 0; c < nn_model_num_classes(a); c++)
    if (strcmp(nn_model_label(a, c), nn_model_label(b, c)) != 0)
      return snprintf(what, n, "label %d", c), 0;
  if (nn_model_param_count(a) != nn_model_param_count(b) ||
      nn_model_tensor_count(a) != nn_model_tensor_count(b))
    return snprintf(what, n, "parameter / tensor count"), 0;
  if (memcmp(nn_model_params(a), nn_model_params(b), nn_model_param_count(a) * 4) != 0)
    return snprintf(what, n, "parameters differ"), 0;
  return snprintf(what, n, "same"), 1;
}

static void test_round_trip(void) {
  int variants = 0, same = 0;
  for (int cell = 0; cell < 3; cell++)
    for (int attn = 0; attn < 4; attn++)
      for (int bi = 0; bi < 2; bi++)
        for (int fc = 0; fc < 2; fc++)
          for (int layers = 1; layers <= 2; layers++) {
            nn_config cfg;
            small_config(&cfg);
            cfg.cell = (nn_cell)cell, cfg.attention = (nn_attention)attn, cfg.bidirectional = bi;
            cfg.fc_hidden = fc ? 5 : 0, cfg.layers = layers;
            nn_model *m = make_model(&cfg, 2 + (variants % 3));
            if (!m) continue;
            variants++;
            nn_config sized = cfg;
            sized.vocab_size = NTOKENS;
            CHECK(nn_config_param_count(&sized, (uint64_t)nn_model_num_classes(m)) ==
                      nn_model_param_count(m),
                  "nn_config_param_count %llu == nn_model_param_count %zu",
                  (unsigned long long)nn_config_param_count(&sized,
                                                            (uint64_t)nn_model_num_classes(m)),
                  nn_model_param_count(m));
            unsigned char *blob = NULL;
            size_t len = 0;
            char err[NN_ERR_LEN] = "", what[64] = "";
            int rc = nn_model_save(m, &blob, &len, err);
            CHECK(rc == NN_OK && blob, "save: %s", err);
            if (rc != NN_OK) {
              nn_model_free(m);
              continue;
            }
            uint64_t n = 0;
            for (int i = 7; i >= 0; i--) n = n << 8 | blob[i];
            CHECK(n % 8 == 0 && blob[8] == '{', "header length %llu is a multiple of 8",
                  (unsigned long long)n);
            /* the generic reader sees the tensors in model order, contiguous, F32 */
            nn_st_file f;
            rc = nn_st_parse(&f, blob, len, NULL, err);
            CHECK(rc == NN_OK, "saved blob parses: %s", err);
            if (rc == NN_OK && cfg.attention == NN_ATTN_DOT) { /* no parameters: no attn.* */
              int attn_tensors = 0;
              for (int i = 0; i < f.count; i++)
                attn_tensors += strncmp(f.tensors[i].name, "attn.", 5) == 0;
              CHECK(attn_tensors == 0, "a dot-attention model saves %d attn.* tensors, expected 0",
                    attn_tensors);
            }
            if (rc == NN_OK) {
              size_t at = 0;
              int ok = f.count == nn_model_tensor_count(m);
              for (int i = 0; ok && i < f.count; i++) {
                nn_tensor_info info;
                nn_model_tensor(m, i, &info);
                const nn_st_tensor *t = &f.tensors[i];
                ok = strcmp(t->name, info.name) == 0 && t->dtype == NN_DTYPE_F32 &&
                     t->ndim == info.ndim && t->shape[0] == info.shape[0] &&
                     (info.ndim < 2 || t->shape[1] == info.shape[1]) &&
                     t->data == blob + 8 + n + at &&
                     memcmp(t->data, nn_model_params(m) + info.offset, info.size * 4) == 0;
                at += info.size * 4;
              }
              CHECK(ok && 8 + n + at == len, "tensors in model order, contiguous, data as params");
              CHECK(nn_st_meta(&f, "format_version") &&
                        strcmp(nn_st_meta(&f, "format_version"), "1") == 0,
                    "format_version \"1\"");
              char *cj = nn_config_to_json(nn_model_config(m), NULL);
              CHECK(nn_st_meta(&f, "config") && strcmp(nn_st_meta(&f, "config"), cj) == 0,
                    "config JSON");
              free(cj);
              const char *labels = nn_st_meta(&f, "labels");
              CHECK(labels && strncmp(labels, "[\"World\",\"quote\\\"back\\\\slash/\"", 30) == 0,
                    "labels JSON: %s", labels);
              const char *vocab = nn_st_meta(&f, "vocab");
              CHECK(vocab && strncmp(vocab,
                                     "[\"<PAD>\",\"<UNK>\",\"the\",\"caf\xc3\xa9\",\"a\\\"b\\\\c\","
                                     "\"tab\\there\"",
                                     52) == 0,
                    "vocab JSON: %s", vocab);
              nn_st_free(&f);
            }
            nn_model *back = NULL;
            rc = nn_model_load(&back, blob, len, err);
            CHECK(rc == NN_OK, "load %s/%s bi %d fc %d layers %d: %s", nn_cell_name(cfg.cell),
                  nn_attention_name(cfg.attention), bi, fc, layers, err);
            if (rc == NN_OK) {
              int s = same_model(m, back, what, sizeof what);
              CHECK(s, "round trip %s/%s bi %d fc %d layers %d: %s", nn_cell_name(cfg.cell),
                    nn_attention_name(cfg.attention), bi, fc, layers, what);
              same += s;
              /* save again: byte-identical */
              unsigned char *blob2 = NULL;
              size_t len2 = 0;
              rc = nn_model_save(back, &blob2, &len2, err);
              CHECK(rc == NN_OK && len2 == len && memcmp(blob, blob2, len) == 0,
                    "second save identical");
              free(blob2);
              nn_model_free(back);
            }
            free(blob);
            nn_model_free(m);
          }
  printf("round trip: %d of %d model variants identical after load(save(m))\n", same, variants);
  CHECK(variants == 96 && same == variants, "%d/%d", same, variants);
}

/* ------------------------------------------------------------------------------- rebuilding */

/* A BLOB taken apart: tensor entries, metadata as raw JSON values, the data buffer. */
typedef struct entry {
  char name[160];
  char dtype[16];
  int ndim;
  int64_t shape[5];
  uint64_t begin, end;
} entry;
typedef struct spec {
  entry t[96];
  int n;
  char key[8][32];
  char *value[8]; /* raw JSON text of each metadata value */
  int nmeta;
  unsigned char *data;
  size_t data_len;
} spec;

static const char *dtype_name(nn_dtype d) {
  return d == NN_DTYPE_F32   ? "F32"
         : d == NN_DTYPE_F16 ? "F16"
         : d == NN_DTYPE_I32 ? "I32"
         : d == NN_DTYPE_I64 ? "I64"
                             : "F64";
}

static void spec_from_blob(spec *s, const unsigned char *blob, size_t len) {
  memset(s, 0, sizeof *s);
  nn_st_file f;
  char err[NN_ERR_LEN];
  if (nn_st_parse(&f, blob, len, NULL, err) != NN_OK) {
    CHECK(0, "spec_from_blob: %s", err);
    return;
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | blob[i];
  const unsigned char *buffer = blob + 8 + n;
  s->data_len = len - 8 - n;
  s->data = malloc(s->data_len + 64);
  memcpy(s->data, buffer, s->data_len);
  for (int i = 0; i < f.count; i++) {
    entry *e = &s->t[s->n++];
    snprintf(e->name, sizeof e->name, "%s", f.tensors[i].name);
    snprintf(e->dtype, sizeof e->dtype, "%s", dtype_name(f.tensors[i].dtype));
    e->ndim = f.tensors[i].ndim;
    memcpy(e->shape, f.tensors[i].shape, sizeof f.tensors[i].shape);
    e->begin = (uint64_t)(f.tensors[i].data - buffer);
    e->end = e->begin + f.tensors[i].nbytes;
  }
  for (int i = 0; i < f.meta_count; i++) {
    snprintf(s->key[i], sizeof s->key[i], "%s", f.meta_keys[i]);
    nn_strbuf sb;
    nn_strbuf_init(&sb, NULL);
    nn_strbuf_append_json_string(&sb, f.meta_values[i], strlen(f.meta_values[i]));
    s->value[i] = nn_strbuf_take(&sb);
  }
  s->nmeta = f.meta_count;
  nn_st_free(&f);
}

static void spec_free(spec *s) {
  for (int i = 0; i < s->nmeta; i++) free(s->value[i]);
  free(s->data);
}

static entry *spec_find(spec *s, const char *name) {
  for (int i = 0; i < s->n; i++)
    if (strcmp(s->t[i].name, name) == 0) return &s->t[i];
  CHECK(0, "spec has no tensor %s", name);
  return &s->t[0];
}

/* metadata value: raw JSON text, or a string when raw == 0 */
static void spec_set_meta(spec *s, const char *key, const char *value, int raw) {
  int i = 0;
  while (i < s->nmeta && strcmp(s->key[i], key) != 0) i++;
  if (i == s->nmeta) {
    snprintf(s->key[s->nmeta++], sizeof s->key[0], "%s", key);
    s->value[i] = NULL;
  }
  free(s->value[i]);
  s->value[i] = NULL;
  if (!value) { /* remove */
    for (int k = i; k + 1 < s->nmeta; k++) {
      memcpy(s->key[k], s->key[k + 1], sizeof s->key[k]);
      s->value[k] = s->value[k + 1];
    }
    s->value[--s->nmeta] = NULL;
    return;
  }
  nn_strbuf sb;
  nn_strbuf_init(&sb, NULL);
  if (raw) nn_strbuf_puts(&sb, value);
  else nn_strbuf_append_json_string(&sb, value, strlen(value));
  s->value[i] = nn_strbuf_take(&sb);
}

static unsigned char *spec_to_blob(const spec *s, size_t *len) {
  nn_strbuf sb;
  nn_strbuf_init(&sb, NULL);
  nn_strbuf_puts(&sb, "{\"__metadata__\":{");
  for (int i = 0; i < s->nmeta; i++) {
    if (i) nn_strbuf_puts(&sb, ",");
    nn_strbuf_append_json_string(&sb, s->key[i], strlen(s->key[i]));
    nn_strbuf_printf(&sb, ":%s", s->value[i]);
  }
  nn_strbuf_puts(&sb, "}");
  for (int i = 0; i < s->n; i++) {
    const entry *e = &s->t[i];
    nn_strbuf_printf(&sb, ",\"%s\"", e->name); /* raw: tests put escapes in names */
    nn_strbuf_printf(&sb, ":{\"dtype\":\"%s\",\"shape\":[", e->dtype);
    for (int d = 0; d < e->ndim; d++)
      nn_strbuf_printf(&sb, "%s%lld", d ? "," : "", (long long)e->shape[d]);
    nn_strbuf_printf(&sb, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)e->begin,
                     (unsigned long long)e->end);
  }
  nn_strbuf_puts(&sb, "}");
  unsigned char *b = make_blob(sb.data, s->data, s->data_len, len);
  nn_strbuf_free(&sb);
  return b;
}

static void expect_load_error(const char *what, const spec *s, const char *want) {
  size_t len;
  unsigned char *b = spec_to_blob(s, &len);
  char err[NN_ERR_LEN] = "";
  int rc = load_copy(b, len, err);
  if (want) {
    CHECK(rc == NN_ERROR, "%s: rc %d", what, rc);
    CHECK(strcmp(err, want) == 0, "%s:\n  got      %s\n  expected %s", what, err, want);
  } else {
    CHECK(rc == NN_OK, "%s: should load: %s", what, err);
  }
  free(b);
}

static void test_hostile_model_blobs(void) {
  nn_config cfg;
  small_config(&cfg);
  nn_model *m = make_model(&cfg, 3);
  if (!m) return;
  unsigned char *blob = NULL;
  size_t len = 0;
  char err[NN_ERR_LEN] = "", want[NN_ERR_LEN];
  if (nn_model_save(m, &blob, &len, err) != NN_OK) {
    CHECK(0, "save: %s", err);
    nn_model_free(m);
    return;
  }
  nn_tensor_info fc2w, fc2b, emb;
  nn_model_tensor(m, nn_model_tensor_find(m, "fc2.weight"), &fc2w);
  nn_model_tensor(m, nn_model_tensor_find(m, "fc2.bias"), &fc2b);
  nn_model_tensor(m, nn_model_tensor_find(m, "embeddings.weight"), &emb);
  spec s;
  entry *e, keep;

  spec_from_blob(&s, blob, len);
  expect_load_error("rebuilt unchanged", &s, NULL);

  /* tensors against the model */
  e = spec_find(&s, "fc2.bias");
  keep = *e;
  *e = s.t[--s.n]; /* drop it */
  expect_load_error("missing tensor", &s, "weights: tensor \"fc2.bias\" is missing");
  s.t[s.n++] = *e;
  *e = keep;

  e = &s.t[s.n++];
  snprintf(e->name, sizeof e->name, "extra.weight");
  snprintf(e->dtype, sizeof e->dtype, "F32");
  e->ndim = 1, e->shape[0] = 1, e->begin = s.data_len, e->end = s.data_len + 4;
  s.data_len += 4;
  expect_load_error("extra tensor", &s,
                    "weights: unexpected tensor \"extra.weight\" for a rnn model");
  s.n--, s.data_len -= 4;

  e = spec_find(&s, "fc2.bias");
  snprintf(e->dtype, sizeof e->dtype, "I32");
  expect_load_error("wrong dtype", &s,
                    "weights: tensor \"fc2.bias\" has dtype I32, expected F32 (the config's "
                    "\"storage\" is \"float32\")");
  snprintf(e->dtype, sizeof e->dtype, "F16");
  snprintf(want, sizeof want,
           "safetensors: tensor \"fc2.bias\": shape with dtype F16 needs %lld bytes but "
           "data_offsets span %lld",
           (long long)(2 * fc2b.shape[0]), (long long)(4 * fc2b.shape[0]));
  expect_load_error("F16 over the bytes of an F32 tensor", &s, want);
  snprintf(e->dtype, sizeof e->dtype, "F32");

  e = spec_find(&s, "fc2.weight");
  e->shape[0] = fc2w.shape[1], e->shape[1] = fc2w.shape[0];
  snprintf(want, sizeof want,
           "weights: tensor \"fc2.weight\" has shape [%lld, %lld], expected [%lld, %lld]",
           (long long)fc2w.shape[1], (long long)fc2w.shape[0], (long long)fc2w.shape[0],
           (long long)fc2w.shape[1]);
  expect_load_error("wrong shape", &s, want);
  e->ndim = 1, e->shape[0] = fc2w.shape[0] * fc2w.shape[1];
  snprintf(want, sizeof want,
           "weights: tensor \"fc2.weight\" has shape [%lld], expected [%lld, %lld]",
           (long long)(fc2w.shape[0] * fc2w.shape[1]), (long long)fc2w.shape[0],
           (long long)fc2w.shape[1]);
  expect_load_error("wrong rank", &s, want);
  e->ndim = 2, e->shape[0] = fc2w.shape[0], e->shape[1] = fc2w.shape[1];

  /* the generic checks */
  e = spec_find(&s, "fc2.bias");
  keep = *e;
  e->shape[0] += 1;
  snprintf(want, sizeof want,
           "safetensors: tensor \"fc2.bias\": shape with dtype F32 needs %lld bytes but "
           "data_offsets span %lld",
           (long long)(4 * (fc2b.shape[0] + 1)), (long long)(4 * fc2b.shape[0]));
  expect_load_error("shape larger than the bytes", &s, want);
  *e = keep;
  e->begin = spec_find(&s, "fc2.weight")->begin, e->end = e->begin + 4 * (uint64_t)fc2b.size;
  expect_load_error(
      "overlapping offsets", &s,
      "safetensors: tensors \"fc2.bias\" and \"fc2.weight\" overlap in the data buffer");
  *e = keep;
  e->begin += 4, e->end += 4;
  snprintf(want, sizeof want,
           "safetensors: tensor \"fc2.bias\": data_offsets [%llu, %llu] outside the %zu-byte data "
           "buffer",
           (unsigned long long)e->begin, (unsigned long long)e->end, s.data_len);
  expect_load_error("offsets past the buffer", &s, want);
  e->begin = 18446744073709551615ull;
  expect_load_error("offset beyond int64", &s,
                    "safetensors: tensor \"fc2.bias\": \"data_offsets\" must be [begin, end], two "
                    "non-negative integers");
  e->begin = keep.end, e->end = keep.begin;
  snprintf(want, sizeof want,
           "safetensors: tensor \"fc2.bias\": data_offsets [%llu, %llu] outside the %zu-byte data "
           "buffer",
           (unsigned long long)e->begin, (unsigned long long)e->end, s.data_len);
  expect_load_error("begin after end", &s, want);
  *e = keep;
  snprintf(e->dtype, sizeof e->dtype, "BF16");
  expect_load_error("unsupported dtype", &s,
                    "safetensors: tensor \"fc2.bias\": dtype \"BF16\" is not supported (F32, F16, "
                    "I32, I64, F64 are)");
  *e = keep;
  e->ndim = 5;
  for (int d = 0; d < 5; d++) e->shape[d] = 1;
  e->shape[0] = fc2b.shape[0];
  expect_load_error("five dimensions", &s,
                    "safetensors: tensor \"fc2.bias\": 5 dimensions, at most 4 are supported");
  e->ndim = 4;
  e->shape[0] = (int64_t)1 << 62, e->shape[1] = (int64_t)1 << 62, e->shape[2] = 0;
  expect_load_error(
      "shape product overflows", &s,
      "safetensors: tensor \"fc2.bias\": shape with dtype F32 needs more than 2^64 bytes");
  e->shape[0] = -3, e->ndim = 1;
  expect_load_error("negative dimension", &s,
                    "safetensors: tensor \"fc2.bias\": \"shape\" must hold non-negative integers");
  *e = keep;
  s.t[s.n++] = keep; /* the same name twice */
  expect_load_error("duplicate tensor", &s,
                    "safetensors: the header is not valid JSON (invalid JSON at byte 0: duplicate "
                    "key \"fc2.bias\")");
  s.n--;
  snprintf(e->name, sizeof e->name, "fc2.bias\\u0000x");
  expect_load_error("NUL in a name", &s,
                    "safetensors: tensor \"fc2.bias\\x00x\": the name contains a NUL character");
  *e = keep;

  /* metadata */
  spec_set_meta(&s, "format_version", "1", 1);
  expect_load_error(
      "non-string metadata", &s,
      "safetensors: __metadata__ value of \"format_version\" must be a string, got number");
  spec_set_meta(&s, "format_version", "2", 0);
  expect_load_error(
      "newer format", &s,
      "weights were written by a newer attnext (format version 2); this build reads version 1");
  spec_set_meta(&s, "format_version", "0", 0);
  expect_load_error("format 0", &s,
                    "weights: unsupported format_version \"0\"; this build reads version 1");
  spec_set_meta(&s, "format_version", "1.0", 0);
  expect_load_error("format 1.0", &s,
                    "weights: unsupported format_version \"1.0\"; this build reads version 1");
  spec_set_meta(&s, "format_version", NULL, 0);
  expect_load_error("no format", &s,
                    "weights: __metadata__ has no \"format_version\" (not written by attnext?)");
  spec_set_meta(&s, "format_version", "1", 0);
  spec_set_meta(&s, "note", "{\"a\":\"b\"}", 1);
  expect_load_error("object metadata", &s,
                    "safetensors: __metadata__ value of \"note\" must be a string, got object");
  spec_set_meta(&s, "note", "\"x\\u0000y\"", 1);
  expect_load_error("NUL in metadata", &s,
                    "safetensors: __metadata__ entry \"note\" contains a NUL character");
  spec_set_meta(&s, "note", NULL, 0);

  char *config = nn_config_to_json(&cfg, NULL);
  spec_set_meta(&s, "config", "{\"hidden\":\"big\"}", 0);
  expect_load_error(
      "bad config", &s,
      "weights: config: option \"hidden\" must be an integer from 1 to 4096, got \"big\"");
  spec_set_meta(&s, "config", "{\"hidden\":5", 0);
  expect_load_error("config not JSON", &s,
                    "weights: config: options must be a JSON object (invalid JSON at byte 11: "
                    "expected ',' or '}')");
  spec_set_meta(&s, "config", NULL, 0);
  expect_load_error("no config", &s, "weights: __metadata__ has no \"config\"");
  nn_config other = cfg;
  other.hidden = 6;
  char *other_json = nn_config_to_json(&other, NULL);
  spec_set_meta(&s, "config", other_json, 0);
  nn_config sized = other;
  sized.vocab_size = NTOKENS;
  size_t floats = 0;
  for (int i = 0; i < s.n; i++) floats += (size_t)(s.t[i].end - s.t[i].begin) / 4;
  snprintf(want, sizeof want,
           "weights: tensor \"rnn.weight_ih_l0\" has shape [4, 3], expected [6, 3]");
  expect_load_error("config bigger than the tensors", &s, want);
  free(other_json);
  other = cfg;
  other.embed_dim = 2, other.hidden = 5; /* fewer floats in total, other shapes */
  other_json = nn_config_to_json(&other, NULL);
  spec_set_meta(&s, "config", other_json, 0);
  snprintf(want, sizeof want,
           "weights: tensor \"embeddings.weight\" has shape [8, 3], expected [8, 2]");
  expect_load_error("config does not match the tensors", &s, want);
  { /* a huge network in a few bytes of config is refused before anything is allocated */
    free(other_json);
    other = cfg;
    other.cell = NN_CELL_LSTM, other.hidden = 2048, other.layers = 8, other.bidirectional = 1;
    other_json = nn_config_to_json(&other, NULL);
    spec_set_meta(&s, "config", other_json, 0);
    sized = other;
    sized.vocab_size = NTOKENS;
    snprintf(want, sizeof want,
             "weights: the config, 8 tokens and 3 labels need %llu floats, the file holds %zu",
             (unsigned long long)nn_config_param_count(&sized, 3), floats);
    expect_load_error("config of a 2.8 GB network", &s, want);
  }
  free(other_json);
  spec_set_meta(&s, "config", config, 0);
  free(config);
  expect_load_error("config restored", &s, NULL);

  const char *vocab_ok = "[\"<PAD>\",\"<UNK>\",\"the\",\"caf\xc3\xa9\",\"a\\\"b\\\\c\","
                         "\"tab\\there\",\"\xff raw \\u0001\",\"\xf0\x9f\x98\x80\"]";
  spec_set_meta(&s, "vocab", vocab_ok, 0);
  expect_load_error("vocab restated", &s, NULL);
  spec_set_meta(&s, "vocab",
                "[\"<PAD>\",\"<UNK>\",\"the\",\"caf\xc3\xa9\",\"a\\\"b\\\\c\",\"tab\\there\",\"x\","
                "\"y\",\"z\"]",
                0);
  snprintf(want, sizeof want,
           "weights: tensor \"embeddings.weight\" has shape [%lld, %lld], expected [9, %lld]",
           (long long)emb.shape[0], (long long)emb.shape[1], (long long)emb.shape[1]);
  expect_load_error("one token too many", &s, want);
  spec_set_meta(&s, "vocab", "[\"<PAD>\",\"<UNK>\",3]", 0);
  expect_load_error("vocab item not a string", &s,
                    "weights: __metadata__ \"vocab\" item 2 must be a string, got number");
  spec_set_meta(&s, "vocab", "{\"a\":1}", 0);
  expect_load_error("vocab not an array", &s,
                    "weights: __metadata__ \"vocab\" must be a JSON array of strings");
  spec_set_meta(&s, "vocab", "[\"<PAD>\"", 0);
  expect_load_error("vocab not JSON", &s,
                    "weights: __metadata__ \"vocab\" is not a JSON array (invalid JSON at byte 8: "
                    "expected ',' or ']')");
  spec_set_meta(&s, "vocab", NULL, 0);
  expect_load_error("no vocab", &s, "weights: __metadata__ has no \"vocab\"");
  spec_set_meta(&s, "vocab", vocab_ok, 0);

  spec_set_meta(&s, "labels", "[]", 0);
  expect_load_error("no labels", &s, "weights: __metadata__ \"labels\" is empty");
  spec_set_meta(&s, "labels", "[\"a\",\"b\\u0000c\",\"d\"]", 0);
  expect_load_error("NUL in a label", &s, "weights: label 1 contains a NUL character");
  spec_set_meta(&s, "labels", "[\"World\",\"x\",\"World\"]", 0);
  expect_load_error("duplicate label", &s, "weights: __metadata__ \"labels\" has \"World\" twice");
  spec_set_meta(&s, "labels", "[\"a\",\"b\",\"c\",\"d\"]", 0);
  snprintf(want, sizeof want,
           "weights: tensor \"fc2.weight\" has shape [%lld, %lld], expected [4, %lld]",
           (long long)fc2w.shape[0], (long long)fc2w.shape[1], (long long)fc2w.shape[1]);
  expect_load_error("one label too many", &s, want);
  { /* 300,000 labels: refused before the model allocates an fc2 that large (by the limit
     * training has, NN_MAX_CLASSES; once only by the size check: see "3 labels" above) */
    nn_strbuf sb;
    nn_strbuf_init(&sb, NULL);
    nn_strbuf_puts(&sb, "[");
    for (int i = 0; i < 300000; i++) nn_strbuf_puts(&sb, i ? ",\"\"" : "\"\"");
    nn_strbuf_puts(&sb, "]");
    spec_set_meta(&s, "labels", sb.data, 0);
    nn_strbuf_free(&sb);
    expect_load_error("300000 labels", &s,
                      "weights: __metadata__ \"labels\" has 300000 labels, at most 10000");
    nn_strbuf_init(&sb, NULL); /* one more than training makes: refused by the same limit */
    nn_strbuf_puts(&sb, "[");
    for (int i = 0; i < 10001; i++) nn_strbuf_printf(&sb, "%s\"%d\"", i ? "," : "", i);
    nn_strbuf_puts(&sb, "]");
    spec_set_meta(&s, "labels", sb.data, 0);
    nn_strbuf_free(&sb);
    expect_load_error("10001 labels", &s,
                      "weights: __metadata__ \"labels\" has 10001 labels, at most 10000");
  }
  spec_set_meta(&s, "labels",
                "[\"World\",\"quote\\\"back\\\\slash/\",\"line\\nbreak \xe2\x82\xac\"]", 0);
  expect_load_error("labels restated", &s, NULL);
  s.data_len += 4; /* bytes no tensor covers */
  snprintf(want, sizeof want,
           "weights: the tensors cover %zu of the %zu bytes of the data buffer (the rest is not "
           "part of any tensor)",
           s.data_len - 4, s.data_len);
  expect_load_error("a gap after the tensors", &s, want);
  s.data_len -= 4;
  spec_free(&s);

  /* truncated at every length: each must fail */
  int failed = 0;
  for (size_t n = 0; n < len; n++) failed += load_copy(blob, n, err) != NN_OK;
  printf("truncation: %d of %zu truncated lengths refused\n", failed, len);
  CHECK(failed == (int)len, "every truncation refused: %d of %zu", failed, len);

  /* seeded random damage: never a crash; most header damage is refused */
  uint64_t header = 0;
  for (int i = 7; i >= 0; i--) header = header << 8 | blob[i];
  unsigned char *copy = malloc(len);
  int loaded = 0, refused = 0;
  for (int trial = 0; trial < 4000; trial++) {
    memcpy(copy, blob, len);
    int flips = 1 + (int)(rnd() % 4);
    for (int k = 0; k < flips; k++) {
      /* half the damage goes into the length and header, where it matters */
      size_t at = trial % 2 ? (size_t)(rnd() % (8 + header)) : (size_t)(rnd() % len);
      if (trial % 3 == 2) {
        static const char junk[] = "{}[]\",:0123456789-+.eE \\utrfn";
        copy[at] = (unsigned char)junk[rnd() % (sizeof junk - 1)];
      } else {
        copy[at] ^= (unsigned char)(1u << (rnd() % 8));
      }
    }
    if (load_copy(copy, len, err) == NN_OK) loaded++;
    else refused++;
  }
  printf("damage: 4000 damaged blobs, %d loaded, %d refused, no crash\n", loaded, refused);
  CHECK(refused > 1000, "damaged headers are refused: %d", refused);
  free(copy);
  free(blob);
  nn_model_free(m);
}

static void test_hostile_headers(void) {
  unsigned char data[64] = {0};
  char want[NN_ERR_LEN], err[NN_ERR_LEN];
  /* length field */
  unsigned char b[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                         '{',  '}',  ' ',  ' ',  ' ',  ' ',  ' ',  ' '};
  CHECK(parse_copy(b, 16, err) == NN_ERROR &&
            strcmp(err, "safetensors: header length 18446744073709551615 is over the limit of "
                        "100000000 bytes") == 0,
        "huge header length: %s", err);
  memset(b, 0, 8);
  b[0] = 9;
  CHECK(
      parse_copy(b, 16, err) == NN_ERROR &&
          strcmp(err,
                 "safetensors: header length 9 is larger than the 8 bytes after it (truncated?)") ==
              0,
      "header past the end: %s", err);
  b[0] = 0, b[4] = 1; /* 2^32 */
  CHECK(parse_copy(b, 16, err) == NN_ERROR &&
            strcmp(err,
                   "safetensors: header length 4294967296 is over the limit of 100000000 bytes") ==
                0,
        "header length 2^32: %s", err);
  b[4] = 0, b[0] = 1;
  CHECK(parse_copy(b, 16, err) == NN_ERROR &&
            strcmp(err, "safetensors: the header is not a JSON object") == 0,
        "1-byte header: %s", err);
  b[0] = 0;
  CHECK(parse_copy(b, 16, err) == NN_ERROR &&
            strcmp(err, "safetensors: the header is not a JSON object") == 0,
        "empty header: %s", err);
  CHECK(parse_copy(b, 7, err) == NN_ERROR &&
            strcmp(err, "safetensors: 7 bytes is too short (the header length alone is 8)") == 0,
        "7 bytes: %s", err);
  b[0] = 8;
  CHECK(parse_copy(b, 16, err) == NN_OK, "{} with spaces: an empty file parses: %s", err);

  expect_parse_error(
      "not JSON", "{not json}", data, 0,
      "safetensors: the header is not valid JSON (invalid JSON at byte 1: expected a string key)");
  expect_parse_error("array header", "[1,2]", data, 0,
                     "safetensors: the header is not a JSON object");
  expect_parse_error("trailing control byte", "{}\x01", data, 0,
                     "safetensors: the header is not valid JSON (invalid JSON at byte 2: "
                     "unexpected text after the value)");
  expect_parse_error("tensor not an object", "{\"a\":[1]}", data, 0,
                     "safetensors: tensor \"a\": must be an object, got array");
  expect_parse_error("no dtype", "{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", data, 4,
                     "safetensors: tensor \"a\": no \"dtype\"");
  expect_parse_error("no shape", "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", data, 4,
                     "safetensors: tensor \"a\": no \"shape\"");
  expect_parse_error("no offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", data, 4,
                     "safetensors: tensor \"a\": no \"data_offsets\"");
  expect_parse_error(
      "unknown field", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}",
      data, 4,
      "safetensors: tensor \"a\": unknown field \"x\" (expected dtype, shape, data_offsets)");
  /* read as a C string the key would be "dtype", beside the real one */
  expect_parse_error("a field with a NUL",
                     "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],"
                     "\"dtype\\u0000\":\"F16\"}}",
                     data, 4,
                     "safetensors: tensor \"a\": unknown field \"dtype\\x00\" (expected dtype, "
                     "shape, data_offsets)");
  expect_parse_error("dtype not a string",
                     "{\"a\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", data, 4,
                     "safetensors: tensor \"a\": \"dtype\" must be a string");
  expect_parse_error(
      "lower-case dtype", "{\"a\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", data,
      4, "safetensors: tensor \"a\": dtype \"f32\" is not supported (F32, F16, I32, I64, F64 are)");
  expect_parse_error("shape not an array",
                     "{\"a\":{\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]}}", data, 4,
                     "safetensors: tensor \"a\": \"shape\" must be an array");
  expect_parse_error("fractional dimension",
                     "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", data, 4,
                     "safetensors: tensor \"a\": \"shape\" must hold non-negative integers");
  expect_parse_error("one offset", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4]}}",
                     data, 4,
                     "safetensors: tensor \"a\": \"data_offsets\" must be [begin, end], two "
                     "non-negative integers");
  expect_parse_error("string offsets",
                     "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[\"0\",\"4\"]}}",
                     data, 4,
                     "safetensors: tensor \"a\": \"data_offsets\" must be [begin, end], two "
                     "non-negative integers");
  expect_parse_error(
      "I64 size", "{\"a\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,4]}}", data, 4,
      "safetensors: tensor \"a\": shape with dtype I64 needs 8 bytes but data_offsets span 4");
  expect_parse_error("metadata not an object", "{\"__metadata__\":[\"a\"]}", data, 0,
                     "safetensors: __metadata__ must be an object, got array");
  expect_parse_error("metadata null", "{\"__metadata__\":{\"k\":null}}", data, 0,
                     "safetensors: __metadata__ value of \"k\" must be a string, got null");
  expect_parse_error("duplicate metadata", "{\"__metadata__\":{},\"__metadata__\":{}}", data, 0,
                     "safetensors: the header is not valid JSON (invalid JSON at byte 0: duplicate "
                     "key \"__metadata__\")");
  expect_parse_error("overlap across an empty tensor",
                     "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                     "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},"
                     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
                     data, 16, "safetensors: tensors \"a\" and \"b\" overlap in the data buffer");
  char deep[200];
  snprintf(deep, sizeof deep, "{\"a\":%.70s%.70s}",
           "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
           "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]");
  expect_parse_error("70 nested arrays", deep, data, 0,
                     "safetensors: the header is not valid JSON (invalid JSON at byte 68: nested "
                     "deeper than 64 levels)");
  /* a valid generic file with holes and any order is fine */
  size_t len;
  unsigned char *ok =
      make_blob("{\"b\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[24,32]},"
                "\"a\":{\"dtype\":\"F64\",\"shape\":[1,1,1,2],\"data_offsets\":[0,16]},"
                "\"__metadata__\":{}}",
                data, 40, &len);
  nn_st_file f;
  CHECK(nn_st_parse(&f, ok, len, NULL, err) == NN_OK && f.count == 2 && f.meta_count == 0 &&
            nn_st_find(&f, "a")->ndim == 4 && nn_st_find(&f, "b")->data == ok + len - 16,
        "holes and any order: %s", err);
  nn_st_free(&f);
  free(ok);
  (void)want;
}

/* NaN or infinite weights are refused, naming the tensor and the element: such a model would
 * predict one class for everything without any error. */
static void test_non_finite_refused(void) {
  nn_config cfg;
  small_config(&cfg);
  const uint32_t bad[] = {0x7fc00001u, 0x7f800000u, 0xff800000u}; /* NaN, +inf, -inf */
  for (int i = 0; i < 3; i++) {
    nn_model *m = make_model(&cfg, 3);
    if (!m) return;
    int t = nn_model_tensor_find(m, "fc2.bias");
    nn_tensor_info info;
    nn_model_tensor(m, t, &info);
    memcpy(nn_model_params(m) + info.offset + 1, &bad[i], 4);
    unsigned char *blob = NULL;
    size_t len = 0;
    char err[NN_ERR_LEN] = "";
    CHECK(nn_model_save(m, &blob, &len, err) == NN_OK, "save: %s", err);
    nn_model *back = NULL;
    int rc = nn_model_load(&back, blob, len, err);
    CHECK(rc == NN_ERROR && !back, "non-finite weight %08x refused (rc %d)", bad[i], rc);
    CHECK(strstr(err, "\"fc2.bias\"") && strstr(err, "element 1") &&
              strstr(err, i == 0 ? "NaN" : "infinity"),
          "message names tensor, element and value: %s", err);
    nn_model_free(back);
    free(blob);
    nn_model_free(m);
  }
}

/* ------------------------------------------------------------------------------- float16 */

/* "storage": "float16": every tensor F16, 2 bytes a value, the values those of the model rounded
 * to the nearest half; loaded, the model holds exactly the rounded values and saves to the same
 * bytes; a file whose dtype or sizes disagree with its config is refused. */
static void test_float16_blobs(void) {
  nn_config cfg;
  small_config(&cfg);
  cfg.storage = NN_STORAGE_FLOAT16;
  nn_model *m = make_model(&cfg, 3);
  if (!m) return;
  /* make_model's random bits are mostly past 65504 or below 2^-24: give the first values the
   * cases of interest, the rest ordinary weights */
  float *p = nn_model_params(m);
  size_t n = nn_model_param_count(m);
  const float cases[] = {0.1f,  -0.1f,  1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, 65504.0f,
                         1e6f,  -1e30f, 5.9604645e-8f,      2.9802322e-8f,      1e-6f,
                         -0.0f, 0.0f};
  const int ncases = (int)(sizeof cases / sizeof cases[0]);
  for (size_t k = 0; k < n; k++)
    p[k] = k < (size_t)ncases ? cases[k] : (float)((int)(k % 97) - 48) / 37.0f;
  float *want = malloc(n * sizeof *want);
  memcpy(want, p, n * sizeof *want);
  size_t clamped = nn_float16_round(want, n);
  CHECK(clamped == 2, "two values past 65504 clamped, got %zu", clamped);
  CHECK(want[4] == 65504.0f && want[5] == 65504.0f && want[6] == -65504.0f && want[2] == 1.0f &&
            want[3] == 1.0f + 4.0f / 2048 && want[7] == 5.9604645e-8f && want[8] == 0.0f,
        "rounded: %g %g %g %.9g %.9g %g %g", want[4], want[5], want[6], want[2], want[3], want[7],
        want[8]);
  unsigned char *blob = NULL, *blob2 = NULL;
  size_t len = 0, len2 = 0;
  char err[NN_ERR_LEN] = "", what[NN_ERR_LEN] = "";
  int rc = nn_model_save(m, &blob, &len, err);
  CHECK(rc == NN_OK, "float16 save: %s", err);
  if (rc != NN_OK) goto done;
  nn_st_file f;
  rc = nn_st_parse(&f, blob, len, NULL, err);
  CHECK(rc == NN_OK, "float16 blob parses: %s", err);
  if (rc == NN_OK) {
    size_t bytes = 0;
    int all_f16 = 1;
    for (int i = 0; i < f.count; i++) {
      all_f16 &= f.tensors[i].dtype == NN_DTYPE_F16;
      bytes += f.tensors[i].nbytes;
    }
    CHECK(all_f16 && bytes == 2 * n, "every tensor F16, %zu bytes for %zu values", bytes, n);
    nn_st_free(&f);
  }
  nn_model *back = NULL;
  rc = nn_model_load(&back, blob, len, err);
  CHECK(rc == NN_OK, "float16 load: %s", err);
  if (rc == NN_OK) {
    CHECK(nn_model_config(back)->storage == NN_STORAGE_FLOAT16, "loaded storage float16");
    CHECK(memcmp(nn_model_params(back), want, n * sizeof *want) == 0,
          "loaded values are the rounded ones, bit for bit");
    rc = nn_model_save(back, &blob2, &len2, err);
    CHECK(rc == NN_OK && len2 == len && memcmp(blob, blob2, len) == 0,
          "a loaded float16 model saves to the same bytes");
    nn_model_free(back);
  }

  spec s;
  entry *e, keep;
  spec_from_blob(&s, blob, len);
  expect_load_error("float16 rebuilt unchanged", &s, NULL);
  nn_tensor_info fc2b;
  nn_model_tensor(m, nn_model_tensor_find(m, "fc2.bias"), &fc2b);
  e = spec_find(&s, "fc2.bias");
  keep = *e;
  snprintf(e->dtype, sizeof e->dtype, "F32");
  snprintf(what, sizeof what,
           "safetensors: tensor \"fc2.bias\": shape with dtype F32 needs %lld bytes but "
           "data_offsets span %lld",
           (long long)(4 * fc2b.shape[0]), (long long)(2 * fc2b.shape[0]));
  expect_load_error("F32 over the bytes of an F16 tensor", &s, what);
  e->end = e->begin + 2 * (uint64_t)fc2b.size - 2;
  snprintf(e->dtype, sizeof e->dtype, "F16");
  snprintf(what, sizeof what,
           "safetensors: tensor \"fc2.bias\": shape with dtype F16 needs %lld bytes but "
           "data_offsets span %lld",
           (long long)(2 * fc2b.shape[0]), (long long)(2 * fc2b.shape[0] - 2));
  expect_load_error("F16 tensor one value short", &s, what);
  *e = keep;
  s.data_len -= 2; /* the last tensor's last value cut off */
  entry *last = &s.t[0];
  for (int i = 1; i < s.n; i++)
    if (s.t[i].end > last->end) last = &s.t[i];
  snprintf(what, sizeof what,
           "safetensors: tensor \"%s\": data_offsets [%llu, %llu] outside the %zu-byte data buffer",
           last->name, (unsigned long long)last->begin, (unsigned long long)last->end, s.data_len);
  expect_load_error("F16 data buffer truncated", &s, what);
  s.data_len += 2;
  /* a float16 file whose config says float32 (and the reverse: the default file, F32, with a
   * config saying float16 is refused alike, tests/test_hostile_weights.py) */
  int ci = 0;
  while (ci < s.nmeta && strcmp(s.key[ci], "config") != 0) ci++;
  char *config = ci < s.nmeta ? strdup(s.value[ci]) : NULL;
  char *at = config ? strstr(config, "float16") : NULL;
  CHECK(at != NULL, "the float16 config names its storage: %s", config ? config : "(none)");
  if (at) {
    memcpy(at, "float32", 7);
    spec_set_meta(&s, "config", config, 1);
    expect_load_error("F16 tensors, config float32", &s,
                      "weights: tensor \"embeddings.weight\" has dtype F16, expected F32 (the "
                      "config's \"storage\" is \"float32\")");
  }
  free(config);
  /* a half that is infinity or NaN is refused as a float32 one is */
  spec_free(&s);
  spec_from_blob(&s, blob, len); /* fresh copy (the config above changed) */
  e = spec_find(&s, "fc2.bias");
  s.data[e->begin] = 0x00, s.data[e->begin + 1] = 0x7c; /* +infinity */
  expect_load_error(
      "F16 infinity", &s,
      "weights: tensor \"fc2.bias\" holds a non-finite value (infinity) at element 0");
  s.data[e->begin] = 0x01, s.data[e->begin + 1] = 0xfc; /* a negative signalling NaN */
  expect_load_error("F16 NaN", &s,
                    "weights: tensor \"fc2.bias\" holds a non-finite value (NaN) at element 0");
  spec_free(&s);
done:
  free(blob);
  free(blob2);
  free(want);
  nn_model_free(m);
}

int main(void) {
  test_non_finite_refused();
  test_fixture();
  test_hostile_headers();
  test_round_trip();
  test_hostile_model_blobs();
  test_float16_blobs();
  return check_finish("test_safetensors");
}
