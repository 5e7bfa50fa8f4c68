"""test_accuracy_options.py -- the accuracy options of training through the extension (Debian's
Python sqlite3), each against its reference:

  - "ensemble": K networks in one model. The weights BLOB holds members.k.* tensors; PyTorch's
    tests/attn_reference.py EnsembleClassifier, loaded from it, gives attn_probs' probabilities
    (the mean of the members' softmax) and attn_weights' weights (the mean of their attention)
    to 1e-5 on texts with known, unknown and repeated words; the members differ (each has its
    own initialisation); attn_embed is the members' contexts side by side (K x D floats).
  - "word_dropout", "embed_dropout", "ensemble": the same data, options and seed give
    bit-identical weights with 1 and 2 threads, and twice in a row; another seed other weights.
  - "word_dropout": with the same seed (the dropout has its own random stream, so the
    initialisation is the same), 0.5 trains other weights than 0; the <UNK> embedding row
    learns only when words are dropped (with 0 it is the same after training at two learning
    rates); and the rate: 340 words seen once each, trained 2 epochs at two learning rates,
    keep the same (never trained) embedding row in both with probability p^2, as each token
    is replaced by <UNK> with probability p on its own (attn_reference.word_dropout's rule).
  - "min_count": the vocabulary holds the tokens seen at least min_count times and no others.
  - "drop_parentheses": false keeps the words in parentheses as tokens (attn_weights), true (the
    lesson) drops them.
  - "label_smoothing": trains, is stored in the model's config, changes the weights; val_loss
    is the smoothed loss, (1 - s)(-log p[y]) + s/C sum_c(-log p[c]), computed here from
    attn_probs on a one-batch validation query; a model saved before the option existed (its config without the key, imported)
    warm-starts without it, and an option given over it applies. The loss itself is checked against PyTorch's
    CrossEntropyLoss(label_smoothing=) by test_golden (gru_uni_linear_smooth) and test_gradcheck.
  - "recipe": "lesson" gives the lesson's options (lr 1e-4, 50 epochs, ...) whatever the
    defaults are, and other keys apply over it; a bad recipe is an error naming the key.
Run from the repository root: /usr/bin/python3 tests/test_accuracy_options.py
"""
import json
import os
import random
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability as R  # noqa: E402

check, connect, error_of = R.check, R.connect, R.error_of

try:
    import numpy as np
    import torch
    from attn_reference import EnsembleClassifier, from_engine_file, st_load, st_save
except ImportError as e:  # pragma: no cover
    print("skipped: PyTorch/numpy not importable by %s (%s)" % (sys.executable, e))
    sys.exit(77)

CUES = {
    "world": ["war", "minister", "election", "embassy", "treaty", "troops"],
    "sports": ["match", "goal", "coach", "season", "league", "striker"],
    "business": ["shares", "profit", "market", "bank", "merger", "dividend"],
}
FILLER = ["new", "report", "says", "today", "after", "plan", "week", "city", "talks"]


def make_rows(rng, n):
    rows = []
    for _ in range(n):
        label = rng.choice(sorted(CUES))
        words = [rng.choice(CUES[label]) for _ in range(rng.randint(1, 2))]
        words += [rng.choice(FILLER) for _ in range(rng.randint(1, 4))]
        rng.shuffle(words)
        if rng.random() < 0.3:
            words.append("(%s)" % rng.choice(["reuters", "ap", "afp"]))
        rows.append((" ".join(words), label))
    return rows


def weights(db, name):
    return db.execute("SELECT weights FROM attn_models WHERE name = ? AND deployed",
                      (name,)).fetchone()[0]


def metadata(blob):
    n = struct.unpack("<Q", blob[:8])[0]
    return json.loads(blob[8:8 + n])["__metadata__"]


def fit(db, name, options):
    return json.loads(db.execute("SELECT attn_fit(?, 'SELECT text, label FROM rows', ?)",
                                 (name, json.dumps(options))).fetchone()[0])


def rare_word(i):
    """A word of letters only, one per i: zq + i in base 26."""
    out = "zq"
    for _ in range(4):
        out += "abcdefghijklmnopqrstuvwxyz"[i % 26]
        i //= 26
    return out


def check_word_dropout_rate(db, small):
    """word_dropout replaces each training token by <UNK> with probability p: a word seen once
    per epoch is never trained in E epochs with probability p^E, and its embedding row is then
    its initialisation, the same whatever the learning rate (the dropout's stream does not
    depend on it). A dropout that did nothing, dropped at another rate, or replaced tokens by
    something other than <UNK>, fails one of these checks."""
    rng = random.Random(3)
    db.execute("CREATE TABLE rare(text, label)")
    db.executemany("INSERT INTO rare VALUES (?, ?)",
                   [("%s %s" % (rng.choice(CUES[sorted(CUES)[i % 3]]), rare_word(i)),
                     sorted(CUES)[i % 3]) for i in range(400)])

    def rows(p, lr):
        name = "rare_%g_%g" % (p, lr)
        db.execute("SELECT attn_fit(?, 'SELECT text, label FROM rare', ?)",
                   (name, json.dumps(dict(small, word_dropout=p, lr=lr, epochs=2))))
        return st_load(weights(db, name))[0]["embeddings.weight"]

    unchanged = {}
    for p in (0.0, 0.5):
        a, b = rows(p, 0.01), rows(p, 0.003)
        unchanged[p] = [bool(np.array_equal(a[i], b[i])) for i in range(a.shape[0])]
    unk = 1
    check(unchanged[0.0][unk] and not unchanged[0.5][unk],
          "word_dropout: the <UNK> row is trained with 0.5 and never with 0 (the same at two "
          "learning rates: %s with 0, %s with 0.5)" % (unchanged[0.0][unk], unchanged[0.5][unk]))
    # the words trained with 0 (every word of the training rows but a few), and of them the ones
    # never trained with 0.5
    trained = [i for i in range(2, len(unchanged[0.0])) if not unchanged[0.0][i]]
    never = sum(unchanged[0.5][i] for i in trained)
    frac, want = never / len(trained), 0.5 ** 2
    sd = (want * (1 - want) / len(trained)) ** 0.5
    check(len(trained) >= 300 and abs(frac - want) <= 0.08,
          "word_dropout 0.5, 2 epochs: %d of %d words never trained = %.3f, expected "
          "p^2 = %.3f +- 0.08 (%.1f standard deviations)"
          % (never, len(trained), frac, want, abs(frac - want) / sd))


def main():
    R.reexec_with_preload()
    R.require_extension()
    rng = random.Random(20)
    db = connect(":memory:")
    db.execute("CREATE TABLE rows(text, label)")
    db.executemany("INSERT INTO rows VALUES (?, ?)", make_rows(rng, 600))
    small = {"cell": "gru", "bidirectional": True, "hidden": 8, "embed_dim": 12,
             "fc_hidden": 6, "epochs": 3, "lr": 0.01, "progress": False, "seed": 5,
             "deploy": "always"}  # every fit under a reused name replaces the deployed version

    # ---- ensemble against PyTorch
    fit(db, "ens", dict(small, ensemble=3, embed_dropout=0.3, word_dropout=0.2))
    blob = weights(db, "ens")
    tensors, meta = st_load(blob)
    config = json.loads(meta["config"])
    check(config.get("ensemble") == 3, "ensemble: the stored config says 3 members (%s)"
          % config.get("ensemble"))
    names = sorted(tensors)
    check(all(n.startswith("members.") for n in names) and
          {n.split(".")[1] for n in names} == {"0", "1", "2"},
          "ensemble: every tensor is members.k.*, k in 0..2 (%d tensors)" % len(names))
    e0, e1 = tensors["members.0.embeddings.weight"], tensors["members.1.embeddings.weight"]
    check(e0.shape == e1.shape and not np.array_equal(e0, e1),
          "ensemble: members 0 and 1 have their own embeddings")
    model, vocab, labels, _ = from_engine_file(blob)
    check(isinstance(model, EnsembleClassifier), "ensemble: PyTorch loads an EnsembleClassifier")
    model.eval()
    index = {t: i for i, t in enumerate(vocab)}
    texts = ["war minister talks today", "striker goal match", "profit bank merger (reuters)",
             "zzz unknown words", "goal goal goal goal", "shares"]
    worst_p = worst_a = 0.0
    for text in texts:
        toks = [r[0] for r in db.execute("SELECT token FROM attn_weights('ens', ?) ORDER BY "
                                         "position", (text,))]
        ids = [index.get(t, 1) for t in toks]
        with torch.no_grad():
            logits, attn = model(torch.tensor([ids]), torch.tensor([len(ids)]))
        ref_p = torch.softmax(logits, 1)[0].numpy()
        got_p = dict(db.execute("SELECT label, probability FROM attn_probs('ens', ?)", (text,)))
        worst_p = max(worst_p, max(abs(got_p[labels[c]] - ref_p[c]) for c in range(len(labels))))
        got_a = [r[0] for r in db.execute("SELECT weight FROM attn_weights('ens', ?) ORDER BY "
                                          "position", (text,))]
        worst_a = max(worst_a, float(np.abs(np.array(got_a) - attn[0, :len(ids)].numpy()).max()))
    check(worst_p < 1e-5, "ensemble: attn_probs = PyTorch's mean of the members' softmax "
          "(worst |difference| %.2g over %d texts)" % (worst_p, len(texts)))
    check(worst_a < 1e-5, "ensemble: attn_weights = PyTorch's mean attention (worst %.2g)"
          % worst_a)
    emb = db.execute("SELECT attn_embed('ens', 'war minister')").fetchone()[0]
    check(len(emb) == 4 * 3 * 16, "ensemble: attn_embed holds 3 members x 16 floats (%d bytes)"
          % len(emb))
    label = db.execute("SELECT attn_predict('ens', 'striker goal match')").fetchone()[0]
    check(label == "sports", "ensemble: attn_predict answers 'sports' (%s)" % label)

    # ---- subwords against PyTorch (the n-gram hashing included), with non-ASCII words
    db.execute("CREATE TABLE uni(text, label)")
    uni_rows = [(t.replace("war", "krieg").replace("goal", "tör").replace("bank", "bänk"), l)
                for t, l in make_rows(rng, 400)]
    db.executemany("INSERT INTO uni VALUES (?, ?)", uni_rows)
    for name, extra in (("sub", {}), ("subens", {"ensemble": 2, "embed_dropout": 0.2})):
        opts = dict(small, subword_buckets=97, subword_min=2, subword_max=4, unicode=True, **extra)
        db.execute("SELECT attn_fit(?, 'SELECT text, label FROM uni', ?)",
                   (name, json.dumps(opts))).fetchone()
        blob = weights(db, name)
        tensors, _ = st_load(blob)
        subs = [k for k in tensors if k.endswith("subwords.weight")]
        check(len(subs) == opts.get("ensemble", 1) and all(tensors[k].shape == (97, 12)
                                                            for k in subs),
              "%s: the BLOB holds subwords.weight (97, 12) per network (%s)" % (name, subs))
        model, vocab, labels, _ = from_engine_file(blob)
        model.eval()
        index = {t: i for i, t in enumerate(vocab)}
        worst_p = worst_a = 0.0
        for text in ["krieg minister tör", "tör tör striker", "bänk profit", "unseenword tör",
                     "ä", ""]:
            toks = [r[0] for r in db.execute("SELECT token FROM attn_weights(?, ?) ORDER BY "
                                             "position", (name, text))]
            ids = [index.get(t, 1) for t in toks] or [1]
            with torch.no_grad():
                logits, attn = model(torch.tensor([ids]), torch.tensor([len(ids)]))
            ref = torch.softmax(logits, 1)[0].numpy()
            got = dict(db.execute("SELECT label, probability FROM attn_probs(?, ?)", (name, text)))
            worst_p = max(worst_p, max(abs(got[labels[c]] - ref[c]) for c in range(len(labels))))
            got_a = [r[0] for r in db.execute("SELECT weight FROM attn_weights(?, ?) ORDER BY "
                                              "position", (name, text))]
            if got_a:
                worst_a = max(worst_a, float(np.abs(np.array(got_a) -
                                                    attn[0, :len(got_a)].numpy()).max()))
        check(worst_p < 1e-5 and worst_a < 1e-5, "%s: attn_probs and attn_weights = PyTorch's "
              "with the same subword hashing (worst %.2g, %.2g)" % (name, worst_p, worst_a))
    err = error_of(db, "SELECT attn_fit('x', 'SELECT text, label FROM rows', "
                       "'{\"subword_buckets\":10,\"char_level\":true}')")
    check(err is not None and "subword_buckets" in err and "char_level" in err,
          "subwords with char_level: refused (%s)" % err)
    err = error_of(db, "SELECT attn_fit('x', 'SELECT text, label FROM rows', "
                       "'{\"subword_buckets\":10,\"subword_min\":5,\"subword_max\":4}')")
    check(err is not None and "subword_min" in err, "subword_min > subword_max: refused (%s)" % err)

    # ---- determinism of the new randomness: threads, repeats, seeds
    opts = dict(small, ensemble=2, embed_dropout=0.4, word_dropout=0.3, dropout=0.3,
                subword_buckets=50)
    fit(db, "d1", dict(opts, threads=1))
    fit(db, "d2", dict(opts, threads=2))
    fit(db, "d3", dict(opts, threads=2))
    fit(db, "d4", dict(opts, threads=2, seed=6))
    w1, w2, w3, w4 = (st_load(weights(db, n))[0] for n in ("d1", "d2", "d3", "d4"))
    same = lambda a, b: all(np.array_equal(a[k], b[k]) for k in a)  # noqa: E731
    check(same(w1, w2), "dropouts + ensemble: 1 and 2 threads give bit-identical weights")
    check(same(w2, w3), "dropouts + ensemble: the same run twice gives bit-identical weights")
    check(not same(w2, w4), "dropouts + ensemble: another seed gives other weights")
    wd = fit(db, "wd", dict(small, word_dropout=0.5, epochs=2))
    nw = fit(db, "nw", dict(small, word_dropout=0, epochs=2))
    check(wd["version"] == 1 and nw["version"] == 1, "word_dropout 0.5 trains")
    check(not same(st_load(weights(db, "wd"))[0], st_load(weights(db, "nw"))[0]),
          "word_dropout 0.5 trains other weights than 0 with the same seed")
    check_word_dropout_rate(db, small)

    # ---- label_smoothing
    l0 = fit(db, "ls0", dict(small, label_smoothing=0, epochs=2))
    l1 = fit(db, "ls1", dict(small, label_smoothing=0.2, epochs=2))
    c1 = json.loads(db.execute("SELECT config FROM attn_models WHERE name = 'ls1'").fetchone()[0])
    check(c1.get("label_smoothing") == 0.2, "label_smoothing 0.2 is in the stored config (%r)"
          % c1.get("label_smoothing"))
    w0, w1 = st_load(weights(db, "ls0"))[0], st_load(weights(db, "ls1"))[0]
    check(not all(np.array_equal(w0[k], w1[k]) for k in w0),
          "label_smoothing 0.2 trains other weights than 0")
    check(l0["version"] == 1 and l1["version"] == 1,
          "label_smoothing 0 and 0.2 train")
    # val_loss is the smoothed loss over the validation rows (one batch: the lesson's loop
    # averages the batches' means, so the batch is set, not sized to the rows)
    vq = "SELECT text, label FROM rows WHERE rowid % 15 = 0"
    lv = fit(db, "lsv", dict(small, label_smoothing=0.3, epochs=1, validation="query",
                             validation_query=vq, batch_size=64))
    probs = {}
    nll = []
    for text, label in db.execute(vq).fetchall():
        probs = dict(db.execute("SELECT label, probability FROM attn_probs('lsv', ?)", (text,)))
        logp = {k: -np.log(v) for k, v in probs.items()}
        nll.append(0.7 * logp[label] + 0.3 / len(logp) * sum(logp.values()))
    want = float(np.mean(nll))
    check(len(nll) <= 64 and abs(lv["val_loss"] - want) <= 1e-4 * max(1.0, want),
          "label_smoothing 0.3: val_loss %.6f is the smoothed loss %.6f of %d rows"
          % (lv["val_loss"], want, len(nll)))
    # a model saved before label_smoothing existed: its config without the key
    tensors, meta = st_load(weights(db, "ls1"))
    old_config = json.loads(meta["config"])
    del old_config["label_smoothing"]
    meta = dict(meta, config=json.dumps(old_config))
    db.execute("SELECT attn_import('old', ?)", (st_save(tensors, meta),)).fetchone()
    for name, extra, want in (("warm", {}, 0), ("warm2", {"label_smoothing": 0.2}, 0.2)):
        fit(db, name, dict({"from": "old", "epochs": 1, "progress": False}, **extra))
        got = json.loads(db.execute("SELECT config FROM attn_models WHERE name = ?",
                                    (name,)).fetchone()[0]).get("label_smoothing")
        check(got == want, "warm start from a model saved without label_smoothing, options %s: "
              "label_smoothing %r (want %r)" % (extra, got, want))

    # ---- min_count: the vocabulary
    db.execute("CREATE TABLE counts(text, label)")
    db.executemany("INSERT INTO counts VALUES (?, ?)",
                   [("alpha beta gamma", "a"), ("alpha beta", "b"), ("alpha delta", "a"),
                    ("alpha epsilon", "b")] * 1 + [("zeta", "a"), ("zeta", "b")])
    for min_count, want in ((1, {"alpha", "beta", "gamma", "delta", "epsilon", "zeta"}),
                            (2, {"alpha", "beta", "zeta"}), (4, {"alpha"}), (100, set())):
        o = dict(small, min_count=min_count, epochs=1, val_fraction=0.3)
        db.execute("SELECT attn_fit('mc', 'SELECT text, label FROM counts', ?)",
                   (json.dumps(o),)).fetchone()
        vocab = json.loads(metadata(weights(db, "mc"))["vocab"])[2:]
        # the split holds out 30% of the rows: count only the training rows' tokens
        check(set(vocab) <= want, "min_count %d: the vocabulary %s holds only tokens seen at "
              "least %d times in the training rows" % (min_count, sorted(vocab), min_count))
    db.execute("CREATE TABLE counts2(text, label)")
    db.executemany("INSERT INTO counts2 VALUES (?, ?)",
                   [("common rare%d" % i, "ab"[i % 2]) for i in range(40)])
    for min_count, present in ((1, True), (2, False)):
        db.execute("SELECT attn_fit('mc2', 'SELECT text, label FROM counts2', ?)",
                   (json.dumps(dict(small, min_count=min_count, epochs=1)),)).fetchone()
        vocab = json.loads(metadata(weights(db, "mc2"))["vocab"])
        check(("common" in vocab) and (any(v.startswith("rare") for v in vocab) == present),
              "min_count %d: 'common' is in the vocabulary, the words seen once %s" %
              (min_count, "are too" if present else "are not"))

    # ---- drop_parentheses
    for drop, want in ((True, ["war", "talks"]), (False, ["war", "talks", "reuters"])):
        db.execute("SELECT attn_fit('par', 'SELECT text, label FROM rows', ?)",
                   (json.dumps(dict(small, drop_parentheses=drop, epochs=1)),)).fetchone()
        toks = [r[0] for r in db.execute(
            "SELECT token FROM attn_weights('par', 'war talks (Reuters)') ORDER BY position")]
        check(toks == want, "drop_parentheses %s: tokens %s (want %s)" % (drop, toks, want))

    # ---- recipe
    db.execute("SELECT attn_fit('les', 'SELECT text, label FROM rows', "
               "'{\"recipe\":\"lesson\",\"epochs\":1,\"progress\":false}')").fetchone()
    c = json.loads(db.execute("SELECT config FROM attn_models WHERE name = 'les'").fetchone()[0])
    lesson = {"recipe": "lesson", "cell": "rnn", "hidden": 128, "embed_dim": 100,
              "fc_hidden": 100, "dropout": 0.1, "lr": 0.0001, "vocab_size": 5000, "patience": 10,
              "lr_patience": 3, "lr_factor": 0.1, "class_weights": True, "monitor": "val_loss",
              "stopwords": True, "drop_parentheses": True, "min_count": 1, "ensemble": 1,
              "embed_dropout": 0, "word_dropout": 0, "bidirectional": False, "epochs": 1,
              "label_smoothing": 0}
    bad = {k: (c.get(k), v) for k, v in lesson.items() if c.get(k) != v}
    check(not bad, "recipe lesson: the stored config is the lesson's, epochs 1 over it (%s)"
          % (bad or "all %d keys" % len(lesson)))
    err = error_of(db, "SELECT attn_fit('x', 'SELECT text, label FROM rows', "
                       "'{\"recipe\":\"fast\"}')")
    check(err == 'attn_fit: option "recipe" must be "default" or "lesson", got "fast"',
          "recipe: a bad value is an error naming the key (%s)" % err)
    for key, value in (("ensemble", 9), ("ensemble", 0), ("word_dropout", 1), ("embed_dropout",
                       -0.1), ("min_count", 0), ("drop_parentheses", "yes"),
                       ("label_smoothing", 1.5), ("label_smoothing", -0.1),
                       ("label_smoothing", "0.1")):
        err = error_of(db, "SELECT attn_fit('x', 'SELECT text, label FROM rows', ?)",
                       (json.dumps({key: value}),))
        check(err is not None and err.startswith('attn_fit: option "%s" must be' % key),
              "%s = %r is refused: %s" % (key, value, err))
    R.finish("test_accuracy_options")


if __name__ == "__main__":
    main()
