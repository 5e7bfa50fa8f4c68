/* attn_status.c -- the trainings running in this process, live: the table-valued function
 * attn_status, and the registry that attn_train, attn_fit and attn_tune report to (a run
 * registers when it starts, updates its epoch and batch as they go, and unregisters when it
 * ends).
 *
 *   SELECT name, function, epoch, epochs, batch, batches, round(train_loss, 4) AS loss,
 *          round(val_f1, 3) AS val_f1, seconds FROM attn_status;
 *
 * Any connection of the process sees every training of the process, whatever its connection and
 * database (the column `database` says which file). Other processes read the epochs of a
 * training from attn_training_log as they finish in WAL mode (attn_training.c). The registry is
 * the extension's one process-wide state: a list under a mutex, empty when nothing trains.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn_ext.h"
#include "compat.h" /* nn_os_seconds */

struct attn_status_entry {
  int64_t id;
  sqlite3 *db; /* the connection it trains on (attn_status_of: a node's job finds its runs) */
  char *database, *function, *name;
  const char *phase;
  int trial, trials, epoch, epochs, batch, batches, best_epoch;
  double loss, rows_per_second, val_loss, val_accuracy, val_f1, start;
  int64_t version;
  char started_at[32];
  nn_epoch_stats *log; /* the epochs so far (malloc'd), for attn_status_of */
  int nlog, cap_log;
  struct attn_status_entry *next;
};

static pthread_mutex_t status_lock = PTHREAD_MUTEX_INITIALIZER;
static attn_status_entry *status_list;
static int64_t status_next_id = 1;

static void status_free(attn_status_entry *e) {
  if (!e) return;
  free(e->database);
  free(e->function);
  free(e->name);
  free(e->log);
  free(e);
}

static char *status_strdup(const char *s) {
  size_t n = strlen(s ? s : "");
  char *copy = malloc(n + 1);
  if (copy) memcpy(copy, s ? s : "", n + 1);
  return copy;
}

attn_status_entry *attn_status_register(sqlite3 *db, const char *fn, const char *name) {
  attn_status_entry *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  const char *file = sqlite3_db_filename(db, "main");
  e->database = status_strdup(file);
  e->function = status_strdup(fn);
  e->name = status_strdup(name);
  if (!e->database || !e->function || !e->name) {
    status_free(e);
    return NULL; /* attn_status then misses this run: nothing else depends on it */
  }
  e->phase = "reading";
  e->db = db;
  e->start = nn_os_seconds();
  e->val_loss = e->val_accuracy = e->val_f1 = -1; /* none yet */
  attn_utc_now(e->started_at);
  pthread_mutex_lock(&status_lock);
  e->id = status_next_id++;
  e->next = status_list;
  status_list = e;
  pthread_mutex_unlock(&status_lock);
  return e;
}

void attn_status_unregister(attn_status_entry *e) {
  if (!e) return;
  pthread_mutex_lock(&status_lock);
  for (attn_status_entry **p = &status_list; *p; p = &(*p)->next)
    if (*p == e) {
      *p = e->next;
      break;
    }
  pthread_mutex_unlock(&status_lock);
  status_free(e);
}

void attn_status_phase(attn_status_entry *e, const char *phase, int epochs, int trial, int trials) {
  if (!e) return;
  pthread_mutex_lock(&status_lock);
  /* the batches of a new phase are its own: the pretraining's passes or round 1's last epoch
   * are not those of the training or of the scoring that follow (its first call comes later) */
  if (!e->phase || strcmp(e->phase, phase) != 0) e->batch = e->batches = 0;
  e->phase = phase;
  e->epochs = epochs;
  if (trial != e->trial) { /* a new trial of attn_tune starts from epoch 0 */
    e->epoch = e->batch = e->batches = e->best_epoch = 0;
    e->val_loss = e->val_accuracy = e->val_f1 = -1;
  }
  e->trial = trial;
  e->trials = trials;
  pthread_mutex_unlock(&status_lock);
}

void attn_status_batch(attn_status_entry *e, int batch, int batches, double loss,
                       double rows_per_second) {
  if (!e) return;
  pthread_mutex_lock(&status_lock);
  e->batch = batch;
  e->batches = batches;
  e->loss = loss;
  e->rows_per_second = rows_per_second;
  pthread_mutex_unlock(&status_lock);
}

void attn_status_epoch(attn_status_entry *e, const nn_epoch_stats *s, int best_epoch,
                       int64_t version) {
  if (!e) return;
  pthread_mutex_lock(&status_lock);
  e->epoch = s->epoch;
  e->loss = s->train_loss;
  e->val_loss = s->val_loss;
  e->val_accuracy = s->val_accuracy;
  e->val_f1 = s->val_f1;
  e->best_epoch = best_epoch;
  if (version > 0) e->version = version;
  if (e->nlog == e->cap_log) { /* a log that cannot grow only misses epochs in attn_jobs */
    int cap = e->cap_log ? 2 * e->cap_log : 16;
    nn_epoch_stats *log = realloc(e->log, sizeof *log * (size_t)cap);
    if (log) {
      e->log = log;
      e->cap_log = cap;
    }
  }
  if (e->nlog < e->cap_log) e->log[e->nlog++] = *s;
  pthread_mutex_unlock(&status_lock);
}

int attn_status_of(sqlite3 *db, attn_status_view *out, int max) {
  int n = 0;
  pthread_mutex_lock(&status_lock);
  for (attn_status_entry *e = status_list; e; e = e->next) {
    if (e->db != db) continue;
    /* the list is newest first: keep the oldest max */
    if (n == max) memmove(out, out + 1, sizeof *out * (size_t)--n);
    attn_status_view *v = &out[n];
    memset(v, 0, sizeof *v);
    v->phase = e->phase;
    v->trial = e->trial;
    v->trials = e->trials;
    v->epoch = e->epoch;
    v->epochs = e->epochs;
    v->batch = e->batch;
    v->batches = e->batches;
    v->best_epoch = e->best_epoch;
    v->train_loss = e->batches > 0 || e->epoch > 0 ? e->loss : NAN;
    v->val_loss = e->val_loss;
    v->val_accuracy = e->val_accuracy;
    v->val_f1 = e->val_f1;
    v->nlog = e->nlog < ATTN_STATUS_VIEW_LOG ? e->nlog : ATTN_STATUS_VIEW_LOG;
    /* the latest epochs when there are more than a view holds */
    if (v->nlog) memcpy(v->log, e->log + (e->nlog - v->nlog), sizeof *v->log * (size_t)v->nlog);
    v->first_epoch = e->nlog - v->nlog;
    n++;
  }
  pthread_mutex_unlock(&status_lock);
  /* oldest first */
  for (int i = 0; i < n / 2; i++) {
    attn_status_view tmp = out[i];
    out[i] = out[n - 1 - i];
    out[n - 1 - i] = tmp;
  }
  return n;
}

/* ------------------------------------------------------------------ attn_status */

enum {
  ATTN_STATUS_COL_ID,
  ATTN_STATUS_COL_DATABASE,
  ATTN_STATUS_COL_FUNCTION,
  ATTN_STATUS_COL_NAME,
  ATTN_STATUS_COL_PHASE,
  ATTN_STATUS_COL_TRIAL,
  ATTN_STATUS_COL_TRIALS,
  ATTN_STATUS_COL_EPOCH,
  ATTN_STATUS_COL_EPOCHS,
  ATTN_STATUS_COL_BATCH,
  ATTN_STATUS_COL_BATCHES,
  ATTN_STATUS_COL_TRAIN_LOSS,
  ATTN_STATUS_COL_VAL_LOSS,
  ATTN_STATUS_COL_VAL_ACCURACY,
  ATTN_STATUS_COL_VAL_F1,
  ATTN_STATUS_COL_BEST_EPOCH,
  ATTN_STATUS_COL_VERSION,
  ATTN_STATUS_COL_ROWS_PER_SECOND,
  ATTN_STATUS_COL_STARTED_AT,
  ATTN_STATUS_COL_SECONDS
};
static const char attn_status_schema[] =
    "CREATE TABLE x(id INTEGER, database TEXT, function TEXT, name TEXT, phase TEXT, "
    "trial INTEGER, trials INTEGER, epoch INTEGER, epochs INTEGER, batch INTEGER, "
    "batches INTEGER, train_loss REAL, val_loss REAL, val_accuracy REAL, val_f1 REAL, "
    "best_epoch INTEGER, version INTEGER, rows_per_second REAL, started_at TEXT, seconds REAL)";

typedef struct attn_status_cursor {
  sqlite3_vtab_cursor base;
  attn_status_entry *rows; /* copies, taken under the lock at xFilter */
  int n, row;
  double now;
} attn_status_cursor;

/* Innocuous: it reads the process's own state, no file, no table. */
static int attn_status_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                               sqlite3_vtab **out, char **errmsg) {
  return attn_vtab_connect(db, attn_status_schema, SQLITE_VTAB_INNOCUOUS, aux, 0,
                           sizeof(attn_status_cursor), out);
}

static int attn_status_best_index(sqlite3_vtab *vtab, sqlite3_index_info *info) {
  info->estimatedCost = 10;
  info->estimatedRows = 4;
  return SQLITE_OK;
}

static void attn_status_clear(attn_status_cursor *cur) {
  for (int i = 0; i < cur->n; i++) {
    sqlite3_free(cur->rows[i].database);
    sqlite3_free(cur->rows[i].function);
    sqlite3_free(cur->rows[i].name);
  }
  sqlite3_free(cur->rows);
  cur->rows = NULL;
  cur->n = cur->row = 0;
}

static int attn_status_close(sqlite3_vtab_cursor *base) {
  attn_status_clear((attn_status_cursor *)base);
  sqlite3_free(base);
  return SQLITE_OK;
}

static int attn_status_filter(sqlite3_vtab_cursor *base, int idx_num, const char *idx_str, int argc,
                              sqlite3_value **argv) {
  attn_status_cursor *cur = (attn_status_cursor *)base;
  int rc = SQLITE_OK;
  attn_status_clear(cur);
  cur->now = nn_os_seconds();
  pthread_mutex_lock(&status_lock);
  int n = 0;
  for (attn_status_entry *e = status_list; e; e = e->next) n++;
  if (n) {
    cur->rows = sqlite3_malloc64(sizeof *cur->rows * (sqlite3_uint64)n);
    if (!cur->rows) rc = SQLITE_NOMEM;
  }
  /* oldest first: the list is newest first */
  int k = n;
  for (attn_status_entry *e = status_list; rc == SQLITE_OK && e; e = e->next) {
    attn_status_entry *copy = &cur->rows[--k];
    *copy = *e;
    copy->next = NULL;
    copy->database = sqlite3_mprintf("%s", e->database);
    copy->function = sqlite3_mprintf("%s", e->function);
    copy->name = sqlite3_mprintf("%s", e->name);
    cur->n++;
    if (!copy->database || !copy->function || !copy->name) rc = SQLITE_NOMEM;
  }
  pthread_mutex_unlock(&status_lock);
  if (rc != SQLITE_OK) {
    /* the copies were filled from the end: move what was made to the front before freeing */
    if (cur->rows) memmove(cur->rows, cur->rows + (n - cur->n), sizeof *cur->rows * (size_t)cur->n);
    attn_status_clear(cur);
    return attn_vtab_fail(base->pVtab, rc, NULL, "attn_status");
  }
  return SQLITE_OK;
}

static int attn_status_next(sqlite3_vtab_cursor *base) {
  ((attn_status_cursor *)base)->row++;
  return SQLITE_OK;
}

static int attn_status_eof(sqlite3_vtab_cursor *base) {
  attn_status_cursor *cur = (attn_status_cursor *)base;
  return cur->row >= cur->n;
}

static void result_figure(sqlite3_context *ctx, double v) {
  if (v >= 0 && v == v) sqlite3_result_double(ctx, v);
  else sqlite3_result_null(ctx); /* none yet, or no validation */
}

static void result_count(sqlite3_context *ctx, int v) {
  if (v > 0) sqlite3_result_int(ctx, v);
  else sqlite3_result_null(ctx);
}

static int attn_status_column(sqlite3_vtab_cursor *base, sqlite3_context *ctx, int col) {
  attn_status_cursor *cur = (attn_status_cursor *)base;
  const attn_status_entry *e = &cur->rows[cur->row];
  switch (col) {
  case ATTN_STATUS_COL_ID: sqlite3_result_int64(ctx, e->id); break;
  case ATTN_STATUS_COL_DATABASE: sqlite3_result_text(ctx, e->database, -1, SQLITE_TRANSIENT); break;
  case ATTN_STATUS_COL_FUNCTION: sqlite3_result_text(ctx, e->function, -1, SQLITE_TRANSIENT); break;
  case ATTN_STATUS_COL_NAME: sqlite3_result_text(ctx, e->name, -1, SQLITE_TRANSIENT); break;
  case ATTN_STATUS_COL_PHASE: sqlite3_result_text(ctx, e->phase, -1, SQLITE_STATIC); break;
  case ATTN_STATUS_COL_TRIAL: result_count(ctx, e->trial); break;
  case ATTN_STATUS_COL_TRIALS: result_count(ctx, e->trials); break;
  case ATTN_STATUS_COL_EPOCH: sqlite3_result_int(ctx, e->epoch); break;
  case ATTN_STATUS_COL_EPOCHS: result_count(ctx, e->epochs); break;
  case ATTN_STATUS_COL_BATCH: sqlite3_result_int(ctx, e->batch); break;
  case ATTN_STATUS_COL_BATCHES: result_count(ctx, e->batches); break;
  case ATTN_STATUS_COL_TRAIN_LOSS:
    /* NULL before the first batch and while self-training scores the unlabelled rows */
    if ((e->batches > 0 || e->epoch > 0) && !isnan(e->loss)) sqlite3_result_double(ctx, e->loss);
    break;
  case ATTN_STATUS_COL_VAL_LOSS: result_figure(ctx, e->val_loss); break;
  case ATTN_STATUS_COL_VAL_ACCURACY: result_figure(ctx, e->val_accuracy); break;
  case ATTN_STATUS_COL_VAL_F1: result_figure(ctx, e->val_f1); break;
  case ATTN_STATUS_COL_BEST_EPOCH: result_count(ctx, e->best_epoch); break;
  case ATTN_STATUS_COL_VERSION:
    if (e->version > 0) sqlite3_result_int64(ctx, e->version);
    break;
  case ATTN_STATUS_COL_ROWS_PER_SECOND:
    if (e->batches > 0) sqlite3_result_double(ctx, e->rows_per_second);
    break;
  case ATTN_STATUS_COL_STARTED_AT:
    sqlite3_result_text(ctx, e->started_at, -1, SQLITE_TRANSIENT);
    break;
  case ATTN_STATUS_COL_SECONDS: sqlite3_result_double(ctx, cur->now - e->start); break;
  default: break;
  }
  return SQLITE_OK;
}

static int attn_status_rowid(sqlite3_vtab_cursor *base, sqlite_int64 *rowid) {
  attn_status_cursor *cur = (attn_status_cursor *)base;
  *rowid = cur->rows[cur->row].id;
  return SQLITE_OK;
}

const sqlite3_module attn_status_module = {
    .iVersion = 0,
    .xCreate = NULL, /* eponymous only */
    .xConnect = attn_status_connect,
    .xBestIndex = attn_status_best_index,
    .xDisconnect = attn_vtab_disconnect,
    .xOpen = attn_vtab_open,
    .xClose = attn_status_close,
    .xFilter = attn_status_filter,
    .xNext = attn_status_next,
    .xEof = attn_status_eof,
    .xColumn = attn_status_column,
    .xRowid = attn_status_rowid,
};
