#!/usr/bin/env python3
"""choose_word_dropout.py -- could the default choose word dropout on its own rows? A prototype
of the choice, in Python over attn_fit, measured before it is built into the recipe.

Word dropout 0.2 (the default) against 0 is a lever of the corpus at every size: package
descriptions whose section one word names gain 0.02-0.03 without it, titles lose 0.03-0.04
(tests/bench/RESULTS.md, "One network on Debian at 1,000-2,500 labels"). Here, per corpus, N
and shuffle (the first N rows of shuffle `seed` of the training split, as learning_curve.py):
the N labelled rows are cut into --folds folds by position; each setting trains on all folds
but one and classifies that one, the predictions of every fold scored together (weighted F1 on
the N rows' own labels); the setting with the higher score (0.2 on a tie) is trained on all N
rows and scored on the test split. Nothing is chosen on the test split. Prints, per N, each
shuffle's test F1, the setting chosen and the two cross-validated scores, and the seconds the
choice took (every fold fit of both settings). --fold-epochs 0.33: the folds' fits make a third
of the recipe's epochs (a cheaper choice).

    /usr/bin/python3 tests/bench/choose_word_dropout.py --corpora debian,ag --sizes 500,1000
"""
import argparse
import json
import os
import random
import sqlite3
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from quality import corpus_args, corpus_paths, read_csv, weighted  # noqa: E402


def fit_predict(extension, labelled, texts, options):
    db = sqlite3.connect(":memory:")
    try:
        db.enable_load_extension(True)
        db.load_extension(extension)
        db.execute("CREATE TABLE t(text, label)")
        db.executemany("INSERT INTO t VALUES (?, ?)", labelled)
        db.execute("CREATE TABLE s(text)")
        db.executemany("INSERT INTO s VALUES (?)", [(x,) for x in texts])
        db.execute("SELECT attn_fit('m', 'SELECT text, label FROM t', ?)",
                   (json.dumps(dict(options, progress=False)),))
        return [r[0] for r in db.execute(
            "SELECT label FROM attn_classify('m', 'SELECT rowid, text FROM s') ORDER BY id")]
    finally:
        db.close()


def sized_epochs(n):
    """The default recipe's epochs for n training rows (engine/config.c: about 32 batches an
    epoch of 8 to 64 rows, epochs for 1,000 optimizer steps, 15 to 60)."""
    b = 8
    while b < 64 and b * 32 < n:
        b *= 2
    batches = (n + b - 1) // b
    return min(60, max(15, (1000 + batches - 1) // batches))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpora", default="ag,debian,wordnet")
    corpus_args(ap)
    ap.add_argument("--extension", default=os.path.join(ROOT, "attnext"))
    ap.add_argument("--sizes", default="500,1000,2500")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--folds", type=int, default=3)
    ap.add_argument("--values", default="0.2,0", help="the word_dropout values to choose from")
    ap.add_argument("--fold-epochs", type=float, default=1.0,
                    help="the folds' fits make this share of the recipe's epochs (at least 1)")
    ap.add_argument("--fold-epochs-of-all", action="store_true",
                    help="the folds' fits make the epochs the recipe sizes to all N rows")
    ap.add_argument("--fold-options", default="{}", help="more options of the folds' fits (JSON)")
    args = ap.parse_args()
    values = [float(v) for v in args.values.split(",")]
    for corpus in args.corpora.split(","):
        train_path, test_path = corpus_paths(corpus, args)
        train_all, test = read_csv(train_path), read_csv(test_path)
        for size in args.sizes.split(","):
            n = min(int(size), len(train_all))
            runs = []
            for seed in range(args.seeds):
                rows = train_all[:]
                random.Random(seed).shuffle(rows)
                labelled = rows[:n]
                start = time.perf_counter()
                scores = {}
                for wd in values:
                    pred = [None] * n
                    for k in range(args.folds):
                        held = [i for i in range(n) if i % args.folds == k]
                        trained = [r for i, r in enumerate(labelled) if i % args.folds != k]
                        options = dict(json.loads(args.fold_options), word_dropout=wd)
                        if args.fold_epochs_of_all:
                            options["epochs"] = sized_epochs(n)
                        elif args.fold_epochs != 1.0:
                            options["epochs"] = max(1, round(sized_epochs(len(trained))
                                                             * args.fold_epochs))
                        got = fit_predict(args.extension, trained,
                                          [labelled[i][0] for i in held], options)
                        for i, label in zip(held, got):
                            pred[i] = label
                    scores[wd] = weighted([r[1] for r in labelled], pred)[0]
                seconds = time.perf_counter() - start
                chosen = max(values, key=lambda w: (scores[w], -values.index(w)))
                f1 = weighted([r[1] for r in test],
                              fit_predict(args.extension, labelled, [r[0] for r in test],
                                          {"word_dropout": chosen}))[0]
                runs.append((f1, chosen, scores, seconds))
            print("%s %d: %s; mean %.3f" % (corpus, n, " | ".join(
                "%.3f with %g (%s; %.0f s)" % (f1, chosen, " / ".join(
                    "%g: %.3f" % (w, s[w]) for w in values), sec)
                for f1, chosen, s, sec in runs), sum(r[0] for r in runs) / len(runs)),
                flush=True)


if __name__ == "__main__":
    main()
