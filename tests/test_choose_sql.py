"""test_choose_sql.py -- the default recipe's choice of word dropout (engine/choose.c) as a Python
program sees it, in a file database with a second connection:
  - from 500 labelled rows without options that fix it, attn_fit's summary says what was chosen
    (`"sized": {"word_dropout": ...}`) and the two folds' scores, attn_models.metrics the same,
    and the stored model's config holds the value chosen; the same rows give the same weights
    at 1 and 2 threads, and the same as the option given the value chosen;
  - below 500 rows, or with "word_dropout" given, nothing is chosen;
  - the choice is the phase `choosing` of attn_status, which a second connection sees, and an
    interrupt there stops attn_fit with "attn_fit: interrupted", nothing saved.
No wall-clock bound: the interrupt must end a choice planned for 360,000 batches (300 epochs
of one-row batches; 300 x 3,000 tokens is within the choice's million token-epochs).
Run from the repository root: /usr/bin/python3 tests/test_choose_sql.py
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability as R  # noqa: E402

R.reexec_with_preload()
R.require_extension()
check = R.check

SMALL = {"epochs": 3, "hidden": 8, "embed_dim": 8, "fc_hidden": 8, "subword_buckets": 0,
         "progress": False}

tmp = tempfile.mkdtemp(prefix="attnext-choose-")
path = os.path.join(tmp, "rows.db")
db = R.connect(path)
db.execute("PRAGMA journal_mode = WAL")
db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, text, label)")
R.insert_rows(db, "INSERT INTO t(text, label) VALUES (?, ?)", R.make_rows(600, seed=5))


def fit(name, options, query="SELECT text, label FROM t", conn=db):
    return json.loads(conn.execute("SELECT attn_fit(?, ?, ?)",
                                   (name, query, json.dumps(options))).fetchone()[0])


def tensors(blob):  # the safetensors data after its header (the header's config names threads)
    return blob[8 + int.from_bytes(blob[:8], "little"):]


def header(blob):
    return json.loads(blob[8:8 + int.from_bytes(blob[:8], "little")])


# ------------------------------------------------------------------ the choice, told and kept
s = fit("a", dict(SMALL, threads=1))
choice = s.get("word_dropout_choice", {})
chosen = s.get("sized", {}).get("word_dropout")
scores = choice.get("weighted_f1", {})
check(chosen in (0, 0.2) and choice.get("folds") == 2 and set(scores) == {"0.2", "0"} and
      all(0 <= v <= 1 for v in scores.values()) and choice.get("seconds", -1) >= 0,
      "600 rows, no options: word dropout chosen on two folds: %s %s" % (chosen, choice))
check(chosen == (0 if scores.get("0", 0) > scores.get("0.2", 0) else 0.2),
      "0 only when it scores higher: %s from %s" % (chosen, scores))
metrics = json.loads(db.execute("SELECT metrics FROM attn_models WHERE name = 'a'").fetchone()[0])
check(metrics.get("word_dropout_choice") == choice and
      metrics.get("sized", {}).get("word_dropout") == chosen,
      "attn_models.metrics says the same: %s" % metrics.get("word_dropout_choice"))
fit("b", dict(SMALL, threads=2))
fit("c", dict(SMALL, threads=1, word_dropout=chosen))
w = {n: db.execute("SELECT weights FROM attn_models WHERE name = ?", (n,)).fetchone()[0]
     for n in "abc"}
meta = header(w["a"]).get("__metadata__", {})
config = json.loads(meta.get("config", "{}")) if isinstance(meta.get("config"), str) else {}
check(config.get("word_dropout") == chosen,
      "the stored config holds the value chosen: %s" % config.get("word_dropout"))
check(tensors(w["a"]) == tensors(w["b"]), "the same weights at 1 and 2 threads")
check(tensors(w["a"]) == tensors(w["c"]),
      "the same weights as \"word_dropout\": %s given" % chosen)

# ------------------------------------------------------------------ nothing to choose
s = fit("few", dict(SMALL), "SELECT text, label FROM t WHERE id <= 499")
check("word_dropout_choice" not in s and "word_dropout" not in s.get("sized", {}),
      "499 rows: nothing chosen: %s" % s.get("sized"))
s = fit("given", dict(SMALL, word_dropout=0.2))
check("word_dropout_choice" not in s and "word_dropout" not in s.get("sized", {}),
      "word_dropout given: kept: %s" % s.get("sized"))

# ------------------------------------------------------------------ the phase and an interrupt
other = R.connect(path)
seen, error, ended = R.interrupt_in_phase(
    db, other, "slow", "choosing", lambda: fit("slow", dict(SMALL, epochs=300, batch_size=1)))
check(bool(seen), "a second connection sees the phase choosing in attn_status: %s" % seen)
check(ended, "attn_fit returned after the interrupt")
check(error == "attn_fit: interrupted", "the error: %r" % error)
check(db.execute("SELECT count(*) FROM attn_models WHERE name = 'slow'").fetchone()[0] == 0,
      "nothing saved")
# 600 rows in halves of 300 (100 of each label), batches of one row, 300 epochs, 4 folds
check(bool(seen) and seen[0][3] == 4 * 300 * 300 and seen[0][1] == 0,
      "the progress counts the batches of the four folds, epoch 0: %s" % seen)
after = other.execute("SELECT count(*) FROM attn_status WHERE name = 'slow'").fetchone()[0]
check(after == 0, "the run left attn_status")

R.finish("test_choose_sql")
