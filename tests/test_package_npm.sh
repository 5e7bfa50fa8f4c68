#!/bin/sh
# test_package_npm.sh -- the npm package (make npm: build/dist/attnext-<version>.tgz) in a fresh
# node project with better-sqlite3 (npm install better-sqlite3 ./attnext-*.tgz through
# tests/node_setup.sh: better-sqlite3 compiled here, no GitHub download): getLoadablePath()
# names the carried library, load(db) loads it, a round trip trains and predicts, and a
# worker_thread trains on its own connection while the main thread's event loop keeps running.
BUILD=${BUILD:-build}
ATTNEXT=${ATTNEXT:-./attnext}
[ "$ATTNEXT" = ./attnext ] || { echo "packages carry the default build (ATTNEXT=$ATTNEXT)"; exit 77; }
tgz=$(ls "$BUILD"/dist/attnext-*.tgz 2>/dev/null | tail -n 1)
[ -f "$tgz" ] || { echo "FAIL no $BUILD/dist/attnext-*.tgz (make npm; make test builds it)"; exit 1; }
tgz=$(cd "$(dirname "$tgz")" && pwd)/$(basename "$tgz")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# better-sqlite3 takes a minute to compile: start from the project test_field_node.sh installed
# (build/node, same npm and node) when there is one, so only the package itself is installed here.
mkdir -p "$tmp/project"
if [ -f build/node/package.json ] && (cd build/node && node -e 'require("better-sqlite3")') 2>/dev/null; then
  cp -R build/node/package.json build/node/package-lock.json build/node/node_modules "$tmp/project/" 2>/dev/null
  sh tests/node_setup.sh "$tmp/project" "$tgz" || { echo "FAIL npm install"; exit 1; }
else
  sh tests/node_setup.sh "$tmp/project" better-sqlite3 "$tgz" || { echo "FAIL npm install"; exit 1; }
fi
(cd "$tmp/project" && node -e 'require("better-sqlite3")') || { echo "FAIL better-sqlite3 missing"; exit 1; }
cp tests/package_roundtrip.sql "$tmp/project/"
cd "$tmp/project" && node - <<'JS'
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
if (!lib.startsWith(path.resolve("node_modules", "attnext"))) fail("not in node_modules/attnext");
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
