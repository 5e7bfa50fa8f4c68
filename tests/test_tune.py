"""test_tune.py -- attn_tune (ext/attn_tune.c), the grid search, through Debian's Python sqlite3.

Checks, each printing what it compared:
  - a 2x2 grid gives 4 trials in itertools.product order, 4 new versions of the name (after the
    one that was there), each version's stored config holding its trial's values, the same
    split for every trial (train_rows / val_rows, the options' seed), and the best by the
    default monitor (highest val_f1; of equal ones the lower val_loss, then the first) deployed
    and marked chosen; with "monitor":"val_loss" the lowest val_loss is chosen. The grid (label
    smoothing 0.6 or 0, lr 0.05 or 0.02) on rows where one label in six is not the words' makes
    the two differ: smoothing raises the loss of the trial with the best F1, so a search that
    ignored the monitor, or took the wrong one, picks the wrong trial;
  - the tie rule of the best epoch (nn_monitor_better): two trials with the same val_f1 (or
    val_accuracy), the later with the lower val_loss: the later is chosen, not the first;
  - an interrupt (sqlite3_interrupt from another thread) stops it and leaves the store as it
    was;
  - errors naming the function and the key: a grid value that is not an array, an empty grid,
    an empty array, over 256 trials, a key that is not an option, a bad value, a monitor with an
    unknown figure, a grid that is not an object; none of them stores anything.
Run from the repository root: /usr/bin/python3 tests/test_tune.py
"""
import itertools
import json
import os
import sqlite3
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability as R  # noqa: E402  (check, connect, error_of, the ASan re-exec)

check, connect, error_of = R.check, R.connect, R.error_of
reexec_with_preload = R.reexec_with_preload


WORDS = {"sports": ["match", "goal", "cup", "coach"], "business": ["shares", "profit", "bank"],
         "tech": ["chip", "software", "phone"]}


def main():
    reexec_with_preload()
    db = connect(":memory:")
    db.execute("CREATE TABLE docs(text TEXT, label TEXT)")
    rows, clean = [], []
    for i in range(240):
        label = list(WORDS)[i % 3]
        ws = WORDS[label]
        text = f"{ws[i % len(ws)]} news {ws[(i // 3) % len(ws)]} today {i % 7}"
        clean.append((text, label))
        # one label in six another class's, so that no trial reaches F1 1 and they differ
        rows.append((text, list(WORDS)[(i // 6) % 3] if i % 6 == 0 else label))
    db.executemany("INSERT INTO docs VALUES (?, ?)", rows)
    opts = '{"epochs":3,"embed_dim":8,"fc_hidden":8,"seed":2,"progress":false}'
    db.execute("SELECT attn_fit('news', 'SELECT text, label FROM docs', ?)", (opts,)).fetchone()

    grid = {"label_smoothing": [0.6, 0.0], "lr": [0.05, 0.02]}
    # "deploy": "always": the chosen trial is deployed whatever the version before it scores
    always = json.dumps(dict(json.loads(opts), deploy="always"))
    cur = db.execute("SELECT * FROM attn_tune('news', 'SELECT text, label FROM docs', ?, ?)",
                     (json.dumps(grid), always))
    cols = [d[0] for d in cur.description]
    out = [dict(zip(cols, r)) for r in cur.fetchall()]
    check(cols == ["trial", "config", "best_epoch", "val_loss", "val_accuracy", "val_f1",
                   "seconds", "chosen", "version", "deployed"], f"columns {cols}")
    want = [dict(zip(grid, v)) for v in itertools.product(*grid.values())]
    check([json.loads(r["config"]) for r in out] == want,
          f"4 trials in product order: {[r['config'] for r in out]}")
    check(sorted(r["version"] for r in out) == [2, 3, 4, 5],
          f"4 new versions after version 1: {[r['version'] for r in out]}")
    stored = {v: (json.loads(c), json.loads(m)) for v, c, m in db.execute(
        "SELECT version, config, metrics FROM attn_models WHERE name = 'news' AND version > 1")}
    check(all(all(stored[r["version"]][0][k] == v for k, v in json.loads(r["config"]).items())
              and stored[r["version"]][0]["epochs"] == 3 for r in out),
          "each version's stored config has its trial's values and the options' epochs")
    check(all(abs(stored[r["version"]][1]["val_loss"] - r["val_loss"]) < 1e-12 and
              stored[r["version"]][1]["best_epoch"] == r["best_epoch"] for r in out),
          "each row's figures are its version's metrics")
    splits = {(m["train_rows"], m["val_rows"]) for _, m in stored.values()}
    check(len(splits) == 1, f"the same split for every trial: {splits}")
    # the default monitor is the default recipe's, val_f1: the highest; of equal ones the lower
    # val_loss, then the first
    top = max((r["val_f1"], -r["val_loss"]) for r in out)
    best = next(r for r in out if (r["val_f1"], -r["val_loss"]) == top)
    deployed = db.execute("SELECT version FROM attn_models WHERE name = 'news' AND deployed"
                          ).fetchone()[0]
    check([r["chosen"] for r in out].count(1) == 1 and best["chosen"] == 1 and
          deployed == best["version"] and [r["deployed"] for r in out] == [r["chosen"] for r in out],
          f"default monitor: the highest val_f1 ({top[0]:.4f}, trial "
          f"{best['trial']}) is chosen and deployed (version {deployed}); chosen: "
          f"{[r['chosen'] for r in out]}, val_f1 {[round(r['val_f1'], 4) for r in out]}")

    # "monitor":"val_loss" over the same trials (the same split and seed: the same figures)
    loss_opts = json.dumps(dict(json.loads(always), monitor="val_loss"))
    out2 = db.execute("SELECT trial, val_loss, chosen, version FROM attn_tune('loss', "
                      "'SELECT text, label FROM docs', ?, ?)", (json.dumps(grid), loss_opts)
                      ).fetchall()
    low = min(r[1] for r in out2)
    chosen = [r for r in out2 if r[2]]
    first_low = next(r for r in out2 if r[1] == low)
    check(len(chosen) == 1 and chosen[0] == first_low and db.execute(
        "SELECT version FROM attn_models WHERE name = 'loss' AND deployed").fetchone()[0]
          == chosen[0][3],
          f"monitor val_loss: the lowest val_loss ({low:.4f}, trial {first_low[0]}) chosen and "
          f"deployed; val_loss {[round(r[1], 4) for r in out2]}")
    # what makes the two checks above tell the monitors apart
    check(first_low[0] != best["trial"],
          f"the grid separates the monitors: best val_f1 trial {best['trial']}, lowest "
          f"val_loss trial {first_low[0]} (a grid where one trial is best on both proves "
          f"nothing about the default)")

    # the tie rule: on rows the words tell apart every trial reaches the same F1 and accuracy
    # (1), and label smoothing 0.6 (trial 1) raises the loss over 0 (trial 2): the later trial,
    # with the lower loss, is chosen (as an epoch that ties the best F1 with a lower loss is the
    # best epoch), not the first of equals
    db.execute("CREATE TABLE clean(text TEXT, label TEXT)")
    db.executemany("INSERT INTO clean VALUES (?, ?)", clean)
    for monitor, figure in (("val_f1", 5), ("val_accuracy", 4)):
        tie_opts = json.dumps(dict(json.loads(always), monitor=monitor, lr=0.05))
        out3 = db.execute("SELECT * FROM attn_tune('tie_' || ?, 'SELECT text, label FROM clean', "
                          "'{\"label_smoothing\":[0.6,0.0]}', ?)", (monitor, tie_opts)).fetchall()
        figures = [(r[0], r[figure], round(r[3], 4), r[7]) for r in out3]
        check(len(out3) == 2 and out3[0][figure] == out3[1][figure] and out3[1][3] < out3[0][3]
              and [r[7] for r in out3] == [0, 1],
              f"monitor {monitor}: trials tie on it and trial 2 has the lower val_loss, so trial 2 "
              f"is chosen: (trial, {monitor}, val_loss, chosen) {figures}")

    # interrupt: the store stays as it was
    before = db.execute("SELECT count(*), sum(deployed * version) FROM attn_models").fetchone()
    # long enough that the interrupt at 0.5 s always lands during training (6 trials of 3000 epochs)
    big = '{"epochs":3000,"embed_dim":8,"fc_hidden":8,"patience":100000,"progress":false}'
    timer = threading.Timer(0.5, db.interrupt)
    start = time.time()
    timer.start()
    e = error_of(db, "SELECT * FROM attn_tune('news', 'SELECT text, label FROM docs', "
                     "'{\"hidden\":[4,8,16],\"lr\":[0.001,0.01]}', ?)", (big,))
    timer.cancel()
    after = db.execute("SELECT count(*), sum(deployed * version) FROM attn_models").fetchone()
    check(e == "attn_tune: interrupted" and after == before,
          f"interrupted after {time.time() - start:.2f} s: {e}; store {before} -> {after}")

    errors = [
        ('{"hidden":4}', None, 'attn_tune: grid key "hidden" must be an array of option values, got 4'),
        ("{}", None, "attn_tune: the grid is empty"),
        ('{"hidden":[]}', None, 'attn_tune: grid key "hidden" is an empty array'),
        (json.dumps({"hidden": list(range(1, 18)), "lr": [0.001 * i for i in range(1, 17)]}), None,
         "attn_tune: the grid has more than 256 trials"),
        ('{"hiddn":[4]}', None, 'attn_tune: unknown option "hiddn"'),
        # the search's own keys, misspelt, are offered as attn_tune reads them
        ('{"hidden":[4]}', '{"trails":3}', 'attn_tune: unknown option "trails" (did you mean "trials"?)'),
        ('{"hidden":[4]}', '{"serch":"grid"}', 'attn_tune: unknown option "serch" (did you mean "search"?)'),
        ('{"hidden":[4,0]}', None, 'attn_tune: option "hidden" must be an integer from 1 to 4096'),
        ('{"hidden":[4]}', '{"monitor":"val_auc"}', 'attn_tune: option "monitor" must be'),
        ('[1,2]', None, "attn_tune: the grid must be a JSON object of option -> array of values"),
        ("not json", None, "attn_tune: the grid must be a JSON object of option -> array of values"),
    ]
    before = db.execute("SELECT count(*) FROM attn_models").fetchone()[0]
    for g, o, want in errors:
        e = error_of(db, "SELECT * FROM attn_tune('news', 'SELECT text, label FROM docs', ?, ?)", (g, o))
        check(e is not None and e.startswith(want), f"grid {g[:40]}, options {o}: {e}")
    e = error_of(db, "SELECT * FROM attn_tune('news', 'SELECT text, label FROM docs')")
    check(e == "attn_tune: expected 3 or 4 arguments: attn_tune(name, query, grid[, options])",
          f"two arguments: {e}")
    check(db.execute("SELECT count(*) FROM attn_models").fetchone()[0] == before,
          "no error stored anything")

    # A value repeated in a grid's array counts once: neither search trains one configuration
    # twice (a random search drew distinct combinations of [4, 4, 4, 6]: 4 trials, 3 alike)
    for search in ("random", "grid"):
        o = json.dumps(dict(json.loads(opts), search=search, **({"trials": 10} if search ==
                                                                  "random" else {})))
        got = [c for (c,) in db.execute(
            "SELECT config FROM attn_tune('rep', 'SELECT text, label FROM docs', ?, ?)",
            ('{"hidden":[4,4,4,6],"lr":[0.01,0.01]}', o))]
        check(sorted(got) == ['{"hidden":4,"lr":0.01}', '{"hidden":6,"lr":0.01}'],
              f"{search} search over repeated values: {len(got)} trials {got}")

    # An interrupt in the window between the tune's commit and SQLite's next check of the
    # interrupt (which would say a bare "interrupted"): a progress handler interrupts the
    # connection as soon as a second connection sees the trials committed. The error names
    # attn_tune and the versions it saved.
    path = os.path.join(tempfile.mkdtemp(), "late.db")
    late = connect(path)
    late.execute("PRAGMA journal_mode = WAL")
    late.execute("CREATE TABLE docs(text TEXT, label TEXT)")
    late.executemany("INSERT INTO docs VALUES (?, ?)", rows)
    late.execute("SELECT attn_fit('late', 'SELECT text, label FROM docs', ?)", (opts,)).fetchone()
    watch = connect(path)
    fired = []

    def after_commit():
        if not fired and watch.execute("SELECT count(*) FROM attn_models WHERE name = 'late'"
                                       ).fetchone()[0] == 3:
            fired.append(1)
            late.interrupt()
        return 0
    late.set_progress_handler(after_commit, 1)
    e = error_of(late, "SELECT count(*) FROM attn_tune('late', 'SELECT text, label FROM docs', "
                       "'{\"hidden\":[4,6]}', ?)", (opts,))
    late.set_progress_handler(None, 0)
    saved = watch.execute("SELECT group_concat(version) FROM attn_models WHERE name = 'late'"
                          ).fetchone()[0]
    check(fired and e is not None and e.startswith("attn_tune: interrupted after its 2 trials were "
                                                   "saved (versions 2 to 3)") and saved == "1,2,3",
          f"interrupted once the trials were committed: {e!r}, versions saved {saved}")
    late.close()
    watch.close()

    print("FAILED: %d check(s)" % R.failures if R.failures else "all attn_tune checks passed")
    return 1 if R.failures else 0


if __name__ == "__main__":
    sys.exit(main())
