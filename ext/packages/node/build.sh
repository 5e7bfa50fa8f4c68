#!/bin/sh
# build.sh VERSION OUTDIR LIB [LIB...] -- the npm package tarball attnext-VERSION.tgz (npm pack,
# offline): index.js, index.d.ts, the README and LICENSE, the libraries in lib/ with the OpenBLAS
# attnext.so links bundled beside it (../bundle_libs.py: renamed, RUNPATH $ORIGIN, licenses in
# lib/licenses/).
set -eu
version=$1; out=$2; shift 2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/lib" "$out"
sed "s/@VERSION@/$version/" "$here/package.json.in" > "$stage/package.json"
cp "$here/index.js" "$here/index.d.ts" "$root/README.md" "$root/LICENSE" "$stage/"
for lib in "$@"; do cp "$lib" "$stage/lib/"; done
/usr/bin/python3 "$here/../bundle_libs.py" "$stage/lib" >/dev/null
out=$(cd "$out" && pwd)
(cd "$stage" && npm pack --silent --pack-destination "$out" >/dev/null)
echo "$out/attnext-$version.tgz"
