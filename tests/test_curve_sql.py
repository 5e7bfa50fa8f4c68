"""test_curve_sql.py -- attn_curve and attn_curve_svg (ext/attn_curve.c, engine/curve.c) against
scikit-learn's roc_curve, precision_recall_curve, roc_auc_score and average_precision_score,
end to end through Debian's Python sqlite3 module (tests/test_curve.c compares engine/curve.c
with sklearn bit for bit on fixed probabilities).

A 4-class model is trained on synthetic rows (cue words with noise, duplicated texts so that
scores tie). sklearn gets the probabilities of attn_probs, which runs the single-row kernels;
attn_curve runs the batched ones, which round differently (by at most ~1.2e-7). So the two
curves are compared at every threshold that lies more than 1e-6 from any other of either curve
(all but a few near-ties): there, for every class c, attn_curve's row must equal
  roc_curve(y == c, p[:, c], drop_intermediate=False)   (recall = tpr, false_positive_rate)
  precision_recall_curve(y == c, p[:, c])               (precision, recall)
exactly, with the counts of rows scoring >= the threshold and f1 = 2 tp / (2 tp + fp + fn).
Then: given thresholds, a class with no rows (recall NULL where sklearn warns), every row of
one class, all rows tied, 2 classes, the AUC and average precision of attn_curve_svg's legend,
errors and the direct-only flag. Skipped (77) without python3-sklearn (tests/deps.sh installs
it). Run from the repository root: /usr/bin/python3 tests/test_curve_sql.py
"""
import os
import random
import re
import sqlite3
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability as R  # noqa: E402

check, connect, error_of = R.check, R.connect, R.error_of

try:
    import numpy as np
    from sklearn.metrics import (average_precision_score, precision_recall_curve, roc_auc_score,
                                 roc_curve)
except ImportError:
    print("python3-sklearn is not installed (sh tests/deps.sh)")
    sys.exit(77)

CUES = {
    "world": ["war", "minister", "election", "embassy", "treaty"],
    "sports": ["match", "goal", "coach", "season", "league"],
    "business": ["shares", "profit", "market", "bank", "merger"],
    "scitech": ["software", "space", "chip", "internet", "research"],
}
FILLER = ["the", "new", "report", "says", "today", "after", "plan", "week", "big", "news"]
COLUMNS = ("label, threshold, recall, false_positive_rate, precision, f1, true_positives, "
           "false_positives, true_negatives, false_negatives")


def make_rows(rng, n, labels):
    rows = []
    for _ in range(n):
        label = rng.choice(labels)
        cues = [rng.choice(CUES[label])]
        if rng.random() < 0.6:
            cues.append(rng.choice(CUES[rng.choice(list(CUES))]))
        words = cues + [rng.choice(FILLER) for _ in range(rng.randint(1, 4))]
        rng.shuffle(words)
        rows.append((" ".join(words), label))
    return rows


def curve_rows(db, name, table, thresholds=None):
    sql = f"SELECT {COLUMNS} FROM attn_curve(?, 'SELECT text, label FROM {table}'"
    args = (name,)
    if thresholds is not None:
        sql += ", ?"
        args += (thresholds,)
    out = {}
    for r in db.execute(sql + ")", args):
        out.setdefault(r[0], []).append(r[1:])
    return out


def model_labels(db, name):
    return [r[0] for r in db.execute(
        "SELECT value FROM json_each((SELECT labels FROM attn_models WHERE name = ? AND deployed))",
        (name,))]


def scores(db, name, rows, labels):
    """Each row's probability of each class from attn_probs (float64 of the float32)."""
    probs = np.zeros((len(rows), len(labels)))
    for i, (text, _) in enumerate(rows):
        for label, p in db.execute("SELECT label, probability FROM attn_probs(?, ?)", (name, text)):
            probs[i, labels.index(label)] = p
    return probs


def cluster_ends(ours, theirs, gap=1e-6):
    """Thresholds of both curves (descending) grouped where consecutive values of their union
    lie within `gap`: a row's probability differs by at most 1.2e-7 between attn_probs'
    single-row kernels and attn_curve's batched ones, so at the end of each group both count the
    same rows. Returns [(index in ours, index in theirs)] of each group's last points (None for a
    side with no point in the group), and how many of our points are not the last of a group
    (near-ties: not compared)."""
    union = sorted([(t, 0, k) for k, t in enumerate(ours)] + [(t, 1, k) for k, t in enumerate(theirs)],
                   reverse=True)
    ends, last = [], [None, None]
    for j, (t, side, k) in enumerate(union):
        last[side] = k
        if j + 1 == len(union) or union[j + 1][0] < t - gap:
            ends.append(tuple(last))
            last = [None, None]
    return ends, len(ours) - sum(a is not None for a, _ in ends)


def compare_class(label, got, y, score):
    """got: attn_curve's rows of one class; y: bool array; score: attn_probs' float64 scores."""
    thr = [r[0] for r in got]
    P, N = int(y.sum()), int((~y).sum())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f, t, th = roc_curve(y, score, drop_intermediate=False)
        ps, rs, pth = precision_recall_curve(y, score)
    # precision_recall_curve's points in the order of roc_curve's, less its last (1, 0)
    ps, rs, pth = ps[:-1][::-1], rs[:-1][::-1], pth[::-1]
    ok = check(np.array_equal(pth, th[1:]), f"{label}: sklearn's two curves share the thresholds")
    ends, inside = cluster_ends(thr, list(th[1:]))
    bad = 0
    for a, b in ends:
        if a is None or b is None:
            bad += 1
            print(f"     {label}: a group of thresholds only one side has: "
                  f"{got[a][0] if a is not None else th[1 + b]}")
            continue
        r = got[a]
        (threshold, recall, fpr, precision, f1, tp, fp, tn, fn) = r
        same = abs(threshold - th[1 + b]) <= 2e-7
        same &= (recall is None and P == 0) or (recall == t[1 + b] and recall == rs[b])
        same &= (fpr is None and N == 0) or fpr == f[1 + b]
        same &= precision == ps[b]
        same &= tp == int((score[y] >= th[1 + b]).sum()) and fp == int((score[~y] >= th[1 + b]).sum())
        same &= tp + fn == P and fp + tn == N
        same &= (f1 is None and P == 0) or abs(f1 - 2 * tp / (2 * tp + fp + fn)) < 1e-12
        if not same and bad < 3:
            print(f"     {label}: {r} vs sklearn threshold {th[1 + b]}, tpr {t[1 + b]}, "
                  f"fpr {f[1 + b]}, precision {ps[b]}")
        bad += not same
    ok &= check(bad == 0 and inside <= 0.05 * len(thr),
                f"{label}: {len(thr)} points, sklearn {len(th) - 1} (+ its first); at the "
                f"{len(ends)} thresholds apart from others by > 1e-6 equal: recall = tpr, "
                f"false_positive_rate = fpr, precision, the counts and f1 ({bad} differ; "
                f"{inside} points of near-ties not compared)")
    if P == 0:
        ok &= check(all(r[1] is None for r in got), f"{label}: recall NULL (no rows of the "
                    "class; roc_curve gives nan, precision_recall_curve 1 with a warning)")
    if N == 0:
        ok &= check(all(r[2] is None for r in got), f"{label}: false_positive_rate NULL (no rows "
                    "of other classes)")
    return ok


def main():
    R.reexec_with_preload()
    R.require_extension()
    db = connect(":memory:")
    rng = random.Random(21)
    labels4 = sorted(CUES)
    train = make_rows(rng, 600, labels4)
    db.execute("CREATE TABLE train(text, label)")
    db.executemany("INSERT INTO train VALUES (?, ?)", train)
    # label_smoothing 0: the smoothed default squeezes the probabilities together, and the near
    # ties that sklearn and attn_curve may split apart (float rounding) passed 5% of the points
    # under make test-asan; this test is about the curve, not the recipe
    R.train(db, "m", "SELECT text, label FROM train",
            '{"epochs":4,"hidden":8,"embed_dim":8,"fc_hidden":8,"lr":0.01,"progress":false,'
            '"label_smoothing":0}')
    test = make_rows(rng, 300, labels4)
    test += test[:40]  # duplicated texts: tied scores
    db.execute("CREATE TABLE test(id INTEGER PRIMARY KEY, text, label)")
    db.executemany("INSERT INTO test(text, label) VALUES (?, ?)", test)
    labels = model_labels(db, "m")
    check(labels == labels4, f"model labels {labels}")
    curves = curve_rows(db, "m", "test")
    check(list(curves) == labels, f"classes in the model's label order: {list(curves)}")
    probs = scores(db, "m", test, labels)
    y = np.array([labels.index(l) for _, l in test])
    for c, label in enumerate(labels):
        compare_class(label, curves[label], y == c, probs[:, c])
        got = curves[label]
        check(all(got[k][0] > got[k + 1][0] for k in range(len(got) - 1)),
              f"{label}: thresholds strictly descending")
        check(len(got) < len(test), f"{label}: {len(got)} points for {len(test)} rows (ties)")

    # the AUC and average precision of attn_curve_svg's legend = sklearn's on the same scores
    svg = db.execute("SELECT attn_curve_svg('m', 'SELECT text, label FROM test')").fetchone()[0]
    legend = dict(re.findall(r">([a-z]+): AUC ([0-9.]+), average precision", svg))
    aps = dict(re.findall(r">([a-z]+): AUC [0-9.]+, average precision ([0-9.]+)", svg))
    for c, label in enumerate(labels):
        auc = roc_auc_score(y == c, probs[:, c])
        ap = average_precision_score(y == c, probs[:, c])
        check(label in legend and abs(float(legend[label]) - auc) < 6e-5 and
              abs(float(aps[label]) - ap) < 6e-5,
              f"svg legend {label}: AUC {legend.get(label)} ~ {auc:.6f}, "
              f"average precision {aps.get(label)} ~ {ap:.6f}")
    check(svg.startswith("<?xml") and svg.rstrip().endswith("</svg>") and svg.count("<polyline") == 8,
          f"svg: one ROC and one precision-recall line per class ({svg.count('<polyline')})")

    # given thresholds: one row per threshold, per class, in the order given
    ts = [0.9, 0.1, 0.5, 0.25, 0, 1]
    given = curve_rows(db, "m", "test", "[0.9, 0.1, 0.5, 0.25, 0, 1]")
    ok = True
    for c, label in enumerate(labels):
        rows = given[label]
        ok &= [r[0] for r in rows] == ts
        for (t, recall, fpr, precision, f1, tp, fp, tn, fn) in rows:
            s = probs[:, c]
            ok &= tp == int(((s >= t) & (y == c)).sum()) and fp == int(((s >= t) & (y != c)).sum())
            ok &= tp + fn == int((y == c).sum()) and fp + tn == int((y != c).sum())
            ok &= (precision is None) == (tp + fp == 0)
    check(ok, "given thresholds: counts of rows scoring >= t, precision NULL when none is")
    single = curve_rows(db, "m", "test", 0.5)
    check(all(single[l] == [r for r in given[l] if r[0] == 0.5] for l in labels),
          "a single number as thresholds = that item of the array")
    check(curve_rows(db, "m", "test", "0.5") == single, "a text that reads as a number too")

    # a class with no rows, and a query of one class: recall / false_positive_rate NULL
    part = curve_rows(db, "m", "(SELECT * FROM test WHERE label != ''world'')")
    sub = [(t, l) for t, l in test if l != "world"]
    ys = np.array([labels.index(l) for _, l in sub])
    ps = scores(db, "m", sub, labels)
    for c, label in enumerate(labels):
        compare_class(label + " (no world rows)", part[label], ys == c, ps[:, c])
    one = curve_rows(db, "m", "(SELECT * FROM test WHERE label = ''sports'')")
    check(all(r[2] is None for r in one["sports"]) and all(r[1] is None for r in one["world"]),
          "rows of one class: its false_positive_rate and the others' recall are NULL")
    # every row the same text: one threshold per class
    tied = curve_rows(db, "m", "(SELECT ''goal match'' AS text, label FROM test)")
    check(all(len(v) == 1 and v[0][5] + v[0][6] == len(test) for v in tied.values()),
          "all scores tied: one point per class with every row predicted")

    # 2 classes
    db.execute("CREATE TABLE two(text, label)")
    db.executemany("INSERT INTO two VALUES (?, ?)",
                   [r for r in train if r[1] in ("sports", "business")])
    R.train(db, "two", "SELECT text, label FROM two",
            '{"epochs":3,"hidden":6,"embed_dim":6,"fc_hidden":6,"lr":0.01,"progress":false}')
    cv2 = curve_rows(db, "two", "(SELECT * FROM test WHERE label IN (''sports'', ''business''))")
    sub2 = [(t, l) for t, l in test if l in ("sports", "business")]
    p2 = scores(db, "two", sub2, ["business", "sports"])
    y2 = np.array([["business", "sports"].index(l) for _, l in sub2])
    for c, label in enumerate(["business", "sports"]):
        compare_class("2 classes: " + label, cv2[label], y2 == c, p2[:, c])

    # errors
    q = "SELECT text, label FROM test"
    cases = [
        ("SELECT * FROM attn_curve('m', ?, 2)", (q,),
         "attn_curve: thresholds must be a number from 0 to 1 or a JSON array of them, got 2"),
        ("SELECT * FROM attn_curve('m', ?, '[0.5, \"x\"]')", (q,),
         "attn_curve: thresholds must be a number from 0 to 1 or a JSON array of them, got a "
         "JSON string (item 2)"),
        ("SELECT * FROM attn_curve('m', ?, '[0.5, 1.5]')", (q,),
         "attn_curve: thresholds must be a number from 0 to 1 or a JSON array of them, got 1.5 "
         "(item 2)"),
        ("SELECT * FROM attn_curve('m', ?, '[]')", (q,),
         "attn_curve: thresholds must hold 1 to 10000 numbers, got 0"),
        ("SELECT * FROM attn_curve('m', ?, ?)", (q, "[" + ",".join(["0.5"] * 10001) + "]"),
         "attn_curve: thresholds must hold 1 to 10000 numbers, got 10001"),
        ("SELECT * FROM attn_curve('m', ?, 'high')", (q,),
         "attn_curve: thresholds must be a number from 0 to 1 or a JSON array of them, got 'high'"),
        ("SELECT * FROM attn_curve('m', ?, ?)", (q, float("nan")),
         "attn_curve: thresholds must be a number from 0 to 1 or a JSON array of them, got NULL"),
        ("SELECT * FROM attn_curve('m', ?, ?)", (q, b"\x00"),
         "attn_curve: thresholds must be a number from 0 to 1 or a JSON array of them, got a BLOB"),
        ("SELECT * FROM attn_curve('m', ?, ?)", (q, "[" + " " * 10 ** 7 + "0.5]"),
         "attn_curve: thresholds must hold 1 to 10000 numbers, got a text of 10000005 bytes"),
        ("SELECT * FROM attn_curve('m', ?, '[1e999]')", (q,),
         "attn_curve: thresholds must be a number from 0 to 1 or a JSON array of them, got Inf "
         "(item 1)"),
        ("SELECT * FROM attn_curve('m', 'SELECT text, label FROM test WHERE 0')", (),
         "attn_curve: the query returned no rows"),
        ("SELECT * FROM attn_curve('m', 'SELECT text, ''weather'' FROM test')", (),
         "attn_curve: label 'weather' of row 1 is not one of the 4 labels of model 'm'"),
        ("SELECT * FROM attn_curve('nope', 'SELECT text, label FROM test')", (),
         "attn_curve: no model named 'nope'"),
        ("SELECT * FROM attn_curve('m', 'DELETE FROM test')", (),
         "attn_curve: the query must be read-only (a SELECT)"),
        ("SELECT attn_curve_svg('m', 'SELECT text, label FROM test WHERE 0')", (),
         "attn_curve_svg: the query returned no rows"),
        ("SELECT attn_curve_svg('', 'SELECT text, label FROM test')", (),
         "attn_curve_svg: the model name must be a non-empty text, got ''"),
    ]
    for sql, args, want in cases:
        got = error_of(db, sql, args)
        check(got == want, f"error: {got}")
    got = error_of(db, "SELECT * FROM attn_curve('m')")
    check(got is not None and got.startswith("attn_curve: expected 2 or 3 arguments"), f"{got}")
    # a model whose logits overflow (finite weights of 3e38): NaN probabilities, an error
    from attn_reference import st_load, st_save
    tensors, meta = st_load(db.execute("SELECT weights FROM attn_models WHERE name = 'm'")
                            .fetchone()[0])
    tensors = {k: v.copy() for k, v in tensors.items()}
    tensors["fc1.weight"][:] = 0  # fc1's output 10 everywhere, whatever the text:
    tensors["fc1.bias"][:] = 10   # class 0's logit -inf, the others +inf
    tensors["fc2.weight"][:] = 3e38
    tensors["fc2.weight"][0] = -3e38
    db.execute("SELECT attn_import('overflow', ?)", (st_save(tensors, meta),))
    for fn in ("SELECT * FROM attn_curve", "SELECT attn_curve_svg"):
        got = error_of(db, fn + "('overflow', 'SELECT text, label FROM test')")
        check(got is not None and got.endswith("for row 1 is NaN, not a finite number (its weights "
                                                        "overflow)"),
              f"overflowing model: {got}")
    # direct-only: not from a view or a trigger
    db.execute("CREATE VIEW v AS SELECT * FROM attn_curve('m', 'SELECT text, label FROM test')")
    got = error_of(db, "SELECT * FROM v")
    check(got is not None and "unsafe use of" in got, f"from a view: {got}")
    R.finish("test_curve_sql")


if __name__ == "__main__":
    main()
