"""test_python_sqlite.py -- attnext.so loaded from Debian's Python sqlite3 module.

Checks, each printing what it compared:
  - load_extension works and every function answers;
  - attn_train returns its rows as the epochs end: the first row arrives well before the last,
    and until the last row is read no model or log row exists (seen from a second connection);
  - sqlite3_interrupt (Connection.interrupt from a timer thread) stops training inside an epoch
    and leaves the database exactly as it was (tables compared row by row, weights included),
    also in WAL mode and inside an explicit transaction;
  - the model cache across two connections in WAL mode: a deployment, a new version and a
    deleted row on one connection are seen by the next statement of the other.
Run from the repository root: /usr/bin/python3 tests/test_python_sqlite.py
"""
import os
import sqlite3
import sys
import tempfile
import threading
import time

failures = 0


def check(cond, what):
    global failures
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures += 1


EXT = os.path.abspath(os.environ.get("ATTNEXT", "attnext"))  # without .so


def reexec_with_preload():
    """Under make test-asan: restart with $ATTNEXT_PRELOAD (libasan) in LD_PRELOAD."""
    pre = os.environ.get("ATTNEXT_PRELOAD")
    if pre and pre not in os.environ.get("LD_PRELOAD", ""):
        env = dict(os.environ)
        env["LD_PRELOAD"] = pre + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
        opts = env.get("ASAN_OPTIONS", "")
        env["ASAN_OPTIONS"] = (opts + ":" if opts else "") + "detect_leaks=0"  # Python's own
        sys.stdout.flush()
        os.execve(sys.executable, [sys.executable] + sys.argv, env)


def connect(path):
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.enable_load_extension(True)
    db.load_extension(EXT)
    return db


def snapshot(db):
    """Every row of the model store (weights as bytes), or None when the tables do not exist."""
    names = [r[0] for r in db.execute(
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND name LIKE 'attn%' ORDER BY name")]
    return {n: db.execute(f"SELECT * FROM {n} ORDER BY 1, 2").fetchall() for n in names}


OPTS = '{"epochs":15,"hidden":16,"embed_dim":16,"fc_hidden":16,"lr":0.01,"progress":false}'


def main():
    if not os.path.exists(EXT + ".so"):
        print(EXT + ".so not built (run make)")
        return 77
    reexec_with_preload()
    if not hasattr(sqlite3.Connection, "enable_load_extension"):
        print("this Python's sqlite3 module cannot load extensions")
        return 77
    tmp = tempfile.mkdtemp()
    path = os.path.join(tmp, "t.db")
    a = connect(path)
    print("sqlite", sqlite3.sqlite_version, "|", a.execute("SELECT attn_version()").fetchone()[0])
    with open("tests/sql/docs.inc") as f:
        a.executescript(f.read())

    # ---- training rows arrive as the epochs end; nothing is written before the last row
    b = connect(path)
    start = time.time()
    cur = a.execute("SELECT epoch, val_accuracy, seconds FROM attn_train('news', "
                    "'SELECT text, label FROM docs', ?)",
                    ('{"epochs":6,"hidden":96,"embed_dim":64,"lr":0.01,"progress":false}',))
    first = cur.fetchone()
    t_first = time.time() - start
    check(first[0] == 1, f"the first row is epoch 1 (got {first[0]})")
    check(snapshot(b) == {}, "before the last row is read, the other connection sees no tables")
    rest = cur.fetchall()
    t_all = time.time() - start
    check(len(rest) == 5, f"6 epochs, 6 rows (got {1 + len(rest)})")
    # streamed: the sqlite3 module steps one row ahead (fetchone returns epoch 1 after epoch 2 is
    # computed), so epochs 3..6 run after the first row came back and the time between the first
    # and the last row covers their own durations; a buffered result would have them all before
    # the first row, whatever the setup costs
    later = sum(r[2] for r in rest[1:])
    check(t_all - t_first >= 0.9 * later,
          f"first row after {t_first:.3f}s, all after {t_all:.3f}s; epochs 3-6 took {later:.3f}s")
    store = snapshot(b)
    check(len(store.get("attn_models", [])) == 1 and len(store.get("attn_training_log", [])) == 6,
          "after the last row: 1 model row and 6 log rows")
    check(a.execute("SELECT attn_predict('news', 'Team wins the cup')").fetchone()[0] == "Sports",
          "attn_predict from Python")
    probs = a.execute("SELECT label, probability FROM attn_probs('news', 'New chip launched')").fetchall()
    check(len(probs) == 3 and abs(sum(p for _, p in probs) - 1) < 1e-5,
          f"attn_probs: 3 rows summing to 1 ({probs})")

    # ---- interrupt: inside the first epoch, and the database is unchanged
    big = os.path.join(tmp, "big.db")
    c = connect(big)
    c.execute("CREATE TABLE t(text, label)")
    words = [f"w{i}" for i in range(500)]
    rows = []
    for i in range(40000):
        k = i % 4
        rows.append((" ".join(words[(i * 7 + j * 13 + k) % 500] for j in range(12)), f"c{k}"))
    c.execute("BEGIN")
    c.executemany("INSERT INTO t VALUES (?, ?)", rows)
    c.execute("COMMIT")
    c.execute("SELECT count(*) FROM attn_train('m0', 'SELECT text, label FROM t LIMIT 400', "
              "'{\"epochs\":1,\"progress\":false}')").fetchall()
    for mode in ("delete", "wal"):
        for in_txn in (False, True):
            c.execute(f"PRAGMA journal_mode={mode}")
            before = snapshot(c)
            opts = '{"epochs":3,"hidden":256,"embed_dim":128,"batch_size":32,"progress":false}'
            if in_txn:
                c.execute("BEGIN")
            timer = threading.Timer(0.4, c.interrupt)
            start = time.time()
            timer.start()
            err, rows_out = None, []
            try:
                for row in c.execute(
                        "SELECT * FROM attn_train('m1', 'SELECT text, label FROM t', ?)", (opts,)):
                    rows_out.append(row)
            except sqlite3.OperationalError as e:
                err = str(e)
            elapsed = time.time() - start
            timer.join()
            if in_txn and c.in_transaction:
                c.execute("ROLLBACK")
            what = f"{mode} journal{', in a transaction' if in_txn else ''}"
            check(err is not None and "interrupted" in err,
                  f"{what}: attn_train interrupted at 0.4s raises '{err}' after {elapsed:.2f}s")
            check(elapsed < 1.5 and not rows_out,
                  f"{what}: stopped inside the first epoch ({len(rows_out)} epoch rows before "
                  f"the error, {elapsed:.2f}s)")
            after = snapshot(c)
            check(after == before, f"{what}: model store unchanged after the interrupt "
                  f"({ {k: len(v) for k, v in after.items()} })")
    c.close()

    # ---- cache invalidation across two connections (WAL: readers and writers together)
    a.execute("PRAGMA journal_mode=wal")
    a.execute("SELECT count(*) FROM attn_train('news', 'SELECT text, upper(label) FROM docs', ?)",
              (OPTS,)).fetchall()
    q1 = "SELECT attn_predict('news', 'Team wins the cup')"
    q2 = "SELECT DISTINCT attn_predict(text) FROM docs WHERE id % 3 = 0"
    check(b.execute(q1).fetchone()[0] == "SPORTS", "b sees version 2 (SPORTS)")
    check(b.execute(q2).fetchall() == [("SPORTS",)], "b's default model is version 2")
    a.execute("SELECT attn_deploy('news', 1)")
    check(b.execute(q1).fetchone()[0] == "Sports", "after a deploys version 1, b predicts Sports")
    check(b.execute(q2).fetchall() == [("Sports",)], "and b's default model follows")
    a.execute("SELECT count(*) FROM attn_train('news', 'SELECT text, lower(label) FROM docs', ?)",
              (OPTS,)).fetchall()
    check(b.execute(q1).fetchone()[0] == "sports", "after a trains version 3, b predicts sports")
    a.execute("DELETE FROM attn_models WHERE version = 3")
    try:
        b.execute(q1).fetchone()
        check(False, "b must fail after version 3 was deleted")
    except sqlite3.OperationalError as e:
        check(str(e) == "attn_predict: model 'news' has no deployed version", f"b: '{e}'")
    a.execute("SELECT attn_deploy('news', 2)")
    # a statement of b that is running while a deploys keeps its model; the next one sees it
    cur = b.execute("SELECT attn_predict('news', text) FROM docs WHERE id % 3 = 0")
    first = cur.fetchone()[0]
    a.execute("SELECT attn_deploy('news', 1)")
    rest = {r[0] for r in cur.fetchall()}
    check(first == "SPORTS" and rest == {"SPORTS"}, f"a running statement keeps its version ({rest})")
    check(b.execute(q1).fetchone()[0] == "Sports", "the next statement of b sees version 1")
    a.close()
    b.close()
    print("failures:", failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
