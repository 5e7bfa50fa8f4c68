"""memory_bench.py -- training memory per row: peak RSS and time per epoch of attn_train over
1 to 1,000,000 AG News titles (the 10k training titles repeated, each copy with a suffix word
"vNNN" naming the copy, so rows differ and the vocabulary counts more distinct words).

For each row count, a database file is written first (by this process), then a child process
loads the extension, opens the file and reads VmHWM / VmRSS from /proc/self/status before
attn_train and after it (ru_maxrss survives exec and may report the parent's peak, so it is
not used). The child trains the lesson's recipe (rnn 128, batch 64) for --epochs epochs and
reports the engine's seconds per epoch. "per row" is the slope of the peak growth between
successive row counts (bytes per row); linear growth means the slopes agree.

    /usr/bin/python3 tests/bench/memory_bench.py --rows 20000,200000,1000000
    /usr/bin/python3 tests/bench/memory_bench.py --json out.json
"""
import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from lesson_text import data_dir, read_csv  # noqa: E402

ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))

CHILD = r"""
import json, sqlite3, sys, time
def status():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmHWM", "VmRSS"):
                out[k] = int(v.split()[0]) * 1024
    return out
ext, path, options = sys.argv[1], sys.argv[2], sys.argv[3]
db = sqlite3.connect(path, isolation_level=None)
db.enable_load_extension(True)
db.load_extension(ext)
db.execute("SELECT attn_version()").fetchone()
db.execute("SELECT count(*) FROM train").fetchone()
before = status()
t0 = time.perf_counter()
rows = db.execute("SELECT epoch, seconds FROM attn_train('m', 'SELECT title, category FROM "
                  "train', ?)", (options,)).fetchall()
wall = time.perf_counter() - t0
after = status()
print(json.dumps({"before": before, "after": after, "wall": wall,
                  "epoch_seconds": [r[1] for r in rows]}))
"""


def make_db(path, titles, labels, n):
    if os.path.exists(path):
        os.unlink(path)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=OFF")
    db.execute("CREATE TABLE train(title TEXT, category TEXT)")
    db.execute("BEGIN")
    m = len(titles)

    def rows():
        for i in range(n):
            copy, k = divmod(i, m)
            yield (titles[k] if copy == 0 else "%s v%d" % (titles[k], copy), labels[k])

    db.executemany("INSERT INTO train VALUES (?, ?)", rows())
    db.execute("COMMIT")
    text_bytes = db.execute("SELECT sum(length(CAST(title AS BLOB))) FROM train").fetchone()[0]
    db.close()
    return text_bytes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ext", default=os.path.join(ROOT, "attnext"))
    ap.add_argument("--rows", default="20000,200000,1000000")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--options", default="", help="extra attn_train options (JSON object)")
    ap.add_argument("--json", default="", help="write the figures here")
    args = ap.parse_args()
    titles, labels = read_csv(os.path.join(data_dir(), "ag_news_train_10k.csv"))
    options = {"recipe": "lesson", "cell": "rnn", "hidden": 128, "embed_dim": 100,
               "fc_hidden": 100, "dropout": 0.1, "batch_size": 64, "lr": 1e-3,
               "epochs": args.epochs, "patience": 1000, "seed": 1234,
               "threads": args.threads, "progress": False}
    if args.options:
        options.update(json.loads(args.options))
    points = []
    with tempfile.TemporaryDirectory(prefix="attnext_mem_") as tmp:
        path = os.path.join(tmp, "mem.db")
        for n in [int(x) for x in args.rows.split(",")]:
            text_bytes = make_db(path, titles, labels, n)
            out = subprocess.run([sys.executable, "-c", CHILD, args.ext, path,
                                  json.dumps(options)], capture_output=True, text=True)
            if out.returncode != 0:
                raise SystemExit("memory_bench: child failed: %s" % out.stderr)
            r = json.loads(out.stdout)
            growth = r["after"]["VmHWM"] - r["before"]["VmRSS"]
            p = {"rows": n, "text_bytes_per_row": text_bytes / n,
                 "peak_rss_mib": r["after"]["VmHWM"] / 2**20,
                 "rss_before_mib": r["before"]["VmRSS"] / 2**20,
                 "peak_growth_mib": growth / 2**20,
                 "seconds_per_epoch": min(r["epoch_seconds"]), "wall_seconds": r["wall"]}
            if points:
                q = points[-1]
                p["bytes_per_row_slope"] = (growth - q["peak_growth_mib"] * 2**20) / (n - q["rows"])
            points.append(p)
            print("rows %9d: peak RSS %7.1f MiB (growth %7.1f MiB, %s bytes/row slope), "
                  "%.3f s/epoch, text %.1f bytes/row" % (
                      n, p["peak_rss_mib"], p["peak_growth_mib"],
                      "%.1f" % p["bytes_per_row_slope"] if "bytes_per_row_slope" in p else "-",
                      p["seconds_per_epoch"], p["text_bytes_per_row"]), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"options": options, "points": points}, f, indent=1)


if __name__ == "__main__":
    main()
