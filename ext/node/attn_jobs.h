/* attn_jobs.h -- training jobs in a dqlite node, inside the node: what the SQL side
 * (attn_jobs.c: attn_jobs, attn_cancel, attn_job_commit and the hooks the node registers
 * attnext with) and the job runner (attn_job_runner.c: submitting, the jobs' threads, progress,
 * the reaper) share. Linked into build/attnext-node only (and into the tests' module
 * build/tests/attnext_jobs_test.so); attnext.so has none of it.
 *
 *   sqlite3_auto_extension((void (*)(void))attn_node_init);   -- attnext and the jobs' SQL
 *   attn_jobs_start(&host);    -- attn_job_host.h: the runner, before dqlite_node_start
 */
#ifndef ATTNEXT_ATTN_JOBS_H
#define ATTNEXT_ATTN_JOBS_H

#include "../attn_ext.h"
#include "attn_job_host.h"

/* In a node (the job runner started, attn_job_host.h) attn_train, attn_fit and attn_tune do
 * not train in the statement: they record a job (a row of attn_job_runs, in the caller's
 * transaction) and return at once. The job trains in a thread of the node's process on a copy
 * of the database taken in the statement (a consistent snapshot) and commits its model(s)
 * through the leader (attn_job_commit), replicated like any write; its progress goes to
 * attn_job_runs and attn_job_epochs once a second. The tables (created by the first job): */
#define ATTN_JOB_SCHEMA                                                                            \
  "CREATE TABLE IF NOT EXISTS main.attn_job_runs(job INTEGER PRIMARY KEY, function TEXT NOT "      \
  "NULL, name TEXT NOT NULL, query TEXT, grid TEXT, options TEXT, state TEXT NOT NULL, node "      \
  "INTEGER, address TEXT, incarnation TEXT, token TEXT, submitted_at TEXT, started_at TEXT, "      \
  "finished_at TEXT, heartbeat_at TEXT, phase TEXT, trial INTEGER, trials INTEGER, epoch "         \
  "INTEGER, epochs INTEGER, batch INTEGER, batches INTEGER, train_loss REAL, val_loss REAL, "      \
  "val_accuracy REAL, val_f1 REAL, version INTEGER, deployed INTEGER, result TEXT, error "         \
  "TEXT);"                                                                                         \
  "CREATE TABLE IF NOT EXISTS main.attn_job_epochs(job INTEGER NOT NULL, trial INTEGER NOT "       \
  "NULL, epoch INTEGER NOT NULL, train_loss REAL, val_loss REAL, val_accuracy REAL, val_f1 "       \
  "REAL, lr REAL, seconds REAL, PRIMARY KEY(job, trial, epoch));"

/* ------------------------------------------------------------------ the runner */

/* Whether conn is a dqlite node's connection and the node runs jobs (attn_job_hooks.here). */
int attn_jobs_here(attn_conn *conn);
/* attn_job_hooks.submit: the checks, the copy of the database, the job's row, and its thread. */
int attn_job_submit(attn_conn *conn, const char *fn, sqlite3_value *name_arg,
                    sqlite3_value *query_arg, const char *grid, sqlite3_value *options_arg,
                    int check_options, attn_job_receipt *out, char **msg);
/* attn_job_hooks.receipt_column and receipt_json. */
void attn_job_receipt_column(const attn_job_receipt *r, sqlite3_context *ctx, int col);
char *attn_job_receipt_json(const attn_job_receipt *r); /* sqlite3_malloc'd, NULL: no memory */
/* Remember db's database when it is a node's: the runner watches the jobs of every database of
 * the node (a job whose node is gone is marked failed by the leader). Called for every new
 * connection (attn_node_init). */
void attn_jobs_note_database(sqlite3 *db);
/* The live progress of job `job` of `database` when this process trains it: 1 and *out. */
int attn_job_live(const char *database, int64_t job, attn_status_view *out);
/* The incarnation of this process's job runner (who may commit its jobs), "" without one. */
const char *attn_jobs_incarnation(void);

/* ------------------------------------------------------------------ the SQL side */

/* The node's SQLite entry point, for sqlite3_auto_extension: attnext's SQL functions and the
 * jobs' (attn_jobs, attn_cancel, attn_job_commit) with the jobs' hooks (attn_register), and
 * the connection's database noted for the runner. Before the runner starts (or in a program
 * that never starts it: the tests' module) no statement submits a job: the functions train in
 * their statement and attn_cancel and attn_job_commit refuse. */
int attn_node_init(sqlite3 *db, char **pzErrMsg, const sqlite3_api_routines *pApi);

#endif
