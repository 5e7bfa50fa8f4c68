#!/bin/sh
# gpu_pack.sh -- prepare .gpu/ (in .gitignore) for a run on a GPU machine that has no OpenBLAS,
# no SQLite and no AG News data: the programs built here, the shared libraries they need that
# such an image may lack, the AG News CSVs of $ATTNEXT_DATA (default data/ag_news), and the test
# programs (stripped) with the libraries they load, in .gpu/build/tests, for gpu_run.sh's suite
# step. About 25 MB (OpenBLAS travels compressed), within the 64 MiB that travel with the tree.
#   sh tests/bench/gpu_pack.sh        then run tests/bench/gpu_run.sh there, carrying .gpu
set -e
cd "$(dirname "$0")/../.."
make attnext.so attnext_cuda.so build/tests/test_cuda build/tests/test_golden \
  build/tests/bench/tool_cuda_bench
# every test program, and the libraries the tests load (make test builds the same)
make $(ls tests/test_*.c | sed 's#^tests/\(.*\)\.c$#build/tests/\1#') build/tests/fake_device.so \
  build/tests/fake_device_stale_abi.so build/tests/fake_device_stale_size.so \
  build/tests/fake_device_no_abi.so build/tests/attnext_jobs_test.so
rm -rf .gpu
mkdir -p .gpu/lib .gpu/bin .gpu/data .gpu/build/tests
cp attnext.so attnext_cuda.so .gpu/
cp build/tests/test_cuda build/tests/test_golden build/tests/bench/tool_cuda_bench .gpu/bin/
for lib in libopenblas.so.0 libgfortran.so.5 libquadmath.so.0 libsqlite3.so.0; do
  path=$(ldd attnext.so "$(command -v sqlite3)" | awk -v l="$lib" '$1 == l { print $3; exit }')
  [ -n "$path" ] && cp -L "$path" .gpu/lib/
done
cp "$(command -v sqlite3)" .gpu/bin/
make $(ls tests/tool_*.c tests/bench/tool_*.c | sed 's#^\(.*\)\.c$#build/\1#')
mkdir -p .gpu/build/tests/bench
for t in build/tests/test_* build/tests/tool_* build/tests/*.so build/tests/bench/tool_*; do
  case $t in *.d) continue ;; esac
  cp "$t" ".gpu/$t"
done
strip .gpu/build/tests/test_* .gpu/build/tests/tool_* .gpu/build/tests/bench/tool_* \
  .gpu/bin/test_* .gpu/bin/tool_cuda_bench
xz -T0 .gpu/lib/libopenblas.so.0  # gpu_run.sh unpacks it
data=${ATTNEXT_DATA:-data/ag_news}
cp "$data/ag_news_train_10k.csv" "$data/ag_news_test.csv" .gpu/data/
du -sh .gpu
