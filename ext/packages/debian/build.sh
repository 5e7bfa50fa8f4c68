#!/bin/sh
# build.sh VERSION ARCH OUTDIR LIBDIR LIB [LIB...] -- attnext_VERSION_ARCH.deb (ARCH: Debian's
# name, amd64 or arm64) with dpkg-deb --build: the libraries in LIBDIR (the multiarch directory,
# where dlopen finds `attnext` by bare name), the documents ($DOCS, paths from the repository
# root; default README.md: the Makefile passes them all) in the tree's layout, the license and a
# changelog in /usr/share/doc/attnext/.
# Depends: the Debian package of each library the libraries link (readelf's NEEDED: Debian's
# OpenBLAS, the pthread build, see the Makefile, for the x86-64 build; nothing but glibc for the
# arm64 one, built without BLAS) and libsqlite3; the glibc version is the newest symbol version
# the libraries use. The libraries must be ARCH's (their ELF header says). What lintian asks of
# a library package (tests/test_package_deb.sh runs it): the libraries stripped (as dh_strip
# does; $STRIP for a cross build's, the Makefile sets it), each with a SONAME (its file name: it
# is opened by name with dlopen, never linked against), no RUNPATH (attnext_cuda.so's
# /usr/local/cuda/lib64: cuBLAS is then found where the CUDA packages register it with
# ldconfig), the ldconfig trigger, md5sums, a Debian changelog, a real Maintainer.
# Maintainer: $DEBFULLNAME <$DEBEMAIL> (as dch takes them), else git's user.name and user.email.
set -eu
version=$1; arch=$2; out=$3; libdir=$4; shift 4
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
case $arch in
  amd64) machine=X86-64 ;;
  arm64) machine=AArch64 ;;
  *) echo "build.sh: ARCH $arch: not amd64 or arm64" >&2; exit 1 ;;
esac
for lib in "$@"; do
  readelf -hW "$lib" | grep -q "Machine:.*$machine" ||
    { echo "build.sh: $lib is not an $arch library ($(readelf -hW "$lib" | sed -n 's/^ *Machine: *//p'))" >&2; exit 1; }
done
glibc=$(readelf --dyn-syms -W "$@" | grep -o '@GLIBC_[0-9][0-9.]*' | sed 's/@GLIBC_//' | sort -uV | tail -n 1)
# the Debian package of each library linked; one not listed here stops the build
depends="libc6 (>= ${glibc:-2.17})"
for so in $(readelf -dW "$@" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u); do
  case $so in
    libc.so.6|libm.so.6|libmvec.so.1|libpthread.so.0|libdl.so.2|librt.so.1|ld-linux-*) ;;
    libgcc_s.so.1) depends="$depends, libgcc-s1" ;;
    libstdc++.so.6) depends="$depends, libstdc++6" ;;
    libopenblas.so.0) depends="$depends, libopenblas0-pthread" ;;
    *) echo "build.sh: no Debian package known for $so, which the libraries link" >&2; exit 1 ;;
  esac
done
# what the build is: the description's last paragraph
case $arch in
  amd64) note=" Portable build: runs on any x86-64-v2 CPU, AVX2 and AVX-512 kernels
 chosen at run time; the matrix products by Debian's OpenBLAS.
 attnext_cuda.so, when present, adds the GPU." ;;
  arm64) note=" Built for arm64 (ARMv8-A: Graviton, Ampere, Raspberry Pi 3 and later)
 without BLAS: the matrix products are the engine's own." ;;
esac
for lib in "$@"; do
  dest="$stage$libdir/$(basename "$lib")"
  install -m 0644 "$lib" "$dest"
  ${STRIP:-strip} --remove-section=.comment --remove-section=.note --strip-unneeded "$dest"
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
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@DEPENDS@/$depends/" \
  -e "s|@MAINTAINER@|$maintainer|" "$here/control.in" |
  while IFS= read -r line; do [ "$line" = "@NOTE@" ] && printf '%s\n' "$note" || printf '%s\n' "$line"; done \
  > "$stage/DEBIAN/control"
echo "Installed-Size: $size" >> "$stage/DEBIAN/control"
printf 'activate-noawait ldconfig\n' > "$stage/DEBIAN/triggers"
(cd "$stage" && find usr -type f | LC_ALL=C sort | xargs md5sum) > "$stage/DEBIAN/md5sums"
chmod 0644 "$stage/DEBIAN/control" "$stage/DEBIAN/triggers" "$stage/DEBIAN/md5sums"
deb="$out/attnext_${version}_${arch}.deb"
dpkg-deb --root-owner-group --build "$stage" "$deb" >/dev/null
echo "$deb"
