#!/usr/bin/env python3
"""learning_curve.py -- `make bench-curve`: how accurate is attnext with few labels, and what do
the table's unlabelled rows add? In one run, per corpus and per number of labelled rows N:

  TF-IDF+LR      scikit-learn TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True) +
                 LogisticRegression(C=10) on the N labelled rows
  fastText       Debian's `fasttext supervised -epoch 25 -wordNgrams 2` on the N rows
  self-training  scikit-learn SelfTrainingClassifier over the same TF-IDF+LR, with the rest of
                 the training split as unlabelled rows (label -1)
  fastText+vec   fastText given `-pretrainedVectors` learnt by `fasttext skipgram -dim 100
                 -minCount 1 -epoch 25` on every text of the pool, labels unused: the
                 semi-supervised peer
  attnext        attn_fit with no options on a table of the N labelled rows
  attnext+unl    attn_fit with no options on a table of the N labelled rows and the rest of the
                 training split with a NULL label

The N labelled rows are the first N of a fixed shuffle (--seed) of the corpus's training split;
every system is scored on the corpus's test split (weighted F1, sklearn). Nothing is chosen on
the test split: attnext sizes its recipe to the N rows and, from 500 of them, chooses its word
dropout on two folds of those rows (the summary's "sized" and "word_dropout_choice").

    /usr/bin/python3 tests/bench/learning_curve.py                       # every corpus
    /usr/bin/python3 tests/bench/learning_curve.py --corpora ag --sizes 200,500 --seeds 3

Corpora: ag (AG News titles, $ATTNEXT_DATA), debian and wordnet (data/make_corpora.py), and
any NAME with data/corpora/NAME_{train,test}.csv. Prints a markdown table per corpus (mean over
the seeds) and writes the figures as JSON (--out).
"""
import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from lesson_text import cpu_model  # noqa: E402
from quality import corpus_args, corpus_paths, read_csv, tfidf_lr, weighted  # noqa: E402

SYSTEMS = ["TF-IDF+LR", "fastText", "self-training", "fastText+vec", "attnext", "attnext+unl"]


def fasttext_run(train, test, threads, vectors=None, dim=100):
    exe = shutil.which("fasttext")
    if not exe:
        return {"error": "fasttext not installed (apt-get install fasttext)"}
    d = tempfile.mkdtemp(prefix="fasttext-curve-")
    try:
        def write(path, rows):
            with open(path, "w", encoding="utf-8") as f:
                for text, label in rows:
                    f.write("__label__%s %s\n" % (label.replace(" ", "_"), " ".join(text.split())))
        write(os.path.join(d, "train.txt"), train)
        write(os.path.join(d, "test.txt"), test)
        extra = ["-pretrainedVectors", vectors, "-dim", str(dim)] if vectors else []
        start = time.perf_counter()
        subprocess.run([exe, "supervised", "-input", os.path.join(d, "train.txt"), "-output",
                        os.path.join(d, "m"), "-epoch", "25", "-wordNgrams", "2", "-thread",
                        str(threads or 2), "-verbose", "0"] + extra, check=True)
        seconds = time.perf_counter() - start
        out = subprocess.run([exe, "predict", os.path.join(d, "m.bin"), os.path.join(d, "test.txt")],
                             check=True, capture_output=True, text=True).stdout.split("\n")
        labels = {label.replace(" ", "_"): label for _, label in train}
        pred = [labels.get(line[len("__label__"):], line) for line in out if line]
        f1, acc = weighted([r[1] for r in test], pred)
        return {"test_f1": f1, "test_accuracy": acc, "seconds": seconds}
    finally:
        shutil.rmtree(d, ignore_errors=True)


def skipgram_vectors(texts, threads, path):
    """fastText skip-gram vectors (dim 100) of the texts, labels unused, written to path.vec."""
    exe = shutil.which("fasttext")
    if not exe:
        return None, 0.0
    with open(path + ".txt", "w", encoding="utf-8") as f:
        for t in texts:
            f.write(" ".join(t.split()) + "\n")
    start = time.perf_counter()
    # every word (-minCount 1) and 25 passes: fastText's defaults (5 and 5) are made for corpora
    # of millions of words; on 10,000 titles they gave vectors worth 0.441 weighted F1 at 500
    # AG News labels, these 0.646 (seed 0)
    subprocess.run([exe, "skipgram", "-input", path + ".txt", "-output", path, "-dim", "100",
                    "-minCount", "1", "-epoch", "25", "-thread", str(threads or 2), "-verbose",
                    "0"], check=True)
    return path + ".vec", time.perf_counter() - start


def self_training(labelled, unlabelled, test):
    try:
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
        from sklearn.semi_supervised import SelfTrainingClassifier
    except ImportError:
        return {"error": "scikit-learn not importable (apt-get install python3-sklearn)"}
    start = time.perf_counter()
    vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
    x = vec.fit_transform([r[0] for r in labelled] + [t for t in unlabelled])
    names = sorted({r[1] for r in labelled})
    y = [names.index(r[1]) for r in labelled] + [-1] * len(unlabelled)
    model = SelfTrainingClassifier(LogisticRegression(C=10, max_iter=1000)).fit(x, y)
    seconds = time.perf_counter() - start
    pred = [names[k] for k in model.predict(vec.transform([r[0] for r in test]))]
    f1, acc = weighted([r[1] for r in test], pred)
    return {"test_f1": f1, "test_accuracy": acc, "seconds": seconds}


def attnext_run(extension, labelled, unlabelled, test, options):
    d = tempfile.mkdtemp(prefix="attnext-curve-")
    db = sqlite3.connect(os.path.join(d, "c.db"), isolation_level=None)
    try:
        db.enable_load_extension(True)
        db.load_extension(extension)
        db.execute("BEGIN")
        db.execute("CREATE TABLE train(text, label)")
        db.execute("CREATE TABLE test(text, label)")
        db.executemany("INSERT INTO train VALUES (?, ?)", labelled)
        db.executemany("INSERT INTO train VALUES (?, NULL)", [(t,) for t in unlabelled])
        db.executemany("INSERT INTO test VALUES (?, ?)", test)
        db.execute("COMMIT")
        start = time.perf_counter()
        summary = json.loads(db.execute("SELECT attn_fit('m', 'SELECT text, label FROM train', ?)",
                                        (json.dumps(dict(options, progress=False)),)).fetchone()[0])
        seconds = time.perf_counter() - start
        pred = [r[0] for r in db.execute(
            "SELECT label FROM attn_classify('m', 'SELECT rowid, text FROM test') ORDER BY id")]
        f1, acc = weighted([r[1] for r in test], pred)
        return {"test_f1": f1, "test_accuracy": acc, "val_f1": summary.get("val_f1"),
                "seconds": seconds, "summary": summary}
    finally:
        db.close()
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpora", default="ag,debian,wordnet")
    corpus_args(ap)
    ap.add_argument("--extension", default=os.path.join(ROOT, "attnext"))
    ap.add_argument("--sizes", default="200,500,1000,2500,all")
    ap.add_argument("--seeds", type=int, default=1, help="shuffles of the training split")
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--options", default="{}", help="attnext's options (JSON), for both runs")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--self-training-max", type=int, default=1000,
                    help="self-training only up to this many labelled rows (it refits a "
                    "logistic regression on the whole pool up to 10 times: minutes a run)")
    ap.add_argument("--pool", type=int, default=10000,
                    help="at most this many training rows in all (labelled + unlabelled)")
    ap.add_argument("--out", default=os.path.join(HERE, "out"))
    args = ap.parse_args()
    systems = args.systems.split(",")
    options = json.loads(args.options)
    report = {"machine": cpu_model(), "cores": os.cpu_count(), "time": time.strftime("%F %T"),
              "options": options, "corpora": {}}
    print("# attnext learning curve (%s, %d cores)" % (report["machine"], report["cores"]))
    work = tempfile.mkdtemp(prefix="curve-")
    try:
        for corpus in args.corpora.split(","):
            train_path, test_path = corpus_paths(corpus, args)
            train_all, test = read_csv(train_path), read_csv(test_path)
            table = {}
            for seed in range(args.seeds):
                rows = train_all[:]
                random.Random(seed).shuffle(rows)
                rows = rows[:args.pool]
                vectors = None
                if "fastText+vec" in systems:
                    vectors, vsec = skipgram_vectors([r[0] for r in rows], args.threads,
                                                     os.path.join(work, "%s-%d" % (corpus, seed)))
                for size in args.sizes.split(","):
                    n = len(rows) if size == "all" else min(int(size), len(rows))
                    labelled, unlabelled = rows[:n], [r[0] for r in rows[n:]]
                    for system in systems:
                        print("curve: %s N=%d seed %d: %s" % (corpus, n, seed, system),
                              file=sys.stderr, flush=True)
                        if system == "TF-IDF+LR":
                            r = tfidf_lr(labelled, test)
                        elif system == "fastText":
                            r = fasttext_run(labelled, test, args.threads)
                        elif system == "self-training":  # the semi-supervised sizes only
                            r = self_training(labelled, unlabelled, test) \
                                if unlabelled and n <= args.self_training_max else None
                        elif system == "fastText+vec":
                            r = fasttext_run(labelled, test, args.threads, vectors) \
                                if vectors else {"error": "no fasttext"}
                        elif system == "attnext":
                            r = attnext_run(args.extension, labelled, [], test, options)
                        else:
                            r = attnext_run(args.extension, labelled, unlabelled, test, options) \
                                if unlabelled else None
                        if r is not None:
                            table.setdefault((size, system), []).append(r)
            lines = ["", "### %s: %d training rows, %d test rows, %d classes; mean of %d seed(s)"
                     % (corpus, len(train_all), len(test), len({r[1] for r in train_all}),
                        args.seeds), "",
                     "| labelled rows | " + " | ".join(systems) + " |",
                     "| --- |" + " --- |" * len(systems)]
            for size in args.sizes.split(","):
                cells = []
                for system in systems:
                    rs = [r for r in table.get((size, system), []) if "error" not in r]
                    if not rs:
                        cells.append("-")
                        continue
                    f1 = statistics.mean(r["test_f1"] for r in rs)
                    sec = statistics.mean(r["seconds"] for r in rs)
                    cells.append("%.3f (%.1fs)" % (f1, sec))
                lines.append("| %s | %s |" % (size, " | ".join(cells)))
            print("\n".join(lines), flush=True)
            report["corpora"][corpus] = [
                {"size": size, "system": system, "runs": rs} for (size, system), rs in table.items()]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "curve-%s.json" % time.strftime("%Y%m%d-%H%M%S"))
    with open(path, "w") as f:
        json.dump(report, f, indent=1)
    print("\nfigures: %s" % os.path.relpath(path, ROOT))


if __name__ == "__main__":
    main()
