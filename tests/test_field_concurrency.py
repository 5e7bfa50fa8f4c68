"""test_field_concurrency.py -- training and saving while other connections and processes write
in WAL and rollback-journal (DELETE) mode.

  1. Another writer during training. A second connection (a thread) or a second process starts
     writing 0.3 s into a training of ~4 s: a plain INSERT, attn_import, attn_deploy and a tiny
     attn_fit. Checked: the model trained is saved (version, every log row); the other writer
     succeeds at once (WAL; rollback journal with attn_fit, which holds no lock while its epochs
     run), in under a quarter of the training's time and before it ends; with attn_train in rollback-journal mode (its SELECT holds a SHARED lock for the whole
     statement) the other writer fails with "database is locked" after its own busy timeout
     (the training connection having the longer one) and the model is still saved.
  2. The write lock is held by another connection (BEGIN IMMEDIATE, COMMIT after 1 s) when
     the save starts: attn_train, attn_fit, attn_import and attn_deploy wait for it (busy_timeout
     10 s) and succeed. Exception, rollback journal and attn_train: the holder cannot commit while
     attn_train's statement holds SHARED; its COMMIT gives up after its busy timeout (1 s) and the
     save goes through. With a busy timeout shorter than the hold they fail with a clear error
     and leave the database unchanged. A save whose snapshot is out of date (WAL) goes through a
     second connection that keeps the caller's max_page_count.
  3. Two processes train different models on one database at the same moment: both saved.
Before the store waited for the write lock, (1) failed with "attn_train: cannot create the model
store tables: database is locked" and (2) failed at once with "cannot save the model: database
is locked".
Run from the repository root: /usr/bin/python3 tests/test_field_concurrency.py
"""
import json
import os
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

tmp = tempfile.mkdtemp(prefix="attn_field_conc_")
QUERY = "SELECT text, label FROM docs"
TINY = R.TINY


def options(epochs):
    return json.dumps({"epochs": epochs, "hidden": 32, "embed_dim": 32, "fc_hidden": 16,
                       "patience": 1000, "progress": False})


def fresh(mode, n=3000):
    path = os.path.join(tmp, f"{mode}-{time.monotonic_ns()}.db")
    db = R.connect(path, timeout=10)
    db.execute(f"PRAGMA journal_mode={mode}")
    R.make_table(db, n=n)
    db.execute("CREATE TABLE other(x)")
    R.train(db, "base")  # version 1 of 'base', for attn_deploy
    return path, db


BLOB = None


def tiny_blob():
    global BLOB
    if BLOB is None:
        m = R.connect(":memory:")
        R.make_table(m, n=60)
        R.train(m, "t")
        BLOB = m.execute("SELECT weights FROM attn_models").fetchone()[0]
        m.close()
    return BLOB


def train(db, form, name, opts):
    """Run one training; returns (error or None, seconds)."""
    start = time.monotonic()
    try:
        if form == "attn_train":
            db.execute("SELECT * FROM attn_train(?, ?, ?)", (name, QUERY, opts)).fetchall()
        else:
            db.execute("SELECT attn_fit(?, ?, ?)", (name, QUERY, opts)).fetchone()
        return None, time.monotonic() - start
    except sqlite3.Error as e:
        return str(e), time.monotonic() - start


def saved(db, name, epochs):
    row = db.execute("SELECT max(version), count(*) FROM attn_models WHERE name = ?",
                     (name,)).fetchone()
    log = db.execute("SELECT count(*) FROM attn_training_log WHERE name = ?", (name,)).fetchone()[0]
    return row == (1, 1) and log == epochs, f"versions {row}, log rows {log}"


# The writes of the other writer: (what, SQL, arguments).
def other_writes():
    return [("INSERT", "INSERT INTO other VALUES (1)", ()),
            ("attn_import", "SELECT attn_import('imported', ?)", (tiny_blob(),)),
            ("attn_deploy", "SELECT attn_deploy('base', 1)", ()),
            ("attn_fit", "SELECT attn_fit('small', 'SELECT text, label FROM docs LIMIT 60', ?)",
             (TINY,))]


WRITER = r"""
import json, sqlite3, sys, time
path, ext, timeout, delay, writes = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), json.loads(sys.stdin.read())
db = sqlite3.connect(path, isolation_level=None, timeout=timeout)
db.enable_load_extension(True); db.load_extension(ext)
time.sleep(delay)
out = []
for what, sql, args in writes:
    args = [bytes.fromhex(a[4:]) if isinstance(a, str) and a.startswith("hex:") else a for a in args]
    t = time.monotonic()
    try:
        db.execute(sql, args).fetchall(); err = None
    except sqlite3.Error as e:
        err = str(e)
    out.append([what, err, time.monotonic() - t, t])
print(json.dumps(out))
"""


def run_writer(who, path, timeout, delay, result):
    """Other writer: a connection in a thread or a process; result gets [(what, err, s)]."""
    writes = other_writes()
    if who == "process":
        enc = [[w, s, [("hex:" + a.hex()) if isinstance(a, bytes) else a for a in args]]
               for w, s, args in writes]
        p = subprocess.run([sys.executable, "-c", WRITER, path, R.extension_path(), str(timeout),
                            str(delay)], input=json.dumps(enc), capture_output=True, text=True,
                           timeout=120)
        try:
            result.extend(json.loads(p.stdout))
        except ValueError:
            result.append(["process", "no output: " + p.stderr[-300:], 0, 0])
        return
    db = R.connect(path, timeout=timeout)
    time.sleep(delay)
    for what, sql, args in writes:
        t = time.monotonic()
        try:
            db.execute(sql, args).fetchall()
            err = None
        except sqlite3.Error as e:
            err = str(e)
        result.append([what, err, time.monotonic() - t, t])
    db.close()


# Calibrate: epochs for a training of about 4 s on this machine (at least 3), longer than the
# other writer's four writes (0.3 s + at most 4 x 0.5 s).
path, db = fresh("wal")
err, secs = train(db, "attn_fit", "calibrate", options(4))
check(err is None, f"calibration: 4 epochs in {secs:.2f}s ({err})")
EPOCHS = max(3, min(4000, int(4.0 / max(secs / 4, 1e-3)) + 1))
print(f"training runs use {EPOCHS} epochs (~{EPOCHS * secs / 4:.1f}s)", flush=True)
db.close()

# ------------------------------------------------------------------ 1. another writer during training
for mode in ("wal", "delete"):
    for form in ("attn_train", "attn_fit"):
        for who in ("connection", "process"):
            path, db = fresh(mode)
            holds_shared = mode == "delete" and form == "attn_train"
            # In rollback-journal mode attn_train's statement holds SHARED: the other writer
            # cannot commit before training ends; it gives up after its own (shorter) timeout.
            writer_timeout = 0.5 if holds_shared else 10
            tag = f"{mode}, {form}, other writer in a {who}"
            # The calibration is of a moment: where the machine's load drops (other tests end),
            # the training may end before the other writer (a process to start, then 0.3 s)
            # is done. Then it runs again, 4 times longer, at most twice more: what is checked
            # below is the same, only a training too short to check it is not kept. Where the
            # writes do not wait for the training, each must end during it (a write slow enough
            # to outlast it is not let off).
            epochs = EPOCHS
            for attempt in range(3):
                if attempt:
                    db.close()
                    path, db = fresh(mode)
                result = []
                th = threading.Thread(target=run_writer,
                                      args=(who, path, writer_timeout, 0.3, result))
                th.start()
                err, secs = train(db, form, "m", options(epochs))
                trained_at = time.monotonic()  # CLOCK_MONOTONIC: one clock for every process
                th.join()
                late = [w for w in result if w[3] + w[2] >= trained_at]
                if not result or not (late[:1] == result[:1] or late and not holds_shared):
                    break
                print(f"     {tag}: the training ({epochs} epochs, {secs:.2f}s) ended before "
                      f"{late[0][0]} did: again with {epochs * 4} epochs")
                epochs *= 4
            ok, why = saved(db, "m", epochs)
            check(err is None and ok, f"{tag}: the model is saved ({err}; {why}; {secs:.2f}s)")
            # Where the training holds SHARED, a write is checked against it only if it ended
            # while training ran (a write still waiting when training ends may then go either
            # way); at least the first one must.
            check(result and result[0][3] + result[0][2] < trained_at,
                  f"{tag}: the other writer's first write ended during training")
            for what, werr, wsecs, wstart in result:
                if wstart + wsecs >= trained_at and not holds_shared:
                    check(False, f"{tag}: {what} ended after training ({wsecs:.2f}s, {werr}; "
                                 f"training {epochs} epochs, {secs:.2f}s)")
                elif wstart + wsecs >= trained_at:
                    print(f"     {tag}: {what} ended after training ({wsecs:.2f}s, {werr}): "
                          f"not checked")
                # No bound in seconds: the machine's load (other tests beside this one) stretches
                # every duration. A wait is compared with what cannot be shorter (the busy
                # timeout: SQLite's handler sleeps all of it before giving up), or with the
                # training that ran at the same time, in the same process: a write not blocked by
                # it takes a small part of it (0.00-0.12 s of 4 s measured), one blocked for an
                # epoch or more does not.
                elif holds_shared:
                    check(werr is not None and "locked" in werr and
                          wsecs >= 0.9 * writer_timeout,
                          f"{tag}: {what} waits its busy timeout ({writer_timeout}s) and fails: "
                          f"{wsecs:.2f}s, {werr}")
                else:
                    check(werr is None and wsecs < secs / 4,
                          f"{tag}: {what} during training succeeds at once: {wsecs:.2f}s, under "
                          f"a quarter of the training's {secs:.2f}s ({werr})")
            db.close()

# ------------------------------------------------------------------ 2. the write lock is held when the save starts
HOLD = 1.0
HOLDER = r"""
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=1)
db.execute("BEGIN IMMEDIATE"); db.execute("INSERT INTO other VALUES (2)")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
try:
    db.execute("COMMIT"); print("committed")
except sqlite3.Error as e:
    db.execute("ROLLBACK"); print(e)
"""


def hold_lock(who, path):
    """Take the write lock in a connection (thread) or a process, COMMIT after HOLD seconds
    (busy timeout 1 s; ROLLBACK when the COMMIT fails); returns a function that waits for the
    holder and returns "committed" or the COMMIT's error."""
    if who == "process":
        p = subprocess.Popen([sys.executable, "-c", HOLDER, path, str(HOLD)],
                             stdout=subprocess.PIPE, text=True)
        p.stdout.readline()
        return lambda: p.communicate()[0].strip()
    ready = threading.Event()
    outcome = []

    def holder():
        h = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=1)
        h.execute("BEGIN IMMEDIATE")
        h.execute("INSERT INTO other VALUES (2)")
        ready.set()
        time.sleep(HOLD)
        try:
            h.execute("COMMIT")
            outcome.append("committed")
        except sqlite3.Error as e:
            h.execute("ROLLBACK")
            outcome.append(str(e))
        h.close()
    th = threading.Thread(target=holder)
    th.start()
    ready.wait()

    def join():
        th.join()
        return outcome[0] if outcome else "no outcome"
    return join


def call(db, func):
    if func == "attn_train":
        db.execute("SELECT * FROM attn_train('w', ?, ?)", (QUERY, TINY)).fetchall()
    elif func == "attn_fit":
        db.execute("SELECT attn_fit('w', ?, ?)", (QUERY, TINY)).fetchone()
    elif func == "attn_import":
        db.execute("SELECT attn_import('w', ?)", (tiny_blob(),)).fetchone()
    else:
        db.execute("SELECT attn_deploy('base', 1)").fetchone()


for mode in ("wal", "delete"):
    for func in ("attn_train", "attn_fit", "attn_import", "attn_deploy"):
        for who in ("connection", "process"):
            path, db = fresh(mode, n=90)
            db.execute("PRAGMA busy_timeout = 10000")
            join = hold_lock(who, path)
            start = time.monotonic()
            try:
                call(db, func)
                err = None
            except sqlite3.Error as e:
                err = str(e)
            waited = time.monotonic() - start
            holder = join()
            tag = f"{mode}: {func} while a {who} holds the write lock for {HOLD}s"
            if mode == "delete" and func == "attn_train":
                # attn_train's SELECT holds SHARED from its start: the holder cannot commit
                # (it needs EXCLUSIVE) until the statement ends; it gives up after its busy
                # timeout (1 s), rolls back, and the save goes through.
                check(err is None and "locked" in holder and waited < HOLD + 5,
                      f"{tag}: saved after {waited:.2f}s ({err}); the holder's COMMIT: {holder}")
            else:
                check(err is None and HOLD * 0.7 < waited < HOLD + 5 and holder == "committed",
                      f"{tag}: waited {waited:.2f}s ({err}); the holder: {holder}")
            db.close()

# A busy timeout shorter than the hold: a clear error, nothing written.
for mode in ("wal", "delete"):
    for func in ("attn_train", "attn_fit", "attn_import"):
        path, db = fresh(mode, n=90)
        db.execute("PRAGMA busy_timeout = 200")
        before = R.snapshot(db)
        join = hold_lock("process", path)
        try:
            call(db, func)
            err = None
        except sqlite3.Error as e:
            err = str(e)
        join()
        check(err is not None and err.startswith(func + ": cannot save the model: database is "
                                                         "locked") and "busy timeout" in err,
              f"{mode}: {func} with busy_timeout 200 ms < the hold: '{err}'")
        after = R.snapshot(db)
        after["other"] = [r for r in after["other"] if r != (2,)]
        check(after == before, f"{mode}: {func}: the database is unchanged")
        db.close()

# ------------------------------------------------------------------ inside the caller's transaction (WAL)
# A deferred transaction that read before another connection wrote cannot write any more
# (SQLITE_BUSY_SNAPSHOT): a clear error at once, not a wait; BEGIN IMMEDIATE works.
path, db = fresh("wal", n=90)
other = R.connect(path)
# a wait would last the busy timeout, 60 s; at once is far below it whatever the machine's load
db.execute("PRAGMA busy_timeout = 60000")
db.execute("BEGIN")
db.execute("SELECT count(*) FROM docs").fetchall()
other.execute("INSERT INTO other VALUES (3)")
start = time.monotonic()
err = R.error_of(db, "SELECT attn_import('snap', ?)", (tiny_blob(),))
took = time.monotonic() - start
check(err is not None and "read snapshot is out of date" in err and took < 30,
      f"wal: attn_import in a transaction whose snapshot is stale: '{err}' after {took:.2f}s "
      f"(busy timeout 60 s: no wait)")
db.execute("ROLLBACK")
db.execute("BEGIN IMMEDIATE")
db.execute("SELECT count(*) FROM docs").fetchall()
err = R.error_of(db, "SELECT attn_import('snap', ?)", (tiny_blob(),))
db.execute("COMMIT")
check(err is None and db.execute("SELECT count(*) FROM attn_models WHERE name = 'snap'")
      .fetchone()[0] == 1, f"wal: the same inside BEGIN IMMEDIATE saves ({err})")
other.close()
db.close()

# ------------------------------------------------------------------ the second connection's settings
# A save whose statement's snapshot another connection's commit made out of date goes through a
# second connection to the file (ext/attn_store.c, attn_store_save_side), which must write as the
# caller's would. Made to happen without timing: the training query's first row runs a function
# that commits on another connection, after the statement's snapshot began. Checked: the
# caller's max_page_count holds there too (a model that does not fit: "database or disk is
# full", nothing stored); without the limit the same save goes through (so the path was taken).
def stale_save(limit, move=False):
    path, db = fresh("wal", n=90)
    other = R.connect(path)
    poked = []

    def poke(x):
        if not poked:
            other.execute("INSERT INTO other VALUES (4)")
            if move:  # no second connection can open the file by its name any more
                os.rename(path, path + ".moved")
            poked.append(1)
        return x
    db.create_function("poke", 1, poke)
    if limit:
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        db.execute(f"PRAGMA max_page_count = {pages + 1}")
    err = R.error_of(db, "SELECT * FROM attn_train('side', 'SELECT poke(text), label FROM docs', "
                         "'{\"epochs\":2,\"hidden\":64,\"embed_dim\":64,\"progress\":false}')")
    if move:
        os.rename(path + ".moved", path)
    stored = other.execute("SELECT count(*) FROM attn_models WHERE name = 'side'").fetchone()[0]
    other.close()
    db.close()
    return err, stored, poked


err, stored, poked = stale_save(False)
check(poked and err is None and stored == 1,
      f"wal: a save after another connection's commit goes through a second connection: "
      f"{err or 'saved'} ({stored} version)")
err, stored, poked = stale_save(True)
check(poked and err is not None and "database or disk is full" in err and stored == 0,
      f"wal: that second connection keeps the caller's max_page_count: '{err}', {stored} stored")
# no second connection (the file renamed under the caller): the stale snapshot's own message,
# nothing stored (the message was lost once, and the error read "out of memory")
err, stored, poked = stale_save(False, move=True)
check(poked and err is not None and "no second connection to the file could be opened" in err
      and stored == 0, f"wal: no second connection can open the file: '{err}', {stored} stored")

# ------------------------------------------------------------------ 3. two processes train at once
TRAINER = r"""
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
db.enable_load_extension(True); db.load_extension(sys.argv[2])
form, name, opts = sys.argv[3], sys.argv[4], sys.argv[5]
try:
    if form == "attn_train":
        db.execute("SELECT * FROM attn_train(?, 'SELECT text, label FROM docs', ?)", (name, opts)).fetchall()
    else:
        db.execute("SELECT attn_fit(?, 'SELECT text, label FROM docs', ?)", (name, opts)).fetchone()
    print("ok")
except sqlite3.Error as e:
    print(e)
"""
for mode, form in (("wal", "attn_train"), ("wal", "attn_fit"), ("delete", "attn_fit")):
    path, db = fresh(mode)
    procs = [subprocess.Popen([sys.executable, "-c", TRAINER, path, R.extension_path(), form,
                               name, options(max(3, EPOCHS // 4))],
                              stdout=subprocess.PIPE, text=True) for name in ("p1", "p2")]
    outs = [p.communicate(timeout=300)[0].strip() for p in procs]
    both = all(saved(db, n, max(3, EPOCHS // 4))[0] for n in ("p1", "p2"))
    check(outs == ["ok", "ok"] and both,
          f"{mode}: two processes run {form} at once, both models saved: {outs}")
    db.close()

shutil.rmtree(tmp, ignore_errors=True)
R.finish("test_field_concurrency")
