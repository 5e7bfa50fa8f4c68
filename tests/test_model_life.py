"""test_model_life.py -- the model's life in the database, through Debian's Python
sqlite3 on file databases, in WAL and rollback-journal mode where the journal matters.

Checks, each printing what it compared:
  versions   a version number is never given twice: after deleting the latest version (its
             log left behind), every version with its log, every version of the name, or a log
             left by a lost run, attn_fit, attn_train and attn_tune save past every number the
             store or its log ever held; a name with no next version fails before training
  deploy     option "deploy": "always", "if_better" (the default: deployed only when the new
             version beats the deployed one on the new run's validation rows, both scored the
             same way, when both held them out; else deployed uncompared), "never"; the
             summary says whether and why; errors name the key
  validation option "validation": "random", "last" (the last rows of the query), "none" (no
             validation, the last epoch kept: tiny data trains), "validation_query"; errors for
             bad combinations
  lineage    attn_lineage records the query, row count, SHA-256 of the rows (recomputed here),
             the options as given, the warm start's base, attnext's version, the backend, times
  weights    "class_weights" as an object {"label": weight}
  status     attn_status shows a training of another thread while it runs; in WAL mode another
             process reads its epochs from attn_training_log as they finish
  tune       attn_tune "search": "random" with "trials" and "seconds"; trials two at a time give
             the same results as one at a time
Run from the repository root: /usr/bin/python3 tests/test_model_life.py [section ...]
"""
import hashlib
import json
import struct
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability as R  # noqa: E402

check, connect, error_of = R.check, R.connect, R.error_of
TMP = tempfile.mkdtemp(prefix="attn_life_")
MODES = ("wal", "delete")
TINY = json.loads(R.TINY)


def opts(**kw):
    o = dict(TINY)
    if "validation_query" in kw:  # its rows are the split: TINY's "validation" would be refused
        o.pop("validation", None)
    o.update(kw)
    return json.dumps(o)


def fresh(mode, name, rows=90):
    path = os.path.join(TMP, f"{name}_{mode}.db")
    for suffix in ("", "-wal", "-shm", "-journal"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    db = connect(path)
    assert db.execute(f"PRAGMA journal_mode={mode}").fetchone()[0] == mode
    if rows:
        R.make_table(db, n=rows)
    return path, db


def fit(db, name="m", options=None, query="SELECT text, label FROM docs"):
    out = db.execute("SELECT attn_fit(?, ?, ?)", (name, query, options or R.TINY)).fetchone()[0]
    return json.loads(out)


def versions(db, name="m"):
    return [r[0] for r in db.execute("SELECT version FROM attn_models WHERE name = ? "
                                     "ORDER BY version", (name,))]


# ----------------------------------------------------------------------------- versions

def test_versions(mode):
    path, db = fresh(mode, "versions")
    fit(db)
    fit(db, options=opts(deploy="always"))
    db.execute("DELETE FROM attn_models WHERE name = 'm' AND version = 2")  # log rows stay
    got = [fit(db, options=opts(deploy="always"))["version"]]
    db.execute("DELETE FROM attn_models WHERE name = 'm' AND version = 3")
    db.execute("DELETE FROM attn_training_log WHERE name = 'm' AND version = 3")
    got.append(db.execute("SELECT max(epoch) FROM attn_train('m', 'SELECT text, label FROM "
                          "docs', ?)", (opts(deploy="always"),)).fetchone()[0] and
               max(versions(db)))
    db.execute("DELETE FROM attn_models WHERE name = 'm'")
    db.execute("DELETE FROM attn_training_log WHERE name = 'm'")
    got.append(fit(db)["version"])
    db.execute("DELETE FROM attn_models WHERE name = 'm' AND version = 5")
    tune = db.execute("SELECT version FROM attn_tune('m', 'SELECT text, label FROM docs', "
                      "'{\"lr\":[0.001,0.01]}', ?)", (R.TINY,)).fetchall()
    got.append([v for (v,) in tune])
    check(got == [3, 4, 5, [6, 7]],
          f"{mode}: after deleting the latest version (log kept), it and its log, every "
          f"version, the latest again: attn_fit, attn_train, attn_fit, attn_tune saved {got} "
          f"(want [3, 4, 5, [6, 7]])")
    # a log left by a lost run (kill -9 during live logging) at a higher number
    db.execute("INSERT INTO attn_training_log(name, version, epoch) VALUES ('m', 11, 1)")
    v = fit(db)["version"]
    check(v == 12, f"{mode}: an orphaned log at version 11 blocks nothing: the next is {v}")
    mark = db.execute("SELECT last_version FROM attn_versions WHERE name = 'm'").fetchone()
    check(mark == (12,), f"{mode}: attn_versions keeps the largest version given: {mark}")
    # a name whose versions reached the largest integer: refused before any epoch runs
    db.execute("INSERT INTO attn_training_log(name, version, epoch) "
               "VALUES ('big', 9223372036854775807, 1)")
    start = time.time()
    e = error_of(db, "SELECT attn_fit('big', 'SELECT text, label FROM docs', "
                     "'{\"epochs\":100000,\"patience\":100000,\"progress\":false}')")
    took = time.time() - start
    check(e is not None and e.startswith("attn_fit: cannot save the model: 'big' already has version "
                                         "9223372036854775807") and took < 5,
          f"{mode}: no next version: refused before training ({took:.2f} s): {e}")
    db.close()


# ----------------------------------------------------------------------------- deploy

# monitor val_loss: the reason's figures are recomputed below from attn_probs (the default
# monitor, val_f1, is checked in test_deploy_f1)
GOOD = opts(epochs=25, lr=0.02, hidden=8, embed_dim=8, fc_hidden=8, validation="last",
            monitor="val_loss")
BAD = opts(epochs=1, lr=0.00001, validation="last", monitor="val_loss")


def val_loss_of(db, name, version, rows):
    """Mean cross-entropy of a stored version on rows (text, label), from attn_probs."""
    db.execute("CREATE TEMP TABLE IF NOT EXISTS pick(v)")
    db.execute("DELETE FROM pick")
    db.execute("INSERT INTO pick VALUES (?)", (version,))
    total = 0.0
    import math
    for text, label in rows:
        # deploy that version for a moment in a savepoint, read its probabilities, roll back
        db.execute("SAVEPOINT peek")
        db.execute("SELECT attn_deploy(?, ?)", (name, version))
        p = dict(db.execute("SELECT label, probability FROM attn_probs(?, ?)", (name, text)))
        db.execute("ROLLBACK TO peek")
        db.execute("RELEASE peek")
        total += -math.log(p[label]) if p.get(label, 0) > 0 else math.inf
    return total / len(rows)


def test_deploy(mode):
    path, db = fresh(mode, "deploy", rows=100)
    first = fit(db, options=BAD)
    check(first["deployed"] is True and first["deploy"] == "if_better" and
          first["deploy_reason"] == "no version of 'm' was deployed",
          f"{mode}: the first version deploys (nothing to beat): {first['deploy_reason']}")
    better = fit(db, options=GOOD)
    worse = fit(db, options=BAD)
    state = db.execute("SELECT version, deployed, deployed_seq > 0 FROM attn_models "
                       "ORDER BY version").fetchall()
    check(better["deployed"] is True and worse["deployed"] is False and
          state == [(1, 0, 1), (2, 1, 1), (3, 0, 0)],
          f"{mode}: a better retrain deploys, a worse one does not (never deployed, "
          f"deployed_seq 0): {state}; why: {worse['deploy_reason']}")
    # the comparison: both versions scored on the new run's validation rows (the last 15)
    rows = db.execute("SELECT text, label FROM docs ORDER BY id").fetchall()[-15:]
    mine = val_loss_of(db, "m", 3, rows), val_loss_of(db, "m", 2, rows)
    want = (f"val_loss {mine[0]:.6g} does not beat the deployed version 2's {mine[1]:.6g} on "
            f"the same 15 validation rows (held out by both)")
    # the figures to 1e-5: attn_probs runs the single-row kernels, the decision the batched
    # ones, whose float32 sums may differ in the last bit (0.00852981 vs 0.0085298 under ASan)
    import re
    got = re.match(r"val_loss (\S+) does not beat the deployed version 2's (\S+) on the same 15 "
                   r"validation rows \(held out by both\)$", worse["deploy_reason"])
    check(got is not None and all(abs(float(g) - w) <= 1e-5 * abs(w) + 1e-9
                                  for g, w in zip(got.groups(), mine)),
          f"{mode}: the reason's figures recomputed from attn_probs on the last 15 rows: "
          f"{worse['deploy_reason']!r} vs {want!r}")
    stored = json.loads(db.execute("SELECT metrics FROM attn_models WHERE version = 3"
                                   ).fetchone()[0])
    check(stored["deployed"] is False and stored["deploy_reason"] == worse["deploy_reason"],
          f"{mode}: attn_models.metrics keeps the decision: {stored['deploy']}, "
          f"{stored['deployed']}")
    v = fit(db, options=opts(epochs=1, lr=0.00001, validation="last", deploy="always"))
    n = fit(db, options=opts(deploy="never", validation="last", **{"epochs": 30, "lr": 0.05}))
    deployed = db.execute("SELECT version FROM attn_models WHERE deployed").fetchall()
    check(v["deployed"] and v["deploy_reason"] == 'option "deploy" is "always"' and
          not n["deployed"] and n["deploy_reason"] == 'option "deploy" is "never"' and
          deployed == [(v["version"],)],
          f"{mode}: \"always\" deploys a worse version, \"never\" keeps any out: {deployed}")
    rows = db.execute("SELECT epoch, version, deployed FROM attn_train('m', 'SELECT text, label "
                      "FROM docs', ?)", (BAD,)).fetchall()
    check(rows[-1][1:] == (n["version"] + 1, 0) and all(r[1:] == (None, None)
                                                         for r in rows[:-1]),
          f"{mode}: attn_train's last row says the version and that it was not deployed: "
          f"{rows[-1]}")
    # attn_tune: the chosen trial is deployed only when it beats the deployed version
    db.execute("SELECT attn_deploy('m', ?)", (better["version"],))
    tune = db.execute("SELECT chosen, deployed FROM attn_tune('m', 'SELECT text, label FROM "
                      "docs', '{\"lr\":[0.00001,0.00002]}', ?)",
                      (opts(epochs=1, validation="last"),)).fetchall()
    check(sum(c for c, d in tune) == 1 and sum(d for c, d in tune) == 0,
          f"{mode}: a tune whose best trial is worse than the deployed version deploys none: "
          f"{tune}")
    # the default monitor, val_f1: a retrain whose F1 ties the deployed version's is judged by
    # its validation loss (as the best epoch is)
    import re
    f1 = fit(db, options=opts(epochs=25, lr=0.02, hidden=8, embed_dim=8, fc_hidden=8,
                              validation="last"))
    m = re.match(r"val_f1 (\S+) ties the deployed version \d+'s on the same 15 validation rows "
                 r"\(held out by both\), and its val_loss (\S+) (is lower than|does not beat) "
                 r"its (\S+)$",
                 f1["deploy_reason"])
    check(m is not None and (m.group(3) == "is lower than") == f1["deployed"] and
          (float(m.group(2)) < float(m.group(4))) == f1["deployed"],
          f"{mode}: val_f1 ties are decided by the loss: {f1['deploy_reason']!r}, "
          f"deployed {f1['deployed']}")
    # a near tie: the deployed version's fc2 bias of one class nudged by 1e-6 in the store, then
    # the same training again: the two losses differ in the seventh digit, and the reason
    # prints as many as tell them apart (it said "0.0510322 is lower than its 0.0510322")
    tie_opts = opts(epochs=25, lr=0.02, hidden=8, embed_dim=8, fc_hidden=8, validation="last",
                    deploy="always")
    v = fit(db, options=tie_opts)["version"]
    blob = bytearray(db.execute("SELECT weights FROM attn_models WHERE name = 'm' AND "
                                "version = ?", (v,)).fetchone()[0])
    head_len = struct.unpack("<Q", blob[:8])[0]
    start = 8 + head_len + json.loads(blob[8:8 + head_len])["fc2.bias"]["data_offsets"][0]
    bias = struct.unpack("<f", blob[start:start + 4])[0]
    blob[start:start + 4] = struct.pack("<f", bias + 1e-6)
    db.execute("UPDATE attn_models SET weights = ? WHERE name = 'm' AND version = ?",
               (bytes(blob), v))
    db.commit()
    # another connection, which has not read the version (a connection keeps what it read: a
    # version's weights never change through attnext)
    other = R.connect(db.execute("PRAGMA database_list").fetchone()[2])
    near = fit(other, options=tie_opts.replace('"always"', '"if_better"'))
    other.close()
    m = re.match(r"val_f1 \S+ ties the deployed version \d+'s on the same 15 validation rows "
                 r"\(held out by both\), and its val_loss (\S+) (is lower than|does not beat) "
                 r"its (\S+)$", near["deploy_reason"])
    check(m is not None and m.group(1) != m.group(3) and
          (float(m.group(1)) < float(m.group(3))) == near["deployed"] ==
          (m.group(2) == "is lower than"),
          f"{mode}: a near tie prints the losses apart: {near['deploy_reason']!r}, "
          f"deployed {near['deployed']}")
    # a label the deployed version does not know: under val_loss it counts as infinitely
    # wrong, under val_f1 as one more wrong answer. Rows were added since the deployed version
    # trained; split by text, the new validation rows are ones it never trained on: the two are
    # compared there (Inf for the version that does not know 'c' under val_loss, a plain F1
    # under val_f1)
    words = {"a": ["goal", "match", "coach"], "b": ["shares", "bank", "profit"],
             "c": ["chip", "phone", "code"]}
    rng = random.Random(1)
    db.execute("CREATE TABLE three(text, label)")
    R.insert_rows(db, "INSERT INTO three VALUES (?, ?)",
                  [(" ".join(rng.choice(words[k]) for _ in range(4)), k) for k in "ab" * 100])
    good = dict(epochs=10, hidden=8, embed_dim=8, fc_hidden=8, lr=0.01, monitor="val_loss")
    two = fit(db, "u", opts(**good), "SELECT text, label FROM three")
    R.insert_rows(db, "INSERT INTO three VALUES (?, ?)",
                  [(" ".join(rng.choice(words["c"]) for _ in range(4)) + f" {i}", "c")
                   for i in range(100)])
    poor = dict(good, epochs=1, lr=0.0001)
    by_loss = fit(db, "u", opts(**poor), "SELECT text, label FROM three")
    m = re.match(r"val_loss (\S+) is lower than the deployed version 1's Inf on these \d+ "
                 r"validation rows, which neither trained on ", by_loss["deploy_reason"])
    check(two["val_accuracy"] == 1 and by_loss["deployed"] is True and m is not None and
          by_loss["val_accuracy"] < 0.5,
          f"{mode}: val_loss: a version that does not know label 'c' scores Inf on rows of it; "
          f"the rows added since are compared fairly, and the poor retrain (val_accuracy "
          f"{by_loss['val_accuracy']:.3f}) beats Inf: {by_loss['deploy_reason']!r}")
    db.execute("SELECT attn_deploy('u', 1)")
    by_f1 = fit(db, "u", opts(**dict(poor, monitor="val_f1")), "SELECT text, label FROM three")
    m = re.match(r"val_f1 (\S+) (?:is higher than|does not beat) the deployed version 1's (\S+) "
                 r"on these \d+ validation rows", by_f1["deploy_reason"])
    check(m is not None and 0 < float(m.group(2)) < 1 and
          by_f1["deployed"] == (float(m.group(1)) > float(m.group(2))),
          f"{mode}: val_f1: the same retrain against the same version scores it with the unknown "
          f"label only wrong (F1 of version 1 below 1, not Inf): {by_f1['deploy_reason']!r}")
    # a retrain on the same rows with another seed validates on the same rows: compared
    db.execute("SELECT attn_deploy('u', ?)", (by_f1["version"],))
    again = fit(db, "u", opts(**dict(poor, seed=77)), "SELECT text, label FROM three")
    check(re.search(r"on the same \d+ validation rows \(held out by both\)",
                    again["deploy_reason"]) is not None,
          f"{mode}: another seed, the same data: compared on the same rows: "
          f"{again['deploy_reason']!r}")
    errors = [(opts(deploy="sometimes"), 'attn_fit: option "deploy" must be "always", '
               '"if_better" or "never", got "sometimes"'),
              (opts(deploy=1), 'attn_fit: option "deploy" must be "always", "if_better" or '
               '"never", got 1'),
              (opts(deploy="if_better", validation="none"), 'attn_fit: option "deploy": '
               '"if_better" compares on the validation split')]
    for o, want in errors:
        e = error_of(db, "SELECT attn_fit('m', 'SELECT text, label FROM docs', ?)", (o,))
        check(e is not None and e.startswith(want), f"{mode}: {o[:60]}...: {e}")
    db.close()


# ----------------------------------------------------------------------------- validation

TOY = [("I love this movie", "pos"), ("what a great film", "pos"),
       ("I hate this movie", "neg"), ("what a terrible film", "neg")]


def test_validation(mode):
    path, db = fresh(mode, "validation", rows=100)
    out = fit(db, options=opts(validation="last"))
    # the kept epoch's val_accuracy is the stored model's accuracy on the last 15 rows
    last = db.execute("SELECT text, label FROM docs ORDER BY id").fetchall()[-15:]
    right = sum(db.execute("SELECT attn_predict('m', ?)", (t,)).fetchone()[0] == l
                for t, l in last)
    check(out["train_rows"] == 85 and out["val_rows"] == 15 and
          abs(out["val_accuracy"] - right / 15) < 1e-12,
          f"{mode}: \"last\": the last 15 of 100 rows validate ({out['train_rows']} / "
          f"{out['val_rows']}); val_accuracy {out['val_accuracy']:.4f} = accuracy on the last "
          f"15 rows {right}/15")
    db.execute("CREATE TABLE toy(text, label)")
    db.executemany("INSERT INTO toy VALUES (?, ?)", TOY)
    e = error_of(db, "SELECT attn_fit('toy', 'SELECT text, label FROM toy', "
                     "'{\"validation\":\"random\"}')")
    check(e is not None and "too few rows for a validation split" in e,
          f"{mode}: 4 toy sentences with a random split: {e}")
    first = fit(db, "toy", json.dumps({"progress": False}), "SELECT text, label FROM toy")
    check(first["train_rows"] == 4 and first["val_rows"] == 0 and
          first["sized"]["validation"] == "none" and first["sized"].get("embed_dim") == 128,
          f"{mode}: 4 toy sentences train with no options (no split, 128-wide embeddings "
          f"below 5,000 rows): {first['train_rows']} / {first['val_rows']}, "
          f"sized {first['sized']}")
    toy = fit(db, "toy", json.dumps({"validation": "none", "epochs": 60, "lr": 0.01,
                                     "stopwords": False, "progress": False}),
              "SELECT text, label FROM toy")
    preds = [db.execute("SELECT attn_predict('toy', ?)", (t,)).fetchone()[0] for t, _ in TOY]
    lrs = db.execute("SELECT DISTINCT round(lr, 9) FROM attn_training_log WHERE name = 'toy' "
                     "AND version = ?", (toy["version"],)).fetchall()
    check(lrs == [(0.01,)], f"{mode}: \"none\": no validation loss, so the learning rate never "
          f"drops: {lrs}")
    check(toy["train_rows"] == 4 and toy["val_rows"] == 0 and toy["best_epoch"] == 60 and
          toy["epochs_run"] == 60 and toy["val_loss"] is None and toy["deployed"] and
          preds == [l for _, l in TOY],
          f"{mode}: \"none\": 4 toy sentences train, all 60 epochs, the last kept (no early "
          f"stopping), no validation figures, deployed (\"always\" by default): {preds}")
    # validation_query: the rows of a second query validate
    db.execute("CREATE TABLE held(text, label)")
    R.insert_rows(db, "INSERT INTO held VALUES (?, ?)", R.make_rows(30, seed=7))
    out = fit(db, "q", opts(validation_query="SELECT text, label FROM held"))
    check(out["train_rows"] == 100 and out["val_rows"] == 30,
          f"{mode}: validation_query: every row of the query trains (100), the 30 of held "
          f"validate: {out['train_rows']} / {out['val_rows']}")
    errors = [
        (opts(validation_query="SELECT text, label FROM held", validation="random"),
         'attn_fit: option "validation_query" gives the validation rows: leave out '
         '"validation" (got "random")'),
        (opts(validation_query="SELECT text, label FROM held", val_fraction=0.2),
         'attn_fit: option "val_fraction" has no effect with "validation_query"'),
        (opts(validation="query"), 'attn_fit: option "validation": "query" needs '
         '"validation_query"'),
        (opts(validation="none", monitor="val_f1"), 'attn_fit: option "monitor" has no effect '
         'with "validation": "none"'),
        (opts(validation="none", patience=3), 'attn_fit: option "patience" has no effect'),
        (opts(validation="none", val_fraction=0.3), 'attn_fit: option "val_fraction" has no '
         'effect'),
        (opts(validation="sometimes"), 'attn_fit: option "validation" must be "random", '
         '"last", "none" or "query", got "sometimes"'),
        (opts(validation_query=5), 'attn_fit: option "validation_query" must be a query as '
         'text'),
        (opts(validation_query="SELECT text, label FROM held WHERE 0"),
         'attn_fit: option "validation_query" returned no rows'),
        (opts(validation_query="DELETE FROM held"), 'attn_fit: '),
    ]
    before = db.execute("SELECT count(*) FROM attn_models").fetchone()[0]
    for o, want in errors:
        e = error_of(db, "SELECT attn_fit('m', 'SELECT text, label FROM docs', ?)", (o,))
        check(e is not None and e.startswith(want), f"{mode}: {o[:70]}: {e}")
    e = error_of(db, "SELECT attn_fit('m', 'SELECT text, label FROM docs', ?)",
                 (opts(validation_query="DELETE FROM held"),))
    check(e is not None and "validation_query" in e and
          db.execute("SELECT count(*) FROM held").fetchone()[0] == 30,
          f"{mode}: a validation_query that writes is refused, naming the key: {e}")
    e = error_of(db, "SELECT * FROM attn_tune('m', 'SELECT text, label FROM docs', "
                     "'{\"lr\":[0.01]}', '{\"validation\":\"none\"}')")
    check(e is not None and e.startswith('attn_tune: option "validation": "none"'),
          f"{mode}: attn_tune refuses \"none\": {e}")
    check(db.execute("SELECT count(*) FROM attn_models").fetchone()[0] == before,
          f"{mode}: no error stored anything")
    db.close()


# ----------------------------------------------------------------------------- lineage

def rows_sha256(rows):
    h = hashlib.sha256()
    for text, label in rows:
        t, lab = str(text).encode(), str(label).encode()
        h.update(len(t).to_bytes(8, "little") + t + len(lab).to_bytes(8, "little") + lab)
    return h.hexdigest()


def test_lineage(mode):
    path, db = fresh(mode, "lineage", rows=60)
    db.execute("CREATE TABLE held(text, label)")
    R.insert_rows(db, "INSERT INTO held VALUES (?, ?)", R.make_rows(20, seed=9))
    given = opts(validation_query="SELECT text, label FROM held ORDER BY rowid")
    query = "SELECT text, label FROM docs ORDER BY id"
    out = fit(db, "m", given, query)
    row = db.execute("SELECT * FROM attn_lineage WHERE name = 'm' AND version = ?",
                     (out["version"],)).fetchone()
    cols = [d[0] for d in db.execute("SELECT * FROM attn_lineage").description]
    lin = dict(zip(cols, row))
    # the backend this machine trains on: its GPU's where attn_version() names a device
    version = db.execute("SELECT attn_version()").fetchone()[0]
    this_backend = "cuda (" if "(compute capability" in version else "cpu ("
    want_rows = db.execute(query).fetchall()
    held = db.execute("SELECT text, label FROM held ORDER BY rowid").fetchall()
    check(lin["function"] == "attn_fit" and lin["query"] == query and lin["rows"] == 60 and
          lin["rows_sha256"] == rows_sha256(want_rows) and
          lin["validation_query"] == "SELECT text, label FROM held ORDER BY rowid" and
          lin["validation_rows"] == 20 and lin["validation_sha256"] == rows_sha256(held),
          f"{mode}: query, rows and SHA-256 of the rows (recomputed in Python: "
          f"{lin['rows_sha256'][:16]}...), validation_query and its rows")
    check(json.loads(lin["options"]) == json.loads(given) and
          lin["attnext"].startswith("attnext ") and lin["backend"].startswith(this_backend) and
          lin["started_at"] <= lin["ended_at"] and lin["started_at"].endswith("Z"),
          f"{mode}: options as given, {lin['attnext']}, backend {lin['backend']}, "
          f"{lin['started_at']} .. {lin['ended_at']}")
    # the rows are kept packed (ext/attn_query.c: texts back to back in blocks of 4096 rows and
    # ~1 MiB, a longer text in a block of its own): texts of 0 bytes, over 1 MiB, numbers and
    # BLOBs, over one block of rows, then the validation query's appended after a part-filled
    # block, must come back byte for byte (their hashes, recomputed from CAST(... AS BLOB))
    db.execute("CREATE TABLE packed(id INTEGER PRIMARY KEY, text, label)")
    db.execute("CREATE TABLE packed_held(id INTEGER PRIMARY KEY, text, label)")
    words = [t for t, _ in R.make_rows(60, seed=3)]
    big = " ".join(words) * 12000  # ~2.3 MB
    odd = {0: big, 1: "", 2: 12345, 3: b"blob \xc3\xa9 bytes", 4100: big[:1 << 20], 4101: "",
           4102: big[:(1 << 20) - 7], 4999: big}
    prows = [(odd.get(i, words[i % 60]), ["a", "", 7, "b"][i % 4]) for i in range(5000)]
    R.insert_rows(db, "INSERT INTO packed(text, label) VALUES(?, ?)", prows)
    R.insert_rows(db, "INSERT INTO packed_held(text, label) VALUES(?, ?)",
                  [(big if i == 3 else words[i], ["b", "a", "", 7][i % 4]) for i in range(40)])
    raw = "SELECT CAST(text AS BLOB), CAST(label AS BLOB) FROM {} ORDER BY id"

    def raw_sha256(rows):
        h = hashlib.sha256()
        for t, lab in rows:
            h.update(len(t).to_bytes(8, "little") + t + len(lab).to_bytes(8, "little") + lab)
        return h.hexdigest()
    pq = "SELECT text, label FROM packed ORDER BY id"
    hq = "SELECT text, label FROM packed_held ORDER BY id"
    p = fit(db, "p", opts(epochs=1, validation_query=hq), pq)
    lin = db.execute("SELECT rows, rows_sha256, validation_rows, validation_sha256 FROM "
                     "attn_lineage WHERE name = 'p' AND version = ?", (p["version"],)).fetchone()
    check(lin == (5000, raw_sha256(db.execute(raw.format("packed"))), 40,
                  raw_sha256(db.execute(raw.format("packed_held")))),
          f"{mode}: packed rows (empty, 1 MiB, 2.3 MB, numbers, BLOBs; 5000 + 40 appended) "
          f"hash as recomputed: {lin[1][:16]}..., {lin[3][:16]}...")
    warm = fit(db, "w", opts(**{"from": "m", "epochs": 1}), query)
    w = db.execute("SELECT from_name, from_version FROM attn_lineage WHERE name = 'w'"
                   ).fetchone()
    check(w == ("m", out["version"]), f"{mode}: a warm start records its base: {w}")
    tune = db.execute("SELECT version, config FROM attn_tune('t', ?, '{\"lr\":[0.01,0.02]}', ?)",
                      (query, R.TINY)).fetchall()
    lt = db.execute("SELECT version, function, json_extract(options, '$.lr') FROM attn_lineage "
                    "WHERE name = 't' ORDER BY version").fetchall()
    check(lt == [(v, "attn_tune", json.loads(c)["lr"]) for v, c in tune],
          f"{mode}: each trial's lineage has its own options: {lt}")
    blob = db.execute("SELECT weights FROM attn_models WHERE name = 'm'").fetchone()[0]
    v = db.execute("SELECT attn_import('i', ?)", (blob,)).fetchone()[0]
    li = db.execute("SELECT function, query, rows FROM attn_lineage WHERE name = 'i' AND "
                    "version = ?", (v,)).fetchone()
    check(li == ("attn_import", None, None), f"{mode}: an import's lineage: {li}")
    joined = db.execute("SELECT m.version, l.rows FROM attn_models AS m JOIN attn_lineage AS l "
                        "USING (name, version) WHERE name = 'm'").fetchall()
    check(joined == [(out["version"], 60)], f"{mode}: attn_models joins attn_lineage: {joined}")
    db.close()


# ----------------------------------------------------------------------------- class weights

def test_weights(mode):
    path, db = fresh(mode, "weights", rows=0)
    rows = R.make_rows(90)
    # unbalanced: 50 sports, 25 tech, 15 money
    rows = [r for r in rows if r[1] == "sports"][:30] + [r for r in rows if r[1] == "tech"][:25] \
        + [r for r in rows if r[1] == "money"][:15]
    import random
    random.Random(5).shuffle(rows)
    db.execute("CREATE TABLE docs(id INTEGER PRIMARY KEY, text, label)")
    R.insert_rows(db, "INSERT INTO docs(text, label) VALUES (?, ?)", rows)
    base = dict(TINY, epochs=3, validation="last", val_fraction=0.2)
    # "last" with 20% of 70 rows: the first 56 train
    train = rows[:56]
    counts = {c: sum(1 for _, l in train if l == c) for c in ("sports", "tech", "money")}

    def losses(**kw):
        o = dict(base, **kw)
        return [r[0] for r in db.execute(
            "SELECT train_loss FROM attn_train('w', 'SELECT text, label FROM docs ORDER BY id', "
            "?)", (json.dumps(o),))]

    auto = losses(class_weights=True)
    inverse = {c: 1.0 / n for c, n in counts.items() if n}
    given = losses(class_weights=inverse)
    flat = losses(class_weights=False)
    ones = losses(class_weights={"sports": 1, "tech": 1})
    heavy = losses(class_weights={"tech": 50})
    check(auto == given and flat == ones and heavy != flat and auto != flat,
          f"{mode}: class_weights {{label: 1/count}} {counts} trains exactly as true "
          f"({given[-1]:.6f}); "
          f"{{label: 1}} exactly as false ({ones[-1]:.6f}); {{tech: 50}} differs "
          f"({heavy[-1]:.6f})")
    errors = [({"zzz": 2}, 'attn_train: option "class_weights": label "zzz" is not one of the '
               '3 labels of the rows'),
              ({"tech": 0}, 'attn_train: option "class_weights": the weight of label "tech" '
               'must be a number in (0, 1000000], got 0'),
              ({"tech": "x"}, 'attn_train: option "class_weights": the weight of label "tech" '
               'must be a number, got x'),
              ({"tech": -1}, 'attn_train: option "class_weights": the weight of label "tech"')]
    for w, want in errors:
        e = error_of(db, "SELECT * FROM attn_train('e', 'SELECT text, label FROM docs', ?)",
                     (json.dumps(dict(base, class_weights=w)),))
        check(e is not None and e.startswith(want), f"{mode}: class_weights {w}: {e}")
    db.close()


# ----------------------------------------------------------------------------- status

CHILD = r"""
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.enable_load_extension(True)
db.load_extension(sys.argv[2])
try:
    print(db.execute("SELECT attn_fit('live', 'SELECT text, label FROM docs', ?)",
                     (sys.argv[3],)).fetchone()[0], flush=True)
except sqlite3.Error as e:
    print("error", e, flush=True)
"""


def poll(read, done, limit=60.0):
    """read() every 50 ms until done(value) or limit seconds; the last value."""
    deadline = time.monotonic() + limit
    while True:
        value = read()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def test_status(mode):
    path, db = fresh(mode, "status", rows=300)
    fit(db, "first")  # the store exists
    other = connect(path)
    long = opts(epochs=100000, patience=100000, hidden=16, embed_dim=16)
    result = {}

    def run():
        try:
            result["out"] = db.execute("SELECT attn_fit('s', 'SELECT text, label FROM docs', ?)",
                                       (long,)).fetchone()
        except sqlite3.Error as e:
            result["error"] = str(e)

    th = threading.Thread(target=run)
    th.start()
    # polled, not slept: the training's first epoch, then a later one (however slow the machine)
    first = poll(lambda: other.execute("SELECT name, function, phase, epoch, database FROM "
                                       "attn_status").fetchall(),
                 lambda r: len(r) == 1 and r[0][2] == "training" and r[0][3] >= 1)
    second = poll(lambda: other.execute("SELECT name, epoch, batches, train_loss, seconds FROM "
                                        "attn_status").fetchall(),
                  lambda r: len(r) != 1 or not first or r[0][1] > first[0][3])
    db.interrupt()
    th.join()
    after = other.execute("SELECT count(*) FROM attn_status").fetchone()[0]
    check(len(first) == 1 and first[0][:3] == ("s", "attn_fit", "training") and
          first[0][4] == os.path.realpath(path) and len(second) == 1 and
          second[0][1] > first[0][3] and second[0][2] and second[0][3] is not None and
          after == 0 and result.get("error") == "attn_fit: interrupted",
          f"{mode}: attn_status from another connection while a thread trains: {first} then "
          f"{second}; none once it stopped ({after})")
    # another process trains; this one reads its epochs from attn_training_log as they finish
    opts_live = opts(epochs=100000, patience=100000, hidden=16, embed_dim=16)
    proc = subprocess.Popen([sys.executable, "-c", CHILD, path, R.extension_path(), opts_live],
                            stdout=subprocess.PIPE, text=True)
    seen = []
    # WAL: until two epochs are seen (at most 60 s); rollback journal: 3 s in which nothing
    # may appear (a slow machine can only make that check weaker, never fail it)
    began = time.time()
    deadline = began + 60
    while time.time() < deadline:
        n = other.execute("SELECT count(*), max(epoch) FROM attn_training_log WHERE name = 'live'"
                          ).fetchone()
        seen.append(n)
        if mode != "wal" and time.time() > began + 3:
            break
        if n[0] and len({s for s in seen if s[0]}) >= 2:
            break
        time.sleep(0.1)
    models = other.execute("SELECT count(*) FROM attn_models WHERE name = 'live'").fetchone()[0]
    proc.send_signal(9)
    proc.wait()
    proc.stdout.close()
    grew = [s for s in seen if s[0]]
    if mode == "wal":
        check(len(grew) >= 2 and grew[-1][1] > grew[0][1] and models == 0,
              f"{mode}: another process's epochs appear in attn_training_log as they finish, "
              f"before the model is saved: {grew[0]} .. {grew[-1]}")
        orphan = other.execute("SELECT count(*) FROM attn_training_log WHERE name = 'live'"
                               ).fetchone()[0]
        out = fit(other, "live")
        check(out["version"] == 2 and orphan > 0,
              f"{mode}: after kill -9 the lost run's log ({orphan} rows, version 1) blocks "
              f"nothing: the next save is version {out['version']}")
    else:
        check(not grew and models == 0,
              f"{mode}: rollback journal: nothing is written before the save (no lock held "
              f"across epochs): {seen[-1]}")
    # an interrupted training that logged live leaves the store as it was
    if mode == "wal":
        before = R.snapshot(other)
        result.clear()
        th = threading.Thread(target=run)
        th.start()
        mid = poll(lambda: other.execute("SELECT count(*) FROM attn_training_log WHERE name = "
                                         "'s'").fetchone()[0], lambda n: n > 0)
        db.interrupt()
        th.join()
        check(mid > 0 and R.snapshot(other) == before,
              f"{mode}: an interrupt after {mid} live log rows leaves the store as it was")
    other.close()
    db.close()


# ----------------------------------------------------------------------------- tune

def test_tune(mode):
    path, db = fresh(mode, "tune", rows=90)
    grid = json.dumps({"lr": [0.001, 0.003, 0.01, 0.03, 0.1], "hidden": [4, 8, 16],
                       "embed_dim": [4, 8]})
    base = dict(TINY, epochs=3, deploy="always")
    run = lambda name, **kw: db.execute(
        "SELECT trial, config, val_loss, val_f1, best_epoch, chosen, version FROM attn_tune(?, "
        "'SELECT text, label FROM docs', ?, ?)", (name, grid, json.dumps(dict(base, **kw)))
    ).fetchall()
    one = run("r1", search="random", trials=6, parallel=False)
    two = run("r2", search="random", trials=6, parallel=True)
    configs = [json.loads(r[1]) for r in one]
    check(len(one) == 6 and len({json.dumps(c, sort_keys=True) for c in configs}) == 6,
          f"{mode}: a random search of 6 distinct trials out of 30: {[r[1] for r in one]}")
    check([r[1:6] for r in one] == [r[1:6] for r in two],
          f"{mode}: two at a time gives the same trials, figures and choice as one at a time")
    w1 = [r[0] for r in db.execute("SELECT weights FROM attn_models WHERE name = 'r1' "
                                   "ORDER BY version")]
    w2 = [r[0] for r in db.execute("SELECT weights FROM attn_models WHERE name = 'r2' "
                                   "ORDER BY version")]
    check(w1 == w2, f"{mode}: and the same weights, byte for byte ({len(w1)} versions)")
    again = run("r3", search="random", trials=6)
    other_seed = run("r4", search="random", trials=6, seed=99)
    check([r[1] for r in again] == [r[1] for r in one] and
          [r[1] for r in other_seed] != [r[1] for r in one],
          f"{mode}: the sample follows the options' seed")
    start = time.time()
    timed = run("r5", search="random", trials=30, seconds=0.3,
                **{"epochs": 200, "patience": 1000})
    took = time.time() - start
    check(1 <= len(timed) < 30, f"{mode}: \"seconds\": 0.3 ran {len(timed)} of 30 trials in "
          f"{took:.1f} s (no trial starts after the budget)")
    errors = [({"search": "bayes"}, 'attn_tune: option "search" must be "grid" or "random", '
               'got "bayes"'),
              ({"trials": 5}, 'attn_tune: option "trials" is the size of a random search'),
              ({"search": "random", "trials": 0}, 'attn_tune: option "trials" must be an '
               'integer from 1 to 256, got 0'),
              ({"seconds": -1}, 'attn_tune: option "seconds" must be a number of seconds'),
              ({"parallel": "yes"}, 'attn_tune: option "parallel" must be true or false'),
              ({"keep_trials": 1}, 'attn_tune: option "keep_trials" must be true (every trial '
               'is stored) or false (only the chosen one), got 1'),
              ]
    for o, want in errors:
        e = error_of(db, "SELECT * FROM attn_tune('e', 'SELECT text, label FROM docs', ?, ?)",
                     (grid, json.dumps(dict(base, **o))))
        check(e is not None and e.startswith(want), f"{mode}: {o}: {e}")
    e = error_of(db, "SELECT * FROM attn_tune('e', 'SELECT text, label FROM docs', "
                     "'{\"deploy\":[\"always\"]}', ?)", (R.TINY,))
    check(e is not None and e.startswith('attn_tune: grid key "deploy" is an option of the '
                                         'whole search'), f"{mode}: {e}")
    # "keep_trials": false -- the same search, only the chosen trial stored; a second
    # connection reading meanwhile sees the store as it was, then the one new version
    other = R.connect(path)
    kept_before = other.execute("SELECT count(*) FROM attn_models").fetchone()[0]
    lean = run("r6", search="random", trials=6, keep_trials=False)
    stored = db.execute("SELECT version, deployed, weights FROM attn_models WHERE name = 'r6'"
                        ).fetchall()
    chosen = [r for r in lean if r[5]]
    w_chosen = [w for (w,) in db.execute(
        "SELECT weights FROM attn_models WHERE name = 'r1' AND version = ?", (one[[
            r[5] for r in one].index(1)][6],))]
    check([r[1:6] for r in lean] == [r[1:6] for r in one] and len(chosen) == 1 and
          [r[6] for r in lean if not r[5]] == [None] * 5 and len(stored) == 1 and
          stored[0][0] == chosen[0][6] and stored[0][1] == 1 and [stored[0][2]] == w_chosen and
          other.execute("SELECT count(*) FROM attn_models").fetchone()[0] == kept_before + 1,
          f"{mode}: \"keep_trials\": false: the same trials and choice, one version stored "
          f"(the chosen one's weights), the others' version NULL: "
          f"{[(r[0], r[5], r[6]) for r in lean]}")
    e = error_of(db, "SELECT * FROM attn_tune('e', 'SELECT text, label FROM docs', "
                     "'{\"keep_trials\":[true]}', ?)", (R.TINY,))
    check(e is not None and e.startswith('attn_tune: grid key "keep_trials" is an option of '
                                         'the whole search'), f"{mode}: {e}")
    other.close()
    big = json.dumps({"lr": [0.001 * i for i in range(1, 30)],
                      "hidden": list(range(1, 30))})
    e = error_of(db, "SELECT * FROM attn_tune('e', 'SELECT text, label FROM docs', ?, ?)",
                 (big, R.TINY))
    n = db.execute("SELECT count(*) FROM attn_tune('e', 'SELECT text, label FROM docs', ?, ?)",
                   (big, json.dumps(dict(base, search="random", trials=3)))).fetchone()[0]
    check(e is not None and "search" in e and n == 3,
          f"{mode}: 841 combinations: a grid search is refused ({e[:60]}...), a random search "
          f"samples {n}")
    db.close()


SECTIONS = {"versions": test_versions, "deploy": test_deploy, "validation": test_validation,
            "lineage": test_lineage, "weights": test_weights, "status": test_status,
            "tune": test_tune}


def main():
    R.reexec_with_preload()
    R.require_extension()
    only = sys.argv[1:]
    try:
        for name, fn in SECTIONS.items():
            if only and name not in only:
                continue
            for mode in MODES:
                start = time.time()
                fn(mode)
                print(f"     ({name} {mode}: {time.time() - start:.1f} s)", flush=True)
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    R.finish("test_model_life")


if __name__ == "__main__":
    main()
