/* attn_job_runner.c -- training jobs in a dqlite node: the core that attn_train, attn_fit and
 * attn_tune call in a node (attn_job_submit, through the hooks attn_jobs.c registers attnext
 * with), the threads that train beside Raft, and the job runner's watch over the cluster's jobs.
 * The SQL side (attn_jobs, attn_cancel, attn_job_commit) is attn_jobs.c; the node that hosts it,
 * attnext_node.c. Linked into the node only.
 *
 *   dqlite> SELECT attn_fit('news', 'SELECT title, category FROM headlines', '{"epochs":40}');
 *   {"job":3,"function":"attn_fit","name":"news","state":"queued","node":1,...}
 *   dqlite> SELECT job, state, epoch, epochs, round(train_loss, 4) FROM attn_jobs;
 *
 * Why a job: dqlite runs every statement to its end on the node's event loop, the thread that
 * also sends Raft's heartbeats; a training there stops the heartbeats, the followers elect
 * another leader and the training's commit fails. So in a node the statement only checks what
 * it can without the rows, copies the database (sqlite3_serialize: the statement's consistent
 * snapshot, milliseconds for the demo's database), records the job (a row of attn_job_runs, in
 * the caller's transaction: the job exists once that commits) and returns its id.
 *
 * A job's thread waits until its row is committed (read through the leader), waits for the
 * node's training slot (one training at a time per node, in submission order), marks the row
 * running and opens the copy as a private in-memory connection (attnext registers itself on it:
 * it is not a dqlite connection, so attn_fit trains there as in any program). It runs the
 * function on it -- the same code, options, deploy decision and lineage as anywhere -- then
 * sends what the run saved in the copy (the model rows, their log and lineage, as a small
 * database image) to the leader: BEGIN; SELECT attn_job_commit(job, token, image); COMMIT, a
 * short transaction replicated like any write. attn_job_commit numbers the versions after the
 * cluster's own and writes them with attn_store_save_items, and the job's row says done in the
 * same transaction. A lost connection or a new leader: the thread asks again (the commit is
 * idempotent: a job already done answers its version).
 *
 * The manager thread, once a second: each job of this process writes its progress (attn_status
 * of its private connection: epoch, batch, losses, and the finished epochs into
 * attn_job_epochs) through the leader; a progress write that finds the row no longer queued or
 * running (attn_cancel, or failed by the leader) interrupts the job. And the reaper: the leader
 * fails the running jobs of a node that is gone (its address refuses connections: killed or
 * crashed) or silent for longer than the lease; any node fails the jobs its own earlier process
 * left. A failed job leaves no model anywhere: its models lived only in its private copy.
 */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attn_jobs.h"
#include "compat.h" /* nn_os_gmtime, nn_os_seconds */
#include "json.h"

#define JOB_TICK_SECONDS 1.0      /* progress, heartbeats and the leader's reaper */
#define JOB_CONFIRM_SECONDS 600.0 /* a job whose row never commits is dropped after this */
#define JOB_STOP_SECONDS 3.0      /* how long a stopping node tries to mark its jobs failed */
#define JOB_MAX_TRIAL 256         /* attn_tune's trials at most */
#define JOB_STATUS_VIEWS 2        /* attn_tune runs two trials at a time */

enum { JOB_WAITING, JOB_QUEUED, JOB_RUNNING, JOB_OVER };

typedef struct attn_job {
  int64_t id, seq; /* seq: submission order in this process (the training slot's) */
  char *database, *fn, *name, *query, *grid, *options;
  char token[33];          /* this job's secret: only its thread commits it */
  unsigned char *snapshot; /* the copy of the database (sqlite3_malloc'd) until it opens */
  sqlite3_int64 snapshot_size;
  int state;             /* JOB_*; the fields below too: under runner.lock */
  int stop;              /* interrupted: nothing is committed */
  char stop_reason[256]; /* the error its row gets ("" when the row says why already) */
  sqlite3 *p;            /* the private copy while the job trains */
  pthread_t thread;
  double last_contact;            /* the last progress write that reached the leader (monotonic) */
  int written[JOB_MAX_TRIAL + 1]; /* epochs in attn_job_epochs, per trial (0: not a tune) */
  struct attn_job *next;
} attn_job;

static struct {
  pthread_mutex_t lock;
  pthread_cond_t wake; /* the manager's tick, a free training slot, stop */
  atomic_int started;
  int stopping;
  attn_job_host host;
  char address[256];
  char incarnation[33];
  pthread_t manager;
  attn_job *jobs;
  int64_t next_seq;
  int training; /* a job holds the node's training slot */
  char **databases;
  int ndatabases;
} runner = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static void job_sleep(double seconds) {
  struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
  nanosleep(&ts, NULL);
}

static char *job_strdup(const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s);
  char *copy = sqlite3_malloc64(n + 1);
  if (copy) memcpy(copy, s, n + 1);
  return copy;
}

/* A line of the node's log (stderr), as attnext_node.c writes them. No SQLite call: the
 * extension's routines are reachable only once a connection has loaded it. */
static void job_log(const char *fmt, ...) {
  char stamp[32];
  va_list ap;
  struct timespec ts;
  struct tm tm;
  clock_gettime(CLOCK_REALTIME, &ts);
  time_t secs = ts.tv_sec;
  nn_os_gmtime(&secs, &tm);
  strftime(stamp, sizeof stamp, "%H:%M:%S", &tm);
  fprintf(stderr, "%s.%03ld attnext-node %llu: ", stamp, ts.tv_nsec / 1000000,
          (unsigned long long)runner.host.node_id);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

/* bytes random bytes as hex (out: 2 * bytes + 1). From /dev/urandom: attn_jobs_start runs
 * before any connection made SQLite's routines reachable (sqlite3_randomness); the clock and
 * the process id when it cannot be read. */
static void job_hex(char *out, int bytes) {
  unsigned char r[32];
  FILE *f = fopen("/dev/urandom", "rb");
  size_t got = f ? fread(r, 1, (size_t)bytes, f) : 0;
  if (f) fclose(f);
  if (got < (size_t)bytes) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ ((uint64_t)getpid() << 40);
    for (int i = 0; i < bytes; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      r[i] = (unsigned char)x;
    }
  }
  for (int i = 0; i < bytes; i++) snprintf(out + 2 * i, 3, "%02x", r[i]);
}

/* ------------------------------------------------------------------ values for the host */

static attn_job_value v_int(int64_t i) { return (attn_job_value){.type = SQLITE_INTEGER, .i = i}; }
static attn_job_value v_text(const char *s) {
  return s ? (attn_job_value){.type = SQLITE_TEXT, .p = s, .n = (int64_t)strlen(s)}
           : (attn_job_value){.type = SQLITE_NULL};
}
static attn_job_value v_null(void) { return (attn_job_value){.type = SQLITE_NULL}; }
/* a count: NULL when not known (0) */
static attn_job_value v_count(int n) { return n > 0 ? v_int(n) : v_null(); }
/* a figure: NULL when not known (NaN, or negative for attn_status's val_*) */
static attn_job_value v_figure(double d, int nonnegative) {
  if (!isfinite(d) || (nonnegative && d < 0)) return v_null();
  return (attn_job_value){.type = SQLITE_FLOAT, .d = d};
}

/* ------------------------------------------------------------------ state */

int attn_jobs_here(attn_conn *conn) {
  return atomic_load(&runner.started) && attn_conn_in_dqlite(conn);
}

const char *attn_jobs_incarnation(void) {
  return atomic_load(&runner.started) ? runner.incarnation : "";
}

void attn_jobs_note_database(sqlite3 *db) {
  if (!atomic_load(&runner.started)) return;
  sqlite3_vfs *vfs = NULL;
  if (sqlite3_file_control(db, "main", SQLITE_FCNTL_VFS_POINTER, &vfs) != SQLITE_OK || !vfs ||
      !vfs->zName || strncmp(vfs->zName, "dqlite-", 7) != 0)
    return;
  const char *name = sqlite3_db_filename(db, "main");
  if (!name || !*name) return;
  pthread_mutex_lock(&runner.lock);
  int known = 0;
  for (int i = 0; i < runner.ndatabases && !known; i++)
    known = strcmp(runner.databases[i], name) == 0;
  if (!known) {
    char **list = realloc(runner.databases, sizeof *list * (size_t)(runner.ndatabases + 1));
    char *copy = list ? malloc(strlen(name) + 1) : NULL;
    if (list) runner.databases = list;
    if (copy) {
      memcpy(copy, name, strlen(name) + 1);
      runner.databases[runner.ndatabases++] = copy;
    }
  }
  pthread_mutex_unlock(&runner.lock);
}

int attn_job_live(const char *database, int64_t job, attn_status_view *out) {
  int found = 0;
  if (!atomic_load(&runner.started)) return 0;
  pthread_mutex_lock(&runner.lock);
  for (attn_job *j = runner.jobs; j && !found; j = j->next) {
    if (j->id != job || strcmp(j->database, database) != 0 || !j->p) continue;
    attn_status_view views[JOB_STATUS_VIEWS];
    int n = attn_status_of(j->p, views, JOB_STATUS_VIEWS);
    if (n > 0) {
      *out = views[n - 1]; /* the newest run (a tune's latest trial) */
      found = 1;
    }
  }
  pthread_mutex_unlock(&runner.lock);
  return found;
}

/* ------------------------------------------------------------------ the receipt */

void attn_job_receipt_column(const attn_job_receipt *r, sqlite3_context *ctx, int col) {
  switch (col) {
  case 0: sqlite3_result_int64(ctx, r->job); break;
  case 1: sqlite3_result_text(ctx, r->fn, -1, SQLITE_STATIC); break;
  case 2: sqlite3_result_text(ctx, r->name, -1, SQLITE_TRANSIENT); break;
  case 3: sqlite3_result_text(ctx, "queued", -1, SQLITE_STATIC); break;
  case 4: sqlite3_result_int64(ctx, (sqlite3_int64)r->node); break;
  case 5: sqlite3_result_text(ctx, r->submitted_at, -1, SQLITE_TRANSIENT); break;
  default: break;
  }
}

char *attn_job_receipt_json(const attn_job_receipt *r) {
  sqlite3_str *s = sqlite3_str_new(NULL);
  sqlite3_str_appendf(s, "{\"job\":%lld,\"function\":\"%s\",\"name\":", (long long)r->job, r->fn);
  attn_json_string(s, r->name, (int)strlen(r->name));
  sqlite3_str_appendf(s, ",\"state\":\"queued\",\"node\":%llu,\"submitted_at\":\"%s\"}",
                      (unsigned long long)r->node, r->submitted_at);
  return sqlite3_str_finish(s);
}

/* ------------------------------------------------------------------ submitting */

static void job_free(attn_job *job) {
  if (!job) return;
  sqlite3_free(job->database);
  sqlite3_free(job->fn);
  sqlite3_free(job->name);
  sqlite3_free(job->query);
  sqlite3_free(job->grid);
  sqlite3_free(job->options);
  sqlite3_free(job->snapshot);
  sqlite3_free(job);
}

static void *job_main(void *arg);

int attn_job_submit(attn_conn *conn, const char *fn, sqlite3_value *name_arg,
                    sqlite3_value *query_arg, const char *grid, sqlite3_value *options_arg,
                    int check_options, attn_job_receipt *out, char **msg) {
  sqlite3 *db = attn_conn_db(conn);
  sqlite3_stmt *stmt = NULL;
  attn_job *job = NULL;
  const char *name = NULL, *options = NULL;
  int rc;
  memset(out, 0, sizeof *out);
  if ((rc = attn_conn_check_write(conn, fn, msg)) != SQLITE_OK) return rc;
  if ((rc = attn_name_value(fn, name_arg, &name, msg)) != SQLITE_OK) return rc;
  if (options_arg && sqlite3_value_type(options_arg) != SQLITE_NULL) {
    if (sqlite3_value_type(options_arg) != SQLITE_TEXT) {
      *msg = sqlite3_mprintf("%s: the options must be a JSON object as text, e.g. "
                             "'{\"epochs\":10}'",
                             fn);
      return SQLITE_ERROR;
    }
    options = (const char *)sqlite3_value_text(options_arg);
  }
  if (check_options) { /* bad options fail now, not in the job */
    attn_training t;
    memset(&t, 0, sizeof t);
    t.conn = conn;
    t.fn = fn;
    rc = attn_options_read(&t, options, ATTN_OPTIONS_TRAINING, msg);
    attn_training_free(&t);
    if (rc != SQLITE_OK) return rc;
  }
  const char *query = query_arg ? (const char *)sqlite3_value_text(query_arg) : NULL;
  rc = attn_prepare_query(db, fn, query, 2, "(text, label)", &stmt, msg);
  sqlite3_finalize(stmt);
  stmt = NULL;
  if (rc != SQLITE_OK) return rc;
  if ((rc = attn_store_check_save(conn, fn, name, 1, msg)) != SQLITE_OK) return rc;

  job = sqlite3_malloc64(sizeof *job);
  if (!job) return SQLITE_NOMEM;
  memset(job, 0, sizeof *job);
  job->database = job_strdup(sqlite3_db_filename(db, "main"));
  job->fn = job_strdup(fn);
  job->name = job_strdup(name);
  job->query = job_strdup(query);
  job->grid = job_strdup(grid);
  job->options = job_strdup(options);
  if (!job->database || !job->fn || !job->name || !job->query || (grid && !job->grid) ||
      (options && !job->options)) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  job_hex(job->token, 16);
  /* The snapshot: the database as this statement sees it (its transaction included). A
   * WAL-mode image is marked as a rollback-journal one (header bytes 18-19) so that an
   * in-memory connection opens it. */
  job->snapshot = sqlite3_serialize(db, "main", &job->snapshot_size, 0);
  if (!job->snapshot) {
    *msg = sqlite3_mprintf("%s: cannot copy the database for the job: out of memory", fn);
    rc = SQLITE_NOMEM;
    goto done;
  }
  if (job->snapshot_size >= 100 && job->snapshot[18] == 2)
    job->snapshot[18] = job->snapshot[19] = 1;
  rc = sqlite3_exec(db, ATTN_JOB_SCHEMA, NULL, NULL, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(db,
                            "INSERT INTO main.attn_job_runs(function, name, query, grid, options, "
                            "state, node, address, incarnation, token, submitted_at) VALUES(?1, "
                            "?2, ?3, ?4, ?5, 'queued', ?6, ?7, ?8, ?9, strftime('%Y-%m-%dT%H:%M:"
                            "%fZ', 'now')) RETURNING job, submitted_at",
                            -1, &stmt, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(stmt, 1, fn, -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 2, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 3, query, -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 4, grid, -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 5, options, -1, SQLITE_STATIC);
    sqlite3_bind_int64(stmt, 6, (sqlite3_int64)runner.host.node_id);
    sqlite3_bind_text(stmt, 7, runner.address, -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 8, runner.incarnation, -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 9, job->token, -1, SQLITE_STATIC);
    rc = sqlite3_step(stmt);
  }
  if (rc == SQLITE_ROW) {
    job->id = sqlite3_column_int64(stmt, 0);
    const char *at = (const char *)sqlite3_column_text(stmt, 1);
    snprintf(out->submitted_at, sizeof out->submitted_at, "%s", at ? at : "");
    rc = sqlite3_step(stmt) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
  }
  if (rc != SQLITE_OK) {
    *msg =
        sqlite3_mprintf("%s: cannot record the job in attn_job_runs: %s", fn, sqlite3_errmsg(db));
    rc = SQLITE_ERROR;
    goto done;
  }
  out->name = job_strdup(name);
  if (!out->name) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  out->job = job->id;
  out->node = runner.host.node_id;
  out->fn = fn;
  pthread_mutex_lock(&runner.lock);
  job->seq = ++runner.next_seq;
  job->state = JOB_WAITING;
  job->last_contact = nn_os_seconds();
  if (runner.stopping || pthread_create(&job->thread, NULL, job_main, job) != 0) {
    pthread_mutex_unlock(&runner.lock);
    *msg = sqlite3_mprintf("%s: cannot start the job's thread%s", fn,
                           runner.stopping ? ": the node is stopping" : "");
    rc = SQLITE_ERROR;
    goto done;
  }
  job->next = runner.jobs;
  runner.jobs = job;
  job = NULL; /* the thread's now */
  pthread_mutex_unlock(&runner.lock);
done:
  sqlite3_finalize(stmt);
  job_free(job);
  if (rc != SQLITE_OK) {
    sqlite3_free(out->name);
    out->name = NULL;
    if (!*msg) *msg = sqlite3_mprintf("%s: out of memory", fn);
  }
  return rc;
}

/* ------------------------------------------------------------------ the job's thread */

/* Stop the job (under runner.lock): its private connection is interrupted, nothing will be
 * committed; reason (may be "") is what its row gets. */
static void job_stop_locked(attn_job *job, const char *reason) {
  if (!job->stop) snprintf(job->stop_reason, sizeof job->stop_reason, "%s", reason);
  job->stop = 1;
  if (job->p) sqlite3_interrupt(job->p);
  pthread_cond_broadcast(&runner.wake);
}

static int job_stopped(attn_job *job) {
  pthread_mutex_lock(&runner.lock);
  int stop = job->stop;
  pthread_mutex_unlock(&runner.lock);
  return stop;
}

/* How long the job may go without reaching the leader before it gives up (the leader fails it
 * after the lease anyway); a stopping node tries for a few seconds only. */
static int job_out_of_time(attn_job *job) {
  pthread_mutex_lock(&runner.lock);
  double limit = runner.stopping ? JOB_STOP_SECONDS : runner.host.lease;
  int out = nn_os_seconds() - job->last_contact > limit;
  pthread_mutex_unlock(&runner.lock);
  return out;
}

/* An exec through the leader, tried again while no leader answers or another transaction
 * holds the write lock (within the job's time). */
static int job_exec(attn_job *job, attn_job_client *client, const char *sql,
                    const attn_job_value *params, int n, int64_t *changes, int *code, char *msg,
                    size_t cap) {
  double delay = 0.05;
  for (;;) {
    int busy = 0;
    int rc = runner.host.exec(client, sql, params, n, changes, &busy, msg, cap);
    if (code) *code = busy;
    /* dqlite writes one transaction at a time: another connection's makes this one busy */
    busy = rc == ATTN_HOST_SQL_ERROR &&
           ((busy & 0xff) == SQLITE_BUSY || (busy & 0xff) == SQLITE_LOCKED);
    if (rc != ATTN_HOST_UNREACHABLE && !busy) return rc;
    if (job_out_of_time(job)) return rc;
    job_sleep(delay);
    delay = delay < 0.5 ? 2 * delay : 0.5;
  }
}

/* The job's row ends: state (failed, cancelled) and error, unless it ended already. */
static void job_finish_row(attn_job *job, attn_job_client *client, const char *state,
                           const char *error) {
  char msg[512];
  int64_t changes = 0;
  attn_job_value params[4] = {v_int(job->id), v_text(job->token), v_text(state), v_text(error)};
  int rc = job_exec(job, client,
                    "UPDATE main.attn_job_runs SET state = ?3, error = ?4, phase = NULL, "
                    "finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE job = ?1 AND "
                    "token = ?2 AND state IN ('queued', 'running')",
                    params, 4, &changes, NULL, msg, sizeof msg);
  if (rc != ATTN_HOST_OK)
    job_log("job %lld (%s): cannot mark it %s (%s): %s", (long long)job->id, job->database, state,
            error, msg);
}

/* Wait until the job's row is committed (the caller's transaction): 1 when it is queued, 0
 * when it never was (rolled back: its id went to another job, or no row for
 * JOB_CONFIRM_SECONDS: dropped) or is over already. */
static int job_confirm(attn_job *job, attn_job_client *client) {
  double begun = nn_os_seconds(), delay = 0.02;
  char msg[512];
  attn_job_value params[2] = {v_int(job->id), v_text(job->token)};
  while (!job_stopped(job)) {
    attn_job_rows rows;
    int rc =
        runner.host.query(client, "SELECT state, token = ?2 FROM main.attn_job_runs WHERE job = ?1",
                          params, 2, &rows, msg, sizeof msg);
    if (rc == ATTN_HOST_OK && rows.nrows == 1 && rows.ncols == 2) {
      int ours = rows.values[1].type == SQLITE_INTEGER && rows.values[1].i == 1;
      int queued = ours && rows.values[0].type == SQLITE_TEXT &&
                   strcmp((const char *)rows.values[0].p, "queued") == 0;
      runner.host.free_rows(&rows);
      if (!ours) /* the id went to another job: the statement's transaction rolled back */
        job_log("job %lld (%s): its statement's transaction was rolled back: dropped",
                (long long)job->id, job->database);
      return queued;
    }
    if (rc == ATTN_HOST_OK) runner.host.free_rows(&rows);
    if (nn_os_seconds() - begun > JOB_CONFIRM_SECONDS) {
      job_log("job %lld (%s): its row was not committed within %.0f s: dropped", (long long)job->id,
              job->database, JOB_CONFIRM_SECONDS);
      return 0;
    }
    job_sleep(delay);
    delay = delay < 0.5 ? 1.5 * delay : 0.5;
  }
  return 0;
}

/* Whether job is the first in submission order of the queued jobs (under runner.lock). */
static int job_first_queued(const attn_job *job) {
  for (const attn_job *j = runner.jobs; j; j = j->next)
    if (j != job && j->state == JOB_QUEUED && !j->stop && j->seq < job->seq) return 0;
  return 1;
}

/* The SQL that runs the job's function on its private copy, and the keys of its result: NULL
 * for attn_fit (one row, one column: its JSON object as text); attn_train's epochs and
 * attn_tune's trials are one object per row with these keys, in column order (job_result). */
static const char *const job_train_keys[] = {"epoch",   "train_loss", "val_loss", "val_accuracy",
                                             "val_f1",  "lr",         "seconds",  "best",
                                             "version", "deployed",   NULL};
static const char *const job_tune_keys[] = {"trial",        "config",   "best_epoch", "val_loss",
                                            "val_accuracy", "val_f1",   "seconds",    "chosen",
                                            "version",      "deployed", NULL};
static const char *job_sql(const attn_job *job, const char *const **keys) {
  *keys = NULL;
  if (strcmp(job->fn, "attn_train") == 0) {
    *keys = job_train_keys;
    return "SELECT epoch, train_loss, val_loss, val_accuracy, val_f1, lr, seconds, best, "
           "version, deployed FROM attn_train(?1, ?2, ?3)";
  }
  if (strcmp(job->fn, "attn_tune") == 0) {
    *keys = job_tune_keys;
    return "SELECT trial, config, best_epoch, val_loss, val_accuracy, val_f1, seconds, chosen, "
           "version, deployed FROM attn_tune(?1, ?2, ?4, ?3)";
  }
  return "SELECT attn_fit(?1, ?2, ?3)";
}

/* Run stmt (job_sql) and take the function's result as JSON text into *out (sqlite3_malloc'd):
 * attn_fit's text as it is; the rows as an array of objects with `keys`, byte for byte what
 * json_group_array(json_object(...)) wrote before (attn_json_value; the "config" JSON of a
 * tune's trial written compact, as json(config) did). SQLITE_OK, else an error code and the
 * reason in error (or the statement's error in sqlite3_errmsg). */
static int job_result(sqlite3_stmt *stmt, const char *const *keys, char **out, char *error,
                      size_t cap) {
  int rc;
  *out = NULL;
  if (!keys) {
    rc = sqlite3_step(stmt);
    if (rc != SQLITE_ROW) return rc;
    if (sqlite3_column_type(stmt, 0) != SQLITE_TEXT) {
      snprintf(error, cap, "no result");
      return SQLITE_ERROR;
    }
    *out = job_strdup((const char *)sqlite3_column_text(stmt, 0));
    return *out ? SQLITE_OK : SQLITE_NOMEM;
  }
  nn_strbuf sb;
  nn_strbuf_init(&sb, &attn_mem);
  nn_strbuf_puts(&sb, "[");
  int n = 0;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    rc = SQLITE_OK;
    nn_strbuf_puts(&sb, n++ ? ",{" : "{");
    for (int k = 0; rc == SQLITE_OK && keys[k]; k++) {
      nn_strbuf_printf(&sb, "%s\"%s\":", k ? "," : "", keys[k]);
      sqlite3_value *v = sqlite3_column_value(stmt, k);
      if (strcmp(keys[k], "config") == 0 && sqlite3_value_type(v) != SQLITE_NULL) {
        const char *text = (const char *)sqlite3_value_text(v);
        nn_json *doc = NULL;
        char err[NN_ERR_LEN];
        int st = text ? nn_json_parse(&doc, text, (size_t)sqlite3_value_bytes(v), &attn_mem, err)
                      : NN_NOMEM;
        if (st == NN_OK) nn_strbuf_append_json_compact(&sb, doc, text);
        nn_json_free(doc);
        if (st == NN_ERROR) snprintf(error, cap, "malformed JSON");
        rc = st == NN_OK ? SQLITE_OK : st == NN_NOMEM ? SQLITE_NOMEM : SQLITE_ERROR;
      } else {
        rc = attn_json_value(&sb, v);
        if (rc == SQLITE_MISMATCH) snprintf(error, cap, "%s", ATTN_JSON_BLOB_MESSAGE);
      }
    }
    nn_strbuf_puts(&sb, "}");
    if (rc != SQLITE_OK) break;
  }
  nn_strbuf_puts(&sb, "]");
  if (rc == SQLITE_DONE) rc = sb.oom ? SQLITE_NOMEM : SQLITE_OK;
  if (rc == SQLITE_OK) {
    *out = job_strdup(sb.data);
    if (!*out) rc = SQLITE_NOMEM;
  }
  nn_strbuf_free(&sb);
  return rc;
}

/* Step a statement on p with text arguments; SQLITE_OK, or an error with msg. */
static int p_exec(sqlite3 *p, const char *sql, const char *const *texts, int n, const int64_t *ints,
                  int nints, char **msg) {
  int rc = attn_sql_ints(p, sql, texts, n, ints, nints, NULL, 0);
  if (rc == SQLITE_DONE || rc == SQLITE_ROW) return SQLITE_OK;
  if (!*msg) *msg = sqlite3_mprintf("%s", sqlite3_errmsg(p));
  return rc;
}

/* The smallest and the largest "version" of the result (attn_fit's object, or each object of
 * attn_train's or attn_tune's array) into range[0..1]; versions that are null or not numbers
 * are no versions (a REAL one counts as its integer part). SQLITE_NOTFOUND when there is none
 * or the result is not JSON. */
static int job_versions(const char *result, int64_t range[2]) {
  nn_json *doc = NULL;
  char err[NN_ERR_LEN];
  int st = nn_json_parse(&doc, result, strlen(result), &attn_mem, err), found = 0;
  if (st != NN_OK) return st == NN_NOMEM ? SQLITE_NOMEM : SQLITE_NOTFOUND;
  int array = doc->type == NN_JSON_ARRAY;
  size_t n = array ? doc->count : 1;
  for (size_t i = 0; i < n; i++) {
    const nn_json *v = nn_json_get(array ? &doc->items[i] : doc, "version");
    if (!v || v->type != NN_JSON_NUMBER) continue;
    int64_t version = v->is_integer          ? v->integer
                      : v->number >= 9.2e18  ? INT64_MAX
                      : v->number <= -9.2e18 ? INT64_MIN
                                             : (int64_t)v->number;
    if (!found || version < range[0]) range[0] = version;
    if (!found || version > range[1]) range[1] = version;
    found = 1;
  }
  nn_json_free(doc);
  return found ? SQLITE_OK : SQLITE_NOTFOUND;
}

/* The image a job sends to attn_job_commit: a small database (meta, models, log, lineage) of
 * what the run saved in the copy, versions first..last of the job's name. */
static int job_payload(sqlite3 *p, attn_job *job, const char *result, int64_t base_version,
                       int64_t base_rowid, unsigned char **out, sqlite3_int64 *size, char **msg) {
  int64_t range[2] = {0, 0}; /* first, last */
  *out = NULL;
  int rc = job_versions(result, range);
  if (rc == SQLITE_NOMEM) return rc;
  int64_t first = range[0], last = range[1];
  if (rc != SQLITE_OK || first <= 0 || last < first) {
    *msg = sqlite3_mprintf("%s: the run saved no version (result %s)", job->fn, result);
    return SQLITE_ERROR;
  }
  rc = sqlite3_exec(p,
                    "ATTACH ':memory:' AS job_out;"
                    "CREATE TABLE job_out.meta(function TEXT, name TEXT, base_version INTEGER, "
                    "base_rowid INTEGER, first_version INTEGER, last_version INTEGER, result "
                    "TEXT);"
                    "CREATE TABLE job_out.models(version INTEGER, deployed INTEGER, metrics "
                    "TEXT, weights BLOB);"
                    "CREATE TABLE job_out.log(version INTEGER, epoch INTEGER, train_loss REAL, "
                    "val_loss REAL, val_accuracy REAL, val_f1 REAL, lr REAL, seconds REAL);"
                    "CREATE TABLE job_out.lineage AS SELECT * FROM main.attn_lineage WHERE 0;",
                    NULL, NULL, NULL);
  if (rc != SQLITE_OK) {
    *msg = sqlite3_mprintf("%s: cannot write the job's result: %s", job->fn, sqlite3_errmsg(p));
    return rc;
  }
  const char *meta_texts[3] = {job->fn, job->name, result};
  const int64_t meta_ints[4] = {base_version, base_rowid, first, last};
  const char *name[1] = {job->name};
  rc = p_exec(p, "INSERT INTO job_out.meta VALUES(?1, ?2, ?4, ?5, ?6, ?7, ?3)", meta_texts, 3,
              meta_ints, 4, msg);
  if (rc == SQLITE_OK)
    rc = p_exec(p,
                "INSERT INTO job_out.models SELECT version, deployed, metrics, weights FROM "
                "main.attn_models WHERE name = ?1 AND version BETWEEN ?2 AND ?3 ORDER BY version",
                name, 1, range, 2, msg);
  if (rc == SQLITE_OK)
    rc = p_exec(p,
                "INSERT INTO job_out.log SELECT version, epoch, train_loss, val_loss, "
                "val_accuracy, val_f1, lr, seconds FROM main.attn_training_log WHERE name = ?1 "
                "AND version BETWEEN ?2 AND ?3 ORDER BY version, epoch",
                name, 1, range, 2, msg);
  if (rc == SQLITE_OK)
    rc = p_exec(p,
                "INSERT INTO job_out.lineage SELECT * FROM main.attn_lineage WHERE name = ?1 AND "
                "version BETWEEN ?2 AND ?3 ORDER BY version",
                name, 1, range, 2, msg);
  if (rc == SQLITE_OK) {
    *out = sqlite3_serialize(p, "job_out", size, 0);
    if (!*out) rc = SQLITE_NOMEM;
  }
  if (rc != SQLITE_OK && !*msg) *msg = sqlite3_mprintf("%s: out of memory", job->fn);
  return rc;
}

/* Commit the job's result through the leader: BEGIN; SELECT attn_job_commit(...); COMMIT, again
 * on a new leader after a lost connection. Returns 1 when committed, 0 when not (*error says
 * why when the job's row should say failed; empty when its row says why already). */
static int job_commit(attn_job *job, attn_job_client *client, const unsigned char *payload,
                      sqlite3_int64 size, char *error, size_t cap) {
  char msg[512];
  double delay = 0.1;
  attn_job_value params[3] = {
      v_int(job->id), v_text(job->token), {.type = SQLITE_BLOB, .p = payload, .n = size}};
  error[0] = 0;
  for (int attempt = 0;; attempt++) {
    int code = 0;
    if (job_stopped(job)) return 0;
    int rc = runner.host.exec(client, "BEGIN", NULL, 0, NULL, &code, msg, sizeof msg);
    if (rc == ATTN_HOST_OK)
      rc = runner.host.exec(client, "SELECT attn_job_commit(?1, ?2, ?3)", params, 3, NULL, &code,
                            msg, sizeof msg);
    /* an EXEC of a SELECT that returns a row ends with "another row available" (SQLITE_ROW):
     * the function ran */
    if (rc == ATTN_HOST_SQL_ERROR && code == SQLITE_ROW) rc = ATTN_HOST_OK;
    if (rc == ATTN_HOST_OK)
      rc = runner.host.exec(client, "COMMIT", NULL, 0, NULL, &code, msg, sizeof msg);
    if (rc == ATTN_HOST_OK) return 1;
    if (rc == ATTN_HOST_SQL_ERROR) {
      char ignored[256];
      runner.host.exec(client, "ROLLBACK", NULL, 0, NULL, NULL, ignored, sizeof ignored);
      if ((code & 0xff) != SQLITE_BUSY && (code & 0xff) != SQLITE_LOCKED) {
        snprintf(error, cap, "%s", msg);
        return 0;
      }
      if (attempt > 100) {
        snprintf(error, cap, "%s (tried %d times)", msg, attempt);
        return 0;
      }
    } else if (job_out_of_time(job)) {
      snprintf(error, cap, "%s: could not reach a leader to commit the model: %s", job->fn, msg);
      return 0;
    }
    job_sleep(delay);
    delay = delay < 1 ? 2 * delay : 1;
  }
}

/* Run the job on its private copy; the outcome in the job's row. */
static void job_run(attn_job *job, attn_job_client *client) {
  char *msg = NULL, error[1024] = "";
  char *result = NULL;
  sqlite3 *p = NULL;
  sqlite3_stmt *stmt = NULL;
  unsigned char *payload = NULL;
  sqlite3_int64 payload_size = 0;
  int64_t base_version = 0, base_rowid = 0, changes = 0;
  char hmsg[512];
  attn_job_value params[2] = {v_int(job->id), v_text(job->token)};
  /* the row says running (nothing happened to it meanwhile) */
  int rc = job_exec(job, client,
                    "UPDATE main.attn_job_runs SET state = 'running', phase = 'reading', "
                    "started_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), heartbeat_at = "
                    "strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE job = ?1 AND token = ?2 AND "
                    "state = 'queued'",
                    params, 2, &changes, NULL, hmsg, sizeof hmsg);
  if (rc != ATTN_HOST_OK || changes != 1) {
    if (rc != ATTN_HOST_OK) job_log("job %lld: cannot start: %s", (long long)job->id, hmsg);
    return; /* cancelled while queued, or no leader for a whole lease */
  }
  /* the private copy: an in-memory database that owns the snapshot from now */
  rc = sqlite3_open_v2(":memory:", &p, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
  if (rc == SQLITE_OK) {
    rc = sqlite3_deserialize(p, "main", job->snapshot, job->snapshot_size, job->snapshot_size,
                             SQLITE_DESERIALIZE_FREEONCLOSE | SQLITE_DESERIALIZE_RESIZEABLE);
    job->snapshot = NULL; /* freed by SQLite, even when deserialize fails */
  }
  if (rc != SQLITE_OK) {
    snprintf(error, sizeof error, "%s: cannot open the copy of the database: %s", job->fn,
             p ? sqlite3_errmsg(p) : "out of memory");
    goto done;
  }
  pthread_mutex_lock(&runner.lock);
  job->p = p;
  if (job->stop) sqlite3_interrupt(p); /* stopped before the copy was open */
  pthread_mutex_unlock(&runner.lock);
  /* the deployed version the run's "if_better" compares with: the commit checks it still is */
  attn_store_deployed_row(p, job->name, &base_version, &base_rowid);
  /* the training: the function as in any program, on the copy */
  const char *const *keys = NULL;
  rc = sqlite3_prepare_v2(p, job_sql(job, &keys), -1, &stmt, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(stmt, 1, job->name, -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 2, job->query, -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 3, job->options, -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 4, job->grid, -1, SQLITE_STATIC);
    rc = job_result(stmt, keys, &result, error, sizeof error);
  }
  if (rc != SQLITE_OK) {
    if (!error[0]) snprintf(error, sizeof error, "%s", sqlite3_errmsg(p));
    goto done;
  }
  sqlite3_finalize(stmt);
  stmt = NULL;
  rc = job_payload(p, job, result, base_version, base_rowid, &payload, &payload_size, &msg);
  if (rc != SQLITE_OK) {
    snprintf(error, sizeof error, "%s", msg ? msg : "out of memory");
    goto done;
  }
  if (job_commit(job, client, payload, payload_size, error, sizeof error))
    job_log("job %lld (%s): %s of '%s' committed", (long long)job->id, job->database, job->fn,
            job->name);
done:
  sqlite3_finalize(stmt);
  pthread_mutex_lock(&runner.lock);
  job->p = NULL;
  int stop = job->stop;
  char reason[256];
  snprintf(reason, sizeof reason, "%s", job->stop_reason);
  pthread_mutex_unlock(&runner.lock);
  sqlite3_close(p);
  sqlite3_free(payload);
  sqlite3_free(result);
  sqlite3_free(msg);
  /* an interrupt from a stop: the row gets the stop's reason (or says why already) */
  if (stop) {
    if (reason[0]) job_finish_row(job, client, "failed", reason);
  } else if (error[0]) {
    job_log("job %lld (%s): failed: %s", (long long)job->id, job->database, error);
    job_finish_row(job, client, "failed", error);
  }
}

static void *job_main(void *arg) {
  attn_job *job = arg;
  attn_job_client *client = runner.host.open(runner.host.ctx, job->database);
  if (client && job_confirm(job, client)) {
    pthread_mutex_lock(&runner.lock);
    job->state = JOB_QUEUED;
    job->last_contact = nn_os_seconds();
    pthread_cond_broadcast(&runner.wake);
    while (!job->stop && (runner.training || !job_first_queued(job)))
      pthread_cond_wait(&runner.wake, &runner.lock);
    int go = !job->stop;
    char reason[256];
    snprintf(reason, sizeof reason, "%s", job->stop_reason);
    if (go) {
      runner.training = 1;
      job->state = JOB_RUNNING;
    }
    pthread_mutex_unlock(&runner.lock);
    if (go) {
      job_run(job, client);
      pthread_mutex_lock(&runner.lock);
      runner.training = 0;
      pthread_cond_broadcast(&runner.wake);
      pthread_mutex_unlock(&runner.lock);
    } else if (reason[0]) {
      job_finish_row(job, client, "failed", reason);
    }
  }
  if (client) runner.host.close(client);
  pthread_mutex_lock(&runner.lock);
  sqlite3_free(job->snapshot);
  job->snapshot = NULL;
  job->state = JOB_OVER; /* the manager joins and frees it */
  pthread_cond_broadcast(&runner.wake);
  pthread_mutex_unlock(&runner.lock);
  return NULL;
}

/* ------------------------------------------------------------------ the manager */

/* The manager's clients, one per database. */
typedef struct job_clients {
  char **names;
  attn_job_client **clients;
  int n;
} job_clients;

static attn_job_client *clients_get(job_clients *c, const char *database) {
  for (int i = 0; i < c->n; i++)
    if (strcmp(c->names[i], database) == 0) return c->clients[i];
  char **names = realloc(c->names, sizeof *names * (size_t)(c->n + 1));
  if (names) c->names = names;
  attn_job_client **clients = realloc(c->clients, sizeof *clients * (size_t)(c->n + 1));
  if (clients) c->clients = clients;
  char *name = malloc(strlen(database) + 1);
  attn_job_client *client = runner.host.open(runner.host.ctx, database);
  if (!names || !clients || !name || !client) {
    free(name);
    if (client) runner.host.close(client);
    return NULL;
  }
  memcpy(name, database, strlen(database) + 1);
  c->names[c->n] = name;
  c->clients[c->n++] = client;
  return client;
}

static void clients_free(job_clients *c) {
  for (int i = 0; i < c->n; i++) {
    free(c->names[i]);
    runner.host.close(c->clients[i]);
  }
  free(c->names);
  free(c->clients);
}

/* Rows per progress INSERT: 2 + 8 x 31 = 250 parameters (the wire takes at most 255). */
#define JOB_EPOCH_ROWS 31
#define JOB_NO_MEMORY (-2) /* progress_insert: nothing sent (not one of ATTN_HOST_*) */

/* INSERT OR REPLACE the rows of params (job, token, then 8 values a row: trial, epoch,
 * train_loss, val_loss, val_accuracy, val_f1, lr, seconds) into attn_job_epochs while the job
 * runs. The host's answer; JOB_NO_MEMORY when out of memory (nothing sent). */
static int progress_insert(attn_job_client *client, const attn_job_value *params, int rows,
                           int *code, char *msg, size_t cap) {
  sqlite3_str *s = sqlite3_str_new(NULL);
  sqlite3_str_appendall(s, "INSERT OR REPLACE INTO main.attn_job_epochs(job, trial, epoch, "
                           "train_loss, val_loss, val_accuracy, val_f1, lr, seconds) SELECT ?1, "
                           "* FROM (VALUES ");
  for (int r = 0; r < rows; r++) {
    sqlite3_str_appendall(s, r ? ",(" : "(");
    for (int k = 0; k < 8; k++) sqlite3_str_appendf(s, "%s?%d", k ? "," : "", 3 + 8 * r + k);
    sqlite3_str_appendchar(s, 1, ')');
  }
  sqlite3_str_appendall(s, ") WHERE EXISTS (SELECT 1 FROM main.attn_job_runs WHERE job = ?1 AND "
                           "token = ?2 AND state = 'running')");
  char *sql = sqlite3_str_finish(s);
  if (!sql) return JOB_NO_MEMORY;
  int rc = runner.host.exec(client, sql, params, 2 + 8 * rows, NULL, code, msg, cap);
  sqlite3_free(sql);
  return rc;
}

/* Write the epochs of the views not written yet, the figures bound as doubles (NULL when not
 * finite), JOB_EPOCH_ROWS a statement; the written marks move once all went. The host's answer
 * (ATTN_HOST_OK also when out of memory: the next tick writes them). */
static int progress_epochs(attn_job *job, attn_job_client *client, const attn_status_view *views,
                           int n, int *code, char *msg, size_t cap) {
  attn_job_value params[2 + 8 * JOB_EPOCH_ROWS] = {v_int(job->id), v_text(job->token)};
  int rows = 0, rc = ATTN_HOST_OK, sent = 0;
  for (int i = 0; i < n && rc == ATTN_HOST_OK; i++) {
    const attn_status_view *v = &views[i];
    int trial = v->trial >= 0 && v->trial <= JOB_MAX_TRIAL ? v->trial : 0;
    for (int e = 0; e < v->nlog && rc == ATTN_HOST_OK; e++) {
      const nn_epoch_stats *s = &v->log[e];
      if (s->epoch <= job->written[trial]) continue;
      double figures[6] = {s->train_loss, s->val_loss, s->val_accuracy,
                           s->val_f1,     s->lr,       s->seconds};
      attn_job_value *row = &params[2 + 8 * rows++];
      row[0] = v_int(trial);
      row[1] = v_int(s->epoch);
      for (int k = 0; k < 6; k++) row[2 + k] = v_figure(figures[k], 0);
      if (rows == JOB_EPOCH_ROWS) {
        rc = progress_insert(client, params, rows, code, msg, cap);
        rows = 0;
        sent++;
      }
    }
  }
  if (rc == ATTN_HOST_OK && rows) {
    rc = progress_insert(client, params, rows, code, msg, cap);
    sent++;
  }
  if (rc == JOB_NO_MEMORY)
    return ATTN_HOST_OK; /* out of memory: not written, the next tick tries again */
  if (rc == ATTN_HOST_OK && sent)
    for (int i = 0; i < n; i++) {
      int trial = views[i].trial >= 0 && views[i].trial <= JOB_MAX_TRIAL ? views[i].trial : 0;
      int last = views[i].nlog ? views[i].log[views[i].nlog - 1].epoch : 0;
      if (last > job->written[trial]) job->written[trial] = last;
    }
  return rc;
}

/* One job's progress through the leader: the epochs that finished, then its row (which also
 * tells whether the job should go on). */
static void progress_write(attn_job *job, attn_job_client *client) {
  attn_status_view views[JOB_STATUS_VIEWS];
  char msg[512];
  int n = 0;
  pthread_mutex_lock(&runner.lock);
  if (job->p) n = attn_status_of(job->p, views, JOB_STATUS_VIEWS);
  pthread_mutex_unlock(&runner.lock);
  int code = 0;
  int rc = progress_epochs(job, client, views, n, &code, msg, sizeof msg);
  const attn_status_view *v = n ? &views[n - 1] : NULL;
  attn_job_value params[13] = {v_int(job->id), v_text(job->token)};
  for (int i = 2; i < 13; i++) params[i] = v_null();
  if (v) {
    params[2] = v_text(v->phase);
    params[3] = v_count(v->trial);
    params[4] = v_count(v->trials);
    params[5] = v_int(v->epoch);
    params[6] = v_count(v->epochs);
    params[7] = v_int(v->batch);
    params[8] = v_count(v->batches);
    params[9] = v_figure(v->train_loss, 0);
    params[10] = v_figure(v->val_loss, 1);
    params[11] = v_figure(v->val_accuracy, 1);
    params[12] = v_figure(v->val_f1, 1);
  }
  int64_t changes = 0;
  if (rc == ATTN_HOST_OK)
    rc = runner.host.exec(client,
                          "UPDATE main.attn_job_runs SET heartbeat_at = strftime('%Y-%m-%dT%H:"
                          "%M:%fZ', 'now'), phase = coalesce(?3, phase), trial = ?4, trials = "
                          "?5, epoch = ?6, epochs = ?7, batch = ?8, batches = ?9, train_loss = "
                          "?10, val_loss = ?11, val_accuracy = ?12, val_f1 = ?13 WHERE job = ?1 "
                          "AND token = ?2 AND state IN ('queued', 'running')",
                          params, 13, &changes, &code, msg, sizeof msg);
  pthread_mutex_lock(&runner.lock);
  if (rc == ATTN_HOST_OK && changes == 1) {
    job->last_contact = nn_os_seconds();
  } else if (rc == ATTN_HOST_OK) {
    /* cancelled (attn_cancel), failed by the leader, or deleted: stop; its row says why */
    job_stop_locked(job, "");
  } else if (rc == ATTN_HOST_SQL_ERROR) {
    /* another transaction held the write lock: the next tick writes it */
    if ((code & 0xff) != SQLITE_BUSY && (code & 0xff) != SQLITE_LOCKED)
      job_log("job %lld: progress refused: %s", (long long)job->id, msg);
  } else if (nn_os_seconds() - job->last_contact > runner.host.lease) {
    job_stop_locked(job, "");
    job_log("job %lld: no leader reached for %.0f s: stopped (the leader fails it)",
            (long long)job->id, runner.host.lease);
  }
  pthread_mutex_unlock(&runner.lock);
}

/* The reaper, for one database: the jobs left queued or running by a node that is gone. Every
 * node fails those its own earlier process left (same node id, another incarnation); the leader
 * also those of a node whose address refuses connections, or silent for longer than the lease.
 * A job of this process that its registry no longer has (its thread ended without writing the
 * row's end: the leader was out of reach) is failed too. */
static void reap(attn_job_client *client, int leader) {
  attn_job_rows rows;
  char msg[512];
  int rc = runner.host.query(client,
                             "SELECT job, node, address, incarnation, token, (julianday('now') "
                             "- julianday(coalesce(heartbeat_at, submitted_at))) * 86400.0 FROM "
                             "main.attn_job_runs WHERE state IN ('queued', 'running')",
                             NULL, 0, &rows, msg, sizeof msg);
  if (rc != ATTN_HOST_OK) return; /* no jobs table (yet), or no leader now */
  for (int r = 0; r < rows.nrows && rows.ncols == 6; r++) {
    const attn_job_value *v = &rows.values[r * 6];
    if (v[0].type != SQLITE_INTEGER || v[4].type != SQLITE_TEXT) continue;
    int64_t job = v[0].i, node = v[1].type == SQLITE_INTEGER ? v[1].i : 0;
    const char *address = v[2].type == SQLITE_TEXT ? v[2].p : "";
    const char *incarnation = v[3].type == SQLITE_TEXT ? v[3].p : "";
    double age = v[5].type == SQLITE_FLOAT     ? v[5].d
                 : v[5].type == SQLITE_INTEGER ? (double)v[5].i
                                               : 0;
    char reason[512] = "";
    if (strcmp(incarnation, runner.incarnation) == 0) {
      int mine = 0;
      pthread_mutex_lock(&runner.lock);
      for (attn_job *j = runner.jobs; j && !mine; j = j->next)
        mine = j->id == job && strcmp(j->token, v[4].p) == 0;
      pthread_mutex_unlock(&runner.lock);
      if (!mine)
        snprintf(reason, sizeof reason,
                 "node %lld lost the job (its thread ended without "
                 "reaching the cluster): the model was not saved",
                 (long long)node);
    } else if ((uint64_t)node == runner.host.node_id) {
      snprintf(reason, sizeof reason,
               "node %lld restarted while the job ran (the job was lost "
               "with its process): the model was not saved",
               (long long)node);
    } else if (leader && *address && !runner.host.alive(runner.host.ctx, address)) {
      snprintf(reason, sizeof reason,
               "node %lld (%s) is gone (killed or crashed) while the job "
               "ran: the model was not saved",
               (long long)node, address);
    } else if (leader && age > runner.host.lease) {
      snprintf(reason, sizeof reason,
               "no word from node %lld for %.0f s (more than the %.0f s "
               "lease): the job is taken as lost, the model was not saved",
               (long long)node, age, runner.host.lease);
    }
    if (!reason[0]) continue;
    attn_job_value params[3] = {v_int(job), v[4], v_text(reason)};
    int64_t changes = 0;
    if (runner.host.exec(client,
                         "UPDATE main.attn_job_runs SET state = 'failed', error = ?3, phase = "
                         "NULL, finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE job "
                         "= ?1 AND token = ?2 AND state IN ('queued', 'running')",
                         params, 3, &changes, NULL, msg, sizeof msg) == ATTN_HOST_OK &&
        changes == 1)
      job_log("job %lld: failed: %s", (long long)job, reason);
  }
  runner.host.free_rows(&rows);
}

static void *manager_main(void *arg) {
  job_clients clients = {0};
  double last_reap = 0;
  pthread_mutex_lock(&runner.lock);
  for (;;) {
    /* the jobs whose threads ended: joined and freed here, the only place that frees them */
    for (attn_job **pj = &runner.jobs; *pj;) {
      attn_job *j = *pj;
      if (j->state != JOB_OVER) {
        pj = &j->next;
        continue;
      }
      *pj = j->next;
      pthread_mutex_unlock(&runner.lock);
      pthread_join(j->thread, NULL);
      job_free(j);
      pthread_mutex_lock(&runner.lock);
      pj = &runner.jobs; /* the list may have changed meanwhile */
    }
    if (runner.stopping && !runner.jobs) break;
    /* progress of the jobs that are queued or running (only this thread frees them) */
    int n = 0;
    for (attn_job *j = runner.jobs; j; j = j->next) n++;
    attn_job **live = n ? malloc(sizeof *live * (size_t)n) : NULL;
    int k = 0;
    for (attn_job *j = runner.jobs; live && j; j = j->next)
      if ((j->state == JOB_QUEUED || j->state == JOB_RUNNING) && !j->stop) live[k++] = j;
    int ndb = runner.ndatabases, stopping = runner.stopping;
    char **dbs = ndb ? malloc(sizeof *dbs * (size_t)ndb) : NULL;
    for (int i = 0; dbs && i < ndb; i++) {
      dbs[i] = malloc(strlen(runner.databases[i]) + 1);
      if (dbs[i]) memcpy(dbs[i], runner.databases[i], strlen(runner.databases[i]) + 1);
    }
    pthread_mutex_unlock(&runner.lock);
    for (int i = 0; i < k; i++) {
      attn_job_client *c = clients_get(&clients, live[i]->database);
      if (c) progress_write(live[i], c);
    }
    free(live);
    /* the reaper: every tick on the leader, every five on the others */
    double now = nn_os_seconds();
    if (!stopping && dbs) {
      int leader = runner.host.is_leader(runner.host.ctx);
      if (leader || now - last_reap >= 5 * JOB_TICK_SECONDS) {
        last_reap = now;
        for (int i = 0; i < ndb; i++) {
          attn_job_client *c = dbs[i] ? clients_get(&clients, dbs[i]) : NULL;
          if (c) reap(c, leader);
        }
      }
    }
    for (int i = 0; dbs && i < ndb; i++) free(dbs[i]);
    free(dbs);
    pthread_mutex_lock(&runner.lock);
    if (runner.stopping && !runner.jobs) break;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)JOB_TICK_SECONDS;
    pthread_cond_timedwait(&runner.wake, &runner.lock, &until);
  }
  pthread_mutex_unlock(&runner.lock);
  clients_free(&clients);
  return NULL;
}

int attn_jobs_start(const attn_job_host *host) {
  pthread_mutex_lock(&runner.lock);
  if (atomic_load(&runner.started)) {
    pthread_mutex_unlock(&runner.lock);
    return -1;
  }
  runner.host = *host;
  snprintf(runner.address, sizeof runner.address, "%s", host->address);
  runner.host.address = runner.address;
  job_hex(runner.incarnation, 16);
  runner.stopping = 0;
  int rc = pthread_create(&runner.manager, NULL, manager_main, NULL);
  if (rc == 0) atomic_store(&runner.started, 1);
  pthread_mutex_unlock(&runner.lock);
  return rc == 0 ? 0 : -1;
}

void attn_jobs_stop(void) {
  pthread_mutex_lock(&runner.lock);
  if (!atomic_load(&runner.started)) {
    pthread_mutex_unlock(&runner.lock);
    return;
  }
  runner.stopping = 1;
  char reason[256];
  snprintf(reason, sizeof reason,
           "node %llu stopped (SIGTERM) while the job ran: the model was "
           "not saved",
           (unsigned long long)runner.host.node_id);
  for (attn_job *j = runner.jobs; j; j = j->next) job_stop_locked(j, reason);
  pthread_cond_broadcast(&runner.wake);
  pthread_mutex_unlock(&runner.lock);
  pthread_join(runner.manager, NULL);
  /* still "started": a statement that comes before the node stops must not train on its event
   * loop; attn_job_submit refuses it (the node is stopping) */
  pthread_mutex_lock(&runner.lock);
  for (int i = 0; i < runner.ndatabases; i++) free(runner.databases[i]);
  free(runner.databases);
  runner.databases = NULL;
  runner.ndatabases = 0;
  pthread_mutex_unlock(&runner.lock);
}
