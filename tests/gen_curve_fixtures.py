"""gen_curve_fixtures.py -- scikit-learn's ROC and precision-recall curves for tests/test_curve.c
(nn_curve_class and its areas, the engine side of attn_curve and attn_curve_svg).

    /usr/bin/python3 tests/gen_curve_fixtures.py           rewrites tests/fixtures/curve/
    /usr/bin/python3 tests/gen_curve_fixtures.py --check   recomputes them with the installed
                                                           scikit-learn and compares (exit 1
                                                           when anything moved)

Needs Debian's python3-sklearn (tests/deps.sh installs it). The cases are those of
gen_metrics_fixtures.py (random, tied scores, binary, absent classes, probabilities of 0 and 1,
one prediction). One safetensors file per case:
  y_true (N) I64, probs (N, C) F32     as in tests/fixtures/metrics/
  roc_<c> (K + 1, 3) F64               per class c: roc_curve(y_true == c, probs[:, c] as
                                       float64, drop_intermediate=False): fpr, tpr, thresholds
                                       (NaN rates where sklearn gives NaN: no positive / negative)
  pr_<c> (K + 1, 3) F64                precision_recall_curve(...): precision, recall,
                                       thresholds (the last point, (1, 0), has none: NaN)
  areas (C, 2) F64                     roc_auc_score and average_precision_score of each class
                                       (NaN where sklearn raises or has no positive rows)
"""
import os
import sys
import warnings

import numpy as np
import sklearn
from sklearn.metrics import (average_precision_score, precision_recall_curve, roc_auc_score,
                             roc_curve)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attn_reference import st_load, st_save  # noqa: E402
from gen_metrics_fixtures import cases  # noqa: E402

OUTDIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "curve")


def curves(y, probs):
    out = {}
    C = probs.shape[1]
    areas = np.full((C, 2), np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # classes with no positive or no negative rows
        for c in range(C):
            yc, s = (y == c), probs[:, c].astype(np.float64)
            fpr, tpr, th = roc_curve(yc, s, drop_intermediate=False)
            out["roc_%d" % c] = np.stack([fpr, tpr, th], axis=1).astype(np.float64)
            p, r, pth = precision_recall_curve(yc, s)
            out["pr_%d" % c] = np.stack([p, r, np.r_[pth, np.nan]], axis=1).astype(np.float64)
            if 0 < yc.sum() < len(yc):
                areas[c, 0] = roc_auc_score(yc, s)
            if yc.sum() > 0:
                areas[c, 1] = average_precision_score(yc, s)
    out["areas"] = areas
    return out


def main():
    check = "--check" in sys.argv[1:]
    os.makedirs(OUTDIR, exist_ok=True)
    bad = 0
    for name, y, probs in cases():
        tensors = {"y_true": y, "probs": probs}
        tensors.update(curves(y, probs))
        path = os.path.join(OUTDIR, name + ".safetensors")
        if check:
            with open(path, "rb") as f:
                stored, _ = st_load(f.read())
            ok = set(stored) == set(tensors) and all(
                np.array_equal(stored[k], tensors[k], equal_nan=k not in ("y_true", "probs"))
                for k in tensors)
            bad += not ok
            print("%-24s %s (sklearn %s)" % (name, "ok" if ok else "DIFFERS", sklearn.__version__))
            continue
        meta = {"case": name, "sklearn": sklearn.__version__}
        with open(path, "wb") as f:
            f.write(st_save(tensors, meta))
        points = sum(len(tensors["roc_%d" % c]) - 1 for c in range(probs.shape[1]))
        print("%-24s N=%d C=%d: %d curve points" % (name, len(y), probs.shape[1], points))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
