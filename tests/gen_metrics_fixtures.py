"""gen_metrics_fixtures.py -- scikit-learn's figures for tests/test_metrics.c (nn_metrics_evaluate,
the engine side of attn_metrics: BigQuery ML's ML.EVALUATE).

    /usr/bin/python3 tests/gen_metrics_fixtures.py           rewrites tests/fixtures/metrics/
    /usr/bin/python3 tests/gen_metrics_fixtures.py --check   recomputes them with the installed
                                                             scikit-learn and compares (exit 1
                                                             when a figure moved by > 1e-9)

Needs Debian's python3-sklearn (tests/deps.sh installs it). One safetensors file per case:
  y_true (N) I64            true class ids
  probs (N, C) F32          predicted probabilities (rows sum to 1 in float32)
  expected (10) F64         accuracy, macro precision, recall, F1, weighted precision, recall,
                            F1, log_loss, roc_auc, roc_auc_classes (NaN: no class has an AUC)
  __metadata__              case, sklearn (its version), names (the 10 figures, in order)
Each figure is scikit-learn's own function on the probabilities as float64 and
y_pred = argmax (first maximum), as engine/metrics.c says in nn.h:
  accuracy_score; precision_recall_fscore_support(average="macro" | "weighted",
  zero_division=0) with sklearn's default labels; log_loss(labels=range(C)); roc_auc: with 2
  classes roc_auc_score(y_true, probs[:, 1]); else roc_auc_score(multi_class="ovr",
  average="macro", labels=range(C)) when every class has an AUC, and otherwise (sklearn raises)
  the mean of roc_auc_score(y_true == c, probs[:, c]) over the classes that have one.
"""
import json
import os
import sys

import numpy as np
import sklearn
from sklearn.metrics import (accuracy_score, log_loss, precision_recall_fscore_support,
                             roc_auc_score)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attn_reference import st_load, st_save  # noqa: E402

NAMES = ["accuracy", "macro_precision", "macro_recall", "macro_f1", "weighted_precision",
         "weighted_recall", "weighted_f1", "log_loss", "roc_auc", "roc_auc_classes"]
OUTDIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "metrics")


def softmax32(logits):
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def draw_labels(rng, probs, noise):
    """A class per row from probs mixed with uniform noise (so the scores are informative)."""
    n, C = probs.shape
    mix = (1 - noise) * probs.astype(np.float64) + noise / C
    return np.array([rng.choice(C, p=row / row.sum()) for row in mix], dtype=np.int64)


def cases():
    rng = np.random.default_rng(14)
    out = []
    p = softmax32(rng.normal(0, 2, (400, 4)))
    out.append(("random_4_classes", draw_labels(rng, p, 0.3), p))
    # many tied scores: every row is one of 5 distributions
    table = softmax32(rng.normal(0, 1.5, (5, 3)))
    p = table[rng.integers(0, 5, 300)]
    out.append(("tied_scores_3_classes", draw_labels(rng, p, 0.2), p))
    p = softmax32(rng.normal(0, 1.5, (250, 2)))
    out.append(("binary", draw_labels(rng, p, 0.3), p))
    # class 3 never true (predicted at times), class 5 neither true nor predicted
    logits = rng.normal(0, 2, (300, 6))
    logits[:, 5] -= 8
    p = softmax32(logits)
    y = draw_labels(rng, p, 0.3)
    y[y == 3] = 0
    y[y == 5] = 1
    out.append(("absent_classes_6", y, p))
    # probabilities of exactly 0 and 1 (log_loss clips them), some confidently wrong
    p = softmax32(rng.normal(0, 1, (60, 3)))
    for i in range(0, 60, 4):
        p[i] = 0
        p[i, i % 3] = 1
    y = draw_labels(rng, p, 0.5)
    out.append(("extreme_probabilities", y, p))
    # every row predicted as one class
    p = np.tile(np.array([[0.2, 0.5, 0.3]], dtype=np.float32), (40, 1))
    y = rng.integers(0, 3, 40).astype(np.int64)
    out.append(("one_prediction", y, p))
    return out


def figures(y, probs):
    C = probs.shape[1]
    P = probs.astype(np.float64)
    yp = np.argmax(probs, axis=1)
    macro = precision_recall_fscore_support(y, yp, average="macro", zero_division=0)
    weighted = precision_recall_fscore_support(y, yp, average="weighted", zero_division=0)
    ll = log_loss(y, P, labels=list(range(C)))
    present = [c for c in range(C) if 0 < np.sum(y == c) < len(y)]
    if C == 2:
        auc, n_auc = (roc_auc_score(y, P[:, 1]), 1) if len(present) == 2 else (np.nan, 0)
    elif len(present) == C:
        auc = roc_auc_score(y, P, multi_class="ovr", average="macro", labels=list(range(C)))
        n_auc = C
    elif present:
        auc = float(np.mean([roc_auc_score(y == c, P[:, c]) for c in present]))
        n_auc = len(present)
    else:
        auc, n_auc = np.nan, 0
    return np.array([accuracy_score(y, yp), macro[0], macro[1], macro[2], weighted[0],
                     weighted[1], weighted[2], ll, auc, n_auc], dtype=np.float64)


def main():
    check = "--check" in sys.argv[1:]
    os.makedirs(OUTDIR, exist_ok=True)
    bad = 0
    for name, y, probs in cases():
        expected = figures(y, probs)
        path = os.path.join(OUTDIR, name + ".safetensors")
        if check:
            with open(path, "rb") as f:
                stored, meta = st_load(f.read())
            same = (np.array_equal(stored["y_true"], y) and np.array_equal(stored["probs"], probs))
            diff = np.nanmax(np.abs(stored["expected"] - expected))
            nan_ok = np.array_equal(np.isnan(stored["expected"]), np.isnan(expected))
            ok = same and nan_ok and not diff > 1e-9
            bad += not ok
            print("%-24s %s (max |stored - sklearn %s| %.2g)" % (
                name, "ok" if ok else "DIFFERS", sklearn.__version__, diff))
            continue
        meta = {"case": name, "sklearn": sklearn.__version__, "names": ",".join(NAMES)}
        with open(path, "wb") as f:
            f.write(st_save({"y_true": y, "probs": probs, "expected": expected}, meta))
        print("%-24s N=%d C=%d %s" % (name, len(y), probs.shape[1],
                                      json.dumps(dict(zip(NAMES, [round(float(v), 6) for v in expected])))))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
