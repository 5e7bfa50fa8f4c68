#!/bin/sh
# build.sh VERSION OUTDIR WEBDIR -- the npm package attnext-wasm-VERSION.tgz (npm pack, offline):
# attnext-web.js and attnext-worker.js from WEBDIR (make PLATFORM=wasm web), index.d.ts, the
# README beside this script and the repository's LICENSE.
set -eu
version=$1; out=$2; web=$3
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$out"
sed "s/@VERSION@/$version/" "$here/package.json.in" > "$stage/package.json"
cp "$here/index.d.ts" "$here/README.md" "$root/LICENSE" "$web/attnext-web.js" "$web/attnext-worker.js" "$stage/"
out=$(cd "$out" && pwd)
(cd "$stage" && npm pack --silent --pack-destination "$out" >/dev/null)
echo "$out/attnext-wasm-$version.tgz"
