#!/usr/bin/env python3
"""unlabelled_holdout.py -- attn_fit's options compared with unlabelled rows in the table, scored
on held-out training rows (never on a test split): how the default's pretraining was chosen.

Per corpus: a fixed shuffle (seed 100 + --seed) of the training split; the first 8,000 rows are
the pool, the next 2,000 the held-out rows. For each N of --sizes, a table of the pool's first N
rows with their labels and the rest of the pool with a NULL label (--no-unlabelled: the N rows
alone); each variant (a JSON object of options) is trained on it and scored on the held-out
rows (weighted F1). Prints one line per corpus and N: the F1 and the seconds of each variant.

    /usr/bin/python3 tests/bench/unlabelled_holdout.py '{}' '{"pretrain_epochs":0}'
    /usr/bin/python3 tests/bench/unlabelled_holdout.py --corpora ag --sizes 200 \\
        '{"pretrain_epochs":20}' '{"pretrain_epochs":40}'
    /usr/bin/python3 tests/bench/unlabelled_holdout.py --no-unlabelled --tfidf \\
        --sizes 500,1000,2500 '{}' '{"embed_dim":64}'
"""
import argparse
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from learning_curve import attnext_run  # noqa: E402
from quality import corpus_args, corpus_paths, read_csv, tfidf_lr  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpora", default="ag,debian,wordnet")
    corpus_args(ap)
    ap.add_argument("--sizes", default="200,500,1000")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--extension", default=os.path.join(ROOT, "attnext"))
    ap.add_argument("--no-unlabelled", action="store_true")
    ap.add_argument("--tfidf", action="store_true",
                    help="first, TF-IDF (1-2 grams) + LR on the same labelled rows")
    ap.add_argument("variants", nargs="+", help="JSON objects of attn_fit options")
    args = ap.parse_args()
    variants = [json.loads(v) for v in args.variants]
    for corpus in args.corpora.split(","):
        rows = read_csv(corpus_paths(corpus, args)[0])
        random.Random(100 + args.seed).shuffle(rows)
        pool, held_out = rows[:8000], rows[8000:10000]
        for n in map(int, args.sizes.split(",")):
            labelled = pool[:n]
            unlabelled = [] if args.no_unlabelled else [r[0] for r in pool[n:]]
            cells = []
            if args.tfidf:
                cells.append("tfidf %.3f" % tfidf_lr(labelled, held_out)["test_f1"])
            for options in variants:
                r = attnext_run(args.extension, labelled, unlabelled, held_out, options)
                cells.append("%.3f (%.0fs)" % (r["test_f1"], r["seconds"]))
            print("%s %d: %s" % (corpus, n, "  ".join(cells)), flush=True)


if __name__ == "__main__":
    main()
