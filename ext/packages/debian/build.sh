#!/bin/sh
# build.sh VERSION OUTDIR LIBDIR LIB [LIB...] -- attnext_VERSION_amd64.deb with dpkg-deb --build:
# the libraries in LIBDIR (the multiarch directory, where dlopen finds `attnext` by bare name),
# README.md and the license in /usr/share/doc/attnext/. Depends: Debian's OpenBLAS (the pthread
# build, see the Makefile) and libsqlite3; the glibc version is the newest symbol version the
# libraries use.
set -eu
version=$1; out=$2; libdir=$3; shift 3
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
chmod 0755 "$stage"
mkdir -p "$stage/DEBIAN" "$stage$libdir" "$stage/usr/share/doc/attnext" "$out"
glibc=$(objdump -T "$@" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)
for lib in "$@"; do install -m 0644 "$lib" "$stage$libdir/$(basename "$lib")"; done
install -m 0644 "$root/README.md" "$stage/usr/share/doc/attnext/README.md"
{ printf 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n'
  printf 'Upstream-Name: attnext\n\nFiles: *\nCopyright: 2026 the attnext authors\nLicense: MIT\n'
  sed 's/^$/./; s/^/ /' "$root/LICENSE"; } > "$stage/usr/share/doc/attnext/copyright"
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@GLIBC@/$glibc/" "$here/control.in" > "$stage/DEBIAN/control"
echo "Installed-Size: $size" >> "$stage/DEBIAN/control"
deb="$out/attnext_${version}_amd64.deb"
dpkg-deb --root-owner-group --build "$stage" "$deb" >/dev/null
echo "$deb"
