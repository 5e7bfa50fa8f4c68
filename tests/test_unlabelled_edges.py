"""test_unlabelled_edges.py -- the edges of training with unlabelled rows (a NULL label: the
skip-gram pretraining, then self-training) and of attn_uncertain, as a user and as an attacker
reach them through Python's sqlite3 (test_unlabelled.py has the ordinary uses):
  - hostile unlabelled rows train: empty texts, only stop words, only non-ASCII or control bytes,
    blobs, numbers, 10 MB texts; a NULL text among them is an error naming the row; the
    pseudo-labelled rows never pass round(self_training x training rows) nor half the
    unlabelled rows;
  - the options at their bounds ("self_training" 0, 10, 10.5, -1, "6", null; "pretrain_epochs";
    "unlabelled"), the lesson recipe, one labelled class, every label NULL, 2 labelled rows and
    6,000 unlabelled (the default recipe pretrains and self-trains, 12 rows), labels of mixed
    types, blank CSV labels through the sqlite3 shell's .import ('' is a label, NULLIF(label, '')
    makes them unlabelled), a warm start, "ensemble": 2, each validation split (the
    pseudo-labelled rows never join it: the same validation rows with and without the
    unlabelled ones; the pretraining never reads its texts);
  - the same bits at 1 and 2 threads with an ensemble, a validation split, pretraining and
    self-training on;
  - attn_status: each phase starts from batch 0 (not the pretraining's or round 1's last);
  - an interrupt from a progress handler in each phase (pretraining, the scoring of the
    unlabelled rows, round 2, the save), in WAL and rollback-journal files: "attn_fit:
    interrupted", every table as before, nothing left in attn_status, the connection usable;
  - a process killed (SIGKILL) during the pretraining and during round 2: the file passes
    PRAGMA integrity_check, no model row of the run, the next training saves;
  - attn_uncertain: ids of every type back unchanged (an integer beyond 2^53 too), duplicate ids,
    extra columns, one column, a query failing midway, an unknown or undeployed model, the heap
    limit (out of memory, then usable), an interrupt, LIMIT 1 (every row is still scored), the
    heap a row takes (300,000 rows), ties in the query's order, 2 classes against attn_probs,
    and a model whose probabilities overflow (NULL figures, those rows first, the rest still
    sorted);
Run from the repository root: /usr/bin/python3 tests/test_unlabelled_edges.py
"""
import ctypes
import json
import math
import os
import random
import shlex
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability as R  # noqa: E402

R.reexec_with_preload()
R.require_extension()
check, error_of = R.check, R.error_of

SMALL = {"epochs": 2, "hidden": 8, "embed_dim": 8, "fc_hidden": 8, "progress": False}
tmp = tempfile.mkdtemp(prefix="attnext-unlabelled-edges-")
db = R.connect(":memory:")
db.execute("CREATE TABLE pool(id INTEGER PRIMARY KEY, text, label)")
rows = R.make_rows(300, seed=3)
db.executemany("INSERT INTO pool(text, label) VALUES (?, ?)",
               [(t, l if i < 60 else None) for i, (t, l) in enumerate(rows)])


def fit(name, options, query="SELECT text, label FROM pool", conn=None):
    """attn_fit's summary as a dict, or its error as a string."""
    conn = conn or db
    try:
        text = options if isinstance(options, str) else json.dumps(options)
        return json.loads(conn.execute("SELECT attn_fit(?, ?, ?)",
                                       (name, query, text)).fetchone()[0])
    except sqlite3.Error as e:
        return str(e)


def tensors(name, conn=None):
    """The newest version's tensors (the bytes after the safetensors header, which names the
    options, threads included)."""
    blob = (conn or db).execute("SELECT weights FROM attn_models WHERE name = ? ORDER BY version "
                                "DESC LIMIT 1", (name,)).fetchone()[0]
    return blob[8 + int.from_bytes(blob[:8], "little"):]


def pseudo_ok(s, ratio):
    """The second round's rows: at most round(ratio x training rows) and half the unlabelled."""
    if not isinstance(s, dict):
        return False, s  # the error
    got = s.get("self_training", {}).get("pseudo_labelled_rows", 0)
    cap = min(math.floor(ratio * s["train_rows"] + 0.5), s["unlabelled_rows"] // 2)
    return 0 <= got <= cap, "%d pseudo-labelled of at most %d" % (got, cap)


# ------------------------------------------------------------------ hostile unlabelled rows
def with_unlabelled(name, texts, options=None):
    db.execute("DROP TABLE IF EXISTS odd")
    db.execute("CREATE TABLE odd(text, label)")
    db.executemany("INSERT INTO odd VALUES (?, ?)", rows[:60] + [(t, None) for t in texts])
    return fit(name, options or dict(SMALL, pretrain_epochs=2, self_training=6),
               "SELECT text, label FROM odd")


HOSTILE = {
    "empty texts": [""] * 120,
    "only stop words": ["the a of and to in"] * 120,
    "only non-ASCII": ["日本語 テキスト ☃ ÿ"] * 60 + ["\u0301\u0302 \U0001f600"] * 60,
    "only control bytes": ["\x01\x02\x03 \x7f\x1b[0m"] * 120,
    "blobs": [b"\x00\xff\xfe\x80"] * 120,
    "numbers": [12345, 6.5] * 60,
}
for what, texts in HOSTILE.items():
    s = with_unlabelled("odd", texts)
    ok = isinstance(s, dict) and s["unlabelled_rows"] == len(texts) and s["pretrain_epochs"] == 2
    check(ok and pseudo_ok(s, 6)[0], "unlabelled rows of %s train: %s" % (
        what, pseudo_ok(s, 6)[1] if ok else s))
    if what in ("empty texts", "only stop words"):  # no word: the prior, never a pseudo-label
        got = s.get("self_training", {}).get("pseudo_labelled_rows") if ok else None
        check(got in (None, 0), "%s: none pseudo-labelled (%s)" % (what, got))
big = "w" * 10_000_000  # one word of 10 MB
words = "abc " * 2_500_000  # 10 MB of words (cut at max_len)
s = with_unlabelled("big", [big, words, big])
check(isinstance(s, dict) and s["unlabelled_rows"] == 3 and s["truncated_texts"] >= 1,
      "10 MB unlabelled texts train: %s" % (
          {k: s.get(k) for k in ("unlabelled_rows", "truncated_texts", "self_training")}
          if isinstance(s, dict) else s))
s = with_unlabelled("nulltext", ["fine text"] * 5 + [None])
check(s == "attn_fit: row 66 of the query has a NULL text", "a NULL text among the "
      "unlabelled rows: %s" % s)

# ------------------------------------------------------------------ the options at their bounds
for value, want in ((0, None), (10, "ran"), (9.999999, "ran"), (1e-9, None)):
    s = fit("st", dict(SMALL, pretrain_epochs=2, self_training=value))
    ran = "ran" if "self_training" in s else None
    check(ran == want and pseudo_ok(s, value)[0],
          "\"self_training\": %r: %s" % (value, pseudo_ok(s, value)[1]))
for value, shown in ((10.5, "10.5"), (-1, "-1"), ("6", '"6"'), (None, "null"), (True, "true"),
                     ([], "an array")):
    s = fit("st", dict(SMALL, self_training=value))
    check(s == 'attn_fit: option "self_training" must be a number in [0, 10], got %s' % shown,
          "\"self_training\": %r refused: %s" % (value, s))
for value, shown in ((1001, "1001"), (-1, "-1"), (2.5, "2.5"), ("3", '"3"'), (None, "null")):
    s = fit("pt", dict(SMALL, pretrain_epochs=value))
    check(s == 'attn_fit: option "pretrain_epochs" must be an integer from 0 to 1000, got %s'
          % shown, "\"pretrain_epochs\": %r refused: %s" % (value, s))
for value, shown in ((0, "0"), ("true", "true"), (2, "2")):
    s = fit("ul", dict(SMALL, unlabelled=value))
    check(s == 'attn_fit: option "unlabelled" must be true or false, got %s' % shown,
          "\"unlabelled\": %r refused: %s" % (value, s))
s = fit("ul", dict(SMALL, unlabelled=False, pretrain_epochs=2, self_training=3))
check(s.get("unlabelled_read") is False and "self_training" not in s and
      s["unlabelled_rows"] == 240, "\"unlabelled\": false: counted, not read, no round 2: %s"
      % {k: s.get(k) for k in ("unlabelled_rows", "unlabelled_read", "self_training")})
s = fit("lesson", dict(SMALL, recipe="lesson"))
check(s.get("unlabelled_read") is False and "self_training" not in s,
      "the lesson recipe neither pretrains nor self-trains by default")
s = fit("lesson", dict(SMALL, recipe="lesson", self_training=3, pretrain_epochs=2))
check(s.get("pretrain_epochs") == 2 and s.get("self_training", {}).get("first_epoch") == 3 and
      pseudo_ok(s, 3)[0], "the lesson recipe with both asked for: %s" % s.get("self_training"))

# ------------------------------------------------------------------ labels
err = fit("one", SMALL, "SELECT text, iif(label IS NULL, NULL, 'sports') FROM pool")
check(err == 'attn_fit: need at least 2 distinct labels, got 1 ("sports")',
      "one labelled class and unlabelled rows: %s" % err)
for opts in (SMALL, dict(SMALL, unlabelled=False), dict(SMALL, pretrain_epochs=3)):
    err = fit("none", opts, "SELECT text, NULL FROM pool")
    check(err == "attn_fit: the query returned no labelled rows (300 rows, every label NULL): "
          "at least 2 labels are needed", "every label NULL, %s: %s" % (
              {k: opts[k] for k in opts if k not in SMALL}, err))
many = R.make_rows(6002, seed=9)
db.execute("CREATE TABLE two(text, label)")
db.executemany("INSERT INTO two VALUES (?, ?)", many[:2] + [(t, None) for t, _ in many[2:]])
s = fit("two", {"progress": False, "hidden": 8, "embed_dim": 8}, "SELECT text, label FROM two")
sized = s.get("sized", {}) if isinstance(s, dict) else {}
check(isinstance(s, dict) and s["train_rows"] == 2 and s["unlabelled_rows"] == 6000 and
      sized.get("pretrain_epochs", 0) > 0 and sized.get("self_training") == 6 and
      s["self_training"]["pseudo_labelled_rows"] == 12,
      "2 labelled rows and 6,000 unlabelled: sized %s, %s" % (
          sized, s.get("self_training") if isinstance(s, dict) else s))
db.execute("CREATE TABLE mixed(text, label)")
db.executemany("INSERT INTO mixed VALUES (?, ?)",
               [(t, [1, "1", 1.5, "one", b"x", None][i % 6]) for i, (t, _) in enumerate(rows)])
s = fit("mixed", dict(SMALL, pretrain_epochs=1, self_training=2), "SELECT text, label FROM mixed")
labels = {r[0] for r in db.execute("SELECT label FROM attn_probs('mixed', 'goal')")}
check(isinstance(s, dict) and s["unlabelled_rows"] == 50 and labels == {"1", "1.5", "one", "x"},
      "labels of mixed types and NULL: the integer 1 and the text '1' are one label, NULL "
      "none: %s" % sorted(labels))

# the sqlite3 shell's .import writes a blank CSV field as '', a label of its own; NULLIF makes it
# unlabelled (ext/REFERENCE.md, Unlabelled rows)
shell = shlex.split(os.environ.get("SQLITE3", "sqlite3"))  # under make test-asan: env LD_PRELOAD=
if shell and shutil.which(shell[0]):
    csv_path = os.path.join(tmp, "blank.csv")
    with open(csv_path, "w") as f:
        f.write("title,category\n" + "".join("%s,%s\n" % (t, l if i < 60 else "")
                                              for i, (t, l) in enumerate(rows)))
    fit_sql = ("SELECT json_extract(attn_fit('%s', 'SELECT title, %s FROM h', '%s'), "
               "'$.unlabelled_rows');\n")
    script = (".load %s\n.import --csv %s h\n" % (R.extension_path(), csv_path) +
              fit_sql % ("blank", "category", json.dumps(SMALL)) +
              fit_sql % ("nullif", "NULLIF(category, '''')", json.dumps(SMALL)) +
              "SELECT count(*) FROM attn_probs('blank', 'goal') WHERE label = '';\n")
    out = subprocess.run(shell + [":memory:"], input=script, capture_output=True, text=True)
    check(out.returncode == 0 and out.stdout.splitlines() == ["", "240", "1"],
          "sqlite3 .import of blank labels: a label '' of its own, NULLIF(category, '') 240 "
          "unlabelled rows: %r %r" % (out.stdout, out.stderr[:200]))
else:
    print("SKIP-PART %s not found: .import of blank labels not checked" % shell)

# ------------------------------------------------------------------ warm start, ensemble, splits
fit("base", dict(SMALL, pretrain_epochs=1))
s = fit("warm", dict(SMALL, **{"from": "base"}))
check(s.get("warm_start") is True and s.get("unlabelled_read") is False and
      "pretrain_epochs" not in s and "self_training" not in s,
      "a warm start keeps its vectors: the unlabelled rows counted, not read")
# asked for where it cannot run, pretraining or self-training is an error, not dropped in silence
db.execute("CREATE TABLE vec(word TEXT, vector BLOB)")
db.execute("INSERT INTO vec VALUES ('the', zeroblob(32))")
for options, want in (
        ({"from": "base", "pretrain_epochs": 2},
         'option "pretrain_epochs" cannot be used with "from": a warm start keeps the base '
         "model's vectors"),
        ({"from": "base", "self_training": 2},
         'option "self_training" cannot be used with "from": a warm start trains one round '
         "from the base model's weights"),
        ({"embeddings": "vec", "pretrain_epochs": 2},
         'option "pretrain_epochs" cannot be used with "embeddings": the embedding starts as '
         "the given vectors")):
    s = fit("refused", dict(SMALL, **options))
    check(s == "attn_fit: " + want, "%s: %s" % (options, s))
s = fit("zero", dict(SMALL, **{"from": "base", "pretrain_epochs": 0, "self_training": 0}))
check(isinstance(s, dict) and s.get("warm_start") is True, "0 is no pretraining: %s" % s)
s = fit("ens", dict(SMALL, pretrain_epochs=1, self_training=3, ensemble=2))
check(isinstance(s, dict) and "self_training" in s and pseudo_ok(s, 3)[0],
      "\"ensemble\": 2 with unlabelled rows: %s" % (
          pseudo_ok(s, 3)[1] if isinstance(s, dict) else s))
watcher = R.connect(":memory:")  # attn_status shows the runs of every connection
for split in ("none", "random", "last"):
    passes = set()  # the pretraining's rows (its batches): 2 passes over the training split's
    # texts and the unlabelled ones, never the validation rows'

    def pretraining_rows():
        r = watcher.execute("SELECT batches FROM attn_status WHERE phase = 'pretraining' AND "
                            "batches > 0").fetchone()
        if r:
            passes.add(r[0])
        return 0

    db.set_progress_handler(pretraining_rows, 1)
    with_rows = fit("split", dict(SMALL, pretrain_epochs=2, self_training=3, validation=split))
    db.set_progress_handler(None, 1)
    without = fit("split", dict(SMALL, pretrain_epochs=2, validation=split, unlabelled=False))
    figures = [(r.get("train_rows"), r.get("val_rows"), r.get("validation_sha256"))
               if isinstance(r, dict) else r for r in (with_rows, without)]
    read = 2 * (with_rows["train_rows"] + 240) if isinstance(with_rows, dict) else None
    check(figures[0] == figures[1] and pseudo_ok(with_rows, 3)[0] and passes == {read},
          "\"validation\": \"%s\": the same training and validation rows with the unlabelled "
          "rows as without (%s), %s; the pretraining read %s rows (2 x (training + 240 "
          "unlabelled): %s)" % (split, figures[0], pseudo_ok(with_rows, 3)[1], passes, read))
watcher.close()
err = fit("vq", dict(SMALL, validation_query="SELECT text, label FROM pool LIMIT 100"))
check(err == 'attn_fit: row 61 of the query has a NULL label (option "validation_query")',
      "a NULL label in the validation query names the option: %s" % err)

# ------------------------------------------------------------------ attn_tune's grid
err = error_of(db, "SELECT trial FROM attn_tune('tune', 'SELECT text, label FROM pool', "
                   "'{\"unlabelled\":[true,false]}', ?)",
               (json.dumps(dict(SMALL, pretrain_epochs=1, validation="random")),))
read = [json.loads(m).get("unlabelled_read", True) for (m,) in db.execute(
    "SELECT metrics FROM attn_models WHERE name = 'tune' ORDER BY version")]
refused = 'attn_tune: grid key "unlabelled" is an option of the whole search'
check((err or "").startswith(refused) and read == [],
      "attn_tune's grid {\"unlabelled\": [true, false]} is refused (the trials share the rows "
      "read once): %s" % (err or "read: %s" % read))

# ------------------------------------------------------------------ the same bits at any threads
opts = dict(SMALL, pretrain_epochs=2, self_training=4, ensemble=2, validation="random")
fit("t1", dict(opts, threads=1))
fit("t2", dict(opts, threads=2))
check(tensors("t1") == tensors("t2"), "the same weights at 1 and 2 threads: ensemble, split, "
      "pretraining and self-training on")


# ------------------------------------------------------------------ interrupts in each phase
def interrupt_in_phases(mode):
    path = os.path.join(tmp, "interrupt-%s.db" % mode)
    conn = R.connect(path)
    conn.execute("PRAGMA journal_mode = %s" % mode)
    other = R.connect(path)
    conn.execute("CREATE TABLE pool(id INTEGER PRIMARY KEY, text, label)")
    conn.execute("BEGIN")  # one commit, not one a row (rollback journal: an fsync each)
    conn.executemany("INSERT INTO pool(text, label) VALUES (?, ?)",
                     [(t, l if i < 60 else None)
                      for i, (t, l) in enumerate(R.make_rows(1200, seed=5))])
    conn.execute("COMMIT")
    options = dict(SMALL, epochs=3, pretrain_epochs=3, self_training=6)
    # a version before, which must stay as it is; attn_status as the run asks for an interrupt
    # (before each batch's figures): a new phase starts from batch 0, not the last one's figures
    seen = []

    def watch():
        r = other.execute("SELECT phase, batch, batches FROM attn_status WHERE name = 'x'"
                          ).fetchone()
        if r and (not seen or seen[-1] != r):
            seen.append(r)
        return 0

    conn.set_progress_handler(watch, 1)
    fit("x", options, conn=conn)
    conn.set_progress_handler(None, 1)
    starts = [seen[i] for i in range(len(seen)) if i == 0 or seen[i][0] != seen[i - 1][0]]
    order = [p for p, _, _ in starts]
    order = order[order.index("pretraining"):] if "pretraining" in order else order
    check(order == ["pretraining", "training", "self-training", "saving"] and
          all(b == 0 for _, b, _ in starts),
          "%s: attn_status's phases, each from batch 0: %s" % (mode, starts))
    # attn_status: (phase, epoch, batch, train_loss); the scoring of the unlabelled rows reports
    # its batches with no loss (NULL), round 2's epochs theirs
    phases = {
        "pretraining": lambda r: r[0] == "pretraining" and r[2] > 0,
        "scoring the unlabelled rows":
            lambda r: r[0] == "self-training" and r[3] is None and r[2] > 0,
        "round 2": lambda r: r[0] == "self-training" and r[3] is not None and r[3] > 0 and r[1] > 3,
        "saving": lambda r: r[0] == "saving",
    }
    for phase, cond in phases.items():
        before = R.snapshot(conn)
        hit = []

        def handler():
            r = other.execute("SELECT phase, epoch, batch, train_loss FROM attn_status "
                              "WHERE name = 'x'").fetchone()
            if r and cond(r):
                hit.append(r)
                return 1
            return 0

        conn.set_progress_handler(handler, 1)
        err = fit("x", options, conn=conn)
        conn.set_progress_handler(None, 1)
        left = other.execute("SELECT count(*) FROM attn_status").fetchone()[0]
        check(bool(hit) and err == "attn_fit: interrupted" and R.snapshot(conn) == before and
              left == 0, "%s: an interrupt during %s: %r, every table as before, attn_status "
              "empty (%d)" % (mode, phase, err, left))
    s = fit("x", options, conn=conn)
    check(isinstance(s, dict) and s["version"] == 2, "%s: the connection trains again after "
          "the interrupts: version %s" % (mode, s.get("version") if isinstance(s, dict) else s))
    conn.close()
    other.close()


interrupt_in_phases("WAL")
interrupt_in_phases("DELETE")

# ------------------------------------------------------------------ SIGKILL mid-training
CHILD = r"""
import json, sys, threading, time
sys.path.insert(0, sys.argv[3])
import reliability as R
db, other = R.connect(sys.argv[1]), R.connect(sys.argv[1])
def watch():
    last = None
    while True:
        r = other.execute("SELECT phase, epoch, batch, train_loss FROM attn_status").fetchone()
        if r and r != last:
            print("PHASE", *r, flush=True)
            last = r
        time.sleep(0.002)
threading.Thread(target=watch, daemon=True).start()
db.execute("SELECT attn_fit('k', 'SELECT text, label FROM pool', ?)", (sys.argv[2],)).fetchone()
print("DONE", flush=True)
"""
for mode in ("WAL", "DELETE"):
    for phase in ("pretraining", "round 2"):
        path = os.path.join(tmp, "kill-%s-%s.db" % (mode, phase.replace(" ", "")))
        conn = R.connect(path)
        conn.execute("PRAGMA journal_mode = %s" % mode)
        conn.execute("CREATE TABLE pool(id INTEGER PRIMARY KEY, text, label)")
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO pool(text, label) VALUES (?, ?)",
                         [(t, l if i < 300 else None)
                          for i, (t, l) in enumerate(R.make_rows(4000, seed=6))])
        conn.execute("COMMIT")
        fit("k", dict(SMALL, epochs=1), conn=conn)
        conn.close()
        options = json.dumps(dict(SMALL, epochs=200, hidden=16, pretrain_epochs=50,
                                  self_training=6, threads=1))
        child = subprocess.Popen([sys.executable, "-c", CHILD, path, options,
                                  os.path.dirname(os.path.abspath(__file__))],
                                 stdout=subprocess.PIPE, text=True)
        last = ""
        for line in child.stdout:
            last = line.split()
            if last[0] == "DONE":
                break
            if phase == "pretraining" and last[1] == "pretraining" and int(last[3]) > 0:
                break
            if phase == "round 2" and last[1] == "self-training" and int(last[2]) > 200:
                break  # round 2's first epoch has ended
        child.send_signal(signal.SIGKILL)
        child.wait()
        conn = R.connect(path)
        integrity = conn.execute("PRAGMA integrity_check").fetchall()
        versions = conn.execute("SELECT version FROM attn_models WHERE name = 'k'").fetchall()
        s = fit("k", dict(SMALL, epochs=1), conn=conn)
        check(last and last[0] == "PHASE" and integrity == [("ok",)] and versions == [(1,)] and
              isinstance(s, dict) and s["version"] >= 2,
              "%s: killed during %s (%s): integrity %s, versions %s, then saved as version %s"
              % (mode, phase, " ".join(last), integrity, versions,
                 s.get("version") if isinstance(s, dict) else s))
        conn.close()

# ------------------------------------------------------------------ attn_uncertain
db.execute("CREATE TABLE two_topics(id INTEGER PRIMARY KEY, text, label)")
db.executemany("INSERT INTO two_topics(text, label) VALUES (?, ?)",
               R.make_rows(200, seed=7, classes=("sports", "tech")))
fit("m2", SMALL, "SELECT text, label FROM two_topics")
U = "SELECT %s FROM attn_uncertain('m2', ?)"
got = db.execute(U % "id, typeof(id)", ("SELECT x'00ff', 'goal' UNION ALL SELECT 1.5, 'goal' "
                                        "UNION ALL SELECT 'row 3', 'goal' UNION ALL "
                                        "SELECT 9007199254740993, 'goal' UNION ALL "
                                        "SELECT -9223372036854775808, 'goal'",)).fetchall()
check(sorted(got, key=repr) == sorted([(b"\x00\xff", "blob"), (1.5, "real"), ("row 3", "text"),
                                       (9007199254740993, "integer"),
                                       (-9223372036854775808, "integer")], key=repr),
      "ids of every type come back unchanged: %s" % got)
got = db.execute(U % "count(*), count(DISTINCT id)", ("SELECT 1, text FROM two_topics",)).fetchone()
check(got == (200, 1), "duplicate ids: every row, as asked: %s" % (got,))
got = db.execute(U % "count(*)", ("SELECT id, text, label, 4 FROM two_topics",)).fetchone()
check(got == (200,), "columns beyond the second are ignored: %s" % got)
for query, want in (
        ("SELECT text FROM two_topics",
         "attn_uncertain: the query must return at least 2 columns (id, text), it returns 1"),
        ("SELECT id, iif(id = 150, abs(-9223372036854775808), text) FROM two_topics",
         "attn_uncertain: the query failed: integer overflow"),
        ("WITH RECURSIVE c(id) AS (SELECT 1 UNION ALL SELECT id + 1 FROM c WHERE id < 5000) "
         "SELECT id, iif(id = 4999, NULL, 'goal') FROM c",  # a later chunk than the first
         "attn_uncertain: row 4999 of the query has a NULL text"),
        ("SELECT NULL, text FROM two_topics", "attn_uncertain: row 1 of the query has a NULL id")):
    err = error_of(db, U % "*", (query,))
    check(err == want, "attn_uncertain over %s: %s" % (query[:50], err))
err = error_of(db, "SELECT * FROM attn_uncertain('nope', 'SELECT 1, ''x''')")
check(err == "attn_uncertain: no model named 'nope'", "an unknown model: %s" % err)
fit("undeployed", dict(SMALL, deploy="never"))
err = error_of(db, "SELECT * FROM attn_uncertain('undeployed', 'SELECT 1, ''x''')")
check(err == "attn_uncertain: model 'undeployed' has no deployed version",
      "a model never deployed: %s" % err)

# 2 classes: the figures are attn_probs' (margin = |p1 - p2|, entropy in nats, at most ln 2)
worst = 0.0
got = db.execute(U % "*", ("SELECT id, text FROM two_topics",)).fetchall()
for row_id, label, p, margin, entropy in got:
    text = db.execute("SELECT text FROM two_topics WHERE id = ?", (row_id,)).fetchone()[0]
    probs = dict(db.execute("SELECT label, probability FROM attn_probs('m2', ?)", (text,)))
    top, second = sorted(probs.values(), reverse=True)
    want = (max(probs, key=probs.get), top, top - second,
            -sum(q * math.log(q) for q in probs.values() if q > 0))
    worst = max(worst, abs(p - want[1]), abs(margin - want[2]), abs(entropy - want[3]),
                0 if label == want[0] else 1)
check(worst < 1e-5 and all(got[i][3] <= got[i + 1][3] for i in range(len(got) - 1)),
      "2 classes: label, probability, margin and entropy as attn_probs gives them (largest "
      "difference %.2g), margin ascending" % worst)
got = db.execute(U % "id, margin", ("SELECT value, 'goal match' FROM json_each('[5,3,9,1,7]')",)
                 ).fetchall()
check([g[0] for g in got] == [5, 3, 9, 1, 7] and len({g[1] for g in got}) == 1,
      "ties (the same text) keep the query's order: %s" % got)

# SQLite's own figures of its heap, where the extension allocates (the library Python's sqlite3
# module uses): the heap limit and the memory a row takes
try:
    libsqlite = ctypes.CDLL("libsqlite3.so.0")
    libsqlite.sqlite3_memory_used.restype = ctypes.c_int64
    libsqlite.sqlite3_memory_highwater.restype = ctypes.c_int64
    libsqlite.sqlite3_hard_heap_limit64.restype = ctypes.c_int64
    libsqlite.sqlite3_soft_heap_limit64.restype = ctypes.c_int64
except OSError as e:
    libsqlite = None
    print("SKIP-PART libsqlite3.so.0 not loadable (%s): no heap limit, no memory a row" % e)
LOTS = ("WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < %d) "
        "SELECT i, 'match goal ' || i FROM c")
if libsqlite:
    # out of memory, then the connection answers again
    # (through the C API: PRAGMA hard_heap_limit can only lower it, and sets the soft limit too)
    libsqlite.sqlite3_hard_heap_limit64(ctypes.c_int64(libsqlite.sqlite3_memory_used() + 6_000_000))
    err = error_of(db, U % "count(*)", (LOTS % 400_000,))
    libsqlite.sqlite3_hard_heap_limit64(ctypes.c_int64(0))
    libsqlite.sqlite3_soft_heap_limit64(ctypes.c_int64(0))
    # the rows' array, or on a machine of many cores the threads' batches first
    check(err is not None and (err == "attn_uncertain: out of memory" or
                               err.startswith("attn_uncertain: out of memory for a batch of ")),
          "400,000 rows with 6 MB of heap left: %s" % err)
    check(db.execute(U % "count(*)", (LOTS % 10,)).fetchone() == (10,), "then 10 rows answer")
    # 32 bytes a row (an integer id inline), the array doubled as it grows: 16.8 MB for 300,000
    # rows; a copy of each id besides took 36 MB. What does not grow with the rows (a chunk's
    # texts and probabilities, the threads' batches: 4.5 MB on 16 cores) is the peak of 1,000
    # rows, taken off.
    def peak(rows):
        libsqlite.sqlite3_memory_highwater(1)
        base = libsqlite.sqlite3_memory_highwater(0)
        db.execute(U % "count(*)", (LOTS % rows,)).fetchone()
        return libsqlite.sqlite3_memory_highwater(0) - base
    fixed = peak(1_000)
    per_row = (peak(300_000) - fixed) / 299_000
    check(per_row < 80, "300,000 rows with integer ids: %.0f bytes of SQLite's heap a row at the "
          "most (under 80)" % per_row)

# an interrupt while the rows are read and scored, then the connection answers again
timer = threading.Timer(0.05, db.interrupt)
timer.start()
err = error_of(db, U % "count(*)", (LOTS % 3_000_000,))
timer.join()
check(err in ("attn_uncertain: interrupted", "attn_uncertain: the query failed: interrupted"),
      "an interrupt while 3,000,000 rows are read: %s" % err)
check(db.execute(U % "count(*)", (LOTS % 10,)).fetchone() == (10,), "then 10 rows answer")

# LIMIT 1: the first row is the least sure of all, so every row is scored before it
N = 100_000
calls = [0]


def count_calls():
    calls[0] += 1
    return 0


db.set_progress_handler(count_calls, 1000)
first = db.execute(U % "id" + " LIMIT 1", (LOTS % N,)).fetchall()
limited = calls[0]
calls[0] = 0
whole = db.execute(U % "count(*)", (LOTS % N,)).fetchone()[0]
db.set_progress_handler(None, 1)
check(len(first) == 1 and whole == N and limited > 0.8 * calls[0],
      "LIMIT 1 reads and scores every row of %d (%d progress calls against %d without)"
      % (N, limited, calls[0]))

# a model whose probabilities overflow: NULL figures, those rows first, the rest sorted
fit("flat", dict(SMALL, fc_hidden=0, subword_buckets=0), "SELECT text, label FROM pool")
blob = bytearray(db.execute("SELECT weights FROM attn_models WHERE name = 'flat'").fetchone()[0])
start = 8 + int.from_bytes(blob[:8], "little")
header = json.loads(blob[8:start])
C, F = header["fc2.weight"]["shape"]
rng = random.Random(0)


def put(tensor, index, value):
    at = start + header[tensor]["data_offsets"][0] + 4 * index
    blob[at:at + 4] = struct.pack("<f", value)


# class 1's logit: 3.4e38 plus a term of either sign: +inf for some texts, finite for others
for j in range(F):
    put("fc2.weight", F + j, rng.choice((1, -1)) * 3e37)
put("fc2.bias", 0, 0.0)
put("fc2.bias", 1, 3.4e38)
db.execute("SELECT attn_import('overflow', ?)", (bytes(blob),))
got = db.execute("SELECT id, label, probability, margin, entropy FROM attn_uncertain('overflow', "
                 "'SELECT id, text FROM pool')").fetchall()
nulls = [g for g in got if g[3] is None]
rest = got[len(nulls):]
classified = db.execute("SELECT count(*) FROM attn_classify('overflow', 'SELECT id, text FROM "
                        "pool') WHERE probability IS NULL").fetchone()[0]
check(0 < len(nulls) < 300 and len(nulls) == classified and
      all(g[2] is None and g[4] is None for g in nulls) and
      [g[0] for g in nulls] == sorted(g[0] for g in nulls) and
      all(g[2] is not None and g[3] is not None for g in rest) and
      all(rest[i][3] <= rest[i + 1][3] for i in range(len(rest) - 1)),
      "probabilities that overflow: %d rows of NULL figures (attn_classify: %d), first and in "
      "the query's order; the other %d sorted by margin" % (len(nulls), classified, len(rest)))

db.close()
R.finish("test_unlabelled_edges")
