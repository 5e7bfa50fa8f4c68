"""explain_quality.py -- the figures of sql/TUTORIAL.md's "Is attention an explanation?": for
models trained on AG News 10k with each attention kind, the test accuracy, how often the most
attended token is the most important one by occlusion, chance, and the mean Spearman rho between
attention and occlusion per title. The SQL is the tutorial's own (read from sql/TUTORIAL.md, so
the figures and the query a reader copies cannot drift apart).

    /usr/bin/python3 tests/bench/explain_quality.py                   # the default recipe
    /usr/bin/python3 tests/bench/explain_quality.py --recipe lesson   # the lesson's
    /usr/bin/python3 tests/bench/explain_quality.py --quick           # the SQL still runs

Prints the tutorial's table (markdown). --quick runs the same SQL on the bundled demo headlines
(data/headlines.csv, tested on data/new_headlines.csv), linear attention, 3 epochs: a few
seconds, no AG News needed; tests/test_docs.py runs it.
"""
import argparse
import json
import os
import re
import sqlite3
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from lesson_text import data_dir, read_csv  # noqa: E402


def tutorial_sql():
    with open(os.path.join(ROOT, "sql", "TUTORIAL.md"), encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("## Is attention an explanation?"):]
    block = re.search(r"```sql\n(.*?)```", section, re.S).group(1)
    create, query = block.split(";\n\n", 1)
    return create + ";", query


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--recipe", default="default", choices=["default", "lesson"])
    ap.add_argument("--data", help="directory of the AG News CSVs (default: $ATTNEXT_DATA)")
    ap.add_argument("--extension", default=os.path.join(ROOT, "attnext"))
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--quick", action="store_true",
                    help="the bundled demo headlines, linear attention, 3 epochs")
    args = ap.parse_args()
    if args.quick:
        train = os.path.join(ROOT, "data", "headlines.csv")
        test = os.path.join(ROOT, "data", "new_headlines.csv")
    else:
        d = args.data or data_dir()
        train = os.path.join(d, "ag_news_train_10k.csv")
        test = os.path.join(d, "ag_news_test.csv")
    create, query = tutorial_sql()
    db = sqlite3.connect(":memory:", isolation_level=None)
    db.enable_load_extension(True)
    db.load_extension(args.extension)
    db.execute("CREATE TABLE headlines(title TEXT, category TEXT)")
    db.execute("CREATE TABLE test_headlines(title TEXT, category TEXT)")
    db.executemany("INSERT INTO headlines VALUES (?, ?)",
                   zip(*read_csv(train)))
    db.executemany("INSERT INTO test_headlines VALUES (?, ?)",
                   zip(*read_csv(test)))
    print("| attention | test accuracy | most attended = most important by occlusion "
          "| by chance | mean Spearman rho |")
    print("| --- | --- | --- | --- | --- |")
    for kind in ["linear"] if args.quick else ["linear", "additive", "self", "dot"]:
        opts = {"attention": kind, "progress": False}
        if args.quick:
            opts["epochs"] = 3
        if args.recipe == "lesson":
            opts["recipe"] = "lesson"
        if args.threads:
            opts["threads"] = args.threads
        db.execute("SELECT attn_fit('news', 'SELECT title, category FROM headlines', ?)",
                   (json.dumps(dict(opts, deploy="always")),))
        acc = db.execute("SELECT avg(p = category) FROM (SELECT attn_predict('news', title) "
                         "AS p, category FROM test_headlines)").fetchone()[0]
        db.execute("DROP TABLE IF EXISTS temp.explained")
        db.execute(create)
        texts, agree, chance, rho, with_rho = db.execute(query).fetchone()
        name = "`%s`%s" % (kind, " (the lesson's)" if kind == "linear" else "")
        print("| %s | %.1f%% | %.1f%% | %.1f%% | %.3f |" % (name, 100 * acc, agree, chance, rho),
              flush=True)
        print("explain_quality: %s: %d texts, %d with rho" % (kind, texts, with_rho),
              file=sys.stderr)


if __name__ == "__main__":
    main()
