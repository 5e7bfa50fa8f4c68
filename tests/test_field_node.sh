#!/bin/sh
# test_field_node.sh -- attnext from Node.js with better-sqlite3 (tests/test_field_node.js):
# .run()/.get() on attn_train save the whole training, attn_fit, bind parameters, a worker_thread.
# better-sqlite3 is installed with npm into $BUILD/node (once; compiled from source when no
# prebuilt binary can be downloaded, with node's headers from /usr/include/node). tests/deps.sh
# installs node, npm and the headers; a missing tool or a failed install is a failure, not a skip.
BUILD=${BUILD:-build}
ATTNEXT=${ATTNEXT:-./attnext}
[ -f "$ATTNEXT.so" ] || { echo "$ATTNEXT.so not built (run make)"; exit 77; }
command -v node >/dev/null 2>&1 || { echo "FAIL: node not found (tests/deps.sh installs it)"; exit 1; }
command -v npm >/dev/null 2>&1 || { echo "FAIL: npm not found (tests/deps.sh installs it)"; exit 1; }
dir=$(cd "$(dirname "$0")/.." && pwd)/$BUILD/node
# better-sqlite3 12 needs Node 20 or later; 11 builds on Debian 12's Node 18.
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -ge 20 ]; then want=better-sqlite3@12; else want=better-sqlite3@11; fi
if ! (cd "$dir" 2>/dev/null && node -e 'require("better-sqlite3")' 2>/dev/null); then
  mkdir -p "$dir"
  [ -f /usr/include/node/node.h ] && export npm_config_nodedir=/usr
  echo "installing $want into $dir"
  (cd "$dir" && npm install --no-save --no-audit --no-fund "$want" >npm.log 2>&1) || {
    echo "FAIL: npm install $want failed:"; tail -n 30 "$dir/npm.log"; exit 1; }
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ext=$(cd "$(dirname "$ATTNEXT")" && pwd)/$(basename "$ATTNEXT")
# make test-asan: the extension is built with ASan, whose runtime must be loaded first.
if [ -n "${ATTNEXT_PRELOAD:-}" ]; then
  export LD_PRELOAD="$ATTNEXT_PRELOAD${LD_PRELOAD:+:$LD_PRELOAD}"
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi
NODE_PATH="$dir/node_modules" node "$(dirname "$0")/test_field_node.js" "$ext" "$tmp"
