// attnext for Node: the path of the SQLite extension built for this machine, and a loader for
// better-sqlite3, node:sqlite (Node 22.13+) or any database object with loadExtension(path).
//
//   const Database = require("better-sqlite3");
//   const attnext = require("attnext");
//   const db = new Database("news.db");
//   attnext.load(db);
//   db.prepare("SELECT attn_version() AS v").get().v;
//
//   const { DatabaseSync } = require("node:sqlite");
//   const db2 = new DatabaseSync("news.db", { allowExtension: true });
//   attnext.load(db2);
//
// This package carries no extension: as sqlite-vec does it, each platform's build is a package
// of its own (attnext-linux-x64, attnext-linux-arm64, attnext-windows-x64, with "os" and "cpu"
// in their package.json), all listed here as optionalDependencies, so that npm installs the one
// that fits the machine and skips the others. The loader picks it by process.platform and
// process.arch (PLATFORMS; ext/packages/node/build.sh writes the optionalDependencies and the
// platform packages from it). The Linux x64 build carries the OpenBLAS it links, renamed,
// beside it in lib/ (found through its RUNPATH $ORIGIN): the machine needs none. Training blocks
// the thread that runs it: run attn_train in a worker_thread (its own connection) so the event
// loop keeps running.
"use strict";
const fs = require("fs");
const path = require("path");

// process.platform-process.arch -> the package that holds the extension built for it, and the
// extension's file there (lib/)
const PLATFORMS = {
  "linux-x64": { package: "attnext-linux-x64", file: "attnext.so" },
  "linux-arm64": { package: "attnext-linux-arm64", file: "attnext.so" },
  "win32-x64": { package: "attnext-windows-x64", file: "attnext.dll" },
};

// The extension's path without its suffix (SQLite adds ".so" or ".dll").
function getLoadablePath() {
  const key = process.platform + "-" + process.arch;
  const entry = PLATFORMS[key];
  if (!entry)
    throw new Error("attnext: no build for this platform, " + key + " (process.platform " +
      process.platform + ", process.arch " + process.arch + "); there are builds for " +
      Object.keys(PLATFORMS).join(", "));
  let dir;
  try {
    dir = path.dirname(require.resolve(entry.package + "/package.json"));
  } catch (e) {
    throw new Error("attnext: the package " + entry.package + ", the extension for " + key +
      ", is not installed: npm installs it with attnext, as an optional dependency, unless " +
      "optional dependencies were left out (--omit=optional) or node_modules was installed " +
      "on another platform; npm install " + entry.package);
  }
  const file = path.join(dir, "lib", entry.file);
  if (!fs.existsSync(file))
    throw new Error("attnext: " + entry.package + " has no lib/" + entry.file + " (" + file + ")");
  return path.join(dir, "lib", "attnext");
}

function describe(db) {
  if (db === null || db === undefined) return String(db);
  return (db.constructor && db.constructor.name) || typeof db;
}

function load(db) {
  if (!db || typeof db.loadExtension !== "function")
    throw new TypeError("attnext.load: expected a database with loadExtension(path) " +
      "(better-sqlite3's Database, node:sqlite's DatabaseSync), got " + describe(db));
  // node-sqlite3's loadExtension(path, callback) is asynchronous: its errors would only reach
  // the database's "error" event; it is called with a callback there (ext/CLIENTS.md, Node).
  if (typeof db.interrupt === "function" && typeof db.serialize === "function")
    throw new TypeError("attnext.load: node-sqlite3's Database loads asynchronously: call " +
      "db.loadExtension(attnext.getLoadablePath(), callback)");
  const loadable = getLoadablePath();
  try {
    db.loadExtension(loadable);
  } catch (e) {
    if (e && e.code === "ERR_INVALID_STATE" && describe(db) === "DatabaseSync")
      throw new Error("attnext.load: node:sqlite refuses extensions unless the database is " +
        "opened with new DatabaseSync(path, { allowExtension: true }) (" + e.message + ")");
    throw e;
  }
}

module.exports = { getLoadablePath, load, PLATFORMS };
