/* attn_ext.h -- the one header of the attnext SQLite extension: the core every SQL feature uses,
 * in sections that each name their file (attn_conn.c, attn_store.c, attn_query.c, attn_infer.c,
 * attn_options.c, attn_training.c, attn_values.c, attn_vtab.c, attn_svg.c), then the entry
 * points that the registration table of attnext.c names. A feature file (attn_train.c,
 * attn_tune.c, attn_predict.c, attn_explain.c, attn_classify.c, attn_evaluate.c, attn_metrics.c,
 * attn_deploy.c, attn_heatmap_svg.c, attn_training_svg.c, attn_curve.c, attn_embed.c,
 * attn_matrix.c, attn_vectors.c) includes only this header, calls only the core and exports only
 * its entry points.
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
#include <stdatomic.h>
#include <stdint.h>

#include "nn.h"
#include "pool.h"

#ifndef ATTN_EXT_NO_INIT3
SQLITE_EXTENSION_INIT3
#endif

typedef struct attn_conn attn_conn;
typedef struct attn_job_hooks attn_job_hooks;       /* a host's training jobs (below) */
typedef struct attn_status_entry attn_status_entry; /* a running training (attn_status.c) */

/* A cached, parsed model row. Fields are read-only for users. */
typedef struct attn_model {
  nn_model *nn;    /* the parsed network, config, vocabulary and labels */
  char *name;      /* model name */
  int64_t version; /* version of that name */
  /* identity of the row it was parsed from (a row replaced under the same version differs) */
  int64_t rowid, nbytes;
  char *created_at;
  int refs;  /* the cache holds one; each acquire / auxdata holds one */
  int stale; /* dropped from the cache, freed when refs reaches 0 */
  struct attn_model *next;
} attn_model;

/* ----------------------------------------------------------- per-connection state (attn_conn.c) */

/* Create the state of connection db (refs = 1, held by the caller until it registered), with
 * the job hooks of its host (NULL: none; attn_register). */
attn_conn *attn_conn_create(sqlite3 *db, const attn_job_hooks *jobs);
void attn_conn_ref(attn_conn *conn);
void attn_conn_unref(void *conn); /* usable as an xDestroy callback */
/* Register a scalar SQL function whose user data is conn (takes a reference for it). */
int attn_create_function(sqlite3 *db, attn_conn *conn, const char *name, int nargs, int flags,
                         void (*func)(sqlite3_context *, int, sqlite3_value **));
/* Register an eponymous virtual table (table-valued function) whose client data is conn. */
int attn_create_module(sqlite3 *db, attn_conn *conn, const char *name,
                       const sqlite3_module *module);
/* The engine's allocator (nn.h nn_allocator): sqlite3_malloc64, sqlite3_realloc64 and
 * sqlite3_free. Every engine object ext/ makes (models, trainers, workspaces, pools, parsed JSON,
 * string buffers) is made with it, so SQLite's memory accounting (sqlite3_memory_used), its heap
 * limit (sqlite3_hard_heap_limit64) and test_faults_oom see the engine's memory, and what the
 * engine hands back (a saved BLOB, a JSON text) is freed with sqlite3_free. SQLite refuses one
 * allocation of 2^31 bytes or more: the engine then fails with its out-of-memory error. */
extern const nn_allocator attn_mem;
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
/* Whether conn's database is one of a dqlite node's (its VFS is dqlite's). */
int attn_conn_in_dqlite(attn_conn *conn);
/* Whether a write now would pass attn_conn_check_write's checks of the database (not read-only,
 * not inside a function's query, not outside Raft in dqlite), without reporting anything. */
int attn_conn_may_write(attn_conn *conn);
/* A save that failed where no statement could report it (attn_train's cursor closed before its
 * last epoch finishes and saves in xClose): msg (sqlite3_malloc'd, taken; NULL clears) is
 * reported once, by the next attn_conn_check_write of the connection, which then fails:
 *   attn_fit: not run, to report that an earlier training of this connection was lost: ... */
void attn_conn_set_pending_error(attn_conn *conn, char *msg);
/* The connection's inference workspace (scalar functions run one at a time per connection). */
nn_workspace *attn_conn_workspace(attn_conn *conn, char **errmsg);
/* The connection's thread pool for batched inference (one thread per core, the caller
 * included) and one workspace per pool thread, created on first use and kept until the
 * connection closes. One statement step runs at a time per connection and nn_pool_run returns
 * before the caller goes on, so the cursors of a statement share them. SQLITE_NOMEM (*errmsg
 * may stay NULL) when they cannot be made. */
int attn_conn_pool(attn_conn *conn, nn_pool **pool, nn_workspace ***ws, char **errmsg);

/* ------------------------------------------------------------------ models (attn_conn.c) */

/* A model reference as every function that reads a model takes it: 'news' (the deployed version
 * of news), 'news@3' (its stored version 3, deployed or not), 'a@b@' (the model named 'a@b': a
 * trailing '@' ends a name that itself contains '@'). The text is split at its last '@': what
 * follows is a version (decimal digits), nothing (the escape), or else part of the name
 * ('me@example.com' is that name). Returns 1 with the name's length in *name_len and the
 * version in *version (-1: the deployed one), or 0 when the text names nothing (an empty name, a
 * version past int64). */
int attn_model_ref_split(const char *ref, size_t *name_len, int64_t *version);
/* " (did you mean 'news'?)" for the stored name closest to `name` (sqlite3_malloc'd), or NULL.
 * Reads attn_models: inside attn_store_read_begin .. end. */
char *attn_conn_suggest_name(attn_conn *conn, const char *name);

/* The model a reference `name` means (attn_model_ref_split; NULL: the default model, the most
 * recently deployed one in the database) for a call of SQL function `fn`. With name_arg >= 0, argv[name_arg] holds the
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
/* The deployed version of the model named exactly `name` ('@' not read as a version). */
int attn_model_acquire_deployed(attn_conn *conn, const char *fn, const char *name, attn_model **out,
                                char **errmsg);
/* Version `version` of `name`, deployed or not (a warm start's base), held as attn_model_acquire
 * holds it. Errors: "fn: no model named 'x'", "fn: model 'x' has no version 7". */
int attn_model_acquire_version(attn_conn *conn, const char *fn, const char *name, int64_t version,
                               attn_model **out, char **errmsg);

/* Check the model store before trusting it (attn_store_check.c): each of attn_models,
 * attn_training_log, attn_versions and attn_lineage is absent or an ordinary rowid table of main
 * (no view, no virtual table) with the columns of sql/schema.sql, none generated, and exactly its
 * PRIMARY KEY. SQLITE_OK (*models_exist, may be NULL: whether attn_models is there), else
 * SQLITE_ERROR with *errmsg, e.g.
 *   attn_import: attn_models is a view, not a model store table this extension wrote (...)
 * The save path calls it (through attn_store_ensure_schema) before it writes. */
int attn_store_check(sqlite3 *db, const char *fn, int *models_exist, char **errmsg);
/* The definitions of the store's tables as sqlite_schema holds them ("" when none exists): a
 * table is a function of its CREATE statement, so equal text means an equal check. NULL when it
 * cannot be read (out of memory, ...). sqlite3_malloc'd. */
char *attn_store_fingerprint(sqlite3 *db);
/* Around every read of the store tables: refuses a read that starts while another is under way
 * (a view, trigger or generated column calling attnext back: no unbounded recursion) and checks
 * the store (attn_store_check, remembered while the database is unchanged). */
int attn_store_read_begin(attn_conn *conn, const char *fn, int *models_exist, char **errmsg);
void attn_store_read_end(attn_conn *conn);

/* Interrupt checks for long loops: attn_interrupted steps a tiny statement every `every` calls,
 * which fails with SQLITE_INTERRUPT once sqlite3_interrupt was called on the connection
 * (sqlite3_is_interrupted came in SQLite 3.41; Debian 12 has 3.40). The statement is prepared
 * on the first check, or by attn_interrupt_begin (which sets db too), so that a run can report
 * an error there rather than miss an interrupt later. Finalize with attn_interrupt_end. */
typedef struct attn_interrupt {
  sqlite3 *db;
  sqlite3_stmt *probe;
  unsigned ticks;
} attn_interrupt;
int attn_interrupt_begin(attn_interrupt *it, sqlite3 *db);
int attn_interrupted(attn_interrupt *it, unsigned every);
void attn_interrupt_end(attn_interrupt *it);
/* The same as an engine nn_interrupt_fn (ctx: an attn_interrupt), checking on every call. */
int attn_interrupt_check(void *it);

/* Forget the remembered name -> deployed model answers (after a write of the store). */
void attn_conn_forget_deployed(attn_conn *conn);
/* A save went through a second connection because a statement of this one reads an
 * out-of-date WAL snapshot (attn_store.c): until that statement ends, this connection cannot see
 * the saved version nor write. attn_conn_behind_hint returns the explanation to append to an
 * error of this connection that may come from it ("; this connection cannot see ...: finish
 * ..."), or "" (and forgets the state once no read transaction is open). */
void attn_conn_set_behind(attn_conn *conn);
const char *attn_conn_behind_hint(attn_conn *conn);

/* ------------------------------------------------------------------ store writes (attn_store.c) */

/* Create the model store tables (sql/schema.sql) when they are missing, then attn_store_check. */
int attn_store_ensure_schema(sqlite3 *db, const char *fn, char **errmsg);
/* Where a version came from (attn_lineage, ext/CONCURRENCY.md: The model store); NULL: SQL NULL. */
typedef struct attn_lineage_info {
  const char *function; /* "attn_train", "attn_fit", "attn_tune", "attn_import" */
  const char *query, *rows_sha256;
  const char *validation_query, *validation_sha256;
  const char *options; /* JSON object as given, or NULL */
  const char *from_name;
  const char *backend, *started_at, *ended_at;
  int64_t rows, validation_rows, from_version; /* < 0: NULL */
} attn_lineage_info;

/* One version that a save writes. */
typedef struct attn_store_item {
  const nn_model *model;
  const char *metrics;       /* JSON object, or NULL (imported) */
  const nn_epoch_stats *log; /* its training log, (nlog) rows; may be NULL / 0 */
  int nlog;
  int deploy;                       /* 1: this version becomes the deployed one of the name */
  const attn_lineage_info *lineage; /* its row of attn_lineage, or NULL */
  int64_t reserved; /* > 0: the version attn_store_live_begin reserved for it (one item
                                 only); its live log rows are replaced by `log` */
  int64_t version;  /* out: the version it was stored as (0 on error) */
} attn_store_item;
/* Store n models as the next versions of `name`, in their order, with their log rows, the one
 * with deploy set deployed (others never deployed: deployed_seq 0), all in one transaction that
 * honours the connection's busy timeout (see attn_store.c: which connection and transaction):
 * on error the database is unchanged. Errors name fn, e.g.
 *   attn_train: cannot save the model: database is locked (another connection held ...) */
int attn_store_save_items(attn_conn *conn, const char *fn, const char *name, attn_store_item *items,
                          int n, char **errmsg);
/* The live training log (attn_training.c): in WAL mode the epochs of a running training are
 * written to attn_training_log as they finish, each write a short transaction of its own (no
 * write lock is held across epochs; readers are never blocked), under a version reserved for
 * the training in attn_versions. attn_store_live_ok: whether db allows it now (WAL, a file,
 * autocommit, no statement writing, not inside dqlite). attn_store_live_begin reserves the next
 * version and writes rows log[0 .. n); attn_store_live_log writes rows log[from .. to). Both
 * skip (SQLITE_BUSY, nothing written) when the write lock is taken; other errors are returned.
 * attn_store_live_abort removes the rows of a training that ends without a save and gives the
 * version back when no later one was taken meanwhile (best effort, on a second connection,
 * since the caller's may be interrupted). */
int attn_store_live_ok(attn_conn *conn);
int attn_store_live_begin(attn_conn *conn, const char *fn, const char *name,
                          const nn_epoch_stats *log, int n, int64_t *version, int64_t *prev_mark,
                          char **errmsg);
int attn_store_live_log(attn_conn *conn, const char *fn, const char *name, int64_t version,
                        const nn_epoch_stats *log, int from, int to, char **errmsg);
void attn_store_live_abort(attn_conn *conn, const char *name, int64_t version, int64_t prev_mark);
/* Before a training: the store's tables may be written (attn_store_check) and `name` has `count`
 * more versions to give (a version at the largest integer has no next). SQLITE_OK or an error
 * with *errmsg "fn: ...". Reads only. */
int attn_store_check_save(attn_conn *conn, const char *fn, const char *name, int count,
                          char **errmsg);

/* Can this connection store the model of cfg? Its file (nn_model_save) must fit
 * SQLITE_LIMIT_LENGTH, the largest BLOB. params: the model's parameters (nn_trainer_param_count),
 * or 0 before the rows are read (then the smallest model cfg allows: two words, one class).
 * SQLITE_OK, or SQLITE_TOOBIG with *errmsg "fn: ..." naming the size, the limit and the options
 * to make smaller. */
int attn_store_check_size(sqlite3 *db, const char *fn, const nn_config *cfg, uint64_t params,
                          char **errmsg);

/* One statement run once on db, its first row read: ?1 .. ?ntexts bound to texts (a NULL text
 * binds NULL), the next nints to ints, the row's first ncols columns read as integers into out
 * (NULL reads as 0; out untouched when no row comes). SQLITE_ROW, SQLITE_DONE when no row
 * came (a statement that writes has run), or the error code with sqlite3_errmsg(db) saying why
 * (the statement is finalized). */
int attn_sql_ints(sqlite3 *db, const char *sql, const char *const *texts, int ntexts,
                  const int64_t *ints, int nints, int64_t *out, int ncols);
/* The deployed version of `name` and the rowid of its row in attn_models (left as they are when
 * none is deployed or the store cannot be read): what attn_job_commit compares a job's base with. */
void attn_store_deployed_row(sqlite3 *db, const char *name, int64_t *version, int64_t *rowid);

/* Step one statement with bound values; SQLITE_OK, or its error with *errmsg
 * "fn: cannot <what>: <SQLite's message>". */
int attn_exec_step(sqlite3_stmt *stmt, sqlite3 *db, const char *fn, const char *what,
                   char **errmsg);

/* -------------------------------------------------------------- queries and rows (attn_query.c) */

/* Prepare one read-only statement with no tail and at least min_cols columns for function fn;
 * errors such as "attn_train: the query must be a single read-only SELECT". */
int attn_prepare_query(sqlite3 *db, const char *fn, const char *sql, int min_cols,
                       const char *cols /* e.g. "(text, label)" */, sqlite3_stmt **out,
                       char **errmsg);

/* Rows of a query, copied: (id, text) or (text, label), read in chunks. */
enum { ATTN_ROWS_ID_TEXT = 0, ATTN_ROWS_TEXT_LABEL = 1 };
typedef struct attn_rows {
  int n;                /* rows in this chunk */
  int first_row;        /* rows read before this chunk (for error messages) */
  sqlite3_value **keys; /* (n) ATTN_ROWS_ID_TEXT: the id column */
  const char **texts;   /* (n) NULL for a NULL text */
  int *lens;
  const char **labels; /* (n) ATTN_ROWS_TEXT_LABEL */
  int *label_lens;
  /* storage */
  char *data;
  sqlite3_uint64 used, cap;
  int cap_rows; /* the arrays' capacity */
  /* ATTN_ROWS_TEXT_LABEL: the last distinct labels stored (offset in data, length), so a label
   * seen before is not stored again */
#define ATTN_ROWS_LABELS 8
  sqlite3_int64 label_seen[ATTN_ROWS_LABELS];
  int label_seen_len[ATTN_ROWS_LABELS], nlabels_seen;
} attn_rows;
/* Read up to max_rows rows of stmt (replacing the previous chunk); *done = 1 at the end.
 * In ATTN_ROWS_TEXT_LABEL mode a NULL text or label is an error naming the row. */
int attn_rows_read(attn_rows *r, sqlite3_stmt *stmt, int mode, int max_rows, int *done,
                   const char *fn, char **errmsg);
void attn_rows_free(attn_rows *r);
/* The rows (text, label) of a training run, packed: tens of millions of rows cost their text
 * and ~6 bytes each (tests/bench/memory_bench.py), where attn_rows costs 24 bytes and a NUL.
 * Per row: where its text begins in its block (32 bits; it ends where the next row's begins)
 * and its label as a number in the table of distinct labels (16 bits, 32 in a block that needs
 * more). Filled by attn_train_rows_read, read-only afterwards (attn_tune's trials share it from
 * two threads). */
typedef struct attn_row_block {
  char *bytes; /* the texts of rows first .. first + n - 1, back to back */
  uint32_t used, cap;
  int first, n;
  uint32_t *starts;   /* (n) */
  uint16_t *labels16; /* (n) label numbers; NULL when labels32 holds them */
  uint32_t *labels32;
} attn_row_block;
typedef struct attn_train_rows {
  int n;
  attn_row_block *blocks;
  int nblocks, cap_blocks, open; /* open: the last block takes more rows */
  int released;                  /* blocks freed by attn_train_rows_release, from the first */
  /* the distinct labels: bytes in one arena, a hash table (nn_hash_bytes) of their numbers */
  char *label_bytes;
  sqlite3_uint64 label_used, label_cap, *label_start;
  int *label_len, nlabels, cap_labels, last_label;
  int *label_slots;
  uint32_t label_mask;
  nn_hash_key key;
} attn_train_rows;
/* Append every row of stmt (text, label; a NULL text is an error naming the row, counted from
 * the first of stmt) to r. A NULL label: an unlabelled row, appended to *unlabelled (its label
 * "") when given, else counted in *skipped when given, else an error naming the row. SQLITE_OK,
 * or an error with *errmsg (NULL: out of memory). */
int attn_train_rows_read(attn_train_rows *r, sqlite3_stmt *stmt, const char *fn, char **errmsg,
                         attn_train_rows *unlabelled, int *skipped);
/* Row i's text and label (len bytes, not NUL-terminated), its label's number (< r->nlabels). */
const char *attn_train_rows_text(const attn_train_rows *r, int i, int *len);
const char *attn_train_rows_label(const attn_train_rows *r, int i, int *len);
int attn_train_rows_label_id(const attn_train_rows *r, int i);
void attn_train_rows_free(attn_train_rows *r);
/* Row i of src appended to dst (its text and label; dst numbers labels its own way): SQLITE_OK
 * or SQLITE_NOMEM. attn_train_rows_seal gives back what dst's last block does not use. */
int attn_train_rows_copy(attn_train_rows *dst, const attn_train_rows *src, int i);
void attn_train_rows_seal(attn_train_rows *r);
/* The texts of every block whose rows are all below end freed (r->n and the labels' table
 * stay): rows below end must not be read afterwards. */
void attn_train_rows_release(attn_train_rows *r, int end);
/* One sqlite3_step of the user's query stmt for function fn; the functions that write the model
 * store refuse to run inside it (attn_conn_query_begin: its query must be read-only). */
int attn_query_step(attn_conn *conn, sqlite3_stmt *stmt, const char *fn);

/* ------------------------------------------------------------------ inference (attn_infer.c) */

/* How the model reads one text: its tokens, class probabilities and attention weights, and on
 * demand each token's occlusion. Buffers are reused. */
typedef struct attn_text_reading {
  int n;            /* tokens used (after max_len truncation), >= 1 */
  nn_token *tokens; /* (n) ids and byte spans in the text (-1 when none) */
  int *ids;         /* (n) */
  float *probs;     /* (C) softmax of the logits */
  float *weights;   /* (n) attention weights, sum 1 */
  /* cleaned token strings, from the tokenizer (NULL when unavailable) */
  char **token_text; /* (n) NUL-terminated */
  int cap_tokens, cap_classes;
  /* attn_text_occlusion: the predicted class and each token's leave-one-out occlusion */
  int pred;
  float *occlusion;           /* (n) */
  int *loo_ids, *loo_lengths; /* scratch of the leave-one-out batch */
  float *loo_logits, *loo_attn;
  size_t cap_loo_ids;
  int cap_loo_rows, cap_loo_classes;
} attn_text_reading;

/* Run `text` through the model (workspace ws) and fill reading; want_tokens also fills
 * token_text. Returns SQLITE_OK, or an error code with *errmsg "fn: ...". */
int attn_text_read(attn_text_reading *reading, attn_model *model, nn_workspace *ws,
                   const char *text, int len, int want_tokens, const char *fn, char **errmsg);
void attn_text_reading_free(attn_text_reading *reading);
/* attn_text_read (tokens wanted) with each token's leave-one-out occlusion: reading->pred = the
 * predicted class (the most probable, the first of ties) and reading->occlusion[i] = probs[pred] -
 * p(pred | the token ids without position i), a one-token text left empty reading as one <UNK>
 * (as nn_text_encode reads an empty text). The text and its n leave-one-out sequences go through
 * the model in one batched forward pass (passes of at most ATTN_LOO_TOKENS tokens for long texts,
 * checking `it` (may be NULL) for an interrupt between them). Errors: SQLite code, *errmsg
 * "fn: ...". */
#define ATTN_LOO_TOKENS 65536
int attn_text_occlusion(attn_text_reading *reading, attn_model *model, nn_workspace *ws,
                        attn_interrupt *it, const char *text, int len, const char *fn,
                        char **errmsg);

/* The token ids of one text as the model reads it, into ids and tokens (max_len entries each, at
 * least 1): nn_text_encode's, an empty (or NULL) text one <UNK> with no byte span, at most
 * max_len. Returns how many (>= 1). */
int attn_text_ids(int *ids, nn_token *tokens, const nn_model *nn, const char *text, int len);
/* One text through the model, as attn_predict and attn_embed read it: its ids (attn_text_ids; on
 * the stack up to 256 tokens) and the inference forward pass into logits (C floats), and into
 * pooled (nn_model_pooled_dim floats: nn_model_forward_pooled) when pooled is not NULL. Returns
 * an NN_* status, err the engine's message (NN_NOMEM: no room for the tokens). */
int attn_forward_text(nn_model *nn, nn_workspace *ws, const char *text, int len, float *logits,
                      float *pooled, char *err);
/* The cursor of the table-valued functions over one text, arguments (name, text): attn_probs
 * and attn_weights (attn_predict.c), attn_explain (attn_explain.c). Its module's cursor size. */
typedef struct attn_text_cursor {
  sqlite3_vtab_cursor base;
  attn_text_reading reading; /* the text through the model */
  attn_model *model;         /* the deployed model of the name argument, held */
  attn_interrupt interrupt;  /* attn_explain: between the occlusion's passes */
  int *order;                /* attn_probs: class ids, most probable first */
  int nrows, row;
  const char *text; /* xFilter's text argument, during xFilter only (NULL: no rows) */
  int len;
  nn_workspace *ws; /* the connection's */
} attn_text_cursor;
/* xFilter's common part: no rows, the name argument's model held; a text given and not NULL in
 * cur->text, cur->len with the connection's workspace cur->ws, else cur->text NULL (no rows).
 * Errors: SQLite code, *errmsg "fn: ...". */
int attn_text_cursor_begin(attn_text_cursor *cur, attn_conn *conn, const char *fn, int argc,
                           sqlite3_value **argv, char **errmsg);
/* xClose, xNext, xEof and xRowid (row + 1) of such a cursor. */
int attn_text_cursor_close(sqlite3_vtab_cursor *base);
int attn_text_cursor_next(sqlite3_vtab_cursor *base);
int attn_text_cursor_eof(sqlite3_vtab_cursor *base);
int attn_text_cursor_rowid(sqlite3_vtab_cursor *base, sqlite_int64 *rowid);
/* The columns of a token row (attn_weights, attn_explain: its columns in this order): the current
 * row's `what`. Start and end are NULL for a token with no byte span. */
enum {
  ATTN_TOKEN_POSITION,
  ATTN_TOKEN_TEXT,
  ATTN_TOKEN_ATTENTION,
  ATTN_TOKEN_OCCLUSION, /* after attn_text_occlusion */
  ATTN_TOKEN_START,
  ATTN_TOKEN_END
};
void attn_text_cursor_token(sqlite3_context *ctx, const attn_text_cursor *cur, int what);

/* The predicted class of one row of logits (C): the most probable, the first of ties, with its
 * softmax probability in *prob (prob may be NULL: not computed). attn_predict's and attn_classify's label and probability (so
 * that a min_probability threshold decides alike in both). */
int attn_top_class(const float *logits /*(C)*/, int C, float *prob);
/* Predict class ids and their probabilities for n texts on the connection's thread pool, in
 * batches (attn_infer.c). prob may be NULL. A NULL text gives pred -1. Errors: SQLite code,
 * *errmsg "fn: ...". */
int attn_classify_texts(attn_conn *conn, attn_model *model, const char *const *texts,
                        const int *lens, int n, int *pred /*(n)*/, float *prob /*(n)*/,
                        const char *fn, char **errmsg);
/* The same with every class's probability: probs (n, C) gets the softmax of each row's logits
 * (a NULL text: a row of zeros and pred -1). attn_metrics' probabilities. */
int attn_classify_probs(attn_conn *conn, attn_model *model, const char *const *texts,
                        const int *lens, int n, int *pred /*(n)*/, float *probs /*(n, C)*/,
                        const char *fn, char **errmsg);
/* The same with every row's attention context besides: pooled (n, nn_model_pooled_dim), as
 * attn_embed gives it (a NULL text: zeros). attn_uncertain's diverse order. */
int attn_classify_pooled(attn_conn *conn, attn_model *model, const char *const *texts,
                         const int *lens, int n, int *pred /*(n)*/, float *probs /*(n, C)*/,
                         float *pooled, const char *fn, char **errmsg);
/* Rows a batched function reads from its query at a time: 1024 per core. */
#define ATTN_CHUNK_ROWS (1024 * nn_cpu_count())

/* ------------------------------------ a labelled query through the model (attn_labelled.c) */

/* The query (text, label) of attn_evaluate, attn_confusion, attn_metrics and attn_curve, read in
 * chunks of ATTN_CHUNK_ROWS rows and predicted by the deployed model. Flags: KNOWN, every label
 * is one of the model's (else an error naming its row; looked up before the chunk is predicted),
 * its class kept in y_true; PROBS, every row's probabilities kept in probs (attn_classify_probs;
 * else attn_classify_texts). */
#define ATTN_LABELLED_KNOWN 1
#define ATTN_LABELLED_PROBS 2
typedef struct attn_labelled {
  attn_model *model; /* the deployed model of the name argument, held */
  const char *name;  /* the name argument (owned by it) */
  attn_rows rows;    /* the current chunk */
  int *pred;         /* (rows.n) the chunk's predicted classes */
  int *y_true;       /* ATTN_LABELLED_KNOWN: (N) every row's class */
  float *probs;      /* ATTN_LABELLED_PROBS: (N, C) every row's probabilities */
  int64_t N;         /* rows read so far, the current chunk included */
  /* the reading */
  attn_conn *conn;
  attn_interrupt *interrupt;
  const char *fn;
  sqlite3_stmt *stmt;
  int flags, done;
  int64_t cap_pred, cap_y_true, cap_probs;
} attn_labelled;
/* Check the arguments (name, query: either may be NULL, not given), hold the model, prepare the
 * query. Errors: SQLite code, *errmsg "fn: ..."; attn_labelled_free in every case. */
int attn_labelled_open(attn_labelled *q, attn_conn *conn, attn_interrupt *interrupt, const char *fn,
                       int flags, sqlite3_value *name_arg, sqlite3_value *query_arg, char **errmsg);
/* The next chunk (at least one row) read and predicted, then `interrupt` checked: SQLITE_ROW,
 * SQLITE_DONE after the last, or an error (*errmsg "fn: ...", or NULL when out of memory). */
int attn_labelled_next(attn_labelled *q, char **errmsg);
/* Every chunk; a query of no rows is an error ("fn: the query returned no rows"). */
int attn_labelled_read_all(attn_labelled *q, char **errmsg);
/* Frees what q holds, the model released: a caller that keeps model, y_true or probs takes them
 * and sets them NULL first. */
void attn_labelled_free(attn_labelled *q);

/* ------------------------------------------------------------ training options (attn_options.c) */

/* attn_train's options "embeddings" (a table of (word, vector)) and "freeze_embeddings". */
typedef struct attn_embeddings {
  char *table; /* sqlite3_malloc'd; NULL: no pretrained vectors */
  int freeze;
  int dim; /* of the table's vectors */
} attn_embeddings;
/* The keys of the options object that ext/ reads itself, beside nn_config's (the engine's):
 * attn_options.c's table names each one and says who reads it (attn_options_reader). */
typedef enum attn_option_key {
  ATTN_OPTION_FROM, /* a warm start: the model to start from, and its version */
  ATTN_OPTION_FROM_VERSION,
  ATTN_OPTION_EMBEDDINGS, /* a table of (word, vector), and whether the embedding is trained */
  ATTN_OPTION_FREEZE_EMBEDDINGS,
  ATTN_OPTION_DEPLOY,
  ATTN_OPTION_VALIDATION_QUERY,
  ATTN_OPTION_CLASS_WEIGHTS, /* as an object of label -> weight (true / false is nn_config's) */
  ATTN_OPTION_UNLABELLED,    /* whether the rows with a NULL label are read */
  ATTN_OPTION_SEARCH,        /* attn_tune's own from here on: the search */
  ATTN_OPTION_TRIALS,
  ATTN_OPTION_SECONDS,
  ATTN_OPTION_PARALLEL,
  ATTN_OPTION_KEEP_TRIALS, /* whether the trials not chosen are stored */
  ATTN_OPTION_COUNT
} attn_option_key;
/* Who reads an options object: a training run (attn_train, attn_fit, a trial of attn_tune) or
 * attn_tune's search, which reads its own keys too. */
typedef enum attn_options_reader { ATTN_OPTIONS_TRAINING, ATTN_OPTIONS_TUNE } attn_options_reader;
/* The options text parsed once, by the engine (nn_options_parse): the values of the keys of
 * ext/ that reader reads in o->extra[ATTN_OPTION_*], any other key not nn_config's is an
 * unknown option (nn_options_apply). A text that is not a JSON object: SQLITE_ERROR, *msg "fn:
 * options must be a JSON object (...)". o is to be freed (nn_options_free) either way. */
int attn_options_parse(nn_options *o, const char *fn, const char *text, attn_options_reader reader,
                       char **msg);
/* A value of the options (parsed from text) as messages show it after "got": a string's text,
 * anything else as written, without spaces. sqlite3_malloc'd; NULL when out of memory. */
char *attn_option_value(const char *text, const nn_json *v);
typedef struct attn_training attn_training; /* below: one training run */
/* The options of one run (text or NULL: none) read into t: parsed once (attn_options_parse),
 * then t->cfg, t->emb, t->base and the keys of ext/ (t->deploy, t->validation_query,
 * t->class_weights, t->use_unlabelled, ...). "from" (a model name) with optional "from_version"
 * makes a warm start: the config starts as the base model's, options that would change its
 * architecture or vocabulary are refused (nn_config_check_warm_start), "embeddings" is refused.
 * reader: whose keys are known (ATTN_OPTIONS_TUNE: attn_tune's own are out of text by then,
 * but a misspelt one still gets its "did you mean").
 * Errors "fn: option \"from\": no model named 'x'", ...; on error what t read is let go. */
int attn_options_read(attn_training *t, const char *text, attn_options_reader reader, char **msg);
/* What attn_options_read set in t let go (t->base released, t->emb freed, ...), the keys of
 * ext/ back to their defaults. */
void attn_options_clear(attn_training *t);
/* After nn_trainer_create: set the vocabulary's rows from the table, and freeze. */
int attn_embeddings_apply(sqlite3 *db, const char *fn, nn_trainer *tr, const attn_embeddings *emb,
                          char **errmsg);
void attn_embeddings_free(attn_embeddings *emb);

/* ---------------------------------------------------- one training run (attn_training.c) */

/* The progress line of an epoch on standard error (a terminal only, option "progress"). */
typedef struct attn_progress {
  int enabled;
  int epoch, epochs;
  double start, last_draw;
  int drawn, last_done; /* last_done: the batches of the last line drawn */
} attn_progress;

/* One training run of attn_train, attn_fit or a trial of attn_tune. */
struct attn_training {
  attn_conn *conn;
  const char *fn; /* "attn_train", "attn_fit", "attn_tune" */
  nn_config cfg;
  nn_trainer *trainer; /* NULL once saved or stopped */
  char *name;
  nn_epoch_stats *log;
  int nlog, cap_log;
  int stopped;      /* interrupted or failed: nothing more to run, nothing to save */
  int second_round; /* self-training's second round has begun (its phase is shown) */
  int saved;        /* the model is in the store, as `version` */
  int64_t version;
  char *metrics;            /* the trainer's summary (JSON object, sqlite3_malloc'd) */
  attn_interrupt interrupt; /* the connection's, begun by attn_training_start (probe NULL: none) */
  attn_progress progress;
  attn_embeddings emb; /* options "embeddings", "freeze_embeddings" until the trainer exists */
  attn_model *base;    /* option "from": the warm start's model until the trainer exists */
  int keep;            /* attn_tune: at the end keep the model in `model` instead of saving */
  nn_model *model;     /* with keep: the trained model (owned) */
  /* options of ext/ (attn_options_read) */
  int deploy;             /* ATTN_DEPLOY_*: option "deploy" (default "if_better") */
  int deploy_given;       /* "deploy" was in the options */
  char *validation_query; /* option "validation_query", or NULL */
  char *class_weights;    /* option "class_weights" as an object: its JSON, or NULL */
  char *options_text;     /* the options as given (the lineage's) */
  /* the rows: the query's (nquery), then validation_query's (nvalidation), in one store */
  attn_train_rows rows;
  int nquery, nvalidation;
  /* the query's rows with a NULL label (option "unlabelled", default true): texts the
   * pretraining reads; with the option false they are only counted (nskipped) */
  attn_train_rows unlabelled;
  int use_unlabelled, nskipped;
  /* A run that saves (not a tune's trial) lets each row's text go once the trainer has encoded
   * it (attn_training_rows_done); the validation rows' are copied to kept first, their numbers
   * in kept_index (ascending). Once the trainer exists, rows is kept and the trainer's
   * validation rows are renumbered into it (attn_training_save). */
  attn_train_rows kept;
  int *kept_index, nkept, cap_kept, kept_failed;
  char *query_text; /* the training query (lineage) */
  char rows_sha256[65], val_sha256[65];
  char *from_name; /* option "from": the base's name and version (lineage) */
  int64_t from_version;
  char started_at[32];       /* when the run began (UTC) */
  char backend[192];         /* where it trains */
  attn_status_entry *status; /* attn_status's entry while the run lives */
  /* the outcome */
  int deployed;        /* the save deployed the new version */
  int committed;       /* the save was committed (0: it waits for the caller's COMMIT) */
  int ntruncated;      /* rows whose text was cut at max_len tokens */
  char *deploy_reason; /* why it was or was not deployed (sqlite3_malloc'd) */
  int *val_rows, nval; /* the validation rows (the deploy decision, attn_tune's comparison) */
  char val_id[65];     /* attn_train_rows_sha256_of the validation rows ("" before, or none) */
  /* the live log (WAL): the version reserved, the name's mark before, epochs written, when */
  int64_t live_version, live_prev_mark;
  int live_written;
  double live_last;
  /* a run in a thread of its own (attn_tune's trials two at a time): it touches no connection,
   * so no interrupt probe; it stops when *stop_flag is set, and draws no progress line */
  atomic_int *stop_flag;
  int quiet;
};

/* Option "deploy": whether the version a training saves is deployed. */
enum { ATTN_DEPLOY_IF_BETTER = 0, ATTN_DEPLOY_ALWAYS = 1, ATTN_DEPLOY_NEVER = 2 };

/* Open a run of fn (attn_train, attn_fit, attn_tune) in one pass, each check once and in this
 * order: options_arg is text or NULL, the store may be written, the name, the options
 * (attn_options_read; options_arg NULL: the defaults), the name can take a new version, the
 * query; then every row of the query is read. t is cleared first. On error *msg is set
 * ("fn: ...") and t must still be freed. */
int attn_training_open(attn_training *t, attn_conn *conn, const char *fn, sqlite3_value *name_arg,
                       sqlite3_value *query_arg, sqlite3_value *options_arg, char **msg);
/* attn_train / attn_fit: attn_training_open, the rows of "validation_query"
 * (attn_training_rows) and the trainer (attn_training_create). */
int attn_training_start(attn_training *t, attn_conn *conn, const char *fn, sqlite3_value *name_arg,
                        sqlite3_value *query_arg, sqlite3_value *options_arg, char **msg);
/* The trainer of t->cfg over t->rows (a warm start from t->base when set). */
int attn_training_create(attn_training *t, char **msg);
/* Run the next epoch (its statistics in *row); after the last, save the model (or keep it).
 * SQLITE_ROW when an epoch ran, SQLITE_DONE when there was none left, else an error. */
int attn_training_epoch(attn_training *t, nn_epoch_stats *row, char **msg);
/* Run every epoch left and save (or keep). SQLITE_OK or an error with *msg. */
int attn_training_finish(attn_training *t, char **msg);
/* The rows of option "validation_query" (t->validation_query) appended to t->rows after the
 * query's (t->nvalidation of them; the caller puts that into cfg.validation_rows). SQLITE_OK or
 * an error with *msg. */
int attn_training_rows(attn_training *t, char **msg);
/* Option "deploy": "if_better": whether `model` (validation rows `rows` of t's rows, n of them)
 * beats the deployed version of t->name on them by t->cfg.monitor, both scored the same way;
 * sets *deploy and t->deploy_reason. "always" / "never": decided at once. SQLITE_OK or an error
 * with *msg. */
int attn_training_decide(attn_training *t, const nn_model *model, const int *rows, int n,
                         int *deploy, char **msg);
/* The metrics JSON of a run with the deploy decision added ("deploy", "deployed",
 * "deploy_reason"): sqlite3_malloc'd, NULL when out of memory. */
char *attn_training_metrics(const attn_training *t, const char *metrics, int deployed);
/* A saved run's summary as a JSON object: name, version, epochs, committed, then the stored
 * metrics (attn_fit's result, attn_train's last row's summary); NULL when out of memory. */
char *attn_training_summary(const attn_training *t);
/* t's lineage (attn_lineage row) for a version saved now; options: the run's options text. */
void attn_training_lineage(const attn_training *t, attn_lineage_info *l, const char *options,
                           char *ended_at);
/* Free what one run made (trainer, log, metrics, kept model, options), keeping the name, the
 * rows and the interrupt probe for the next run of attn_tune. */
void attn_training_reset(attn_training *t);
void attn_training_free(attn_training *t);

/* -------------------------------------------- SQL values in and out, errors (attn_values.c) */

/* The code an error of ours is returned with: rc, except SQLITE_NOMEM, which becomes
 * SQLITE_ERROR so that its message ("attn_x: out of memory ...") reaches Python's sqlite3. */
int attn_error_code(int rc);
/* An engine status as an SQLite result code: NN_OK -> SQLITE_OK, NN_NOMEM -> SQLITE_NOMEM,
 * NN_INTERRUPTED -> SQLITE_INTERRUPT, any other -> SQLITE_ERROR. */
int attn_nn_rc(int st);
/* A failed engine call (st != NN_OK) as SQLite's: *errmsg "fn: interrupted" or "fn: err" (err:
 * the engine's message; *errmsg NULL if out of memory), returns attn_nn_rc(st). */
int attn_nn_error(int st, const char *fn, const char *err, char **errmsg);
/* The model name argument v (NULL: not given) of SQL function fn: a non-empty text. SQLITE_OK
 * with *name (owned by v), else SQLITE_ERROR with *errmsg
 *   fn: the model name must be a non-empty text, got NULL     (or got '')
 * or SQLITE_NOMEM (*errmsg untouched) when the value could not be read as text. */
int attn_name_value(const char *fn, sqlite3_value *v, const char **name, char **errmsg);
/* A probability threshold argument v of SQL function fn, named `arg` in errors (attn_predict's
 * and attn_classify's min_probability): a number (or a text that reads as one) from 0 to 1.
 * SQLITE_OK with *out, else SQLITE_ERROR with *errmsg
 *   attn_predict: min_probability must be a number from 0 to 1, got 'high'  (or got 1.5, NULL)
 * (SQLITE_NOMEM when the message cannot be made). */
int attn_probability_value(const char *fn, const char *arg, sqlite3_value *v, double *out,
                           char **errmsg);
/* x as the shortest text that reads back as x (%.15g, else %.17g), for messages that quote a
 * number: %g's 6 digits print 1.0000000000000002 as 1. Returns out. */
const char *attn_number_text(char out[32], double x);
/* Make a scalar function's result the error msg (sqlite3_malloc'd, taken; NULL: "fn: out of
 * memory"), with rc as its code unless attn_error_code(rc) is SQLITE_ERROR. */
void attn_result_error(sqlite3_context *ctx, int rc, char *msg, const char *fn);
/* Word vectors as BLOBs: n float32 in little-endian byte order (the engine's and safetensors'),
 * whatever the host's order (attn_vectors_load writes them, attn_train's "embeddings" and
 * attn_matrix read them). */
void attn_floats_from_le(float *out /*(n)*/, const unsigned char *blob /*(4 n)*/, int n);
void attn_floats_to_le(unsigned char *out /*(4 n)*/, const float *in /*(n)*/, int n);
/* The subtype SQLite's JSON functions give JSON text ('J'): json_object('r', attn_fit(...))
 * then nests the object instead of quoting it as a string. Functions that set it are registered
 * with SQLITE_RESULT_SUBTYPE (3.45+; older SQLite ignores the flag). */
#define ATTN_JSON_SUBTYPE 74
#ifndef SQLITE_RESULT_SUBTYPE
#define SQLITE_RESULT_SUBTYPE 0x001000000
#endif
/* A JSON string literal of s (len bytes), appended to a sqlite3_str. */
void attn_json_string(sqlite3_str *out, const char *s, int len);
/* v appended as SQLite's json_object() and json_group_array() write an SQL value: an integer
 * as %lld, a REAL as SQLite's JSON functions format it (%!0.15g), text as a JSON string (the
 * escapes of SQLite's JSON), NULL as null. A BLOB has no JSON form: SQLITE_MISMATCH and nothing
 * appended (SQLite's JSON functions refuse it too). */
struct nn_strbuf;
int attn_json_value(struct nn_strbuf *sb, sqlite3_value *v);
/* The message SQLite's JSON functions give for a BLOB, for the callers of attn_json_value. */
#define ATTN_JSON_BLOB_MESSAGE "JSON cannot hold BLOB values"

/* ----------------------------------------------------- table-valued functions (attn_vtab.c) */

/* xBestIndex of a table-valued function whose argument (hidden) columns are first_arg ..
 * first_arg + nargs - 1, the first nrequired of them required (else the error `usage`).
 * xFilter gets the given arguments in column order; idxNum is the bit mask of those given. */
int attn_vtab_best_index(sqlite3_vtab *vtab, sqlite3_index_info *info, int first_arg, int nargs,
                         int nrequired, const char *usage);
/* The virtual table of every table-valued function: the connection's state (the module's
 * client data), the mode of a module registered under two names (from xConnect's argv[0], the
 * name it was called by), and the size of its cursor struct (for attn_vtab_open). */
typedef struct attn_vtab {
  sqlite3_vtab base;
  attn_conn *conn;
  int mode;
  size_t cursor_size;
} attn_vtab;
/* xConnect's common part: declare the table `schema`, allocate the attn_vtab into *out, and mark
 * it `config`: SQLITE_VTAB_INNOCUOUS, or SQLITE_VTAB_DIRECTONLY for a function that runs a query
 * given as text (at top level direct-only functions such as writefile and load_extension are
 * allowed; from a view or trigger of an untrusted schema that would get around SQLite's
 * protections) or touches files. */
int attn_vtab_connect(sqlite3 *db, const char *schema, int config, void *conn, int mode,
                      size_t cursor_size, sqlite3_vtab **out);
/* xDisconnect: frees the attn_vtab. */
int attn_vtab_disconnect(sqlite3_vtab *vtab);
/* xOpen: a zeroed cursor struct of the vtab's cursor_size (its sqlite3_vtab_cursor first). */
int attn_vtab_open(sqlite3_vtab *vtab, sqlite3_vtab_cursor **out);
/* Whether argument k (0: the first) was given, from the idxNum attn_vtab_best_index chose. */
#define attn_arg_given(idx_num, k) (((idx_num) >> (k)) & 1)
/* A cursor's call failed with rc: make msg (sqlite3_malloc'd, taken; NULL: "fn: out of memory")
 * the vtab's error message, replacing one there, and return attn_error_code(rc). */
int attn_vtab_fail(sqlite3_vtab *vtab, int rc, char *msg, const char *fn);

/* ------------------------------------- lineage (attn_lineage.c) and live progress (attn_status.c) */

/* SHA-256 of rows first .. first + n - 1 of r (text, label) in order, as lowercase hex (out: 65
 * bytes): for each row the text's UTF-8 bytes and the label's, each preceded by its length as 8
 * bytes little-endian (ext/CONCURRENCY.md: The model store, with the Python that recomputes
 * it). SQLITE_INTERRUPT when the connection is interrupted on the way (interrupt: NULL for no
 * checks), else SQLITE_OK. */
int attn_train_rows_sha256(const attn_train_rows *r, int first, int n, attn_interrupt *interrupt,
                           char *out);
/* The same SHA-256 over the rows listed (in ascending row order, whatever the order of `rows`):
 * what a version's validation rows were, so that two versions can be told to have held out the
 * same rows. SQLITE_NOMEM or SQLITE_OK. */
int attn_train_rows_sha256_of(const attn_train_rows *r, const int *rows, int n, char *out);
/* The current UTC time as ISO 8601 with milliseconds (out: 32 bytes). */
void attn_utc_now(char *out);
/* "attnext 0.2.0" (out: 64 bytes). */
void attn_version_short(char *out);
/* Insert the attn_lineage row of (name, version), inside the caller's transaction. */
int attn_lineage_write(sqlite3 *db, const char *fn, const char *name, int64_t version,
                       const attn_lineage_info *l, char **errmsg);

/* attn_status.c: the trainings running in this process (any connection, any database), for
 * attn_status: each registers at its start, updates its progress and unregisters at its end.
 * Thread-safe. */
attn_status_entry *attn_status_register(sqlite3 *db, const char *fn, const char *name);
void attn_status_unregister(attn_status_entry *e);
/* phase: "reading", "training", "saving"; epochs: the most epochs; trial/trials: attn_tune's */
void attn_status_phase(attn_status_entry *e, const char *phase, int epochs, int trial, int trials);
void attn_status_batch(attn_status_entry *e, int batch, int batches, double loss,
                       double rows_per_second);
void attn_status_epoch(attn_status_entry *e, const nn_epoch_stats *s, int best_epoch,
                       int64_t version);
/* The progress of the runs training on connection db now (a node's job reads its own private
 * connection's: ext/node/attn_job_runner.c), oldest first, at most max of them; returns how
 * many. Each view holds the run's last ATTN_STATUS_VIEW_LOG epochs (log[i] is epoch
 * first_epoch + i + 1); a figure not known yet is NaN (train_loss) or negative (val_*). */
#define ATTN_STATUS_VIEW_LOG 64
typedef struct attn_status_view {
  const char *phase; /* static text */
  int trial, trials, epoch, epochs, batch, batches, best_epoch;
  double train_loss, val_loss, val_accuracy, val_f1;
  int first_epoch, nlog;
  nn_epoch_stats log[ATTN_STATUS_VIEW_LOG];
} attn_status_view;
int attn_status_of(sqlite3 *db, attn_status_view *out, int max);

/* ------------------------------------ training jobs: a host's hooks (attnext.c, attn_conn.c) */

/* In a dqlite node (build/attnext-node) attn_train, attn_fit and attn_tune do not train in the
 * statement, which runs on dqlite's event loop: they submit a job, which trains in a thread of
 * the node's process and commits its model through the leader. The job machinery (and the SQL
 * functions attn_jobs, attn_cancel, attn_job_commit) lives in ext/node/ and is linked into the
 * node only: the node registers attnext on its connections with hooks (attn_register) through
 * which the training functions submit. attnext.so registers itself without hooks, and every
 * training runs in its statement. */

/* What a submission returns: the job's first row (attn_train's and attn_tune's row in a node,
 * attn_fit's JSON object). */
typedef struct attn_job_receipt {
  int64_t job;
  uint64_t node;
  const char *fn;
  char *name; /* sqlite3_malloc'd: the caller frees it with sqlite3_free */
  char submitted_at[32];
} attn_job_receipt;
#define ATTN_JOB_RECEIPT_COLUMNS                                                                   \
  "job INTEGER, function TEXT, name TEXT, state TEXT, node INTEGER, submitted_at TEXT"
enum { ATTN_JOB_RECEIPT_NCOLS = 6 };

/* One registration of attn_register: a scalar function (func, with nargs and flags; SQLITE_UTF8
 * is added) or an eponymous virtual table, i.e. a table-valued function (module; nargs and flags
 * unused: its direct-only / innocuous setting is made by its xConnect through
 * attn_vtab_connect). Each gets the connection's attn_conn as its user data / client data. */
typedef struct attn_registration {
  const char *name;
  int nargs;
  int flags;
  void (*func)(sqlite3_context *, int, sqlite3_value **);
  const sqlite3_module *module;
} attn_registration;

/* The hooks of a host that runs training jobs (ext/node/attn_jobs.c), kept by every connection
 * it registers attnext on. */
struct attn_job_hooks {
  /* Whether statements of conn submit jobs (conn is a dqlite node's connection and the node
   * runs jobs); when not, they train in the statement as anywhere. */
  int (*here)(attn_conn *conn);
  /* Submit a job of fn ("attn_fit", "attn_train", "attn_tune"): the checks of a training that
   * need no rows (a writable store, the name, the query, and with check_options the training
   * options through attn_options_read; attn_tune checks its grid and options itself first),
   * then the job. SQLITE_OK with *out, or an error with *msg. */
  int (*submit)(attn_conn *conn, const char *fn, sqlite3_value *name_arg, sqlite3_value *query_arg,
                const char *grid, sqlite3_value *options_arg, int check_options,
                attn_job_receipt *out, char **msg);
  /* Column col of the receipt's row (ATTN_JOB_RECEIPT_COLUMNS); the receipt as attn_fit's JSON
   * object (sqlite3_malloc'd, NULL: no memory). */
  void (*receipt_column)(const attn_job_receipt *r, sqlite3_context *ctx, int col);
  char *(*receipt_json)(const attn_job_receipt *r);
  /* The host's own SQL functions, registered after attnext's with the same connection state. */
  const attn_registration *functions;
  int nfunctions;
};

/* Register attnext's SQL functions on db (what sqlite3_attnext_init does, with jobs NULL), and
 * with jobs (not copied: it outlives every connection) the host's functions too, the hooks kept
 * by the connection. SQLITE_OK, or an error with *pzErrMsg (may be NULL) when the host's SQLite
 * is too old or a registration fails. */
int attn_register(sqlite3 *db, char **pzErrMsg, const sqlite3_api_routines *pApi,
                  const attn_job_hooks *jobs);
/* The hooks of conn when its statements submit training jobs (attn_job_hooks.here), else NULL:
 * always NULL in attnext.so. */
const attn_job_hooks *attn_conn_jobs(attn_conn *conn);

/* ------------------------------------------------------------------ SVG writer (attn_svg.c) */

/* Every SVG the extension writes is a complete, well-formed XML document: text is valid UTF-8
 * (invalid bytes and characters XML forbids become U+FFFD), & < > " ' are escaped, labels are cut
 * to a number of characters with an ellipsis, and the picture's size is bounded by its caller. */

/* Append s (len bytes, any bytes) as XML character data / attribute text, at most max_chars
 * characters (code points; longer: the first max_chars - 1 and an ellipsis). Returns the number
 * of characters written. */
int attn_svg_text(sqlite3_str *out, const char *s, int len, int max_chars);
/* Columns of a monospace font that what attn_svg_text writes takes (wide characters: 2). */
int attn_svg_text_columns(const char *s, int len, int max_chars);
/* Bytes of the first max_chars characters of s (len bytes), for cutting a string before
 * formatting it; invalid bytes count as one character each. */
int attn_svg_prefix_bytes(const char *s, int len, int max_chars);
/* Width in pixels of n columns of the monospace font at font size `size`. */
double attn_svg_mono_width(int n, double size);

/* Colour of t in [0, 1] on the extension's sequential scale (white -> dark red) as "#rrggbb";
 * out must hold 8 bytes. attn_svg_ink: the text colour readable on it. */
void attn_svg_color(char *out, double t);
const char *attn_svg_ink(double t);

/* <?xml ...?><svg ...> with a white background and <title> (title_len bytes; -1: strlen). */
void attn_svg_begin(sqlite3_str *out, int width, int height, const char *title, int title_len);
/* A horizontal colour bar from lo to hi with its caption at (x, y), width w. */
void attn_svg_legend(sqlite3_str *out, double x, double y, double w, double lo, double hi,
                     const char *caption);
/* Close the document and make it the function's result (or an out-of-memory error). */
void attn_svg_result(sqlite3_context *ctx, sqlite3_str *out);

/* Dimensions of a word vector, at most: attn_vectors_load's lines and attn_matrix's vectors. */
#define ATTN_VECTORS_MAX_DIM 4096

/* ------------------------------------------------------------- entry points (attnext.c's table) */

/* Each feature file exports only what attnext.c registers. */
/* attn_conn.c */
void attn_cache_limit_func(sqlite3_context *ctx, int argc, sqlite3_value **argv);
/* attn_deploy.c */
void attn_deploy_func(sqlite3_context *ctx, int argc, sqlite3_value **argv);
void attn_import_func(sqlite3_context *ctx, int argc, sqlite3_value **argv);
void attn_prune_func(sqlite3_context *ctx, int argc, sqlite3_value **argv);
/* attn_predict.c */
void attn_predict_func(sqlite3_context *ctx, int argc, sqlite3_value **argv);
extern const sqlite3_module attn_probs_weights_module; /* attn_probs, attn_weights */
/* attn_explain.c */
extern const sqlite3_module attn_explain_module; /* attn_explain */
/* attn_classify.c */
extern const sqlite3_module attn_classify_module;
extern const sqlite3_module attn_uncertain_module;
/* attn_train.c */
extern const sqlite3_module attn_train_module;
void attn_fit_func(sqlite3_context *ctx, int argc, sqlite3_value **argv);
/* attn_evaluate.c */
extern const sqlite3_module attn_eval_module; /* attn_evaluate, attn_confusion */
/* attn_heatmap_svg.c */
void attn_heatmap_svg_func(sqlite3_context *ctx, int argc, sqlite3_value **argv);
void attn_heatmap_query_svg_func(sqlite3_context *ctx, int argc, sqlite3_value **argv);
/* attn_training_svg.c */
void attn_training_svg_func(sqlite3_context *ctx, int argc, sqlite3_value **argv);
/* attn_matrix.c */
extern const sqlite3_module attn_matrix_module;
void attn_matrix_svg_func(sqlite3_context *ctx, int argc, sqlite3_value **argv);
/* attn_vectors.c */
extern const sqlite3_module attn_vectors_module;
/* attn_metrics.c */
extern const sqlite3_module attn_metrics_module;
/* attn_tune.c */
extern const sqlite3_module attn_tune_module;
/* attn_embed.c */
void attn_embed_func(sqlite3_context *ctx, int argc, sqlite3_value **argv);
/* attn_curve.c */
extern const sqlite3_module attn_curve_module;
void attn_curve_svg_func(sqlite3_context *ctx, int argc, sqlite3_value **argv);
/* attn_status.c */
extern const sqlite3_module attn_status_module;

#endif
