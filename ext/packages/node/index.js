// attnext for Node: the path of the SQLite extension this package carries, and a loader for
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
// The OpenBLAS attnext.so links is bundled beside it in lib/ (renamed, found through its
// RUNPATH $ORIGIN): the machine needs none. Training blocks the thread that runs it: run
// attn_train in a worker_thread (its own connection) so the event loop keeps running.
"use strict";
const path = require("path");

// The extension's path without its suffix (SQLite adds ".so").
function getLoadablePath() {
  return path.join(__dirname, "lib", "attnext");
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
  try {
    db.loadExtension(getLoadablePath());
  } catch (e) {
    if (e && e.code === "ERR_INVALID_STATE" && describe(db) === "DatabaseSync")
      throw new Error("attnext.load: node:sqlite refuses extensions unless the database is " +
        "opened with new DatabaseSync(path, { allowExtension: true }) (" + e.message + ")");
    throw e;
  }
}

module.exports = { getLoadablePath, load };
