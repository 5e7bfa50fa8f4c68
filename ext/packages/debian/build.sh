#!/bin/sh
# build.sh VERSION OUTDIR LIBDIR LIB [LIB...] -- attnext_VERSION_amd64.deb with dpkg-deb --build:
# the libraries in LIBDIR (the multiarch directory, where dlopen finds `attnext` by bare name),
# the documents ($DOCS, paths from the repository root; default README.md: the Makefile passes
# them all) in the tree's layout, the license and a changelog in /usr/share/doc/attnext/.
# Depends: Debian's OpenBLAS (the pthread build, see the Makefile) and libsqlite3; the glibc
# version is the newest symbol version the libraries use. What lintian asks of a library package (tests/test_package_deb.sh
# runs it): the libraries stripped (as dh_strip does), each with a SONAME (its file name: it is
# opened by name with dlopen, never linked against), no RUNPATH (attnext_cuda.so's
# /usr/local/cuda/lib64: cuBLAS is then found where the CUDA packages register it with
# ldconfig), the ldconfig trigger, md5sums, a Debian changelog, a real Maintainer.
# Maintainer: $DEBFULLNAME <$DEBEMAIL> (as dch takes them), else git's user.name and user.email.
set -eu
version=$1; out=$2; libdir=$3; shift 3
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
chmod 0755 "$stage"
command -v patchelf >/dev/null 2>&1 || { echo "build.sh: patchelf not found (apt-get install patchelf)" >&2; exit 1; }
name=${DEBFULLNAME:-$(git -C "$root" config user.name 2>/dev/null || true)}
email=${DEBEMAIL:-$(git -C "$root" config user.email 2>/dev/null || true)}
[ -n "$name" ] && [ -n "$email" ] || {
  echo "build.sh: no maintainer: set DEBFULLNAME and DEBEMAIL (or git's user.name and user.email)" >&2; exit 1; }
maintainer="$name <$email>"
# the date of the sources (the last commit), not of the build: the same sources, the same package
date=$(git -C "$root" log -1 --format=%cD 2>/dev/null || date -R)
doc="$stage/usr/share/doc/attnext"
mkdir -p "$stage/DEBIAN" "$stage$libdir" "$doc" "$out"
glibc=$(objdump -T "$@" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)
for lib in "$@"; do
  dest="$stage$libdir/$(basename "$lib")"
  install -m 0644 "$lib" "$dest"
  strip --remove-section=.comment --remove-section=.note --strip-unneeded "$dest"
  patchelf --set-soname "$(basename "$lib")" "$dest"
  patchelf --remove-rpath "$dest"
done
for f in ${DOCS:-README.md}; do # ext/REFERENCE.md -> /usr/share/doc/attnext/ext/REFERENCE.md
  install -D -m 0644 "$root/$f" "$doc/$f"
done
{ printf 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n'
  printf 'Upstream-Name: attnext\n\nFiles: *\nCopyright: 2026 the attnext authors\nLicense: MIT\n'
  sed 's/^$/./; s/^/ /' "$root/LICENSE"; } > "$doc/copyright"
chmod 0644 "$doc/copyright"
printf 'attnext (%s) unstable; urgency=medium\n\n  * Built from the attnext sources (make deb).\n\n -- %s  %s\n' \
  "$version" "$maintainer" "$date" | gzip -9n > "$doc/changelog.gz"
chmod 0644 "$doc/changelog.gz"
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@GLIBC@/$glibc/" -e "s|@MAINTAINER@|$maintainer|" \
  "$here/control.in" > "$stage/DEBIAN/control"
echo "Installed-Size: $size" >> "$stage/DEBIAN/control"
printf 'activate-noawait ldconfig\n' > "$stage/DEBIAN/triggers"
(cd "$stage" && find usr -type f | LC_ALL=C sort | xargs md5sum) > "$stage/DEBIAN/md5sums"
chmod 0644 "$stage/DEBIAN/control" "$stage/DEBIAN/triggers" "$stage/DEBIAN/md5sums"
deb="$out/attnext_${version}_amd64.deb"
dpkg-deb --root-owner-group --build "$stage" "$deb" >/dev/null
echo "$deb"
