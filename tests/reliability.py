"""reliability.py -- helpers shared by the Python tests (check, connect, error_of, the ASan
re-exec, ...): the reliability tests (tests/test_hostile*.py, test_faults*.py,
test_concurrency*.py, test_field_*.py) and test_metrics_sql, test_warm_start, test_explain,
test_tune; not a test itself.

The extension is loaded from $ATTNEXT (default ./attnext, as sqlite3_load_extension takes it).
Under `make test-asan` the extension is built with AddressSanitizer: $ATTNEXT_PRELOAD names
libasan, and reexec_with_preload() restarts the Python process with it in LD_PRELOAD (leak
detection off for Python itself, which keeps objects until exit by design).
"""
import os
import random
import sqlite3
import sys
import threading
import time

failures = 0


def check(cond, what):
    """Print one compared thing; count failures."""
    global failures
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures += 1
    return cond


def finish(name):
    print(f"{name}: {failures} failed", flush=True)
    sys.exit(1 if failures else 0)


def reexec_with_preload():
    pre = os.environ.get("ATTNEXT_PRELOAD")
    if pre and pre not in os.environ.get("LD_PRELOAD", ""):
        env = dict(os.environ)
        env["LD_PRELOAD"] = pre + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
        opts = env.get("ASAN_OPTIONS", "")
        env["ASAN_OPTIONS"] = (opts + ":" if opts else "") + "detect_leaks=0"
        os.execve(sys.executable, [sys.executable] + sys.argv, env)


def extension_path():
    return os.path.abspath(os.environ.get("ATTNEXT", "attnext"))


def require_extension():
    if not os.path.exists(extension_path() + ".so"):
        print(f"{extension_path()}.so not built (run make)")
        sys.exit(77)


def require_jobs_extension():
    """Load the tests' module of a dqlite node's job functions instead of attnext.so from here
    on: $ATTNEXT_JOBS (default $BUILD/tests/attnext_jobs_test, which make check builds), attnext
    registered as build/attnext-node registers it, with attn_jobs, attn_cancel and
    attn_job_commit, which attnext.so does not have (tests/attnext_jobs_test.c)."""
    build = os.environ.get("BUILD", "build")
    jobs = os.environ.get("ATTNEXT_JOBS", os.path.join(build, "tests", "attnext_jobs_test"))
    if not os.path.exists(jobs + ".so"):
        print(f"{os.path.abspath(jobs)}.so not built (make check builds it)")
        sys.exit(77)
    os.environ["ATTNEXT"] = jobs


def connect(path, uri=False, timeout=5.0):
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, uri=uri,
                         timeout=timeout)
    db.enable_load_extension(True)
    db.load_extension(extension_path())
    return db


def snapshot(db):
    """Every row of every table (weights as bytes) and the schema: what 'unchanged' means."""
    tables = [r[0] for r in db.execute(
        "SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")]
    snap = {"schema": db.execute("SELECT type, name, sql FROM sqlite_schema ORDER BY name").fetchall()}
    for t in tables:
        snap[t] = db.execute(f'SELECT * FROM "{t}" ORDER BY rowid').fetchall()
    return snap


def interrupt_in_phase(db, other, name, phase, train, wait=60):
    """Run train() (an attn_fit on db) in a thread until a second connection, other, sees the
    run `name` in `phase` of attn_status with a batch done, then interrupt db. Returns the rows
    seen (phase, epoch, batch, batches), train's error message (None: it returned) and whether
    the thread ended within 120 s of the interrupt."""
    seen, done = [], {}

    def run():
        try:
            train()
            done["error"] = None
        except Exception as e:  # noqa: BLE001
            done["error"] = str(e)

    worker = threading.Thread(target=run)
    worker.start()
    deadline = time.time() + wait
    while time.time() < deadline and not seen:
        seen = other.execute("SELECT phase, epoch, batch, batches FROM attn_status WHERE name = ? "
                             "AND phase = ? AND batch > 0", (name, phase)).fetchall()
        time.sleep(0.05)
    db.interrupt()
    worker.join(120)
    return seen, done.get("error"), not worker.is_alive()


def error_of(db, sql, args=()):
    """The error message of running sql to completion, or None when it succeeds."""
    try:
        db.execute(sql, args).fetchall()
        return None
    except sqlite3.Error as e:
        return str(e)


WORDS = {
    "sports": "match goal team coach season striker league final score win".split(),
    "tech": "software chip phone cloud data network robot server code app".split(),
    "money": "bank stocks market profit shares rates bond fund trade price".split(),
}
FILLER = "the a of in on today new big report says".split()


def text_position(text):
    """The position in [0, 1) of a text in the split by text (engine/train_data.c,
    nn_train_text_position), written again here so that the tests check the engine against it:
    FNV-1a over the UTF-8 bytes, SplitMix64's finaliser, the top 53 bits."""
    m = (1 << 64) - 1
    h = 0xcbf29ce484222325 ^ 0x53504c4954000001
    for b in str(text).encode():
        h = ((h ^ b) * 0x100000001b3) & m
    h ^= h >> 30
    h = (h * 0xbf58476d1ce4e5b9) & m
    h ^= h >> 27
    h = (h * 0x94d049bb133111eb) & m
    h ^= h >> 31
    return (h >> 11) * 2.0 ** -53


def make_rows(n, seed=1, classes=("sports", "tech", "money")):
    """n short texts whose words give their class away (a tiny model learns them)."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        c = classes[i % len(classes)]
        words = [rng.choice(WORDS[c]) for _ in range(3)] + [rng.choice(FILLER) for _ in range(2)]
        rng.shuffle(words)
        rows.append((" ".join(words), c))
    return rows


# A model that trains in milliseconds. With a validation split, as every test of the store's
# mechanisms (deploy 'best', if_better, the figures) was written for: the default recipe keeps
# none below 5,000 labelled rows (test_unlabelled.py and tests/sql/unlabelled.sql test that).
TINY = ('{"epochs":2,"hidden":4,"embed_dim":4,"fc_hidden":4,"vocab_size":50,"progress":false,'
        '"validation":"random"}')


def insert_rows(db, sql, rows):
    """db.executemany(sql, rows), in one transaction on a connection in autocommit mode (those
    of connect): there a commit per row of a file database is a sync of the disk per row (3,000
    rows in rollback-journal mode took 5 to 19 s of waiting). A connection already in a
    transaction, or not in autocommit mode, is left to its own."""
    whole = db.isolation_level is None and not db.in_transaction
    if whole:
        db.execute("BEGIN")
    db.executemany(sql, rows)
    if whole:
        db.execute("COMMIT")


def make_table(db, name="docs", n=60, seed=1):
    db.execute(f"CREATE TABLE IF NOT EXISTS {name}(id INTEGER PRIMARY KEY, text, label)")
    insert_rows(db, f"INSERT INTO {name}(text, label) VALUES(?, ?)", make_rows(n, seed))


def train(db, model="m", query="SELECT text, label FROM docs", options=TINY):
    return db.execute("SELECT * FROM attn_train(?, ?, ?)", (model, query, options)).fetchall()
