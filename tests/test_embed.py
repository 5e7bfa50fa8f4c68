"""test_embed.py -- attn_embed(name, text) (ext/attn_embed.c, nn_model_forward_pooled in
engine/model.c) through Debian's Python sqlite3 module, with sqlite-vec where it can be had.

  - The layout: a BLOB of hidden x directions little-endian float32 (numpy '<f4'), for a
    bidirectional GRU and an LSTM with "self" attention.
  - What it is: PyTorch's reference module (tests/attn_reference.py) loaded with the model's
    weights gives the same context vector (the input of fc1, caught by a forward hook) for the
    same token ids, to 1e-5; and the head (fc1, fc2 from the weights BLOB) applied to the vector
    in numpy gives attn_probs' probabilities, to 1e-5.
  - sqlite-vec: the prebuilt loadable of npm's sqlite-vec-linux-x64 (version pinned below),
    fetched with `npm pack` into build/sqlite-vec/ the first time (no build, no install
    script); vec_length and vec_to_json read the BLOB, a vec0 table of every text answers KNN
    queries exactly as numpy's L2 distances order them, vec_distance_cosine equals numpy's.
    Where npm or the package cannot be had (no network, another platform), the layout checks
    above are what runs, and the last line says so.
  - Hostile and edge inputs: NULL (NULL), empty text (one <UNK>), numbers and BLOBs as text,
    a 1 MB text, bad names, and the innocuous flag (usable from a view).
Run from the repository root: /usr/bin/python3 tests/test_embed.py
"""
import json
import os
import platform
import shutil
import sqlite3
import struct
import subprocess
import sys
import tarfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability as R  # noqa: E402

check, connect, error_of = R.check, R.connect, R.error_of

import numpy as np  # noqa: E402

SQLITE_VEC = "sqlite-vec-linux-x64@0.1.9"


def sqlite_vec_path():
    """build/sqlite-vec/package/vec0.so, fetched with npm pack when absent; (path, why not)."""
    build = os.environ.get("BUILD", "build")
    dest = os.path.abspath(os.path.join(build, "sqlite-vec"))
    so = os.path.join(dest, "package", "vec0.so")
    if os.path.exists(so):
        return so, None
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        return None, f"no prebuilt sqlite-vec for {platform.system()} {platform.machine()} here"
    if not shutil.which("npm"):
        return None, "npm not found (sh tests/deps.sh installs it)"
    os.makedirs(dest, exist_ok=True)
    try:
        out = subprocess.run(["npm", "pack", SQLITE_VEC, "--silent"], cwd=dest, timeout=180,
                             capture_output=True, text=True)
    except subprocess.TimeoutExpired:
        return None, f"npm pack {SQLITE_VEC} timed out"
    tgz = [f for f in os.listdir(dest) if f.endswith(".tgz")]
    if out.returncode != 0 or not tgz:
        return None, f"npm pack {SQLITE_VEC} failed: {(out.stderr or out.stdout).strip()[-200:]}"
    with tarfile.open(os.path.join(dest, tgz[0])) as t:
        member = t.getmember("package/vec0.so")
        t.extract(member, dest)
    return (so, None) if os.path.exists(so) else (None, "the package holds no package/vec0.so")


def vector(blob):
    return np.frombuffer(blob, dtype="<f4").astype(np.float64)


def model_file(db, name):
    return db.execute("SELECT weights FROM attn_models WHERE name = ? AND deployed",
                      (name,)).fetchone()[0]


def check_pytorch(db, name, texts):
    """The context vector of PyTorch's reference module for the same token ids."""
    import torch
    from attn_reference import from_engine_file, st_load
    blob = model_file(db, name)
    model, vocab, labels, config = from_engine_file(blob)
    model.eval()
    index = {w: i for i, w in enumerate(vocab)}
    caught = {}
    target = model.fc1 if model.fc1 is not None else model.dropout
    target.register_forward_pre_hook(lambda m, args: caught.__setitem__("ctx", args[0].detach()))
    worst, worst_probs = 0.0, 0.0
    tensors, _ = st_load(blob)
    for text in texts:
        toks = [t for (t,) in db.execute("SELECT token FROM attn_weights(?, ?)", (name, text))]
        ids = torch.tensor([[index.get(t, 1) for t in toks]], dtype=torch.long)
        with torch.no_grad():
            model(ids, torch.tensor([len(toks)]))
        want = caught["ctx"][0].double().numpy()
        got = vector(db.execute("SELECT attn_embed(?, ?)", (name, text)).fetchone()[0])
        worst = max(worst, float(np.abs(got - want).max()))
        # the head on the vector gives attn_probs' probabilities
        z = got
        if "fc1.weight" in tensors:
            z = tensors["fc1.weight"].astype(np.float64) @ z + tensors["fc1.bias"]
        z = tensors["fc2.weight"].astype(np.float64) @ z + tensors["fc2.bias"]
        p = np.exp(z - z.max())
        p /= p.sum()
        probs = dict(db.execute("SELECT label, probability FROM attn_probs(?, ?)", (name, text)))
        worst_probs = max(worst_probs, max(abs(p[i] - probs[l]) for i, l in enumerate(labels)))
    check(worst < 1e-5, f"{name} ({config['cell']}, {config['attention']}, bidirectional "
          f"{config['bidirectional']}): attn_embed = PyTorch's context vector for {len(texts)} "
          f"texts, max |diff| {worst:.2g}")
    check(worst_probs < 1e-5, f"{name}: softmax(fc2(fc1(vector))) = attn_probs, max |diff| "
          f"{worst_probs:.2g}")


def main():
    R.reexec_with_preload()
    R.require_extension()
    db = connect(":memory:")
    R.make_table(db, n=240, seed=7)
    R.train(db, "gru", options='{"epochs":4,"cell":"gru","bidirectional":true,"hidden":12,'
                               '"embed_dim":8,"fc_hidden":6,"vocab_size":60,"progress":false}')
    R.train(db, "lstm", options='{"epochs":3,"cell":"lstm","attention":"self","hidden":10,'
                                '"embed_dim":8,"fc_hidden":0,"vocab_size":60,"progress":false}')
    texts = [t for (t,) in db.execute("SELECT text FROM docs ORDER BY id")]

    # the layout: hidden x directions little-endian float32
    for name, D in (("gru", 24), ("lstm", 10)):
        blob = db.execute("SELECT attn_embed(?, ?)", (name, texts[0])).fetchone()[0]
        check(isinstance(blob, bytes) and len(blob) == 4 * D,
              f"{name}: a BLOB of {D} float32 ({len(blob)} bytes)")
        v = struct.unpack("<%df" % D, blob)
        check(all(np.isfinite(v)) and max(abs(x) for x in v) > 0,
              f"{name}: finite, not all zero: {[round(x, 3) for x in v[:4]]} ...")
    check_pytorch(db, "gru", texts[:40])
    check_pytorch(db, "lstm", texts[:40])

    # edge and hostile inputs
    check(db.execute("SELECT attn_embed('gru', NULL)").fetchone()[0] is None, "NULL text: NULL")
    empty = db.execute("SELECT attn_embed('gru', '')").fetchone()[0]
    unk = db.execute("SELECT attn_embed('gru', 'zzzz')").fetchone()[0]
    check(empty == unk and len(empty) == 96, "an empty text reads as one <UNK>, as attn_predict")
    check(db.execute("SELECT attn_embed('gru', 42) = attn_embed('gru', '42')").fetchone()[0] == 1,
          "a number is read as its text")
    check(len(db.execute("SELECT attn_embed('gru', x'ff00fe')").fetchone()[0]) == 96,
          "a BLOB (invalid UTF-8) as text")
    big = db.execute("SELECT attn_embed('gru', ?)", ("goal match " * 100000,)).fetchone()[0]
    check(len(big) == 96, "a 1 MB text (truncated to max_len tokens)")
    for sql, want in [("SELECT attn_embed('nope', 'x')", "attn_embed: no model named 'nope'"),
                      ("SELECT attn_embed('', 'x')",
                       "attn_embed: the model name must be a non-empty text, got ''"),
                      ("SELECT attn_embed(NULL, 'x')",
                       "attn_embed: the model name must be a non-empty text, got NULL")]:
        got = error_of(db, sql)
        check(got == want, f"error: {got}")
    got = error_of(db, "SELECT attn_embed('gru')")
    check(got is not None and "wrong number of arguments" in got, f"one argument: {got}")
    db.execute("CREATE VIEW embedded AS SELECT id, attn_embed('gru', text) AS v FROM docs")
    check(db.execute("SELECT count(*), min(length(v)) FROM embedded").fetchone() == (240, 96),
          "innocuous: usable from a view")
    same = db.execute("SELECT count(*) FROM docs WHERE attn_embed('gru', text) = "
                      "attn_embed('gru', text)").fetchone()[0]
    check(same == 240, "deterministic: the same text, the same bytes")

    # sqlite-vec
    so, why = sqlite_vec_path()
    if not so:
        # a part not run: tests/run_all.sh counts the line as a skip
        print(f"SKIP-PART sqlite-vec not available ({why}): checked the layout only")
        R.finish("test_embed")
    db.load_extension(so[:-3])
    version = db.execute("SELECT vec_version()").fetchone()[0]
    blob = db.execute("SELECT attn_embed('gru', ?)", (texts[0],)).fetchone()[0]
    check(db.execute("SELECT vec_length(?)", (blob,)).fetchone()[0] == 24,
          f"sqlite-vec {version}: vec_length(attn_embed(...)) = 24")
    js = db.execute("SELECT vec_to_json(?)", (blob,)).fetchone()[0]
    check(np.allclose(np.array(json.loads(js)), vector(blob), atol=1e-6),
          f"vec_to_json reads the same numbers: {js[:60]}...")
    db.execute("CREATE VIRTUAL TABLE doc_vec USING vec0(embedding float[24])")
    db.execute("INSERT INTO doc_vec(rowid, embedding) SELECT id, attn_embed('gru', text) FROM docs")
    ids = [i for (i,) in db.execute("SELECT id FROM docs ORDER BY id")]
    M = np.stack([vector(b) for (b,) in db.execute(
        "SELECT attn_embed('gru', text) FROM docs ORDER BY id")])
    ok_knn, ok_self = True, True
    queries = texts[:10] + ["goal coach league", "bank stocks", "cloud software chip"]
    for q in queries:
        qv = vector(db.execute("SELECT attn_embed('gru', ?)", (q,)).fetchone()[0])
        got = db.execute("SELECT rowid, distance FROM doc_vec WHERE embedding MATCH "
                         "attn_embed('gru', ?) AND k = 5 ORDER BY distance", (q,)).fetchall()
        d = np.sqrt(((M - qv) ** 2).sum(axis=1))
        order = np.argsort(d, kind="stable")
        want_d = d[order[:5]]
        ok_knn &= np.allclose([g[1] for g in got], want_d, atol=1e-4)
        ok_knn &= all(abs(d[ids.index(r)] - dist) < 1e-4 for r, dist in got)
        if q in texts:
            ok_self &= got[0][1] < 1e-5 and texts[ids.index(got[0][0])] == q
    check(ok_knn, f"KNN on a vec0 table: the 5 nearest of {len(queries)} texts at numpy's L2 "
          "distances")
    check(ok_self, "a text of the table finds itself first, at distance 0")
    a, b = texts[0], texts[1]
    cos = db.execute("SELECT vec_distance_cosine(attn_embed('gru', ?), attn_embed('gru', ?))",
                     (a, b)).fetchone()[0]
    va, vb = vector(db.execute("SELECT attn_embed('gru', ?)", (a,)).fetchone()[0]), \
        vector(db.execute("SELECT attn_embed('gru', ?)", (b,)).fetchone()[0])
    want = 1 - va @ vb / np.linalg.norm(va) / np.linalg.norm(vb)
    check(abs(cos - want) < 1e-5, f"vec_distance_cosine = numpy's: {cos:.6f} vs {want:.6f}")
    # nearest neighbours share the label more often than chance: the vector carries the class
    same_label = 0
    labels = [l for (l,) in db.execute("SELECT label FROM docs ORDER BY id")]
    for i, t in enumerate(texts[:60]):
        r = db.execute("SELECT rowid FROM doc_vec WHERE embedding MATCH attn_embed('gru', ?) "
                       "AND k = 2 ORDER BY distance", (t,)).fetchall()
        nn_id = [x for (x,) in r if x != ids[i]][:1]
        same_label += bool(nn_id) and labels[ids.index(nn_id[0])] == labels[i]
    check(same_label >= 40, f"the nearest other text has the same label for {same_label} of 60")
    R.finish("test_embed")


if __name__ == "__main__":
    main()
