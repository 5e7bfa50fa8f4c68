"""test_field_clients.py -- attnext as a Python program uses it (attn_fit, threads, and the
statements a client steps once and resets).

  - No silent discard: a training statement that the client stops reading after one row
    (execute() without fetching, fetchone(), a cursor closed early, LIMIT 1) still trains every
    epoch and saves the model (in memory, WAL and rollback-journal files). An interrupt stops it
    without saving. A save that fails where no statement can report it is reported by the next
    writing call of the connection (once).
  - Bind parameters in a query given as text: a clear error naming the function.
  - attn_fit: the JSON summary, its options (the same as attn_train's), its errors (the store
    unchanged), interrupt, direct-only, the progress line on a terminal.
  - The host's OpenBLAS thread count is the same after every call as before it.
  - Training from a Python thread while the main thread keeps running; no thread of ours left
    once the last connection is closed.
  - A stored version of 2^63-1: the next save says why it cannot add a version.
Run from the repository root: /usr/bin/python3 tests/test_field_clients.py
"""
import ctypes
import json
import os
import pty
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability as R  # noqa: E402

R.reexec_with_preload()
R.require_extension()
check = R.check

tmp = tempfile.mkdtemp(prefix="attn_field_clients_")
QUERY = "SELECT text, label FROM docs"
EPOCHS = 5
OPTS = json.dumps({"epochs": EPOCHS, "hidden": 4, "embed_dim": 4, "fc_hidden": 4,
                   "vocab_size": 50, "patience": 100, "progress": False})
SLOW = json.dumps({"epochs": 200, "hidden": 64, "embed_dim": 64, "patience": 1000,
                   "progress": False})


def database(kind):
    if kind == "memory":
        db = R.connect(":memory:")
    else:
        db = R.connect(os.path.join(tmp, f"{kind}-{time.monotonic_ns()}.db"))
        db.execute(f"PRAGMA journal_mode={kind}")
    R.make_table(db, n=90)
    return db


def versions(db, name):
    try:
        return db.execute("SELECT version, (SELECT count(*) FROM attn_training_log l WHERE "
                          "l.name = m.name AND l.version = m.version) FROM attn_models m "
                          "WHERE name = ? ORDER BY version", (name,)).fetchall()
    except sqlite3.Error:
        return []


def error_of(fn, *a):
    try:
        fn(*a)
        return None
    except sqlite3.Error as e:
        return str(e)


# ------------------------------------------------------------------ no silent discard
TRAIN = "SELECT * FROM attn_train(?, ?, ?)"
for kind in ("memory", "wal", "delete"):
    db = database(kind)
    db.execute(TRAIN, ("no_fetch", QUERY, OPTS))  # the cursor is dropped at once
    check(versions(db, "no_fetch") == [(1, EPOCHS)],
          f"{kind}: execute() without fetching trains {EPOCHS} epochs and saves: "
          f"{versions(db, 'no_fetch')}")
    row = db.execute(TRAIN, ("fetchone", QUERY, OPTS)).fetchone()
    check(row[0] == 1 and versions(db, "fetchone") == [(1, EPOCHS)],
          f"{kind}: execute().fetchone() returns epoch 1 and saves all {EPOCHS}: "
          f"{versions(db, 'fetchone')}")
    cur = db.cursor()
    cur.execute(TRAIN, ("closed", QUERY, OPTS))
    cur.fetchone()
    check(versions(db, "closed") == [], f"{kind}: a cursor still open: not saved yet")
    cur.close()
    check(versions(db, "closed") == [(1, EPOCHS)],
          f"{kind}: the cursor closed after one row: saved with every epoch")
    rows = db.execute("SELECT epoch FROM attn_train(?, ?, ?) LIMIT 1",
                      ("limit", QUERY, OPTS)).fetchall()
    check(rows == [(1,)] and versions(db, "limit") == [(1, EPOCHS)],
          f"{kind}: LIMIT 1 returns one row and the model is saved: {versions(db, 'limit')}")
    db.close()

# An interrupt while the rest of the epochs run in xClose: nothing saved.
db = database("wal")
db_path = db.execute("PRAGMA database_list").fetchone()[2]
R.make_table(db, name="big", n=3000)
cur = db.cursor()
cur.execute(TRAIN, ("stopped", "SELECT text, label FROM big", SLOW))
timer = threading.Timer(0.3, db.interrupt)
timer.start()
start = time.monotonic()
cur.close()
timer.join()
check(versions(db, "stopped") == [] and time.monotonic() - start < 30,
      f"an interrupt while a closed cursor finishes training: nothing saved "
      f"({time.monotonic() - start:.2f}s)")

# The connection closed while a cursor is open: no training for nothing, no crash.
cur = db.cursor()
cur.execute(TRAIN, ("orphan", "SELECT text, label FROM big", SLOW))
cur.fetchone()
start = time.monotonic()
db.close()
del cur
check(time.monotonic() - start < 5, f"a connection closed under an open training cursor: "
      f"stops at once ({time.monotonic() - start:.2f}s)")
db = R.connect(db_path)

# A save that fails in xClose: logged, then reported by the next writing call, once.
cur = db.cursor()
cur.execute(TRAIN, ("lost", QUERY, OPTS))
cur.fetchone()
db.execute("PRAGMA query_only = 1")
cur.close()
db.execute("PRAGMA query_only = 0")
err = error_of(lambda: db.execute("SELECT attn_fit('next', ?, ?)", (QUERY, OPTS)).fetchone())
check(err is not None and err.startswith("attn_fit: not run, to report that an earlier training "
                                         "of this connection was lost: attn_train: cannot save")
      and "readonly" in err and versions(db, "lost") == [] and versions(db, "next") == [],
      f"a failed save in xClose is reported by the next call: '{err}'")
err = error_of(lambda: db.execute("SELECT attn_fit('next', ?, ?)", (QUERY, OPTS)).fetchone())
check(err is None and versions(db, "next") == [(1, EPOCHS)], f"  once: the call again works ({err})")
db.close()

# ------------------------------------------------------------------ bind parameters
db = database("memory")
db.execute("SELECT attn_fit('m', ?, ?)", (QUERY, OPTS)).fetchone()
calls = [
    ("attn_classify", "SELECT * FROM attn_classify('m', 'SELECT id, text FROM docs WHERE text = ?')"),
    ("attn_evaluate", "SELECT * FROM attn_evaluate('m', 'SELECT text, label FROM docs WHERE label = :l')"),
    ("attn_confusion", "SELECT * FROM attn_confusion('m', 'SELECT text, label FROM docs WHERE id > ?1')"),
    ("attn_train", "SELECT * FROM attn_train('p', 'SELECT text, label FROM docs WHERE id > @n')"),
    ("attn_fit", "SELECT attn_fit('p', 'SELECT text, label FROM docs WHERE id > $n')"),
    ("attn_heatmap_query_svg", "SELECT attn_heatmap_query_svg('m', 'SELECT text FROM docs WHERE id = ?')"),
]
for fn, sql in calls:
    err = error_of(lambda: db.execute(sql).fetchall())
    check(err is not None and err.startswith(fn + ": the query has parameters"),
          f"{fn} with a parameter in its query: '{err}'")
db.close()

# ------------------------------------------------------------------ attn_fit
db = database("wal")
R.make_table(db, name="big", n=3000)
out = db.execute("SELECT attn_fit('fit', ?, ?)", (QUERY, OPTS)).fetchone()[0]
summary = json.loads(out)
row = db.execute("SELECT version, metrics FROM attn_models WHERE name = 'fit'").fetchone()
check(summary["name"] == "fit" and summary["version"] == 1 and summary["epochs"] == EPOCHS
      and {"best_epoch", "val_loss", "val_accuracy", "val_f1", "seconds"} <= set(summary),
      f"attn_fit returns the summary: {out}")
check(row[0] == 1 and json.loads(row[1])["best_epoch"] == summary["best_epoch"]
      and versions(db, "fit") == [(1, EPOCHS)], "  the model and its log are saved")
out = db.execute("SELECT attn_fit('fit', ?)", (QUERY,)).fetchone()[0]
check(json.loads(out)["version"] == 2, "attn_fit with two arguments: default options, version 2")
cfg = json.loads(db.execute("SELECT config FROM attn_models WHERE name = 'fit' AND version = 1")
                 .fetchone()[0])
check(cfg["hidden"] == 4 and cfg["epochs"] == EPOCHS, "  the options are stored as attn_train's")
before = R.snapshot(db)
errors = [
    ("SELECT attn_fit(NULL, 'SELECT text, label FROM docs')",
     "attn_fit: the model name must be a non-empty text, got NULL"),
    ("SELECT attn_fit('e', 'SELECT text, label FROM docs', '{\"hidden\":\"big\"}')",
     'attn_fit: option "hidden" must be'),
    ("SELECT attn_fit('e', 'SELECT text, label FROM docs', 3)",
     "attn_fit: the options must be a JSON object as text"),
    ("SELECT attn_fit('e', 'DELETE FROM docs')", "attn_fit: the query must be read-only"),
    ("SELECT attn_fit('e', 'SELECT text, label FROM docs WHERE 0')",
     "attn_fit: the query returned no rows"),
    ("SELECT attn_fit('e', 'SELECT text FROM docs')", "attn_fit: the query must return at least 2"),
    ("SELECT attn_fit('e')", "wrong number of arguments to function attn_fit()"),
]
for sql, want in errors:
    err = R.error_of(db, sql)
    check(err is not None and err.startswith(want), f"{sql}: '{err}'")
db.execute("CREATE VIEW fit_view AS SELECT attn_fit('v', 'SELECT text, label FROM docs') AS s")
err = R.error_of(db, "SELECT * FROM fit_view")
check(err is not None and "unsafe use of attn_fit" in err, f"attn_fit is direct-only: '{err}'")
db.execute("DROP VIEW fit_view")
check(R.snapshot(db) == before, "attn_fit errors left the database unchanged")
timer = threading.Timer(0.3, db.interrupt)
timer.start()
start = time.monotonic()
err = R.error_of(db, "SELECT attn_fit('slow', 'SELECT text, label FROM big', ?)", (SLOW,))
timer.join()
check(err == "attn_fit: interrupted" and R.snapshot(db) == before,
      f"attn_fit interrupted after 0.3s: '{err}' after {time.monotonic() - start:.2f}s, "
      "database unchanged")
db.close()

# The progress line on a terminal (the sqlite3 shell with its stderr on a pty).
SQLITE3 = shlex.split(os.environ.get("SQLITE3", "sqlite3"))
if shutil.which(SQLITE3[0]):
    rows = ",".join("('%s word%d text', '%s')" % (c, i, c) for i in range(120) for c in ("alpha", "beta"))
    script = (f".load {R.extension_path()}\nCREATE TABLE t(text, label);\nINSERT INTO t VALUES {rows};\n"
              "SELECT json_extract(attn_fit('m', 'SELECT text, label FROM t', "
              "'{\"epochs\":2,\"batch_size\":8,\"progress\":true}'), '$.epochs');\n")
    master, slave = pty.openpty()
    p = subprocess.Popen([*SQLITE3, "-bail", os.path.join(tmp, "progress.db")],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    p.stdin.write(script.encode())
    p.stdin.close()
    err = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        err += chunk
    out = p.stdout.read()
    p.wait(timeout=120)
    os.close(master)
    check(out.strip() == b"2" and b"epoch 1/2" in err and b"epoch 2/2" in err
          and err.rstrip(b"\r\n").endswith(b"\r\x1b[K"),
          f"attn_fit draws the progress line of each epoch on a terminal: out {out!r}, "
          f"{err.count(b'batches')} lines")
else:
    check(False, f"{SQLITE3[0]} not found: the progress test needs the sqlite3 shell")

# ------------------------------------------------------------------ the host's OpenBLAS
blas = None
for lib in ("libopenblas.so.0", "libopenblas.so"):
    try:
        blas = ctypes.CDLL(lib)
        break
    except OSError:
        pass
if check(blas is not None, "libopenblas loaded in the host (the one attnext.so uses)"):
    blas.openblas_set_num_threads(3)
    db = database("memory")
    steps = [
        ("attn_fit", "SELECT attn_fit('b', 'SELECT text, label FROM docs', '%s')" % OPTS),
        ("attn_train", "SELECT * FROM attn_train('b', 'SELECT text, label FROM docs', '%s')" % OPTS),
        ("attn_predict", "SELECT attn_predict('b', text) FROM docs"),
        ("attn_classify", "SELECT * FROM attn_classify('b', 'SELECT id, text FROM docs')"),
        ("attn_evaluate", "SELECT * FROM attn_evaluate('b', 'SELECT text, label FROM docs')"),
        ("attn_probs", "SELECT * FROM attn_probs('b', 'match goal team')"),
        ("attn_version", "SELECT attn_version()"),
    ]
    for fn, sql in steps:
        db.execute(sql).fetchall()
        n = blas.openblas_get_num_threads()
        check(n == 3, f"OpenBLAS threads of the host after {fn}: {n} (set to 3 before)")
    blas.openblas_set_num_threads(2)
    db.execute("SELECT attn_predict('b', 'stocks bank')").fetchall()
    check(blas.openblas_get_num_threads() == 2, "  and a new setting of the host is kept too")
    db.close()

# ------------------------------------------------------------------ threads
db = database("wal")
R.make_table(db, name="big", n=3000)
done = threading.Event()
result = {}


def trainer():
    t = R.connect(db.execute("PRAGMA database_list").fetchone()[2])
    try:
        result["fit"] = t.execute("SELECT attn_fit('thread', ?, ?)",
                                  ("SELECT text, label FROM big",
                                   json.dumps({"epochs": 10, "hidden": 32,
                                                      "patience": 100, "progress": False}))).fetchone()[0]
    except sqlite3.Error as e:
        result["error"] = str(e)
    t.close()
    done.set()


th = threading.Thread(target=trainer)
ticks = 0
start = time.monotonic()
th.start()
while not done.is_set():
    ticks += 1
    time.sleep(0.001)
th.join()
secs = time.monotonic() - start
# The main thread sleeps 1 ms per tick: if training held the interpreter it would not tick.
check("fit" in result and ticks >= min(50, secs * 100),
      f"attn_fit in a Python thread ({secs:.2f}s) while the main thread runs: {ticks} ticks of "
      f"the main thread meanwhile ({result.get('error')})")
db.close()

# No thread of ours left after the last connection closes (a fresh process: the count of its
# threads before loading attnext, and after training, classifying and closing).
code = r"""
import os, sqlite3, sys
sys.path.insert(0, sys.argv[1]); import reliability as R
n = lambda: len(os.listdir("/proc/self/task"))
before = n()
db = R.connect(":memory:"); R.make_table(db, n=90)
db.execute("SELECT attn_fit('m', 'SELECT text, label FROM docs', ?)", (R.TINY,)).fetchone()
db.execute("SELECT * FROM attn_classify('m', 'SELECT id, text FROM docs')").fetchall()
during = n()
db.close()
print(before, during, n())
"""
p = subprocess.run([sys.executable, "-c", code, os.path.dirname(os.path.abspath(__file__))],
                   capture_output=True, text=True, timeout=120)
counts = [int(x) for x in p.stdout.split()] if p.returncode == 0 else []
check(len(counts) == 3 and counts[2] == counts[0],
      f"threads before loading, with a connection, after closing it: {counts} {p.stderr[-200:]}")

# ------------------------------------------------------------------ version 2^63-1
db = database("memory")
db.execute("SELECT attn_fit('top', ?, ?)", (QUERY, OPTS)).fetchone()
blob = db.execute("SELECT weights FROM attn_models WHERE name = 'top'").fetchone()[0]
db.execute("UPDATE attn_models SET version = 9223372036854775807 WHERE name = 'top'")
before = R.snapshot(db)
for sql, args in (("SELECT attn_import('top', ?)", (blob,)),
                  ("SELECT attn_fit('top', ?, ?)", (QUERY, OPTS))):
    err = R.error_of(db, sql, args)
    fn = sql.split("(")[0].split()[-1]
    check(err is not None and err.startswith(fn + ": cannot save the model: 'top' already has "
                                             "version 9223372036854775807"),
          f"{fn} after version 2^63-1: '{err}'")
check(R.snapshot(db) == before, "  the database is unchanged")
check(R.error_of(db, "SELECT attn_import('other', ?)", (blob,)) is None,
      "  another name still saves")
db.close()

# ------------------------------------------------------------------ a join runs the training once
# attn_train on the inner side of a join is filtered again for every outer row; each run would
# train and save another version. The first run is saved, the second filter is an error saying
# how to train once; a materialized CTE trains once and joins its rows.
db = database("wal")
db.execute("CREATE TABLE outer3(x)")
db.executemany("INSERT INTO outer3 VALUES(?)", [(1,), (2,), (3,)])
err = error_of(lambda: db.execute("SELECT o.x, e.epoch FROM outer3 o LEFT JOIN attn_train(?, ?, ?) e "
                                  "ON e.epoch = o.x", ("joined", QUERY, OPTS)).fetchall())
check(err is not None and err.startswith("attn_train: the statement runs the training again for "
                                         "another row of a join")
      and versions(db, "joined") == [(1, EPOCHS)],
      f"a join that filters attn_train again: one version saved, then '{err}'")
rows = db.execute("WITH t AS MATERIALIZED (SELECT * FROM attn_train(?, ?, ?)) SELECT o.x, t.epoch "
                  "FROM outer3 o LEFT JOIN t ON t.epoch = o.x ORDER BY o.x",
                  ("cte", QUERY, OPTS)).fetchall()
check(rows == [(1, 1), (2, 2), (3, 3)] and versions(db, "cte") == [(1, EPOCHS)],
      f"  a materialized CTE trains once and joins: {rows}, versions {versions(db, 'cte')}")
# a read-only connection is refused before any training
db.execute("PRAGMA query_only = 1")
start = time.monotonic()
err = error_of(lambda: db.execute(TRAIN, ("ro", QUERY, SLOW)).fetchall())
took = time.monotonic() - start
db.execute("PRAGMA query_only = 0")
check(err is not None and err.startswith("attn_train: the database is read-only") and took < 2,
      f"a read-only connection fails before training ({took:.2f}s): '{err}'")
db.close()

shutil.rmtree(tmp, ignore_errors=True)
R.finish("test_field_clients")
