"""test_store_stress.py -- the model store under stress, in WAL and rollback-journal
mode, through Debian's Python sqlite3.

Checks, each printing what it compared:
  1. attn_tune's save is one transaction: every trial and the deployment of the chosen one
     commit together or not at all --
       - disk full (PRAGMA max_page_count leaves room for about one trial): the error says so
         and the store is as before the statement; with room, every trial is saved;
       - sqlite3_interrupt during the save (a thread watches the journal / WAL file and
         interrupts at a random moment after the save began writing): the store is as before,
         or holds every trial with the chosen one deployed;
       - kill -9 of a process in the middle of the save (the same watch): after recovery the
         store is as before, or holds every trial with the chosen one deployed;
  2. 'previous' after attn_tune goes back to the version deployed before the tune (trials never
     chosen are never "previously deployed");
  3. 300 cycles of BEGIN; attn_import(A); predict; ROLLBACK; attn_import(B) on one connection,
     A and B of the same size with other weights: every prediction after the re-import is B's;
  4. a loop over a cursor of the caller's own connection (WAL): attn_fit, attn_deploy(version),
     attn_deploy('best'), attn_predict and an INSERT each work for every row; when another
     connection writes during the loop (the caller's snapshot can no longer become a write), the
     model is still saved and what the caller's connection cannot do fails with an error that
     says why and what to do;
  7. a hand-edited store with a version that is not an integer: attn_deploy('best') and
     attn_deploy('previous') refuse it with an error naming the row.
Run from the repository root: /usr/bin/python3 tests/test_store_stress.py
"""
import json
import os
import random
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability as R  # noqa: E402

check, connect, error_of = R.check, R.connect, R.error_of

TMP = tempfile.mkdtemp(prefix="attn_stress_")
MODES = ("wal", "delete")
# Trials that train in milliseconds but whose weights are megabytes (a 4,000-word vocabulary and
# 512 subword rows of 256-dimensional embeddings): the save of 6 trials writes ~28 MB, long
# enough to be hit. (The default 16,384 subword rows would make each trial 20 MB and its
# training seconds, zeroing the optimizer's state: the test then took minutes.)
BIG = json.dumps({"epochs": 1, "hidden": 4, "embed_dim": 256, "fc_hidden": 4,
                  "vocab_size": 5000, "subword_buckets": 512, "batch_size": 256,
                  "stopwords": False, "seed": 5, "progress": False})
# The tune's chosen trial deployed whatever the version before it scores (the default,
# "if_better", could keep the older one: these checks are about the save, not the choice).
BIG_TUNE = json.dumps(dict(json.loads(BIG), deploy="always"))
TINY_TUNE = json.dumps(dict(json.loads(R.TINY), deploy="always"))
BIG_GRID = json.dumps({"lr": [0.001, 0.002, 0.003, 0.004, 0.005, 0.006]})


def fresh(mode, name):
    path = os.path.join(TMP, f"{name}_{mode}.db")
    for suffix in ("", "-wal", "-shm", "-journal"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    db = connect(path)
    got = db.execute(f"PRAGMA journal_mode={mode}").fetchone()[0]
    assert got == mode, got
    return path, db


def big_rows(n=400, seed=3):
    """Texts of many distinct words (a large vocabulary), three classes."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        label = ("a", "b", "c")[i % 3]
        words = [f"{label}{rng.randrange(1400)}" for _ in range(12)]
        rows.append((" ".join(words), label))
    return rows


def store_state(db):
    return db.execute("SELECT name, version, deployed, deployed_seq, length(weights) "
                      "FROM attn_models ORDER BY name, version").fetchall()


def tune_outcome(before, after, ntrials):
    """'unchanged', 'complete' (every trial saved, exactly one of them deployed, the rest as
    before) or a description of what is wrong."""
    if after == before:
        return "unchanged"
    old = {(r[0], r[1]): r for r in before}
    new = [r for r in after if (r[0], r[1]) not in old]
    kept = [r for r in after if (r[0], r[1]) in old]
    if len(new) != ntrials or len(after) != len(before) + ntrials:
        return f"partial: {len(new)} of {ntrials} trials saved"
    deployed_new = [r for r in new if r[2] == 1]
    if len(deployed_new) != 1 or any(r[2] for r in kept):
        return f"deployed wrong: new {deployed_new}, old {[r for r in kept if r[2]]}"
    return "complete"


# ----------------------------------------------------------------------------- 1. tune atomic

def setup_big(mode, name):
    path, db = fresh(mode, name)
    db.execute("CREATE TABLE docs(text TEXT, label TEXT)")
    R.insert_rows(db, "INSERT INTO docs VALUES (?, ?)", big_rows())
    db.execute("SELECT attn_fit('news', 'SELECT text, label FROM docs', ?)", (BIG,)).fetchone()
    return path, db


def test_disk_full(mode):
    path, db = setup_big(mode, "full")
    page_size = db.execute("PRAGMA page_size").fetchone()[0]
    blob = db.execute("SELECT length(weights) FROM attn_models").fetchone()[0]
    if mode == "wal":
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    room = pages + int(1.5 * blob / page_size) + 8
    db.execute(f"PRAGMA max_page_count = {room}")
    before = store_state(db)
    e = error_of(db, "SELECT * FROM attn_tune('news', 'SELECT text, label FROM docs', ?, ?)",
                 (BIG_GRID, BIG_TUNE))
    after = store_state(db)
    check(e is not None and e.startswith("attn_tune: cannot save the model") and
          "full" in e and after == before,
          f"{mode}: disk full ({room} pages: room for ~1.5 of 6 trials): {e}; store "
          f"{tune_outcome(before, after, 6)}")
    db.execute("PRAGMA max_page_count = 1073741823")
    rows = db.execute("SELECT version, chosen FROM attn_tune('news', 'SELECT text, label "
                      "FROM docs', ?, ?)", (BIG_GRID, BIG_TUNE)).fetchall()
    after = store_state(db)
    check(tune_outcome(before, after, 6) == "complete" and len(rows) == 6 and
          [v for v, c in rows] == [2, 3, 4, 5, 6, 7],
          f"{mode}: with room, every trial saved in trial order, the chosen deployed: "
          f"{rows}")
    db.close()


def watch_save(path, mode, baseline, started, stop):
    """Set `started` once the save writes: the rollback journal appears, or the WAL grows past
    its size when training began."""
    journal = path + ("-wal" if mode == "wal" else "-journal")
    while not stop.is_set():
        try:
            size = os.path.getsize(journal)
        except OSError:
            size = -1
        if (mode == "wal" and size > baseline + 65536) or (mode != "wal" and size > 0):
            started.set()
            return
        time.sleep(0.0002)


def wal_size(path):
    try:
        return os.path.getsize(path + "-wal")
    except OSError:
        return 0


def test_interrupt_during_save(mode, runs=8):
    path, db = setup_big(mode, "intr")
    outcomes = {}
    bad = []
    rng = random.Random(11)
    for run in range(runs):
        if mode == "wal":
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        before = store_state(db)
        started, stop = threading.Event(), threading.Event()
        delay = rng.uniform(0, 0.04)

        def interrupter():
            watch_save(path, mode, wal_size(path), started, stop)
            if started.is_set():
                time.sleep(delay)
                db.interrupt()

        th = threading.Thread(target=interrupter)
        th.start()
        e = error_of(db, "SELECT * FROM attn_tune('news', 'SELECT text, label FROM docs', ?, ?)",
                     (BIG_GRID, BIG_TUNE))
        stop.set()
        th.join()
        after = store_state(db)
        what = tune_outcome(before, after, 6)
        outcomes[what] = outcomes.get(what, 0) + 1
        if what not in ("unchanged", "complete") or (what == "unchanged" and e is None):
            bad.append((delay, e, what))
        if what == "complete":  # start the next run from the same store
            db.execute("DELETE FROM attn_models WHERE name = 'news' AND version > 1")
            db.execute("DELETE FROM attn_training_log WHERE name = 'news' AND version > 1")
            db.execute("SELECT attn_deploy('news', 1)")
    check(not bad, f"{mode}: {runs} interrupts during the save: {outcomes}; wrong: {bad}")
    db.close()


CHILD = r"""
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.enable_load_extension(True)
db.load_extension(sys.argv[2])
print("ready", flush=True)
db.execute("SELECT * FROM attn_tune('news', 'SELECT text, label FROM docs', ?, ?)",
           (sys.argv[3], sys.argv[4])).fetchall()
print("done", flush=True)
"""


def test_kill_during_save(mode, runs=8):
    path, db = setup_big(mode, "kill")
    db.close()
    outcomes = {}
    bad = []
    rng = random.Random(17)
    env = dict(os.environ)
    for run in range(runs):
        db = connect(path)
        if mode == "wal":
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        before = store_state(db)
        db.close()
        # A kill can leave a rollback journal whose header was not yet written, which SQLite
        # leaves in place (it is not hot). Seen by the watch, it would set `started` at once and
        # the kill land in the training, before the save (under ASan: 7 runs of 8). The read
        # above rolled back any hot one, so what is left is not needed: removed.
        if mode != "wal" and os.path.exists(path + "-journal"):
            os.remove(path + "-journal")
        baseline = wal_size(path)
        proc = subprocess.Popen([sys.executable, "-c", CHILD, path, R.extension_path(), BIG_GRID,
                                 BIG_TUNE], stdout=subprocess.PIPE, env=env)
        proc.stdout.readline()
        started, stop = threading.Event(), threading.Event()
        watch = threading.Thread(target=watch_save, args=(path, mode, baseline, started, stop))
        watch.start()
        deadline = time.time() + 60
        while not started.is_set() and proc.poll() is None and time.time() < deadline:
            time.sleep(0.0005)
        stop.set()
        watch.join()
        delay = rng.uniform(0, 0.04)
        if started.is_set():
            time.sleep(delay)
        killed = proc.poll() is None
        if killed:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        db = connect(path)
        after = store_state(db)
        integrity = db.execute("PRAGMA integrity_check").fetchone()[0]
        what = tune_outcome(before, after, 6)
        outcomes[what] = outcomes.get(what, 0) + 1
        if what not in ("unchanged", "complete") or integrity != "ok":
            bad.append((delay, killed, what, integrity))
        if what == "complete":
            db.execute("DELETE FROM attn_models WHERE name = 'news' AND version > 1")
            db.execute("DELETE FROM attn_training_log WHERE name = 'news' AND version > 1")
            db.execute("SELECT attn_deploy('news', 1)")
        db.close()
    check(not bad, f"{mode}: {runs} kill -9 during the save: {outcomes}; wrong: {bad}")


# ----------------------------------------------------------------------------- 2. previous

def test_previous_after_tune(mode):
    path, db = fresh(mode, "prev")
    R.make_table(db, n=90)
    db.execute("SELECT attn_fit('news', 'SELECT text, label FROM docs', ?)", (R.TINY,)).fetchone()
    rows = db.execute("SELECT version, chosen FROM attn_tune('news', 'SELECT text, label FROM "
                      "docs', '{\"lr\":[0.001,0.01,0.1]}', ?)", (TINY_TUNE,)).fetchall()
    chosen = [v for v, c in rows if c][0]
    seqs = db.execute("SELECT version, deployed, deployed_seq FROM attn_models "
                      "ORDER BY version").fetchall()
    prev = db.execute("SELECT attn_deploy('news', 'previous')").fetchone()[0]
    back = db.execute("SELECT attn_deploy('news', 'previous')").fetchone()[0]
    check(prev == 1 and back == chosen,
          f"{mode}: after a tune choosing version {chosen}, 'previous' -> {prev} (want 1), "
          f"again -> {back}; rows (version, deployed, deployed_seq) after the tune: {seqs}")
    unchosen = [s for s in seqs if s[0] not in (1, chosen)]
    check(all(s[2] == 0 and s[1] == 0 for s in unchosen),
          f"{mode}: trials never chosen were never deployed (deployed_seq 0): {unchosen}")
    db.close()


# ----------------------------------------------------------------------------- 3. cache identity

def st_split(blob):
    n = struct.unpack("<Q", blob[:8])[0]
    return json.loads(blob[8:8 + n]), 8 + n


def with_bias(blob, bias):
    """The same safetensors file with fc2.bias replaced (same size, other weights)."""
    header, start = st_split(blob)
    lo, hi = header["fc2.bias"]["data_offsets"]
    count = (hi - lo) // 4
    data = struct.pack("<%df" % count, *[bias[i % len(bias)] for i in range(count)])
    return blob[:start + lo] + data + blob[start + hi:]


def test_rollback_reimport(mode, cycles=300):
    path, db = fresh(mode, "cache")
    R.make_table(db, n=60)
    R.train(db, model="src")
    blob = db.execute("SELECT weights FROM attn_models WHERE name = 'src'").fetchone()[0]
    labels = json.loads(db.execute("SELECT labels FROM attn_models WHERE name = 'src'"
                                   ).fetchone()[0])
    a = with_bias(blob, [50.0, 0.0, 0.0])  # always the first label
    b = with_bias(blob, [0.0, 50.0, 0.0])  # always the second
    assert len(a) == len(b) == len(blob)
    wrong = 0
    same_ms = 0
    for i in range(cycles):
        db.execute("BEGIN")
        v = db.execute("SELECT attn_import('x', ?)", (a,)).fetchone()[0]
        got_a = db.execute("SELECT attn_predict('x', 'goal team')").fetchone()[0]
        created_a = db.execute("SELECT created_at FROM attn_models WHERE name = 'x' AND "
                               "version = ?", (v,)).fetchone()[0]
        db.execute("ROLLBACK")
        v2 = db.execute("SELECT attn_import('x', ?)", (b,)).fetchone()[0]
        created_b = db.execute("SELECT created_at FROM attn_models WHERE name = 'x' AND "
                               "version = ?", (v2,)).fetchone()[0]
        same_ms += created_a == created_b
        got_b = db.execute("SELECT attn_predict('x', 'goal team')").fetchone()[0]
        probs = db.execute("SELECT label, probability FROM attn_probs('x', 'goal team') "
                           "LIMIT 1").fetchone()
        if got_a != labels[0] or got_b != labels[1] or probs[0] != labels[1]:
            wrong += 1
        db.execute("DELETE FROM attn_models WHERE name = 'x'")
    check(wrong == 0, f"{mode}: {cycles} import / rollback / re-import cycles of same-size "
          f"weights ({same_ms} in the same millisecond): {wrong} served the rolled-back weights")
    db.close()


# ----------------------------------------------------------------------------- 4. cursor loop

def test_cursor_loop(mode):
    path, db = fresh(mode, "loop")
    R.make_table(db, n=60)
    db.execute("CREATE TABLE jobs(name TEXT)")
    db.executemany("INSERT INTO jobs VALUES (?)", [("a",), ("b",), ("c",)])
    db.execute("CREATE TABLE results(name TEXT, version INTEGER, best INTEGER, label TEXT)")
    errors = []
    for (name,) in db.execute("SELECT name FROM jobs"):
        try:
            out = json.loads(db.execute("SELECT attn_fit(?, 'SELECT text, label FROM docs', ?)",
                                        (name, R.TINY)).fetchone()[0])
            v = db.execute("SELECT attn_deploy(?, ?)", (name, out["version"])).fetchone()[0]
            best = db.execute("SELECT attn_deploy(?, 'best')", (name,)).fetchone()[0]
            label = db.execute("SELECT attn_predict(?, 'goal team')", (name,)).fetchone()[0]
            db.execute("INSERT INTO results VALUES (?, ?, ?, ?)", (name, v, best, label))
        except sqlite3.Error as e:
            errors.append(f"{name}: {e}")
    got = db.execute("SELECT name, version, best FROM results ORDER BY name").fetchall()
    check(not errors and got == [("a", 1, 1), ("b", 1, 1), ("c", 1, 1)],
          f"{mode}: a loop over a cursor fits, deploys, predicts and inserts for every row: "
          f"{got}, errors {errors}")

    if mode != "wal":  # rollback journal: nobody else can write while the cursor reads
        db.close()
        return
    # Another connection writes while the loop runs: the caller's snapshot is out of date.
    other = connect(path)
    errors = []
    fits = []
    for (name,) in db.execute("SELECT name FROM jobs"):
        other.execute("INSERT INTO results VALUES ('other', 0, 0, '')")
        try:
            out = json.loads(db.execute("SELECT attn_fit(?, 'SELECT text, label FROM docs', ?)",
                                        (name, R.TINY)).fetchone()[0])
            fits.append(out["version"])
            db.execute("SELECT attn_deploy(?, ?)", (name, out["version"])).fetchone()
        except sqlite3.Error as e:
            errors.append(str(e))
    saved = other.execute("SELECT count(*) FROM attn_models WHERE version = 2").fetchone()[0]
    why = all("still reading" in e and "finish" in e for e in errors)
    # Python's cursor has stepped past the last row when it hands it out: for 'c' the statement
    # has ended, so that deploy works
    check(fits == [2, 2, 2] and saved == 3 and len(errors) == 2 and why,
          f"{mode}: another connection writes during the loop: every model saved "
          f"({fits}, {saved} in the store); what cannot run says why: {errors}")
    e = error_of(db, "SELECT attn_deploy('a', 2)")
    check(e is None, f"{mode}: once the cursor ended, the deploy works: {e}")
    other.close()
    db.close()


# ----------------------------------------------------------------------------- 7. bad versions

def test_non_integer_version(mode):
    path, db = fresh(mode, "edit")
    R.make_table(db, n=60)
    R.train(db, model="e")
    R.train(db, model="e")
    for bad in ("1.5", "'v1'"):
        db.execute(f"UPDATE attn_models SET version = {bad}, deployed = 0, "
                   "metrics = json_set(metrics, '$.val_f1', 2.0) "
                   "WHERE name = 'e' AND version = 1")
        e = error_of(db, "SELECT attn_deploy('e', 'best')")
        check(e is not None and e.startswith("attn_deploy: model 'e' has a version that is "
                                             "not an integer"),
              f"{mode}: a version {bad} of the highest val_f1: attn_deploy('e', 'best') -> {e}")
        db.execute("UPDATE attn_models SET deployed_seq = 99 WHERE name = 'e' AND "
                   "typeof(version) != 'integer'")
        e = error_of(db, "SELECT attn_deploy('e', 'previous')")
        check(e is not None and e.startswith("attn_deploy: model 'e' has a version that is "
                                             "not an integer"),
              f"{mode}: the same version as 'previous': {e}")
        db.execute("UPDATE attn_models SET version = 1, deployed_seq = 1 WHERE name = 'e' AND "
                   "typeof(version) != 'integer'")
    db.close()


def main():
    R.reexec_with_preload()
    R.require_extension()
    only = sys.argv[1:]
    tests = [("disk_full", test_disk_full), ("interrupt", test_interrupt_during_save),
             ("kill", test_kill_during_save), ("previous", test_previous_after_tune),
             ("cache", test_rollback_reimport), ("loop", test_cursor_loop),
             ("version", test_non_integer_version)]
    try:
        for name, fn in tests:
            if only and name not in only:
                continue
            for mode in MODES:
                start = time.time()
                fn(mode)
                print(f"     ({name} {mode}: {time.time() - start:.1f} s)", flush=True)
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    R.finish("test_store_stress")


if __name__ == "__main__":
    main()
