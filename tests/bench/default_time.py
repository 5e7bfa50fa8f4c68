"""default_time.py -- the default recipe's training time over 0.1.0's default's, same rows.

The default's time budget is at most 3x; this measures the ratio on one machine, in one run.

Each corpus's training rows go into an in-memory database; attn_fit trains 0.1.0's default
({"recipe": "lesson", "lr": 0.001, "epochs": 20}) and today's default, alternating (the order
swapped every other round, so neither always runs first), --rounds times each, with
"threads": 1. The figure is CPU seconds of this process around attn_fit (user +
system: another process on the machine moves it less than wall time), the best of the rounds.

    /usr/bin/python3 tests/bench/default_time.py --corpora ag,debian,wordnet

--options adds options to today's default's side (e.g. '{"ensemble": 3}': what a default of
three networks would cost against the same 0.1.0 budget).
"""
import argparse
import json
import os
import resource
import sqlite3
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import quality as q  # noqa: E402
from lesson_text import cpu_model  # noqa: E402

ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
RECIPES = (("0.1.0", q.PREVIOUS_DEFAULT), ("default", {}))


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ext", default=os.path.join(ROOT, "attnext"))
    ap.add_argument("--corpora", default="ag,debian,wordnet")
    ap.add_argument("--rounds", type=int, default=2)
    q.corpus_args(ap)
    ap.add_argument("--options", default="{}",
                    help="a JSON object of options added to the default's side")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    try:
        extra = json.loads(args.options)
    except ValueError as e:
        ap.error("--options: %s" % e)
    if not isinstance(extra, dict):
        ap.error("--options must be a JSON object, e.g. '{\"ensemble\": 3}'")
    recipes = (RECIPES[0], ("default", dict(RECIPES[1][1], **extra)))
    label = "default" + (" + " + json.dumps(extra, sort_keys=True) if extra else "")
    print("# %s vs 0.1.0's default, CPU seconds, one thread (%s)" % (label, cpu_model()))
    print("\n| corpus | 0.1.0 | %s | ratio |\n| --- | --- | --- | --- |" % label, flush=True)
    for corpus in args.corpora.split(","):
        train_path, _ = q.corpus_paths(corpus, args)
        db = sqlite3.connect(":memory:")
        db.enable_load_extension(True)
        db.load_extension(args.ext)
        db.execute("CREATE TABLE t(text, label)")
        db.executemany("INSERT INTO t VALUES (?, ?)", q.read_csv(train_path))
        best = {}
        for n in range(args.rounds):
            for name, options in (recipes if n % 2 == 0 else recipes[::-1]):
                opts = json.dumps(dict(options, threads=1, progress=False))
                start = cpu_seconds()
                db.execute("SELECT attn_fit(?, 'SELECT text, label FROM t', ?)",
                           ("%s_%d" % (name, n), opts)).fetchone()
                s = cpu_seconds() - start
                best[name] = min(best.get(name, s), s)
                print("default_time: %s round %d %s: %.2f s" % (corpus, n + 1, name, s),
                      file=sys.stderr, flush=True)
        db.close()
        print("| %s | %.2f s | %.2f s | %.2fx |" % (corpus, best["0.1.0"], best["default"],
                                                   best["default"] / best["0.1.0"]), flush=True)


if __name__ == "__main__":
    main()
