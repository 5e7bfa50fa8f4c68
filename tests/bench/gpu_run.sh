#!/bin/sh
# gpu_run.sh -- everything the CUDA backend's checks need from a GPU machine, in one command from
# the repository root (see tests/bench/GPU_TODO.md). Builds there when it can (nvcc, cblas.h),
# else uses the programs of .gpu/ (tests/bench/gpu_pack.sh). Each step has its own time limit, most
# important first, so that a short lease still brings back the first ones. Writes to $OUT
# (default /tmp/gpu_out):
#   env.txt          nvidia-smi, nvcc, torch, attn_version()
#   test_cuda.log    build/tests/test_cuda: golden fixtures on the GPU, CPU vs CUDA, training,
#                    determinism, out of memory (must end "0 failed")
#   sql.txt          through the sqlite3 shell: attn_train on the GPU (AG News 10k, 5 epochs),
#                    then attn_classify over 380,000 rows on the GPU and on the CPU (the same
#                    machine, ATTNEXT_CUDA_LIB pointing nowhere), seconds, test accuracy, and
#                    how many labels the two agree on
#   bench.md/.json   tests/bench/cuda_bench.py: attnext CUDA vs PyTorch CUDA
#   bench_big.md     the lesson config with 65536-row inference batches
#   make_test.log    the whole suite with "auto" = CUDA (only with --full: minutes)
OUT=${OUT:-/tmp/gpu_out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH="$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
DATA=${ATTNEXT_DATA:-data/ag_news}
[ -f "$DATA/ag_news_train_10k.csv" ] || DATA=.gpu/data
T0=$(date +%s)
step() { echo "[$(($(date +%s) - T0)) s] $*" >> "$OUT/env.txt"; }
{
  nvidia-smi; nvcc --version; "$PY" -c "import torch; print('torch', torch.__version__, torch.version.cuda, torch.cuda.is_available())"
  nproc; grep -m1 'model name' /proc/cpuinfo
} > "$OUT/env.txt" 2>&1
if timeout 240 make -s -j8 attnext.so attnext_cuda.so build/tests/test_cuda build/tests/bench/tool_cuda_bench > "$OUT/build.log" 2>&1; then
  BIN=build/tests; TOOL=build/tests/bench/tool_cuda_bench; EXT=./attnext
  step "built here"
else
  BIN=.gpu/bin; TOOL=.gpu/bin/tool_cuda_bench; EXT=./.gpu/attnext
  cp .gpu/attnext_cuda.so . 2>/dev/null
  step "build failed (see build.log): using .gpu/"
fi
SQLITE=$(command -v sqlite3 || echo .gpu/bin/sqlite3)
export ATTNEXT_CUDA_LIB="$PWD/attnext_cuda.so"
"$SQLITE" :memory: ".load $EXT" "SELECT attn_version();" >> "$OUT/env.txt" 2>&1
timeout 150 "$BIN/test_cuda" > "$OUT/test_cuda.log" 2>&1; echo "test_cuda exit $?" >> "$OUT/test_cuda.log"
step "test_cuda done"
DB=/tmp/gpu_sql.db; rm -f "$DB"
{
  echo "== attn_train, device cuda, 5 epochs"
  timeout 120 "$SQLITE" "$DB" ".load $EXT" ".import --csv $DATA/ag_news_train_10k.csv t" \
    ".import --csv $DATA/ag_news_test.csv test" \
    "CREATE TABLE big AS SELECT k * 100000 + test.rowid AS id, title FROM test, (WITH RECURSIVE c(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM c WHERE k < 49) SELECT k FROM c);" \
    "SELECT epoch, train_loss, val_loss, val_accuracy, seconds FROM attn_train('m', 'SELECT title, category FROM t', '{\"device\":\"${SQL_DEVICE:-cuda}\",\"epochs\":5,\"progress\":false}');"
  old=; [ -f .gpu/old/attnext.so ] && old=gpu_old  # an earlier build to compare, if packed
  for dev in gpu cpu $old; do
    lib=$ATTNEXT_CUDA_LIB; [ $dev = cpu ] && lib=/nonexistent/attnext_cuda.so
    ext=$EXT; [ $dev = gpu_old ] && ext=./.gpu/old/attnext
    echo "== attn_classify on the $dev, 380,000 rows, twice"
    printf '%s\n' ".load $ext" "SELECT attn_version();" ".timer on" \
      "SELECT count(*) FROM attn_classify('m', 'SELECT id, title FROM big');" \
      "CREATE TABLE out_$dev AS SELECT id, label, probability FROM attn_classify('m', 'SELECT id, title FROM big');" |
      ATTNEXT_CUDA_LIB=$lib timeout 120 "$SQLITE" "$DB"
  done
  echo "== rows, test accuracy on the GPU / CPU, labels the same, largest probability difference"
  "$SQLITE" "$DB" "SELECT count(*), avg(g.label = test.category), avg(c.label = test.category), sum(g.label = c.label), max(abs(g.probability - c.probability)) FROM out_gpu g JOIN out_cpu c USING (id) JOIN test ON test.rowid = g.id % 100000;"
} > "$OUT/sql.txt" 2>&1
step "sql done"
timeout 300 "$PY" tests/bench/cuda_bench.py --tool "$TOOL" --train "$DATA/ag_news_train_10k.csv" \
  --test "$DATA/ag_news_test.csv" --json "$OUT/bench.json" > "$OUT/bench.md" 2> "$OUT/bench.err"
step "cuda_bench done"
timeout 120 "$PY" tests/bench/cuda_bench.py --tool "$TOOL" --train "$DATA/ag_news_train_10k.csv" \
  --test "$DATA/ag_news_test.csv" --only lesson --infer-batch 65536 --seconds 5 \
  > "$OUT/bench_big.md" 2>> "$OUT/bench.err"
step "bench_big done"
if [ "$1" = "--full" ]; then
  PYTHON=$PY make test > "$OUT/make_test.log" 2>&1; echo "make test exit $?" >> "$OUT/make_test.log"
fi
tail -n 3 "$OUT/test_cuda.log"; cat "$OUT/sql.txt" "$OUT/bench.md" "$OUT/bench_big.md"; cat "$OUT/env.txt" | tail -8
