"""test_warm_start.py -- the "from" / "from_version" options of attn_train and attn_fit (a warm
start, ext/attn_training.c over engine nn_trainer_create_from), through Debian's Python sqlite3.

Checks, each printing what it compared:
  - a warm start keeps the base model's vocabulary, labels and architecture: the `vocab` and
    `labels` of the safetensors metadata of the new version equal the base's, although the new
    rows bring words the base never saw; its metrics say "warm_start":true;
  - its first epoch's train_loss is lower than a fresh model's on the same rows and options;
  - "from" takes the deployed version, "from_version" another one; the new model is a new version
    of the trained name (also when it differs from the base's name); attn_train takes it too;
  - errors naming the function and the key: a missing model or version, from_version without
    from, a label the base model lacks, an option that changes the architecture, "embeddings"
    with "from", wrong types.
Run from the repository root: /usr/bin/python3 tests/test_warm_start.py
"""
import json
import os
import random
import sqlite3
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability as R  # noqa: E402  (check, connect, error_of, the ASan re-exec)

check, connect, error_of = R.check, R.connect, R.error_of
reexec_with_preload = R.reexec_with_preload


def metadata(db, name, version):
    blob = db.execute("SELECT weights FROM attn_models WHERE name = ? AND version = ?",
                      (name, version)).fetchone()[0]
    n = struct.unpack("<Q", blob[:8])[0]
    return json.loads(blob[8:8 + n])["__metadata__"]


CUES = {
    "world": ["war", "minister", "election", "embassy", "treaty"],
    "sports": ["match", "goal", "coach", "season", "league"],
    "business": ["shares", "profit", "market", "bank", "merger"],
}
NEW_CUES = {"world": ["summit"], "sports": ["striker"], "business": ["dividend"]}
FILLER = ["the", "new", "report", "says", "today", "after", "plan", "week"]


def make_rows(rng, n, new_words=False):
    rows = []
    for _ in range(n):
        label = rng.choice(list(CUES))
        words = [rng.choice(CUES[label])] + [rng.choice(FILLER) for _ in range(rng.randint(2, 5))]
        if new_words:
            words.append(rng.choice(NEW_CUES[label]))
        rng.shuffle(words)
        rows.append((" ".join(words), label))
    return rows


def first_train_loss(db, name, version):
    return db.execute("SELECT train_loss FROM attn_training_log WHERE name = ? AND version = ? "
                      "AND epoch = 1", (name, version)).fetchone()[0]


def main():
    reexec_with_preload()
    rng = random.Random(14)
    db = connect(":memory:")
    db.execute("CREATE TABLE old(text TEXT, label TEXT)")
    db.execute("CREATE TABLE new(text TEXT, label TEXT)")
    db.executemany("INSERT INTO old VALUES (?, ?)", make_rows(rng, 600))
    db.executemany("INSERT INTO new VALUES (?, ?)", make_rows(rng, 300, new_words=True))
    base_opts = '{"epochs":8,"hidden":16,"embed_dim":16,"fc_hidden":16,"seed":5,"progress":false}'
    db.execute("SELECT attn_fit('news', 'SELECT text, label FROM old', ?)", (base_opts,)).fetchone()
    base = metadata(db, "news", 1)

    out = json.loads(db.execute("SELECT attn_fit('news', 'SELECT text, label FROM new', "
                                "'{\"from\":\"news\",\"epochs\":2}')").fetchone()[0])
    check(out["version"] == 2 and out.get("warm_start") is True,
          f"from the deployed version: a new version of 'news' ({out['version']}), warm_start "
          f"{out.get('warm_start')}")
    warm = metadata(db, "news", 2)
    new_words = [w for ws in NEW_CUES.values() for w in ws]
    check(json.loads(warm["vocab"]) == json.loads(base["vocab"]),
          f"the vocabulary is the base's ({len(json.loads(base['vocab']))} tokens), "
          f"none of {new_words} added")
    check(not any(w in json.loads(warm["vocab"]) for w in new_words),
          "the new rows' words are not in it")
    check(json.loads(warm["labels"]) == json.loads(base["labels"]), f"labels kept: {warm['labels']}")
    arch = ["cell", "hidden", "embed_dim", "fc_hidden", "layers", "attention", "bidirectional"]
    wc, bc = json.loads(warm["config"]), json.loads(base["config"])
    check(all(wc[k] == bc[k] for k in arch) and wc["epochs"] == 2,
          f"architecture kept ({', '.join(f'{k}={wc[k]}' for k in arch)}), epochs from the options "
          f"({wc['epochs']})")

    fresh_opts = '{"epochs":2,"hidden":16,"embed_dim":16,"fc_hidden":16,"seed":5,"progress":false}'
    db.execute("SELECT attn_fit('fresh', 'SELECT text, label FROM new', ?)", (fresh_opts,)).fetchone()
    lw, lf = first_train_loss(db, "news", 2), first_train_loss(db, "fresh", 1)
    check(lw < lf, f"first epoch's train_loss: warm start {lw:.4f} < fresh model {lf:.4f}")

    # from_version, another name, attn_train
    out = json.loads(db.execute("SELECT attn_fit('other', 'SELECT text, label FROM new', "
                                "'{\"from\":\"news\",\"from_version\":1,\"epochs\":1}')").fetchone()[0])
    check(out["name"] == "other" and out["version"] == 1,
          f"from_version 1 into another name: 'other' version {out['version']}")
    check(json.loads(metadata(db, "other", 1)["vocab"]) == json.loads(base["vocab"]),
          "its vocabulary is version 1's")
    rows = db.execute("SELECT epoch, best FROM attn_train('news', 'SELECT text, label FROM new', "
                      "'{\"from\":\"news\",\"from_version\":2,\"epochs\":2}')").fetchall()
    check(len(rows) == 2 and db.execute("SELECT max(version) FROM attn_models WHERE name = 'news'")
          .fetchone()[0] == 3, f"attn_train with from: {len(rows)} epochs, version 3 of 'news'")

    errors = [
        ('{"from":"nope"}', "SELECT text, label FROM new",
         "attn_fit: option \"from\": no model named 'nope'"),
        ('{"from":"news","from_version":9}', "SELECT text, label FROM new",
         "attn_fit: option \"from\": model 'news' has no version 9"),
        ('{"from_version":1}', "SELECT text, label FROM new",
         'attn_fit: option "from_version" needs "from" (the name of the model to start from)'),
        ('{"from":"news"}', "SELECT text, 'cooking' FROM new",
         'attn_fit: label "cooking" of row 1 is not one of the base model\'s 3 labels'),
        ('{"from":"news","hidden":32}', "SELECT text, label FROM new",
         'attn_fit: option "hidden" cannot change when training from a model: the base model has '
         '16, got 32'),
        ('{"from":"news","embeddings":"vectors"}', "SELECT text, label FROM new",
         'attn_fit: option "embeddings" cannot be used with "from": the embedding starts as the '
         "base model's"),
        ('{"from":7}', "SELECT text, label FROM new",
         'attn_fit: option "from" must be the name of a model, got 7'),
        ('{"from":"news","from_version":"2"}', "SELECT text, label FROM new",
         'attn_fit: option "from_version" must be an integer, got 2'),
    ]
    before = db.execute("SELECT count(*) FROM attn_models").fetchone()[0]
    for opts, query, want in errors:
        e = error_of(db, "SELECT attn_fit('x', ?, ?)", (query, opts))
        check(e is not None and e.startswith(want), f"{opts}: {e}")
    check(db.execute("SELECT count(*) FROM attn_models").fetchone()[0] == before,
          "no error stored anything")

    print("FAILED: %d check(s)" % R.failures if R.failures else "all warm start checks passed")
    return 1 if R.failures else 0


if __name__ == "__main__":
    sys.exit(main())
