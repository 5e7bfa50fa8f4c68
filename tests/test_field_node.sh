#!/bin/sh
# test_field_node.sh -- attnext from Node.js with better-sqlite3 (tests/test_field_node.js):
# .run()/.get() on attn_train save the whole training, attn_fit, bind parameters, a worker_thread.
# better-sqlite3 is installed with npm into build/node (once, by tests/node_setup.sh: compiled
# from source, with node's own headers). tests/deps.sh
# installs node, npm and the headers; a missing tool or a failed install is a failure, not a skip.
BUILD=${BUILD:-build}
ATTNEXT=${ATTNEXT:-./attnext}
[ -f "$ATTNEXT.so" ] || { echo "$ATTNEXT.so not built (run make)"; exit 77; }
command -v node >/dev/null 2>&1 || { echo "FAIL: node not found (tests/deps.sh installs it)"; exit 1; }
command -v npm >/dev/null 2>&1 || { echo "FAIL: npm not found (tests/deps.sh installs it)"; exit 1; }
# One install for every build (make test and make test-asan share it; test_package_npm.sh copies
# it): the repository's build/node, whatever $BUILD is.
dir=$(cd "$(dirname "$0")/.." && pwd)/build/node
# better-sqlite3 12 needs Node 20 or later; 11 builds on Debian 12's Node 18.
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -ge 20 ]; then want=better-sqlite3@12; else want=better-sqlite3@11; fi
if ! (cd "$dir" 2>/dev/null && node -e 'require("better-sqlite3")' 2>/dev/null); then
  echo "installing $want into $dir"
  sh "$(dirname "$0")/node_setup.sh" "$dir" "$want" || { echo "FAIL: npm install $want failed"; exit 1; }
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
