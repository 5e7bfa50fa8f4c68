#!/bin/sh
# build.sh VERSION OUTDIR                     -- the npm package attnext-VERSION.tgz
# build.sh VERSION OUTDIR PACKAGE LIB [LIB...] -- the platform package PACKAGE-VERSION.tgz
# (npm pack, offline), as sqlite-vec's packages are made: `attnext` holds index.js (the loader),
# index.d.ts, the README and LICENSE, and lists every platform package of index.js's PLATFORMS as
# an optionalDependency of its own version; a platform package (attnext-linux-x64,
# attnext-linux-arm64, attnext-windows-x64) holds the libraries in lib/, with "os" and "cpu"
# (process.platform and process.arch, from PLATFORMS) so that npm installs it only there. The
# Linux libraries are made self-contained by ../bundle_libs.py (the OpenBLAS attnext.so links
# bundled beside it: renamed, RUNPATH $ORIGIN, licenses in lib/licenses/), which also says what
# platform they are for: it must be the package's.
set -eu
version=$1; out=$2; shift 2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$out"
out=$(cd "$out" && pwd)
# PLATFORMS as JSON, from the loader itself
platforms=$(node -e 'process.stdout.write(JSON.stringify(require(process.argv[1]).PLATFORMS))' "$here/index.js")
if [ $# = 0 ]; then
  optional=$(node -e '
    const p = JSON.parse(process.argv[1]), deps = {};
    for (const k of Object.keys(p).sort((a, b) => p[a].package < p[b].package ? -1 : 1))
      deps[p[k].package] = process.argv[2];
    process.stdout.write(JSON.stringify(deps, null, 2).replace(/\n/g, "\n  "));' "$platforms" "$version")
  sed -e "s/@VERSION@/$version/" "$here/package.json.in" | while IFS= read -r line; do
    case $line in *@OPTIONAL@*) printf '%s\n' "$line" | sed "s/@OPTIONAL@.*//" | tr -d '\n'; printf '%s,\n' "$optional" ;;
      *) printf '%s\n' "$line" ;; esac
  done > "$stage/package.json"
  cp "$here/index.js" "$here/index.d.ts" "$root/README.md" "$root/LICENSE" "$stage/"
  (cd "$stage" && npm pack --silent --pack-destination "$out" >/dev/null)
  echo "$out/attnext-$version.tgz"
  exit 0
fi
package=$1; shift
mkdir -p "$stage/lib"
for lib in "$@"; do cp "$lib" "$stage/lib/"; done
tag=$(/usr/bin/python3 "$here/../bundle_libs.py" "$stage/lib")
case $tag in
  manylinux_*_x86_64) key=linux-x64 ;;
  manylinux_*_aarch64) key=linux-arm64 ;;
  win_amd64) key=win32-x64 ;;
  *) echo "build.sh: no npm platform for the libraries' tag $tag" >&2; exit 1 ;;
esac
(cd "$stage" && node -e '
  const [platforms, key, want, version] = process.argv.slice(1);
  const entry = JSON.parse(platforms)[key];
  if (!entry || entry.package !== want) {
    console.error("build.sh: the libraries are for " + key + ", whose package is " +
      (entry ? entry.package : "none") + ", not " + want);
    process.exit(1);
  }
  const [os, cpu] = key.split("-");
  const json = {
    name: want, version,
    description: "attnext, the SQLite extension, built for " + key + " (lib/" + entry.file +
      "): installed by the attnext package where it fits; require(\"attnext\") loads it",
    license: "MIT",
    files: ["lib/", "README.md", "LICENSE"],
    os: [os], cpu: [cpu],
  };
  require("fs").writeFileSync("package.json", JSON.stringify(json, null, 2) + "\n");
  require("fs").writeFileSync("README.md", "# " + want + "\n\nThe " + key + " build of " +
    "attnext, a SQLite extension that trains and serves an attention-RNN text classifier. " +
    "Install `attnext`, which installs this package where it fits, and load it with " +
    "`require(\"attnext\").load(db)`.\n");' "$platforms" "$key" "$package" "$version")
cp "$root/LICENSE" "$stage/"
(cd "$stage" && npm pack --silent --pack-destination "$out" >/dev/null)
echo "$out/$package-$version.tgz"
