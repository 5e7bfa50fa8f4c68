"""test_matrix.py -- attn_matrix's kinds 'dot', 'trainable' and 'additive' (ext/attn_matrix.c)
against PyTorch, through Debian's Python sqlite3 module.

tests/fixtures/matrix.json (tests/gen_matrix_fixtures.py) holds, for 29 cases (d = 1, 5, 50 and
16; seeds: the default, 0, 7, 2^63 - 1, 99; 7 x 7 and 40 x 30 tokens with a missing word, a
lower-case fallback and repeated words), the weights and contexts that torch.nn.Linear layers
give, in float64, with the layers attn_matrix draws from the seed (the generator re-implements
engine/rng.c in Python): every weight must match to 1e-9 and every context (float32 BLOB) to
float32 rounding. Then: the SVG of each kind holds the same weights, the seed changes the
'trainable' and 'additive' weights and nothing else (and is ignored by 'dot'), kinds are case
insensitive, the context column of 'dot' is softmax-weighted key vectors, the bounds (1024
dimensions for the kinds with d x d layers: refused before anything is drawn), an interrupt
stops the largest additive case, and the errors name the function and the argument.
Run from the repository root: /usr/bin/python3 tests/test_matrix.py
"""
import json
import os
import re
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability as R  # noqa: E402

import numpy as np  # noqa: E402

check, connect, error_of = R.check, R.connect, R.error_of
FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "matrix.json")


def blob(values):
    return struct.pack("<%df" % len(values), *values)


def floats(b):
    return np.frombuffer(b, dtype="<f4").astype(np.float64)


def matrix(db, c, seed_arg=True):
    sql = "SELECT query_position, key_position, weight, context FROM attn_matrix(?, ?, ?, ?"
    args = [c["query"], c["key"], "vec_" + c["table"], c["kind"]]
    if c["seed"] is not None and seed_arg:
        sql += ", ?"
        args.append(c["seed"])
    return db.execute(sql + ")", args).fetchall()


def main():
    R.reexec_with_preload()
    R.require_extension()
    with open(FIXTURE) as f:
        fixture = json.load(f)
    db = connect(":memory:")
    for name, words in fixture["tables"].items():
        db.execute(f"CREATE TABLE vec_{name}(word TEXT, vector BLOB)")
        db.executemany(f"INSERT INTO vec_{name} VALUES (?, ?)",
                       [(w, blob(v)) for w, v in words.items()])

    worst_w, worst_c, n = 0.0, 0.0, 0
    for c in fixture["cases"]:
        rows = matrix(db, c)
        W, X = np.array(c["weights"]), np.array(c["context"])
        nq, nk = W.shape
        got = np.zeros_like(W)
        ctx = np.zeros_like(X)
        for i, j, w, b in rows:
            got[i, j] = w
            ctx[i] = floats(b)
        dw = float(np.abs(got - W).max())
        dc = float((np.abs(ctx - X) / (np.abs(X) + 1e-6)).max())
        worst_w, worst_c = max(worst_w, dw), max(worst_c, dc)
        n += len(rows)
        check(len(rows) == nq * nk and dw < 1e-9 and dc < 1e-6,
              f"{c['name']}: {nq} x {nk} weights vs PyTorch max |diff| {dw:.2g}, contexts max "
              f"rel diff {dc:.2g}")
    check(n > 0, f"{len(fixture['cases'])} cases, {n} weights: max |diff| {worst_w:.2g}, "
          f"context {worst_c:.2g} (fixture by torch {fixture['torch']})")

    by = {c["name"]: c for c in fixture["cases"]}
    # the seed: default 1234, given 1234 the same; others differ; dot ignores it
    c = dict(by["trainable_d5_seedNone"])
    check(matrix(db, c) == matrix(db, dict(c, seed=1234)), "default seed = 1234")
    check(matrix(db, dict(c, seed=8)) != matrix(db, dict(c, seed=7)),
          "trainable: another seed, other weights")
    check(matrix(db, dict(by["additive_d5_seed7"])) == matrix(db, dict(by["additive_d5_seed7"])),
          "additive: the same seed, the same weights (bit for bit)")
    d = dict(by["dot_d5_seedNone"])
    check(matrix(db, dict(d, seed=5)) == matrix(db, d), "dot: no layers, the seed is ignored")
    check(matrix(db, dict(c, kind="TRAINABLE")) == matrix(db, c), "kinds are case-insensitive")
    # dot's context: the softmax-weighted key vectors
    words = fixture["tables"]["d5"]
    K = np.array([words.get(t, words.get(t.lower(), [0.0] * 5)) for t in d["key"].split()])
    rows = matrix(db, d)
    Wd = np.zeros((7, 7))
    for i, j, w, _ in rows:
        Wd[i, j] = w
    want = Wd @ K
    check(all(np.allclose(floats(b), want[i], rtol=1e-6, atol=1e-7) for i, _, _, b in rows),
          "dot: context = weights @ key vectors, the same on every row of a query token")

    # the SVG holds the weights of its kind
    for name in ("trainable_d50_seed7", "additive_d50_seed7"):
        c = by[name]
        svg = db.execute("SELECT attn_matrix_svg(?, ?, ?, ?, ?)",
                         (c["query"], c["key"], "vec_" + c["table"], c["kind"], c["seed"])).fetchone()[0]
        cells = [float(x) for x in re.findall(r"<title>([0-9.]+)</title></rect>", svg)]
        W = np.array(c["weights"]).ravel()
        check(len(cells) == W.size and max(abs(a - b) for a, b in zip(cells, W)) < 6e-5 and
              ("Trainable" if c["kind"] == "trainable" else "Additive") in svg,
              f"attn_matrix_svg {c['kind']}: {len(cells)} cells hold the weights, titled")

    # bounds: 1024 dimensions for the kinds with layers; dot keeps 4096
    big = blob([0.01] * 1025)
    db.execute("CREATE TABLE wide(word TEXT, vector BLOB)")
    db.execute("INSERT INTO wide VALUES ('a', ?), ('b', ?)", (big, big))
    for kind in ("trainable", "additive"):
        e = error_of(db, f"SELECT * FROM attn_matrix('a', 'b', 'wide', '{kind}')")
        check(e == f"attn_matrix: kind '{kind}' draws d x d layers: vectors of at most 1024 "
                   f"dimensions, got 1025", f"{kind} at 1025 dimensions: {e}")
    check(db.execute("SELECT count(*) FROM attn_matrix('a b', 'b', 'wide')").fetchone()[0] == 2,
          "dot at 1025 dimensions: fine")
    # the largest additive case, 1024 dimensions and 512 x 512 words, stops on an interrupt
    vec = blob([0.001] * 1024)
    db.execute("CREATE TABLE v1024(word TEXT, vector BLOB)")
    db.executemany("INSERT INTO v1024 VALUES (?, ?)", [(f"w{i}", vec) for i in range(64)])
    q = " ".join(f"w{i % 64}" for i in range(512))
    sql = "SELECT count(*) FROM attn_matrix(?, ?, 'v1024', 'additive')"
    # The interrupt comes at half the time of a sixteenth of the work (32 x 512 words,
    # uninterrupted), not after a fixed sleep that a fast machine could beat; it must stop the
    # whole (512 x 512) before that sixteenth's time. tests/run_all.sh runs this test alone.
    start = time.time()
    n = db.execute(sql, (" ".join(f"w{i}" for i in range(32)), q)).fetchone()[0]
    part = time.time() - start
    check(n == 32 * 512, f"additive, 1024 dimensions, 32 x 512 words: {n} rows in {part:.2f} s")
    timer = threading.Timer(part / 2, db.interrupt)
    start = time.time()
    timer.start()
    e = error_of(db, sql, (q, q))
    secs = time.time() - start
    timer.cancel()
    check(e == "attn_matrix: interrupted" and secs < part + 0.05,
          f"additive, 1024 dimensions, 512 x 512 words: interrupted after {part / 2:.2f} s, "
          f"stopped after {secs:.2f} s (< {part + 0.05:.2f} s, the time of a sixteenth of it; "
          f"{e})")

    # errors
    for sql, args, want in [
        ("SELECT * FROM attn_matrix('a', 'b', 'vec_d5', 'cosine')", (),
         "attn_matrix: kind must be 'dot' (scaled dot-product), 'trainable' (query, key and value "
         "layers) or 'additive', got 'cosine'"),
        ("SELECT * FROM attn_matrix('a', 'b', 'vec_d5', 'additive', -1)", (),
         "attn_matrix: seed must be an integer from 0 to 2^63 - 1, got -1"),
        ("SELECT * FROM attn_matrix('a', 'b', 'vec_d5', 'additive', 1.5)", (),
         "attn_matrix: seed must be an integer from 0 to 2^63 - 1, got 1.5"),
        ("SELECT * FROM attn_matrix('a', 'b', 'vec_d5', 'additive', 'seven')", (),
         "attn_matrix: seed must be an integer from 0 to 2^63 - 1, got 'seven'"),
        ("SELECT * FROM attn_matrix('a', 'b', 'vec_d5', 'additive', ?)", (None,),
         "attn_matrix: seed must be an integer from 0 to 2^63 - 1, got NULL"),
        ("SELECT * FROM attn_matrix('a', 'b', 'vec_d5', 'additive', ?)", (b"\x01",),
         "attn_matrix: seed must be an integer from 0 to 2^63 - 1, got a BLOB"),
        ("SELECT * FROM attn_matrix('a', 'b', 'vec_d5', 'additive', 9223372036854775808)", (),
         "attn_matrix: seed must be an integer from 0 to 2^63 - 1, got 9.22337203685478e+18"),
        ("SELECT * FROM attn_matrix('a', 'b', 'vec_d5', ?)", ("x" * 1000,),
         "attn_matrix: kind must be 'dot' (scaled dot-product), 'trainable' (query, key and value "
         "layers) or 'additive', got '" + "x" * 40 + "...'"),
        ("SELECT attn_matrix_svg('a', 'b', 'vec_d5', 'additive', -3)", (),
         "attn_matrix_svg: seed must be an integer from 0 to 2^63 - 1, got -3"),
        ("SELECT * FROM attn_matrix('a', 'b')", (),
         "attn_matrix: expected 3 to 5 arguments: attn_matrix(query_text, key_text, vectors[, "
         "kind[, seed]])"),
    ]:
        e = error_of(db, sql, args)
        check(e == want, f"error: {e}")
    R.finish("test_matrix")


if __name__ == "__main__":
    main()
