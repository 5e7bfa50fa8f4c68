// attnext for Node: the path of the SQLite extension this package carries, and a loader for
// better-sqlite3 (or any database object with loadExtension(path)).
//
//   const Database = require("better-sqlite3");
//   const attnext = require("attnext");
//   const db = new Database("news.db");
//   attnext.load(db);
//   db.prepare("SELECT attn_version() AS v").get().v;
//
// Training blocks the thread that runs it: run attn_train in a worker_thread (its own
// connection) so the event loop keeps running.
"use strict";
const path = require("path");

// The extension's path without its suffix (SQLite adds ".so").
function getLoadablePath() {
  return path.join(__dirname, "lib", "attnext");
}

function load(db) {
  if (!db || typeof db.loadExtension !== "function")
    throw new TypeError("attnext.load: expected a database with loadExtension(path), e.g. better-sqlite3's");
  db.loadExtension(getLoadablePath());
}

module.exports = { getLoadablePath, load };
