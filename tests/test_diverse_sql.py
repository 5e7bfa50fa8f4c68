"""test_diverse_sql.py -- attn_uncertain(name, query, '{"diverse": k}'): a batch to label that is
uncertain and diverse (BADGE's order, engine/diverse.c), as a Python program uses it.

  - PyTorch: the reference module (tests/attn_reference.py) loaded with the model's weights
    gives fc2's input for each text (a hook on fc2); fc2 on it gives attn_probs'
    probabilities, and autograd's gradient of the cross-entropy at the predicted label with
    respect to fc2.weight is (p - onehot) outer that input, the factors the order is computed
    from. The whole order of k picks equals a reference written in numpy: each row's embedding
    (p - onehot) outer max(0, fc2's input) formed, the first the longest, each next drawn as the
    engine draws (xoshiro256** seeded through splitmix64, written out here) in proportion to
    the squared distance to the nearest pick.
  - The rows: every row of the query once, with the same label, probability, margin and entropy
    as without the option; the k picks first, then the others in the margin order; the first
    10 of k = 40 are the order of k = 10 (a ranking); the same query and seed give the same
    order, another seed another; k above the rows orders every row; "diverse": 0 is the margin
    order; an ensemble and a model without fc1 order too.
  - A model trained with "device": "cuda" on the stand-in device (tests/fake_device.c) gives
    the order the same weights give on the CPU, in another process.
  - Bounds: a query of more rows than the sample holds (50,000) gives every row once, the same
    order twice; an interrupt during the picks ends the statement with "interrupted"; bad
    options are errors naming the function and the option.
Run from the repository root: /usr/bin/python3 tests/test_diverse_sql.py
"""
import ctypes
import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability as R  # noqa: E402

R.reexec_with_preload()
R.require_extension()
check, error_of = R.check, R.error_of

import numpy as np  # noqa: E402
from gen_matrix_fixtures import Rng  # noqa: E402  engine/rng.c in Python (imports torch)

def reference_order(p, top, x, k, seed):
    """BADGE's order written out: embeddings formed, D^2 draws as engine/diverse.c draws."""
    a = p.copy()
    a[np.arange(len(p)), top] -= 1.0
    g = (a[:, :, None] * x[:, None, :]).reshape(len(p), -1)
    first = int(np.argmax((g * g).sum(1)))
    dist = np.full(len(p), np.inf)
    rng = Rng(seed)
    order, nxt = [], first
    while True:
        order.append(nxt)
        dist[nxt] = -1.0
        if len(order) == min(k, len(p)):
            return order
        live = dist >= 0
        d = ((g - g[nxt]) ** 2).sum(1)
        dist[live] = np.minimum(dist[live], d[live])
        total = dist[live].sum()
        u = (rng.next() >> 11) * 2.0 ** -53 * total
        run, nxt = 0.0, -1
        for i in range(len(p)):
            if dist[i] <= 0.0:
                continue
            run += dist[i]
            nxt = i
            if run > u:
                break


def uncertain(db, name, query, options=None):
    args = (name, query) if options is None else (name, query, json.dumps(options))
    sql = "SELECT id, label, probability, margin, entropy FROM attn_uncertain(%s)" % (
        ", ".join("?" * len(args)))
    return db.execute(sql, args).fetchall()


def fc2_inputs(db, name, texts):
    """fc2's input of each text from PyTorch's reference module, its logits, fc2's weight."""
    import torch
    from attn_reference import from_engine_file
    blob = db.execute("SELECT weights FROM attn_models WHERE name = ? AND deployed",
                      (name,)).fetchone()[0]
    model, vocab, labels, _ = from_engine_file(blob)
    model.eval()
    index = {w: i for i, w in enumerate(vocab)}
    caught = {}
    model.fc2.register_forward_pre_hook(lambda m, a: caught.__setitem__("x", a[0].detach()))
    xs, zs = [], []
    for text in texts:
        toks = [t for (t,) in db.execute("SELECT token FROM attn_weights(?, ?)", (name, text))]
        ids = torch.tensor([[index.get(t, 1) for t in toks]], dtype=torch.long)
        with torch.no_grad():
            z, _ = model(ids, torch.tensor([len(toks)]))
        xs.append(caught["x"][0].double().numpy())
        zs.append(z[0].double().numpy())
    return np.array(xs), np.array(zs), model, labels


def main():
    db = R.connect(":memory:")
    db.execute("CREATE TABLE pool(id INTEGER PRIMARY KEY, text, label)")
    rows = R.make_rows(900, seed=11)
    R.insert_rows(db, "INSERT INTO pool(text, label) VALUES (?, ?)",
                  [(t, l if i < 60 else None) for i, (t, l) in enumerate(rows)])
    opts = {"epochs": 3, "hidden": 8, "embed_dim": 8, "fc_hidden": 6, "vocab_size": 60,
            "validation": "none", "self_training": 0, "progress": False}
    db.execute("SELECT attn_fit('m', 'SELECT text, label FROM pool', ?)", (json.dumps(opts),))
    q = "SELECT id, text FROM pool WHERE label IS NULL"

    # ---------------------------------------------------------------- PyTorch and the order
    ids_texts = db.execute(q).fetchall()
    ids = [i for i, _ in ids_texts]
    x, z, model, labels = fc2_inputs(db, "m", [t for _, t in ids_texts])
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    probs = {}
    for i, t in ids_texts[:50]:
        probs[i] = dict(db.execute("SELECT label, probability FROM attn_probs('m', ?)", (t,)))
    worst = max(abs(p[j, c] - probs[i][lab]) for j, (i, _) in enumerate(ids_texts[:50])
                for c, lab in enumerate(labels))
    check(worst < 1e-5, "softmax(fc2(fc2's input)) = attn_probs, max |diff| %.2g" % worst)
    import torch
    top = p.argmax(1)
    worst = 0.0
    for j in range(20):
        xx = torch.tensor(x[j], requires_grad=False)
        w = model.fc2.weight.detach().double().clone().requires_grad_(True)
        b = model.fc2.bias.detach().double()
        loss = torch.nn.functional.cross_entropy((w @ xx + b)[None], torch.tensor([int(top[j])]))
        loss.backward()
        want = np.outer(p[j] - np.eye(len(labels))[top[j]], x[j])
        worst = max(worst, float(np.abs(w.grad.numpy() - want).max()))
    check(worst < 1e-6, "autograd's gradient of fc2.weight = (p - onehot) outer fc2's input, max "
          "|diff| %.2g" % worst)
    for k, seed in ((25, 0), (40, 7)):
        want = [ids[j] for j in reference_order(p, top, np.maximum(x, 0.0), k, seed)]
        got = [r[0] for r in uncertain(db, "m", q, {"diverse": k, "seed": seed})[:k]]
        check(got == want, "diverse %d seed %d: the reference's order (first %s, want %s)"
              % (k, seed, got[:5], want[:5]))

    # ---------------------------------------------------------------- the rows
    plain = uncertain(db, "m", q)
    div = uncertain(db, "m", q, {"diverse": 40})
    check(sorted(div) == sorted(plain) and len(div) == 840,
          "every row once, with the same label, probability, margin and entropy (%d rows)"
          % len(div))
    rest = [r for r in plain if r[0] not in {d[0] for d in div[:40]}]
    check(div[40:] == rest, "after the 40 picks, the other rows in the margin order")
    check([r[0] for r in div[:40]] != [r[0] for r in plain[:40]],
          "the picks are not the 40 least sure")
    ten = uncertain(db, "m", q, {"diverse": 10})
    check([r[0] for r in ten[:10]] == [r[0] for r in div[:10]],
          "a ranking: the first 10 of 40 picks are the 10 picks")
    check(uncertain(db, "m", q, {"diverse": 40}) == div, "the same query, the same order")
    other = uncertain(db, "m", q, {"diverse": 40, "seed": 5})
    check([r[0] for r in other[:40]] != [r[0] for r in div[:40]] and other[0] == div[0],
          "another seed: the same first pick (the longest), other draws")
    check(uncertain(db, "m", q, {"diverse": 0}) == plain, '"diverse": 0 is the margin order')
    check(uncertain(db, "m", q, {}) == plain and uncertain(db, "m", q, None) == plain,
          "no options, the margin order")
    few = "SELECT id, text FROM pool WHERE label IS NULL AND id < 80"
    allp = uncertain(db, "m", few, {"diverse": 500})
    check(sorted(allp) == sorted(uncertain(db, "m", few)) and len(allp) == 19,
          "k above the rows orders every row (%d)" % len(allp))
    check(uncertain(db, "m", "SELECT id, text FROM pool WHERE 0", {"diverse": 5}) == [],
          "no rows: none")
    for name, extra in (("ens", {"ensemble": 2}), ("nofc", {"fc_hidden": 0})):
        db.execute("SELECT attn_fit(?, 'SELECT text, label FROM pool', ?)",
                   (name, json.dumps(dict(opts, **extra))))
        a, b = uncertain(db, name, q, {"diverse": 30}), uncertain(db, name, q)
        check(sorted(a) == sorted(b) and a[:30] != b[:30],
              "%s: every row once, its own picks first" % name)
    # without fc1 the last layer reads the context itself, taken as it is (no positive part)
    x0, z0, _, _ = fc2_inputs(db, "nofc", [t for _, t in ids_texts])
    p0 = np.exp(z0 - z0.max(1, keepdims=True))
    p0 /= p0.sum(1, keepdims=True)
    want = [ids[j] for j in reference_order(p0, p0.argmax(1), x0, 30, 0)]
    got = [r[0] for r in uncertain(db, "nofc", q, {"diverse": 30})[:30]]
    check(got == want and (x0 < 0).any(), "no fc1: the reference's order over the context "
          "(first %s, want %s)" % (got[:5], want[:5]))

    # ---------------------------------------------------------------- bounds
    big = R.connect(":memory:")
    big.execute("CREATE TABLE pool(id INTEGER PRIMARY KEY, text, label)")
    R.insert_rows(big, "INSERT INTO pool(text, label) VALUES (?, ?)",
                  [(t, l if i < 60 else None) for i, (t, l) in enumerate(R.make_rows(60060,
                                                                                   seed=5))])
    tiny = {"epochs": 1, "hidden": 4, "embed_dim": 4, "fc_hidden": 4, "vocab_size": 50,
            "validation": "none", "self_training": 0, "pretrain_epochs": 0, "progress": False}
    big.execute("SELECT attn_fit('m', 'SELECT text, label FROM pool LIMIT 60', ?)",
                (json.dumps(tiny),))
    bq = "SELECT id, text FROM pool WHERE label IS NULL"
    t0 = time.time()
    one = uncertain(big, "m", bq, {"diverse": 100})
    took = time.time() - t0
    check(len(one) == 60000 and len({r[0] for r in one}) == 60000,
          "60,000 rows, more than the sample holds: every row once (%.1f s)" % took)
    check(uncertain(big, "m", bq, {"diverse": 100})[:100] == one[:100],
          "the same sample and picks twice")
    timer = threading.Timer(took + 0.5, big.interrupt)
    timer.start()
    t0 = time.time()
    err = error_of(big, "SELECT count(*) FROM attn_uncertain('m', ?, '{\"diverse\": 10000}')",
                   (bq,))
    timer.cancel()
    check(err is not None and "interrupted" in err and time.time() - t0 < took + 10,
          "an interrupt during 10,000 picks from 50,000 rows: %r after %.1f s"
          % (err, time.time() - t0))

    # a model that lives on a device (tests/fake_device.c: memory the host cannot read, the CPU's
    # arithmetic): the contexts come back through the backend, fc1 from the host mirror, and
    # the order is the one the same weights give on the CPU
    fake = os.path.join(os.environ.get("BUILD", "build"), "tests", "fake_device.so")
    shell = shlex.split(os.environ.get("SQLITE3", "sqlite3"))
    if not os.path.exists(fake):
        check(False, "%s not built (make test builds it)" % fake)
    else:
        path = os.path.join(tempfile.mkdtemp(prefix="attnext-diverse-"), "d.db")
        ext = R.extension_path()
        train = ("CREATE TABLE pool(id INTEGER PRIMARY KEY, text, label);\n" + "".join(
            "INSERT INTO pool(text, label) VALUES ('%s', %s);\n"
            % (t, "'%s'" % l if i < 60 else "NULL") for i, (t, l) in enumerate(rows[:400])) +
            "SELECT count(*) FROM attn_train('m', 'SELECT text, label FROM pool', '%s');\n"
            % json.dumps(dict(opts, device="cuda")))
        ask = ("SELECT group_concat(id) FROM (SELECT id FROM attn_uncertain('m', 'SELECT id, "
               "text FROM pool WHERE label IS NULL', '{\"diverse\": 30}') LIMIT 30);\n")

        def shell_run(lib, sql):
            env = dict(os.environ, ATTNEXT_CUDA_LIB=lib)
            return subprocess.run(shell + ["-bail", path], input=".load %s\n%s" % (ext, sql),
                                  env=env, capture_output=True, text=True)
        a = shell_run(fake, train + ask)
        b = shell_run("/nonexistent", ask)
        got, want = a.stdout.strip().split("\n")[-1], b.stdout.strip()
        check(a.returncode == 0 and b.returncode == 0 and got == want and got.count(",") == 29,
              "a \"cuda\" model on the stand-in device: the CPU's order (%s / %s%s)"
              % (got[:30], want[:30], a.stderr.strip() + b.stderr.strip()))

    # SQLite's heap (the library Python's sqlite3 module uses): out of memory is an error, then
    # the connection answers; past the sample, a row costs what it costs without the option
    try:
        lib = ctypes.CDLL("libsqlite3.so.0")
        for f in ("sqlite3_memory_used", "sqlite3_memory_highwater", "sqlite3_hard_heap_limit64",
                  "sqlite3_soft_heap_limit64"):
            getattr(lib, f).restype = ctypes.c_int64
    except OSError as e:
        lib = None
        print("SKIP-PART libsqlite3.so.0 not loadable (%s): no heap limit" % e)
    if lib:
        lots = ("WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < %d) "
                "SELECT i, 'match goal ' || i FROM c")
        sql = "SELECT count(*) FROM attn_uncertain('m', ?, '{\"diverse\": 50}')"
        lib.sqlite3_hard_heap_limit64(ctypes.c_int64(lib.sqlite3_memory_used() + 3_000_000))
        err = error_of(big, sql, (lots % 200_000,))
        lib.sqlite3_hard_heap_limit64(ctypes.c_int64(0))
        lib.sqlite3_soft_heap_limit64(ctypes.c_int64(0))
        check(err is not None and err.startswith("attn_uncertain: out of memory"),
              "200,000 rows with 3 MB of heap left: %s" % err)
        check(big.execute(sql, (lots % 10,)).fetchone() == (10,), "then 10 rows answer")

        def peak(rows):
            lib.sqlite3_memory_highwater(1)
            base = lib.sqlite3_memory_highwater(0)
            big.execute(sql, (lots % rows,)).fetchone()
            return lib.sqlite3_memory_highwater(0) - base
        per_row = (peak(300_000) - peak(100_000)) / 200_000
        check(per_row < 80, "from 100,000 to 300,000 rows (the sample full): %.0f bytes of "
              "SQLite's heap a row (under 80)" % per_row)

    for opt, want in (('{"diverse": -1}', 'option "diverse" must be an integer from 0 to 10000'),
                      ('{"diverse": 10001}', 'option "diverse" must be an integer from 0'),
                      ('{"diverse": 2.5}', 'option "diverse" must be an integer'),
                      ('{"diverse": "10"}', 'option "diverse" must be an integer'),
                      ('{"seed": -3}', 'option "seed" must be an integer from 0 to '
                                       '9007199254740992'),
                      ('{"seed": 18446744073709551615}', 'option "seed" must be an integer from 0'),
                      ('{"k": 3}', 'unknown option "k" (expected "diverse" or "seed")'),
                      # a key read as a C string would be "diverse", and would hide the other
                      ('{"diverse\\u0000": 3, "diverse": 0}', 'unknown option "diverse\\x00"'),
                      ('{"seed\\u0000x": 1}', 'unknown option "seed\\x00x"'),
                      ('[1]', "the options must be a JSON object"),
                      ('{"diverse": ', "the options are not JSON"),
                      (3, "the options must be a JSON object")):
        err = error_of(db, "SELECT * FROM attn_uncertain('m', ?, ?)", (q, opt))
        check(err is not None and err.startswith("attn_uncertain: ") and want in err,
              "options %r: %s" % (opt, err))
    # whole numbers as attn_fit reads them: 1e2 and 100.0 are 100
    want = [r[0] for r in db.execute("SELECT id FROM attn_uncertain('m', ?, "
                                     "'{\"diverse\": 100, \"seed\": 1000}')", (q,))]
    for opt in ('{"diverse": 1e2, "seed": 1e3}', '{"diverse": 100.0, "seed": 1000.0}'):
        got = [r[0] for r in db.execute("SELECT id FROM attn_uncertain('m', ?, ?)", (q, opt))]
        check(got == want, "options %s: the order of 100 and 1000" % opt)
    err = error_of(db, "SELECT * FROM attn_uncertain('m')")
    check(err == "attn_uncertain: expected 2 or 3 arguments: attn_uncertain(name, query[, "
                 "options])", "one argument: %s" % err)
    R.finish("test_diverse_sql")


if __name__ == "__main__":
    main()
