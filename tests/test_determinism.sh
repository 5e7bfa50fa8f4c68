#!/bin/sh
# test_determinism.sh -- the same data, options and seed give bit-identical weights, whatever the
# number of threads: training on the 10,000 AG News titles ($ATTNEXT_DATA) once with 1 thread, four
# times with 2 and twice with 8 (more threads than cores: the pool's workers then wait for a core)
# must give the same FNV-1a hash of the weights (build/tests/bench/tool_train_csv prints it).
# It caught a BLAS library that raced when the training shards called it from two threads.
BUILD=${BUILD:-build}
tool=$BUILD/tests/bench/tool_train_csv
data=${ATTNEXT_DATA:-data/ag_news}
[ -f "$data/ag_news_train_10k.csv" ] || { echo "skip: $data/ag_news_train_10k.csv not found (set ATTNEXT_DATA, or run sh data/fetch_ag_news.sh)"; exit 77; }
[ -x "$tool" ] || { echo "FAIL: $tool not built (make test builds it)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$data/ag_news_train_10k.csv" "$tmp/train.csv"
head -n 501 "$data/ag_news_test.csv" > "$tmp/test.csv"
hash() { "$tool" "$tmp/train.csv" "$tmp/test.csv" "{\"epochs\":2,\"threads\":$1}" | sed -n 's/.*"weights_fnv1a": "\([0-9a-f]*\)".*/\1/p'; }
c=$(hash 1)
all="$c"
for i in 1 2 3 4; do all="$all $(hash 2)"; done
for i in 1 2; do all="$all $(hash 8)"; done
echo "weights hash: 1 thread, then 4 runs with 2 threads, 2 with 8: $all"
if [ -n "$c" ] && [ "$(echo $all | tr ' ' '\n' | sort -u | wc -l)" -eq 1 ]; then echo "ok: bit-identical"; exit 0; fi
echo "FAIL: the weights differ between runs"; exit 1
