#!/bin/sh
# test_bench_smoke.sh -- `make bench` still works: runs tests/bench/bench.py --quick on a tiny
# subset (400 training rows, 300 test rows, 1-2 epochs) and checks that the table has every row
# with a number for attnext and PyTorch, that the scaling table has a line per point and that
# the JSON and both SVG charts were written. Exit 77 when PyTorch or the data is missing, or
# when $ATTNEXT is another build than the default (make test-asan).
PYTHON=${PYTHON:-/usr/bin/python3}
# bench.py loads the default build (./attnext): under make test-asan (ATTNEXT=build-asan/attnext)
# this ran that same uninstrumented library again, 50 s of CPU for nothing the sanitizers see;
# make test runs it in the same CI run.
ATTNEXT=${ATTNEXT:-./attnext}
[ "$ATTNEXT" = ./attnext ] || { echo "the benchmark loads the default build (ATTNEXT=$ATTNEXT)"; exit 77; }
data=${ATTNEXT_DATA:-data/ag_news}
[ -f "$data/ag_news_train_10k.csv" ] && [ -f "$data/ag_news_test.csv" ] || {
  echo "skip: $data/ag_news_*.csv not found (set ATTNEXT_DATA, or run sh data/fetch_ag_news.sh)"; exit 77; }
"$PYTHON" -c "import torch" 2>/dev/null || { echo "skip: $PYTHON cannot import torch"; exit 77; }
[ -f attnext.so ] || { echo "attnext.so not built"; exit 1; }
out=$(mktemp -d /tmp/bench_smoke.XXXXXX) || exit 1
trap 'rm -rf "$out"' EXIT
start=$(date +%s)
"$PYTHON" tests/bench/bench.py --quick --rows 400 --test-rows 300 --out "$out" >"$out/stdout" 2>"$out/stderr"
rc=$?
cat "$out/stdout"
if [ $rc -ne 0 ]; then
  tail -n 30 "$out/stderr"; echo "FAIL: bench.py --quick exited with $rc"; exit 1
fi
echo "bench --quick took $(( $(date +%s) - start ))s"
fail=0
# Every row of the main table, each with two numeric cells (attnext, PyTorch); the last row
# (a ratio of attnext's own figures) and the rows of PyTorch variants a quick run skips have one.
for row in "seconds per epoch (" "seconds per epoch, PyTorch at its best thread count" "training rows/s" "training tokens/s" \
           "training CPU seconds per epoch" "test accuracy" "test weighted F1 (" \
           "test weighted F1 vs PyTorch packed" "peak RSS, training (MiB)" \
           "RSS growth in training (MiB)" "attn_predict vs PyTorch batched" \
           "attn_predict vs PyTorch one at a time" "attn_classify vs PyTorch batched" \
           "attn_classify / attn_predict" "seconds per epoch, attnext threads 0 vs its best fixed"; do
  line=$(grep -F "| $row" "$out/stdout" | head -n 1)
  if [ -z "$line" ]; then
    echo "FAIL: no table row '$row'"; fail=1; continue
  fi
  cells=$(echo "$line" | awk -F'|' '{n=0; for (i=3;i<=4;i++) if ($i ~ /^ *[-+]?[0-9][0-9,]*(\.[0-9]+)?(e[-+]?[0-9]+)? *$/) n++; print n}')
  want=2
  case "$row" in "attn_classify / attn_predict"|"test weighted F1 vs PyTorch packed") want=1;; esac
  if [ "$cells" -lt "$want" ]; then
    echo "FAIL: row '$row' has $cells numeric values, expected $want: $line"; fail=1
  else
    echo "ok: $row"
  fi
done
# The threads row is the median of the rounds' ratios (one round in --quick)
grep -qF "median of 1 rounds' ratios" "$out/stdout" && echo "ok: threads row from 1 round" ||
  { echo "FAIL: the threads row does not say its rounds"; fail=1; }
# Scaling table: 3 cells x 3 points in --quick, both systems' seconds numeric.
n=$(grep -cE '^\| (rnn|gru|lstm) \| [0-9]+ \| [0-9]+ \| [0-9]+ \| [0-9.e-]+ \| [0-9.e-]+ \|' "$out/stdout")
[ "$n" -eq 9 ] || { echo "FAIL: expected 9 scaling lines with both timings, found $n"; fail=1; }
for f in "bench-*.json" "scaling_rows-*.svg" "scaling_hidden-*.svg"; do
  ls "$out"/$f >/dev/null 2>&1 || { echo "FAIL: $f not written"; fail=1; }
done
for f in "$out"/*.svg; do
  grep -q '<polyline' "$f" || { echo "FAIL: $f has no lines"; fail=1; }
done
"$PYTHON" -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['main']['attnext']['epochs'] and d['main']['pytorch']['epochs']" "$out"/bench-*.json \
  || { echo "FAIL: JSON lacks the epochs"; fail=1; }
[ $fail -eq 0 ] && echo "PASS: bench smoke test"
exit $fail
