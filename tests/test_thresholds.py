"""test_thresholds.py -- attn_predict(name, text, min_probability [, fallback]) and
attn_classify(name, query [, min_probability [, fallback]]) through Debian's Python sqlite3
module, with bound parameters as programs pass them.

A small model is trained on rows it cannot all get right; for every row the top probability
of attn_probs is read, and for a sweep of thresholds (bound as float, int and str) each
function must abstain exactly on the rows whose probability is below the threshold (rows within
1e-5 of it are left out: attn_predict runs the single-row kernels, attn_classify the batched
ones, which round differently). Then: the fallback keeps its type (text, integer, float, BLOB,
NULL), a threshold per row from a column, NULL texts, and hostile thresholds (NaN, infinities,
huge and negative numbers, texts, BLOBs, NULL), each an error naming the function and the
argument. Run from the repository root: /usr/bin/python3 tests/test_thresholds.py
"""
import math
import os
import sqlite3
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability as R  # noqa: E402

check, connect, error_of = R.check, R.connect, R.error_of


def main():
    R.reexec_with_preload()
    R.require_extension()
    db = connect(":memory:")
    # words shared across classes: the model is unsure on some rows
    rows = R.make_rows(240, seed=5)
    mixed = []
    for i, (text, label) in enumerate(rows):
        if i % 4 == 0:
            other = R.make_rows(3, seed=100 + i)[(i // 4) % 3][0].split()[:2]
            text = " ".join(text.split()[:3] + other)
        mixed.append((text, label))
    db.execute("CREATE TABLE docs(id INTEGER PRIMARY KEY, text, label)")
    db.executemany("INSERT INTO docs(text, label) VALUES (?, ?)", mixed)
    db.execute("INSERT INTO docs(id, text, label) VALUES (1000, NULL, 'sports')")
    R.train(db, query="SELECT text, label FROM docs WHERE text IS NOT NULL",
            options='{"epochs":6,"hidden":6,"embed_dim":6,"fc_hidden":6,"vocab_size":60,'
                        '"lr":0.01,"progress":false}')

    texts = db.execute("SELECT id, text FROM docs WHERE text IS NOT NULL ORDER BY id").fetchall()
    top = {}
    for i, text in texts:
        label, p = db.execute("SELECT label, probability FROM attn_probs('m', ?) LIMIT 1",
                              (text,)).fetchone()
        top[i] = (label, p)
    probs = sorted(p for _, p in top.values())
    check(probs[0] < probs[-1] and probs[0] < 0.9,
          f"probabilities spread: {probs[0]:.3f} .. {probs[-1]:.3f} over {len(probs)} rows")

    thresholds = [0, 0.0, probs[len(probs) // 4], probs[len(probs) // 2],
                  probs[3 * len(probs) // 4], 0.999, 1, "0.5", " 0.6 "]
    for t in thresholds:
        tv = float(t)
        far = {i for i, (_, p) in top.items() if abs(p - tv) > 1e-5}
        want_none = {i for i in far if top[i][1] < tv}
        got = dict(db.execute("SELECT id, attn_predict('m', text, ?) FROM docs "
                              "WHERE text IS NOT NULL", (t,)).fetchall())
        check({i for i in far if got[i] is None} == want_none and
              all(got[i] == top[i][0] for i in far - want_none),
              f"attn_predict at {t!r}: NULL on the {len(want_none)} rows below, "
              f"the label on the {len(far - want_none)} at or above")
        got = dict(db.execute("SELECT id, attn_predict('m', text, ?, ?) FROM docs "
                              "WHERE text IS NOT NULL", (t, "unknown")).fetchall())
        check({i for i in far if got[i] == "unknown"} == want_none,
              f"attn_predict at {t!r} with a fallback: 'unknown' on exactly those rows")
        got = {i: (label, p) for i, label, p in db.execute(
            "SELECT id, label, probability FROM attn_classify('m', "
            "'SELECT id, text FROM docs ORDER BY id', ?)", (t,))}
        check(got[1000] == (None, None), f"attn_classify at {t!r}: a NULL text gives NULL, NULL")
        check({i for i in far if got[i][0] is None} == want_none and
              all(got[i][0] == top[i][0] for i in far - want_none) and
              all(abs(got[i][1] - top[i][1]) < 1e-5 for i in top),
              f"attn_classify at {t!r}: NULL label below, the label at or above, the "
              "probability always")
        # its own probability column decides exactly (same batched computation)
        check(all((label is None) == (p < tv) for i, (label, p) in got.items() if i != 1000),
              f"attn_classify at {t!r}: label NULL exactly where its probability < {tv}")

    # the fallback is returned as given, whatever its type
    for fb in ["unknown", -1, 2.5, b"\x00\xff", None]:
        got = db.execute("SELECT attn_predict('m', text, 1, ?) FROM docs WHERE id = 1",
                         (fb,)).fetchone()[0]
        got2 = db.execute("SELECT label FROM attn_classify('m', 'SELECT 1, ''goal match''', "
                          "1, ?)", (fb,)).fetchone()[0]
        check(got == fb and got2 == fb, f"fallback {fb!r} returned as given: {got!r}, {got2!r}")
    check(db.execute("SELECT attn_predict('m', NULL, 0.5, 'unknown')").fetchone()[0] is None,
          "a NULL text gives NULL, not the fallback")

    # a threshold per row, from a column
    db.execute("CREATE TABLE policy(id INTEGER PRIMARY KEY, t REAL)")
    db.executemany("INSERT INTO policy VALUES (?, ?)",
                   [(i, (i % 5) / 5) for i, _ in texts])
    got = db.execute("SELECT d.id, p.t, attn_predict('m', d.text, p.t) FROM docs d "
                     "JOIN policy p USING (id)").fetchall()
    check(all((label is None) == (top[i][1] < t) for i, t, label in got
              if abs(top[i][1] - t) > 1e-5),
          f"a threshold per row from a column: {sum(l is None for _, _, l in got)} of "
          f"{len(got)} NULL, each where its row's probability is below its threshold")

    # hostile thresholds: each an error naming the function and the argument
    bad = [(1.5, "got 1.5"), (-0.1, "got -0.1"), (1e308, "got 1e+308"), (-1e-300, "got -1e-300"),
           (math.inf, "got Inf"), (-math.inf, "got -Inf"), (math.nan, "got NULL"),
           (2 ** 62, "got 4611686018427387904"), ("high", "got 'high'"), ("", "got ''"),
           ("1e999", "got Inf"), (None, "got NULL"), (b"\x3f\x00\x00\x00", "got a BLOB"),
           ("x" * 100000, "got '" + "x" * 40 + "...'"), ("é" * 50, "got '" + "é" * 40 + "...'")]
    for t, tail in bad:
        want = "attn_predict: min_probability must be a number from 0 to 1, " + tail
        msg = error_of(db, "SELECT attn_predict('m', 'goal match', ?)", (t,))
        check(msg == want, f"attn_predict threshold {str(t)[:20]!r}: {msg}")
        msg = error_of(db, "SELECT * FROM attn_classify('m', 'SELECT id, text FROM docs', ?, 'u')",
                       (t,))
        check(msg == want.replace("attn_predict", "attn_classify"),
              f"attn_classify threshold {str(t)[:20]!r}: {msg}")
    # the threshold is checked before the text is read: a NULL text does not hide a bad one
    msg = error_of(db, "SELECT attn_predict('m', NULL, 7)")
    check(msg == "attn_predict: min_probability must be a number from 0 to 1, got 7",
          f"a bad threshold with a NULL text: {msg}")
    msg = error_of(db, "SELECT attn_predict('', 'goal', 0.5)")
    check(msg == "attn_predict: the model name must be a non-empty text, got ''", f"no name: {msg}")
    msg = error_of(db, "SELECT * FROM attn_classify('m', 'SELECT id, text FROM docs') "
                       "WHERE arg_fallback = 'u'")
    check(msg is not None and msg.startswith("attn_classify: fallback needs min_probability"),
          f"a fallback without a threshold: {msg}")
    # a model whose logits overflow (finite weights of 3e38, which attn_import accepts): its
    # probabilities are NaN; a thresholded prediction abstains rather than guess
    from attn_reference import st_load, st_save
    tensors, meta = st_load(db.execute("SELECT weights FROM attn_models WHERE name = 'm'")
                            .fetchone()[0])
    tensors = {k: v.copy() for k, v in tensors.items()}
    tensors["fc1.weight"][:] = 0  # fc1's output 10 everywhere, whatever the text:
    tensors["fc1.bias"][:] = 10   # class 0's logit -inf, the others +inf
    tensors["fc2.weight"][:] = 3e38
    tensors["fc2.weight"][0] = -3e38
    db.execute("SELECT attn_import('overflow', ?)", (st_save(tensors, meta),))
    got = db.execute("SELECT attn_predict('overflow', 'goal match', 0), "
                     "attn_predict('overflow', 'goal match', 0.5, 'unknown')").fetchone()
    got2 = db.execute("SELECT label, probability FROM attn_classify('overflow', "
                      "'SELECT 1, ''goal match''', 0, 'unknown')").fetchone()
    check(got == (None, "unknown") and got2 == ("unknown", None),
          f"NaN probabilities (overflowing weights): abstains at any threshold: {got}, {got2}")
    # -0.0 is the threshold 0: attn_curve reports it as 0.0, not -0.0 (the shell prints both
    # as 0.0; Python's float keeps the sign)
    for given in (-0.0, "[-0.0]", "[0.5, -0.0]"):
        got = db.execute("SELECT DISTINCT threshold FROM attn_curve('m', 'SELECT text, label FROM "
                         "docs WHERE text IS NOT NULL', ?) WHERE threshold = 0", (given,)).fetchall()
        check(len(got) == 1 and math.copysign(1.0, got[0][0]) == 1.0,
              f"attn_curve with thresholds {given!r}: threshold {got}")
    # a number just past the range is quoted with the digits that tell it from the bound
    for fn, sql in (("attn_predict", "SELECT attn_predict('m', 'goal', ?)"),
                    ("attn_classify", "SELECT * FROM attn_classify('m', 'SELECT 1, ''goal''', ?)"),
                    ("attn_curve", "SELECT * FROM attn_curve('m', 'SELECT text, label FROM docs "
                                   "WHERE id < 5', ?)")):
        err = error_of(db, sql, (1.0000000000000002,))
        check(err is not None and "got 1.0000000000000002" in err, f"{fn} 1.0000000000000002: {err}")
    R.finish("test_thresholds")


if __name__ == "__main__":
    main()
