#!/bin/sh
# test_package_wasm.sh -- the browser build's npm package (make npm-wasm:
# build/dist/attnext-wasm-<version>.tgz, which make test builds): npm pack put in it
# package.json (name attnext-wasm, attnext's version, main attnext-web.js), attnext-web.js and
# attnext-worker.js byte for byte as make PLATFORM=wasm web built them (each with the .wasm
# inside: SINGLE_FILE), index.d.ts, README.md and LICENSE, and nothing else. What the scripts
# do in a browser is tests/test_browser.py's part.
BUILD=${BUILD:-build}
ATTNEXT=${ATTNEXT:-./attnext}
[ "$ATTNEXT" = ./attnext ] || { echo "packages carry the default build (ATTNEXT=$ATTNEXT)"; exit 77; }
version=$(sed -n 's/^#define NN_VERSION "\(.*\)"/\1/p' engine/version.c)
tgz=$BUILD/dist/attnext-wasm-$version.tgz
[ -f "$tgz" ] || { echo "FAIL no $tgz (make npm-wasm; make test builds it)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
want="package/LICENSE
package/README.md
package/attnext-web.js
package/attnext-worker.js
package/index.d.ts
package/package.json"
got=$(tar tzf "$tgz" | sort)
if [ "$got" = "$want" ]; then echo "ok: $tgz holds $(echo "$got" | wc -l) files:" $got
else echo "FAIL $tgz holds:"; echo "$got"; echo "FAIL wanted:"; echo "$want"; fail=1; fi
tar xzf "$tgz" -C "$tmp" || exit 1
for f in attnext-web.js attnext-worker.js; do
  if cmp -s "$tmp/package/$f" "$BUILD/wasm/web/$f"; then
    echo "ok: $f is the build's ($(wc -c < "$tmp/package/$f") bytes)"
  else echo "FAIL $f differs from $BUILD/wasm/web/$f (make npm-wasm again)"; fail=1; fi
  grep -q 'data:application/octet-stream;base64,' "$tmp/package/$f" &&
    echo "ok: $f carries its .wasm" || { echo "FAIL $f has no .wasm inside"; fail=1; }
done
grep -q 'createAttnext' "$tmp/package/attnext-web.js" || { echo "FAIL no createAttnext"; fail=1; }
node -e '
const p = require(process.argv[1]);
const want = {name: "attnext-wasm", version: process.argv[2], main: "attnext-web.js"};
for (const k in want) if (p[k] !== want[k]) { console.log(`FAIL package.json ${k}: ${p[k]}, not ${want[k]}`); process.exit(1); }
console.log(`ok: package.json: ${p.name} ${p.version}, main ${p.main}`);
' "$tmp/package/package.json" "$version" || fail=1
[ $fail -eq 0 ] && echo "PASS"
exit $fail
