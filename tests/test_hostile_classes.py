"""test_hostile_classes.py -- attn_evaluate and attn_confusion on a model of many classes.

A crafted 10,000-class model (tiny otherwise) and one row: attn_evaluate kept two dense K x K
matrices of int64 and a K x K list (2 GB for 10,000 classes; a 16,000-class model took 12 s
and 3.9 GB). Now the counts per class are a few arrays and the confusion counts are sparse:
each query runs in a child process whose peak memory is measured. The answers are checked
against counts made in Python, on a 300-class model and labels the model does not know.
An interrupt stops attn_evaluate between chunks of rows.
Run from the repository root: /usr/bin/python3 tests/test_hostile_classes.py
"""
import json
import os
import random
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

db = R.connect(":memory:")
R.make_table(db)
R.train(db)
good = db.execute("SELECT weights FROM attn_models WHERE name = 'm'").fetchone()[0]
db.close()


def with_classes(blob, classes, seed=1):
    """The model with fc2 resized to `classes` outputs (random weights), labels c0000, ..."""
    hlen = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + hlen])
    data = blob[8 + hlen:]
    rng = random.Random(seed)
    tensors = []
    for name, t in header.items():
        if name == "__metadata__":
            continue
        raw = data[t["data_offsets"][0]:t["data_offsets"][1]]
        if name == "fc2.weight":
            t["shape"][0] = classes
            raw = struct.pack(f"<{classes * t['shape'][1]}f",
                              *[rng.uniform(-1, 1) for _ in range(classes * t["shape"][1])])
        elif name == "fc2.bias":
            t["shape"] = [classes]
            raw = struct.pack(f"<{classes}f", *[rng.uniform(-1, 1) for _ in range(classes)])
        tensors.append((t["data_offsets"][0], name, t, raw))
    tensors.sort()
    offset, payload = 0, b""
    for _, name, t, raw in tensors:
        t["data_offsets"] = [offset, offset + len(raw)]
        offset += len(raw)
        payload += raw
    header["__metadata__"]["labels"] = json.dumps([f"c{i:05d}" for i in range(classes)])
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + payload


tmp = tempfile.mkdtemp()
path = os.path.join(tmp, "classes.db")
db = R.connect(path)
db.execute("PRAGMA synchronous = OFF")  # a scratch file: no fsync per statement
db.execute("SELECT attn_import('big', ?)", (with_classes(good, 10000),))
db.execute("SELECT attn_import('mid', ?)", (with_classes(good, 300, seed=2),))
db.execute("CREATE TABLE one(text, label)")
db.execute("INSERT INTO one VALUES('goal match team', 'c00007')")
db.close()

CHILD = r"""
import resource, sqlite3, sys, time
db = sqlite3.connect(sys.argv[1])
db.enable_load_extension(True)
db.load_extension(sys.argv[2])
start = time.time()
rows = db.execute(sys.argv[3]).fetchall()
print(len(rows), round(time.time() - start, 3), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def in_child(sql):
    """(rows, seconds, peak KB) of sql run in a fresh Python process; None when it failed."""
    p = subprocess.run([sys.executable, "-c", CHILD, path, R.extension_path(), sql],
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        print("     child failed: " + (p.stdout + p.stderr)[-300:])
        return None
    n, secs, kb = p.stdout.split()
    return int(n), float(secs), int(kb)


base = in_child("SELECT attn_predict('big', 'goal') IS NOT NULL")
print(f"     a child that loads the 10,000-class model and predicts: peak {base[2] // 1024} MB")
for what, sql, nrows in (
        ("attn_evaluate", "SELECT * FROM attn_evaluate('big', 'SELECT text, label FROM one')", 10001),
        ("attn_confusion all_labels (first 5 rows)",
         "SELECT * FROM attn_confusion('big', 'SELECT text, label FROM one', "
         "'{\"all_labels\":true}') LIMIT 5", 5),
        ("attn_confusion all_labels (the row's cell among the first 100,000)",
         "SELECT * FROM (SELECT * FROM attn_confusion('big', 'SELECT text, label FROM one', "
         "'{\"all_labels\":true}') LIMIT 100000) WHERE count > 0", 1)):
    got = in_child(sql)
    ok = got is not None and got[0] == nrows and got[2] - base[2] < 100 * 1024
    check(ok, f"{what} of a 10,000-class model on one row: {got and got[0]} rows (expected "
              f"{nrows}) in {got and got[1]} s, peak {got and got[2] // 1024} MB, "
              f"{got and (got[2] - base[2]) // 1024} MB over loading the model (< 100 MB; a dense "
              f"K x K matrix is 800 MB)")

# By default the matrix has the labels that occur in the rows (as actual or predicted): three
# rows of the 10,000-class model give at most 6 x 6 cells, not 10^8 (9 s).
db = R.connect(path)
db.execute("CREATE TABLE three(text, label)")
db.executemany("INSERT INTO three VALUES(?, ?)",
               [("goal match team", "c00007"), ("chip phone", "c00042"), ("bank", "c09999")])
pred3 = [db.execute("SELECT attn_predict('big', text) FROM three WHERE rowid = ?", (i,)).fetchone()[0]
         for i in (1, 2, 3)]
actual3 = ["c00007", "c00042", "c09999"]
occur = sorted(set(actual3) | set(pred3))
want = [(a, p, sum(1 for x, y in zip(actual3, pred3) if (x, y) == (a, p)))
        for a in occur for p in occur]
start = time.time()
got = db.execute("SELECT actual, predicted, count FROM attn_confusion('big', "
                 "'SELECT text, label FROM three')").fetchall()
secs = time.time() - start
check(got == want and secs < 1,
      f"attn_confusion of 3 rows of a 10,000-class model: {len(got)} rows in {secs:.3f} s, the "
      f"{len(occur)} labels that occur ({len(want)} expected; with all_labels 10^8)")
db.close()

# Answers: checked against counts made here, on a 300-class model with unknown labels too.
db = R.connect(path)
rng = random.Random(5)
rows = [(" ".join(rng.choice("goal match team chip phone bank stocks the a".split())
                  for _ in range(4)), f"c{rng.randrange(310):05d}") for _ in range(2000)]
db.execute("CREATE TABLE many(text, label)")
R.insert_rows(db, "INSERT INTO many VALUES(?, ?)", rows)
pred = {t: db.execute("SELECT attn_predict('mid', ?)", (t,)).fetchone()[0] for t, _ in rows}
counts = {}
for t, label in rows:
    counts[(label, pred[t])] = counts.get((label, pred[t]), 0) + 1
model_labels = [f"c{i:05d}" for i in range(300)]
classes = sorted(set(model_labels) | {label for _, label in rows})
confusion = db.execute("SELECT actual, predicted, count FROM attn_confusion('mid', "
                       "'SELECT text, label FROM many', '{\"all_labels\":true}')").fetchall()
expected = [(a, p, counts.get((a, p), 0)) for a in classes for p in model_labels]
check(confusion == expected,
      f"attn_confusion all_labels of 2,000 rows, 300 model classes and {len(classes) - 300} "
      f"unknown labels: {len(confusion)} rows, equal to the counts made in Python "
      f"({len(expected)} rows)")
occurring = sorted({label for _, label in rows} | set(pred.values()))
confusion = db.execute("SELECT actual, predicted, count FROM attn_confusion('mid', "
                       "'SELECT text, label FROM many')").fetchall()
expected = [(a, p, counts.get((a, p), 0)) for a in occurring for p in occurring
            if p in set(model_labels)]
check(confusion == expected,
      f"attn_confusion of the same rows: the {len(occurring)} labels that occur, {len(confusion)} "
      f"rows, equal to the counts made in Python ({len(expected)} rows)")
evaluate = {r[0]: r[1:] for r in db.execute(
    "SELECT * FROM attn_evaluate('mid', 'SELECT text, label FROM many')")}
bad = 0
for c in classes:
    tp = counts.get((c, c), 0)
    npred = sum(v for (a, p), v in counts.items() if p == c)
    support = sum(v for (a, p), v in counts.items() if a == c)
    prec = tp / npred if npred else 0.0
    rec = tp / support if support else 0.0
    f1 = 2 * tp / (support + npred) if support + npred else 0.0
    got = evaluate[c]
    if abs(got[0] - prec) > 1e-12 or abs(got[1] - rec) > 1e-12 or abs(got[2] - f1) > 1e-12 \
            or got[3] != support:
        bad += 1
check(bad == 0 and evaluate["overall"][3] == 2000 and list(evaluate)[:-1] == classes,
      f"attn_evaluate: per-class precision, recall, F1, support as sklearn's, sorted ({bad} wrong)")

# Interrupt: between chunks of rows (rows are read and predicted a chunk at a time).
db.execute("CREATE TABLE lots(text, label)")
db.execute("WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 199999) "
           "INSERT INTO lots SELECT 'goal match team chip phone bank ' || i, 'c' || (i % 300) "
           "FROM n")
sql = "SELECT count(*) FROM attn_confusion('mid', 'SELECT text, label FROM lots')"
start = time.time()
err = R.error_of(db, sql)
full = time.time() - start
timer = threading.Timer(full / 10, db.interrupt)
start = time.time()
timer.start()
err = R.error_of(db, sql)
secs = time.time() - start
timer.cancel()
check(err is not None and "interrupted" in err and secs < full / 2 + 0.1,
      f"attn_confusion of 200,000 rows ({full:.2f} s), interrupted after {full / 10:.2f} s: "
      f"stopped after {secs:.2f} s ({err!r})")
db.close()

import shutil  # noqa: E402
shutil.rmtree(tmp)
R.finish("test_hostile_classes")
