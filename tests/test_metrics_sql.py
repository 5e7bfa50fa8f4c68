"""test_metrics_sql.py -- attn_metrics (ext/attn_metrics.c) against scikit-learn, through Debian's
Python sqlite3 module.

A small 4-class model is trained on synthetic rows (word cues with noise, so it is right on most
rows but not all); on held-out rows each figure of attn_metrics is compared, to 1e-6, with
scikit-learn's function on the probabilities attn_probs gives for the same texts (float64):
accuracy_score, precision_recall_fscore_support (macro / weighted, zero_division=0),
log_loss(labels=range(C)) and roc_auc_score (one-vs-rest, macro). Then: 2 classes (roc_auc of
class 1), rows of a single class (roc_auc NULL, as sklearn cannot define it), and the errors
(a label the model does not know, no rows, wrong arguments). Skipped (77) without
python3-sklearn (tests/deps.sh installs it).
Run from the repository root: /usr/bin/python3 tests/test_metrics_sql.py
"""
import os
import random
import sqlite3
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability as R  # noqa: E402  (check, connect, error_of, the ASan re-exec)

check, connect, error_of = R.check, R.connect, R.error_of
reexec_with_preload = R.reexec_with_preload

try:
    import numpy as np
    from sklearn.metrics import (accuracy_score, log_loss, precision_recall_fscore_support,
                                 roc_auc_score)
except ImportError:
    print("python3-sklearn is not installed (sh tests/deps.sh)")
    sys.exit(77)


CUES = {
    "world": ["war", "minister", "election", "embassy", "treaty"],
    "sports": ["match", "goal", "coach", "season", "league"],
    "business": ["shares", "profit", "market", "bank", "merger"],
    "scitech": ["software", "space", "chip", "internet", "research"],
}
FILLER = ["the", "new", "report", "says", "today", "after", "plan", "week", "big", "news"]


def make_rows(rng, n, labels):
    rows = []
    for _ in range(n):
        label = rng.choice(labels)
        # one cue of the label, sometimes one of another label: the model errs on some rows
        cues = [rng.choice(CUES[label])]
        if rng.random() < 0.5:
            cues.append(rng.choice(CUES[rng.choice(list(CUES))]))
        words = cues + [rng.choice(FILLER) for _ in range(rng.randint(2, 6))]
        rng.shuffle(words)
        rows.append((" ".join(words), label))
    return rows


def sklearn_figures(db, name, rows):
    labels = [r[0] for r in db.execute(
        "SELECT value FROM json_each((SELECT labels FROM attn_models WHERE name = ? AND deployed))",
        (name,))]
    index = {l: i for i, l in enumerate(labels)}
    probs = np.zeros((len(rows), len(labels)), dtype=np.float64)
    for i, (text, _) in enumerate(rows):
        for label, p in db.execute("SELECT label, probability FROM attn_probs(?, ?)", (name, text)):
            probs[i, index[label]] = p
    y = np.array([index[l] for _, l in rows])
    pred = probs.argmax(axis=1)
    out = {"accuracy": accuracy_score(y, pred)}
    for avg in ("macro", "weighted"):
        p, r, f, _ = precision_recall_fscore_support(y, pred, average=avg, zero_division=0)
        out[avg + "_precision"], out[avg + "_recall"], out[avg + "_f1"] = p, r, f
    out["log_loss"] = log_loss(y, probs, labels=list(range(len(labels))))
    if len(set(y)) < 2:
        out["roc_auc"] = None
    elif len(labels) == 2:
        out["roc_auc"] = roc_auc_score(y, probs[:, 1])
    else:
        out["roc_auc"] = roc_auc_score(y, probs, multi_class="ovr", average="macro",
                                       labels=list(range(len(labels))))
    return out


def compare(db, name, rows, what):
    db.execute("CREATE TEMP TABLE IF NOT EXISTS heldout(text TEXT, label TEXT)")
    db.execute("DELETE FROM heldout")
    db.executemany("INSERT INTO heldout VALUES (?, ?)", rows)
    got = dict(db.execute("SELECT metric, value FROM attn_metrics(?, 'SELECT text, label FROM heldout')",
                          (name,)))
    want = sklearn_figures(db, name, rows)
    check(list(got) == ["accuracy", "macro_precision", "macro_recall", "macro_f1",
                        "weighted_precision", "weighted_recall", "weighted_f1", "log_loss",
                        "roc_auc"], f"{what}: the nine figures in ML.EVALUATE's order: {list(got)}")
    for k, w in want.items():
        g = got.get(k)
        if w is None:
            check(g is None, f"{what}: {k} is NULL (sklearn: undefined), got {g}")
        else:
            check(g is not None and abs(g - w) <= 1e-6,
                  f"{what}: {k} = {g} vs sklearn {w:.9f} (diff {abs(g - w) if g is not None else 'n/a'})")
    return got


def main():
    reexec_with_preload()
    rng = random.Random(14)
    db = connect(":memory:")
    db.execute("CREATE TABLE train(text TEXT, label TEXT)")
    db.executemany("INSERT INTO train VALUES (?, ?)", make_rows(rng, 800, list(CUES)))
    opts = '{"epochs":10,"hidden":16,"embed_dim":16,"fc_hidden":16,"seed":3}'
    db.execute("SELECT attn_fit('four', 'SELECT text, label FROM train', ?)", (opts,)).fetchall()
    got = compare(db, "four", make_rows(rng, 300, list(CUES)), "4 classes")
    check(0.3 < got["accuracy"] < 1.0, f"4 classes: the model errs on some rows (accuracy {got['accuracy']})")

    db.execute("CREATE TABLE train2(text TEXT, label TEXT)")
    db.executemany("INSERT INTO train2 VALUES (?, ?)", make_rows(rng, 400, ["world", "sports"]))
    db.execute("SELECT attn_fit('two', 'SELECT text, label FROM train2', ?)", (opts,)).fetchall()
    compare(db, "two", make_rows(rng, 200, ["world", "sports"]), "2 classes")
    compare(db, "four", make_rows(rng, 50, ["sports"]), "rows of one class")

    # errors
    db.execute("CREATE TABLE odd(text TEXT, label TEXT)")
    db.execute("INSERT INTO odd VALUES ('war news', 'world'), ('goal', 'cooking')")
    e = error_of(db, "SELECT * FROM attn_metrics('four', 'SELECT text, label FROM odd')")
    check(e == "attn_metrics: label 'cooking' of row 2 is not one of the 4 labels of model 'four'",
          f"a label the model does not know: {e}")
    e = error_of(db, "SELECT * FROM attn_metrics('four', 'SELECT text, label FROM odd WHERE 0')")
    check(e == "attn_metrics: the query returned no rows", f"no rows: {e}")
    e = error_of(db, "SELECT * FROM attn_metrics('nope', 'SELECT text, label FROM odd')")
    check(e is not None and e.startswith("attn_metrics: no model named 'nope'"), f"missing model: {e}")
    e = error_of(db, "SELECT * FROM attn_metrics('four')")
    check(e == "attn_metrics: expected 2 arguments: attn_metrics(name, query)", f"one argument: {e}")
    e = error_of(db, "SELECT * FROM attn_metrics('four', 'SELECT text FROM odd')")
    check(e is not None and e.startswith("attn_metrics:"), f"one column: {e}")

    print("FAILED: %d check(s)" % R.failures if R.failures else "all attn_metrics checks passed")
    return 1 if R.failures else 0


if __name__ == "__main__":
    sys.exit(main())
