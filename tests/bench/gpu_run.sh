#!/bin/sh
# gpu_run.sh -- everything issue 5 needs from a GPU machine, in one command from the repository
# root (see tests/bench/GPU_TODO.md). Builds there when it can (nvcc, cblas.h), else uses the
# programs of .gpu/ (tests/bench/gpu_pack.sh). Writes its logs to $OUT (default /tmp/gpu_out):
#   env.txt          nvidia-smi, nvcc, torch, attn_version()
#   test_cuda.log    build/tests/test_cuda: golden fixtures on the GPU, CPU vs CUDA, training,
#                    determinism, out of memory (must end "0 failed")
#   bench.md/.json   tests/bench/cuda_bench.py: attnext CUDA vs PyTorch CUDA
#   bench_big.md     the lesson config with 65536-row inference batches
#   sql_train.txt    attn_train through SQLite on the GPU (AG News 10k, 5 epochs)
#   make_test.log    the whole suite with "auto" = CUDA (only with --full: minutes)
OUT=${OUT:-/tmp/gpu_out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export LD_LIBRARY_PATH="$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
DATA=${ATTNEXT_DATA:-data/ag_news}
[ -f "$DATA/ag_news_train_10k.csv" ] || DATA=.gpu/data
{
  nvidia-smi; nvcc --version; "$PY" -c "import torch; print('torch', torch.__version__, torch.version.cuda, torch.cuda.is_available())"
} > "$OUT/env.txt" 2>&1
if make -s attnext.so attnext_cuda.so build/tests/test_cuda build/tests/bench/tool_cuda_bench > "$OUT/build.log" 2>&1; then
  BIN=build/tests; TOOL=build/tests/bench/tool_cuda_bench; EXT=./attnext
  echo "built here" >> "$OUT/env.txt"
else
  BIN=.gpu/bin; TOOL=.gpu/bin/tool_cuda_bench; EXT=./.gpu/attnext
  cp .gpu/attnext_cuda.so . 2>/dev/null
  echo "build failed (see build.log): using .gpu/" >> "$OUT/env.txt"
fi
SQLITE=$(command -v sqlite3 || echo .gpu/bin/sqlite3)
export ATTNEXT_CUDA_LIB="$PWD/attnext_cuda.so"
"$SQLITE" :memory: ".load $EXT" "SELECT attn_version();" >> "$OUT/env.txt" 2>&1
"$BIN/test_cuda" > "$OUT/test_cuda.log" 2>&1; echo "test_cuda exit $?" >> "$OUT/test_cuda.log"
"$PY" tests/bench/cuda_bench.py --tool "$TOOL" --train "$DATA/ag_news_train_10k.csv" \
  --test "$DATA/ag_news_test.csv" --json "$OUT/bench.json" > "$OUT/bench.md" 2> "$OUT/bench.err"
"$PY" tests/bench/cuda_bench.py --tool "$TOOL" --train "$DATA/ag_news_train_10k.csv" \
  --test "$DATA/ag_news_test.csv" --only lesson --infer-batch 65536 --seconds 5 \
  > "$OUT/bench_big.md" 2>> "$OUT/bench.err"
"$SQLITE" :memory: ".load $EXT" ".import --csv $DATA/ag_news_train_10k.csv t" \
  "SELECT epoch, train_loss, val_loss, val_accuracy, seconds FROM attn_train('m', 'SELECT title, category FROM t', '{\"device\":\"cuda\",\"epochs\":5,\"progress\":false}');" \
  > "$OUT/sql_train.txt" 2>&1
if [ "$1" = "--full" ]; then
  PYTHON=$PY make test > "$OUT/make_test.log" 2>&1; echo "make test exit $?" >> "$OUT/make_test.log"
fi
tail -n 3 "$OUT/test_cuda.log"; cat "$OUT/bench.md" "$OUT/bench_big.md" "$OUT/sql_train.txt"
