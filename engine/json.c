/* json.c -- strict JSON reader (RFC 8259) and the nn_strbuf writer used across the engine.
 * See json.h for the rules. The reader is a recursive descent parser with a depth limit and
 * a limit on the number of values; every read is bounds-checked against the given length. */
#include "json.h"
#include "compat.h"

#include "nn_internal.h"
#include "nn_mem.h"
#include "utf8.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------- reader */

typedef struct json_parser {
  const char *s;
  size_t len, pos;
  int depth;
  size_t values;
  int status; /* NN_OK until the first error */
  char *err;
  const nn_allocator *mem; /* of the document */
} json_parser;

/* A document: its root value after the allocator that every part of it came from, so that
 * nn_json_free (given the root) frees them with it. */
typedef struct json_doc {
  const nn_allocator *mem;
  nn_json root;
} json_doc;

static int json_fail(json_parser *p, int status, const char *what) {
  if (p->status == NN_OK) {
    p->status = status;
    if (status == NN_NOMEM) snprintf(p->err, NN_ERR_LEN, "out of memory while parsing JSON");
    else snprintf(p->err, NN_ERR_LEN, "invalid JSON at byte %zu: %s", p->pos, what);
  }
  return p->status;
}

static void json_skip_ws(json_parser *p) {
  while (p->pos < p->len) {
    char c = p->s[p->pos];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    p->pos++;
  }
}

static void json_free_contents(const nn_allocator *mem, nn_json *v) {
  if (v->type == NN_JSON_ARRAY || v->type == NN_JSON_OBJECT) {
    for (size_t i = 0; i < v->count; i++) json_free_contents(mem, &v->items[i]);
    nn_mem_free(mem, v->items);
  }
  nn_mem_free(mem, v->str);
  nn_mem_free(mem, v->key);
}

void nn_json_free(nn_json *v) {
  if (!v) return;
  json_doc *doc = (json_doc *)(void *)((char *)v - offsetof(json_doc, root));
  json_free_contents(doc->mem, v);
  nn_mem_free(doc->mem, doc);
}

static int json_hex4(const char *s, unsigned *out) {
  unsigned x = 0;
  for (int i = 0; i < 4; i++) {
    char c = s[i];
    x <<= 4;
    if (c >= '0' && c <= '9') x |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') x |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') x |= (unsigned)(c - 'A' + 10);
    else return 0;
  }
  *out = x;
  return 1;
}

static size_t json_put_utf8(char *o, unsigned cp) {
  if (cp < 0x80) {
    o[0] = (char)cp;
    return 1;
  } else if (cp < 0x800) {
    o[0] = (char)(0xC0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  } else if (cp < 0x10000) {
    o[0] = (char)(0xE0 | (cp >> 12));
    o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | (cp >> 18));
  o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* At p->pos == '"'. Decodes into a NUL-terminated buffer from p->mem. */
static int json_parse_string(json_parser *p, char **out, size_t *out_len) {
  size_t start = ++p->pos, end = start;
  /* find the closing quote: decoded length <= raw length */
  while (1) {
    if (end >= p->len) {
      p->pos = p->len;
      return json_fail(p, NN_ERROR, "unterminated string");
    }
    char c = p->s[end];
    if (c == '"') break;
    if (c == '\\') end++;
    end++;
  }
  char *buf = nn_mem_alloc(p->mem, end - start + 1);
  if (!buf) return json_fail(p, NN_NOMEM, "");
  size_t n = 0, i = start;
  while (i < end) {
    unsigned char c = (unsigned char)p->s[i];
    if (c < 0x20) {
      p->pos = i;
      nn_mem_free(p->mem, buf);
      return json_fail(p, NN_ERROR, "control character in string (must be escaped)");
    }
    if (c != '\\') {
      buf[n++] = (char)c;
      i++;
      continue;
    }
    char e = p->s[i + 1]; /* i + 1 < end: a backslash always has a next byte before end */
    p->pos = i;
    switch (e) {
    case '"':
      buf[n++] = '"';
      i += 2;
      break;
    case '\\':
      buf[n++] = '\\';
      i += 2;
      break;
    case '/':
      buf[n++] = '/';
      i += 2;
      break;
    case 'b':
      buf[n++] = '\b';
      i += 2;
      break;
    case 'f':
      buf[n++] = '\f';
      i += 2;
      break;
    case 'n':
      buf[n++] = '\n';
      i += 2;
      break;
    case 'r':
      buf[n++] = '\r';
      i += 2;
      break;
    case 't':
      buf[n++] = '\t';
      i += 2;
      break;
    case 'u': {
      unsigned cp, lo;
      if (end - i < 6 || !json_hex4(p->s + i + 2, &cp)) {
        nn_mem_free(p->mem, buf);
        return json_fail(p, NN_ERROR, "\\u must be followed by 4 hex digits");
      }
      i += 6;
      if (cp >= 0xDC00 && cp <= 0xDFFF) {
        nn_mem_free(p->mem, buf);
        return json_fail(p, NN_ERROR, "lone low surrogate in \\u escape");
      }
      if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (end - i < 6 || p->s[i] != '\\' || p->s[i + 1] != 'u' || !json_hex4(p->s + i + 2, &lo) ||
            lo < 0xDC00 || lo > 0xDFFF) {
          nn_mem_free(p->mem, buf);
          return json_fail(p, NN_ERROR, "high surrogate not followed by a low surrogate");
        }
        i += 6;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
      }
      n += json_put_utf8(buf + n, cp);
      break;
    }
    default: nn_mem_free(p->mem, buf); return json_fail(p, NN_ERROR, "invalid escape in string");
    }
  }
  buf[n] = 0;
  p->pos = end + 1;
  *out = buf;
  *out_len = n;
  return NN_OK;
}

static int json_is_digit(char c) { return c >= '0' && c <= '9'; }

static int json_parse_number(json_parser *p, nn_json *v) {
  size_t start = p->pos, i = start;
  int integral = 1;
  if (i < p->len && p->s[i] == '-') i++;
  if (i >= p->len || !json_is_digit(p->s[i])) {
    p->pos = i;
    return json_fail(p, NN_ERROR, "expected a digit");
  }
  if (p->s[i] == '0') {
    i++;
    if (i < p->len && json_is_digit(p->s[i])) {
      p->pos = i;
      return json_fail(p, NN_ERROR, "leading zero in number");
    }
  } else {
    while (i < p->len && json_is_digit(p->s[i])) i++;
  }
  if (i < p->len && p->s[i] == '.') {
    integral = 0;
    i++;
    if (i >= p->len || !json_is_digit(p->s[i])) {
      p->pos = i;
      return json_fail(p, NN_ERROR, "expected a digit after the decimal point");
    }
    while (i < p->len && json_is_digit(p->s[i])) i++;
  }
  if (i < p->len && (p->s[i] == 'e' || p->s[i] == 'E')) {
    integral = 0;
    i++;
    if (i < p->len && (p->s[i] == '+' || p->s[i] == '-')) i++;
    if (i >= p->len || !json_is_digit(p->s[i])) {
      p->pos = i;
      return json_fail(p, NN_ERROR, "expected a digit in the exponent");
    }
    while (i < p->len && json_is_digit(p->s[i])) i++;
  }
  size_t n = i - start;
  v->type = NN_JSON_NUMBER;
  /* exact integer value when it fits in int64 */
  if (integral) {
    int neg = p->s[start] == '-';
    uint64_t mag = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    int fits = 1;
    for (size_t k = start + (size_t)neg; k < i; k++) {
      unsigned d = (unsigned)(p->s[k] - '0');
      if (mag > (limit - d) / 10) {
        fits = 0;
        break;
      }
      mag = mag * 10 + d;
    }
    if (fits) {
      v->is_integer = 1;
      v->integer =
          neg ? (mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag) : (int64_t)mag;
    }
  }
  /* strtod wants a NUL-terminated copy using the C locale's decimal point */
  char small[64], *buf = n < sizeof small ? small : nn_mem_alloc(p->mem, n + 1);
  if (!buf) return json_fail(p, NN_NOMEM, "");
  memcpy(buf, p->s + start, n);
  buf[n] = 0;
  v->number = nn_strtod_c(buf);
  if (buf != small) nn_mem_free(p->mem, buf);
  p->pos = i;
  return NN_OK;
}

/* strtod / strtof in the "C" locale whatever the process's locale (JSON's decimal point is '.';
 * a locale with another, possibly multi-byte, point must not change what a number means). */
double nn_strtod_c(const char *s) {
  nn_c_locale c = nn_c_locale_new();
  double x = c ? nn_strtod_in(s, NULL, c) : strtod(s, NULL);
  if (c) nn_c_locale_free(c);
  return x;
}

float nn_strtof_c(const char *s) {
  nn_c_locale c = nn_c_locale_new();
  float x = c ? nn_strtof_in(s, NULL, c) : strtof(s, NULL);
  if (c) nn_c_locale_free(c);
  return x;
}

static int json_literal(json_parser *p, const char *word, nn_json_type type, nn_json *v) {
  size_t n = strlen(word);
  if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0)
    return json_fail(p, NN_ERROR, "expected a value");
  p->pos += n;
  v->type = type;
  return NN_OK;
}

static int json_parse_value(json_parser *p, nn_json *v);

/* children grow in a vector of nn_json by value (no child points at a sibling or parent) */
static int json_push(json_parser *p, nn_json *parent, size_t *cap) {
  if (parent->count == *cap) {
    size_t ncap = *cap ? *cap * 2 : 4;
    nn_json *items = nn_mem_realloc(p->mem, parent->items, ncap * sizeof *items);
    if (!items) return json_fail(p, NN_NOMEM, "");
    parent->items = items;
    *cap = ncap;
  }
  memset(&parent->items[parent->count], 0, sizeof(nn_json));
  parent->count++;
  return NN_OK;
}

typedef struct json_key_ref {
  const char *key;
  size_t len;
} json_key_ref;

static int json_key_cmp(const void *a, const void *b) {
  const json_key_ref *x = a, *y = b;
  size_t n = x->len < y->len ? x->len : y->len;
  int c = memcmp(x->key, y->key, n);
  if (c) return c;
  return x->len < y->len ? -1 : x->len > y->len;
}

static int json_check_duplicates(json_parser *p, const nn_json *obj) {
  size_t n = obj->count;
  if (n < 2) return NN_OK;
  json_key_ref *refs = nn_mem_alloc(p->mem, n * sizeof *refs);
  if (!refs) return json_fail(p, NN_NOMEM, "");
  for (size_t i = 0; i < n; i++) {
    refs[i].key = obj->items[i].key;
    refs[i].len = obj->items[i].key_len;
  }
  qsort(refs, n, sizeof *refs, json_key_cmp);
  for (size_t i = 1; i < n; i++) {
    if (json_key_cmp(&refs[i - 1], &refs[i]) == 0) {
      char what[NN_ERR_LEN / 2], quoted[NN_ERR_LEN / 4];
      nn_json_quote_for_message(quoted, sizeof quoted, refs[i].key, refs[i].len);
      snprintf(what, sizeof what, "duplicate key %s", quoted);
      p->pos = obj->start;
      nn_mem_free(p->mem, refs);
      return json_fail(p, NN_ERROR, what);
    }
  }
  nn_mem_free(p->mem, refs);
  return NN_OK;
}

static int json_parse_container(json_parser *p, nn_json *v, int is_object) {
  char close = is_object ? '}' : ']';
  size_t cap = 0;
  v->type = is_object ? NN_JSON_OBJECT : NN_JSON_ARRAY;
  if (++p->depth > NN_JSON_MAX_DEPTH) {
    char what[96];
    snprintf(what, sizeof what, "nested deeper than %d levels", NN_JSON_MAX_DEPTH);
    return json_fail(p, NN_ERROR, what);
  }
  p->pos++; /* [ or { */
  json_skip_ws(p);
  if (p->pos < p->len && p->s[p->pos] == close) {
    p->pos++;
    p->depth--;
    return NN_OK;
  }
  while (1) {
    if (json_push(p, v, &cap) != NN_OK) return p->status;
    nn_json *item = &v->items[v->count - 1];
    json_skip_ws(p);
    if (is_object) {
      if (p->pos >= p->len || p->s[p->pos] != '"')
        return json_fail(p, NN_ERROR, "expected a string key");
      item->key_start = p->pos;
      if (json_parse_string(p, &item->key, &item->key_len) != NN_OK) return p->status;
      item->key_end = p->pos;
      json_skip_ws(p);
      if (p->pos >= p->len || p->s[p->pos] != ':')
        return json_fail(p, NN_ERROR, "expected ':' after the key");
      p->pos++;
      json_skip_ws(p);
    }
    if (json_parse_value(p, item) != NN_OK) return p->status;
    json_skip_ws(p);
    if (p->pos >= p->len)
      return json_fail(p, NN_ERROR, is_object ? "expected ',' or '}'" : "expected ',' or ']'");
    char c = p->s[p->pos];
    if (c == ',') {
      p->pos++;
      continue;
    }
    if (c == close) {
      p->pos++;
      break;
    }
    return json_fail(p, NN_ERROR, is_object ? "expected ',' or '}'" : "expected ',' or ']'");
  }
  p->depth--;
  if (v->count < cap) { /* give back the slack */
    nn_json *items = nn_mem_realloc(p->mem, v->items, v->count * sizeof *items);
    if (items) v->items = items;
  }
  if (is_object) return json_check_duplicates(p, v);
  return NN_OK;
}

/* v is zeroed except possibly key/key_len */
static int json_parse_value(json_parser *p, nn_json *v) {
  json_skip_ws(p);
  v->start = p->pos;
  if (++p->values > NN_JSON_MAX_VALUES) {
    char what[96];
    snprintf(what, sizeof what, "more than %u values", (unsigned)NN_JSON_MAX_VALUES);
    return json_fail(p, NN_ERROR, what);
  }
  if (p->pos >= p->len) return json_fail(p, NN_ERROR, "expected a value, found the end");
  int rc;
  switch (p->s[p->pos]) {
  case '{': rc = json_parse_container(p, v, 1); break;
  case '[': rc = json_parse_container(p, v, 0); break;
  case '"':
    v->type = NN_JSON_STRING;
    rc = json_parse_string(p, &v->str, &v->str_len);
    break;
  case 't': rc = json_literal(p, "true", NN_JSON_TRUE, v); break;
  case 'f': rc = json_literal(p, "false", NN_JSON_FALSE, v); break;
  case 'n': rc = json_literal(p, "null", NN_JSON_NULL, v); break;
  default:
    if (p->s[p->pos] == '-' || json_is_digit(p->s[p->pos])) rc = json_parse_number(p, v);
    else rc = json_fail(p, NN_ERROR, "expected a value");
  }
  v->end = p->pos;
  return rc;
}

int nn_json_parse(nn_json **out, const char *s, size_t len, const nn_allocator *mem, char *err) {
  *out = NULL;
  json_parser p = {s, len, 0, 0, 0, NN_OK, err, mem};
  json_doc *doc = nn_mem_calloc(mem, 1, sizeof *doc);
  if (!doc) {
    snprintf(err, NN_ERR_LEN, "out of memory while parsing JSON");
    return NN_NOMEM;
  }
  doc->mem = mem;
  nn_json *v = &doc->root;
  if (!s && len) len = p.len = 0;
  if (json_parse_value(&p, v) == NN_OK) {
    json_skip_ws(&p);
    if (p.pos != p.len) json_fail(&p, NN_ERROR, "unexpected text after the value");
  }
  if (p.status != NN_OK) {
    nn_json_free(v);
    return p.status;
  }
  *out = v;
  return NN_OK;
}

const nn_json *nn_json_get(const nn_json *obj, const char *key) {
  if (!obj || obj->type != NN_JSON_OBJECT || !key) return NULL;
  size_t n = strlen(key);
  for (size_t i = 0; i < obj->count; i++)
    if (obj->items[i].key_len == n && memcmp(obj->items[i].key, key, n) == 0) return &obj->items[i];
  return NULL;
}

int nn_json_key_is(const nn_json *m, const char *name) {
  size_t n = strlen(name);
  return m && m->key && m->key_len == n && memcmp(m->key, name, n) == 0;
}

int nn_json_integral(const nn_json *v, int64_t *out) {
  if (!v || v->type != NN_JSON_NUMBER) return 0;
  if (v->is_integer) {
    *out = v->integer;
    return 1;
  }
  double x = v->number;
  if (!isfinite(x) || floor(x) != x || fabs(x) > 9007199254740992.0) return 0;
  *out = (int64_t)x;
  return 1;
}

const nn_json *nn_json_at(const nn_json *arr, size_t i) {
  if (!arr || (arr->type != NN_JSON_ARRAY && arr->type != NN_JSON_OBJECT) || i >= arr->count)
    return NULL;
  return &arr->items[i];
}

size_t nn_json_count(const nn_json *v) {
  return v && (v->type == NN_JSON_ARRAY || v->type == NN_JSON_OBJECT) ? v->count : 0;
}

const char *nn_json_string(const nn_json *v, size_t *len) {
  if (!v || v->type != NN_JSON_STRING) return NULL;
  if (len) *len = v->str_len;
  return v->str;
}

const char *nn_json_type_name(nn_json_type t) {
  switch (t) {
  case NN_JSON_NULL: return "null";
  case NN_JSON_FALSE:
  case NN_JSON_TRUE: return "boolean";
  case NN_JSON_NUMBER: return "number";
  case NN_JSON_STRING: return "string";
  case NN_JSON_ARRAY: return "array";
  case NN_JSON_OBJECT: return "object";
  }
  return "?";
}

/* ------------------------------------------------------------------------------- writer */

void nn_strbuf_init(nn_strbuf *sb, const nn_allocator *mem) {
  memset(sb, 0, sizeof *sb);
  sb->mem = mem;
}

/* empty again, with the same allocator */
void nn_strbuf_free(nn_strbuf *sb) {
  const nn_allocator *mem = sb->mem;
  nn_mem_free(mem, sb->data);
  nn_strbuf_init(sb, mem);
}

static int strbuf_reserve(nn_strbuf *sb, size_t extra) {
  if (sb->oom) return 0;
  if (extra > (size_t)-1 / 2 - sb->len) {
    sb->oom = 1;
    return 0;
  }
  size_t need = sb->len + extra + 1;
  if (need <= sb->cap) return 1;
  size_t cap = sb->cap ? sb->cap : 64;
  while (cap < need) cap *= 2;
  char *d = nn_mem_realloc(sb->mem, sb->data, cap);
  if (!d) {
    sb->oom = 1;
    return 0;
  }
  sb->data = d;
  sb->cap = cap;
  return 1;
}

void nn_strbuf_append(nn_strbuf *sb, const char *bytes, size_t len) {
  if (!strbuf_reserve(sb, len)) return;
  if (len) memcpy(sb->data + sb->len, bytes, len);
  sb->len += len;
  sb->data[sb->len] = 0;
}

void nn_strbuf_puts(nn_strbuf *sb, const char *s) { nn_strbuf_append(sb, s, strlen(s)); }

void nn_strbuf_printf(nn_strbuf *sb, const char *fmt, ...) {
  char small[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof small) {
    nn_strbuf_append(sb, small, (size_t)n);
    return;
  }
  if (!strbuf_reserve(sb, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  sb->len += (size_t)n;
}

void nn_strbuf_append_json_compact(nn_strbuf *sb, const nn_json *v, const char *text) {
  if (v->type != NN_JSON_ARRAY && v->type != NN_JSON_OBJECT) {
    nn_strbuf_append(sb, text + v->start, v->end - v->start);
    return;
  }
  nn_strbuf_append(sb, v->type == NN_JSON_ARRAY ? "[" : "{", 1);
  for (size_t i = 0; i < v->count; i++) {
    const nn_json *item = &v->items[i];
    if (i) nn_strbuf_append(sb, ",", 1);
    if (v->type == NN_JSON_OBJECT) {
      nn_strbuf_append(sb, text + item->key_start, item->key_end - item->key_start);
      nn_strbuf_append(sb, ":", 1);
    }
    nn_strbuf_append_json_compact(sb, item, text);
  }
  nn_strbuf_append(sb, v->type == NN_JSON_ARRAY ? "]" : "}", 1);
}

void nn_strbuf_append_json_string(nn_strbuf *sb, const char *s, size_t len) {
  static const char hex[] = "0123456789abcdef";
  nn_strbuf_append(sb, "\"", 1);
  size_t run = 0; /* start of the current run of bytes needing no escape */
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    nn_strbuf_append(sb, s + run, i - run);
    run = i + 1;
    char esc[7] = {'\\', 0, 0, 0, 0, 0, 0};
    size_t n = 2;
    switch (c) {
    case '"': esc[1] = '"'; break;
    case '\\': esc[1] = '\\'; break;
    case '\n': esc[1] = 'n'; break;
    case '\r': esc[1] = 'r'; break;
    case '\t': esc[1] = 't'; break;
    case '\b': esc[1] = 'b'; break;
    case '\f': esc[1] = 'f'; break;
    default:
      esc[1] = 'u', esc[2] = '0', esc[3] = '0', esc[4] = hex[c >> 4], esc[5] = hex[c & 15];
      n = 6;
    }
    nn_strbuf_append(sb, esc, n);
  }
  nn_strbuf_append(sb, s + run, len - run);
  nn_strbuf_append(sb, "\"", 1);
}

/* Numbers are formatted (and their shortest round-tripping form checked) in the "C" locale,
 * switched for this thread only, so a host locale with another decimal point -- ',' or the
 * two-byte U+066B -- never leaks into JSON. */
static void format_number_c(char *buf, size_t size, double x, int is_float) {
  nn_c_locale c = nn_c_locale_new();
  int max_digits = is_float ? 9 : 17;
  nn_format_g_in(buf, size, max_digits, x, c);
  for (int digits = is_float ? 6 : 15; digits < max_digits; digits++) { /* shortest exact form */
    char shorter[40];
    nn_format_g_in(shorter, sizeof shorter, digits, x, c);
    if (is_float ? (c ? nn_strtof_in(shorter, NULL, c) : strtof(shorter, NULL)) == (float)x
                 : (c ? nn_strtod_in(shorter, NULL, c) : strtod(shorter, NULL)) == x) {
      snprintf(buf, size, "%s", shorter);
      break;
    }
  }
  if (c) nn_c_locale_free(c);
}

double nn_decimal_double(float f) {
  if (!isfinite(f)) return f;
  char buf[40];
  format_number_c(buf, sizeof buf, (double)f, 1); /* shortest digits that read back as f */
  return nn_strtod_c(buf);
}

void nn_json_format_double(char *buf, size_t size, double x) {
  if (isfinite(x)) format_number_c(buf, size, x, 0);
  else snprintf(buf, size, "null");
}

void nn_strbuf_append_double(nn_strbuf *sb, double x) {
  if (!isfinite(x)) {
    nn_strbuf_puts(sb, "null");
    return;
  }
  char buf[40];
  format_number_c(buf, sizeof buf, x, 0);
  nn_strbuf_puts(sb, buf);
}

void nn_strbuf_append_float(nn_strbuf *sb, float x) {
  if (!isfinite(x)) {
    nn_strbuf_puts(sb, "null");
    return;
  }
  char buf[40];
  format_number_c(buf, sizeof buf, (double)x, 1);
  nn_strbuf_puts(sb, buf);
}

char *nn_strbuf_take(nn_strbuf *sb) {
  if (sb->oom) {
    nn_strbuf_free(sb);
    return NULL;
  }
  char *d = sb->data;
  if (!d) d = nn_mem_calloc(sb->mem, 1, 1);
  nn_strbuf_init(sb, sb->mem);
  return d;
}

/* ------------------------------------------------------------------------------- messages */

char *nn_json_quote_for_message(char *out, size_t max_len, const char *s, size_t len) {
  static const char hex[] = "0123456789abcdef";
  if (max_len < 8) {
    if (max_len) out[0] = 0;
    return out;
  }
  size_t o = 0, room = max_len - 5; /* keep space for ..." and NUL */
  out[o++] = '"';
  const unsigned char *u = (const unsigned char *)s;
  size_t i = 0;
  while (i < len) {
    char piece[8];
    size_t n = 0, adv = 1;
    unsigned char c = u[i];
    if (c == '"' || c == '\\') piece[0] = '\\', piece[1] = (char)c, n = 2;
    else if (c == '\n') piece[0] = '\\', piece[1] = 'n', n = 2;
    else if (c == '\t') piece[0] = '\\', piece[1] = 't', n = 2;
    else if (c < 0x20 || c == 0x7F)
      piece[0] = '\\', piece[1] = 'x', piece[2] = hex[c >> 4], piece[3] = hex[c & 15], n = 4;
    else if (c < 0x80) piece[0] = (char)c, n = 1;
    else {
      uint32_t cp;
      size_t k = (size_t)nn_utf8_decode(u + i, len - i, &cp);
      if (k) memcpy(piece, u + i, k), n = k, adv = k;
      else piece[0] = '\\', piece[1] = 'x', piece[2] = hex[c >> 4], piece[3] = hex[c & 15], n = 4;
    }
    if (o + n > room) {
      memcpy(out + o, "...", 3);
      o += 3;
      break;
    }
    memcpy(out + o, piece, n);
    o += n;
    i += adv;
  }
  out[o++] = '"';
  out[o] = 0;
  return out;
}
