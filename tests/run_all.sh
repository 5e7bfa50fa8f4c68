#!/bin/sh
# run_all.sh -- runs every test of attnext and prints one line per test and a summary.
# A test is: a C program build/tests/test_*, a shell script tests/test_*.sh, or a Python
# script tests/test_*.py (run with Debian's python3). Exit status 0 = pass, 77 = could not run
# on this machine (its last output line says why), anything else = fail.
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
export BUILD PYTHON SQLITE3
logs=$BUILD/test-logs
mkdir -p "$logs"
pass=0; fail=0; skip=0; failed=""; skipped=""
run_one() { # name, command...
  name=$1; shift
  start=$(date +%s)
  "$@" >"$logs/$name.log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  if [ $rc -eq 0 ]; then
    pass=$((pass + 1)); printf 'PASS %-28s (%ss)\n' "$name" "$secs"
  elif [ $rc -eq 77 ]; then
    skip=$((skip + 1)); why=$(tail -n 1 "$logs/$name.log")
    printf 'SKIP %-28s %s\n' "$name" "$why"; skipped="$skipped\n  $name: $why"
  else
    fail=$((fail + 1)); failed="$failed $name"
    printf 'FAIL %-28s (exit %s, log %s)\n' "$name" "$rc" "$logs/$name.log"
    tail -n 25 "$logs/$name.log" | sed 's/^/    | /'
  fi
}
for t in "$BUILD"/tests/test_*; do
  [ -x "$t" ] || continue
  run_one "$(basename "$t")" "$t"
done
for t in tests/test_*.sh; do
  [ -f "$t" ] || continue
  run_one "$(basename "$t" .sh)" sh "$t"
done
for t in tests/test_*.py; do
  [ -f "$t" ] || continue
  run_one "$(basename "$t" .py)" "$PYTHON" "$t"
done
[ $skip -gt 0 ] && printf "not run on this machine:$skipped\n"
[ $fail -gt 0 ] && echo "failed:$failed"
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
