#!/bin/sh
# run_all.sh [-j N] [-l] [PATTERN...] -- runs the tests of attnext and prints one line per test
# and a summary.
#   sh tests/run_all.sh               every test, one after another (TEST_JOBS=N: N at a time)
#   sh tests/run_all.sh sql           the tests whose name matches sql (test_sql, test_hostile_sql,
#                                     test_python_sqlite, ...); PATTERN is an extended regular
#                                     expression (grep -E) on the name; several: any of them
#   sh tests/run_all.sh '^test_sql$'  one test (its log: $BUILD/test-logs/test_sql.log)
#   sh tests/run_all.sh -j2 sql       N tests at a time (make test: TEST_JOBS, the machine's cores)
#   sh tests/run_all.sh -l sql        list the names PATTERN selects, run nothing
# A test is: a C program build/tests/test_*, a shell script tests/test_*.sh, or a Python
# script tests/test_*.py (run with Debian's python3). Exit status 0 = pass, 77 = could not run
# on this machine (its last output line says why), anything else = fail. Each line gives the
# test's wall time and CPU time (user + sys of it and the processes it waited for).
# With -j N, the tests run N at a time, each line printed whole as its test ends; the tests of
# ALONE then run one at a time, with nothing beside them: they measure time against a bound
# that another test's load could break (predict rows/s, 1,000 versions against 1, an
# interrupt's delay, lock waits against busy timeouts) or use what a test of the batch leaves in
# build/ (test_package_npm copies the better-sqlite3 that test_field_node installs in
# build/node). Every other test writes only to its own temporary directories and picks free
# ports. A new test that cannot run beside another goes into ALONE (tests/README.md).
# A test that passes with a part it could not run prints "SKIP-PART reason" (one line per part);
# it is reported as a pass with that part not run. With CI=true in the environment a skip, or a
# part not run, fails the run unless tests/allowed_skips.txt lists the test with that reason.
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
# EMULATOR: the command line that runs the C tests of a cross build (make PLATFORM=linux-arm64:
# qemu-aarch64 -L ...); empty: they run as they are
EMULATOR=${EMULATOR:-}
export BUILD PYTHON SQLITE3 EMULATOR
# test_matrix and test_hostile_files: an interrupt answered within a part of the uninterrupted
# run's time, measured just before (a burst of another test's load between the two breaks it).
ALONE="test_agnews test_store_speed test_concurrency test_field_clients test_python_sqlite
  test_package_npm test_interrupt_latency test_matrix test_hostile_files"
# The batch starts with its longest tests, slowest first, so that it does not end with one long
# test running while the other slots stay idle; the ones that mostly wait (test_cluster's 60 s
# training job and elections, test_field_concurrency's lock holds) overlap the CPU-bound ones.
# The last line: the longest of a cross build's tests under qemu or wine (make test-linux-arm64:
# test_sql 107 s, test_readme 73 s, test_resource_bounds 60 s, test_train 42 s on 2 cores),
# which ended that run alone when they came in their turn.
FIRST="test_cluster test_store_stress test_field_concurrency test_sqlite_versions test_field_node
  test_clients test_cuda_emulated test_model_life test_faults_oom
  test_browser test_bench_smoke test_explain test_determinism
  test_text_reference
  test_sql test_readme test_resource_bounds test_train test_row_kernels"
logs=$BUILD/test-logs
ALLOWED=${ALLOWED_SKIPS:-tests/allowed_skips.txt}
case $(echo "${CI:-}" | tr 'A-Z' 'a-z') in true|1|yes) ci=1 ;; *) ci="" ;; esac
usage() { sed -n '2,10s/^# \{0,1\}//p' "$0"; }

allowed() { # name reason: whether $ALLOWED lists this skip (name, then the reason's start)
  [ -f "$ALLOWED" ] || return 1
  grep -v '^[[:space:]]*\(#\|$\)' "$ALLOWED" | while read -r n why; do
    [ "$n" = "$1" ] || continue
    case $2 in "$why"*) echo yes; break ;; esac
  done | grep -q yes
}

run_one() { # kind name: runs it, prints its line(s) at once, writes $logs/NAME.result
  kind=$1; name=$2
  case $kind in
    c) exe=$BUILD/tests/$name; [ -f "$exe.exe" ] && exe=$exe.exe # Windows (wine)
       set -- $EMULATOR "$exe" ;;
    sh) set -- sh "tests/$name.sh" ;;
    py) set -- "$PYTHON" "tests/$name.py" ;;
  esac
  start=$(date +%s)
  # a subshell: its `times` counts this test's processes alone
  ( "$@" >"$logs/$name.log" 2>&1; rc=$?; times >"$logs/$name.times"; exit $rc )
  rc=$?
  secs=$(( $(date +%s) - start ))
  # times' second line: the children's user and system time, as 1m2.345s 0m0.678s
  cpu=$(sed -n 2p "$logs/$name.times" 2>/dev/null | awk '{ n = 0
    for (i = 1; i <= 2; i++) { split($i, t, "m"); n += t[1] * 60 + t[2] } printf "%.0f", n }')
  rm -f "$logs/$name.times"
  # what did not run: the skip's reason, or each part's (SKIP-PART lines of a pass)
  parts=""
  if [ $rc -eq 77 ]; then parts=$(tail -n 1 "$logs/$name.log")
  elif [ $rc -eq 0 ]; then parts=$(sed -n 's/^SKIP-PART  *//p' "$logs/$name.log")
  fi
  refused=""
  if [ -n "$ci" ] && [ -n "$parts" ]; then
    refused=$(printf '%s\n' "$parts" | while IFS= read -r why; do
      allowed "$name" "$why" || printf '%s\n' "$why"; done)
  fi
  if [ -n "$refused" ]; then
    echo FAIL > "$logs/$name.result"
    out=$(printf 'FAIL %-28s (CI=true: %s, not in %s:)\n' "$name" \
            "$([ $rc -eq 77 ] && echo skipped || echo 'part not run')" "$ALLOWED"
          printf '%s\n' "$refused" | sed 's/^/    | /')
    printf '%s\n' "$out"
  elif [ $rc -eq 0 ] && [ -n "$parts" ]; then
    printf 'PART\n%s\n' "$parts" > "$logs/$name.result"
    out=$(printf 'PASS %-28s (%ss, %ss CPU), a part not run:\n' "$name" "$secs" "${cpu:-?}"
          printf '%s\n' "$parts" | sed 's/^/    | /')
    printf '%s\n' "$out"
  elif [ $rc -eq 0 ]; then
    echo PASS > "$logs/$name.result"
    printf 'PASS %-28s (%ss, %ss CPU)\n' "$name" "$secs" "${cpu:-?}"
  elif [ $rc -eq 77 ]; then
    printf 'SKIP\n%s\n' "$parts" > "$logs/$name.result"; printf 'SKIP %-28s %s\n' "$name" "$parts"
  else
    echo FAIL > "$logs/$name.result"
    # one write, so that the lines of tests ending together do not interleave (-j)
    out=$(printf 'FAIL %-28s (exit %s, log %s)\n' "$name" "$rc" "$logs/$name.log"
          tail -n 25 "$logs/$name.log" | sed 's/^/    | /')
    printf '%s\n' "$out"
  fi
}

# the worker of -j: xargs runs one of these per test
if [ "$1" = "--one" ]; then
  run_one "${2%%:*}" "${2#*:}"
  exit 0
fi

jobs=${TEST_JOBS:-1}; list=""
while [ $# -gt 0 ]; do
  case $1 in
    -j) [ $# -ge 2 ] || { usage >&2; exit 2; }; jobs=$2; shift 2 ;;
    -j*) jobs=${1#-j}; shift ;;
    -l|--list) list=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    -*) echo "run_all.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) break ;;
  esac
done
case $jobs in ''|*[!0-9]*|0) echo "run_all.sh: -j takes a number of tests at a time, got '$jobs'" >&2; exit 2 ;; esac

# every test as kind:name, in the order the serial run takes them
all=""
for t in "$BUILD"/tests/test_*; do
  [ -x "$t" ] || continue
  all="$all c:$(basename "$t" .exe)"
done
for t in tests/test_*.sh; do
  [ -f "$t" ] || continue
  all="$all sh:$(basename "$t" .sh)"
done
for t in tests/test_*.py; do
  [ -f "$t" ] || continue
  all="$all py:$(basename "$t" .py)"
done
selected=""
for kt in $all; do
  if [ $# -gt 0 ]; then
    hit=""
    for p in "$@"; do echo "${kt#*:}" | grep -Eq -e "$p" && { hit=1; break; }; done
    [ -n "$hit" ] || continue
  fi
  selected="$selected $kt"
done
[ -n "$selected" ] || { echo "run_all.sh: no test matches $*" >&2; exit 2; }
if [ -n "$list" ]; then
  for kt in $selected; do echo "${kt#*:}"; done
  exit 0
fi

mkdir -p "$logs"
for kt in $selected; do rm -f "$logs/${kt#*:}.result"; done
began=$(date +%s)
if [ "$jobs" -eq 1 ]; then
  for kt in $selected; do run_one "${kt%%:*}" "${kt#*:}"; done
else
  first=""; shared=""; alone=""
  for kt in $selected; do
    case " $(echo $ALONE) " in *" ${kt#*:} "*) alone="$alone $kt"; continue ;; esac
    case " $(echo $FIRST) " in *" ${kt#*:} "*) continue ;; esac
    shared="$shared $kt"
  done
  for f in $FIRST; do # in FIRST's order
    for kt in $selected; do [ "${kt#*:}" = "$f" ] && first="$first $kt"; done
  done
  shared="$first$shared"
  n=$(echo $shared | wc -w); a=$(echo $alone | wc -w)
  echo "run_all.sh: $n tests, $jobs at a time; then $a alone"
  [ -n "$shared" ] && printf '%s\n' $shared | xargs -P "$jobs" -n 1 sh "$0" --one
  for kt in $alone; do run_one "${kt%%:*}" "${kt#*:}"; done
fi
took=$(( $(date +%s) - began ))

pass=0; part=0; fail=0; skip=0; failed=""; skipped=""
nl='
'
for kt in $selected; do
  name=${kt#*:}
  case $(head -n 1 "$logs/$name.result" 2>/dev/null) in
    PASS) pass=$((pass + 1)) ;;
    PART) pass=$((pass + 1)); part=$((part + 1))
      skipped="$skipped$nl$(sed -n '2,$p' "$logs/$name.result" | sed "s/^/  $name (a part): /")" ;;
    SKIP) skip=$((skip + 1)); skipped="$skipped$nl  $name: $(sed -n 2p "$logs/$name.result")" ;;
    *) fail=$((fail + 1)); failed="$failed $name" ;;
  esac
done
[ -n "$skipped" ] && printf '%s\n' "not run on this machine:$skipped"
[ $fail -gt 0 ] && echo "failed:$failed"
echo "run_all.sh: $(echo $selected | wc -w) tests in $((took / 60))m$((took % 60))s," \
  "$jobs at a time"
[ $part -gt 0 ] && part=" ($part with a part not run)" || part=""
echo "$pass passed$part, $fail failed, $skip skipped"
[ $fail -eq 0 ]
