"""package_wheel.py -- what tests/test_package_wheel.sh runs with the Python of the venv the wheel
was installed into (not a test by itself), in a scratch directory holding package_roundtrip.sql:

    python package_wheel.py all         everything below
    python package_wheel.py roundtrip   load, train, predict; OpenBLAS the bundled copy

- attnext.loadable_path() inside the venv; the bundled OpenBLAS is the one mapped;
- attnext.load() with a sqlite3.Connection (round trip, commit, a second connection sees it),
  an apsw.Connection and a sqlite_utils.Database; anything else gets an error that says what it
  got and what it accepts;
- Ctrl-C: SIGINT sent to a Python process in attn_fit (sqlite3 and APSW) or iterating attn_train
  stops it within seconds with "interrupted", and no model is saved.
"""
import gc
import os
import signal
import sqlite3
import subprocess
import sys
import time

import attnext

failures = 0


def check(cond, what):
    global failures
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    failures += 0 if cond else 1
    return cond


def roundtrip(conn, execute=None):
    """package_roundtrip.sql's statements; returns its last value."""
    execute = execute or (lambda sql: conn.execute(sql).fetchall())
    lines = [line for line in open("package_roundtrip.sql") if not line.startswith("--")]
    rows = []
    for stmt in "".join(lines).split(";\n"):
        if stmt.strip():
            rows += list(execute(stmt))
    return rows[-1][0]


def mapped_openblas():
    with open("/proc/self/maps") as f:
        return sorted({line.split()[-1] for line in f if "openblas" in line})


def check_roundtrip():
    path = attnext.loadable_path()
    here = os.path.dirname(path)
    bundled = sorted(n for n in os.listdir(here) if n.startswith("libopenblas-"))
    check(len(bundled) == 1, "bundled OpenBLAS beside attnext.so: %s" % bundled)
    db = os.path.abspath("t.db")
    for f in (db, db + "-journal"):
        if os.path.exists(f):
            os.remove(f)
    conn = sqlite3.connect(db)
    attnext.load(conn)
    got = roundtrip(conn)
    conn.commit()  # the default transaction mode: training's writes are in an open transaction
    check(got == "roundtrip sports tech", "sqlite3: load(conn), train, predict: " + got)
    maps = mapped_openblas()
    check(maps == [os.path.join(here, bundled[0])] if bundled else False,
          "the OpenBLAS mapped is the bundled one: %s" % maps)
    version = conn.execute("SELECT attn_version()").fetchone()[0]
    check("OpenBLAS" in version, "attn_version(): " + version[:90])
    other = sqlite3.connect(db)
    attnext.load(other)
    check(other.execute("SELECT attn_predict('m', 'goal match team win')").fetchone()[0]
          == "sports", "a second connection sees the committed model")
    return db


def check_clients():
    import apsw
    import sqlite_utils
    a = apsw.Connection(os.path.abspath("apsw.db"))
    check(attnext.load(a) is a, "load(apsw.Connection) returns it")
    got = roundtrip(a, lambda sql: a.cursor().execute(sql).fetchall())
    check(got == "roundtrip sports tech", "APSW %s: train, predict: %s" % (apsw.apswversion(), got))
    db = sqlite_utils.Database(os.path.abspath("t.db"))
    check(attnext.load(db) is db, "load(sqlite_utils.Database) returns it")
    label = db.execute("SELECT attn_predict('m', 'chip phone cloud app')").fetchone()[0]
    check(label == "tech", "sqlite_utils.Database: attn_predict through db.execute: " + label)
    try:
        attnext.load(object())
        check(False, "load(object()) refused")
    except TypeError as e:
        check("expected a sqlite3.Connection, an apsw.Connection or a sqlite_utils.Database, "
              "got builtins.object" in str(e), "load(object()): TypeError: %s" % e)

    class Connection:  # a sqlite3 module built without extension loading looks like this
        __module__ = "sqlite3"
        __qualname__ = "Connection"

        def execute(self, sql):
            pass
    try:
        attnext.load(Connection())
        check(False, "a Connection without enable_load_extension refused")
    except RuntimeError as e:
        check("sqlite3.Connection without enable_load_extension" in str(e)
              and "built without extension loading" in str(e), "no extension loading: %s" % e)


def check_not_kept_alive():
    """load() registers the connection for Ctrl-C, but a dropped connection is still freed
    (closed, its transaction rolled back) as without attnext: by Python's cyclic garbage
    collector (a sqlite3.Connection refers to itself), once the watcher has let go of it (1 s)."""
    db = os.path.abspath("alive.db")
    if os.path.exists(db):
        os.remove(db)
    writer = sqlite3.connect(db, isolation_level=None)
    attnext.load(writer)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("CREATE TABLE t(x)")
    del writer  # holds the write lock until it is freed
    other = sqlite3.connect(db, timeout=0)
    deadline, got = time.monotonic() + 5, None
    while time.monotonic() < deadline:
        gc.collect()
        try:
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")
            got = time.monotonic() - (deadline - 5)
            break
        except sqlite3.OperationalError:
            time.sleep(0.05)
    check(got is not None, "a dropped connection is freed (its lock released after %s s)"
          % ("%.2f" % got if got is not None else "more than 5"))


CHILD = r'''
import os, sys, sqlite3, time
import attnext
kind, db = sys.argv[1], sys.argv[2]
rows = [("goal match team win %d" % i, "sports") if i % 2 == 0 else
        ("chip phone cloud app %d" % i, "tech") for i in range(3000)]
opts = ('{"epochs":100000,"patience":100000,"hidden":32,"embed_dim":16,"fc_hidden":16,'
        '"progress":false}')
if kind == "apsw":
    import apsw
    conn = apsw.Connection(db)
    attnext.load(conn)
    cur = conn.cursor()
    cur.execute("BEGIN; CREATE TABLE docs(text, label)")
    cur.executemany("INSERT INTO docs VALUES(?, ?)", rows)
    cur.execute("COMMIT")
    print("training", flush=True)
    cur.execute("SELECT attn_fit('m', 'SELECT text, label FROM docs', ?)", (opts,)).fetchall()
else:
    conn = sqlite3.connect(db, isolation_level=None)
    attnext.load(conn)
    with conn:
        conn.execute("BEGIN")
        conn.execute("CREATE TABLE docs(text, label)")
        conn.executemany("INSERT INTO docs VALUES(?, ?)", rows)
    print("training", flush=True)
    if kind == "fit":
        conn.execute("SELECT attn_fit('m', 'SELECT text, label FROM docs', ?)", (opts,)).fetchone()
    else:  # attn_train: epochs stream to Python; Ctrl-C may land between two rows
        for row in conn.execute("SELECT epoch FROM attn_train('m', 'SELECT text, label FROM docs', ?)",
                                (opts,)):
            time.sleep(0.01)
print("finished: the training was not interrupted", flush=True)
'''


def check_ctrl_c(kind):
    db = os.path.abspath("ctrl_c_%s.db" % kind)
    for f in (db, db + "-journal", db + "-wal"):
        if os.path.exists(f):
            os.remove(f)
    with open("ctrl_c_child.py", "w") as f:
        f.write(CHILD)
    # a background job's SIGINT may be ignored (sh without job control): the child starts with
    # the default disposition, as a program started from a terminal
    child = subprocess.Popen([sys.executable, "ctrl_c_child.py", kind, db], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    first = child.stdout.readline().strip()
    time.sleep(1.0)  # well into the epochs
    child.send_signal(signal.SIGINT)
    sent = time.monotonic()
    try:
        out, _ = child.communicate(timeout=15)
        took = time.monotonic() - sent
    except subprocess.TimeoutExpired:
        child.kill()
        out, _ = child.communicate()
        took = None
    print("  | " + "\n  | ".join((first + "\n" + out.strip()).splitlines()[-6:]))
    check(took is not None and took < 5, "%s: Ctrl-C stopped the training %s"
          % (kind, "in %.2f s" % took if took is not None else "-- not: still running after 15 s"))
    check("interrupted" in out or "KeyboardInterrupt" in out,
          "%s: the process reports the interruption" % kind)
    check("finished" not in out, "%s: the statement did not run to its end" % kind)
    conn = sqlite3.connect(db)
    saved = conn.execute("SELECT count(*) FROM sqlite_schema WHERE name = 'attn_models'").fetchone()[0]
    if saved:
        saved = conn.execute("SELECT count(*) FROM attn_models").fetchone()[0]
    check(saved == 0, "%s: nothing saved (%d models in the file)" % (kind, saved))


mode = sys.argv[1] if len(sys.argv) > 1 else "all"
print("attnext", attnext.__version__, "from", attnext.loadable_path(), flush=True)
check(attnext.loadable_path().startswith(os.path.join(sys.prefix, "lib")), "loadable_path in the venv")
check_roundtrip()
if mode == "all":
    check_clients()
    check_not_kept_alive()
    for kind in ("fit", "train", "apsw"):
        check_ctrl_c(kind)
print("package_wheel.py %s: %d failed" % (mode, failures))
sys.exit(1 if failures else 0)
