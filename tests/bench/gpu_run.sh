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
#   choice.txt       the default recipe's fits of 500 / 1,000 / 2,500 AG News rows (its choice of
#                    word dropout included) on the GPU and on the CPU: what each chose, seconds,
#                    test F1
#   predict.txt      one-row attn_predict over 7,600 titles with a model loaded on the GPU and on
#                    the CPU (a kernel launch per step against the CPU's whole row)
#   suite.log        the tests with "auto" = CUDA (run_all.sh over the programs built here or
#                    packed in .gpu/build), less those that need tools or networks such a machine
#                    lacks and the long fault-injection runs
#   make_test.log    make test with "auto" = CUDA (--full; needs a machine that can build)
# GPU_PREBUILT=1: use .gpu/ without trying to build (a build that fails costs a minute of nvcc).
# GPU_SUITE=REGEX: the suite step runs only the tests whose names match.
# Steps: gpu_run.sh [--full] [STEP...], STEP one of build cuda sql choice predict bench big suite;
# none named: build cuda sql bench big (the first run's). build (finding or unpacking the
# programs) always runs first.
OUT=${OUT:-/tmp/gpu_out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH="$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
DATA=${ATTNEXT_DATA:-data/ag_news}
[ -f "$DATA/ag_news_train_10k.csv" ] || DATA=.gpu/data
T0=$(date +%s)
full=; [ "$1" = "--full" ] && { full=1; shift; }
STEPS=${*:-cuda sql bench big}
want() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
step() { echo "[$(($(date +%s) - T0)) s] $*" >> "$OUT/env.txt"; }
# the CUDA library a run on $1 loads: none for the CPU (the same machine, its GPU unseen)
cuda_lib_for() { if [ "$1" = cpu ]; then echo /nonexistent/attnext_cuda.so; else echo "$ATTNEXT_CUDA_LIB"; fi; }
{
  nvidia-smi; nvcc --version; "$PY" -c "import torch; print('torch', torch.__version__, torch.version.cuda, torch.cuda.is_available())"
  nproc; grep -m1 'model name' /proc/cpuinfo
} > "$OUT/env.txt" 2>&1
if [ -z "${GPU_PREBUILT:-}" ] && timeout 240 make -s -j8 attnext.so attnext_cuda.so build/tests/test_cuda build/tests/bench/tool_cuda_bench > "$OUT/build.log" 2>&1; then
  BIN=build/tests; TOOL=build/tests/bench/tool_cuda_bench; EXT=./attnext
  step "built here"
else
  BIN=.gpu/bin; TOOL=.gpu/bin/tool_cuda_bench; EXT=./.gpu/attnext
  for f in .gpu/lib/*.xz; do [ -f "$f" ] && { xz -dkf "$f" 2>/dev/null ||
    "$PY" -c "import lzma, sys; open(sys.argv[1][:-3], 'wb').write(lzma.open(sys.argv[1]).read())" "$f"; }; done
  cp .gpu/attnext_cuda.so . 2>/dev/null
  step "not built here (GPU_PREBUILT set, or see build.log): using .gpu/"
fi
SQLITE=$(command -v sqlite3 || echo "$PWD/.gpu/bin/sqlite3")
export ATTNEXT_CUDA_LIB="$PWD/attnext_cuda.so"
"$SQLITE" :memory: ".load $EXT" "SELECT attn_version();" >> "$OUT/env.txt" 2>&1
if want cuda; then
  timeout 120 "$BIN/test_cuda" > "$OUT/test_cuda.log" 2>&1; echo "test_cuda exit $?" >> "$OUT/test_cuda.log"
  step "test_cuda done"
fi
if want sql; then
DB=/tmp/gpu_sql.db; rm -f "$DB"
{
  echo "== attn_train, device cuda, 5 epochs"
  timeout 120 "$SQLITE" "$DB" ".load $EXT" ".import --csv $DATA/ag_news_train_10k.csv t" \
    ".import --csv $DATA/ag_news_test.csv test" \
    "CREATE TABLE big AS SELECT k * 100000 + test.rowid AS id, title FROM test, (WITH RECURSIVE c(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM c WHERE k < 49) SELECT k FROM c);" \
    "SELECT epoch, train_loss, val_loss, val_accuracy, seconds FROM attn_train('m', 'SELECT title, category FROM t', '{\"device\":\"${SQL_DEVICE:-cuda}\",\"epochs\":5,\"progress\":false}');"
  old=; [ -f .gpu/old/attnext.so ] && old=gpu_old  # an earlier build to compare, if packed
  for dev in gpu cpu $old; do
    lib=$(cuda_lib_for $dev)
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
fi
if want choice; then
  # The default recipe below 5,000 rows chooses its word dropout on two folds (engine/choose.c);
  # on a device the folds train with dense Adam, on the CPU lazy Adam: the choices may differ.
  CDB=/tmp/gpu_choice.db; rm -f "$CDB"
  "$SQLITE" "$CDB" ".import --csv $DATA/ag_news_train_10k.csv t" ".import --csv $DATA/ag_news_test.csv test"
  {
    echo "rows device word_dropout fold_scores seconds test_f1"
    for n in 500 1000 2500; do
      for dev in cuda cpu; do
        lib=$(cuda_lib_for $dev)
        ATTNEXT_CUDA_LIB=$lib timeout 40 "$SQLITE" "$CDB" ".load $EXT" \
          "SELECT json_extract(s, '\$.sized.word_dropout'), json_extract(s, '\$.word_dropout_choice'), json_extract(s, '\$.seconds') FROM (SELECT attn_fit('c${dev}$n', 'SELECT title, category FROM t ORDER BY (rowid * 7919) % 10007 LIMIT $n', '{\"device\":\"$dev\",\"progress\":false}') AS s);" \
          "SELECT round(f1, 4) FROM attn_evaluate('c${dev}$n', 'SELECT title, category FROM test') WHERE label = 'overall';" |
          tr '\n' ' ' | sed "s/^/$n $dev /"; echo
      done
    done
  } > "$OUT/choice.txt" 2>&1
  step "choice done"
fi
if want predict; then
  # The choice step's models of 2,500 rows: the one trained on the GPU loads there (its device
  # "cuda"), the one trained on the CPU on the CPU.
  for dev in cuda cpu; do
    lib=$(cuda_lib_for $dev)
    echo "== attn_predict one row at a time, 7,600 titles, model loaded on the $dev"
    printf '%s\n' ".load $EXT" ".timer on" "SELECT count(attn_predict('c${dev}2500', title)) FROM test;" \
      "SELECT count(attn_predict('c${dev}2500', title)) FROM test;" |
      ATTNEXT_CUDA_LIB=$lib timeout 30 "$SQLITE" /tmp/gpu_choice.db
  done > "$OUT/predict.txt" 2>&1
  step "predict done"
fi
if want bench; then
timeout 300 "$PY" tests/bench/cuda_bench.py --tool "$TOOL" --train "$DATA/ag_news_train_10k.csv" \
  --test "$DATA/ag_news_test.csv" --json "$OUT/bench.json" > "$OUT/bench.md" 2> "$OUT/bench.err"
step "cuda_bench done"
fi
if want big; then
timeout 120 "$PY" tests/bench/cuda_bench.py --tool "$TOOL" --train "$DATA/ag_news_train_10k.csv" \
  --test "$DATA/ag_news_test.csv" --only lesson --infer-batch 65536 --seconds 5 \
  > "$OUT/bench_big.md" 2>> "$OUT/bench.err"
step "bench_big done"
fi
if want suite; then
  # The tests as make test runs them, with the CUDA library found: models of device "auto" train
  # and predict on the GPU. Left out: what needs tools, packages or networks such a machine lacks
  # (clients, dqlite, browsers, package builders, other SQLite versions), the long fault runs,
  # the timing checks made for 2 cores, and test_cuda (its own step).
  SB=build; [ -x build/tests/test_train ] || SB=.gpu/build
  [ -f attnext.so ] || cp .gpu/attnext.so .
  skip='^(test_cuda|test_cuda_emulated|test_faults_oom|test_cluster|test_sqlite_versions|test_old_sqlite|test_browser|test_package_.*|test_field_.*|test_clients|test_portable|test_store_stress|test_store_speed|test_interrupt_latency|test_matrix|test_agnews|test_concurrency|test_python_sqlite|test_hostile_files|test_bench_smoke|test_fetch_convert|test_demo|test_readme|test_interop|test_exports|test_cuda_abi)$'
  names=$(BUILD=$SB sh tests/run_all.sh -l | grep -vE "$skip" | grep -E "${GPU_SUITE:-.}" | sed 's/.*/^&$/')
  ATTNEXT_DATA=$(cd "$DATA" && pwd) BUILD=$SB PYTHON=$PY SQLITE3=$SQLITE ATTNEXT=./attnext timeout 220 sh tests/run_all.sh -j 12 $names \
    > "$OUT/suite.log" 2>&1; echo "suite exit $?" >> "$OUT/suite.log"
  step "suite done"
fi
if [ -n "$full" ]; then
  PYTHON=$PY make test > "$OUT/make_test.log" 2>&1; echo "make test exit $?" >> "$OUT/make_test.log"
fi
for f in test_cuda.log; do [ -f "$OUT/$f" ] && tail -n 3 "$OUT/$f"; done
for f in sql.txt choice.txt predict.txt bench.md bench_big.md; do [ -f "$OUT/$f" ] && cat "$OUT/$f"; done
[ -f "$OUT/suite.log" ] && grep -vE '^PASS' "$OUT/suite.log" | tail -40
tail -n 8 "$OUT/env.txt"
