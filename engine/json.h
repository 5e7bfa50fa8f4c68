/* json.h -- the engine's small JSON reader and writer (internal; ext/ includes it too).
 *
 * Reader: strict RFC 8259 grammar (no comments, no trailing commas, no NaN/Infinity, no
 * leading zeros, no single quotes), nesting depth at most NN_JSON_MAX_DEPTH, duplicate object
 * keys rejected, string escapes decoded to UTF-8 (\uXXXX with surrogate pairs; a lone
 * surrogate is an error). Raw bytes >= 0x80 inside strings are copied as they are (UTF-8 is
 * not validated), so every byte string the writer escapes reads back identical. Never reads
 * past the given length; the input need not be NUL-terminated.
 *
 *   nn_json *doc; char err[NN_ERR_LEN];
 *   if (nn_json_parse(&doc, text, len, mem, err) != NN_OK) ... err: "invalid JSON at byte 7: ..."
 *   const nn_json *h = nn_json_get(doc, "hidden");   NULL when absent or doc not an object
 *   ... nn_json_free(doc);
 *
 * Writer: nn_strbuf, a growable NUL-terminated byte buffer; out of memory is sticky (sb.oom)
 * and checked once at the end.
 *
 * Memory: a document and a buffer come from the nn_allocator given to nn_json_parse /
 * nn_strbuf_init (nn.h; NULL: the C library), and are freed with it.
 */
#ifndef ATTNEXT_JSON_H
#define ATTNEXT_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "nn.h"

#define NN_JSON_MAX_DEPTH 64
/* At most this many values in one document (about 100 bytes each): bounds the memory a
 * hostile text can make the parser take, while a 1,000,000-token vocabulary array fits. */
#define NN_JSON_MAX_VALUES (1u << 21)

typedef enum {
  NN_JSON_NULL = 0,
  NN_JSON_FALSE,
  NN_JSON_TRUE,
  NN_JSON_NUMBER,
  NN_JSON_STRING,
  NN_JSON_ARRAY,
  NN_JSON_OBJECT
} nn_json_type;

typedef struct nn_json nn_json;
struct nn_json {
  nn_json_type type;
  int is_integer;    /* NN_JSON_NUMBER written without fraction or exponent, fits in int64 */
  size_t start, end; /* byte span of this value in the parsed text (for messages) */
  /* NN_JSON_NUMBER */
  double number;
  int64_t integer; /* the exact value when is_integer */
  /* NN_JSON_STRING: decoded bytes, NUL-terminated (may also contain NUL bytes) */
  char *str;
  size_t str_len;
  /* NN_JSON_ARRAY and NN_JSON_OBJECT: count items in document order */
  size_t count;
  nn_json *items;
  /* a member of an object: its key, decoded, NUL-terminated (NULL for array items), and the
   * byte span of the key as written, quotes included */
  char *key;
  size_t key_len;
  size_t key_start, key_end;
};

/* Parse len bytes of s as one JSON value (surrounding whitespace allowed). On error *out is
 * NULL and err (NN_ERR_LEN bytes) says what and where. Returns NN_OK, NN_ERROR or NN_NOMEM. */
int nn_json_parse(nn_json **out, const char *s, size_t len, const nn_allocator *mem, char *err);
/* Frees a document that nn_json_parse returned (its root; never a value inside it), with the
 * allocator it was parsed with. */
void nn_json_free(nn_json *v);

/* Accessors; all accept NULL and return NULL / 0 when the value is not of the asked type. */
const nn_json *nn_json_get(const nn_json *obj, const char *key); /* object member by key */
const nn_json *nn_json_at(const nn_json *arr, size_t i);         /* array item or member i */
size_t nn_json_count(const nn_json *v);                          /* items of array/object */
const char *nn_json_string(const nn_json *v, size_t *len);       /* NULL unless a string */
const char *nn_json_type_name(nn_json_type t);                   /* "string", "number", ... */
/* Whether member m's key is name, byte for byte: a key with a NUL byte ("seed\u0000x") is no
 * name, though its C string reads as one. */
int nn_json_key_is(const nn_json *m, const char *name);
/* An integral number as int64: exact when written as an integer; a whole value written with a
 * fraction or exponent (1e3, 100.0) within 2^53 in magnitude, where a double is exact. 0 when
 * v is not one. */
int nn_json_integral(const nn_json *v, int64_t *out);

/* Growable byte buffer, always NUL-terminated once something was appended. */
typedef struct nn_strbuf {
  char *data;
  size_t len, cap;
  int oom;                 /* an append failed for lack of memory; later appends do nothing */
  const nn_allocator *mem; /* of data */
} nn_strbuf;

void nn_strbuf_init(nn_strbuf *sb, const nn_allocator *mem);
/* Frees data; sb is then empty, with the same allocator. */
void nn_strbuf_free(nn_strbuf *sb);
void nn_strbuf_append(nn_strbuf *sb, const char *bytes, size_t len);
void nn_strbuf_puts(nn_strbuf *sb, const char *s);
void nn_strbuf_printf(nn_strbuf *sb, const char *fmt, ...)
#if defined(__MINGW32__) /* its snprintf is mingw's (C99's formats), not the C runtime's */
    __attribute__((format(gnu_printf, 2, 3)))
#elif defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* s (len bytes) as a quoted JSON string: escapes " \ and control bytes, other bytes as is. */
void nn_strbuf_append_json_string(nn_strbuf *sb, const char *s, size_t len);
/* v (parsed from text) without the whitespace between its tokens, each token (keys, strings,
 * numbers) as written: what SQLite's JSON functions return for a value of a document. */
void nn_strbuf_append_json_compact(nn_strbuf *sb, const nn_json *v, const char *text);
/* Numbers that read back to the same value: doubles with up to 17 significant digits, floats
 * with the fewest of 6..9 digits that round-trip through float. Non-finite values are written
 * as null (JSON has no NaN/Infinity). Always uses '.' whatever the C locale. */
void nn_strbuf_append_double(nn_strbuf *sb, double x);
void nn_strbuf_append_float(nn_strbuf *sb, float x);
/* Take the buffer (from sb's allocator, NUL-terminated; "" when empty), leaving sb empty. NULL
 * if oom. */
char *nn_strbuf_take(nn_strbuf *sb);

/* Quote bytes for an error message: at most max_len bytes of output (NUL included) written to
 * out as "..." with \" \\ \n \t \xNN escapes (invalid UTF-8 and control bytes as \xNN), cut
 * with ... when too long. Returns out. */
char *nn_json_quote_for_message(char *out, size_t max_len, const char *s, size_t len);

/* strtod / strtof of a NUL-terminated number in the "C" locale (decimal point '.'). */
double nn_strtod_c(const char *s);
/* The double of f's shortest decimal form (0.9f -> 0.9): PyTorch keeps hyper-parameters as
 * Python doubles of the decimal the user wrote, so optimiser arithmetic uses these. */
double nn_decimal_double(float f);
/* x as a JSON number in its shortest exact form ("null" when not finite), any locale. */
void nn_json_format_double(char *buf, size_t size, double x);
float nn_strtof_c(const char *s);

#endif
