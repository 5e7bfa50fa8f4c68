#!/bin/sh
# test_cuda_emulated.sh -- the CUDA backend's own source (engine/backend_cuda.cu) with its kernels
# run on the host: build/tests/emu_cuda.so is that file compiled by the C++ compiler with
# tests/cuda_emulate.h (each kernel called once per grid thread, cuBLAS = OpenBLAS column-major),
# loaded as the CUDA library, and build/tests/test_cuda runs its GPU checks against it: golden
# fixtures (rtol 1e-3), CPU vs "CUDA" on random batches, training (+ determinism), out of memory.
# It tests the kernels' indexing and arithmetic, the row-major GEMM trick and the layouts the
# kernels read, on any machine; not what only a GPU shows (races, launch limits, speed).
BUILD=${BUILD:-build}
lib=$BUILD/tests/emu_cuda.so
[ -f "$lib" ] || { echo "$lib not built (make $lib: needs a C++ compiler)"; exit 77; }
[ -x "$BUILD/tests/test_cuda" ] || { echo "$BUILD/tests/test_cuda not built"; exit 77; }
ATTNEXT_CUDA_LIB=$lib "$BUILD/tests/test_cuda"
rc=$?
[ $rc -eq 77 ] && { echo "test_cuda skipped with the emulated device: $lib did not load"; exit 1; }
[ $rc -eq 0 ] || exit $rc

# attn_classify on a GPU short of memory for its 4096-row passes (ext/attn_infer.c): the emulated
# device refuses allocations over 16 MB (ATTNEXT_EMU_CUDA_MAX_ALLOC), which the 4096-row
# workspace of these 56-token texts needs (over 32 MB) and the 256-row one does not (under 8
# MB): every row classified, in 256-row passes, with the CPU's labels.
SQLITE3=${SQLITE3:-sqlite3}
EXT=${ATTNEXT:-./attnext}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
db=$dir/oom.db
ATTNEXT_CUDA_LIB=$lib $SQLITE3 "$db" ".load $EXT" \
  "CREATE TABLE docs AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000)
   SELECT i AS id, replace(hex(zeroblob(28)), '00', 'w' || (i % 37) || ' x' || (i % 11) || ' ') AS text,
          'c' || (i % 4) AS label FROM n;" \
  "SELECT json_extract(attn_fit('m', 'SELECT text, label FROM docs WHERE id <= 300', '{\"recipe\":\"lesson\",\"hidden\":32,\"embed_dim\":32,\"fc_hidden\":16,\"epochs\":1,\"progress\":false}'), '$.epochs');" \
  > "$dir/fit.out" 2>&1 || { cat "$dir/fit.out"; exit 1; }
ATTNEXT_EMU_CUDA_MAX_ALLOC=16000000 ATTNEXT_CUDA_LIB=$lib $SQLITE3 "$db" ".load $EXT" \
  "CREATE TABLE gpu AS SELECT * FROM attn_classify('m', 'SELECT id, text FROM docs');" \
  > "$dir/gpu.out" 2>&1
ATTNEXT_CUDA_LIB=/nonexistent/attnext_cuda.so $SQLITE3 "$db" ".load $EXT" \
  "CREATE TABLE cpu AS SELECT * FROM attn_classify('m', 'SELECT id, text FROM docs');" \
  "SELECT count(*), sum(gpu.label = cpu.label) FROM gpu JOIN cpu USING (id);" > "$dir/cpu.out" 2>&1
got=$(tail -n 1 "$dir/cpu.out")
if [ -s "$dir/gpu.out" ] || [ "${got%%|*}" != 5000 ] || [ "${got#*|}" -lt 4995 ]; then
  echo "FAIL attn_classify on a device short of memory: $(cat "$dir/gpu.out") rows | same labels: $got"
  exit 1
fi
echo "ok   attn_classify on a device short of memory for 4096-row passes: 5000 rows in 256-row passes, $got (rows | labels as the CPU's)"
