"""explain_bench.py -- throughput of attn_explain as a correlated table-valued function over a
table, beside attn_weights in the same run (the machine is shared: only the ratio and figures
taken together compare).

Trains the lesson's recipe (default options; --attention picks the kind) on
$ATTNEXT_DATA/ag_news_train_10k.csv in a temporary database, loads ag_news_test.csv as `test`,
then times, on one core (both run on the calling thread with the connection's workspace):
  SELECT count(*), sum(e.occlusion) FROM test, attn_explain('bench', test.title) AS e;
  SELECT count(*), sum(w.weight)    FROM test, attn_weights('bench', test.title) AS w;
alternating, --runs times each, and prints the best and median texts/s of each and the ratio.

    /usr/bin/python3 tests/bench/explain_bench.py [--runs 5] [--attention linear]
"""
import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lesson_text import cpu_model, data_dir, read_csv  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--attention", default="linear")
    ap.add_argument("--limit", type=int, default=0, help="test titles (0: all 7,600)")
    args = ap.parse_args()
    data = data_dir()
    train_csv = os.path.join(data, "ag_news_train_10k.csv")
    test_csv = os.path.join(data, "ag_news_test.csv")
    if not (os.path.exists(train_csv) and os.path.exists(test_csv)):
        print(f"AG News not found in {data} (set ATTNEXT_DATA)")
        return 77
    ext = os.path.abspath(os.environ.get("ATTNEXT", "attnext"))
    with tempfile.TemporaryDirectory(prefix="attn_explain_bench_") as tmp:
        db = sqlite3.connect(os.path.join(tmp, "bench.db"), isolation_level=None)
        db.enable_load_extension(True)
        db.load_extension(ext)
        for table, path in (("train", train_csv), ("test", test_csv)):
            rows = list(zip(*read_csv(path)))
            if table == "test" and args.limit:
                rows = rows[:args.limit]
            db.execute(f"CREATE TABLE {table}(title TEXT, category TEXT)")
            db.executemany(f"INSERT INTO {table} VALUES (?, ?)", rows)
        db.execute("SELECT count(*) FROM attn_train('bench', "
                   "'SELECT title, category FROM train', ?)",
                   (json.dumps({"recipe": "lesson", "lr": 1e-3, "epochs": 20,
                                "attention": args.attention, "progress": False}),)).fetchall()
        n = db.execute("SELECT count(*) FROM test").fetchone()[0]
        tokens = db.execute("SELECT count(*) FROM test, "
                            "attn_weights('bench', test.title)").fetchone()[0]
        queries = {
            "attn_explain": "SELECT count(*), sum(e.occlusion) FROM test, "
                            "attn_explain('bench', test.title) AS e",
            "attn_weights": "SELECT count(*), sum(w.weight) FROM test, "
                            "attn_weights('bench', test.title) AS w",
        }
        times = {k: [] for k in queries}
        for k, q in queries.items():  # warm-up: the model loaded, the workspace grown
            db.execute(q).fetchall()
        for _ in range(args.runs):
            for k, q in queries.items():
                t0 = time.perf_counter()
                db.execute(q).fetchall()
                times[k].append(time.perf_counter() - t0)
    out = {"cpu": cpu_model(), "attention": args.attention, "texts": n,
           "tokens_per_text": round(tokens / n, 2), "runs": args.runs}
    for k, ts in times.items():
        out[k + "_texts_per_s_best"] = round(n / min(ts))
        out[k + "_texts_per_s_median"] = round(n / statistics.median(ts))
    out["weights_over_explain"] = round(min(times["attn_explain"]) / min(times["attn_weights"]), 2)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
