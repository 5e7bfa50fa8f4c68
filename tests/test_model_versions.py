"""test_model_versions.py -- any stored version read without deploying it, and what a model's
life says about itself, through Debian's Python sqlite3 on a file database (WAL) with a second
connection reading meanwhile.

Checks, each printing what it compared:
  refs       'name@version' in every function that reads a model (predict, probs, weights,
             explain, embed, classify, uncertain, evaluate, metrics, confusion, curve,
             curve_svg, heatmap, heatmap_query, curves, matrix's 'model:' vectors) reads that
             stored version: the same answers as that version gives once deployed, while the
             deployed one and what a second connection reads stay as they were; a trailing '@'
             escapes a name that itself contains '@'; bad references and unknown names are
             clear errors, an unknown name with the closest stored name
  kept       attn_training_svg circles the epoch the training kept (the summary's best_epoch, the
             last attn_train row marked best) on the figure its monitor names, whatever the
             monitor, also where the lowest validation loss is another epoch
  said       the summary counts the texts cut at max_len tokens (recounted from attn_weights
             of a model that cuts nothing); a save inside the caller's open transaction says
             "committed": false and is gone when the program ends without COMMIT; every
             evaluation function refuses an empty query with the same error
  prune      attn_prune(name, keep) keeps the keep newest versions, the deployed one and the one
             'previous' restores, deletes the others with their log and lineage; what a second
             connection reads does not change; version numbers go on past the removed ones
  fair       "if_better" compares on rows neither version trained on: a retrain with another
             seed validates on the same rows (the same validation_sha256, recomputed here) and
             is compared; another validation mode, fraction or added rows deploy uncompared and
             say so; a tune's trials record their own held-out rows
  pictures   ext/REFERENCE.md's Python example that saves pictures without writefile() runs as
             written (the extension's path put in) and writes three SVG files
Run from the repository root: /usr/bin/python3 tests/test_model_versions.py [section ...]
"""
import json
import os
import shutil
import sqlite3
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability as R  # noqa: E402

check, connect, error_of = R.check, R.connect, R.error_of
TMP = tempfile.mkdtemp(prefix="attn_versions_")
TINY = json.loads(R.TINY)


def opts(**kw):
    o = dict(TINY)
    o.update(kw)
    return json.dumps(o)


def fresh(name, rows=90):
    path = os.path.join(TMP, f"{name}.db")
    db = connect(path)
    assert db.execute("PRAGMA journal_mode=wal").fetchone()[0] == "wal"
    if rows:
        R.make_table(db, n=rows)
    return path, db


def fit(db, name="m", options=None, query="SELECT text, label FROM docs"):
    out = db.execute("SELECT attn_fit(?, ?, ?)", (name, query, options or R.TINY)).fetchone()[0]
    return json.loads(out)


Q = "SELECT text, label FROM docs"
TEXT = "bank stocks market team goal"

# (what, SQL with ? for the model reference): every function that reads a model
READERS = [
    ("attn_predict", "SELECT attn_predict(?, text) FROM docs ORDER BY id"),
    ("attn_probs", f"SELECT label, probability FROM attn_probs(?, '{TEXT}')"),
    ("attn_weights", f"SELECT token, weight FROM attn_weights(?, '{TEXT}')"),
    ("attn_explain", f"SELECT * FROM attn_explain(?, '{TEXT}')"),
    ("attn_embed", f"SELECT attn_embed(?, '{TEXT}')"),
    ("attn_classify", "SELECT * FROM attn_classify(?, 'SELECT id, text FROM docs ORDER BY id')"),
    ("attn_uncertain", "SELECT * FROM attn_uncertain(?, 'SELECT id, text FROM docs ORDER BY id')"),
    ("attn_evaluate", f"SELECT * FROM attn_evaluate(?, '{Q}')"),
    ("attn_metrics", f"SELECT * FROM attn_metrics(?, '{Q}')"),
    ("attn_confusion", f"SELECT * FROM attn_confusion(?, '{Q}')"),
    ("attn_curve", f"SELECT * FROM attn_curve(?, '{Q}')"),
    ("attn_curve_svg", f"SELECT attn_curve_svg(?, '{Q}')"),
    ("attn_heatmap_svg", f"SELECT attn_heatmap_svg(?, '{TEXT}')"),
    ("attn_heatmap_query_svg", "SELECT attn_heatmap_query_svg(?, 'SELECT text FROM docs LIMIT 3')"),
    ("attn_training_svg", "SELECT attn_training_svg(?)"),
]


def read_all(db, ref, readers=READERS):
    out = {}
    for what, sql in readers:
        try:
            out[what] = db.execute(sql, (ref,)).fetchall()
        except sqlite3.Error as e:
            out[what] = "error: " + str(e)
    return out


def matrix(db, ref):
    return db.execute("SELECT * FROM attn_matrix('bank goal', 'stocks team', ?)",
                      ("model:" + ref,)).fetchall()


def test_refs():
    path, db = fresh("refs")
    fit(db, options=opts(deploy="always", seed=1))
    fit(db, options=opts(deploy="never", seed=7, epochs=3))
    other = connect(path)  # a second connection, reading the deployed version meanwhile
    before_other = read_all(other, "m")
    models_before = other.execute("SELECT name, version, deployed, deployed_seq "
                                  "FROM attn_models ORDER BY version").fetchall()
    check(models_before == [("m", 1, 1, models_before[0][3]), ("m", 2, 0, 0)],
          f"version 1 deployed, version 2 stored only: {models_before}")

    plain = read_all(db, "m")
    v1 = read_all(db, "m@1")
    v2 = read_all(db, "m@2")
    m1, m2 = matrix(db, "m@1"), matrix(db, "m@2")
    during_other = read_all(other, "m")
    for what, _ in READERS:
        check(not str(v2[what]).startswith("error"), f"{what}('m@2', ...) reads version 2: "
              f"{str(v2[what])[:80]}")
        check(v1[what] == plain[what],
              f"{what}: 'm@1' (the deployed version) gives what 'm' gives")
    check(v2["attn_predict"] != plain["attn_predict"] or v2["attn_probs"] != plain["attn_probs"],
          "version 2 is another model: its predictions or probabilities differ from version 1's")
    check(m1 == matrix(db, "m") and m1 != m2,
          "attn_matrix 'model:m@1' is 'model:m'; 'model:m@2' is version 2's embedding")
    check(during_other == before_other,
          "the second connection read the same answers while versions were scored")
    models_during = other.execute("SELECT name, version, deployed, deployed_seq "
                                  "FROM attn_models ORDER BY version").fetchall()
    check(models_during == models_before, "scoring a version deployed nothing")

    # deploying version 2 makes 'm' what 'm@2' was, everywhere
    db.execute("SELECT attn_deploy('m', 2)").fetchall()
    after = read_all(db, "m")
    after_other = read_all(other, "m")
    for what, _ in READERS:
        want = v2[what]
        check(after[what] == want and after_other[what] == want,
              f"{what}: once version 2 is deployed, 'm' gives what 'm@2' gave (both connections)")
    check(read_all(db, "m@1") == v1, "'m@1' still reads version 1 after the deploy")
    db.execute("SELECT attn_deploy('m', 'previous')").fetchall()
    check(read_all(other, "m") == before_other, "rolled back: the second connection reads version 1")

    # errors
    e = error_of(db, "SELECT attn_predict('m@9', 'x')")
    check(e == "attn_predict: model 'm' has no version 9", f"a missing version: {e}")
    e = error_of(db, "SELECT * FROM attn_evaluate('m@9', ?)", (Q,))
    check(e == "attn_evaluate: model 'm' has no version 9", f"a missing version (table): {e}")
    e = error_of(db, "SELECT attn_predict('@3', 'x')")
    check(e is not None and e.startswith("attn_predict: '@3' is no model reference"),
          f"an empty name: {e}")
    e = error_of(db, "SELECT attn_predict('m@99999999999999999999', 'x')")
    check(e is not None and "is no model reference" in e, f"a version past int64: {e}")
    e = error_of(db, "SELECT attn_training_svg('m@1', 2)")
    check(e == "attn_training_svg: the version is given twice ('m@1' and a second argument)",
          f"attn_training_svg with two versions: {e}")
    fit(db, name="news", options=opts(seed=3))
    for ref in ("newz", "nesw", "new", "newz@1"):
        e = error_of(db, "SELECT attn_predict(?, 'x')", (ref,))
        check(e == f"attn_predict: no model named '{ref.split('@')[0]}' (did you mean 'news'?)",
              f"an unknown name suggests the closest stored one: {e}")
    e = error_of(db, "SELECT attn_training_svg('newz')")
    check(e == "attn_training_svg: no model named 'newz' (did you mean 'news'?)", f"attn_training_svg too: {e}")
    e = error_of(db, "SELECT attn_predict('zzzzzz', 'x')")
    check(e == "attn_predict: no model named 'zzzzzz'", f"nothing close, no suggestion: {e}")

    # names containing '@'
    fit(db, name="abc@1", options=opts(seed=3))
    fit(db, name="me@example.com", options=opts(seed=3))
    fit(db, name="abc", options=opts(seed=5))
    def probs(ref):
        return db.execute(f"SELECT label, probability FROM attn_probs(?, '{TEXT}')",
                          (ref,)).fetchall()
    esc, lit, v1a, a = probs("abc@1@"), probs("me@example.com"), probs("abc@1"), probs("abc")
    check(esc == lit and esc != v1a and v1a == a,
          "'abc@1@' is the model named 'abc@1' (trained as the model named 'me@example.com' is, "
          "same seed); 'abc@1' is version 1 of 'abc'")
    check(probs("me@example.com@") == lit, "'me@example.com@' is 'me@example.com' too")
    db.execute("DELETE FROM attn_models WHERE name = 'abc'")
    e = error_of(db, "SELECT attn_predict('abc@1', 'x')")
    check(e == "attn_predict: no model named 'abc' (did you mean 'abc@1@'?)",
          f"a suggested name that a reference would misread comes escaped: {e}")
    other.close()
    db.close()


def kept_mark(svg):
    """The kept epoch's legend text and the panel its circle is on (left: loss, right: metrics)."""
    import re
    text = re.findall(r"kept: [^<]*", svg)
    circles = [float(x) for x in re.findall(r'<circle cx="([0-9.]+)" cy="[0-9.]+" r="6"', svg)]
    marks = [x for x in circles if x != 310.0]  # 310: the legend's circle
    panel = None if len(marks) != 1 else ("loss" if marks[0] < 500 else "metrics")
    return (text[0] if text else None), panel


def test_kept():
    path, db = fresh("kept", rows=120)
    for monitor, panel in (("val_f1", "metrics"), ("val_loss", "loss"), ("val_accuracy", "metrics")):
        cur = db.execute("SELECT * FROM attn_train('k', ?, ?)",
                         (Q, opts(epochs=6, monitor=monitor, deploy="always")))
        rows = cur.fetchall()
        best_col = [d[0] for d in cur.description].index("best")
        marked = [r[0] for r in rows if r[best_col]]
        version, metrics = db.execute("SELECT version, metrics FROM attn_models WHERE name = 'k' "
                                      "ORDER BY version DESC LIMIT 1").fetchone()
        kept = json.loads(metrics)["best_epoch"]
        text, where = kept_mark(db.execute("SELECT attn_training_svg(?)", (f"k@{version}",)).fetchone()[0])
        check(text == f"kept: epoch {kept}, best {monitor}" and where == panel and marked[-1] == kept,
              f"monitor {monitor}: attn_training_svg marks {text!r} on the {where} panel; the summary "
              f"kept epoch {kept}, attn_train marked {marked}")
    # a log whose lowest validation loss (epoch 2) is not the kept epoch (4, by val_f1)
    blob = db.execute("SELECT weights FROM attn_models WHERE name = 'k' LIMIT 1").fetchone()[0]
    db.execute("INSERT INTO attn_models(name, version, created_at, deployed, config, labels, "
               "metrics, weights) VALUES ('f1', 1, '2026-01-01', 0, '{}', '[]', "
               "'{\"best_epoch\":4,\"monitor\":\"val_f1\"}', ?)", (blob,))
    log = [(1, 1.0, 0.9, 0.5, 0.5), (2, 0.8, 0.6, 0.6, 0.6), (3, 0.7, 0.7, 0.7, 0.7),
           (4, 0.6, 0.8, 0.8, 0.9), (5, 0.5, 0.9, 0.7, 0.8)]
    db.executemany("INSERT INTO attn_training_log VALUES ('f1', 1, ?, ?, ?, ?, ?, 0.001, 1)", log)
    text, where = kept_mark(db.execute("SELECT attn_training_svg('f1')").fetchone()[0])
    check(text == "kept: epoch 4, best val_f1" and where == "metrics",
          f"lowest val_loss at epoch 2, val_f1 kept epoch 4: marked {text!r} on {where}")
    db.execute("UPDATE attn_models SET metrics = NULL WHERE name = 'f1'")
    text, where = kept_mark(db.execute("SELECT attn_training_svg('f1')").fetchone()[0])
    check(text == "kept: epoch 2, best val_loss" and where == "loss",
          f"no summary: the lowest validation loss is marked: {text!r} on {where}")
    # no validation: the last epoch is kept, marked on the train loss
    fit(db, name="noval", options=opts(validation="none", epochs=3))
    text, where = kept_mark(db.execute("SELECT attn_training_svg('noval')").fetchone()[0])
    check(text == "kept: epoch 3" and where == "loss", f"no validation: {text!r} on {where}")
    db.close()


def test_said():
    path, db = fresh("said", rows=0)
    db.execute("CREATE TABLE docs(id INTEGER PRIMARY KEY, text, label)")
    rows = R.make_rows(60)
    # some texts longer than 6 tokens: the short ones repeated
    rows = [((t + " ") * (1 + i % 3), c) for i, (t, c) in enumerate(rows)]
    db.executemany("INSERT INTO docs(text, label) VALUES(?, ?)", rows)
    fit(db, name="full", options=opts(max_len=4096))
    lengths = [db.execute("SELECT count(*) FROM attn_weights('full', ?)", (t,)).fetchone()[0]
               for t, _ in rows]
    want = sum(1 for n in lengths if n > 6)
    summary = fit(db, name="cut", options=opts(max_len=6))
    stored = json.loads(db.execute("SELECT metrics FROM attn_models WHERE name = 'cut'").fetchone()[0])
    check(summary["truncated_texts"] == want == stored["truncated_texts"] and 0 < want < len(rows),
          f"max_len 6: {summary['truncated_texts']} texts cut (stored: {stored['truncated_texts']}), "
          f"{want} of {len(rows)} have more than 6 tokens")
    check(fit(db, name="full2", options=opts(max_len=4096))["truncated_texts"] == 0,
          "max_len 4096: no text cut")
    # attn_train's last row carries the same summary (a hidden column, not in SELECT *)
    got = db.execute("SELECT epoch, version, summary FROM attn_train('cut2', ?, ?)",
                     (Q, opts(max_len=6))).fetchall()
    last = json.loads(got[-1][2]) if got and got[-1][2] else {}
    check(all(r[2] is None for r in got[:-1]) and last.get("truncated_texts") == want and
          last.get("version") == got[-1][1] and last.get("committed") is True and
          last.get("name") == "cut2" and "deploy_reason" in last,
          f"attn_train's last row: summary with truncated_texts {last.get('truncated_texts')} "
          f"(want {want}), version, committed, deploy_reason; NULL on the {len(got) - 1} others")
    cols = [d[0] for d in db.execute("SELECT * FROM attn_train('cut3', ?, ?)",
                                     (Q, opts(max_len=6))).description]
    check("summary" not in cols, f"SELECT * leaves the hidden summary out: {cols}")
    e = error_of(db, "SELECT * FROM attn_train('cut4', ?, ?, 'extra')", (Q, opts()))
    check(e == "attn_train: expected 2 or 3 arguments: attn_train(name, query[, options])",
          f"a fourth argument (it would fill the hidden summary column): refused: {e}")
    check(summary["committed"] is True, f"a save with no transaction open: committed {summary['committed']}")

    # Python's sqlite3 in its default mode opens a transaction before an INSERT, and leaves it
    # open: a training then saves inside it
    py = sqlite3.connect(path)
    py.enable_load_extension(True)
    py.load_extension(R.extension_path())
    py.execute("INSERT INTO docs(text, label) VALUES('bank bank bank', 'money')")
    out = json.loads(py.execute("SELECT attn_fit('open', 'SELECT text, label FROM docs', ?)",
                                (R.TINY,)).fetchone()[0])
    check(out["committed"] is False and py.in_transaction,
          f"inside the caller's open transaction: committed {out['committed']}")
    py.close()  # no commit()
    n = db.execute("SELECT count(*) FROM attn_models WHERE name = 'open'").fetchone()[0]
    check(n == 0, f"closed without commit(): the version is gone ({n} rows)")

    # empty queries: one error in every evaluation function
    empty = "SELECT text, label FROM docs WHERE 0"
    for fn, sql in (("attn_evaluate", "SELECT * FROM attn_evaluate('full', ?)"),
                    ("attn_confusion", "SELECT * FROM attn_confusion('full', ?)"),
                    ("attn_metrics", "SELECT * FROM attn_metrics('full', ?)"),
                    ("attn_curve", "SELECT * FROM attn_curve('full', ?)"),
                    ("attn_curve_svg", "SELECT attn_curve_svg('full', ?)")):
        e = error_of(db, sql, (empty,))
        check(e == f"{fn}: the query returned no rows", f"{fn} over an empty query: {e}")
    db.close()


def test_pictures():
    import re
    import subprocess
    text = open(os.path.join(os.path.dirname(__file__), "..", "ext", "REFERENCE.md")).read()
    part = text[text.index("**Saving a picture from a program.**"):]
    code = re.search(r"```python\n(.*?)```", part, re.S).group(1)
    work = os.path.join(TMP, "pictures")
    os.makedirs(work)
    db = connect(os.path.join(work, "news.db"))
    db.execute("CREATE TABLE headlines(title, category)")
    db.executemany("INSERT INTO headlines VALUES(?, ?)", R.make_rows(60))
    fit(db, name="news", options=opts(), query="SELECT title, category FROM headlines")
    db.close()
    code = code.replace('"./attnext"', repr(R.extension_path()))
    run = subprocess.run([sys.executable, "-c", code], cwd=work, capture_output=True, text=True,
                         timeout=120)
    check(run.returncode == 0, f"the Python example runs: rc {run.returncode} {run.stderr[-300:]}")
    for name in ("heatmap.svg", "curve.svg", "training.svg"):
        path = os.path.join(work, name)
        body = open(path).read() if os.path.exists(path) else ""
        check("<svg" in body and body.rstrip().endswith("</svg>"),
              f"it wrote {name}: {len(body)} characters of SVG")


def test_prune():
    path, db = fresh("prune")
    deploys = {2: "always", 5: "always"}  # 5 deployed now, 2 what 'previous' restores
    for v in range(1, 9):
        fit(db, options=opts(seed=v, deploy=deploys.get(v, "never")))
    other = connect(path)
    before = read_all(other, "m", READERS[:3])
    sizes = dict(db.execute("SELECT version, length(weights) FROM attn_models"))

    def state():
        return {t: sorted(r[0] for r in db.execute(f"SELECT DISTINCT version FROM {t} "
                                                    "WHERE name = 'm'"))
                for t in ("attn_models", "attn_training_log", "attn_lineage")}
    check(state()["attn_models"] == list(range(1, 9)), f"8 versions: {state()}")
    removed = db.execute("SELECT attn_prune('m', 2)").fetchone()[0]
    after = state()
    check(removed == 4 and all(v == [2, 5, 7, 8] for v in after.values()),
          f"keep 2: removed {removed}, left the 2 newest (7, 8), the deployed (5) and 'previous' "
          f"(2), their log and lineage too: {after}")
    check(read_all(other, "m", READERS[:3]) == before,
          "the second connection reads the same answers after the prune")
    e = error_of(other, "SELECT attn_predict('m@3', 'x')")
    check(e == "attn_predict: model 'm' has no version 3", f"a removed version: {e}")
    freed = sum(sizes[v] for v in (1, 3, 4, 6))
    check(freed > 0, f"{freed} bytes of weights removed")
    check(db.execute("SELECT attn_prune('m', 0)").fetchone()[0] == 2 and
          state()["attn_models"] == [2, 5], "keep 0: only the deployed one and 'previous' stay")
    check(db.execute("SELECT attn_deploy('m', 'previous')").fetchone()[0] == 2,
          "'previous' still restores version 2")
    check(db.execute("SELECT attn_prune('m', 0)").fetchone()[0] == 0 and
          state()["attn_models"] == [2, 5], "after the rollback: 2 deployed, 5 'previous', both kept")
    check(fit(db, options=opts(seed=9))["version"] == 9, "the next version is 9, past the removed")
    for sql, want in (
            ("SELECT attn_prune('m', -1)", "attn_prune: keep must be an integer from 0 (the "
             "versions to keep besides the deployed one and 'previous'), got -1"),
            ("SELECT attn_prune('m', 'two')", "attn_prune: keep must be an integer from 0 (the "
             "versions to keep besides the deployed one and 'previous'), got 'two'"),
            ("SELECT attn_prune('m', NULL)", "attn_prune: keep must be an integer from 0 (the "
             "versions to keep besides the deployed one and 'previous'), got NULL"),
            ("SELECT attn_prune('mm', 1)", "attn_prune: no model named 'mm'"),
            ("SELECT attn_prune(NULL, 1)", "attn_prune: the model name must be a non-empty text, got NULL")):
        e = error_of(db, sql)
        check(e == want, f"{sql}: {e}")
    e = error_of(connect(":memory:"), "SELECT attn_prune('m', 1)")
    check(e == "attn_prune: no model named 'm'", f"no model store: {e}")
    other.close()
    db.close()


def sha_of_rows(rows):
    import hashlib
    h = hashlib.sha256()
    for text, label in rows:
        for field in (str(text).encode(), str(label).encode()):
            h.update(len(field).to_bytes(8, "little"))
            h.update(field)
    return h.hexdigest()


def test_fair():
    import re
    path, db = fresh("fair", rows=120)
    first = fit(db, options=opts(seed=1))
    second = fit(db, options=opts(seed=2, epochs=3))
    ids = [json.loads(db.execute("SELECT metrics FROM attn_models WHERE version = ?", (v,))
                      .fetchone()[0])["validation_sha256"] for v in (1, 2)]
    check(ids[0] == ids[1], f"seeds 1 and 2 hold out the same rows: {ids[0][:12]} {ids[1][:12]}")
    rows = db.execute("SELECT text, label FROM docs ORDER BY id").fetchall()
    below = sum(R.text_position(t) < 0.15 for t, _ in rows)
    check(first["val_rows"] == below and
          re.search(rf"on the same {below} validation rows \(held out by both\)$",
                    second["deploy_reason"]) is not None,
          f"another seed is compared on the same rows, the {below} whose text falls below "
          f"val_fraction 0.15: {second['deploy_reason']}")
    last = fit(db, options=opts(validation="last"))
    check(last["validation_sha256"] == sha_of_rows(rows[-18:]),
          "validation_sha256 of \"last\" is the SHA-256 of the last 18 rows, recomputed here")
    check(last["deployed"] is True and last["deploy_reason"].startswith(
        "not compared: the deployed version 2 held out other rows than these 18 validation rows")
          and last["deploy_reason"].endswith("the new version is deployed"),
          f"\"last\" after a random split: deployed, not compared: {last['deploy_reason']}")
    worse = fit(db, options=opts(validation="last", epochs=1, lr=0.00001, seed=5))
    check(worse["deployed"] is False and "(held out by both)" in worse["deploy_reason"],
          f"\"last\" again on the same rows: compared, and a worse one refused: "
          f"{worse['deploy_reason']}")
    frac = fit(db, options=opts(val_fraction=0.3))
    check(frac["deploy_reason"].startswith("not compared:"),
          f"another val_fraction: not compared: {frac['deploy_reason']}")
    # rows added: each text keeps its side, so the deployed version never trained on the new
    # validation rows (they were on its validation side, or not in its table): compared there
    trained = {t for t, _ in rows if R.text_position(t) >= 0.3}
    db.executemany("INSERT INTO docs(text, label) VALUES(?, ?)", R.make_rows(30, seed=9))
    rows = db.execute("SELECT text, label FROM docs ORDER BY id").fetchall()
    held = [t for t, _ in rows if R.text_position(t) < 0.3]
    grown = fit(db, options=opts(val_fraction=0.3))
    check(grown["val_rows"] == len(held) and not trained & set(held) and
          re.search(rf"the deployed version 5's .*on these {len(held)} validation rows, which "
                    r"neither trained on \(both split by a hash of each text at this "
                    r"val_fraction\)", grown["deploy_reason"]) is not None,
          f"rows added since: compared on the {len(held)} rows whose text falls below 0.3, none "
          f"of them a training row of version 5: {grown['deploy_reason']}")
    # a class whose only row falls on the validation side trains on it (split_moved): the
    # next run with other rows cannot know that version never trained on its validation rows
    lone = next(f"solo {k}" for k in range(1000) if R.text_position(f"solo {k}") < 0.3)
    db.execute("INSERT INTO docs(text, label) VALUES(?, 'solo')", (lone,))
    moved = fit(db, options=opts(val_fraction=0.3, deploy="always"))
    db.executemany("INSERT INTO docs(text, label) VALUES(?, ?)", R.make_rows(10, seed=10))
    after = fit(db, options=opts(val_fraction=0.3))
    check(moved["split_moved"] == 1 and moved["val_rows"] == len(held) and
          after["deploy_reason"].startswith("not compared: the deployed version 7"),
          f"a lone class's row trains (split_moved {moved['split_moved']}); the next run is not "
          f"compared with it: {after['deploy_reason']}")
    trials = db.execute("SELECT version FROM attn_tune('m', ?, '{\"val_fraction\":[0.2,0.3]}', ?)",
                        (Q, opts(deploy="never"))).fetchall()
    tids = [json.loads(db.execute("SELECT metrics FROM attn_models WHERE version = ?", (v,))
                       .fetchone()[0])["validation_sha256"] for (v,) in trials]
    check(len(set(tids)) == 2 and tids[1] == after["validation_sha256"],
          f"a tune's trials record their own held-out rows (fractions 0.2 and 0.3)")
    db.close()


SECTIONS = {"refs": test_refs, "fair": test_fair, "kept": test_kept, "said": test_said, "prune": test_prune,
            "pictures": test_pictures}

if __name__ == "__main__":
    for name in sys.argv[1:] or SECTIONS:
        print(f"--- {name}", flush=True)
        SECTIONS[name]()
    shutil.rmtree(TMP, ignore_errors=True)
    R.finish("test_model_versions")
