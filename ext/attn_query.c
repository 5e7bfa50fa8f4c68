/* attn_query.c -- a query given as text to a table-valued function (attn_train, attn_fit,
 * attn_evaluate, attn_confusion, attn_classify) and the rows it returns: preparing it safely
 * (one read-only statement, no parameters, enough columns) and reading its rows in chunks. */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "attn_ext.h"

int attn_prepare_query(sqlite3 *db, const char *fn, const char *sql, int min_cols, const char *cols,
                       sqlite3_stmt **out, char **errmsg) {
  sqlite3_stmt *stmt = NULL;
  const char *tail = NULL;
  *out = NULL;
  if (!sql) {
    *errmsg = sqlite3_mprintf("%s: the query must be text (a SELECT statement)", fn);
    return SQLITE_ERROR;
  }
  if (sqlite3_prepare_v2(db, sql, -1, &stmt, &tail) != SQLITE_OK) {
    *errmsg = sqlite3_mprintf("%s: cannot prepare the query: %s", fn, sqlite3_errmsg(db));
    return SQLITE_ERROR;
  }
  if (!stmt) {
    *errmsg = sqlite3_mprintf("%s: the query is empty", fn);
    return SQLITE_ERROR;
  }
  /* Anything after the statement must be empty to SQLite itself: preparing it yields no
   * statement exactly when it holds only white space, semicolons and comments. */
  int more = 0;
  while (tail && *tail && !more) {
    sqlite3_stmt *next = NULL;
    const char *after = NULL;
    if (sqlite3_prepare_v2(db, tail, -1, &next, &after) != SQLITE_OK || next) more = 1;
    else if (after == tail) break;
    else tail = after;
    sqlite3_finalize(next);
  }
  if (more) {
    while (*tail == ' ' || *tail == '\t' || *tail == '\n' || *tail == '\r' || *tail == ';') tail++;
    sqlite3_finalize(stmt);
    *errmsg = sqlite3_mprintf(
        "%s: the query must be a single statement, found more after it: %.40s", fn, tail);
    return SQLITE_ERROR;
  }
  /* A parameter (?, ?1, :name, @name, $name) would be NULL: nothing binds it. */
  if (sqlite3_bind_parameter_count(stmt) > 0) {
    const char *param = sqlite3_bind_parameter_name(stmt, 1); /* owned by stmt */
    *errmsg = sqlite3_mprintf("%s: the query has parameters (%s); nothing binds them here: put "
                              "the values in the query text (e.g. with format() or quote()) or "
                              "in a table it reads",
                              fn, param ? param : "?");
    sqlite3_finalize(stmt);
    return SQLITE_ERROR;
  }
  if (!sqlite3_stmt_readonly(stmt)) {
    sqlite3_finalize(stmt);
    *errmsg = sqlite3_mprintf("%s: the query must be read-only (a SELECT)", fn);
    return SQLITE_ERROR;
  }
  if (sqlite3_column_count(stmt) < min_cols) {
    int n = sqlite3_column_count(stmt);
    sqlite3_finalize(stmt);
    *errmsg = sqlite3_mprintf("%s: the query must return at least %d columns %s, it returns %d", fn,
                              min_cols, cols, n);
    return SQLITE_ERROR;
  }
  *out = stmt;
  return SQLITE_OK;
}

/* ------------------------------------------------------------------ rows of a query, in chunks */

void attn_rows_free(attn_rows *r) {
  for (int i = 0; i < r->n; i++) sqlite3_value_free(r->keys ? r->keys[i] : NULL);
  sqlite3_free(r->keys);
  sqlite3_free(r->data);
  sqlite3_free(r->texts);
  sqlite3_free(r->lens);
  sqlite3_free(r->labels);
  sqlite3_free(r->label_lens);
  memset(r, 0, sizeof *r);
}

/* Append a copy of (p, len) to r->data; returns its offset or -1 on OOM. */
static sqlite3_int64 attn_rows_append(attn_rows *r, const char *p, int len) {
  sqlite3_uint64 need = r->used + (sqlite3_uint64)len + 1;
  if (need > r->cap) {
    sqlite3_uint64 cap = r->cap ? 2 * r->cap : 65536;
    while (cap < need) cap *= 2;
    char *data = sqlite3_realloc64(r->data, cap);
    if (!data) return -1;
    r->data = data;
    r->cap = cap;
  }
  sqlite3_int64 off = (sqlite3_int64)r->used;
  if (len) memcpy(r->data + r->used, p, (size_t)len);
  r->used += (sqlite3_uint64)len;
  r->data[r->used++] = 0;
  return off;
}

int attn_rows_read(attn_rows *r, sqlite3_stmt *stmt, int mode, int max_rows, int *done,
                   const char *fn, char **errmsg) {
  sqlite3 *db = sqlite3_db_handle(stmt);
  int text_col = mode == ATTN_ROWS_ID_TEXT ? 1 : 0, rc;
  /* reset the chunk (keep buffers) */
  for (int i = 0; i < r->n; i++) sqlite3_value_free(r->keys ? r->keys[i] : NULL);
  r->n = 0;
  r->used = 0;
  r->nlabels_seen = 0;
  *done = 0;
  /* While reading, texts[i] / labels[i] hold offsets into data (which moves as it grows), as
   * integers; they become pointers once the chunk is read (training keeps its rows packed
   * instead: attn_train_rows). */
  while (r->n < max_rows) {
    rc = sqlite3_step(stmt);
    if (rc == SQLITE_DONE) {
      *done = 1;
      break;
    }
    if (rc != SQLITE_ROW) {
      *errmsg = sqlite3_mprintf("%s: the query failed: %s", fn, sqlite3_errmsg(db));
      return rc;
    }
    if (r->n == r->cap_rows) {
      int cap = r->cap_rows ? (r->cap_rows > INT_MAX / 2 ? INT_MAX : 2 * r->cap_rows) : 1024;
      sqlite3_uint64 c = (sqlite3_uint64)cap;
      const char **texts = sqlite3_realloc64((void *)r->texts, sizeof *texts * c);
      if (texts) r->texts = texts;
      int *lens = sqlite3_realloc64(r->lens, sizeof *lens * c);
      if (lens) r->lens = lens;
      const char **labels = sqlite3_realloc64((void *)r->labels, sizeof *labels * c);
      if (labels) r->labels = labels;
      int *label_lens = sqlite3_realloc64(r->label_lens, sizeof *label_lens * c);
      if (label_lens) r->label_lens = label_lens;
      if (!texts || !lens || !labels || !label_lens) return SQLITE_NOMEM;
      if (mode == ATTN_ROWS_ID_TEXT) {
        sqlite3_value **keys = sqlite3_realloc64(r->keys, sizeof *keys * c);
        if (!keys) return SQLITE_NOMEM;
        r->keys = keys;
      }
      r->cap_rows = cap;
    }
    int i = r->n;
    if (mode == ATTN_ROWS_ID_TEXT) {
      r->keys[i] = sqlite3_value_dup(sqlite3_column_value(stmt, 0));
      if (!r->keys[i]) return SQLITE_NOMEM;
    }
    r->n++;
    const char *text = (const char *)sqlite3_column_text(stmt, text_col);
    int len = sqlite3_column_bytes(stmt, text_col);
    r->lens[i] = -1; /* NULL */
    r->label_lens[i] = -1;
    if (sqlite3_column_type(stmt, text_col) == SQLITE_NULL) {
      if (mode == ATTN_ROWS_TEXT_LABEL) {
        *errmsg =
            sqlite3_mprintf("%s: row %d of the query has a NULL text", fn, r->first_row + i + 1);
        return SQLITE_ERROR;
      }
    } else {
      if (!text) return SQLITE_NOMEM;
      sqlite3_int64 off = attn_rows_append(r, text, len);
      if (off < 0) return SQLITE_NOMEM;
      r->texts[i] = (const char *)(uintptr_t)off;
      r->lens[i] = len;
    }
    if (mode == ATTN_ROWS_TEXT_LABEL) {
      if (sqlite3_column_type(stmt, 1) == SQLITE_NULL) {
        *errmsg =
            sqlite3_mprintf("%s: row %d of the query has a NULL label", fn, r->first_row + i + 1);
        return SQLITE_ERROR;
      }
      const char *label = (const char *)sqlite3_column_text(stmt, 1);
      int label_len = sqlite3_column_bytes(stmt, 1);
      if (!label) return SQLITE_NOMEM;
      /* a handful of labels repeat over all rows: store each distinct one once (the last
       * ATTN_ROWS_LABELS distinct ones are looked at) */
      sqlite3_int64 off = -1;
      int seen = r->nlabels_seen < ATTN_ROWS_LABELS ? r->nlabels_seen : ATTN_ROWS_LABELS;
      for (int k = 0; k < seen && off < 0; k++)
        if (r->label_seen_len[k] == label_len &&
            memcmp(r->data + r->label_seen[k], label, (size_t)label_len) == 0)
          off = r->label_seen[k];
      if (off < 0) {
        if ((off = attn_rows_append(r, label, label_len)) < 0) return SQLITE_NOMEM;
        int k = r->nlabels_seen++ % ATTN_ROWS_LABELS; /* the oldest goes */
        if (r->nlabels_seen == INT_MAX) r->nlabels_seen = ATTN_ROWS_LABELS;
        r->label_seen[k] = off;
        r->label_seen_len[k] = label_len;
      }
      r->labels[i] = (const char *)(uintptr_t)off;
      r->label_lens[i] = label_len;
    }
  }
  /* Pointers into data (stable now that the chunk is read). */
  for (int i = 0; i < r->n; i++) {
    r->texts[i] = r->lens[i] >= 0 ? r->data + (uintptr_t)r->texts[i] : NULL;
    if (r->lens[i] < 0) r->lens[i] = 0;
    r->labels[i] = r->label_lens[i] >= 0 ? r->data + (uintptr_t)r->labels[i] : NULL;
    if (r->label_lens[i] < 0) r->label_lens[i] = 0;
  }
  r->first_row += r->n;
  return SQLITE_OK;
}

int attn_query_step(attn_conn *conn, sqlite3_stmt *stmt, const char *fn) {
  attn_conn_query_begin(conn, fn);
  int rc = sqlite3_step(stmt);
  attn_conn_query_end(conn);
  return rc;
}

/* ------------------------------------------------------------------ the rows of a training run */

/* attn_train_rows (attn_ext.h): the texts back to back in blocks of at most ROWS_PER_BLOCK rows
 * and BLOCK_BYTES bytes (a longer text: a block of its own), each allocated once and shrunk to
 * what it holds when the next one begins -- no array of all rows grows by copying, so glibc
 * leaves no freed copies behind in the heap (they count in the process's peak). */

#define ROWS_PER_BLOCK 4096
#define BLOCK_BYTES ((uint32_t)1 << 20)

/* A block's texts and row arrays freed (NULL after: freeing it again does nothing). */
static void attn_row_block_free(attn_row_block *k) {
  sqlite3_free(k->bytes);
  sqlite3_free(k->starts);
  sqlite3_free(k->labels16);
  sqlite3_free(k->labels32);
  k->bytes = NULL;
  k->starts = NULL;
  k->labels16 = NULL;
  k->labels32 = NULL;
}

void attn_train_rows_free(attn_train_rows *r) {
  for (int b = 0; b < r->nblocks; b++) attn_row_block_free(&r->blocks[b]);
  sqlite3_free(r->blocks);
  sqlite3_free(r->label_bytes);
  sqlite3_free(r->label_start);
  sqlite3_free(r->label_len);
  sqlite3_free(r->label_slots);
  memset(r, 0, sizeof *r);
}

/* The block being filled gives back what it did not use (a failed shrink keeps it all). */
static void attn_train_rows_close(attn_train_rows *r) {
  if (!r->open) return;
  r->open = 0; /* rows appended later (validation_query's) go to a new block */
  attn_row_block *b = &r->blocks[r->nblocks - 1];
  if (b->used < b->cap) {
    char *bytes = sqlite3_realloc64(b->bytes, b->used ? b->used : 1);
    if (bytes) b->bytes = bytes, b->cap = b->used;
  }
  if (b->n < ROWS_PER_BLOCK) {
    sqlite3_uint64 n = (sqlite3_uint64)(b->n ? b->n : 1);
    uint32_t *starts = sqlite3_realloc64(b->starts, n * sizeof *starts);
    if (starts) b->starts = starts;
    if (b->labels16) {
      uint16_t *labels = sqlite3_realloc64(b->labels16, n * sizeof *labels);
      if (labels) b->labels16 = labels;
    } else {
      uint32_t *labels = sqlite3_realloc64(b->labels32, n * sizeof *labels);
      if (labels) b->labels32 = labels;
    }
  }
}

/* A block for the next row, whose text has len bytes: the current one when the row fits, else
 * a new one (its row arrays first, then its bytes: shrinking the bytes leaves no hole). */
static attn_row_block *attn_train_rows_block(attn_train_rows *r, int len) {
  attn_row_block *b = r->open ? &r->blocks[r->nblocks - 1] : NULL;
  if (b && b->n < ROWS_PER_BLOCK && (uint64_t)b->used + (uint64_t)len <= b->cap) return b;
  attn_train_rows_close(r);
  if (r->nblocks == r->cap_blocks) {
    int cap = r->cap_blocks ? 2 * r->cap_blocks : 16;
    attn_row_block *blocks = sqlite3_realloc64(r->blocks, (sqlite3_uint64)cap * sizeof *blocks);
    if (!blocks) return NULL;
    r->blocks = blocks;
    r->cap_blocks = cap;
  }
  b = &r->blocks[r->nblocks];
  memset(b, 0, sizeof *b);
  b->first = r->n;
  b->cap = (uint32_t)len > BLOCK_BYTES ? (uint32_t)len : BLOCK_BYTES;
  b->starts = sqlite3_malloc64(ROWS_PER_BLOCK * sizeof *b->starts);
  if (r->nlabels > 65536) b->labels32 = sqlite3_malloc64(ROWS_PER_BLOCK * sizeof *b->labels32);
  else b->labels16 = sqlite3_malloc64(ROWS_PER_BLOCK * sizeof *b->labels16);
  b->bytes = b->starts && (b->labels16 || b->labels32) ? sqlite3_malloc64(b->cap) : NULL;
  if (!b->bytes) {
    sqlite3_free(b->starts);
    sqlite3_free(b->labels16);
    sqlite3_free(b->labels32);
    return NULL;
  }
  r->nblocks++;
  r->open = 1;
  return b;
}

/* The number of the label (bytes, len) in r's table of distinct labels, added when new; -1 when
 * out of memory. */
static int attn_train_rows_intern(attn_train_rows *r, const char *bytes, int len) {
  if (r->nlabels && r->label_len[r->last_label] == len &&
      memcmp(r->label_bytes + r->label_start[r->last_label], bytes, (size_t)len) == 0)
    return r->last_label; /* most rows: the label of the row before, or of one soon before */
  if (!r->label_slots) {
    r->key = nn_hash_key_new(r);
    r->label_mask = 15;
    r->label_slots = sqlite3_malloc64(16 * sizeof *r->label_slots);
    if (!r->label_slots) return -1;
    memset(r->label_slots, 0xff, 16 * sizeof *r->label_slots);
  }
  uint32_t h = nn_hash_bytes(&r->key, bytes, len) & r->label_mask;
  int e;
  while ((e = r->label_slots[h]) >= 0 &&
         (r->label_len[e] != len ||
          memcmp(r->label_bytes + r->label_start[e], bytes, (size_t)len) != 0))
    h = (h + 1) & r->label_mask;
  if (e >= 0) return r->last_label = e;
  if (r->nlabels == r->cap_labels) {
    int cap = r->cap_labels ? 2 * r->cap_labels : 16;
    sqlite3_uint64 *start = sqlite3_realloc64(r->label_start, (sqlite3_uint64)cap * sizeof *start);
    if (start) r->label_start = start;
    int *lens = sqlite3_realloc64(r->label_len, (sqlite3_uint64)cap * sizeof *lens);
    if (lens) r->label_len = lens;
    if (!start || !lens) return -1;
    r->cap_labels = cap;
  }
  if (!r->label_bytes || r->label_used + (sqlite3_uint64)len > r->label_cap) {
    sqlite3_uint64 cap = r->label_cap ? 2 * r->label_cap : 256;
    while (cap < r->label_used + (sqlite3_uint64)len) cap *= 2;
    char *more = sqlite3_realloc64(r->label_bytes, cap);
    if (!more) return -1;
    r->label_bytes = more;
    r->label_cap = cap;
  }
  if (len) memcpy(r->label_bytes + r->label_used, bytes, (size_t)len);
  r->label_start[r->nlabels] = r->label_used;
  r->label_len[r->nlabels] = len;
  r->label_used += (sqlite3_uint64)len;
  e = r->nlabels++;
  r->label_slots[h] = e;
  if ((uint32_t)r->nlabels * 2 > r->label_mask + 1) { /* half full: double the table */
    uint32_t size = (r->label_mask + 1) * 2;
    int *slots = sqlite3_malloc64((sqlite3_uint64)size * sizeof *slots);
    if (!slots) return -1;
    memset(slots, 0xff, (size_t)size * sizeof *slots);
    for (int k = 0; k < r->nlabels; k++) {
      uint32_t j =
          nn_hash_bytes(&r->key, r->label_bytes + r->label_start[k], r->label_len[k]) & (size - 1);
      while (slots[j] >= 0) j = (j + 1) & (size - 1);
      slots[j] = k;
    }
    sqlite3_free(r->label_slots);
    r->label_slots = slots;
    r->label_mask = size - 1;
  }
  return r->last_label = e;
}

/* Column col of the current row as text: an error naming the row when it is NULL ("row 3 of the
 * query has a NULL label"), SQLITE_NOMEM when SQLite cannot convert it. */
static int attn_column_text(sqlite3_stmt *stmt, int col, const char *what, int row, const char *fn,
                            const char **text, int *len, char **errmsg) {
  if (sqlite3_column_type(stmt, col) == SQLITE_NULL) {
    *errmsg = sqlite3_mprintf("%s: row %d of the query has a NULL %s", fn, row, what);
    return SQLITE_ERROR;
  }
  *text = (const char *)sqlite3_column_text(stmt, col);
  *len = sqlite3_column_bytes(stmt, col);
  return *text ? SQLITE_OK : SQLITE_NOMEM;
}

/* One row (text, label) appended to r. */
static int attn_train_rows_append(attn_train_rows *r, const char *text, int len, const char *label,
                                  int label_len, const char *fn, char **errmsg) {
  if (r->n == INT_MAX) {
    *errmsg = sqlite3_mprintf("%s: too many rows", fn);
    return SQLITE_ERROR;
  }
  int id = attn_train_rows_intern(r, label, label_len);
  attn_row_block *b = id < 0 ? NULL : attn_train_rows_block(r, len);
  if (!b) return SQLITE_NOMEM;
  if (id > 65535 && b->labels16) { /* this block's labels now need 32 bits */
    uint32_t *wide = sqlite3_malloc64(ROWS_PER_BLOCK * sizeof *wide);
    if (!wide) return SQLITE_NOMEM;
    for (int k = 0; k < b->n; k++) wide[k] = b->labels16[k];
    sqlite3_free(b->labels16);
    b->labels16 = NULL;
    b->labels32 = wide;
  }
  if (len) memcpy(b->bytes + b->used, text, (size_t)len);
  b->starts[b->n] = b->used;
  if (b->labels16) b->labels16[b->n] = (uint16_t)id;
  else b->labels32[b->n] = (uint32_t)id;
  b->used += (uint32_t)len;
  b->n++;
  r->n++;
  return SQLITE_OK;
}

int attn_train_rows_read(attn_train_rows *r, sqlite3_stmt *stmt, const char *fn, char **errmsg,
                         attn_train_rows *unlabelled, int *skipped) {
  sqlite3 *db = sqlite3_db_handle(stmt);
  int rc = SQLITE_OK;
  for (int row = 1;; row++) { /* row: of this query, for messages */
    rc = sqlite3_step(stmt);
    if (rc == SQLITE_DONE) {
      rc = SQLITE_OK;
      break;
    }
    if (rc != SQLITE_ROW) {
      *errmsg = sqlite3_mprintf("%s: the query failed: %s", fn, sqlite3_errmsg(db));
      break;
    }
    const char *text, *label;
    int len, label_len;
    rc = attn_column_text(stmt, 0, "text", row, fn, &text, &len, errmsg);
    if (rc != SQLITE_OK) break;
    attn_train_rows *into = r;
    if (sqlite3_column_type(stmt, 1) == SQLITE_NULL && (unlabelled || skipped)) {
      if (!unlabelled) {
        if (*skipped < INT_MAX) ++*skipped;
        continue;
      }
      into = unlabelled; /* its rows all have the label "" */
      label = "";
      label_len = 0;
    } else {
      rc = attn_column_text(stmt, 1, "label", row, fn, &label, &label_len, errmsg);
      if (rc != SQLITE_OK) break;
    }
    rc = attn_train_rows_append(into, text, len, label, label_len, fn, errmsg);
    if (rc != SQLITE_OK) break;
  }
  attn_train_rows_close(r);
  if (unlabelled) attn_train_rows_close(unlabelled);
  return rc;
}

int attn_train_rows_copy(attn_train_rows *dst, const attn_train_rows *src, int i) {
  int len, label_len;
  const char *text = attn_train_rows_text(src, i, &len);
  const char *label = attn_train_rows_label(src, i, &label_len);
  char *ignored = NULL; /* "too many rows": dst holds fewer rows than src */
  int rc = attn_train_rows_append(dst, text, len, label, label_len, "", &ignored);
  sqlite3_free(ignored);
  return rc == SQLITE_OK ? SQLITE_OK : SQLITE_NOMEM;
}

void attn_train_rows_seal(attn_train_rows *r) { attn_train_rows_close(r); }

void attn_train_rows_release(attn_train_rows *r, int end) {
  for (; r->released < r->nblocks; r->released++) { /* from the first block not yet freed */
    attn_row_block *k = &r->blocks[r->released];
    if (k->first + k->n > end) break; /* the blocks are in row order */
    if (r->open && r->released == r->nblocks - 1) break;
    attn_row_block_free(k);
  }
}

/* The block of row i (0 <= i < r->n). */
static const attn_row_block *attn_train_rows_find(const attn_train_rows *r, int i) {
  int lo = 0, hi = r->nblocks - 1;
  while (lo < hi) { /* the last block whose first row is <= i */
    int mid = (lo + hi + 1) / 2;
    if (r->blocks[mid].first <= i) lo = mid;
    else hi = mid - 1;
  }
  return &r->blocks[lo];
}

const char *attn_train_rows_text(const attn_train_rows *r, int i, int *len) {
  const attn_row_block *b = attn_train_rows_find(r, i);
  int k = i - b->first;
  uint32_t end = k + 1 < b->n ? b->starts[k + 1] : b->used;
  *len = (int)(end - b->starts[k]);
  return b->bytes + b->starts[k];
}

int attn_train_rows_label_id(const attn_train_rows *r, int i) {
  const attn_row_block *b = attn_train_rows_find(r, i);
  int k = i - b->first;
  return b->labels16 ? b->labels16[k] : (int)b->labels32[k];
}

const char *attn_train_rows_label(const attn_train_rows *r, int i, int *len) {
  int id = attn_train_rows_label_id(r, i);
  *len = r->label_len[id];
  return r->label_bytes + r->label_start[id];
}
