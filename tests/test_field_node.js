// test_field_node.js -- attnext from Node with better-sqlite3, run by
// tests/test_field_node.sh: node tests/test_field_node.js EXTENSION DIR
//  - .run() and .get() on attn_train (they step one row, then reset the statement): every epoch
//    is trained and the model saved, in memory and in a WAL file;
//  - attn_fit with .get(): the JSON summary;
//  - a query with a bind parameter: the error names the function;
//  - attn_fit in a worker_thread while the main thread's timer keeps firing.
'use strict';
const path = require('path');
const { Worker, isMainThread, parentPort, workerData } = require('worker_threads');
const Database = require('better-sqlite3');

const EPOCHS = 5;
const OPTS = JSON.stringify({ epochs: EPOCHS, hidden: 4, embed_dim: 4, fc_hidden: 4,
                              vocab_size: 50, patience: 100, progress: false });
const WORDS = { sports: 'match goal team coach season', tech: 'software chip phone cloud data',
                money: 'bank stocks market profit shares' };

function makeTable(db, n) {
  db.exec('CREATE TABLE IF NOT EXISTS docs(id INTEGER PRIMARY KEY, text, label)');
  const ins = db.prepare('INSERT INTO docs(text, label) VALUES (?, ?)');
  const labels = Object.keys(WORDS);
  for (let i = 0; i < n; i++) {
    const c = labels[i % 3], w = WORDS[c].split(' ');
    ins.run(`${w[i % 5]} ${w[(i * 7) % 5]} the ${w[(i * 3) % 5]} today`, c);
  }
}

if (!isMainThread) {
  const db = new Database(workerData.file, { timeout: 10000 });
  db.loadExtension(workerData.ext);
  const opts = JSON.stringify({ epochs: 30, hidden: 32, patience: 100, progress: false });
  const out = db.prepare("SELECT attn_fit('worker', 'SELECT text, label FROM docs', ?) AS s").get(opts);
  db.close();
  parentPort.postMessage(out.s);
  return;
}

const [ext, dir] = process.argv.slice(2);
let failures = 0;
function check(cond, what) {
  console.log((cond ? 'ok   ' : 'FAIL ') + what);
  if (!cond) failures++;
}
function versions(db, name) {
  return db.prepare('SELECT version, (SELECT count(*) FROM attn_training_log l WHERE ' +
                    'l.name = m.name AND l.version = m.version) AS log FROM attn_models m ' +
                    'WHERE name = ?').all(name).map(r => [r.version, r.log]);
}

for (const kind of ['memory', 'wal']) {
  const file = kind === 'memory' ? ':memory:' : path.join(dir, 'node-wal.db');
  const db = new Database(file);
  if (kind === 'wal') db.pragma('journal_mode = WAL');
  db.loadExtension(ext);
  makeTable(db, 90);
  const train = db.prepare('SELECT * FROM attn_train(?, ?, ?)');
  let info = null, err = null;
  try { info = train.run('run', 'SELECT text, label FROM docs', OPTS); } catch (e) { err = e.message; }
  check(err === null && JSON.stringify(versions(db, 'run')) === JSON.stringify([[1, EPOCHS]]),
        `${kind}: .run() on attn_train trains ${EPOCHS} epochs and saves: ` +
        `${JSON.stringify(versions(db, 'run'))} (${err})`);
  const row = train.get('get', 'SELECT text, label FROM docs', OPTS);
  check(row.epoch === 1 && JSON.stringify(versions(db, 'get')) === JSON.stringify([[1, EPOCHS]]),
        `${kind}: .get() returns epoch 1 and the model is saved with every epoch: ` +
        `${JSON.stringify(versions(db, 'get'))}`);
  const fit = db.prepare("SELECT attn_fit('fit', 'SELECT text, label FROM docs', ?) AS s").get(OPTS);
  const summary = JSON.parse(fit.s);
  check(summary.name === 'fit' && summary.version === 1 && summary.epochs === EPOCHS,
        `${kind}: attn_fit with .get(): ${fit.s}`);
  try {
    db.prepare("SELECT * FROM attn_classify('fit', 'SELECT id, text FROM docs WHERE text = ?')").all();
    err = null;
  } catch (e) { err = e.message; }
  check(err !== null && err.startsWith('attn_classify: the query has parameters'),
        `${kind}: a parameter in attn_classify's query: '${err}'`);
  db.close();
}

// The engine's out of memory keeps its message (the function, what ran out): a batch whose
// activations take one block past 2^31 bytes, which sqlite3_malloc64 never gives (better-sqlite3's
// own SQLite does not enforce PRAGMA hard_heap_limit, so that way out is not reachable here).
{
  const db = new Database(':memory:');
  db.loadExtension(ext);
  db.exec(`CREATE TABLE long(text, label);
    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 64)
    INSERT INTO long SELECT (SELECT group_concat('w' || ((i * 7 + j) % 50), ' ') FROM
      (WITH RECURSIVE k(j) AS (SELECT 1 UNION ALL SELECT j + 1 FROM k WHERE j < 4096)
       SELECT j FROM k)), 'l' || (i % 2) FROM n;`);
  const big = JSON.stringify({ epochs: 1, hidden: 1024, embed_dim: 8, fc_hidden: 0,
                               subword_buckets: 0, max_len: 4096, batch_size: 64,
                               stopwords: false, progress: false });
  for (const [fn, sql] of [['attn_fit', "SELECT attn_fit('n', 'SELECT text, label FROM long', ?)"],
                           ['attn_train', "SELECT count(*) FROM attn_train('n', " +
                                          "'SELECT text, label FROM long', ?)"]]) {
    let e = null;
    try { db.prepare(sql).all(big); } catch (x) { e = x; }
    check(e !== null && e.message.startsWith(`${fn}: out of memory for a batch of `),
          `out of memory in ${fn}: ${e && e.code} '${e && e.message}'`);
  }
  db.close();
}

// attn_fit in a worker thread; the main thread's timer keeps firing meanwhile.
const file = path.join(dir, 'node-worker.db');
const setup = new Database(file);
setup.pragma('journal_mode = WAL');
makeTable(setup, 3000);
setup.close();
let ticks = 0;
const timer = setInterval(() => { ticks++; }, 5);
const worker = new Worker(__filename, { workerData: { file, ext } });
const started = Date.now();
worker.on('message', (s) => {
  clearInterval(timer);
  const summary = JSON.parse(s);
  const secs = (Date.now() - started) / 1000;
  check(summary.name === 'worker' && summary.epochs >= 1 && ticks >= Math.min(10, secs * 50),
        `attn_fit in a worker_thread (${secs.toFixed(2)}s): the main thread's 5 ms timer fired ` +
        `${ticks} times meanwhile`);
  const db = new Database(file);
  check(db.prepare("SELECT count(*) AS n FROM attn_models WHERE name = 'worker'").get().n === 1,
        '  the worker\'s model is saved');
  db.close();
});
worker.on('error', (e) => { clearInterval(timer); check(false, `worker: ${e.message}`); });
worker.on('exit', () => {
  console.log(`test_field_node: ${failures} failed`);
  process.exitCode = failures ? 1 : 0;
});
