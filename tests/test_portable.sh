#!/bin/sh
# test_portable.sh -- the default (portable) attnext.so runs on older and newer x86-64 CPUs and
# predicts what the -march=native build predicts. The sqlite3 shell runs under qemu-user's CPU
# emulation (Debian's qemu-user, TCG) as a Nehalem (x86-64-v2: SSE4.2, no AVX) and as a Haswell
# (x86-64-v3: AVX2 + FMA; qemu 7.2's TCG emulates AVX2 but not AVX-512), trains a small model for
# 2 epochs and predicts; the label must equal the native build's (run on this machine, no qemu)
# and its probability be within 0.01. attn_version() must name the kernels the run-time dispatch
# picked (x86-64-v2 under Nehalem, x86-64-v3 under Haswell). The native build is
# $BUILD/native/attnext.so (`make test` builds it with NATIVE=1).
# Sanitizer builds (ATTNEXT set to another library) do not run under qemu: skipped there.
SQLITE3=${SQLITE3:-sqlite3}
BUILD=${BUILD:-build}
PORTABLE=./attnext
NATIVE_LIB=$BUILD/native/attnext
if [ -n "${ATTNEXT:-}" ] && [ "$ATTNEXT" != ./attnext ]; then
  echo "runs on the default build only (ATTNEXT=$ATTNEXT: sanitizer builds do not run under qemu)"
  exit 77
fi
command -v qemu-x86_64 >/dev/null 2>&1 || {
  echo "FAIL qemu-x86_64 not found: sh tests/deps.sh installs Debian's qemu-user"; exit 1; }
command -v "$SQLITE3" >/dev/null 2>&1 || { echo "FAIL $SQLITE3 not found"; exit 1; }
[ -f $PORTABLE.so ] || { echo "FAIL $PORTABLE.so not built (run make)"; exit 1; }
[ -f $NATIVE_LIB.so ] || { echo "FAIL $NATIVE_LIB.so not built (make test builds it)"; exit 1; }
shell=$(command -v "$SQLITE3")
case $("$shell" :memory: -cmd ".load $PORTABLE" "SELECT attn_version();" 2>&1) in
  *"x86-64-v"[234]" kernels"*) ;;
  *) echo "./attnext.so is not the portable build (make NATIVE=1?): nothing to test"; exit 77 ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/run.sql" <<'SQL'
.bail on
.headers off
.mode list
SELECT 'version|' || attn_version();
CREATE TABLE docs(text, label);
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 89)
INSERT INTO docs SELECT CASE i % 3 WHEN 0 THEN 'goal match team win ' WHEN 1 THEN 'chip phone cloud app '
       ELSE 'bank stocks market rate ' END || (i % 7) || ' ' || (i % 5),
       CASE i % 3 WHEN 0 THEN 'sports' WHEN 1 THEN 'tech' ELSE 'money' END FROM n;
SELECT count(*) FROM attn_train('m', 'SELECT text, label FROM docs',
  '{"epochs":2,"cell":"gru","hidden":32,"embed_dim":16,"fc_hidden":16,"vocab_size":60,"batch_size":8,"progress":false}');
SELECT 'predict|' || label || '|' || printf('%.6f', probability)
  FROM attn_probs('m', 'team win match chip 3') LIMIT 1;
SQL
run() { # name, library, command prefix
  name=$1; lib=$2; shift 2
  "$@" "$shell" :memory: -cmd ".load $lib" < "$tmp/run.sql" > "$tmp/$name.out" 2> "$tmp/$name.err"
  rc=$?
  grep -v "TCG doesn't support requested feature" "$tmp/$name.err" >&2
  [ $rc = 0 ] || { echo "FAIL $name: exit status $rc"; return 1; }
  version=$(sed -n 's/^version|//p' "$tmp/$name.out")
  predict=$(sed -n 's/^predict|//p' "$tmp/$name.out")
  echo "$name: ${version%%;*}; ${version#*backends: }" | cut -c1-150
  echo "$name: prediction $predict"
}
fail=0
run native $NATIVE_LIB || fail=1
run default $PORTABLE || fail=1
# Under emulation OpenBLAS is told the emulated CPU: a machine may set OPENBLAS_CORETYPE for its
# real processor (one seen here: Haswell on an AMD Zen 5), and OpenBLAS then runs that core's
# kernels whatever CPUID says, so AVX2 under the Nehalem emulation: an illegal instruction in
# OpenBLAS, not in attnext. The name given is the one its own detection picks under qemu.
NEHALEM="env OPENBLAS_CORETYPE=Nehalem qemu-x86_64 -cpu Nehalem"
run nehalem $PORTABLE $NEHALEM || fail=1
run haswell $PORTABLE env OPENBLAS_CORETYPE=Haswell qemu-x86_64 -cpu Haswell || fail=1
[ $fail = 0 ] || exit 1
kernels() { sed -n 's/^version|.*backends: cpu (\([^ ]*\) kernels.*/\1/p' "$tmp/$1.out"; }
[ "$(kernels nehalem)" = x86-64-v2 ] && echo "ok Nehalem runs the x86-64-v2 kernels" ||
  { echo "FAIL Nehalem: kernels '$(kernels nehalem)', expected x86-64-v2"; fail=1; }
[ "$(kernels haswell)" = x86-64-v3 ] && echo "ok Haswell runs the x86-64-v3 kernels" ||
  { echo "FAIL Haswell: kernels '$(kernels haswell)', expected x86-64-v3"; fail=1; }
ref=$(sed -n 's/^predict|//p' "$tmp/native.out")
[ -n "$ref" ] || { echo "FAIL no prediction from the native build"; exit 1; }
for name in default nehalem haswell; do
  got=$(sed -n 's/^predict|//p' "$tmp/$name.out")
  if awk -v a="$ref" -v b="$got" 'BEGIN { split(a, x, "|"); split(b, y, "|");
        d = x[2] - y[2]; if (d < 0) d = -d; exit !(x[1] == y[1] && y[1] != "" && d <= 0.01) }'; then
    echo "ok $name: $got matches native $ref (label equal, probability within 0.01)"
  else
    echo "FAIL $name: $got vs native $ref"; fail=1
  fi
done
# The failure a portable build prevents: the native build (-march=native) under an older CPU.
if $NEHALEM "$shell" :memory: -cmd ".load $NATIVE_LIB" "SELECT 1;" >/dev/null 2>&1; then
  echo "note: the native build happens to run under Nehalem too (this machine's CPU is old enough)"
else
  echo "note: the native build fails under Nehalem (exit $?), as expected of -march=native"
fi
exit $fail
