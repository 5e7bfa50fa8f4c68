#!/bin/sh
# deps.sh -- make sure the Debian packages attnext builds and tests with are present.
# As root it installs what is missing with apt-get; otherwise it prints the command to run.
#   sh tests/deps.sh          everything make test, .ci/run and make bench use
#   sh tests/deps.sh build    only what building and `make demo` need
build="build-essential pkg-config libsqlite3-dev sqlite3 libopenblas-dev"
pkgs="$build python3 python3-torch python3-numpy valgrind librsvg2-bin clang libclang-rt-14-dev"
[ "${1:-}" = build ] && pkgs="$build"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# Node.js, npm and node's headers for tests/test_field_node.sh (better-sqlite3 is built from
# source where no prebuilt binary can be downloaded). Checked by command, not by package: a Node
# installed otherwise (e.g. NodeSource's nodejs, which bundles npm and the headers) is kept.
if [ "${1:-}" != build ]; then
  command -v node >/dev/null 2>&1 || missing="$missing nodejs"
  command -v npm >/dev/null 2>&1 || missing="$missing npm"
  [ -f /usr/include/node/node.h ] || missing="$missing libnode-dev"
fi
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "deps: installing$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq $missing >/dev/null || { echo "deps: apt-get failed"; exit 1; }
else
  echo "deps: missing Debian packages:$missing"
  echo "deps: run: sudo apt-get install -y$missing"
  exit 1
fi
