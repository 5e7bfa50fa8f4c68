/* sqlite_337_shell.h -- forced into the 3.38.2 shell.c that tests/test_sqlite_versions.sh links
 * with SQLite 3.37.0's sqlite3.c (npm has no 3.37 shell.c): the two things the shell uses that
 * 3.38 added. sqlite3_error_offset: -1, "no offset known", what 3.38 answers when it has none,
 * so a parse error is printed without its context lines, as a 3.37 shell would. The bloom filter
 * counters of .stats: a counter 3.37 has (no test uses .stats). */
#define sqlite3_error_offset(db) (-1)
#define SQLITE_STMTSTATUS_FILTER_MISS SQLITE_STMTSTATUS_FULLSCAN_STEP
#define SQLITE_STMTSTATUS_FILTER_HIT SQLITE_STMTSTATUS_FULLSCAN_STEP
