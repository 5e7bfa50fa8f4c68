"""storage_bench.py -- the bytes of a model's afternoon: 10 retrains with attn_fit and an
8-trial attn_tune on one name, default recipe, in a file database; then attn_prune(name, keep)
and VACUUM. Prints one markdown table (tests/bench/RESULTS.md, "Storage").

  /usr/bin/python3 tests/bench/storage_bench.py [--csv data/headlines.csv] [--keep 2]
      [--epochs N]   (N: epochs per training; the bytes of a version do not depend on it)
      [--keep-trials false]   (attn_tune stores only its chosen trial)
"""
import argparse
import json
import os
import sqlite3
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def file_bytes(db):
    return db.execute("PRAGMA page_count").fetchone()[0] * db.execute("PRAGMA page_size").fetchone()[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", default=os.path.join(ROOT, "data", "headlines.csv"))
    ap.add_argument("--keep", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=0, help="0: the recipe's own")
    ap.add_argument("--extension", default=os.path.join(ROOT, "attnext"))
    ap.add_argument("--keep-trials", choices=("true", "false"), default="true",
                    help="attn_tune's keep_trials: false stores only the chosen trial")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="attn_storage_")
    path = os.path.join(tmp, "afternoon.db")
    db = sqlite3.connect(path, isolation_level=None)
    db.enable_load_extension(True)
    db.load_extension(a.extension)
    import csv
    with open(a.csv, newline="") as f:
        rows = list(csv.reader(f))
    db.execute("CREATE TABLE docs(text, label)")
    db.executemany("INSERT INTO docs VALUES(?, ?)", [r[:2] for r in rows[1:]])
    data_bytes = file_bytes(db)
    q = "SELECT text, label FROM docs"
    extra = {"epochs": a.epochs} if a.epochs else {}
    start = time.time()
    for seed in range(1, 11):
        db.execute("SELECT attn_fit('news', ?, ?)", (q, json.dumps(dict(extra, seed=seed)))).fetchone()
    grid = json.dumps({"lr": [0.001, 0.003], "hidden": [32, 64], "dropout": [0.3, 0.5]})
    tune = dict(extra, keep_trials=a.keep_trials == "true")
    db.execute("SELECT count(*) FROM attn_tune('news', ?, ?, ?)", (q, grid, json.dumps(tune))).fetchone()
    seconds = time.time() - start
    versions, weights = db.execute("SELECT count(*), sum(length(weights)) FROM attn_models").fetchone()
    per_version = weights / versions
    before = file_bytes(db) - data_bytes
    prev = db.execute("SELECT version FROM attn_models WHERE deployed = 0 AND deployed_seq > 0 "
                      "ORDER BY deployed_seq DESC LIMIT 1").fetchone()
    removed = db.execute("SELECT attn_prune('news', ?)", (a.keep,)).fetchone()[0]
    db.execute("VACUUM")
    left, left_weights = db.execute("SELECT count(*), sum(length(weights)) FROM attn_models").fetchone()
    after = file_bytes(db) - data_bytes
    mb = lambda b: f"{b / 1e6:.1f} MB"
    print(f"corpus {os.path.basename(a.csv)}: {len(rows) - 1} rows; {versions} versions in "
          f"{seconds:.0f} s; 'previous' was {prev[0] if prev else None}", file=sys.stderr)
    print("| | versions | bytes a version (weights) | the model store in the file |")
    print("| --- | --- | --- | --- |")
    trials = "8 trials" if a.keep_trials == "true" else "8 trials (`\"keep_trials\": false`)"
    print(f"| 10 retrains + {trials}, nothing removed | {versions} | {mb(per_version)} | {mb(before)} |")
    print(f"| then `attn_prune('news', {a.keep})` + `VACUUM` | {left} ({removed} removed) | "
          f"{mb(left_weights / left)} | {mb(after)} |")


if __name__ == "__main__":
    main()
