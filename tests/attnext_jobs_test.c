/* attnext_jobs_test.c -- build/tests/attnext_jobs_test.so: attnext with the SQL functions of a
 * dqlite node's training jobs (attn_jobs, attn_cancel, attn_job_commit), registered as
 * build/attnext-node registers them on its connections (attn_node_init, ext/node/attn_jobs.c),
 * for the tests that check those functions outside a node: tests/sql/jobs.sql, test_jobs_json,
 * test_json_subtype, test_readme, test_sqlite_versions. No job runner is started, as on any
 * connection of a node that is not dqlite's: the training functions train in their statement,
 * attn_jobs reads the job tables of a copy of a node's database, attn_cancel and
 * attn_job_commit refuse. attnext.so itself has none of these functions.
 *
 *   .load build/tests/attnext_jobs_test
 *   SELECT attn_cancel(1);   -- attn_cancel: no jobs here: jobs run only in a dqlite node ...
 */
#include "../ext/node/attn_jobs.h"

int sqlite3_attnextjobstest_init(sqlite3 *db, char **pzErrMsg, const sqlite3_api_routines *pApi) {
  return attn_node_init(db, pzErrMsg, pApi);
}
