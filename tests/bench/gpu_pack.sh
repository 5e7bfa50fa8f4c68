#!/bin/sh
# gpu_pack.sh -- prepare .gpu/ (in .gitignore) for a run on a GPU machine that has no OpenBLAS,
# no SQLite and no AG News data: the programs built here, the shared libraries they need that
# such an image may lack, and the AG News CSVs of $ATTNEXT_DATA (default data/ag_news). About 45 MB, within what travels with the tree.
#   sh tests/bench/gpu_pack.sh        then run tests/bench/gpu_run.sh there, carrying .gpu
set -e
cd "$(dirname "$0")/../.."
make attnext.so attnext_cuda.so build/tests/test_cuda build/tests/test_golden \
  build/tests/bench/tool_cuda_bench
rm -rf .gpu
mkdir -p .gpu/lib .gpu/bin .gpu/data
cp attnext.so attnext_cuda.so .gpu/
cp build/tests/test_cuda build/tests/test_golden build/tests/bench/tool_cuda_bench .gpu/bin/
for lib in libopenblas.so.0 libgfortran.so.5 libquadmath.so.0 libsqlite3.so.0; do
  path=$(ldd attnext.so "$(command -v sqlite3)" | awk -v l="$lib" '$1 == l { print $3; exit }')
  [ -n "$path" ] && cp -L "$path" .gpu/lib/
done
cp "$(command -v sqlite3)" .gpu/bin/
data=${ATTNEXT_DATA:-data/ag_news}
cp "$data/ag_news_train_10k.csv" "$data/ag_news_test.csv" .gpu/data/
du -sh .gpu
