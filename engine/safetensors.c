/* safetensors.c -- the weights BLOB: a self-contained safetensors file (ext/SECURITY.md, Weights
 * format; ext/ARCHITECTURE.md: the model format and the store).
 *
 * Layout (huggingface safetensors):
 *   8 bytes   N, little-endian u64
 *   N bytes   JSON header: {"__metadata__": {"k": "v", ...},
 *                           "name": {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}, ...}
 *             padded with spaces so the data starts at a multiple of 8
 *   rest      the byte buffer; [b, e) of each tensor is relative to its start, little-endian
 *
 * nn_st_parse is a generic, validating reader (nothing outside the blob is ever read; tensor
 * data points into the blob). nn_model_save / nn_model_load map a model to and from it, with
 * __metadata__ = {"format_version": "1", "config": <json>, "vocab": <json array>,
 * "labels": <json array>}. Every tensor of a model is F32, or F16 when its config says
 * "storage": "float16" (IEEE binary16, float16.c; expanded to float32 when loaded). */
#include "config.h"
#include "json.h"
#include "model.h"
#include "nn_internal.h"
#include "nn_mem.h"
#include "text.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ST_MAX_HEADER ((uint64_t)100 * 1000 * 1000) /* bytes, as the reference reader */

static const char *const dtype_names[] = {"F32", "I32", "I64", "F64", "F16"}; /* nn_dtype order */
static const size_t dtype_sizes[] = {4, 4, 8, 8, 2};
#define DTYPE_COUNT ((int)(sizeof dtype_names / sizeof dtype_names[0]))

/* The dtype of a model's tensors in its file, and the bytes of one of its floats there. */
static nn_dtype storage_dtype(const nn_config *cfg) {
  return cfg->storage == NN_STORAGE_FLOAT16 ? NN_DTYPE_F16 : NN_DTYPE_F32;
}

static int host_is_little_endian(void) {
  const uint32_t one = 1;
  unsigned char b;
  memcpy(&b, &one, 1);
  return b == 1;
}

static uint64_t read_le64(const unsigned char *p) {
  uint64_t x = 0;
  for (int i = 7; i >= 0; i--) x = (x << 8) | p[i];
  return x;
}

/* ------------------------------------------------------------------------------- reader */

void nn_st_free(nn_st_file *file) {
  if (!file) return;
  const nn_allocator *mem = file->mem;
  for (int i = 0; file->tensors && i < file->count; i++) nn_mem_free(mem, file->tensors[i].name);
  for (int i = 0; i < file->meta_count; i++) {
    nn_mem_free(mem, file->meta_keys[i]);
    nn_mem_free(mem, file->meta_values[i]);
  }
  nn_mem_free(mem, file->tensors);
  nn_mem_free(mem, file->meta_keys);
  nn_mem_free(mem, file->meta_values);
  memset(file, 0, sizeof *file);
}

static int st_error(char *err, const char *quoted_name, const char *what) {
  snprintf(err, NN_ERR_LEN, "safetensors: tensor %s: %s", quoted_name, what);
  return NN_ERROR;
}

/* A JSON value that must be a non-negative integer. */
static int st_uint(const nn_json *v, uint64_t *out) {
  if (!v || v->type != NN_JSON_NUMBER || !v->is_integer || v->integer < 0) return 0;
  *out = (uint64_t)v->integer;
  return 1;
}

static int st_parse_metadata(nn_st_file *f, const nn_json *meta, char *err) {
  char q[128];
  if (meta->type != NN_JSON_OBJECT) {
    snprintf(err, NN_ERR_LEN, "safetensors: __metadata__ must be an object, got %s",
             nn_json_type_name(meta->type));
    return NN_ERROR;
  }
  if (meta->count > (size_t)INT_MAX / 2) {
    snprintf(err, NN_ERR_LEN, "safetensors: too many __metadata__ entries");
    return NN_ERROR;
  }
  size_t n = meta->count ? meta->count : 1;
  f->meta_keys = nn_mem_calloc(f->mem, n, sizeof(char *));
  f->meta_values = nn_mem_calloc(f->mem, n, sizeof(char *));
  if (!f->meta_keys || !f->meta_values) goto nomem;
  for (size_t i = 0; i < meta->count; i++) {
    const nn_json *m = &meta->items[i];
    nn_json_quote_for_message(q, sizeof q, m->key, m->key_len);
    if (m->type != NN_JSON_STRING) {
      snprintf(err, NN_ERR_LEN, "safetensors: __metadata__ value of %s must be a string, got %s", q,
               nn_json_type_name(m->type));
      return NN_ERROR;
    }
    if (memchr(m->key, 0, m->key_len) || memchr(m->str, 0, m->str_len)) {
      snprintf(err, NN_ERR_LEN, "safetensors: __metadata__ entry %s contains a NUL character", q);
      return NN_ERROR;
    }
    f->meta_keys[i] = nn_mem_strndup(f->mem, m->key, m->key_len);
    f->meta_values[i] = nn_mem_strndup(f->mem, m->str, m->str_len);
    f->meta_count = (int)i + 1;
    if (!f->meta_keys[i] || !f->meta_values[i]) goto nomem;
  }
  return NN_OK;
nomem:
  snprintf(err, NN_ERR_LEN, "safetensors: out of memory");
  return NN_NOMEM;
}

/* One tensor entry: {"dtype": .., "shape": [..], "data_offsets": [b, e]} and nothing else. */
static int st_parse_tensor(nn_st_tensor *t, const nn_json *e, const unsigned char *buffer,
                           uint64_t buffer_len, const nn_allocator *mem, char *err) {
  char q[160], what[256];
  nn_json_quote_for_message(q, sizeof q, e->key, e->key_len);
  if (memchr(e->key, 0, e->key_len)) return st_error(err, q, "the name contains a NUL character");
  if (e->type != NN_JSON_OBJECT) {
    snprintf(what, sizeof what, "must be an object, got %s", nn_json_type_name(e->type));
    return st_error(err, q, what);
  }
  for (size_t i = 0; i < e->count; i++) {
    const nn_json *m = &e->items[i];
    if (!nn_json_key_is(m, "dtype") && !nn_json_key_is(m, "shape") &&
        !nn_json_key_is(m, "data_offsets")) {
      char k[96];
      nn_json_quote_for_message(k, sizeof k, m->key, m->key_len);
      snprintf(what, sizeof what, "unknown field %s (expected dtype, shape, data_offsets)", k);
      return st_error(err, q, what);
    }
  }
  const nn_json *dtype = nn_json_get(e, "dtype"), *shape = nn_json_get(e, "shape"),
                *offsets = nn_json_get(e, "data_offsets");
  if (!dtype || !shape || !offsets)
    return st_error(err, q,
                    !dtype   ? "no \"dtype\""
                    : !shape ? "no \"shape\""
                             : "no \"data_offsets\"");
  if (dtype->type != NN_JSON_STRING) return st_error(err, q, "\"dtype\" must be a string");
  int dt = -1;
  for (int k = 0; k < DTYPE_COUNT; k++)
    if (dtype->str_len == 3 && memcmp(dtype->str, dtype_names[k], 3) == 0) dt = k;
  if (dt < 0) {
    char d[64];
    nn_json_quote_for_message(d, sizeof d, dtype->str, dtype->str_len);
    snprintf(what, sizeof what, "dtype %s is not supported (F32, F16, I32, I64, F64 are)", d);
    return st_error(err, q, what);
  }
  if (shape->type != NN_JSON_ARRAY) return st_error(err, q, "\"shape\" must be an array");
  if (shape->count > 4) {
    snprintf(what, sizeof what, "%zu dimensions, at most 4 are supported", shape->count);
    return st_error(err, q, what);
  }
  uint64_t nbytes = dtype_sizes[dt];
  int overflow = 0;
  t->ndim = (int)shape->count;
  for (size_t i = 0; i < shape->count; i++) {
    uint64_t d;
    if (!st_uint(&shape->items[i], &d))
      return st_error(err, q, "\"shape\" must hold non-negative integers");
    t->shape[i] = (int64_t)d;
    if (d && nbytes > UINT64_MAX / d) overflow = 1;
    else nbytes *= d;
  }
  uint64_t begin, end;
  if (offsets->type != NN_JSON_ARRAY || offsets->count != 2 ||
      !st_uint(&offsets->items[0], &begin) || !st_uint(&offsets->items[1], &end))
    return st_error(err, q, "\"data_offsets\" must be [begin, end], two non-negative integers");
  if (begin > end || end > buffer_len) {
    snprintf(what, sizeof what, "data_offsets [%llu, %llu] outside the %llu-byte data buffer",
             (unsigned long long)begin, (unsigned long long)end, (unsigned long long)buffer_len);
    return st_error(err, q, what);
  }
  if (overflow) {
    snprintf(what, sizeof what, "shape with dtype %s needs more than 2^64 bytes", dtype_names[dt]);
    return st_error(err, q, what);
  }
  if (nbytes != end - begin) {
    snprintf(what, sizeof what, "shape with dtype %s needs %llu bytes but data_offsets span %llu",
             dtype_names[dt], (unsigned long long)nbytes, (unsigned long long)(end - begin));
    return st_error(err, q, what);
  }
  t->dtype = (nn_dtype)dt;
  t->data = buffer + begin;
  t->nbytes = (size_t)nbytes;
  t->name = nn_mem_strndup(mem, e->key, e->key_len);
  if (!t->name) {
    snprintf(err, NN_ERR_LEN, "safetensors: out of memory");
    return NN_NOMEM;
  }
  return NN_OK;
}

static int st_cmp_begin(const void *a, const void *b) {
  const nn_st_tensor *x = *(const nn_st_tensor *const *)a, *y = *(const nn_st_tensor *const *)b;
  if (x->data != y->data) return x->data < y->data ? -1 : 1;
  return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

int nn_st_parse(nn_st_file *out, const unsigned char *blob, size_t len, const nn_allocator *mem,
                char *err) {
  memset(out, 0, sizeof *out);
  out->mem = mem;
  if (!blob || len < 8) {
    snprintf(err, NN_ERR_LEN, "safetensors: %zu bytes is too short (the header length alone is 8)",
             blob ? len : (size_t)0);
    return NN_ERROR;
  }
  uint64_t n = read_le64(blob);
  if (n > ST_MAX_HEADER) {
    snprintf(err, NN_ERR_LEN, "safetensors: header length %llu is over the limit of %llu bytes",
             (unsigned long long)n, (unsigned long long)ST_MAX_HEADER);
    return NN_ERROR;
  }
  if (n > len - 8) {
    snprintf(err, NN_ERR_LEN,
             "safetensors: header length %llu is larger than the %zu bytes after it (truncated?)",
             (unsigned long long)n, len - 8);
    return NN_ERROR;
  }
  const char *header = (const char *)blob + 8;
  if (n < 2 || header[0] != '{') {
    snprintf(err, NN_ERR_LEN, "safetensors: the header is not a JSON object");
    return NN_ERROR;
  }
  const unsigned char *buffer = blob + 8 + n;
  uint64_t buffer_len = len - 8 - n;
  nn_json *doc = NULL;
  char jerr[NN_ERR_LEN];
  int rc = nn_json_parse(&doc, header, (size_t)n, mem, jerr);
  if (rc != NN_OK) {
    snprintf(err, NN_ERR_LEN, "safetensors: the header is not valid JSON (%.400s)", jerr);
    return rc;
  }
  nn_st_tensor **sorted = NULL;
  if (doc->type != NN_JSON_OBJECT) {
    snprintf(err, NN_ERR_LEN, "safetensors: the header is not a JSON object");
    rc = NN_ERROR;
    goto done;
  }
  if (doc->count > (size_t)INT_MAX / 2) {
    snprintf(err, NN_ERR_LEN, "safetensors: too many tensors");
    rc = NN_ERROR;
    goto done;
  }
  out->tensors = nn_mem_calloc(mem, doc->count ? doc->count : 1, sizeof *out->tensors);
  if (!out->tensors) goto nomem;
  for (size_t i = 0; i < doc->count; i++) {
    const nn_json *e = &doc->items[i];
    if (strcmp(e->key, "__metadata__") == 0 && e->key_len == 12) {
      rc = st_parse_metadata(out, e, err);
    } else {
      rc = st_parse_tensor(&out->tensors[out->count], e, buffer, buffer_len, mem, err);
      if (rc == NN_OK) out->count++;
    }
    if (rc != NN_OK) goto done;
  }
  /* no two tensors share a byte: sort by begin and compare neighbours */
  if (out->count > 1) {
    sorted = nn_mem_alloc(mem, (size_t)out->count * sizeof *sorted);
    if (!sorted) goto nomem;
    for (int i = 0; i < out->count; i++) sorted[i] = &out->tensors[i];
    qsort(sorted, (size_t)out->count, sizeof *sorted, st_cmp_begin);
    const nn_st_tensor *last = NULL; /* the non-empty tensor reaching furthest so far */
    for (int i = 0; i < out->count; i++) {
      const nn_st_tensor *b = sorted[i];
      if (!b->nbytes) continue;
      if (last && last->data + last->nbytes > b->data) {
        char qa[128], qb[128];
        nn_json_quote_for_message(qa, sizeof qa, last->name, strlen(last->name));
        nn_json_quote_for_message(qb, sizeof qb, b->name, strlen(b->name));
        snprintf(err, NN_ERR_LEN, "safetensors: tensors %s and %s overlap in the data buffer", qa,
                 qb);
        rc = NN_ERROR;
        goto done;
      }
      if (!last || b->data + b->nbytes > last->data + last->nbytes) last = b;
    }
  }
  rc = NN_OK;
done:
  nn_mem_free(mem, sorted);
  nn_json_free(doc);
  if (rc != NN_OK) nn_st_free(out);
  return rc;
nomem:
  snprintf(err, NN_ERR_LEN, "safetensors: out of memory");
  rc = NN_NOMEM;
  goto done;
}

const nn_st_tensor *nn_st_find(const nn_st_file *file, const char *name) {
  for (int i = 0; i < file->count; i++)
    if (strcmp(file->tensors[i].name, name) == 0) return &file->tensors[i];
  return NULL;
}

const char *nn_st_meta(const nn_st_file *file, const char *key) {
  for (int i = 0; i < file->meta_count; i++)
    if (strcmp(file->meta_keys[i], key) == 0) return file->meta_values[i];
  return NULL;
}

/* ------------------------------------------------------------------------------- save */

static void append_shape(nn_strbuf *sb, const int64_t *shape, int ndim) {
  nn_strbuf_puts(sb, "[");
  for (int d = 0; d < ndim; d++) nn_strbuf_printf(sb, "%s%lld", d ? "," : "", (long long)shape[d]);
  nn_strbuf_puts(sb, "]");
}

int nn_model_save(const nn_model *model, unsigned char **out, size_t *out_len, char *err) {
  *out = NULL;
  *out_len = 0;
  const nn_vocab *vocab = nn_model_vocab(model);
  int ntensors = nn_model_tensor_count(model), C = nn_model_num_classes(model);
  const float *params = nn_model_weights(model);
  const nn_allocator *mem = nn_vocab_allocator(vocab); /* the model's */
  nn_strbuf list, header;
  nn_strbuf_init(&list, mem);
  nn_strbuf_init(&header, mem);
  char *config = nn_config_to_json(nn_model_config(model), mem);
  int rc = NN_NOMEM;
  if (!config) goto done;

  /* __metadata__ */
  nn_strbuf_printf(&header,
                   "{\"__metadata__\":{\"format_version\":\"%d\",\"config\":", NN_FORMAT_VERSION);
  nn_strbuf_append_json_string(&header, config, strlen(config));
  nn_strbuf_puts(&list, "[");
  for (int id = 0; id < nn_vocab_count(vocab); id++) {
    int len = 0;
    const char *tok = nn_vocab_token(vocab, id, &len);
    if (id) nn_strbuf_puts(&list, ",");
    nn_strbuf_append_json_string(&list, tok ? tok : "", tok ? (size_t)len : 0);
  }
  nn_strbuf_puts(&list, "]");
  if (list.oom) goto done;
  nn_strbuf_puts(&header, ",\"vocab\":");
  nn_strbuf_append_json_string(&header, list.data, list.len);
  list.len = 0;
  nn_strbuf_puts(&list, "[");
  for (int c = 0; c < C; c++) {
    const char *label = nn_model_label(model, c);
    if (c) nn_strbuf_puts(&list, ",");
    nn_strbuf_append_json_string(&list, label ? label : "", label ? strlen(label) : 0);
  }
  nn_strbuf_puts(&list, "]");
  if (list.oom) goto done;
  nn_strbuf_puts(&header, ",\"labels\":");
  nn_strbuf_append_json_string(&header, list.data, list.len);
  nn_strbuf_puts(&header, "}");

  /* tensors, data in tensor order */
  nn_dtype dtype = storage_dtype(nn_model_config(model));
  uint64_t width = dtype_sizes[dtype], offset = 0;
  for (int i = 0; i < ntensors; i++) {
    nn_tensor_info info;
    if (nn_model_tensor(model, i, &info) != NN_OK) {
      snprintf(err, NN_ERR_LEN, "nn_model_save: tensor %d of %d is missing", i, ntensors);
      rc = NN_ERROR;
      goto done;
    }
    nn_strbuf_puts(&header, ",");
    nn_strbuf_append_json_string(&header, info.name, strlen(info.name));
    nn_strbuf_printf(&header, ":{\"dtype\":\"%s\",\"shape\":", dtype_names[dtype]);
    append_shape(&header, info.shape, info.ndim);
    nn_strbuf_printf(&header, ",\"data_offsets\":[%llu,%llu]}", (unsigned long long)offset,
                     (unsigned long long)(offset + width * (uint64_t)info.size));
    offset += width * (uint64_t)info.size;
  }
  nn_strbuf_puts(&header, "}");
  while (header.len % 8 && !header.oom) nn_strbuf_puts(&header, " "); /* oom: appends stop */
  if (header.oom) goto done;
  if (offset > SIZE_MAX - 8 - header.len) goto done;

  size_t total = 8 + header.len + (size_t)offset;
  unsigned char *blob = nn_mem_alloc(mem, total);
  if (!blob) goto done;
  uint64_t n = header.len;
  for (int b = 0; b < 8; b++) blob[b] = (unsigned char)(n >> (8 * b));
  memcpy(blob + 8, header.data, header.len);
  unsigned char *data = blob + 8 + header.len;
  int little = host_is_little_endian();
  for (int i = 0; i < ntensors; i++) {
    nn_tensor_info info;
    nn_model_tensor(model, i, &info);
    const float *src = params + info.offset;
    if (dtype == NN_DTYPE_F16) { /* rounded to nearest even; the trainer rounded them already */
      for (size_t k = 0; k < info.size; k++) {
        float x = src[k];
        if (x > NN_FLOAT16_MAX && x <= FLT_MAX) x = NN_FLOAT16_MAX; /* as nn_float16_round */
        else if (x < -NN_FLOAT16_MAX && x >= -FLT_MAX) x = -NN_FLOAT16_MAX;
        uint16_t h = nn_float16_from_float(x);
        data[2 * k] = (unsigned char)h;
        data[2 * k + 1] = (unsigned char)(h >> 8);
      }
      data += info.size * 2;
      continue;
    }
    if (little) {
      memcpy(data, src, info.size * 4);
    } else {
      for (size_t k = 0; k < info.size; k++) {
        uint32_t bits;
        memcpy(&bits, &src[k], 4);
        for (int b = 0; b < 4; b++) data[4 * k + (size_t)b] = (unsigned char)(bits >> (8 * b));
      }
    }
    data += info.size * 4;
  }
  *out = blob;
  *out_len = total;
  rc = NN_OK;
done:
  if (rc == NN_NOMEM) snprintf(err, NN_ERR_LEN, "nn_model_save: out of memory");
  nn_mem_free(mem, config);
  nn_strbuf_free(&list);
  nn_strbuf_free(&header);
  return rc;
}

/* ------------------------------------------------------------------------------- load */

/* Metadata "key" holding a JSON array of strings; *doc owns the strings. */
static int load_string_list(nn_json **doc, const nn_st_file *f, const char *key, char *err) {
  const char *text = nn_st_meta(f, key);
  *doc = NULL;
  if (!text) {
    snprintf(err, NN_ERR_LEN, "weights: __metadata__ has no \"%s\"", key);
    return NN_ERROR;
  }
  char jerr[NN_ERR_LEN];
  int rc = nn_json_parse(doc, text, strlen(text), f->mem, jerr);
  if (rc != NN_OK) {
    snprintf(err, NN_ERR_LEN, "weights: __metadata__ \"%s\" is not a JSON array (%.400s)", key,
             jerr);
    return rc;
  }
  if ((*doc)->type != NN_JSON_ARRAY) {
    snprintf(err, NN_ERR_LEN, "weights: __metadata__ \"%s\" must be a JSON array of strings", key);
    return NN_ERROR;
  }
  if ((*doc)->count > (size_t)INT_MAX) {
    snprintf(err, NN_ERR_LEN, "weights: __metadata__ \"%s\" has too many entries", key);
    return NN_ERROR;
  }
  for (size_t i = 0; i < (*doc)->count; i++) {
    const nn_json *s = &(*doc)->items[i];
    if (s->type != NN_JSON_STRING || s->str_len > (size_t)INT_MAX) {
      snprintf(err, NN_ERR_LEN, "weights: __metadata__ \"%s\" item %zu must be a string, got %s",
               key, i, nn_json_type_name(s->type));
      return NN_ERROR;
    }
  }
  return NN_OK;
}

static void shape_text(char *out, size_t n, const int64_t *shape, int ndim) {
  size_t o = 0;
  o += (size_t)snprintf(out + o, n - o, "[");
  for (int d = 0; d < ndim && o < n; d++)
    o += (size_t)snprintf(out + o, n - o, "%s%lld", d ? ", " : "", (long long)shape[d]);
  if (o < n) snprintf(out + o, n - o, "]");
}

static int load_format_version(const nn_st_file *f, char *err) {
  const char *v = nn_st_meta(f, "format_version");
  if (!v) {
    snprintf(err, NN_ERR_LEN,
             "weights: __metadata__ has no \"format_version\" (not written by attnext?)");
    return NN_ERROR;
  }
  size_t n = strlen(v);
  long version = 0;
  int ok = n >= 1 && n <= 9;
  for (size_t i = 0; ok && i < n; i++) {
    if (v[i] < '0' || v[i] > '9') ok = 0;
    else version = version * 10 + (v[i] - '0');
  }
  if (ok && version > NN_FORMAT_VERSION) {
    snprintf(
        err, NN_ERR_LEN,
        "weights were written by a newer attnext (format version %ld); this build reads version %d",
        version, NN_FORMAT_VERSION);
    return NN_ERROR;
  }
  if (!ok || version != NN_FORMAT_VERSION) {
    char q[64];
    nn_json_quote_for_message(q, sizeof q, v, n);
    snprintf(err, NN_ERR_LEN, "weights: unsupported format_version %s; this build reads version %d",
             q, NN_FORMAT_VERSION);
    return NN_ERROR;
  }
  return NN_OK;
}

static int st_cmp_label(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The loader's one error tail: err from a format, the status back. */
#if defined(__MINGW32__) /* its snprintf is mingw's (C99's formats), not the C runtime's */
static int load_fail(char *err, int status, const char *fmt, ...)
    __attribute__((format(gnu_printf, 3, 4)));
#else
static int load_fail(char *err, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#endif
static int load_fail(char *err, int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, NN_ERR_LEN, fmt, ap);
  va_end(ap);
  return status;
}
/* in nn_model_load_ex and its helpers: set rc, fill err, leave through `done` */
#define LOAD_FAIL(status, ...)                                                                     \
  do {                                                                                             \
    rc = load_fail(err, (status), __VA_ARGS__);                                                    \
    goto done;                                                                                     \
  } while (0)
#define LOAD_STOP_CHECK()                                                                          \
  do {                                                                                             \
    if (stop && stop(stop_ctx)) LOAD_FAIL(NN_INTERRUPTED, "interrupted");                          \
  } while (0)

/* labels[0..C) from the "labels" array: no NUL inside, all distinct. */
static int load_labels(const char **labels, const nn_json *doc, int C, const nn_allocator *mem,
                       char *err) {
  int rc = NN_OK;
  const char **sorted = NULL;
  for (int c = 0; c < C; c++) {
    const nn_json *s = &doc->items[c];
    if (memchr(s->str, 0, s->str_len))
      LOAD_FAIL(NN_ERROR, "weights: label %d contains a NUL character", c);
    labels[c] = s->str;
  }
  if (C < 2) goto done;
  sorted =
      nn_mem_alloc(mem, (size_t)C * sizeof *sorted); /* distinct: sort a copy, compare neighbours */
  if (!sorted) LOAD_FAIL(NN_NOMEM, "weights: out of memory");
  memcpy(sorted, labels, (size_t)C * sizeof *sorted);
  qsort(sorted, (size_t)C, sizeof *sorted, st_cmp_label);
  for (int c = 1; c < C; c++)
    if (strcmp(sorted[c - 1], sorted[c]) == 0) {
      char q[128];
      nn_json_quote_for_message(q, sizeof q, sorted[c], strlen(sorted[c]));
      LOAD_FAIL(NN_ERROR, "weights: __metadata__ \"labels\" has %s twice", q);
    }
done:
  nn_mem_free(mem, (void *)sorted);
  return rc;
}

/* The model's tensor `info` from the file's tensor t: the dtype of the config's "storage" (F32,
 * or F16 expanded to float32), its exact shape, copied into dst (little-endian in the file). */
static int load_tensor(float *dst, const nn_st_tensor *t, const nn_tensor_info *info, nn_dtype want,
                       char *err) {
  int rc = NN_OK;
  if (!t) LOAD_FAIL(NN_ERROR, "weights: tensor \"%s\" is missing", info->name);
  if (t->dtype != want)
    LOAD_FAIL(NN_ERROR,
              "weights: tensor \"%s\" has dtype %s, expected %s (the config's "
              "\"storage\" is \"%s\")",
              info->name, dtype_names[t->dtype], dtype_names[want],
              want == NN_DTYPE_F16 ? "float16" : "float32");
  int same = t->ndim == info->ndim;
  for (int d = 0; same && d < t->ndim; d++) same = t->shape[d] == info->shape[d];
  if (!same) {
    char got[96], want[96];
    shape_text(got, sizeof got, t->shape, t->ndim);
    shape_text(want, sizeof want, info->shape, info->ndim);
    LOAD_FAIL(NN_ERROR, "weights: tensor \"%s\" has shape %s, expected %s", info->name, got, want);
  }
  size_t width = dtype_sizes[want];
  if (t->nbytes != info->size * width) /* shape equal, so only if info is inconsistent */
    LOAD_FAIL(NN_ERROR, "weights: tensor \"%s\" has %zu bytes, expected %zu", info->name, t->nbytes,
              info->size * width);
  if (want == NN_DTYPE_F16) {
    for (size_t k = 0; k < info->size; k++)
      dst[k] = nn_float16_to_float((uint16_t)(t->data[2 * k] | t->data[2 * k + 1] << 8));
  } else if (host_is_little_endian()) {
    memcpy(dst, t->data, t->nbytes);
  } else {
    for (size_t k = 0; k < info->size; k++) {
      const unsigned char *p = t->data + 4 * k;
      uint32_t bits =
          (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
      memcpy(&dst[k], &bits, 4);
    }
  }
done:
  return rc;
}

/* Every tensor of the model from the file, exactly once, F32 with its exact shape, finite;
 * nothing else, and the tensors cover the data buffer (buffer_len bytes) exactly. */
static int load_weights(nn_model *model, const nn_st_file *f, uint64_t buffer_len,
                        nn_interrupt_fn stop, void *stop_ctx, char *err) {
  int rc = NN_OK;
  int ntensors = nn_model_tensor_count(model);
  for (int i = 0; i < f->count; i++) {
    if (nn_model_tensor_find(model, f->tensors[i].name) < 0) {
      char q[160];
      nn_json_quote_for_message(q, sizeof q, f->tensors[i].name, strlen(f->tensors[i].name));
      LOAD_FAIL(NN_ERROR, "weights: unexpected tensor %s for a %s model", q,
                nn_cell_name(nn_model_config(model)->cell));
    }
  }
  float *params = nn_model_params(model);
  nn_dtype want = storage_dtype(nn_model_config(model));
  for (int i = 0; i < ntensors; i++) {
    nn_tensor_info info;
    if (nn_model_tensor(model, i, &info) != NN_OK)
      LOAD_FAIL(NN_ERROR, "weights: model tensor %d of %d is missing", i, ntensors);
    if ((rc = load_tensor(params + info.offset, nn_st_find(f, info.name), &info, want, err)) !=
        NN_OK)
      goto done;
    LOAD_STOP_CHECK();
  }
  /* A model file's tensors cover its data buffer exactly (no holes, nothing after them): the
   * tensors do not overlap (nn_st_parse), so their sizes must add up to the buffer's. */
  uint64_t covered = 0;
  for (int i = 0; i < f->count; i++) covered += f->tensors[i].nbytes;
  if (covered != buffer_len)
    LOAD_FAIL(NN_ERROR,
              "weights: the tensors cover %llu of the %llu bytes of the data buffer (the rest "
              "is not part of any tensor)",
              (unsigned long long)covered, (unsigned long long)buffer_len);
  if (f->count != ntensors) /* only reachable with duplicate model names; be safe */
    LOAD_FAIL(NN_ERROR, "weights: %d tensors, the model has %d", f->count, ntensors);
  /* NaN or infinite weights would make every prediction silently the same class */
  for (int i = 0; i < ntensors; i++) {
    nn_tensor_info info;
    nn_model_tensor(model, i, &info);
    for (size_t k = 0; k < info.size; k++)
      if (!isfinite(params[info.offset + k]))
        LOAD_FAIL(NN_ERROR, "weights: tensor \"%s\" holds a non-finite value (%s) at element %zu",
                  info.name, isnan(params[info.offset + k]) ? "NaN" : "infinity", k);
  }
done:
  return rc;
}

int nn_model_load(nn_model **out, const unsigned char *blob, size_t len, char *err) {
  return nn_model_load_ex(out, blob, len, NULL, NULL, NULL, err);
}

int nn_model_load_ex(nn_model **out, const unsigned char *blob, size_t len, nn_interrupt_fn stop,
                     void *stop_ctx, const nn_allocator *mem, char *err) {
  *out = NULL;
  nn_st_file f;
  nn_json *vocab_doc = NULL, *labels_doc = NULL;
  const char **tokens = NULL, **labels = NULL;
  int *lens = NULL;
  nn_vocab *vocab = NULL;
  nn_model *model = NULL;
  char sub[NN_ERR_LEN];
  if (stop && stop(stop_ctx)) return load_fail(err, NN_INTERRUPTED, "interrupted");
  int rc = nn_st_parse(&f, blob, len, mem, err);
  if (rc != NN_OK) return rc;

  if ((rc = load_format_version(&f, err)) != NN_OK) goto done;
  nn_config cfg;
  nn_config_lesson(&cfg); /* a key the file leaves out has the lesson's value (nn.h) */
  const char *config = nn_st_meta(&f, "config");
  if (!config) LOAD_FAIL(NN_ERROR, "weights: __metadata__ has no \"config\"");
  if ((rc = nn_config_parse_json(&cfg, config, mem, sub)) != NN_OK ||
      (rc = nn_config_validate(&cfg, sub)) != NN_OK)
    LOAD_FAIL(rc, "weights: config: %.480s", sub);
  /* a model saved before label_smoothing existed trained without it, whatever its recipe
   * says now (a warm start from it keeps its recipe) */
  if (!strstr(config, "\"label_smoothing\"")) cfg.label_smoothing = 0.0f;

  LOAD_STOP_CHECK();
  if ((rc = load_string_list(&vocab_doc, &f, "vocab", err)) != NN_OK) goto done;
  if ((rc = load_string_list(&labels_doc, &f, "labels", err)) != NN_OK) goto done;
  int V = (int)vocab_doc->count, C = (int)labels_doc->count;
  if (C < 1) LOAD_FAIL(NN_ERROR, "weights: __metadata__ \"labels\" is empty");
  /* the limits of training (config.h): a file cannot ask for more than attn_train makes */
  if (C > NN_MAX_CLASSES)
    LOAD_FAIL(NN_ERROR, "weights: __metadata__ \"labels\" has %d labels, at most %d", C,
              NN_MAX_CLASSES);
  if (V > cfg.vocab_size)
    LOAD_FAIL(NN_ERROR,
              "weights: __metadata__ \"vocab\" has %d tokens, more than the config's "
              "vocab_size %d",
              V, cfg.vocab_size);
  /* Every parameter of the model must be in the file, so a file far smaller than the network
   * its config, vocabulary and labels describe is refused before nn_model_create allocates it:
   * a few bytes of hostile metadata cannot make the load allocate gigabytes (at most twice the
   * file's floats plus 4 MB). Small mismatches are left to the per-tensor checks below, whose
   * messages name the tensor. */
  nn_config sized = cfg;
  sized.vocab_size = V;
  uint64_t need = nn_config_param_count(&sized, (uint64_t)C), have = 0;
  for (int i = 0; i < f.count; i++) have += f.tensors[i].nbytes / dtype_sizes[f.tensors[i].dtype];
  if (need > 2 * have + ((uint64_t)1 << 20))
    LOAD_FAIL(NN_ERROR,
              "weights: the config, %d tokens and %d labels need %llu floats, the file holds %llu",
              V, C, (unsigned long long)need, (unsigned long long)have);
  tokens = nn_mem_alloc(mem, (size_t)(V ? V : 1) * sizeof *tokens);
  lens = nn_mem_alloc(mem, (size_t)(V ? V : 1) * sizeof *lens);
  labels = nn_mem_alloc(mem, (size_t)C * sizeof *labels);
  if (!tokens || !lens || !labels) LOAD_FAIL(NN_NOMEM, "weights: out of memory");
  for (int i = 0; i < V; i++) {
    tokens[i] = vocab_doc->items[i].str;
    lens[i] = (int)vocab_doc->items[i].str_len;
  }
  if ((rc = load_labels(labels, labels_doc, C, mem, err)) != NN_OK) goto done;
  LOAD_STOP_CHECK();
  if ((rc = nn_vocab_from_list_ex(&vocab, tokens, lens, V, stop, stop_ctx, mem, sub)) != NN_OK) {
    if (rc == NN_INTERRUPTED) LOAD_FAIL(rc, "interrupted");
    LOAD_FAIL(rc, "weights: vocab: %.480s", sub);
  }
  /* "device" says where the model was trained (its config keeps saying so); a loaded model
   * predicts on the GPU only when it was trained with "cuda" and a GPU is usable here. "auto"
   * loads on the CPU: one text at a time (attn_predict) a GPU launches kernels per time step
   * for microseconds of work, 145 us a title on an H200 against 4 us on the CPU, and in
   * batches (attn_classify) the GPU only matched 16 cores (tests/bench/RESULTS.md, GPU). */
  nn_device trained_on = cfg.device;
  const nn_backend *be;
  if (cfg.device != NN_DEVICE_CUDA || nn_backend_for_device(NN_DEVICE_CUDA, &be, sub) != NN_OK)
    cfg.device = NN_DEVICE_CPU;
  rc = nn_model_create_uninit(&model, &cfg, vocab, labels, C,
                              sub); /* takes vocab; every weight is read below */
  vocab = NULL;
  if (rc != NN_OK) LOAD_FAIL(rc, "weights: %.490s", sub);
  model->cfg.device = trained_on;

  if ((rc = load_weights(model, &f, len - 8 - read_le64(blob), stop, stop_ctx, err)) != NN_OK)
    goto done;
  LOAD_STOP_CHECK();
  rc = nn_model_prepare_inference(model, err); /* a loaded model is for predictions */
  if (rc != NN_OK) goto done;
  *out = model;
  model = NULL;
done:
  if (model) nn_model_free(model);
  if (vocab) nn_vocab_free(vocab);
  nn_mem_free(mem, (void *)tokens);
  nn_mem_free(mem, lens);
  nn_mem_free(mem, (void *)labels);
  nn_json_free(vocab_doc);
  nn_json_free(labels_doc);
  nn_st_free(&f);
  return rc;
}
