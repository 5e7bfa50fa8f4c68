/* attn_ext.h -- what the files of the attnext SQLite extension share.
 *
 * Every SQL function and table-valued function of the extension gets the same per-connection
 * state (attn_conn) as its user data / module client data. It owns the model cache: a model is
 * parsed once per connection and (name, version), and the name -> deployed version resolution is
 * redone whenever the database may have changed (a new deployment, a new version or a deleted
 * row is seen by the next statement of every connection). See attn_conn.c.
 *
 * A function serving SQL looks a model up with attn_model_get (scalar functions: the model stays
 * valid until the call returns; with name_arg >= 0 the lookup is remembered for the rest of the
 * statement) or attn_model_acquire / attn_model_release (cursors that live across calls).
 */
#ifndef ATTNEXT_ATTN_EXT_H
#define ATTNEXT_ATTN_EXT_H

#include <sqlite3ext.h>
#include <stdint.h>

#include "nn.h"

#ifndef ATTN_EXT_NO_INIT3
SQLITE_EXTENSION_INIT3
#endif

typedef struct attn_conn attn_conn;

/* A cached, parsed model row. Fields are read-only for users. */
typedef struct attn_model {
  nn_model *nn;        /* the parsed network, config, vocabulary and labels */
  char *name;          /* model name */
  int64_t version;     /* version of that name */
  /* identity of the row it was parsed from (a row replaced under the same version differs) */
  int64_t rowid, nbytes;
  char *created_at;
  int refs;            /* the cache holds one; each acquire / auxdata holds one */
  int stale;           /* dropped from the cache, freed when refs reaches 0 */
  struct attn_model *next;
} attn_model;

/* ------------------------------------------------------------------ per-connection state */

/* Create the state of connection db (refs = 1, held by the caller until it registered). */
attn_conn *attn_conn_create(sqlite3 *db);
void attn_conn_ref(attn_conn *conn);
void attn_conn_unref(void *conn); /* usable as an xDestroy callback */
sqlite3 *attn_conn_db(attn_conn *conn);
/* While the query given to attn_train, attn_evaluate, attn_confusion or attn_classify is being
 * stepped (attn_conn_query_begin .. end, nested calls count), the functions that write the model
 * store (attn_train, attn_deploy, attn_import) refuse to run: sqlite3_stmt_readonly does not see
 * writes made by functions that the query calls. attn_conn_check_write returns SQLITE_OK, or
 * SQLITE_ERROR with *errmsg "fn: cannot write the model store from inside the query of ...".
 * Inside a dqlite node it also refuses a write that would commit outside Raft: in autocommit
 * mode, unless a statement that writes and returns no rows is running (see attn_conn.c). */
void attn_conn_query_begin(attn_conn *conn, const char *fn);
void attn_conn_query_end(attn_conn *conn);
int attn_conn_check_write(attn_conn *conn, const char *fn, char **errmsg);
/* A save that failed where no statement could report it (attn_train's cursor closed before its
 * last epoch finishes and saves in xClose): msg (sqlite3_malloc'd, taken; NULL clears) is
 * reported once, by the next attn_conn_check_write of the connection, which then fails:
 *   attn_fit: not run, to report that an earlier training of this connection was lost: ... */
void attn_conn_set_pending_error(attn_conn *conn, char *msg);
/* The connection's inference workspace (scalar functions run one at a time per connection). */
nn_workspace *attn_conn_workspace(attn_conn *conn, char **errmsg);

/* Register a scalar SQL function whose user data is conn (takes a reference for it). */
int attn_create_function(sqlite3 *db, attn_conn *conn, const char *name, int nargs, int flags,
                         void (*func)(sqlite3_context *, int, sqlite3_value **));
/* Register an eponymous virtual table (table-valued function) whose client data is conn. */
int attn_create_module(sqlite3 *db, attn_conn *conn, const char *name,
                       const sqlite3_module *module);

/* ------------------------------------------------------------------ models (attn_conn.c) */

/* The deployed version of model `name` (NULL: the default model, the most recently deployed one
 * in the database) for a call of SQL function `fn`. With name_arg >= 0, argv[name_arg] holds the
 * name and the lookup is kept with sqlite3_set_auxdata for the rest of the statement when that
 * argument is constant. On success *out is valid until the current call returns. On error
 * returns an SQLite error code and sets *errmsg (sqlite3_malloc'd), e.g.
 *   attn_predict: no model named 'newz' */
int attn_model_get(sqlite3_context *ctx, const char *fn, const char *name, int name_arg,
                   attn_model **out, char **errmsg);

/* Same lookup for cursors: *out holds a reference until attn_model_release. */
int attn_model_acquire(attn_conn *conn, const char *fn, const char *name, attn_model **out,
                       char **errmsg);
void attn_model_release(attn_model *model);

/* Check the model store before trusting it: each of attn_models and attn_training_log is absent
 * or an ordinary rowid table of main (no view, no virtual table) with the columns of
 * sql/schema.sql, none generated, and exactly its PRIMARY KEY. SQLITE_OK (*models_exist, may be
 * NULL: whether attn_models is there), else SQLITE_ERROR with *errmsg, e.g.
 *   attn_import: attn_models is a view, not a model store table this extension wrote (...)
 * The save path calls it (through attn_store_ensure_schema) before it writes. */
int attn_store_check(sqlite3 *db, const char *fn, int *models_exist, char **errmsg);
/* Around every read of the store tables: refuses a read that starts while another is under way
 * (a view, trigger or generated column calling attnext back: no unbounded recursion) and checks
 * the store (attn_store_check, remembered while the database is unchanged). */
int attn_store_read_begin(attn_conn *conn, const char *fn, int *models_exist, char **errmsg);
void attn_store_read_end(attn_conn *conn);
/* Register attn_cache_limit (the byte bound of the model cache). */
int attn_cache_register(sqlite3 *db, attn_conn *conn);

/* Interrupt checks for long loops: attn_interrupted steps a tiny statement every `every` calls,
 * which fails with SQLITE_INTERRUPT once sqlite3_interrupt was called on the connection (SQLite
 * 3.40 has no sqlite3_is_interrupted). Finalize with attn_interrupt_end. */
typedef struct attn_interrupt {
  sqlite3 *db;
  sqlite3_stmt *probe;
  unsigned ticks;
} attn_interrupt;
int attn_interrupted(attn_interrupt *it, unsigned every);
void attn_interrupt_end(attn_interrupt *it);
/* The same as an engine nn_interrupt_fn (ctx: an attn_interrupt), checking on every call. */
int attn_interrupt_check(void *it);

/* Forget the remembered name -> deployed model answers (after a write of the store). */
void attn_conn_forget_deployed(attn_conn *conn);

/* ------------------------------------------------------------------ store writes (attn_store.c) */

/* Create the model store tables (sql/schema.sql) when they are missing, then attn_store_check. */
int attn_store_ensure_schema(sqlite3 *db, const char *fn, char **errmsg);
/* Store a model as a new version of `name` and deploy it, with its training log rows
 * (log may be NULL / nlog 0), all in one transaction that honours the connection's busy timeout
 * (see attn_store.c: which connection and transaction): on error the database is unchanged.
 * metrics_json may be NULL. *version_out gets the new version. Errors name fn, e.g.
 *   attn_train: cannot save the model: database is locked (another connection held ...) */
int attn_store_save(attn_conn *conn, const char *fn, const char *name, const nn_model *model,
                    const char *metrics_json, const nn_epoch_stats *log, int nlog,
                    int64_t *version_out, char **errmsg);

/* Step one statement with bound values; SQLITE_OK, or its error with *errmsg
 * "fn: cannot <what>: <SQLite's message>". */
int attn_exec_step(sqlite3_stmt *stmt, sqlite3 *db, const char *fn, const char *what,
                   char **errmsg);

/* Register attn_deploy and attn_import (attn_deploy.c). */
int attn_store_register(sqlite3 *db, attn_conn *conn);

/* ------------------------------------------------------------------ inference (attn_predict.c) */

/* One text through the model: tokens, probabilities and attention. Buffers are reused. */
typedef struct attn_explain {
  int n;                 /* tokens used (after max_len truncation), >= 1 */
  nn_token *tokens;      /* (n) ids and byte spans in the text (-1 when none) */
  int *ids;              /* (n) */
  float *probs;          /* (C) softmax of the logits */
  float *weights;        /* (n) attention weights, sum 1 */
  /* cleaned token strings, from the tokenizer (NULL when unavailable) */
  char **token_text;     /* (n) NUL-terminated */
  int cap_tokens, cap_classes;
} attn_explain;

/* Run `text` through the model (workspace ws) and fill ex; want_tokens also fills token_text.
 * Returns SQLITE_OK, or an error code with *errmsg "fn: ...". */
int attn_explain_text(attn_explain *ex, attn_model *model, nn_workspace *ws, const char *text,
                      int len, int want_tokens, const char *fn, char **errmsg);
void attn_explain_free(attn_explain *ex);

int attn_predict_register(sqlite3 *db, attn_conn *conn);

/* ------------------------------------------------------------------ batched inference (attn_classify.c) */

/* Workspaces of the threads of batched inference, kept across chunks. */
typedef struct attn_workers {
  int n;
  nn_workspace **ws;
} attn_workers;
int attn_workers_threads(void); /* threads used: the online cores */
void attn_workers_free(attn_workers *w);

/* Predict class ids and their probabilities for n texts, split across the cores, in batches.
 * workers may be NULL (temporary workspaces). prob may be NULL. A NULL text gives pred -1. */
int attn_classify_texts_ws(attn_model *model, attn_workers *workers, const char *const *texts,
                           const int *lens, int n, int *pred /*(n)*/, float *prob /*(n)*/,
                           const char *fn, char **errmsg);

/* Rows of a query, copied: (id, text) or (text, label), read in chunks. */
enum { ATTN_ROWS_ID_TEXT = 0, ATTN_ROWS_TEXT_LABEL = 1 };
typedef struct attn_span {
  sqlite3_int64 offset; /* into data, -1 for NULL */
  int len;
} attn_span;
typedef struct attn_rows {
  int n;                 /* rows in this chunk */
  int first_row;         /* rows read before this chunk (for error messages) */
  sqlite3_value **keys;  /* (n) ATTN_ROWS_ID_TEXT: the id column */
  const char **texts;    /* (n) NULL for a NULL text */
  int *lens;
  const char **labels;   /* (n) ATTN_ROWS_TEXT_LABEL */
  int *label_lens;
  /* storage */
  char *data;
  sqlite3_uint64 used, cap;
  attn_span *offsets;    /* (2 * cap_rows) */
  int cap_rows;
} attn_rows;
/* Read up to max_rows rows of stmt (replacing the previous chunk); *done = 1 at the end.
 * In ATTN_ROWS_TEXT_LABEL mode a NULL text or label is an error naming the row. */
int attn_rows_read(attn_rows *r, sqlite3_stmt *stmt, int mode, int max_rows, int *done,
                   const char *fn, char **errmsg);
void attn_rows_free(attn_rows *r);

int attn_classify_register(sqlite3 *db, attn_conn *conn);

/* ------------------------------------------------------------------ progress line (attn_progress.c) */

/* A line on standard error within a training epoch: batches done, loss, rows/s, time left;
 * drawn with \r at most 10 times a second, cleared at the end. Off unless stderr is a terminal. */
typedef struct attn_progress {
  int enabled;
  int epoch, epochs;
  double start, last_draw;
  int drawn;
} attn_progress;

void attn_progress_begin(attn_progress *p, int want, int epoch, int epochs);
void attn_progress_update(attn_progress *p, int batches_done, int batches_total, double loss,
                          double rows_per_second);
void attn_progress_clear(attn_progress *p);

/* ------------------------------------------------------------------ other registrations */

int attn_train_register(sqlite3 *db, attn_conn *conn);
int attn_evaluate_register(sqlite3 *db, attn_conn *conn);
/* SVG visualisations (ext/attn_viz.c). */
int attn_viz_register(sqlite3 *db, attn_conn *conn);

/* ------------------------------------------------------------------ helpers (attnext.c) */

/* Prepare one read-only statement with no tail and at least min_cols columns for function fn;
 * errors such as "attn_train: the query must be a single read-only SELECT". */
int attn_prepare_query(sqlite3 *db, const char *fn, const char *sql, int min_cols,
                       const char *cols /* e.g. "(text, label)" */, sqlite3_stmt **out,
                       char **errmsg);
/* A JSON string literal of s (len bytes), appended to a sqlite3_str. */
void attn_json_string(sqlite3_str *out, const char *s, int len);
/* xBestIndex of a table-valued function whose argument (hidden) columns are first_arg ..
 * first_arg + nargs - 1, the first nrequired of them required (else the error `usage`).
 * xFilter gets the given arguments in column order; idxNum is the bit mask of those given. */
int attn_vtab_best_index(sqlite3_vtab *vtab, sqlite3_index_info *info, int first_arg, int nargs,
                         int nrequired, const char *usage);
/* xConnect's common part: declare the table `schema`, allocate the module's vtab struct (size
 * bytes, zeroed, its sqlite3_vtab first) into *out, and mark it `config`: SQLITE_VTAB_INNOCUOUS,
 * or SQLITE_VTAB_DIRECTONLY for a function that runs a query given as text (at top level
 * direct-only functions such as writefile and load_extension are allowed; from a view or trigger
 * of an untrusted schema that would get around SQLite's protections) or touches files. */
int attn_vtab_connect(sqlite3 *db, const char *schema, size_t size, int config,
                      sqlite3_vtab **out);
/* xDisconnect of a vtab struct that owns nothing but itself. */
int attn_vtab_disconnect(sqlite3_vtab *vtab);
/* xOpen's common part: a zeroed cursor struct of size bytes (its sqlite3_vtab_cursor first). */
int attn_vtab_cursor_new(size_t size, sqlite3_vtab_cursor **out);
/* Set a vtab's error message (replacing one there). */
void attn_vtab_error(sqlite3_vtab *vtab, char *msg /* sqlite3_malloc'd, taken */);

#endif
