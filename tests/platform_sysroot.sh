#!/bin/sh
# platform_sysroot.sh ARCH DIR -- a root of Debian for ARCH (arm64) with just enough in it for the
# tests of a cross build under qemu (qemu-aarch64 -L DIR: the target's absolute paths are looked
# up in DIR first): the C library and libgcc_s, the sqlite3 shell and its libraries, and
# coreutils' libstdbuf.so, which tests/test_sql.sh's stdbuf preloads into the shell. Unpacked
# into DIR (make PLATFORM=linux-arm64: build/linux-arm64/sysroot). The packages are
# downloaded with apt-get download and unpacked with dpkg-deb -x, never installed: installing
# sqlite3:arm64 would remove the machine's own shell. They come from the machine's release, so
# the shell is the SQLite of the x86 tests (Debian 12: 3.40.1), and its output is compared with
# the same .expected files. Done once; redone when the package list below changes. Needs apt to
# list ARCH's packages (sh tests/deps.sh cross adds the architecture); exit 77 when it cannot.
set -u
arch=${1:?usage: platform_sysroot.sh ARCH DIR}
dir=${2:?usage: platform_sysroot.sh ARCH DIR}
pkgs="libc6 libgcc-s1 coreutils sqlite3 libsqlite3-0 libreadline8 libtinfo6 zlib1g"
want="$arch: $pkgs"
[ -x "$dir/usr/bin/sqlite3" ] && [ "$(cat "$dir/.packages" 2>/dev/null)" = "$want" ] && exit 0
command -v apt-get >/dev/null 2>&1 || { echo "no apt-get: cannot fetch the $arch sqlite3 shell"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp" # apt's download user writes there
list=$(for p in $pkgs; do printf '%s:%s ' "$p" "$arch"; done)
if ! (cd "$tmp" && apt-get download -q $list >"$tmp/log" 2>&1); then
  tail -n 3 "$tmp/log"
  echo "cannot download the $arch packages ($list) (sh tests/deps.sh cross lets apt list them)"
  exit 77
fi
rm -rf "$dir"
mkdir -p "$dir"
for deb in "$tmp"/*.deb; do dpkg-deb -x "$deb" "$dir" || exit 1; done
echo "$want" > "$dir/.packages"
echo "platform_sysroot: $arch sqlite3 $(ls "$tmp" | sed -n 's/^sqlite3_\([^_]*\)_.*/\1/p') in $dir"
