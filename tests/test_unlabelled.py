"""test_unlabelled.py -- unlabelled rows and attn_uncertain as a Python program uses them, in a
file database with a second connection:
  - NULL labels train (counted in the summary), from Python's sqlite3; the same rows and options
    give the same weights at 1 and 2 threads (pretraining and self-training included);
    unlabelled rows change the model;
  - self-training: the summary says how many unlabelled rows trained with the model's labels
    and from which epoch; "self_training": 0 turns it off; its second round is the phase
    `self-training` of attn_status, and an interrupt there stops attn_fit, nothing saved;
  - the pretraining is a phase of attn_status that a second connection sees, and an interrupt
    during it stops attn_fit with "attn_fit: interrupted", nothing saved, within a bounded time;
  - hostile pools: texts of 1 MB with NULL labels (bounded: each row is cut at max_len), a
    query of only NULL labels, a NULL id or text in attn_uncertain's query -- errors naming the
    function and the row;
  - attn_uncertain over a file database while another connection writes: every row once,
    sorted by margin.
No wall-clock bound: the interrupt must end a pretraining planned for 1000 passes.
Run from the repository root: /usr/bin/python3 tests/test_unlabelled.py
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability as R  # noqa: E402

R.reexec_with_preload()
R.require_extension()
check = R.check

SMALL = {"epochs": 2, "hidden": 8, "embed_dim": 8, "fc_hidden": 8, "progress": False}

tmp = tempfile.mkdtemp(prefix="attnext-unlabelled-")
path = os.path.join(tmp, "pool.db")
db = R.connect(path)
db.execute("PRAGMA journal_mode = WAL")
db.execute("CREATE TABLE pool(id INTEGER PRIMARY KEY, text, label)")
rows = R.make_rows(3000, seed=3)
db.executemany("INSERT INTO pool(text, label) VALUES (?, ?)",
               [(t, l if i < 90 else None) for i, (t, l) in enumerate(rows)])


def fit(name, options, query="SELECT text, label FROM pool", conn=db):
    return json.loads(conn.execute("SELECT attn_fit(?, ?, ?)",
                                   (name, query, json.dumps(options))).fetchone()[0])


# ------------------------------------------------------------------ NULL labels train
s = fit("a", dict(SMALL, threads=1, pretrain_epochs=3))
check(s["train_rows"] == 90 and s["unlabelled_rows"] == 2910 and s["pretrain_epochs"] == 3,
      "90 labelled and 2910 unlabelled rows: %s" % {k: s.get(k) for k in
                                                   ("train_rows", "unlabelled_rows",
                                                    "pretrain_epochs")})
fit("b", dict(SMALL, threads=2, pretrain_epochs=3))
fit("c", dict(SMALL, threads=1, pretrain_epochs=3, unlabelled=False))
w = {n: db.execute("SELECT weights FROM attn_models WHERE name = ?", (n,)).fetchone()[0]
     for n in "abc"}


def tensors(blob):  # the safetensors data after its header (the header's config names threads)
    return blob[8 + int.from_bytes(blob[:8], "little"):]


check(tensors(w["a"]) == tensors(w["b"]),
      "the same weights at 1 and 2 threads, unlabelled rows included")
check(tensors(w["a"]) != tensors(w["c"]), "the unlabelled rows change the model")

# ------------------------------------------------------------------ self-training
st = json.loads(db.execute("SELECT metrics FROM attn_models WHERE name = 'a'").fetchone()[0])
rounds = st.get("self_training", {})
check(st.get("sized", {}).get("self_training") == 6 and
      0 < rounds.get("pseudo_labelled_rows", 0) <= 540 and rounds.get("first_epoch") == 3 and
      st["epochs_run"] == 2 + rounds.get("epochs", -1),
      "90 labelled rows, pretraining: up to 6 x 90 rows pseudo-labelled, round 2 from epoch 3: "
      "%s (sized %s)" % (rounds, st.get("sized")))
s = fit("d", dict(SMALL, threads=1, pretrain_epochs=3, self_training=0))
check("self_training" not in s and s["epochs_run"] == 2 and
      "self_training" not in s.get("sized", {}), "\"self_training\": 0: one round: %s" % s)
# attn_train steps an epoch per row: between rows a second connection reads the phase (Python's
# sqlite3 steps one row ahead: when row k is fetched, epoch k + 1 has run)
other = R.connect(path)
steps = json.dumps(dict(SMALL, threads=1, pretrain_epochs=1, epochs=3))
cur = db.execute("SELECT epoch FROM attn_train('steps', 'SELECT text, label FROM pool', ?)",
                 (steps,))
phases = []
for _ in range(4):
    epoch = cur.fetchone()[0]
    phases.append((epoch,) + tuple(other.execute(
        "SELECT phase, epoch, epochs FROM attn_status WHERE name = 'steps'").fetchone()))
cur.close()
check(phases == [(1, "training", 2, 3), (2, "training", 3, 3), (3, "self-training", 4, 6),
                 (4, "self-training", 5, 6)],
      "round 2 is the phase self-training, its epochs after round 1's: %s" % phases)
# a first round that stops early (validation and patience): round 2 shows as self-training from
# its first epoch, with its planned end (the epochs given, after round 1's)
early = json.dumps(dict(SMALL, threads=1, pretrain_epochs=1, self_training=2, validation="random",
                        epochs=40, patience=2, monitor="val_loss"))
cur = db.execute("SELECT epoch FROM attn_train('early', 'SELECT text, label FROM pool', ?)",
                 (early,))
phases = {}
for (epoch,) in cur:
    phases[epoch + 1] = other.execute(
        "SELECT phase, epochs FROM attn_status WHERE name = 'early'").fetchone()
rounds = json.loads(db.execute("SELECT metrics FROM attn_models WHERE name = 'early'")
                    .fetchone()[0]).get("self_training", {})
first = rounds.get("first_epoch", 0)
want = {e: ("training", 40) if e < first else ("self-training", first - 1 + 40)
        for e in phases if phases[e] is not None}
check(1 < first < 41 and all(phases[e] == want[e] for e in want),
      "round 1 stopped early at epoch %d: the phases %s" % (first - 1, phases))
# an interrupt between round 1 and round 2: an error, nothing saved (an interrupt while the
# unlabelled rows are scored: tests/test_self_train.c)
cur = db.execute("SELECT epoch FROM attn_train('cut', 'SELECT text, label FROM pool', ?)",
                 (steps,))
got = [cur.fetchone()[0] for _ in range(2)]  # round 1 has run its 3 epochs
db.interrupt()
try:
    cur.fetchone()
    err = None
except Exception as e:  # noqa: BLE001
    err = str(e)
cur.close()
check(got == [1, 2] and err in ("interrupted", "attn_train: interrupted"),
      "interrupted before round 2: %s %r" % (got, err))
check(db.execute("SELECT count(*) FROM attn_models WHERE name = 'cut'").fetchone()[0] == 0,
      "nothing saved")

# ------------------------------------------------------------------ no options at all
# attn_fit(name, query) reads the unlabelled rows as the option's default says: under
# NN_PRETRAIN_ROWS (5,000) they are counted, not read; from 5,000 on the default pretrains
db.execute("CREATE TABLE wide(text, label)")
wide = R.make_rows(5200, seed=4)
db.executemany("INSERT INTO wide VALUES (?, ?)",
               [(t, l if i < 90 else None) for i, (t, l) in enumerate(wide)])
for name, query, read in (("few", "SELECT text, label FROM pool", False),
                          ("many", "SELECT text, label FROM wide", True)):
    s = json.loads(db.execute("SELECT attn_fit(?, ?)", (name, query)).fetchone()[0])
    sized = s.get("sized", {})
    got = (s.get("unlabelled_read", True), "pretrain_epochs" in s,
           sized.get("subword_buckets"))
    check(got == ((True, True, 0) if read else (False, False, None)),
          "no options, %d unlabelled rows: read %s, pretrained %s, subword_buckets sized %s"
          % (s.get("unlabelled_rows"), *got))

# ------------------------------------------------------------------ the phase and an interrupt
seen, error, ended = R.interrupt_in_phase(
    db, other, "slow", "pretraining", lambda: fit("slow", dict(SMALL, pretrain_epochs=1000)))
check(bool(seen), "a second connection sees the pretraining phase in attn_status: %s" % seen)
batches = seen[0][3] if seen else 0
check(ended, "attn_fit returned after the interrupt")
check(error == "attn_fit: interrupted", "the error: %r" % error)
check(db.execute("SELECT count(*) FROM attn_models WHERE name = 'slow'").fetchone()[0] == 0,
      "nothing saved")
check(batches == 1000 * 3000, "the pretraining's progress counts the rows (90 labelled, 2910 "
      "not) of all 1000 passes: %d" % batches)
after = other.execute("SELECT count(*) FROM attn_status WHERE name = 'slow'").fetchone()[0]
check(after == 0, "the run left attn_status")

# ------------------------------------------------------------------ hostile pools
big = ("word " * 200_000).strip()  # 1 MB
db.execute("CREATE TABLE bigpool(text, label)")
db.executemany("INSERT INTO bigpool VALUES (?, ?)", rows[:60] + [(big, None)] * 20)
s = fit("big", dict(SMALL, pretrain_epochs=1), "SELECT text, label FROM bigpool")
check(s["unlabelled_rows"] == 20, "1 MB unlabelled texts train (cut at max_len): %s"
      % s.get("unlabelled_rows"))
err = R.error_of(db, "SELECT attn_fit('none', 'SELECT text, NULL FROM pool')")
check(err == "attn_fit: the query returned no labelled rows (3000 rows, every label NULL): at "
      "least 2 labels are needed", "only NULL labels: %s" % err)
err = R.error_of(db, "SELECT * FROM attn_uncertain('a', 'SELECT NULL, text FROM pool')")
check(err == "attn_uncertain: row 1 of the query has a NULL id", "NULL id: %s" % err)
err = R.error_of(db, "SELECT * FROM attn_uncertain('a', 'SELECT id, iif(id = 7, NULL, text) "
                     "FROM pool')")
check(err == "attn_uncertain: row 7 of the query has a NULL text", "NULL text: %s" % err)

# ------------------------------------------------------------------ attn_uncertain beside a writer
writer = R.connect(path)
writer.execute("BEGIN")
writer.execute("UPDATE pool SET label = 'sports' WHERE id = 100")
got = db.execute("SELECT id, margin FROM attn_uncertain('a', 'SELECT id, text FROM pool WHERE "
                 "label IS NULL')").fetchall()
writer.execute("COMMIT")
check(len(got) == 2910 and len({g[0] for g in got}) == 2910,
      "every unlabelled row once while another connection writes: %d" % len(got))
check(all(got[i][1] <= got[i + 1][1] for i in range(len(got) - 1)), "sorted by margin")

for c in (db, other, writer):
    c.close()
R.finish("test_unlabelled")
