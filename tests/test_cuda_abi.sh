#!/bin/sh
# test_cuda_abi.sh -- a stale attnext_cuda.so is refused, never called. The CUDA backend is a
# separate library whose function table (engine/backend.h) must match attnext.so's; it exports
# attnext_cuda_backend_abi() with its NN_BACKEND_ABI and sizeof(nn_backend), checked at load.
# The fake device (tests/fake_device.c) built with a wrong ABI number, a wrong table size and
# without the symbol (a library from before ABI numbers) stands in for stale libraries: each
# must give attn_version() and device "cuda" a message saying why, and no device; the fake
# built right is the control (it is used).
SQLITE3=${SQLITE3:-sqlite3}
ATTNEXT=${ATTNEXT:-./attnext}
BUILD=${BUILD:-build}
command -v ${SQLITE3%% *} >/dev/null 2>&1 || { echo "${SQLITE3%% *} not found"; exit 77; }
[ -f "$ATTNEXT.so" ] || { echo "$ATTNEXT.so not built (run make)"; exit 77; }
for f in fake_device fake_device_stale_abi fake_device_stale_size fake_device_no_abi; do
  [ -f "$BUILD/tests/$f.so" ] || { echo "FAIL $BUILD/tests/$f.so not built (make test builds it)"; exit 1; }
done
fail=0
train="CREATE TABLE docs AS WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 39)
  SELECT iif(i % 2, 'goal match team', 'chip phone cloud') AS text, iif(i % 2, 'sports', 'tech') AS label FROM n;
SELECT 'trained ' || count(*) FROM attn_train('m', 'SELECT text, label FROM docs',
  '{\"epochs\":1,\"hidden\":4,\"embed_dim\":4,\"fc_hidden\":4,\"device\":\"cuda\",\"progress\":false}');"
check() { # library, expected text in attn_version(), expected text in the training error
  lib=$BUILD/tests/$1.so
  version=$(ATTNEXT_CUDA_LIB=$lib $SQLITE3 :memory: ".load $ATTNEXT" "SELECT attn_version();" 2>&1)
  trained=$(ATTNEXT_CUDA_LIB=$lib $SQLITE3 :memory: ".load $ATTNEXT" "$train" 2>&1)
  echo "$1: attn_version: ${version#*; cuda}"
  echo "$1: device cuda: $trained"
  case $version in *"$2"*) echo "ok $1: attn_version says: $2" ;;
    *) echo "FAIL $1: attn_version lacks: $2"; fail=1 ;; esac
  case $trained in *"$3"*) echo "ok $1: training says: $3" ;;
    *) echo "FAIL $1: training lacks: $3"; fail=1 ;; esac
}
check fake_device "cuda: fake device" "trained 1"
check fake_device_stale_abi "stale $BUILD/tests/fake_device_stale_abi.so refused: backend ABI 999" \
  "device \"cuda\" requested but no CUDA device is available (not available (stale"
check fake_device_stale_size "refused: backend ABI" "rebuild it from the same sources"
check fake_device_no_abi "no attnext_cuda_backend_abi: built before ABI numbers" "(stale"
# none of the stale ones got as far as its entry (which would describe the fake device)
for f in fake_device_stale_abi fake_device_stale_size fake_device_no_abi; do
  v=$(ATTNEXT_CUDA_LIB=$BUILD/tests/$f.so $SQLITE3 :memory: ".load $ATTNEXT" "SELECT attn_version();" 2>&1)
  case $v in *"fake device"*) echo "FAIL $f: its table was used"; fail=1 ;; esac
done
[ $fail = 0 ] && echo "stale CUDA libraries refused with a reason"
exit $fail
