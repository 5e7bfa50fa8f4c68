/* test_json.c -- the engine's JSON reader and writer (engine/json.c): grammar (RFC 8259
 * examples that must parse and ones that must not), escapes and surrogate pairs to UTF-8,
 * integers exact to int64, depth and value limits, no read past the given length (every
 * document and every prefix is parsed from an exact-size heap copy, so ASan/valgrind see any
 * over-read), and writer round trips: byte strings, doubles and floats bit for bit. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "json.h"
#include "nn_internal.h"

/* parse from a heap buffer of exactly len bytes (no NUL after it) */
static int parse_exact(nn_json **out, const char *s, size_t len, char *err) {
  char *copy = malloc(len ? len : 1);
  memcpy(copy, s, len);
  int rc = nn_json_parse(out, copy, len, NULL, err);
  free(copy);
  return rc;
}

static void test_valid(void) {
  static const char *docs[] = {
      "0",
      "-0",
      "1",
      "-1",
      "1.5",
      "1e5",
      "1E+5",
      "1e-5",
      "-0.0e0",
      "true",
      "false",
      "null",
      "\"\"",
      "\"a\"",
      "[]",
      "{}",
      " [ ] ",
      "\t\r\n{}\n",
      "[1,2,3]",
      "{\"a\":1,\"b\":[true,null]}",
      "[[[[[]]]]]",
      "{\"\":0}",
      "\"\\u0000\"",
      "[\"\\ud83d\\ude00\"]",
      "123456789012345678901234567890",
  };
  for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
    nn_json *v = NULL;
    char err[NN_ERR_LEN] = "";
    int rc = parse_exact(&v, docs[i], strlen(docs[i]), err);
    CHECK(rc == NN_OK && v, "valid %s: rc %d %s", docs[i], rc, err);
    nn_json_free(v);
  }
  /* structure and values */
  const char *doc = "{\"name\":\"x\\\"y\",\"n\":-42,\"f\":2.5e-1,\"list\":[1,\"two\",{\"k\":null}],"
                    "\"t\":true,\"big\":9223372036854775807,\"min\":-9223372036854775808,"
                    "\"over\":9223372036854775808}";
  nn_json *v = NULL;
  char err[NN_ERR_LEN] = "";
  CHECK(parse_exact(&v, doc, strlen(doc), err) == NN_OK, "structure doc: %s", err);
  if (!v) return;
  CHECK(v->type == NN_JSON_OBJECT && nn_json_count(v) == 8, "object of 8: type %d count %zu",
        v->type, nn_json_count(v));
  size_t n = 0;
  const char *s = nn_json_string(nn_json_get(v, "name"), &n);
  CHECK(s && n == 3 && memcmp(s, "x\"y", 3) == 0, "name: %s", s ? s : "(null)");
  const nn_json *num = nn_json_get(v, "n");
  CHECK(num && num->type == NN_JSON_NUMBER && num->is_integer && num->integer == -42 &&
            num->number == -42,
        "n = -42");
  const nn_json *f = nn_json_get(v, "f");
  CHECK(f && !f->is_integer && f->number == 0.25, "f = 0.25: %g", f ? f->number : 0);
  const nn_json *list = nn_json_get(v, "list");
  CHECK(nn_json_count(list) == 3 && nn_json_at(list, 1)->type == NN_JSON_STRING &&
            nn_json_get(nn_json_at(list, 2), "k")->type == NN_JSON_NULL &&
            nn_json_at(list, 3) == NULL,
        "list items");
  CHECK(nn_json_get(v, "t")->type == NN_JSON_TRUE, "t is true");
  CHECK(nn_json_get(v, "big")->is_integer && nn_json_get(v, "big")->integer == INT64_MAX,
        "INT64_MAX exact");
  CHECK(nn_json_get(v, "min")->is_integer && nn_json_get(v, "min")->integer == INT64_MIN,
        "INT64_MIN exact");
  CHECK(!nn_json_get(v, "over")->is_integer &&
            nn_json_get(v, "over")->number == 9223372036854775808.0,
        "2^63 is a double, not an int64");
  CHECK(nn_json_get(v, "missing") == NULL && nn_json_get(list, "x") == NULL, "absent keys");
  const nn_json *name = nn_json_get(v, "name");
  CHECK(name->start == 8 && name->end == 14, "span of \"x\\\"y\": [%zu, %zu)", name->start,
        name->end);
  nn_json_free(v);

  /* escapes decode to UTF-8 */
  const char *esc = "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\u20AC\\ud83d\\ude00\\u0000z\"";
  const char want[] = "\"\\/\b\f\n\r\t\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\0z";
  CHECK(parse_exact(&v, esc, strlen(esc), err) == NN_OK, "escapes: %s", err);
  if (v) {
    CHECK(v->str_len == sizeof want - 1 && memcmp(v->str, want, sizeof want - 1) == 0,
          "escapes decode: %zu bytes, expected %zu", v->str_len, sizeof want - 1);
    nn_json_free(v);
  }
  /* raw UTF-8 and other high bytes pass through */
  const char raw[] = "\"h\xc3\xa9 \xff\xfe\"";
  CHECK(parse_exact(&v, raw, sizeof raw - 1, err) == NN_OK, "raw bytes: %s", err);
  if (v) {
    CHECK(v->str_len == 6 && memcmp(v->str, raw + 1, 6) == 0, "raw bytes kept");
    nn_json_free(v);
  }
}

static void test_invalid(void) {
  static const struct {
    const char *doc, *err;
  } bad[] = {
      {"", "invalid JSON at byte 0: expected a value, found the end"},
      {"  ", "invalid JSON at byte 2: expected a value, found the end"},
      {"{", "invalid JSON at byte 1: expected a string key"},
      {"[1,]", "invalid JSON at byte 3: expected a value"},
      {"{\"a\":1,}", "invalid JSON at byte 7: expected a string key"},
      {"[1 2]", "invalid JSON at byte 3: expected ',' or ']'"},
      {"{\"a\" 1}", "invalid JSON at byte 5: expected ':' after the key"},
      {"{\"a\":1 \"b\":2}", "invalid JSON at byte 7: expected ',' or '}'"},
      {"{1:2}", "invalid JSON at byte 1: expected a string key"},
      {"01", "invalid JSON at byte 1: leading zero in number"},
      {"1.", "invalid JSON at byte 2: expected a digit after the decimal point"},
      {".5", "invalid JSON at byte 0: expected a value"},
      {"-", "invalid JSON at byte 1: expected a digit"},
      {"1e", "invalid JSON at byte 2: expected a digit in the exponent"},
      {"+1", "invalid JSON at byte 0: expected a value"},
      {"tru", "invalid JSON at byte 0: expected a value"},
      {"nul", "invalid JSON at byte 0: expected a value"},
      {"NaN", "invalid JSON at byte 0: expected a value"},
      {"Infinity", "invalid JSON at byte 0: expected a value"},
      {"\"abc", "invalid JSON at byte 4: unterminated string"},
      {"\"ab\\\"", "invalid JSON at byte 5: unterminated string"},
      {"\"ab\\", "invalid JSON at byte 4: unterminated string"},
      {"\"\\x\"", "invalid JSON at byte 1: invalid escape in string"},
      {"\"\\u12\"", "invalid JSON at byte 1: \\u must be followed by 4 hex digits"},
      {"\"\\u12G4\"", "invalid JSON at byte 1: \\u must be followed by 4 hex digits"},
      {"\"\\ud800\"", "invalid JSON at byte 1: high surrogate not followed by a low surrogate"},
      {"\"\\ud800\\u0041\"",
       "invalid JSON at byte 1: high surrogate not followed by a low surrogate"},
      {"\"\\udc00\"", "invalid JSON at byte 1: lone low surrogate in \\u escape"},
      {"\"a\tb\"", "invalid JSON at byte 2: control character in string (must be escaped)"},
      {"[] []", "invalid JSON at byte 3: unexpected text after the value"},
      {"'a'", "invalid JSON at byte 0: expected a value"},
      {"/*c*/1", "invalid JSON at byte 0: expected a value"},
      {"{\"a\":1,\"b\":2,\"a\":3}", "invalid JSON at byte 0: duplicate key \"a\""},
      {"[{\"x\":[],\"x\":1}]", "invalid JSON at byte 1: duplicate key \"x\""},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    nn_json *v = (nn_json *)1;
    char err[NN_ERR_LEN] = "";
    int rc = parse_exact(&v, bad[i].doc, strlen(bad[i].doc), err);
    CHECK(rc == NN_ERROR && v == NULL, "invalid %s: rc %d", bad[i].doc, rc);
    CHECK(strcmp(err, bad[i].err) == 0, "invalid %s:\n  got      %s\n  expected %s", bad[i].doc,
          err, bad[i].err);
  }
  /* a NUL byte inside the given length is just an invalid character */
  nn_json *v = NULL;
  char err[NN_ERR_LEN];
  CHECK(parse_exact(&v, "[1]\0", 4, err) == NN_ERROR, "NUL after the value is an error");
  CHECK(parse_exact(&v, "\"a\0b\"", 5, err) == NN_ERROR, "raw NUL in a string is an error");
  /* many duplicate-free keys (sorted check) and one duplicate among many */
  nn_strbuf sb;
  nn_strbuf_init(&sb, NULL);
  nn_strbuf_puts(&sb, "{");
  for (int i = 0; i < 5000; i++) nn_strbuf_printf(&sb, "%s\"k%d\":%d", i ? "," : "", i, i);
  nn_strbuf_puts(&sb, "}");
  CHECK(parse_exact(&v, sb.data, sb.len, err) == NN_OK && nn_json_count(v) == 5000, "5000 keys: %s",
        err);
  CHECK(v && nn_json_get(v, "k4321") && nn_json_get(v, "k4321")->integer == 4321, "lookup k4321");
  nn_json_free(v);
  sb.len--;
  nn_strbuf_puts(&sb, ",\"k1234\":0}");
  CHECK(parse_exact(&v, sb.data, sb.len, err) == NN_ERROR && strstr(err, "duplicate key \"k1234\""),
        "duplicate among 5001 keys: %s", err);
  nn_strbuf_free(&sb);
}

static void test_limits(void) {
  char doc[2 * (NN_JSON_MAX_DEPTH + 1) + 1], err[NN_ERR_LEN];
  nn_json *v = NULL;
  for (int depth = NN_JSON_MAX_DEPTH; depth <= NN_JSON_MAX_DEPTH + 1; depth++) {
    memset(doc, '[', (size_t)depth);
    memset(doc + depth, ']', (size_t)depth);
    int rc = parse_exact(&v, doc, 2 * (size_t)depth, err);
    if (depth <= NN_JSON_MAX_DEPTH) CHECK(rc == NN_OK, "depth %d parses: %s", depth, err);
    else
      CHECK(rc == NN_ERROR &&
                strcmp(err, "invalid JSON at byte 64: nested deeper than 64 levels") == 0,
            "depth %d: %s", depth, err);
    nn_json_free(v);
  }
  /* deep nesting far beyond the limit does not recurse past it */
  size_t deep = 1000000;
  char *big = malloc(deep);
  memset(big, '[', deep);
  CHECK(parse_exact(&v, big, deep, err) == NN_ERROR, "a million '[': %s", err);
  free(big);
  /* too many values */
  size_t count = NN_JSON_MAX_VALUES + 1;
  nn_strbuf sb;
  nn_strbuf_init(&sb, NULL);
  nn_strbuf_puts(&sb, "[");
  for (size_t i = 0; i < count; i++) nn_strbuf_puts(&sb, i ? ",0" : "0");
  nn_strbuf_puts(&sb, "]");
  int rc = parse_exact(&v, sb.data, sb.len, err);
  CHECK(rc == NN_ERROR && strstr(err, "more than 2097152 values"), "2^21 + 1 values: rc %d %s", rc,
        err);
  nn_strbuf_free(&sb);
  /* numbers beyond double range */
  CHECK(parse_exact(&v, "1e400", 5, err) == NN_OK && isinf(v->number) && !v->is_integer,
        "1e400 is inf");
  nn_json_free(v);
  CHECK(parse_exact(&v, "-1e-400", 7, err) == NN_OK && v->number == 0, "-1e-400 is 0");
  nn_json_free(v);
}

/* every prefix of a rich document: must return (ok or error) without reading past it */
static void test_prefixes(void) {
  const char *doc =
      "{\"a\":[1,-2.5e+3,true,false,null,\"x\\u00e9\\ud83d\\ude00\\n\"],\"b\":{\"c\":{}},"
      "\"d\":-0.0,\"e\":\"\"}";
  size_t n = strlen(doc);
  int ok = 0;
  for (size_t len = 0; len <= n; len++) {
    nn_json *v = NULL;
    char err[NN_ERR_LEN];
    int rc = parse_exact(&v, doc, len, err);
    if (rc == NN_OK) ok++;
    nn_json_free(v);
  }
  CHECK(ok == 1, "only the whole document parses: %d prefixes did", ok);
  printf("prefixes: %zu prefixes of a %zu-byte document parsed from exact-size buffers, %d ok\n",
         n + 1, n, ok);
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static void test_writer(void) {
  char err[NN_ERR_LEN];
  /* every byte value, then random byte strings */
  int same = 0, total = 0;
  for (int k = 0; k < 500; k++) {
    char s[300];
    size_t n;
    if (k == 0) {
      for (int b = 0; b < 256; b++) s[b] = (char)b;
      n = 256;
    } else {
      n = rnd() % 300;
      for (size_t i = 0; i < n; i++) s[i] = (char)rnd();
    }
    nn_strbuf sb;
    nn_strbuf_init(&sb, NULL);
    nn_strbuf_append_json_string(&sb, s, n);
    nn_json *v = NULL;
    total++;
    if (parse_exact(&v, sb.data, sb.len, err) == NN_OK && v->type == NN_JSON_STRING &&
        v->str_len == n && memcmp(v->str, s, n) == 0)
      same++;
    else CHECK(0, "byte string %d did not round-trip: %s", k, err);
    nn_json_free(v);
    nn_strbuf_free(&sb);
  }
  printf("writer: %d of %d byte strings read back identical\n", same, total);
  /* doubles and floats, bit for bit */
  int dsame = 0, fsame = 0;
  for (int k = 0; k < 20000; k++) {
    uint64_t bits = rnd();
    double d;
    memcpy(&d, &bits, 8);
    if (!isfinite(d)) continue;
    uint32_t fbits = (uint32_t)rnd();
    float f;
    memcpy(&f, &fbits, 4);
    if (!isfinite(f)) f = 0.5f;
    nn_strbuf sb;
    nn_strbuf_init(&sb, NULL);
    nn_strbuf_append_double(&sb, d);
    nn_json *v = NULL;
    if (parse_exact(&v, sb.data, sb.len, err) == NN_OK && memcmp(&v->number, &d, 8) == 0) dsame++;
    else CHECK(0, "double %.17g written as %s", d, sb.data);
    nn_json_free(v);
    sb.len = 0;
    nn_strbuf_append_float(&sb, f);
    float back = strtof(sb.data, NULL);
    if (memcmp(&back, &f, 4) == 0 && strlen(sb.data) <= 15) fsame++;
    else CHECK(0, "float %.9g written as %s", f, sb.data);
    nn_strbuf_free(&sb);
  }
  printf("writer: %d doubles and %d floats read back bit-identical\n", dsame, fsame);
  nn_strbuf sb;
  nn_strbuf_init(&sb, NULL);
  nn_strbuf_append_float(&sb, 1e-3f);
  nn_strbuf_puts(&sb, " ");
  nn_strbuf_append_float(&sb, 0.1f);
  nn_strbuf_puts(&sb, " ");
  nn_strbuf_append_double(&sb, 0.1);
  nn_strbuf_puts(&sb, " ");
  nn_strbuf_append_double(&sb, NAN);
  nn_strbuf_puts(&sb, " ");
  nn_strbuf_append_float(&sb, -INFINITY);
  nn_strbuf_printf(&sb, " %d %s", 42, "end");
  CHECK(strcmp(sb.data, "0.001 0.1 0.1 null null 42 end") == 0, "short forms: %s", sb.data);
  char *taken = nn_strbuf_take(&sb);
  CHECK(taken && sb.data == NULL && sb.len == 0, "take leaves the buffer empty");
  free(taken);
  taken = nn_strbuf_take(&sb);
  CHECK(taken && taken[0] == 0, "take of an empty buffer is \"\"");
  free(taken);
  /* a long printf */
  char big[1000];
  memset(big, 'q', sizeof big - 1);
  big[sizeof big - 1] = 0;
  nn_strbuf_printf(&sb, "<%s>", big);
  CHECK(sb.len == 1001 && sb.data[0] == '<' && sb.data[1000] == '>' && sb.data[1001] == 0,
        "long printf");
  nn_strbuf_free(&sb);
}

static void test_quote(void) {
  char out[32];
  nn_json_quote_for_message(out, sizeof out, "a\"b\\c\nd\x01\xff\xc3\xa9", 11);
  CHECK(strcmp(out, "\"a\\\"b\\\\c\\nd\\x01\\xff\xc3\xa9\"") == 0, "quoted: %s", out);
  nn_json_quote_for_message(out, 16, "abcdefghijklmnopqrstuvwxyz", 26);
  CHECK(strcmp(out, "\"abcdefghij...\"") == 0 && strlen(out) < 16, "cut: %s", out);
  nn_json_quote_for_message(out, 12, "\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac", 9);
  CHECK(strcmp(out, "\"\xe2\x82\xac\xe2\x82\xac...\"") == 0, "cut between UTF-8 sequences: %s",
        out);
}

/* Keys compared byte for byte; whole numbers however they are written. */
static void test_keys_and_integers(void) {
  static const char doc[] = "{\"seed\\u0000x\":1,\"seed\":2,\"a\":1e3,\"b\":100.0,\"c\":2.5,"
                            "\"d\":9007199254740993,\"e\":1e300,\"f\":-4,\"g\":\"3\"}";
  nn_json *v = NULL;
  char err[NN_ERR_LEN];
  CHECK(parse_exact(&v, doc, strlen(doc), err) == NN_OK, "parse: %s", err);
  if (!v) return;
  CHECK(!nn_json_key_is(&v->items[0], "seed") && nn_json_key_is(&v->items[1], "seed") &&
            nn_json_get(v, "seed") == &v->items[1],
        "\"seed\\u0000x\" is not \"seed\"");
  int64_t x = 0;
  CHECK(nn_json_integral(nn_json_get(v, "a"), &x) && x == 1000, "1e3: %lld", (long long)x);
  CHECK(nn_json_integral(nn_json_get(v, "b"), &x) && x == 100, "100.0: %lld", (long long)x);
  CHECK(!nn_json_integral(nn_json_get(v, "c"), &x), "2.5 is not whole");
  CHECK(nn_json_integral(nn_json_get(v, "d"), &x) && x == 9007199254740993LL,
        "an integer written out is exact beyond 2^53: %lld", (long long)x);
  CHECK(!nn_json_integral(nn_json_get(v, "e"), &x), "1e300 is beyond 2^53");
  CHECK(nn_json_integral(nn_json_get(v, "f"), &x) && x == -4, "-4: %lld", (long long)x);
  CHECK(!nn_json_integral(nn_json_get(v, "g"), &x) && !nn_json_integral(NULL, &x),
        "a string, or no value, is no number");
  nn_json_free(v);
}

int main(void) {
  test_valid();
  test_keys_and_integers();
  test_invalid();
  test_limits();
  test_prefixes();
  test_writer();
  test_quote();
  return check_finish("test_json");
}
