"""val_fraction_holdout.py -- choose val_fraction without the test split (issue 20).

Validation F1 cannot compare validation splits of different sizes, so each corpus's training
rows are split once more: a stratified 15% holdout (random.Random(1000 + seed)) that no model
trains or chooses on, and the other 85%, on which attnext trains with each val_fraction (its own
validation split taken from them). Prints the holdout's weighted F1. --variants compares any
option sets the same way (RESULTS.md: "The default's neighbourhood").

    /usr/bin/python3 tests/bench/val_fraction_holdout.py --ext ./attnext \
        --corpora ag,debian,wordnet --fractions 0.15,0.1,0.05 --seeds 1,2,3
"""
import argparse
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import quality as q  # noqa: E402

ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ext", default=os.path.join(ROOT, "attnext"))
    ap.add_argument("--corpora", default="ag,debian,wordnet")
    ap.add_argument("--fractions", default="0.15,0.1,0.05")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--variants", default="",
                    help='option sets to compare instead of --fractions, as a JSON array, '
                    'e.g. \'[{}, {"lr": 4e-3}]\'')
    ap.add_argument("--data", default=None, help="AG News CSVs (default: $ATTNEXT_DATA)")
    ap.add_argument("--corpora-dir", default=os.path.join(ROOT, "data", "corpora"))
    args = ap.parse_args()
    variants = (json.loads(args.variants) if args.variants else
                [{"val_fraction": float(x)} for x in args.fractions.split(",")])
    for corpus in args.corpora.split(","):
        train_path, _ = q.corpus_paths(corpus, args)
        rows = q.read_csv(train_path)
        for seed in [int(s) for s in args.seeds.split(",")]:
            rng = random.Random(1000 + seed)
            by_label = {}
            for r in rows:
                by_label.setdefault(r[1], []).append(r)
            inner, holdout = [], []
            for label in sorted(by_label):
                group = by_label[label][:]
                rng.shuffle(group)
                k = round(0.15 * len(group))
                holdout += group[:k]
                inner += group[k:]
            rng.shuffle(inner)
            a = q.Attnext(args.ext, inner, holdout, 1)
            for v in variants:
                r = a.run(dict(v, seed=seed))
                print("%s seed %d %s: holdout F1 %.4f (validation F1 %.4f, best epoch %d, "
                      "%.1f s)" % (corpus, seed, json.dumps(v, sort_keys=True), r["test_f1"],
                                   r["val_f1"], r["best_epoch"], r["seconds"]), flush=True)
            a.close()


if __name__ == "__main__":
    main()
