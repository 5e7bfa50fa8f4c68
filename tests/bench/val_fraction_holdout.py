"""val_fraction_holdout.py -- compare option sets on a holdout of the training rows.

Validation F1 cannot compare validation splits of different sizes, and attnext's own validation
split chose the levers it would then grade, so each corpus's training rows are split once more:
a holdout that no model trains or chooses on, and the rest, on which attnext trains with each
option set (its own validation split taken from them). Prints the holdout's weighted F1 per seed,
then per option set its mean, and against the first set the per-seed differences with their
mean and standard deviation; --baselines adds TF-IDF + logistic regression and fastText
(quality.py's), trained on all the rest (as in quality.py, where they have no validation split
to hold out) and scored on the same holdout.

Two holdouts (--holdout):
  random   a stratified 15% at random (random.Random(1000 + seed)): the rows a model meets are
           like the ones it trained on (the default)
  tail     the last 15% of the rows in file order, the same for every seed, not stratified: rows
           unlike the rest where the file has an order (AG News: another class mix; the
           Debian and WordNet files are shuffled, so there it is one more random holdout)

    /usr/bin/python3 tests/bench/val_fraction_holdout.py --ext ./attnext \
        --corpora ag,debian,wordnet --fractions 0.15,0.1,0.05 --seeds 1,2,3
    /usr/bin/python3 tests/bench/val_fraction_holdout.py --corpora ag --holdout tail \
        --baselines --variants '[{}, {"stopwords": false}]' --seeds 1,2,3,4,5
"""
import argparse
import json
import os
import random
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import quality as q  # noqa: E402

ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


def split(rows, holdout, seed):
    """(inner, holdout) rows: see the module's comment."""
    if holdout == "tail":
        k = len(rows) - round(0.15 * len(rows))
        return rows[:k], rows[k:]
    rng = random.Random(1000 + seed)
    by_label = {}
    for r in rows:
        by_label.setdefault(r[1], []).append(r)
    inner, held = [], []
    for label in sorted(by_label):
        group = by_label[label][:]
        rng.shuffle(group)
        k = round(0.15 * len(group))
        held += group[:k]
        inner += group[k:]
    rng.shuffle(inner)
    return inner, held


def paired(f1s, ref):
    """Per-seed differences f1s - ref, their mean and sample sd; None unless both have the same
    two or more seeds."""
    if len(f1s) != len(ref) or len(f1s) < 2:
        return None
    d = [a - b for a, b in zip(f1s, ref)]
    return d, statistics.mean(d), statistics.stdev(d)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ext", default=os.path.join(ROOT, "attnext"))
    ap.add_argument("--corpora", default="ag,debian,wordnet")
    ap.add_argument("--fractions", default="0.15,0.1,0.05")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--variants", default="",
                    help='option sets to compare instead of --fractions, as a JSON array, '
                    'e.g. \'[{}, {"lr": 4e-3}]\'')
    ap.add_argument("--holdout", choices=("random", "tail"), default="random")
    ap.add_argument("--baselines", action="store_true",
                    help="also TF-IDF + logistic regression and fastText on the same holdout")
    q.corpus_args(ap)
    args = ap.parse_args()
    try:
        variants = (json.loads(args.variants) if args.variants else
                    [{"val_fraction": float(x)} for x in args.fractions.split(",")])
    except ValueError as e:
        ap.error("--variants / --fractions: %s" % e)
    if (not isinstance(variants, list) or not variants
            or not all(isinstance(v, dict) for v in variants)):
        ap.error("--variants must be a non-empty JSON array of option objects, e.g. '[{}]'")
    seeds = [int(s) for s in args.seeds.split(",")]
    for corpus in args.corpora.split(","):
        train_path, _ = q.corpus_paths(corpus, args)
        rows = q.read_csv(train_path)
        scores = {}  # system -> holdout F1 per seed
        for seed in seeds:
            inner, holdout = split(rows, args.holdout, seed)
            if args.baselines and (args.holdout == "random" or seed == seeds[0]):
                for name, r in (("TF-IDF + LR", q.tfidf_lr(inner, holdout)),
                                ("fastText", q.fasttext(inner, holdout, 1))):
                    if "error" in r:
                        print("%s: %s" % (name, r["error"]), flush=True)
                        continue
                    scores.setdefault(name, []).append(r["test_f1"])
                    print("%s %s seed %d %s: holdout F1 %.4f" % (corpus, args.holdout, seed,
                                                                 name, r["test_f1"]), flush=True)
            a = q.Attnext(args.ext, inner, holdout, 1)
            for v in variants:
                r = a.run(dict(v, seed=seed))
                scores.setdefault(json.dumps(v, sort_keys=True), []).append(r["test_f1"])
                # validation F1 is null where no split was kept (fewer than 5,000 rows)
                val = "-" if r["val_f1"] is None else "%.4f" % r["val_f1"]
                print("%s %s seed %d %s: holdout F1 %.4f (validation F1 %s, best epoch %d, "
                      "%.1f s)" % (corpus, args.holdout, seed, json.dumps(v, sort_keys=True),
                                   r["test_f1"], val, r["best_epoch"], r["seconds"]),
                      flush=True)
            a.close()
        first = json.dumps(variants[0], sort_keys=True)
        for name, f1s in scores.items():
            line = "%s %s mean of %d: %s %.4f" % (corpus, args.holdout, len(f1s), name,
                                                  sum(f1s) / len(f1s))
            diff = paired(f1s, scores[first]) if name != first else None
            if diff:
                line += " (against %s, per seed %s: mean %+.4f, sd %.4f)" % (
                    first, " ".join("%+.4f" % x for x in diff[0]), diff[1], diff[2])
            print(line, flush=True)


if __name__ == "__main__":
    main()
