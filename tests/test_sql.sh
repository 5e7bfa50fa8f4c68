#!/bin/sh
# test_sql.sh -- runs every tests/sql/NAME.sql through the real sqlite3 shell and compares its
# output (stdout and stderr, in order) with tests/sql/NAME.expected, exactly.
# Each script runs in a fresh temporary directory holding links to attnext.so and tests/, so
# scripts say `.load ./attnext` and may `.open` a second connection to a file there.
# UPDATE_EXPECTED=1 sh tests/test_sql.sh rewrites the .expected files (review the diff!).
# sh tests/test_sql.sh NAME... runs tests/sql/NAME.sql alone (make test-valgrind: two halves at once).
# The extension is $ATTNEXT (default ./attnext, without .so); $SQLITE3 may be a command line
# (make test-asan: "env LD_PRELOAD=... sqlite3"). A script that checks the SQL functions only a
# dqlite node has (jobs.sql) loads ./attnext_jobs_test instead: $ATTNEXT_JOBS.so (default
# $BUILD/tests/attnext_jobs_test.so, which make check builds: attnext registered as the node
# registers it); where it is not built (a cross build has no node) such a script is not run.
SQLITE3=${SQLITE3:-sqlite3}
ATTNEXT=${ATTNEXT:-./attnext}
ATTNEXT_JOBS=${ATTNEXT_JOBS:-${BUILD:-build}/tests/attnext_jobs_test}
command -v ${SQLITE3##* } >/dev/null 2>&1 || { echo "$SQLITE3 not found"; exit 77; }
[ -f "$ATTNEXT.so" ] || { echo "$ATTNEXT.so not built (run make)"; exit 77; }
root=$(pwd)
# the scripts run in directories of their own: a shell given by a relative path, from here
shell=${SQLITE3##* }
case $shell in /*) ;; */*) SQLITE3="${SQLITE3%"$shell"}$root/$shell" ;; esac
case $ATTNEXT in /*) so=$ATTNEXT.so ;; *) so=$root/$ATTNEXT.so ;; esac
case $ATTNEXT_JOBS in /*) jobs_so=$ATTNEXT_JOBS.so ;; *) jobs_so=$root/$ATTNEXT_JOBS.so ;; esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The .expected files are what Debian's sqlite3 (3.40) prints. Other SQLite versions print three
# things differently, each SQLite's doing and not ours (tests/test_sqlite_versions.sh runs this
# script with the floor 3.37 and the newest npm ships); each is adjusted only where this shell
# shows it, and said in the log:
#  - before 3.38 there is no sqlite3_error_offset, so a parse error has no context: the two lines
#    after "Parse error near line N: ..." (the statement, then "^--- error here") are not
#    printed;
#  - the shell of 3.52 and later says "Error near line N: MESSAGE" where 3.40's says "Runtime
#    error near line N: MESSAGE (CODE)", the code added when it is not SQLITE_ERROR (1) (its
#    new result formatter no longer tags a step's error);
#  - from 3.52 a REAL becomes text with 17 significant digits (SQLITE_DBCONFIG_FP_DIGITS), 15
#    before: the shell starts with `.dbconfig fp_digits 15` (an -init file; the command prints
#    the value, hence .output) where it knows the setting, so the same doubles print as in the
#    .expected files.
probe() { printf '%s\n' "$1" | $SQLITE3 -batch 2>&1; }
version=$(probe 'SELECT sqlite_version();')
no_context=""
case $version in 3.[0-9].*|3.[12][0-9].*|3.3[0-7].*)
  no_context=1; echo "SQLite $version: no sqlite3_error_offset (3.38), parse errors without context lines" ;;
esac
step_error=$(probe 'CREATE TABLE t(x NOT NULL); INSERT INTO t VALUES (NULL);')
case $step_error in "Runtime error near line 1: NOT NULL constraint failed: t.x (19)"|"") step_error="" ;;
  *" near line 1: NOT NULL constraint failed: t.x")
    step_error=${step_error%% near line 1: *}
    echo "SQLite $version: this shell prints a step's error as '$step_error near line N: MESSAGE', with no (CODE)" ;;
  *) echo "FAIL this shell prints a step's error in an unknown form: $step_error"; exit 1 ;;
esac
no_limit_echo=""
case $(probe '.limit length 1000000') in "") no_limit_echo=1
  echo "SQLite $version: .limit NAME VALUE sets the limit without printing it" ;;
esac
fp_digits=""
case $(probe '.dbconfig fp_digits') in *"fp_digits 1"*)
  printf '.output /dev/null\n.dbconfig fp_digits 15\n.output\n' > "$tmp/fp_digits.init"
  fp_digits="-init $tmp/fp_digits.init"
  echo "SQLite $version: REALs as text with 15 digits (.dbconfig fp_digits 15), as the .expected files" ;;
esac
# The adjustments go one way only: an .expected file written by such a shell would fail with
# Debian's.
if [ -n "${UPDATE_EXPECTED:-}" ] && [ -n "$no_context$step_error$no_limit_echo" ]; then
  echo "UPDATE_EXPECTED: the .expected files are what Debian's sqlite3 3.40 prints; this is SQLite $version"
  exit 1
fi
# expected NAME: tests/sql/NAME.expected as this shell prints it
expected() {
  awk -v no_context="$no_context" -v step_error="$step_error" -v no_limit_echo="$no_limit_echo" '
    { line[NR] = $0 }
    END {
      for (i = 1; i <= NR; i++) {
        if (no_limit_echo && line[i] ~ /^ *length [0-9]+$/) continue
        if (step_error != "" && sub(/^Runtime error near line/, step_error " near line", line[i]))
          sub(/ \([0-9]+\)$/, "", line[i])
        print line[i]
        if (no_context && line[i] ~ /^Parse error near line [0-9]+: / && line[i + 2] ~ /^ *\^--- error here$/) i += 2
      }
    }' "tests/sql/$1.expected"
}
# stdout and stderr interleaved in order: line-buffered stdout
unbuf=""
command -v stdbuf >/dev/null 2>&1 && unbuf="stdbuf -oL -eL"
fails=0; n=0
scripts=tests/sql/*.sql
[ $# -gt 0 ] && scripts=$(for name in "$@"; do echo "tests/sql/$name.sql"; done)
for script in $scripts; do
  name=$(basename "$script" .sql)
  [ -f "$script" ] || { echo "FAIL $name: no $script"; n=$((n + 1)); fails=$((fails + 1)); continue; }
  if grep -q '^\.load \./attnext_jobs_test$' "$script" && [ ! -f "$jobs_so" ]; then
    if [ -n "${PLATFORM:-}" ]; then
      echo "--   $name: not run: the SQL functions of a dqlite node's jobs are not built for $PLATFORM"
    else
      echo "SKIP-PART $name: $jobs_so not built (make check builds it)"
    fi
    continue
  fi
  dir="$tmp/$name"
  mkdir -p "$dir"
  ln -s "$so" "$dir/attnext.so"
  [ -f "$jobs_so" ] && ln -s "$jobs_so" "$dir/attnext_jobs_test.so"
  # a Windows build (make PLATFORM=windows-x64): SQLite's .load adds .dll
  [ -f "${so%.so}.dll" ] && ln -s "${so%.so}.dll" "$dir/attnext.dll"
  ln -s "$root/tests" "$dir/tests"
  (cd "$dir" && $unbuf $SQLITE3 -batch $fp_digits test.db < "$root/$script" > "$dir/out" 2>&1)
  n=$((n + 1))
  if [ -n "$UPDATE_EXPECTED" ]; then
    cp "$dir/out" "tests/sql/$name.expected"
    echo "updated tests/sql/$name.expected ($(wc -l < "$dir/out") lines)"
  elif [ ! -f "tests/sql/$name.expected" ]; then
    echo "FAIL $name: tests/sql/$name.expected is missing; the output was:"
    cat "$dir/out"; fails=$((fails + 1))
  elif expected "$name" > "$dir/expected" && diff -u "$dir/expected" "$dir/out" > "$dir/diff"; then
    echo "ok   $name: $(wc -l < "$dir/out") lines of output equal tests/sql/$name.expected"
  else
    echo "FAIL $name: output differs from tests/sql/$name.expected (- expected, + got):"
    cat "$dir/diff"; fails=$((fails + 1))
  fi
done
echo "$n scripts, $fails failed"
[ $fails -eq 0 ]
