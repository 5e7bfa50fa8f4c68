/* attn_vectors.c -- pretrained word vectors (GloVe) into the database: the table-valued
 * function attn_vectors_load(path), one row per word, read from the file as the rows are read.
 *
 *   CREATE TABLE glove AS SELECT * FROM attn_vectors_load('glove.6B.50d.txt');
 *   --  word TEXT | vector BLOB (dim little-endian float32: 4 * dim bytes)
 *   SELECT word, length(vector) / 4 AS dim FROM glove LIMIT 3;
 *
 * Format: GloVe's text format, `word v1 v2 ... vd` per line, fields separated by spaces or tabs;
 * every line must have the same number d of numbers (1 to 4096), finite decimal numbers. Blank
 * lines are skipped, and so is a first line of two integers (word2vec's "count dim" header).
 * A bad line stops the statement with an error naming the file, the line and what was wrong:
 *   attn_vectors_load: line 3 of 'glove.txt': expected 50 numbers after the word (as line 1), got 49
 * (Rows are produced as the file is read, so rows before a bad line were already returned; a
 * CREATE TABLE ... AS SELECT fails as a whole.)
 * Reading a file is a capability: the function is direct-only (never from a trigger or a view).
 *
 * Such a table is what attn_train's option "embeddings" names (attn_options.c).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attn_ext.h"
#include "compat.h" /* the C locale's numbers, opening a path */

#define VECTORS_MAX_DIM ATTN_VECTORS_MAX_DIM
#define VECTORS_MAX_LINE (1 << 20) /* bytes, refused as soon as a line is longer */

typedef struct vec_cursor {
  sqlite3_vtab_cursor base;
  attn_interrupt interrupt; /* skipped lines check for sqlite3_interrupt */
  FILE *file;
  char *path;
  char *line;
  size_t line_cap;
  sqlite3_int64 line_no, row;
  int dim, dim_line;
  char *word; /* points into line */
  int word_len;
  float *vector; /* (dim) */
  int eof;
  nn_c_locale c_locale; /* numbers are read with '.' whatever the host's locale */
} vec_cursor;

/* Columns; the argument is the hidden column at the end. */
enum { ATTN_VECTORS_COL_WORD, ATTN_VECTORS_COL_VECTOR, ATTN_VECTORS_COL_ARG_PATH };
static const char attn_vectors_schema[] = "CREATE TABLE x(word TEXT, vector BLOB, arg_path HIDDEN)";

static int vec_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                       sqlite3_vtab **out, char **errmsg) {
  return attn_vtab_connect(db, attn_vectors_schema, SQLITE_VTAB_DIRECTONLY, /* reads a file */
                           aux, 0, sizeof(vec_cursor), out);
}

static int vec_best_index(sqlite3_vtab *vtab, sqlite3_index_info *info) {
  return attn_vtab_best_index(vtab, info, ATTN_VECTORS_COL_ARG_PATH, 1, 1,
                              "attn_vectors_load: expected 1 argument: attn_vectors_load(path)");
}

static void vec_reset(vec_cursor *cur) {
  if (cur->file) fclose(cur->file);
  cur->file = NULL;
  sqlite3_free(cur->path);
  cur->path = NULL;
  sqlite3_free(cur->line);
  cur->line = NULL;
  cur->line_cap = 0;
  sqlite3_free(cur->vector);
  cur->vector = NULL;
  cur->line_no = cur->row = 0;
  cur->dim = cur->dim_line = 0;
  cur->eof = 1;
}

static int vec_close(sqlite3_vtab_cursor *base) {
  vec_cursor *cur = (vec_cursor *)base;
  vec_reset(cur);
  attn_interrupt_end(&cur->interrupt);
  if (cur->c_locale) nn_c_locale_free(cur->c_locale);
  sqlite3_free(cur);
  return SQLITE_OK;
}

static int vec_fail(vec_cursor *cur, char *msg) {
  cur->eof = 1;
  return attn_vtab_fail(cur->base.pVtab, msg ? SQLITE_ERROR : SQLITE_NOMEM, msg,
                        "attn_vectors_load");
}

static int is_blank(char c) { return c == ' ' || c == '\t'; }

static int is_integer(const char *s, int len) {
  if (len <= 0) return 0;
  for (int i = 0; i < len; i++)
    if (s[i] < '0' || s[i] > '9') return 0;
  return 1;
}

/* One line (with its newline, NUL-terminated) into cur->line: its length; -1 at the end of the
 * file, -2 on a read error, -3 out of memory, -4 as soon as the line is longer than
 * VECTORS_MAX_LINE bytes (the rest is not read). */
static ssize_t vec_getline(vec_cursor *cur) {
  size_t n = 0;
  int c = 0;
  while ((c = nn_getc_unlocked(cur->file)) != EOF) {
    if (n + 2 > cur->line_cap) {
      if (n > VECTORS_MAX_LINE) return -4;
      size_t cap = cur->line_cap ? 2 * cur->line_cap : 4096;
      if (cap > VECTORS_MAX_LINE + 2) cap = VECTORS_MAX_LINE + 2;
      char *line = sqlite3_realloc64(cur->line, cap);
      if (!line) return -3;
      cur->line = line;
      cur->line_cap = cap;
    }
    cur->line[n++] = (char)c;
    if (c == '\n') break;
  }
  if (c == EOF && ferror(cur->file)) return -2;
  if (n == 0) return -1;
  if (n > VECTORS_MAX_LINE + (cur->line[n - 1] == '\n')) return -4;
  cur->line[n] = 0;
  return (ssize_t)n;
}

/* Read lines until the next word (or the end of the file). */
static int vec_read(vec_cursor *cur) {
  const char *fn = "attn_vectors_load";
  for (;;) {
    errno = 0;
    if (attn_interrupted(&cur->interrupt, 1024))
      return vec_fail(cur, sqlite3_mprintf("%s: interrupted", fn));
    ssize_t got = vec_getline(cur);
    if (got == -1) {
      cur->eof = 1;
      return SQLITE_OK;
    }
    if (got == -2)
      return vec_fail(cur, sqlite3_mprintf("%s: cannot read '%s' after line %lld: %s", fn,
                                           cur->path, (long long)cur->line_no, strerror(errno)));
    if (got == -3) return vec_fail(cur, NULL);
    cur->line_no++;
    if (got == -4)
      return vec_fail(cur, sqlite3_mprintf("%s: line %lld of '%s' is longer than %d bytes", fn,
                                           (long long)cur->line_no, cur->path, VECTORS_MAX_LINE));
    if (memchr(cur->line, 0, (size_t)got))
      return vec_fail(cur, sqlite3_mprintf("%s: line %lld of '%s' holds a NUL byte (not a text "
                                           "file?)",
                                           fn, (long long)cur->line_no, cur->path));
    char *s = cur->line, *end = s + got;
    while (end > s && (end[-1] == '\n' || end[-1] == '\r')) end--;
    while (end > s && is_blank(end[-1])) end--;
    *end = 0;
    char *p = s;
    while (p < end && is_blank(*p)) p++;
    if (p == end) continue; /* blank line */
    char *word = p;
    while (p < end && !is_blank(*p)) p++;
    int word_len = (int)(p - word);
    /* the numbers */
    int count = 0;
    char *fields = p;
    for (char *q = p; q < end;) {
      while (q < end && is_blank(*q)) q++;
      if (q >= end) break;
      while (q < end && !is_blank(*q)) q++;
      count++;
    }
    if (cur->row == 0 && cur->dim == 0 && count == 1 && is_integer(word, word_len)) {
      char *q = fields;
      while (is_blank(*q)) q++;
      if (is_integer(q, (int)(end - q))) continue; /* word2vec header "count dim" */
    }
    if (count == 0)
      return vec_fail(cur, sqlite3_mprintf("%s: line %lld of '%s': expected a word and its "
                                           "numbers, got only '%.40s'",
                                           fn, (long long)cur->line_no, cur->path, word));
    if (cur->dim == 0) {
      if (count > VECTORS_MAX_DIM)
        return vec_fail(cur, sqlite3_mprintf("%s: line %lld of '%s' has %d numbers, at most %d "
                                             "dimensions are supported",
                                             fn, (long long)cur->line_no, cur->path, count,
                                             VECTORS_MAX_DIM));
      cur->dim = count;
      cur->dim_line = (int)cur->line_no;
      cur->vector = sqlite3_malloc64((sqlite3_uint64)count * sizeof *cur->vector);
      if (!cur->vector) return vec_fail(cur, NULL);
    } else if (count != cur->dim) {
      return vec_fail(cur, sqlite3_mprintf("%s: line %lld of '%s': expected %d numbers after the "
                                           "word (as line %d), got %d",
                                           fn, (long long)cur->line_no, cur->path, cur->dim,
                                           cur->dim_line, count));
    }
    char *q = fields;
    for (int k = 0; k < count; k++) {
      while (is_blank(*q)) q++;
      char *field = q;
      while (*q && !is_blank(*q)) q++;
      char save = *q, *stop = NULL;
      *q = 0;
      errno = 0;
      double v = nn_strtod_in(field, &stop, cur->c_locale);
      int ok = stop == q && stop != field && isfinite(v) && fabs(v) <= 3.4e38;
      if (!ok) {
        char *msg = sqlite3_mprintf("%s: line %lld of '%s': number %d of '%.*s' is not a finite "
                                    "number: '%.40s'",
                                    fn, (long long)cur->line_no, cur->path, k + 1,
                                    word_len > 60 ? 60 : word_len, word, field);
        return vec_fail(cur, msg);
      }
      *q = save;
      cur->vector[k] = (float)v;
    }
    word[word_len] = 0;
    cur->word = word;
    cur->word_len = word_len;
    cur->row++;
    cur->eof = 0;
    return SQLITE_OK;
  }
}

static int vec_filter(sqlite3_vtab_cursor *base, int idx_num, const char *idx_str, int argc,
                      sqlite3_value **argv) {
  vec_cursor *cur = (vec_cursor *)base;
  vec_reset(cur);
  const char *path = argc > 0 ? (const char *)sqlite3_value_text(argv[0]) : NULL;
  if (!path || !*path)
    return vec_fail(cur, sqlite3_mprintf("attn_vectors_load: the path must be a non-empty text, "
                                         "got %s",
                                         path ? "''" : "NULL"));
  cur->path = sqlite3_mprintf("%s", path);
  if (!cur->path) return vec_fail(cur, NULL);
  if (!cur->c_locale) cur->c_locale = nn_c_locale_new();
  if (!cur->c_locale) return vec_fail(cur, NULL);
  cur->interrupt.db = attn_conn_db(((attn_vtab *)base->pVtab)->conn);
  /* Regular files only: a FIFO would block (opened without O_NONBLOCK, and read), a device such
   * as /dev/zero never ends, a directory is no text. Opened without blocking, then checked. */
  int fd = nn_os_open_nonblock(path);
  if (fd < 0)
    return vec_fail(
        cur, sqlite3_mprintf("attn_vectors_load: cannot open '%s': %s", path, strerror(errno)));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return vec_fail(cur, sqlite3_mprintf("attn_vectors_load: '%s' is not a regular file (a "
                                         "directory, device, FIFO or socket cannot be read)",
                                         path));
  }
  nn_os_clear_nonblock(fd);
  cur->file = fdopen(fd, "rb");
  if (!cur->file) {
    close(fd);
    return vec_fail(cur, NULL);
  }
  return vec_read(cur);
}

static int vec_next(sqlite3_vtab_cursor *base) { return vec_read((vec_cursor *)base); }

static int vec_eof(sqlite3_vtab_cursor *base) { return ((vec_cursor *)base)->eof; }

static int vec_column(sqlite3_vtab_cursor *base, sqlite3_context *ctx, int col) {
  vec_cursor *cur = (vec_cursor *)base;
  if (col == ATTN_VECTORS_COL_WORD) {
    sqlite3_result_text(ctx, cur->word, cur->word_len, SQLITE_TRANSIENT);
  } else if (col == ATTN_VECTORS_COL_VECTOR) {
    unsigned char *blob = sqlite3_malloc64((sqlite3_uint64)cur->dim * 4);
    if (!blob) return SQLITE_NOMEM;
    attn_floats_to_le(blob, cur->vector, cur->dim);
    sqlite3_result_blob(ctx, blob, cur->dim * 4, sqlite3_free);
  } else if (col == ATTN_VECTORS_COL_ARG_PATH) {
    sqlite3_result_text(ctx, cur->path, -1, SQLITE_TRANSIENT);
  }
  return SQLITE_OK;
}

static int vec_rowid(sqlite3_vtab_cursor *base, sqlite_int64 *rowid) {
  *rowid = ((vec_cursor *)base)->row;
  return SQLITE_OK;
}

const sqlite3_module attn_vectors_module = {
    .iVersion = 0,
    .xCreate = NULL, /* eponymous only */
    .xConnect = vec_connect,
    .xBestIndex = vec_best_index,
    .xDisconnect = attn_vtab_disconnect,
    .xOpen = attn_vtab_open,
    .xClose = vec_close,
    .xFilter = vec_filter,
    .xNext = vec_next,
    .xEof = vec_eof,
    .xColumn = vec_column,
    .xRowid = vec_rowid,
};
