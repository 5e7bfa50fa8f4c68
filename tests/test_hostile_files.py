"""test_hostile_files.py -- unbounded inputs of attn_vectors_load and attn_matrix.

  - attn_vectors_load reads regular files only: /dev/zero (grew until allocation failed, then
    reported success with 0 rows), a FIFO (blocked forever), a directory are refused at once
    with a clear error; a 600 MB line is refused as soon as it passes 1 MB (it was read whole:
    600 MB resident), and a file of blank lines can be interrupted;
  - attn_matrix refuses vectors of more than 4096 dimensions before it reads them (one 1 MB
    vector for "the" and two 512-word texts took 100 s, not interruptible) and honours
    sqlite3_interrupt while it looks up words and computes the weights.
Each case that hung or grew runs in its own sqlite3 shell ($SQLITE3) with a time limit.
Run from the repository root: /usr/bin/python3 tests/test_hostile_files.py
"""
import os
import resource
import shlex
import shutil
import sqlite3
import struct
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

SQLITE3 = shlex.split(os.environ.get("SQLITE3", "sqlite3"))
ASAN = bool(os.environ.get("ATTNEXT_PRELOAD"))
tmp = tempfile.mkdtemp()


def limit_memory():
    # a runaway read must not take the machine's memory (ASan reserves terabytes of address space)
    if not ASAN:
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def shell(sql, timeout=30, path=":memory:"):
    """(exit status or 'timeout', output, seconds, peak KB of the shell)."""
    script = f".load {R.extension_path()}\n{sql}\n"
    start = time.time()
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    try:
        p = subprocess.run(SQLITE3 + [path], input=script, capture_output=True, text=True,
                           timeout=timeout, preexec_fn=limit_memory)
        status, out = p.returncode, (p.stdout + p.stderr).strip()
    except subprocess.TimeoutExpired:
        status, out = "timeout", ""
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return status, out, time.time() - start, max(peak, before)


# ---------------------------------------------------------------- attn_vectors_load
# first: the peak memory of the children is the largest of all so far
big = os.path.join(tmp, "big.txt")
with open(big, "wb") as f:  # a 600 MB line (sparse: costs no disk)
    f.write(b"the ")
    f.truncate(600 << 20)
status, out, secs, peak = shell(f"SELECT count(*) FROM attn_vectors_load('{big}');")
check(status == 1 and "line 1 of" in out and "is longer than 1048576 bytes" in out,
      f"a 600 MB line: refused ({out[-90:]!r})")
print(f"     peak memory of the shell: {peak // 1024} MB, {secs:.2f} s")
check(peak < (350 << 10), f"a 600 MB line is refused before it is read whole: the shell peaked at "
                          f"{peak // 1024} MB (< 350 MB)")
os.unlink(big)

fifo = os.path.join(tmp, "fifo")
os.mkfifo(fifo)
os.mkdir(os.path.join(tmp, "dir"))
for what, path in (("/dev/zero", "/dev/zero"), ("a FIFO", fifo),
                   ("a directory", os.path.join(tmp, "dir"))):
    status, out, secs, _ = shell(f"SELECT count(*) FROM attn_vectors_load('{path}');")
    check(status == 1 and "is not a regular file" in out and secs < 20,
          f"attn_vectors_load on {what}: refused in {secs:.2f} s ({status}: {out[-110:]!r})")

ok = os.path.join(tmp, "ok.txt")
with open(ok, "w") as f:
    f.write("2 3\nthe 0.1 0.2 0.3\ncat 1 2 3\n\n")
status, out, _, _ = shell(f"SELECT count(*), sum(length(vector)) FROM attn_vectors_load('{ok}');")
check(status == 0 and out == "2|24", f"a regular file still loads ({out!r})")

# blank lines are skipped without producing rows: the reader itself checks for interrupts
blank = os.path.join(tmp, "blank.txt")
with open(blank, "wb") as f:
    f.write(b"\n" * (50 << 20))
db = R.connect(":memory:")
# the interrupt comes at a tenth of the uninterrupted read's time, not after a fixed sleep that
# a fast machine's read could beat (tests/run_all.sh runs this test alone: no other load)
start = time.time()
n = db.execute("SELECT count(*) FROM attn_vectors_load(?)", (blank,)).fetchone()[0]
full = time.time() - start
check(n == 0, f"attn_vectors_load on 50 MB of blank lines: {n} rows in {full:.2f} s")
timer = threading.Timer(full / 10, db.interrupt)
start = time.time()
timer.start()
err = R.error_of(db, "SELECT count(*) FROM attn_vectors_load(?)", (blank,))
secs = time.time() - start
timer.cancel()
check(err is not None and "interrupted" in err and secs < full / 2 + 0.05,
      f"attn_vectors_load on 50 MB of blank lines, interrupted after {full / 10:.2f} s: "
      f"stopped after {secs:.2f} s (< {full / 2 + 0.05:.2f} s, half the uninterrupted time; "
      f"{err!r})")
db.close()
os.unlink(blank)

# ---------------------------------------------------------------- attn_matrix
db_path = os.path.join(tmp, "vectors.db")
db = R.connect(db_path)
db.execute("CREATE TABLE vecs(word TEXT PRIMARY KEY, vector BLOB)")
db.execute("INSERT INTO vecs VALUES('the', zeroblob(1 << 20))")  # 262,144 dimensions
db.close()
text = " ".join(["the"] * 512)
status, out, secs, _ = shell(f"SELECT count(*) FROM attn_matrix('{text}', '{text}', 'vecs');",
                             timeout=30, path=db_path)
check(status == 1 and "has 262144 dimensions, at most 4096 are supported" in out and secs < 10,
      f"attn_matrix with a 1 MB vector and two 512-word texts: refused in {secs:.2f} s "
      f"({status}: {out[-100:]!r})")
status, out, _, _ = shell("SELECT attn_matrix_svg('the cat', 'the', 'vecs');", path=db_path)
check(status == 1 and "attn_matrix_svg: the vector of 'the' in 'vecs' has 262144 dimensions" in out,
      f"attn_matrix_svg: the same limit ({out[-90:]!r})")

# the largest allowed: 4096 dimensions, 512 distinct words on each side
db = R.connect(db_path)
db.execute("DELETE FROM vecs")
vec = struct.pack("<4096f", *([0.001] * 4096))
R.insert_rows(db, "INSERT INTO vecs VALUES(?, ?)", [(f"w{i}", vec) for i in range(1024)])
q = " ".join(f"w{i}" for i in range(512))
k = " ".join(f"w{i}" for i in range(512, 1024))
sql = "SELECT count(*) FROM attn_matrix(?, ?, 'vecs')"
start = time.time()
n = db.execute(sql, (q, k)).fetchone()[0]
full = time.time() - start
check(n == 512 * 512, f"attn_matrix at 4096 dimensions, 512 x 512 words: {n} rows in {full:.2f} s")
timer = threading.Timer(full / 10, db.interrupt)
start = time.time()
timer.start()
err = R.error_of(db, sql, (q, k))
secs = time.time() - start
timer.cancel()
check(err is not None and "interrupted" in err and secs < full / 2 + 0.05,
      f"interrupted after {full / 10:.2f} s: stopped after {secs:.2f} s (< {full / 2 + 0.05:.2f} s, "
      f"half the uninterrupted time; {err!r})")
db.close()

# ---------------------------------------------------------------- attn_matrix: a huge vector
# A crafted vectors table with a 256 MB vector: refused from its length, never read (was: the
# whole BLOB read into memory, then refused).
huge_path = os.path.join(tmp, "huge.db")
hdb = sqlite3.connect(huge_path)
hdb.execute("CREATE TABLE v(word, vector)")
hdb.execute("INSERT INTO v VALUES('a', zeroblob(256000000))")
hdb.commit()
hdb.close()
CHILD = r"""
import resource, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.enable_load_extension(True)
db.load_extension(sys.argv[2])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    db.execute("SELECT count(*) FROM attn_matrix('a', 'a', 'v')").fetchall()
    err = None
except sqlite3.Error as e:
    err = str(e)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024, err)
"""
p = subprocess.run([sys.executable, "-c", CHILD, huge_path, R.extension_path()],
                   capture_output=True, text=True, timeout=120)
grew, _, err = p.stdout.strip().partition(" ")
check(p.returncode == 0 and err.startswith("attn_matrix: the vector of 'a' in 'v' has 64000000 "
                                           "dimensions") and int(grew) < 16,
      f"attn_matrix with a 256 MB vector: refused, peak grew by {grew} MB: {err or p.stderr[-200:]}")

shutil.rmtree(tmp)
R.finish("test_hostile_files")
