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
exit $rc
