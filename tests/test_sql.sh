#!/bin/sh
# test_sql.sh -- runs every tests/sql/NAME.sql through the real sqlite3 shell and compares its
# output (stdout and stderr, in order) with tests/sql/NAME.expected, exactly.
# Each script runs in a fresh temporary directory holding links to attnext.so and tests/, so
# scripts say `.load ./attnext` and may `.open` a second connection to a file there.
# UPDATE_EXPECTED=1 sh tests/test_sql.sh rewrites the .expected files (review the diff!).
# sh tests/test_sql.sh NAME... runs tests/sql/NAME.sql alone (make test-valgrind: two halves at once).
# The extension is $ATTNEXT (default ./attnext, without .so); $SQLITE3 may be a command line
# (make test-asan: "env LD_PRELOAD=... sqlite3").
SQLITE3=${SQLITE3:-sqlite3}
ATTNEXT=${ATTNEXT:-./attnext}
command -v ${SQLITE3##* } >/dev/null 2>&1 || { echo "$SQLITE3 not found"; exit 77; }
[ -f "$ATTNEXT.so" ] || { echo "$ATTNEXT.so not built (run make)"; exit 77; }
root=$(pwd)
case $ATTNEXT in /*) so=$ATTNEXT.so ;; *) so=$root/$ATTNEXT.so ;; esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# stdout and stderr interleaved in order: line-buffered stdout
unbuf=""
command -v stdbuf >/dev/null 2>&1 && unbuf="stdbuf -oL -eL"
fails=0; n=0
scripts=tests/sql/*.sql
[ $# -gt 0 ] && scripts=$(for name in "$@"; do echo "tests/sql/$name.sql"; done)
for script in $scripts; do
  name=$(basename "$script" .sql)
  [ -f "$script" ] || { echo "FAIL $name: no $script"; n=$((n + 1)); fails=$((fails + 1)); continue; }
  dir="$tmp/$name"
  mkdir -p "$dir"
  ln -s "$so" "$dir/attnext.so"
  ln -s "$root/tests" "$dir/tests"
  (cd "$dir" && $unbuf $SQLITE3 -batch test.db < "$root/$script" > "$dir/out" 2>&1)
  n=$((n + 1))
  if [ -n "$UPDATE_EXPECTED" ]; then
    cp "$dir/out" "tests/sql/$name.expected"
    echo "updated tests/sql/$name.expected ($(wc -l < "$dir/out") lines)"
  elif [ ! -f "tests/sql/$name.expected" ]; then
    echo "FAIL $name: tests/sql/$name.expected is missing; the output was:"
    cat "$dir/out"; fails=$((fails + 1))
  elif diff -u "tests/sql/$name.expected" "$dir/out" > "$dir/diff"; then
    echo "ok   $name: $(wc -l < "$dir/out") lines of output equal tests/sql/$name.expected"
  else
    echo "FAIL $name: output differs from tests/sql/$name.expected (- expected, + got):"
    cat "$dir/diff"; fails=$((fails + 1))
  fi
done
echo "$n scripts, $fails failed"
[ $fails -eq 0 ]
