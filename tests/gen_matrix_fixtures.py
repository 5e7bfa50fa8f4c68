"""gen_matrix_fixtures.py -- PyTorch's sentence-to-sentence attention for tests/test_matrix.py
(attn_matrix's kinds 'dot', 'trainable' and 'additive', ext/attn_matrix.c).

    /usr/bin/python3 tests/gen_matrix_fixtures.py           rewrites tests/fixtures/matrix.json
    /usr/bin/python3 tests/gen_matrix_fixtures.py --check   recomputes it with the installed
                                                            PyTorch and compares (exit 1 when a
                                                            weight moved by more than 1e-12)

Needs Debian's python3-torch. The layers of 'trainable' and 'additive' are drawn here exactly as
attn_matrix draws them: the engine's generator (engine/rng.c: xoshiro256** seeded through
splitmix64, u = (next >> 40) * 2^-24 in float32), each value (2 u - 1) * bound in float32 with
bound = float32(1 / sqrt(d)), in the order Wq, bq, Wk, bk, Wv, bv ('trainable') or W, U, v
('additive'), each row-major as PyTorch's Linear.weight (out, in). They are loaded into
torch.nn.Linear modules and the weights are computed by the lesson's formulas in float64:
  dot        softmax_j(q_i . k_j / sqrt(d))
  trainable  softmax_j(query(q_i) . key(k_j) / sqrt(d)), context = weights @ value(K)
  additive   softmax_j(v(tanh(W(q_i) + U(k_j))))            (Bahdanau; no biases)
  context    weights @ values (the key vectors for dot and additive)
Each case: its vectors table (in "tables": word -> float32 numbers), the texts (split on white space; a word
is looked up as written, then lower-cased; a missing one is a zero vector), kind, seed (null:
attn_matrix's default, 1234), the expected weights (nq, nk) and contexts (nq, d).
"""
import json
import math
import os
import sys

import numpy as np
import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "matrix.json")
MASK = (1 << 64) - 1
DEFAULT_SEED = 1234


class Rng:
    """engine/rng.c: xoshiro256** seeded by splitmix64."""

    def __init__(self, seed):
        x = seed & MASK
        self.s = []
        for _ in range(4):
            x = (x + 0x9E3779B97F4A7C15) & MASK
            z = x
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
            self.s.append(z ^ (z >> 31))

    @staticmethod
    def rotl(x, k):
        return ((x << k) | (x >> (64 - k))) & MASK

    def next(self):
        s = self.s
        result = (self.rotl((s[1] * 5) & MASK, 7) * 9) & MASK
        t = (s[1] << 17) & MASK
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = self.rotl(s[3], 45)
        return result

    def uniform(self):
        return np.float32(self.next() >> 40) * np.float32(2.0 ** -24)


def draw(kind, d, seed):
    """The layers attn_matrix draws: float32, in its order."""
    rng = Rng(seed)
    bound = np.float32(1.0 / math.sqrt(d))
    def tensor(*shape):
        n = int(np.prod(shape))
        vals = [(np.float32(2.0) * rng.uniform() - np.float32(1.0)) * bound for _ in range(n)]
        return np.array(vals, dtype=np.float32).reshape(shape)
    if kind == "trainable":
        return {"Wq": tensor(d, d), "bq": tensor(d), "Wk": tensor(d, d), "bk": tensor(d),
                "Wv": tensor(d, d), "bv": tensor(d)}
    return {"W": tensor(d, d), "U": tensor(d, d), "v": tensor(1, d)}


def linear(weight, bias=None):
    out_f, in_f = weight.shape
    lin = torch.nn.Linear(in_f, out_f, bias=bias is not None).double()
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(weight.astype(np.float64)))
        if bias is not None:
            lin.bias.copy_(torch.from_numpy(bias.astype(np.float64)))
    return lin


def attention(kind, seed, Q, K):
    """weights (nq, nk) and contexts (nq, d) in float64 by PyTorch."""
    d = Q.shape[1]
    q, k = torch.from_numpy(Q.astype(np.float64)), torch.from_numpy(K.astype(np.float64))
    with torch.no_grad():
        if kind == "dot":
            w = torch.softmax(q @ k.T / math.sqrt(d), dim=1)
            values = k
        elif kind == "trainable":
            p = draw(kind, d, seed)
            query, key, value = linear(p["Wq"], p["bq"]), linear(p["Wk"], p["bk"]), \
                linear(p["Wv"], p["bv"])
            w = torch.softmax(query(q) @ key(k).T / math.sqrt(d), dim=1)
            values = value(k)
        else:
            p = draw(kind, d, seed)
            W, U, v = linear(p["W"]), linear(p["U"]), linear(p["v"])
            scores = v(torch.tanh(W(q)[:, None, :] + U(k)[None, :, :])).squeeze(-1)
            w = torch.softmax(scores, dim=1)
            values = k
        return w.numpy(), (w @ values).numpy()


def lookup(words, text, d):
    rows = []
    for t in text.split():
        v = words.get(t, words.get(t.lower()))
        rows.append(np.array(v, dtype=np.float32) if v is not None else np.zeros(d, np.float32))
    return np.stack(rows)


def cases():
    """(tables: name -> {word: numbers}, cases)"""
    rng = np.random.default_rng(10)
    tables, out = {}, []
    vocab = "the cat sat on mat a dog lay rug quick brown fox jumps over lazy".split()
    for d in (1, 5, 50):
        tables[f"d{d}"] = {w: [float(x) for x in rng.normal(0, 1, d).astype(np.float32)]
                           for w in vocab}
        for kind in ("dot", "trainable", "additive"):
            for seed in (None, 0, 7, 2 ** 63 - 1):
                if kind == "dot" and seed is not None:
                    continue
                out.append({"name": f"{kind}_d{d}_seed{seed}", "kind": kind, "seed": seed,
                            "query": "The cat sat on the MAT zebra",
                            "key": "a dog lay on the rug the", "table": f"d{d}"})
    # long texts: 40 x 30 tokens, d 16
    tables["d16"] = {w: [float(x) for x in rng.normal(0, 0.5, 16).astype(np.float32)]
                     for w in vocab}
    q = " ".join(rng.choice(vocab, 40))
    k = " ".join(rng.choice(vocab, 30))
    for kind in ("trainable", "additive"):
        out.append({"name": f"{kind}_long", "kind": kind, "seed": 99, "query": q, "key": k,
                    "table": "d16"})
    for c in out:
        words = tables[c["table"]]
        d = len(next(iter(words.values())))
        seed = DEFAULT_SEED if c["seed"] is None else c["seed"]
        Q, K = lookup(words, c["query"], d), lookup(words, c["key"], d)
        w, ctx = attention(c["kind"], seed, Q, K)
        c["weights"] = w.tolist()
        c["context"] = ctx.tolist()
    return tables, out


def main():
    tables, got = cases()
    if "--check" in sys.argv[1:]:
        with open(OUT) as f:
            stored = json.load(f)["cases"]
        bad = 0
        for a, b in zip(stored, got):
            diff = max(np.abs(np.array(a["weights"]) - np.array(b["weights"])).max(),
                       np.abs(np.array(a["context"]) - np.array(b["context"])).max())
            ok = a["name"] == b["name"] and diff <= 1e-12
            bad += not ok
            print("%-28s %s (max |stored - torch %s| %.2g)" % (a["name"], "ok" if ok else "DIFFERS",
                                                            torch.__version__, diff))
        return 1 if bad or len(stored) != len(got) else 0
    with open(OUT, "w") as f:
        json.dump({"generator": "tests/gen_matrix_fixtures.py", "torch": torch.__version__,
                   "tables": tables, "cases": got}, f, separators=(",", ":"))
        f.write("\n")
    for c in got:
        print("%-28s %d x %d weights" % (c["name"], len(c["weights"]), len(c["weights"][0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
