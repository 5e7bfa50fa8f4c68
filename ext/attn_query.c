/* attn_query.c -- a query given as text to a table-valued function (attn_train, attn_fit,
 * attn_evaluate, attn_confusion, attn_classify) and the rows it returns: preparing it safely
 * (one read-only statement, no parameters, enough columns) and reading its rows in chunks. */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "attn_ext.h"

int attn_prepare_query(sqlite3 *db, const char *fn, const char *sql, int min_cols,
                       const char *cols, sqlite3_stmt **out, char **errmsg) {
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
    *errmsg = sqlite3_mprintf("%s: the query must be a single statement, found more after it: %.40s",
                              fn, tail);
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
    *errmsg = sqlite3_mprintf("%s: the query must return at least %d columns %s, it returns %d",
                              fn, min_cols, cols, n);
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
   * integers; they become pointers once the chunk is read. No separate offset array: training
   * keeps every row, and its bytes per row are what a million rows cost. */
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
        *errmsg = sqlite3_mprintf("%s: row %d of the query has a NULL text", fn,
                                  r->first_row + i + 1);
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
        *errmsg = sqlite3_mprintf("%s: row %d of the query has a NULL label", fn,
                                  r->first_row + i + 1);
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
