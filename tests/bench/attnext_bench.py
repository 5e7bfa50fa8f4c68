"""attnext_bench.py -- the attnext side of `make bench`: the lesson's recipe through the real
extension, timed the way pytorch_recipe.py times PyTorch.

It loads the training and test CSVs into a temporary database (Python's sqlite3 module, no
torch imported), then, in this process:
  SELECT * FROM attn_train('bench', 'SELECT title, category FROM train',
         '{"cell":"rnn","hidden":128,"embed_dim":100,"fc_hidden":100,"dropout":0.1,
           "batch_size":64,"epochs":N,"patience":1000,"progress":false}');
      -- one row per epoch as it ends: the engine's own `seconds`, plus the wall and CPU time
      --    between rows measured here
  SELECT * FROM attn_evaluate('bench', 'SELECT title, category FROM test');   -- 'overall' row
  SELECT count(attn_predict('bench', title)) FROM test;     -- one core: runs on this thread
  SELECT count(label) FROM attn_classify('bench', 'SELECT rowid, title FROM test');  -- 2 cores
and prints one JSON object with the same keys as pytorch_recipe.py, plus peak RSS of this
process (ru_maxrss) before and after training. bench.py runs it as a child process so the RSS is
that of attnext alone (Python + SQLite + the extension).

    /usr/bin/python3 tests/bench/attnext_bench.py --epochs 3
    /usr/bin/python3 tests/bench/attnext_bench.py --epochs 1 --cell lstm --scale 8 --no-infer
"""
import argparse
import json
import os
import resource
import sqlite3
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from lesson_text import (add_run_args, count_tokens, data_dir, read_csv,  # noqa: E402
                         replicate, subset)

ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
DATA = data_dir()


def rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def loaded_blas():
    """The BLAS libraries mapped into this process (attnext.so should bring its own only)."""
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            if "blas" in path.lower():
                libs.add(path)
    return sorted(libs)


def param_count(cell, V, E, H, F, C):
    """Parameters of the lesson's network (same count as PyTorch's model.parameters())."""
    g = {"rnn": 1, "gru": 3, "lstm": 4}[cell]
    return V * E + g * H * (E + H) + 2 * g * H + (H + 1) + (H * F + F) + (F * C + C)


def timed(db, sql, repeat):
    """(first run's seconds, median seconds over `repeat` runs, the result row, cores used:
    this process's CPU seconds / wall seconds over all runs)."""
    times, row = [], None
    c0 = cpu_seconds()
    for _ in range(repeat):
        t0 = time.perf_counter()
        row = db.execute(sql).fetchone()
        times.append(time.perf_counter() - t0)
    return times[0], statistics.median(times), row, (cpu_seconds() - c0) / sum(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ext", default=os.path.join(ROOT, "attnext"), help="extension path")
    add_run_args(ap, DATA)
    ap.add_argument("--threads", type=int, default=0, help="attn_train's threads (0 = all)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each inference query")
    ap.add_argument("--options", default="", help="extra attn_train options (JSON object)")
    ap.add_argument("--no-infer", action="store_true", help="skip the inference timings")
    ap.add_argument("--no-test", action="store_true", help="skip the test-set evaluation")
    ap.add_argument("--sweep", default="",
                    help="comma-separated cell:hidden:scale points, each trained --epochs in this "
                         "process without test or inference (the scaling study); prints "
                         '{"system": "attnext", "sweep": [one object per point]}')
    args = ap.parse_args()

    tmpdir = tempfile.mkdtemp(prefix="attnext_bench_")
    db = sqlite3.connect(os.path.join(tmpdir, "bench.db"), isolation_level=None)
    try:
        db.enable_load_extension(True)
        db.load_extension(args.ext)
        db.enable_load_extension(False)
        if not args.sweep:
            print(json.dumps(run(db, args)))
        else:
            points = []
            for spec in args.sweep.split(","):
                cell, hidden, scale = spec.split(":")
                a = argparse.Namespace(**vars(args))
                a.cell, a.hidden, a.scale = cell, int(hidden), int(scale)
                a.no_test = a.no_infer = True
                points.append(run(db, a))
            print(json.dumps({"system": "attnext", "sweep": points}))
    finally:
        db.close()
        for f in os.listdir(tmpdir):
            os.unlink(os.path.join(tmpdir, f))
        os.rmdir(tmpdir)


def run(db, args):
    """Load the data into `db` (tables train/test, replaced), train, test and time inference
    as args say; the result object."""
    titles, labels = read_csv(args.train)
    if args.rows:
        titles, labels = subset(titles, labels, args.rows)
    tokens_per_title = dict(zip(titles, count_tokens(titles)))
    titles, labels = replicate(titles, labels, args.scale, args.seed)
    mean_tokens = sum(tokens_per_title[t] for t in titles) / len(titles)

    version = db.execute("SELECT attn_version()").fetchone()[0]
    db.execute("DROP TABLE IF EXISTS train")
    db.execute("DROP TABLE IF EXISTS test")
    db.execute("CREATE TABLE train(title TEXT, category TEXT)")
    db.execute("CREATE TABLE test(title TEXT, category TEXT)")
    db.execute("BEGIN")
    db.executemany("INSERT INTO train VALUES (?, ?)", zip(titles, labels))
    if not args.no_test:
        test_titles, test_labels = read_csv(args.test)
        if args.test_rows:
            test_titles, test_labels = subset(test_titles, test_labels, args.test_rows)
        db.executemany("INSERT INTO test VALUES (?, ?)", zip(test_titles, test_labels))
    db.execute("COMMIT")
    rss_before = rss_mib()

    # the lesson's recipe (its tokenizer, vocabulary and loss), at the bench's lr and epochs
    options = {"recipe": "lesson", "cell": args.cell, "hidden": args.hidden, "embed_dim": 100, "fc_hidden": 100,
               "dropout": 0.1, "batch_size": 64, "lr": 1e-3, "epochs": args.epochs,
               "patience": 1000, "seed": args.seed, "threads": args.threads, "progress": False}
    if args.options:
        options.update(json.loads(args.options))
    epochs = []
    # Python's sqlite3 steps one row ahead, so rows arrive one epoch late: time the whole
    # call here and take each epoch's time from the engine's `seconds` column.
    t_start, c_start = time.perf_counter(), cpu_seconds()
    cur = db.execute("SELECT epoch, train_loss, val_loss, val_accuracy, val_f1, lr, seconds, "
                     "best FROM attn_train('bench', 'SELECT title, category FROM train', ?)",
                     (json.dumps(options),))
    for row in cur:
        ep = dict(zip(["epoch", "train_loss", "val_loss", "val_accuracy", "val_f1", "lr",
                       "seconds", "best"], row))
        epochs.append(ep)
        print("attnext %s h%d x%d epoch %d: %.2fs loss %.4f val_loss %.4f val_f1 %.4f"
              % (args.cell, args.hidden, args.scale, ep["epoch"], ep["seconds"],
                 ep["train_loss"], ep["val_loss"], ep["val_f1"]), file=sys.stderr)
    train_wall = time.perf_counter() - t_start  # includes preparation and saving
    train_cpu = cpu_seconds() - c_start
    rss_train = rss_mib()
    model = db.execute("SELECT metrics, json_extract(config, '$.vocab_size') FROM attn_models "
                       "WHERE name = 'bench' ORDER BY version DESC LIMIT 1").fetchone()
    metrics = json.loads(model[0] or "{}")
    train_rows = int(metrics.get("train_rows") or round(len(titles) * 0.85))
    val_rows = int(metrics.get("val_rows") or len(titles) - train_rows)
    P = param_count(args.cell, int(model[1] or 5000), 100, args.hidden, 100, 4)

    out = {"system": "attnext", "version": version, "cell": args.cell, "hidden": args.hidden,
           "scale": args.scale, "rows": len(titles), "train_rows": train_rows,
           "val_rows": val_rows, "train_tokens": int(round(mean_tokens * train_rows)),
           "train_tokens_estimated": True, "params": P, "options": options,
           "epochs": epochs, "train_wall_seconds": train_wall, "train_cpu_seconds": train_cpu,
           "metrics": metrics, "rss_mib_before_model": rss_before, "rss_mib_train": rss_train}

    if not args.no_test:
        rows = db.execute("SELECT label, precision, recall, f1, support FROM attn_evaluate("
                          "'bench', 'SELECT title, category FROM test')").fetchall()
        overall = [r for r in rows if r[0] == "overall"]
        if not overall:
            raise SystemExit("attnext_bench: attn_evaluate returned no 'overall' row: %r" % rows)
        _, prec, rec, f1, support = overall[0]
        # Accuracy counted here from attn_predict, independently of attn_evaluate.
        correct = db.execute("SELECT sum(attn_predict('bench', title) = category), count(*) "
                             "FROM test").fetchone()
        out.update({"test_rows": correct[1], "test_accuracy": correct[0] / correct[1],
                    "test_precision": prec, "test_recall": rec, "test_f1": f1,
                    "test_support": support})
        if not args.no_infer:
            n = correct[1]
            first, med, row, cores = timed(
                db, "SELECT count(attn_predict('bench', title)) FROM test", args.repeat)
            out["infer_predict_cores"] = cores
            if row[0] != n:
                raise SystemExit("attnext_bench: attn_predict counted %r rows, expected %d" % (row, n))
            out["infer_predict_rows_per_s"] = n / med
            out["infer_predict_first_rows_per_s"] = n / first
            first, med, row, cores = timed(db, "SELECT count(label) FROM attn_classify('bench', "
                                           "'SELECT rowid, title FROM test')", args.repeat)
            out["infer_classify_cores"] = cores
            if row[0] != n:
                raise SystemExit("attnext_bench: attn_classify gave %r rows, expected %d" % (row, n))
            out["infer_classify_rows_per_s"] = n / med
            out["infer_classify_first_rows_per_s"] = n / first
            agree = db.execute(
                "SELECT avg(c.label = attn_predict('bench', t.title)) FROM attn_classify("
                "'bench', 'SELECT rowid, title FROM test') c JOIN test t ON t.rowid = c.id"
            ).fetchone()[0]
            out["infer_classify_agrees_with_predict"] = agree
    out["rss_mib_peak"] = rss_mib()
    out["blas_loaded"] = loaded_blas()
    if "numpy" in sys.modules:
        raise SystemExit("attnext_bench: numpy got imported; it would bring its own OpenBLAS")
    return out


if __name__ == "__main__":
    main()
