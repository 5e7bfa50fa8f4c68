#!/bin/sh
# test_demo.sh -- runs sql/demo.sql (what `make demo` runs) on a fresh database and checks that
# every step ran and that the model learned the bundled headlines: held-out weighted F1 >= 0.85
# (a broken model scores about 0.25 on four balanced classes; the demo config reaches about
# 0.95), at least 30 of the 40 new headlines right, attention weights of each shown headline
# summing to 1, and the model stored as version 1, deployed.
SQLITE3=${SQLITE3:-sqlite3}
# $SQLITE3 may be a command line (make test-asan: env LD_PRELOAD=... sqlite3); the extension
# is $ATTNEXT (default ./attnext, as `.load` takes it: without .so).
ATTNEXT=${ATTNEXT:-./attnext}
command -v ${SQLITE3%% *} >/dev/null 2>&1 || { echo "$SQLITE3 not found"; exit 77; }
[ -f "$ATTNEXT.so" ] || { echo "$ATTNEXT.so not built (run make)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

start=$(date +%s)
grep -q '^\.load \./attnext$' sql/demo.sql || { echo "FAIL: sql/demo.sql has no line '.load ./attnext'"; exit 1; }
sed "s|^\.load \./attnext\$|.load $ATTNEXT|" sql/demo.sql > "$tmp/demo.sql"
if ! $SQLITE3 -bail "$tmp/demo.db" < "$tmp/demo.sql" > "$tmp/out" 2> "$tmp/err"; then
  echo "FAIL: sql/demo.sql stopped with an error:"; cat "$tmp/err"; tail -n 20 "$tmp/out"; exit 1
fi
echo "sql/demo.sql ran in $(( $(date +%s) - start ))s, $(wc -l < "$tmp/out") lines of output"
[ -s "$tmp/err" ] && { echo "note: standard error:"; cat "$tmp/err"; }

for step in 1 2 3 4 5 6 7 8; do
  grep -q "^== $step\. " "$tmp/out" || fail "step $step's heading is missing from the output"
done

# box rows: "│ a │ b │ ..." -> fields separated by |; the shell of SQLite 3.52 and later aligns
# numbers right ("│    40 │")
rows() { grep "^│ *$1" "$tmp/out" | sed 's/ *│ */|/g; s/^|//; s/|$//'; }
overall=$(rows overall)
f1=$(echo "$overall" | cut -d'|' -f4)
echo "held-out overall: $overall"
awk -v f="$f1" 'BEGIN { exit !(f + 0 >= 0.85) }' || fail "held-out weighted F1 $f1 < 0.85"

correct=$(grep -A 3 'attn_classify:' "$tmp/out" | rows 40 | cut -d'|' -f2)
echo "new headlines right: ${correct:-?} of 40"
[ "${correct:-0}" -ge 30 ] 2>/dev/null || fail "attn_classify got ${correct:-?} of 40 new headlines right, expected >= 30"
misses=$(grep -c '│ x *│$' "$tmp/out")
[ $((40 - misses)) -eq "${correct:-0}" ] ||
  fail "attn_predict misses ($misses) and attn_classify's correct count ($correct) disagree"

# attention weights of the two headlines of step 6 each sum to 1
sed -n '/^== 6\./,/^== 7\./p' "$tmp/out" | grep '^│ *[0-9]' | sed 's/ *│ */|/g; s/^|//' |
  awk -F'|' '$1 == 0 && NR > 1 { print s; s = 0 } { s += $3 } END { print s }' > "$tmp/sums"
echo "attention sums: $(tr '\n' ' ' < "$tmp/sums")"
[ "$(wc -l < "$tmp/sums")" -eq 2 ] || fail "expected two attention tables in step 6"
while read -r s; do
  awk -v s="$s" 'BEGIN { exit !(s > 0.99 && s < 1.01) }' || fail "attention weights sum to $s, not 1"
done < "$tmp/sums"

store=$($SQLITE3 "$tmp/demo.db" "SELECT name, version, deployed, (SELECT count(*) FROM attn_training_log) > 0 FROM attn_models")
[ "$store" = "news|1|1|1" ] || fail "model store: expected news|1|1|1 (name, version, deployed, has a log), got $store"

[ $fails -eq 0 ] || exit 1
echo "ok: the demo trains, evaluates, predicts and explains"
