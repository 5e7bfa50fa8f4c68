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
#
# platform_sysroot.sh windows-x64 DIR -- DIR/sqlite3.exe, built with mingw-w64 from the
# amalgamation and shell.c of SQLite 3.52.0 (the npm package sqlite3@6.0.1's sqlite-autoconf,
# pinned by its SHA-256 as tests/test_sqlite_versions.sh pins it: Debian has no Windows SQLite),
# for the SQL tests of make PLATFORM=windows-x64 under wine (its prefix: DIR/wine).
#
# platform_sysroot.sh wasm DIR -- the same amalgamation's sqlite3.c, shell.c, sqlite3.h and
# sqlite3ext.h in DIR/sqlite, from which make PLATFORM=wasm builds its shell with attnext linked
# in (emcc: the Makefile compiles them, since the shell holds the extension's objects).
set -u
arch=${1:?usage: platform_sysroot.sh ARCH DIR}
dir=${2:?usage: platform_sysroot.sh ARCH DIR}
pkg=sqlite3@6.0.1 sha=ab8d044a93e05bd031d7ea75547c7fa60387cdc259d27f93c0e3e2832c4b1df9
# amalgamation: the sqlite-autoconf tree of $pkg unpacked in $tmp; its path in $src
amalgamation() {
  command -v npm >/dev/null 2>&1 || { echo "no npm to fetch $pkg (sh tests/deps.sh)"; exit 77; }
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack "$pkg" --prefer-offline >/dev/null 2>&1) || { echo "cannot fetch $pkg (offline?)"; exit 77; }
  got=$(sha256sum "$tmp"/*.tgz | cut -d' ' -f1)
  [ "$got" = "$sha" ] || { echo "FAIL: $pkg's tarball has SHA-256 $got, not $sha"; exit 1; }
  tar xzf "$tmp"/*.tgz -C "$tmp" && tar xzf "$tmp"/package/deps/sqlite-autoconf-*.tar.gz -C "$tmp" || exit 1
  src=$(echo "$tmp"/sqlite-autoconf-*)
}
if [ "$arch" = wasm ]; then
  want="$pkg $sha"
  [ -f "$dir/sqlite/sqlite3.c" ] && [ "$(cat "$dir/.sqlite3" 2>/dev/null)" = "$want" ] && exit 0
  amalgamation
  mkdir -p "$dir/sqlite"
  for f in sqlite3.c shell.c sqlite3.h sqlite3ext.h; do cp "$src/$f" "$dir/sqlite/" || exit 1; done
  echo "$want" > "$dir/.sqlite3"
  echo "platform_sysroot: $dir/sqlite (SQLite 3.52.0's amalgamation)"
  exit 0
fi
if [ "$arch" = windows-x64 ]; then
  cc=x86_64-w64-mingw32-gcc-posix
  # -O0: a third of -O1's compile time, and the SQL scripts take as long with either
  flags="-O0 -w -municode -DSQLITE_ENABLE_MATH_FUNCTIONS -DSQLITE_ENABLE_COLUMN_METADATA -static"
  want="$pkg $sha $cc $flags"
  [ -f "$dir/sqlite3.exe" ] && [ "$(cat "$dir/.sqlite3" 2>/dev/null)" = "$want" ] && exit 0
  command -v $cc >/dev/null 2>&1 || { echo "no $cc (sh tests/deps.sh cross)"; exit 77; }
  amalgamation
  mkdir -p "$dir"
  $cc $flags "$src/shell.c" "$src/sqlite3.c" -I"$src" -o "$dir/sqlite3.exe" || exit 1
  # DIR/sqlite3: the shell under wine as the tests run a shell, its output in one stream (as
  # the tests take it) with Windows' CRLF line ends made LF, its exit status kept
  abs=$(cd "$dir" && pwd)
  cat > "$dir/sqlite3" <<WRAP
#!/bin/sh
# sqlite3.exe under wine (tests/platform_sysroot.sh wrote this)
st=\$(mktemp)
{ WINEPREFIX="$abs/wine" WINEDEBUG=-all wine "$abs/sqlite3.exe" "\$@" 2>&1; echo \$? > "\$st"; } | tr -d '\\r'
rc=\$(cat "\$st"); rm -f "\$st"; exit "\$rc"
WRAP
  chmod +x "$dir/sqlite3"
  echo "$want" > "$dir/.sqlite3"
  echo "platform_sysroot: $dir/sqlite3.exe (SQLite 3.52.0, mingw-w64)"
  exit 0
fi
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
