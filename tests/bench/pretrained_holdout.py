"""pretrained_holdout.py -- does the default gain from word vectors pretrained on the corpus's own
texts, unlabelled rows included?

The holdouts of val_fraction_holdout.py (a stratified random 15% of the training rows per seed,
or the last 15%). For each seed, attnext's default trains on the other 85% (its own validation
split taken from them) three ways:
  none       the default as it is (embedding rows drawn N(0, 1))
  train      its embedding rows start from skip-gram vectors (fastText's `skipgram`, 64 wide as
             the default's embeddings, subwords 3-6, 10 epochs, window 5) learnt on the texts
             given to attn_fit (its validation rows included), through the existing
             "embeddings" option
  unlabelled the same, learnt on those texts and the holdout's texts too (without their labels:
             the unlabelled rows a user's table may hold beside the labelled ones)
The vectors are standardised to the N(0, 1) scale of the rows they replace. Tokens as attnext's
default reads them (lower case, runs of [a-z0-9]); stop words never reach the vocabulary, so
their vectors are simply not used. Prints the holdout's weighted F1 per seed and way, then each
way's mean and its per-seed differences against "none".

    /usr/bin/python3 tests/bench/pretrained_holdout.py --corpora ag,debian,wordnet --seeds 1,2,3
"""
import argparse
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import quality as q  # noqa: E402
import val_fraction_holdout as vh  # noqa: E402

ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
WAYS = ("none", "train", "unlabelled")


def tokens(text):
    """attnext's default tokens, stop words aside: lower case, runs of [a-z0-9]."""
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).split()


def skipgram(texts, dim, workdir):
    """{word: vector} from fastText's skipgram over texts, standardised to mean 0, sd 1."""
    corpus = os.path.join(workdir, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        for t in texts:
            f.write(" ".join(tokens(t)) + "\n")
    out = os.path.join(workdir, "sg")
    subprocess.run(["fasttext", "skipgram", "-input", corpus, "-output", out, "-dim", str(dim),
                    "-minCount", "1", "-epoch", "10", "-ws", "5", "-thread", "1", "-verbose", "0"],
                   check=True)
    return read_vectors(out + ".vec", dim)


def read_vectors(path, dim):
    """{word: vector} of a word2vec text file ("count dim", then "word v1 .. vdim" lines; other
    lines skipped), every number standardised by the mean and sd of all of them."""
    vecs = {}
    with open(path, encoding="utf-8") as f:
        next(f)  # "count dim"
        for line in f:
            parts = line.rstrip().split(" ")
            if len(parts) == dim + 1:
                vecs[parts[0]] = [float(x) for x in parts[1:]]
    flat = [x for v in vecs.values() for x in v]
    mean, sd = statistics.mean(flat), statistics.pstdev(flat)
    return {w: [(x - mean) / sd for x in v] for w, v in vecs.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ext", default=os.path.join(ROOT, "attnext"))
    ap.add_argument("--corpora", default="ag,debian,wordnet")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--holdout", choices=("random", "tail"), default="random")
    q.corpus_args(ap)
    args = ap.parse_args()
    if not shutil.which("fasttext"):
        ap.error("needs fastText's command (apt-get install fasttext)")
    seeds = [int(s) for s in args.seeds.split(",")]
    for corpus in args.corpora.split(","):
        rows = q.read_csv(q.corpus_paths(corpus, args)[0])
        scores = {w: [] for w in WAYS}
        for seed in seeds:
            inner, holdout = vh.split(rows, args.holdout, seed)
            a = q.Attnext(args.ext, inner, holdout, 1)
            work = tempfile.mkdtemp(prefix="attnext-pretrained-")
            try:
                for way in WAYS:
                    opts = {"seed": seed}
                    if way != "none":
                        texts = [r[0] for r in inner]
                        if way == "unlabelled":
                            texts += [r[0] for r in holdout]
                        vecs = skipgram(texts, 64, work)
                        a.table("vecs", "word TEXT, vector BLOB",
                                [(w, struct.pack("<%df" % len(v), *v)) for w, v in vecs.items()])
                        opts["embeddings"] = "vecs"
                    r = a.run(opts)
                    scores[way].append(r["test_f1"])
                    print("%s %s seed %d %s: holdout F1 %.4f (validation F1 %.4f, best epoch %d)"
                          % (corpus, args.holdout, seed, way, r["test_f1"], r["val_f1"],
                             r["best_epoch"]), flush=True)
            finally:
                a.close()
                shutil.rmtree(work, ignore_errors=True)
        for way in WAYS:
            line = "%s %s mean of %d: %s %.4f" % (corpus, args.holdout, len(seeds), way,
                                                  statistics.mean(scores[way]))
            diff = vh.paired(scores[way], scores["none"]) if way != "none" else None
            if diff:
                line += " (against none, per seed %s: mean %+.4f, sd %.4f)" % (
                    " ".join("%+.4f" % x for x in diff[0]), diff[1], diff[2])
            print(line, flush=True)


if __name__ == "__main__":
    main()
