#!/bin/sh
# node_setup.sh DIR PACKAGE... -- npm install PACKAGE... into the node project DIR (created
# with a package.json when absent) on a machine that reaches the npm registry but not GitHub,
# for native modules such as better-sqlite3 (reusable by any test that needs one):
#  - npm_config_build_from_source=true: better-sqlite3's install script tries prebuild-install
#    first, which downloads a prebuilt binary from GitHub (fails or hangs offline); this makes it
#    go straight to node-gyp, which compiles the module (and its bundled SQLite) here;
#  - npm_config_nodedir=<node's prefix>: node-gyp compiles against the headers of the node that
#    runs it (<prefix>/include/node: NodeSource's nodejs package has them, Debian's are in
#    libnode-dev) instead of downloading them from nodejs.org;
#  - CFLAGS=-O0: better-sqlite3's bundled SQLite (sqlite3.c) without the optimizer, as
#    tests/test_sqlite_versions.sh builds its shells: 30 s for the install on 2 cores, not
#    78 s at its own -O3 (a later -O wins), and the tests' work is attnext's, not SQLite's;
#  - node-gyp needs python3, make and a C++ compiler (build-essential); tests/deps.sh installs
#    all of these (and nodejs/npm when absent).
# Exit 1 with the reason when something is missing; npm's output is in DIR/npm-install.log.
set -u
dir=$1; shift
for tool in node npm python3 make c++; do
  command -v $tool >/dev/null 2>&1 || { echo "node_setup: $tool not found (sh tests/deps.sh installs it)"; exit 1; }
done
prefix=$(node -p 'require("path").resolve(process.execPath, "..", "..")')
if [ ! -f "$prefix/include/node/node_api.h" ]; then
  echo "node_setup: no node headers in $prefix/include/node (Debian: apt-get install libnode-dev)"; exit 1
fi
headers=$(sed -n 's/^#define NODE_MAJOR_VERSION \([0-9]*\).*/\1/p' "$prefix/include/node/node_version.h")
major=$(node -p 'process.versions.node.split(".")[0]')
[ "$headers" = "$major" ] || { echo "node_setup: headers of node $headers in $prefix/include/node, node is $major"; exit 1; }
mkdir -p "$dir"
[ -f "$dir/package.json" ] || echo '{"name":"attnext-node-test","version":"1.0.0","private":true}' > "$dir/package.json"
cd "$dir" || exit 1
CFLAGS=-O0 npm_config_build_from_source=true npm_config_nodedir="$prefix" \
  npm install --no-audit --no-fund --prefer-offline --loglevel=error "$@" > npm-install.log 2>&1
rc=$?
[ $rc = 0 ] || { tail -n 30 npm-install.log; echo "node_setup: npm install $* failed (exit $rc)"; exit 1; }
echo "node_setup: installed $* in $dir (node $(node --version), headers $prefix/include/node)"
