/* attnext.c -- entry point of the attnext SQLite extension: the table of every SQL function and
 * table-valued function it registers (attn_functions[], walked by attn_register), and
 * attn_version(). sqlite3_attnext_init registers the table alone; a dqlite node
 * (build/attnext-node, ext/node/attn_jobs.c) calls attn_register with the hooks of its training
 * jobs, which add its own functions (attn_jobs, attn_cancel, attn_job_commit).
 *
 *   .load ./attnext
 *   SELECT attn_version();
 *   -- attnext 0.2.0; backends: cpu (OpenBLAS 0.3.21, 2 threads); cuda: not built
 */
#ifndef _WIN32
#include <pthread.h>
#endif

#include "attn_ext.h"
#include "compat.h" /* nn_dl_pin */
SQLITE_EXTENSION_INIT1

/* attn_version() -> text: version, backends, BLAS, CUDA device. */
static void attn_version_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  char buf[512];
  buf[0] = 0;
  nn_version_string(buf, sizeof buf);
  sqlite3_result_text(ctx, buf, -1, SQLITE_TRANSIENT);
}

/* In registration order (tests/test_faults_oom.c fails the allocations in order). Direct-only:
 * functions that write the store, run a query given as text, read a table or lift a bound (a
 * view of an untrusted database must not reach them). Innocuous, not deterministic: the answer
 * follows the deployed version, so none may be used in indexes, CHECK constraints or generated
 * columns. */
/* clang-format off */
static const attn_registration attn_functions[] = {
    {"attn_version", 0, SQLITE_INNOCUOUS | SQLITE_DETERMINISTIC, attn_version_func, NULL},
    {"attn_deploy", 2, SQLITE_DIRECTONLY, attn_deploy_func, NULL},           /* attn_deploy.c */
    {"attn_import", 2, SQLITE_DIRECTONLY, attn_import_func, NULL},           /* attn_deploy.c */
    {"attn_prune", 2, SQLITE_DIRECTONLY, attn_prune_func, NULL},             /* attn_deploy.c */
    {"attn_predict", 2, SQLITE_INNOCUOUS, attn_predict_func, NULL},          /* attn_predict.c */
    {"attn_predict", 1, SQLITE_INNOCUOUS, attn_predict_func, NULL},          /* attn_predict.c */
    {"attn_predict", 3, SQLITE_INNOCUOUS, attn_predict_func, NULL},          /* attn_predict.c */
    {"attn_predict", 4, SQLITE_INNOCUOUS, attn_predict_func, NULL},          /* attn_predict.c */
    {"attn_probs", -1, 0, NULL, &attn_probs_weights_module},                 /* attn_predict.c */
    {"attn_weights", -1, 0, NULL, &attn_probs_weights_module},               /* attn_predict.c */
    {"attn_explain", -1, 0, NULL, &attn_explain_module},                     /* attn_explain.c */
    {"attn_cache_limit", 0, SQLITE_DIRECTONLY, attn_cache_limit_func, NULL}, /* attn_conn.c */
    {"attn_cache_limit", 1, SQLITE_DIRECTONLY, attn_cache_limit_func, NULL}, /* attn_conn.c */
    {"attn_classify", -1, 0, NULL, &attn_classify_module},                   /* attn_classify.c */
    {"attn_uncertain", -1, 0, NULL, &attn_uncertain_module},                 /* attn_uncertain.c */
    {"attn_train", -1, 0, NULL, &attn_train_module},                         /* attn_train.c */
    {"attn_fit", 2, SQLITE_DIRECTONLY | SQLITE_RESULT_SUBTYPE, attn_fit_func, NULL}, /* JSON */
    {"attn_fit", 3, SQLITE_DIRECTONLY | SQLITE_RESULT_SUBTYPE, attn_fit_func, NULL}, /* JSON */
    {"attn_evaluate", -1, 0, NULL, &attn_eval_module},                       /* attn_evaluate.c */
    {"attn_confusion", -1, 0, NULL, &attn_eval_module},                      /* attn_evaluate.c */
    /* attn_heatmap_svg.c */
    {"attn_heatmap_svg", 2, SQLITE_INNOCUOUS, attn_heatmap_svg_func, NULL},
    {"attn_heatmap_query_svg", 2, SQLITE_DIRECTONLY, attn_heatmap_query_svg_func, NULL},
    {"attn_heatmap_svg", 3, SQLITE_INNOCUOUS, attn_heatmap_svg_func, NULL},
    {"attn_heatmap_query_svg", 3, SQLITE_DIRECTONLY, attn_heatmap_query_svg_func, NULL},
    /* attn_training_svg.c */
    {"attn_training_svg", 1, SQLITE_INNOCUOUS, attn_training_svg_func, NULL},
    {"attn_training_svg", 2, SQLITE_INNOCUOUS, attn_training_svg_func, NULL},
    {"attn_matrix", -1, 0, NULL, &attn_matrix_module},                       /* attn_matrix.c */
    {"attn_matrix_svg", 3, SQLITE_DIRECTONLY, attn_matrix_svg_func, NULL},   /* attn_matrix.c */
    {"attn_matrix_svg", 4, SQLITE_DIRECTONLY, attn_matrix_svg_func, NULL},   /* attn_matrix.c */
    {"attn_matrix_svg", 5, SQLITE_DIRECTONLY, attn_matrix_svg_func, NULL},   /* attn_matrix.c */
    {"attn_vectors_load", -1, 0, NULL, &attn_vectors_module},                /* attn_vectors.c */
    {"attn_metrics", -1, 0, NULL, &attn_metrics_module},                     /* attn_metrics.c */
    {"attn_tune", -1, 0, NULL, &attn_tune_module},                           /* attn_tune.c */
    {"attn_embed", 2, SQLITE_INNOCUOUS, attn_embed_func, NULL},              /* attn_embed.c */
    {"attn_curve", -1, 0, NULL, &attn_curve_module},                         /* attn_curve.c */
    {"attn_curve_svg", 2, SQLITE_DIRECTONLY, attn_curve_svg_func, NULL},     /* attn_curve.c */
    {"attn_status", -1, 0, NULL, &attn_status_module},                       /* attn_status.c */
};
/* clang-format on */

/* The oldest SQLite attnext runs on: 3.37.0, for the newest routine it calls in any host
 * (sqlite3_total_changes64, 3.37; sqlite3_txn_state, 3.34). SQLite's JSON functions are not
 * needed (JSON is read and written by engine/json.c); the jobs' sqlite3_serialize and
 * sqlite3_deserialize (3.39 in the routine table) run only in a dqlite node, on the SQLite it
 * was built with. An older SQLite hands over a shorter routine table: a call past its end
 * jumped to garbage (sqlcipher 3.4.1, SQLite 3.15.2, died in attn_predict), so the entry point
 * refuses such a host before anything else touches the table. */
#define ATTN_SQLITE_MIN 3037000
#define ATTN_SQLITE_MIN_TEXT "3.37.0"

/* SQLITE_OK when the host SQLite can run attnext, else SQLITE_ERROR and the reason in *msg
 * (sqlite3_mprintf'd; NULL when out of memory). Only routines that every SQLite 3 has are
 * called here. */
static int attn_host_check(char **msg) {
  *msg = NULL;
  if (sqlite3_libversion_number() < ATTN_SQLITE_MIN) {
    *msg = sqlite3_mprintf("attnext: needs SQLite %s or later, this is SQLite %s; load it into "
                           "a newer SQLite",
                           ATTN_SQLITE_MIN_TEXT, sqlite3_libversion());
    return SQLITE_ERROR;
  }
  return SQLITE_OK;
}

#ifndef _WIN32
/* fork() beside a training (a prefork server, Python's 'fork' start method). attnext's threads
 * allocate through SQLite (sqlite3_malloc), which takes SQLite's allocator mutex when memory
 * statistics are on (the default: Debian's SQLite, Python's sqlite3). The child has only the
 * thread that forked and every lock as it was at that instant: a fork while a thread held that
 * mutex left the child hanging in its first sqlite3_open (tests/test_fork.py: about one fork in
 * 1,000 beside a training under ASan, one in 20 to 200 beside busy predictions). So fork takes
 * the process-wide mutexes of SQLite that a thread reading or writing a database takes and a
 * child's sqlite3_open needs -- the main one (opening a database), the unix VFS's (opening and
 * closing its files), the allocator's and the page cache's statistics' -- in the order SQLite
 * nests them (the last two never nest), and releases them in the parent and the child. Each is
 * held for an allocation or a file's open or close, so fork waits at most that long. Not taken:
 * the random generator's (its first use takes the main one inside it; a thread inside it at a
 * fork is rare: temporary file names, random()). engine/pool.c does the same for OpenBLAS.
 * glibc removes the handlers when the library is unloaded (dlclose), and a later load registers
 * them again. The mutexes and routines are those of the SQLite that first loaded attnext in the
 * process. */
static pthread_once_t attn_fork_once = PTHREAD_ONCE_INIT;
static const sqlite3_api_routines *attn_fork_api;
static sqlite3_mutex *attn_fork_mutexes[4];
enum { ATTN_FORK_MUTEXES = sizeof attn_fork_mutexes / sizeof attn_fork_mutexes[0] };
static void attn_fork_prepare(void) {
  for (int i = 0; i < ATTN_FORK_MUTEXES; i++) attn_fork_api->mutex_enter(attn_fork_mutexes[i]);
}
static void attn_fork_release(void) { /* in the parent, and in the child (the same thread) */
  for (int i = ATTN_FORK_MUTEXES - 1; i >= 0; i--) attn_fork_api->mutex_leave(attn_fork_mutexes[i]);
}
static void attn_fork_register(void) {
  attn_fork_api = sqlite3_api;
  attn_fork_mutexes[0] = sqlite3_mutex_alloc(SQLITE_MUTEX_STATIC_MAIN);
  attn_fork_mutexes[1] = sqlite3_mutex_alloc(SQLITE_MUTEX_STATIC_VFS1);
  attn_fork_mutexes[2] = sqlite3_mutex_alloc(SQLITE_MUTEX_STATIC_MEM);
  attn_fork_mutexes[3] = sqlite3_mutex_alloc(SQLITE_MUTEX_STATIC_PMEM);
  pthread_atfork(attn_fork_prepare, attn_fork_release, attn_fork_release);
}
#endif

/* Register the table (and the host's functions, with jobs) on db with one connection state. */
static int attn_register_all(sqlite3 *db, attn_conn *conn, const attn_job_hooks *jobs) {
  int rc = SQLITE_OK;
  for (size_t i = 0; rc == SQLITE_OK && i < sizeof attn_functions / sizeof attn_functions[0]; i++) {
    const attn_registration *r = &attn_functions[i];
    rc = r->module ? attn_create_module(db, conn, r->name, r->module)
                   : attn_create_function(db, conn, r->name, r->nargs, r->flags, r->func);
  }
  for (int i = 0; rc == SQLITE_OK && jobs && i < jobs->nfunctions; i++) {
    const attn_registration *r = &jobs->functions[i];
    rc = r->module ? attn_create_module(db, conn, r->name, r->module)
                   : attn_create_function(db, conn, r->name, r->nargs, r->flags, r->func);
  }
  return rc;
}

int attn_register(sqlite3 *db, char **pzErrMsg, const sqlite3_api_routines *pApi,
                  const attn_job_hooks *jobs) {
  SQLITE_EXTENSION_INIT2(pApi);
  char *unsupported = NULL;
  int host = attn_host_check(&unsupported);
  if (host != SQLITE_OK) {
    if (pzErrMsg) *pzErrMsg = unsupported;
    else sqlite3_free(unsupported);
    return host;
  }
#ifndef _WIN32
  pthread_once(&attn_fork_once, attn_fork_register);
#endif
  attn_conn *conn = attn_conn_create(db, jobs);
  if (!conn) return SQLITE_NOMEM;
  int rc = attn_register_all(db, conn, jobs);
  if (rc != SQLITE_OK && pzErrMsg)
    *pzErrMsg =
        sqlite3_mprintf("attnext: cannot register the SQL functions: %s", sqlite3_errmsg(db));
  if (rc != SQLITE_OK) {
    /* SQLite unloads the library after a failed init, but the functions registered before the
     * failure (out of memory) stay registered and their destructors run at sqlite3_close:
     * keep the code mapped (one more reference, never released) so that nothing jumps into
     * unmapped memory. */
    nn_dl_pin((const void *)(uintptr_t)attn_register);
  }
  attn_conn_unref(conn);
  return rc;
}

#ifdef _WIN32
__declspec(dllexport)
#endif
    int sqlite3_attnext_init(sqlite3 *db, char **pzErrMsg, const sqlite3_api_routines *pApi) {
  return attn_register(db, pzErrMsg, pApi, NULL);
}
