"""storage_float16.py -- what "storage": "float16" costs: the default recipe trained twice on the
same rows and seed, stored as float32 (the default) and as float16, then both scored on the
corpus's test rows. Per corpus: weighted test F1 of each, the bytes of each version's weights,
the validation F1 each stored (float16: of the rounded weights, and the float32 figure beside
it), the test rows whose predicted label differs, and the largest difference between the two
models' probabilities of any label of any test row. Prints one markdown table
(tests/bench/RESULTS.md, "Half-size versions").

  /usr/bin/python3 tests/bench/storage_float16.py [--corpora ag,debian,wordnet]
      [--db DIR]   (one file database per corpus, kept there; default a temporary folder)

AG News from $ATTNEXT_DATA (ag_news_train_10k.csv -> ag_news_test.csv); Debian and WordNet
from data/corpora/ (make data/corpora/SOURCES.txt).
"""
import argparse
import csv
import json
import os
import sqlite3
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from lesson_text import data_dir  # noqa: E402

NAMES = {"ag": "AG News titles (10,000 -> 7,600)", "debian": "Debian descriptions (30,000 -> 9,872)",
         "wordnet": "WordNet glosses (25,000 -> 7,500)"}


def paths(name):
    if name == "ag":
        d = data_dir()
        return os.path.join(d, "ag_news_train_10k.csv"), os.path.join(d, "ag_news_test.csv")
    d = os.path.join(ROOT, "data", "corpora")
    return os.path.join(d, name + "_train.csv"), os.path.join(d, name + "_test.csv")


def read_rows(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return [r[:2] for r in rows[1:]]


def weighted_f1(y_true, y_pred):
    from sklearn.metrics import f1_score
    return float(f1_score(y_true, y_pred, average="weighted", zero_division=0))


def run(name, folder):
    train_path, test_path = paths(name)
    path = os.path.join(folder, f"float16_{name}.db")
    if os.path.exists(path):
        os.remove(path)
    db = sqlite3.connect(path, isolation_level=None)
    db.enable_load_extension(True)
    db.load_extension(os.path.join(ROOT, "attnext"))
    db.execute("CREATE TABLE train(text, label)")
    db.execute("CREATE TABLE test(id INTEGER PRIMARY KEY, text, label)")
    db.execute("BEGIN")
    db.executemany("INSERT INTO train VALUES(?, ?)", read_rows(train_path))
    db.executemany("INSERT INTO test(text, label) VALUES(?, ?)", read_rows(test_path))
    db.execute("COMMIT")
    out = {"corpus": name}
    for model, options in (("f32", {}), ("f16", {"storage": "float16"})):
        start = time.time()
        summary = json.loads(db.execute("SELECT attn_fit(?, 'SELECT text, label FROM train', ?)",
                                        (model, json.dumps(dict(options, progress=False)))).fetchone()[0])
        out[model] = {"seconds": time.time() - start, "val_f1": summary["val_f1"],
                      "val_f1_float32": summary.get("val_f1_float32"),
                      "clamped": summary.get("float16_clamped", 0)}
        out[model]["bytes"] = db.execute("SELECT length(weights) FROM attn_models WHERE name = ?",
                                         (model,)).fetchone()[0]
        print(f"{name} {model}: {out[model]}", file=sys.stderr)
    truth = [r[0] for r in db.execute("SELECT label FROM test ORDER BY id")]
    labels, probs = {}, {}
    for model in ("f32", "f16"):
        labels[model] = [r[0] for r in db.execute(
            "SELECT attn_predict(?, text) FROM test ORDER BY id", (model,))]
        probs[model] = {(r[0], r[1]): r[2] for r in db.execute(
            "SELECT t.id, p.label, p.probability FROM test t, attn_probs(?, t.text) p", (model,))}
        out[model]["test_f1"] = weighted_f1(truth, labels[model])
    out["differ"] = sum(a != b for a, b in zip(labels["f32"], labels["f16"]))
    out["rows"] = len(truth)
    out["max_prob_diff"] = max(abs(probs["f32"][k] - probs["f16"][k]) for k in probs["f32"])
    db.close()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpora", default="ag,debian,wordnet")
    ap.add_argument("--db", default=None)
    a = ap.parse_args()
    folder = a.db or tempfile.mkdtemp(prefix="attn_float16_")
    results = [run(name, folder) for name in a.corpora.split(",")]
    print(json.dumps(results), file=sys.stderr)
    print("| corpus | test F1 float32 | test F1 float16 | bytes a version float32 | float16 | "
          "validation F1 float16 (as trained) | test rows predicted otherwise | largest "
          "probability difference |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        f32, f16 = r["f32"], r["f16"]
        print(f"| {NAMES.get(r['corpus'], r['corpus'])} | {f32['test_f1']:.4f} | "
              f"{f16['test_f1']:.4f} | {f32['bytes'] / 1e6:.2f} MB | {f16['bytes'] / 1e6:.2f} MB "
              f"({f16['bytes'] / f32['bytes']:.3f}) | {f16['val_f1']:.4f} "
              f"({f16['val_f1_float32']:.4f}) | {r['differ']} of {r['rows']} | "
              f"{r['max_prob_diff']:.2e} |")


if __name__ == "__main__":
    main()
