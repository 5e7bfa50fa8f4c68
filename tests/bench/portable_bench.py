"""portable_bench.py -- the portable attnext.so (the default build: x86-64-v2 baseline, the CPU
backend's kernels picked at run time) against the -march=native build, side by side.

`make bench` (and `make bench-portable`, this alone) builds both and runs this. The machine may be
shared, so the two builds alternate: each round runs one child process per build, in alternating
order, and each child times, in a fresh copy of one database (AG News 10k titles, test 7,600):
  - training: the lesson's recipe (rnn 128, embed 100, fc 100, batch 64, dropout 0.1) for
    --epochs epochs, the engine's per-epoch `seconds` (the first epoch dropped: warm-up);
  - one-row inference: SELECT count(attn_predict('bench', title)) FROM test, --repeat times.
Wall time (the engine's `seconds`, perf_counter) and this process's CPU time (getrusage) both: with
--threads 1 the CPU time is the steadier figure on a loaded machine.
Medians per build over all rounds, and portable / native ratios. Noise that hits one round hits
both builds equally often. Prints a Markdown table for tests/bench/RESULTS.md and writes
tests/bench/portable_results.json.

    /usr/bin/python3 tests/bench/portable_bench.py --native build/native/attnext --rounds 8
"""
import argparse
import json
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from lesson_text import cpu_model, read_csv  # noqa: E402

ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
DATA = os.path.normpath(os.path.join(ROOT, "..", "shared", "data"))


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child(args):
    """One build, one round: the JSON object of its timings on stdout."""
    db = sqlite3.connect(args.db, isolation_level=None)
    db.enable_load_extension(True)
    db.load_extension(args.ext)
    db.enable_load_extension(False)
    version = db.execute("SELECT attn_version()").fetchone()[0]
    options = {"recipe": "lesson", "cell": "rnn", "hidden": 128, "embed_dim": 100, "fc_hidden": 100, "dropout": 0.1,
               "batch_size": 64, "lr": 1e-3, "epochs": args.epochs, "patience": 1000,
               "seed": 1234, "threads": args.threads, "progress": False}
    c0 = cpu_seconds()
    epochs = [row[0] for row in db.execute(
        "SELECT seconds FROM attn_train('bench', 'SELECT title, category FROM train', ?)",
        (json.dumps(options),))]
    train_cpu = (cpu_seconds() - c0) / len(epochs)
    predict, predict_cpu = [], []
    rows = 0
    for _ in range(args.repeat):
        t0, c0 = time.perf_counter(), cpu_seconds()
        rows = db.execute("SELECT count(attn_predict('bench', title)) FROM test").fetchone()[0]
        predict.append(time.perf_counter() - t0)
        predict_cpu.append(cpu_seconds() - c0)
    f1 = db.execute("SELECT f1 FROM attn_evaluate('bench', 'SELECT title, category FROM test') "
                    "WHERE label = 'overall'").fetchone()
    print(json.dumps({"version": version, "epoch_seconds": epochs[1:] or epochs,
                      "epoch_cpu_seconds": train_cpu, "predict_cpu_seconds": predict_cpu,
                      "predict_seconds": predict, "rows": rows, "test_f1": f1[0] if f1 else None}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--portable", default=os.path.join(ROOT, "attnext"))
    ap.add_argument("--native", default=os.path.join(ROOT, "build", "native", "attnext"))
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--json", default=os.path.join(HERE, "portable_results.json"))
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--ext", help=argparse.SUPPRESS)
    ap.add_argument("--db", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)

    tmp = tempfile.mkdtemp(prefix="attnext_portable_")
    try:
        base = os.path.join(tmp, "base.db")
        db = sqlite3.connect(base)
        db.execute("CREATE TABLE train(title TEXT, category TEXT)")
        db.execute("CREATE TABLE test(title TEXT, category TEXT)")
        db.executemany("INSERT INTO train VALUES (?, ?)",
                       zip(*read_csv(os.path.join(DATA, "ag_news_train_10k.csv"))))
        db.executemany("INSERT INTO test VALUES (?, ?)",
                       zip(*read_csv(os.path.join(DATA, "ag_news_test.csv"))))
        db.commit()
        db.close()
        builds = {"portable": args.portable, "native": args.native}
        runs = {name: [] for name in builds}
        for r in range(args.rounds):
            order = ["portable", "native"] if r % 2 == 0 else ["native", "portable"]
            for name in order:
                copy = os.path.join(tmp, "run.db")
                shutil.copyfile(base, copy)
                out = subprocess.run(
                    [sys.executable, __file__, "--child", "--ext", builds[name], "--db", copy,
                     "--epochs", str(args.epochs), "--repeat", str(args.repeat),
                     "--threads", str(args.threads)],
                    check=True, capture_output=True, text=True).stdout
                res = json.loads(out)
                runs[name].append(res)
                print("round %d %-8s epoch %.4f s, attn_predict %.1fk rows/s, F1 %.4f" % (
                    r + 1, name, statistics.median(res["epoch_seconds"]),
                    res["rows"] / statistics.median(res["predict_seconds"]) / 1e3,
                    res["test_f1"] or 0), file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    summary = {}
    for name, rs in runs.items():
        epoch = statistics.median([s for res in rs for s in res["epoch_seconds"]])
        rate = statistics.median([res["rows"] / s for res in rs for s in res["predict_seconds"]])
        epoch_cpu = statistics.median([res["epoch_cpu_seconds"] for res in rs])
        rate_cpu = statistics.median([res["rows"] / s for res in rs
                                      for s in res["predict_cpu_seconds"]])
        summary[name] = {"epoch_seconds": epoch, "predict_rows_per_second": rate,
                         "epoch_cpu_seconds": epoch_cpu, "predict_rows_per_cpu_second": rate_cpu,
                         "test_f1": rs[-1]["test_f1"], "version": rs[-1]["version"]}
    epoch_ratio = summary["portable"]["epoch_seconds"] / summary["native"]["epoch_seconds"]
    predict_ratio = (summary["native"]["predict_rows_per_second"]
                     / summary["portable"]["predict_rows_per_second"])
    epoch_cpu_ratio = (summary["portable"]["epoch_cpu_seconds"]
                       / summary["native"]["epoch_cpu_seconds"])
    predict_cpu_ratio = (summary["native"]["predict_rows_per_cpu_second"]
                         / summary["portable"]["predict_rows_per_cpu_second"])
    result = {"cpu": cpu_model(), "cores": os.cpu_count(), "threads": args.threads,
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "rounds": args.rounds, "epochs_per_round": args.epochs, "repeat": args.repeat,
              "builds": summary, "runs": runs,
              "portable_over_native": {"epoch_time": epoch_ratio, "predict_time": predict_ratio,
                                       "epoch_cpu": epoch_cpu_ratio,
                                       "predict_cpu": predict_cpu_ratio}}
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)
    print("Machine: %s, %d cores, %s; threads %d; %d alternating rounds of %d epochs and %d "
          "attn_predict passes (medians)" % (result["cpu"], result["cores"], result["date"],
                                            args.threads, args.rounds, args.epochs, args.repeat))
    print()
    print("| build | kernels | training epoch (wall) | epoch (CPU) | one-row attn_predict (wall) "
          "| attn_predict (CPU) | test F1 |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in ("native", "portable"):
        s = summary[name]
        kernels = s["version"].split("backends: cpu (", 1)[-1].split(" kernels", 1)[0]
        print("| %s | %s | %.4f s | %.4f s | %.1fk rows/s | %.1fk rows/s | %.4f |" % (
            name, kernels, s["epoch_seconds"], s["epoch_cpu_seconds"],
            s["predict_rows_per_second"] / 1e3, s["predict_rows_per_cpu_second"] / 1e3,
            s["test_f1"] or 0))
    print("| portable / native (time) | | %.3f | %.3f | %.3f | %.3f | |" % (
        epoch_ratio, epoch_cpu_ratio, predict_ratio, predict_cpu_ratio))
    worst = max(epoch_ratio, predict_ratio)
    print()
    print("portable within 5%% of native (wall-time medians): %s (worst ratio %.3f; CPU-time "
          "ratios %.3f, %.3f)" % ("yes" if worst <= 1.05 else "NO", worst, epoch_cpu_ratio,
                                  predict_cpu_ratio))


if __name__ == "__main__":
    main()
