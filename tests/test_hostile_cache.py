"""test_hostile_cache.py -- the model cache of a connection is bounded in bytes.

Before, a connection kept up to 12 parsed models whatever their size (4 in the cache, 8 more
through the name -> model answers it remembers): a 22 MB database of 16 models left 3.2 GB
resident after one `SELECT name, attn_predict(name, 'a b') FROM attn_models`. Now the cache
keeps the most recently used models whose cost (attn_model_cost) adds up to at most
attn_cache_limit() bytes (default 256 MB), evicting the least recently used, and always the
model in use. Checked here:
  - attn_cache_limit() is 268435456 by default; attn_cache_limit(n) sets it and returns it;
    a negative or non-integer limit is an error; it is direct-only (a view of a database
    cannot lift the bound);
  - 16 models read by one statement: with the limit 0 the heap the child keeps afterwards grows
    by about one model, with an unbounded limit by all 16; the answers are the same;
  - 14 models of about 29 MB each: by default the heap kept grows by 256 MB less two models
    to 256 MB plus one, unbounded by all 14 (400 MB).
Each measurement runs in a fresh Python process. Run from the repository root:
/usr/bin/python3 tests/test_hostile_cache.py
"""
import os
import random
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability as R  # noqa: E402

R.reexec_with_preload()
R.require_extension()
check = R.check

tmp = tempfile.mkdtemp()
path = os.path.join(tmp, "sixteen.db")
db = R.connect(path)
db.execute("PRAGMA synchronous = OFF")  # a scratch file: no fsync per statement
rng = random.Random(1)
db.execute("CREATE TABLE docs(text, label)")
db.executemany("INSERT INTO docs VALUES(?, ?)",
               [(" ".join(f"w{rng.randrange(6000)}" for _ in range(6)), str(i % 3))
                for i in range(8000)])
# a large vocabulary and an LSTM: a parsed model takes far more memory than its BLOB
R.train(db, options='{"epochs":1,"cell":"lstm","hidden":64,"embed_dim":4,"fc_hidden":4,'
                    '"vocab_size":6000,"progress":false}')
blob = db.execute("SELECT weights FROM attn_models").fetchone()[0]
for i in range(15):
    db.execute("SELECT attn_import(?, ?)", (f"m{i:02d}", blob))

check(db.execute("SELECT attn_cache_limit()").fetchone()[0] == 256 << 20,
      "attn_cache_limit() is 268435456 (256 MB) by default")
check(db.execute("SELECT attn_cache_limit(1000)").fetchone()[0] == 1000 and
      db.execute("SELECT attn_cache_limit()").fetchone()[0] == 1000,
      "attn_cache_limit(1000) sets the limit and returns it")
for bad in ("-1", "'big'", "1.5", "NULL"):
    err = R.error_of(db, f"SELECT attn_cache_limit({bad})")
    check(err is not None and err.startswith("attn_cache_limit: the limit must be an integer "
                                             "number of bytes >= 0"),
          f"attn_cache_limit({bad}): {err!r}")
db.execute("CREATE VIEW lift AS SELECT attn_cache_limit(1 << 60) AS x")
err = R.error_of(db, "SELECT x FROM lift")
check(err is not None and "unsafe use of attn_cache_limit()" in err,
      f"attn_cache_limit in a view: refused ({err!r})")
db.close()

# The child measures the heap its allocations hold after the statement (what the cache keeps):
# glibc's mallinfo2 (in-use chunks plus mmapped blocks), or under AddressSanitizer (make
# test-asan preloads it; its allocator replaces glibc's, and its quarantine keeps freed memory
# resident, so RSS says nothing there) the sanitizer's count of allocated bytes.
CHILD = r"""
import ctypes, sqlite3, sys
libc = ctypes.CDLL(None)
try:
    asan = libc.__sanitizer_get_current_allocated_bytes
    asan.restype = ctypes.c_size_t
    heap = lambda: asan()
except AttributeError:
    class Mallinfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                    "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
    libc.mallinfo2.restype = Mallinfo2
    heap = lambda: (lambda m: m.uordblks + m.hblkhd)(libc.mallinfo2())
db = sqlite3.connect(sys.argv[1])
db.enable_load_extension(True)
db.load_extension(sys.argv[2])
if sys.argv[3] != "default":
    db.execute("SELECT attn_cache_limit(?)", (int(sys.argv[3]),))
before = heap()
rows = db.execute("SELECT name, attn_predict(name, 'w1 w2') FROM attn_models ORDER BY name").fetchall()
after = heap()
print((after - before) // 1024, repr(rows))
"""


# On the CPU: on a machine with a GPU, models of device "auto" would load there, and the CUDA
# runtime's and cuBLAS's own start (about 150 MB of host heap at the first model) would swamp the
# cache's bytes that this measures.
CPU_ONLY = dict(os.environ, ATTNEXT_CUDA_LIB=os.devnull)


def run(limit, path=path):
    p = subprocess.run([sys.executable, "-c", CHILD, path, R.extension_path(), str(limit)],
                       capture_output=True, text=True, timeout=300, env=CPU_ONLY)
    if p.returncode != 0:
        print("     child failed: " + (p.stdout + p.stderr)[-300:])
        return None, None
    grow, rows = p.stdout.split(" ", 1)
    return int(grow), rows


grow_all, rows_all = run(1 << 50)
grow_none, rows_none = run(0)
print(f"     16 models ({len(blob)} bytes each as a BLOB): the heap kept after the statement grew "
      f"by {grow_all and grow_all // 1024} MB unbounded, {grow_none and grow_none // 1024} MB "
      f"with the limit 0")
per_model = grow_all / 16 if grow_all else 0
check(grow_all is not None and grow_none is not None and grow_none < 3 * per_model,
      f"with attn_cache_limit(0) the heap kept grows by {grow_none and grow_none // 1024} MB, less "
      f"than 3 models ({3 * per_model / 1024:.0f} MB; all 16: {grow_all and grow_all // 1024} MB)")
check(rows_all == rows_none and rows_all and rows_all.count("('m") == 16,
      "the 16 answers are the same whatever the limit")

# The default bound: models of about 29 MB parsed each (an LSTM of 128 over some 13,000 words:
# a 3.8 MB BLOB and the inference tables its size allows), 14 of them, 400 MB in all.
# Unbounded, the heap kept grows by all 14; by default by at most 256 MB plus the model in use,
# and by more than 256 MB less two models (the cache fills up to its bound, it does not drop
# what fits).
big = os.path.join(tmp, "fourteen.db")
db = R.connect(big)
db.execute("PRAGMA synchronous = OFF")
db.execute("CREATE TABLE docs(text, label)")
db.executemany("INSERT INTO docs VALUES(?, ?)",
               [(" ".join(f"w{rng.randrange(20000)}" for _ in range(6)), str(i % 3))
                for i in range(4000)])
R.train(db, options='{"epochs":1,"cell":"lstm","hidden":128,"embed_dim":64,"fc_hidden":4,'
                    '"vocab_size":20000,"subword_buckets":0,"progress":false}')
blob = db.execute("SELECT weights FROM attn_models").fetchone()[0]
for i in range(13):
    db.execute("SELECT attn_import(?, ?)", (f"m{i:02d}", blob))
db.close()
grow_all, rows_all = run(1 << 50, big)
grow_default, rows_default = run("default", big)
per_model = grow_all / 14 if grow_all else 0
bound = 256 << 10  # KB, as the child reports
print(f"     14 models ({len(blob)} bytes each as a BLOB, {per_model / 1024:.0f} MB parsed): the "
      f"heap kept grew by {grow_all and grow_all // 1024} MB unbounded, "
      f"{grow_default and grow_default // 1024} MB by default")
check(grow_all is not None and grow_all > bound + 2 * per_model,
      f"unbounded: 14 models keep {grow_all and grow_all // 1024} MB, over 256 MB + 2 models "
      f"(else this proves nothing of the default)")
check(grow_default is not None and bound - 2 * per_model < grow_default <= bound + per_model,
      f"default limit: the heap kept grows by {grow_default and grow_default // 1024} MB, "
      f"within 256 MB - 2 models and 256 MB + 1 model ({(bound - 2 * per_model) / 1024:.0f} to "
      f"{(bound + per_model) / 1024:.0f} MB)")
check(rows_default == rows_all and rows_all and rows_all.count("('m") == 14,
      "the 14 answers are the same by default and unbounded")

shutil.rmtree(tmp)
R.finish("test_hostile_cache")
