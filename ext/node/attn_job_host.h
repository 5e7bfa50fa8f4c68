/* attn_job_host.h -- what a training job needs from the program that hosts it: the dqlite node
 * (attnext_node.c) gives the job runner a client of the cluster, and the runner
 * (attn_job_runner.c) trains beside Raft and writes through that client, never on the node's
 * event loop. Plain C: the node includes it without SQLite's extension header.
 *
 *   attn_job_host host = {.node_id = 1, .address = "127.0.0.1:9001", ...};
 *   attn_jobs_start(&host);     -- before dqlite_node_start: statements may submit jobs from then
 *   ...
 *   attn_jobs_stop();           -- on SIGTERM, before dqlite_node_stop
 *
 * The runner is linked into the node only: the loadable extension (attnext.so) has none, and
 * there attn_train, attn_fit and attn_tune train in the caller's statement.
 */
#ifndef ATTNEXT_ATTN_JOB_HOST_H
#define ATTNEXT_ATTN_JOB_HOST_H

#include <stddef.h>
#include <stdint.h>

/* A value of a statement's parameter or result row; type is SQLite's (1 integer, 2 float,
 * 3 text, 4 blob, 5 null). Text and blobs are not copied into a parameter; in a result row they
 * belong to the rows. */
typedef struct attn_job_value {
  int type;
  int64_t i;
  double d;
  const void *p; /* text (NUL-terminated) or blob bytes */
  int64_t n;     /* bytes of a blob or text */
} attn_job_value;

/* Rows of a query: nrows x ncols values, row after row. */
typedef struct attn_job_rows {
  int ncols, nrows;
  attn_job_value *values;
  void *storage; /* the host's */
} attn_job_rows;

typedef struct attn_job_client attn_job_client; /* the host's connection to the leader */

/* Results of exec and query: 0 done; 1 the leader ran the statement and refused it (an SQL
 * error: msg says why, code in *code when given); -1 no leader could be reached now (no leader
 * during an election, a connection lost): try again later. */
enum { ATTN_HOST_OK = 0, ATTN_HOST_SQL_ERROR = 1, ATTN_HOST_UNREACHABLE = -1 };

typedef struct attn_job_host {
  void *ctx;
  uint64_t node_id;    /* this node's Raft id */
  const char *address; /* where the other nodes reach it */
  double lease;        /* seconds without word from a job's node before the leader fails it */
  /* A client of database `database` through whichever node leads (it follows the leader across
   * elections: a call after a lost connection reconnects); one thread uses it at a time. */
  attn_job_client *(*open)(void *ctx, const char *database);
  void (*close)(attn_job_client *client);
  /* One statement as an EXEC: its changes in *changes. */
  int (*exec)(attn_job_client *client, const char *sql, const attn_job_value *params, int n,
              int64_t *changes, int *code, char *msg, size_t cap);
  /* One statement as a QUERY: its rows (free with free_rows). */
  int (*query)(attn_job_client *client, const char *sql, const attn_job_value *params, int n,
               attn_job_rows *rows, char *msg, size_t cap);
  void (*free_rows)(attn_job_rows *rows);
  /* Whether this node leads now. */
  int (*is_leader)(void *ctx);
  /* 0 when nothing listens at address any more (the connection is refused: that node's process
   * is gone), 1 when something answers or it cannot be told. */
  int (*alive)(void *ctx, const char *address);
} attn_job_host;

/* Register the host (copied) and start the job runner's thread. 0, or -1 when it cannot start. */
int attn_jobs_start(const attn_job_host *host);
/* Stop: running jobs are interrupted and marked failed ("node N stopped") where the cluster can
 * still be reached within a few seconds; the runner's threads are joined. */
void attn_jobs_stop(void);

#endif
