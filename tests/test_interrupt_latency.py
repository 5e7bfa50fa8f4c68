"""test_interrupt_latency.py -- sqlite3_interrupt is answered within 0.1 s in every phase of a
training: reading the rows, the vocabulary, the tables' allocation and initialisation (a model of
2^20 subword buckets: millions of weights drawn), the epochs, the save.

One clean attn_fit is timed first, its phases sampled from attn_status on a second connection
(reading; training before the first batch: the vocabulary and the tables; training with batches
done; saving). Then the same fit runs again and again, interrupted each time a little later
across its whole length; each run prints the phase attn_status showed at the interrupt and how
long the error took to come back. The test prints the worst per phase and fails when one took
0.1 s or more, or when a run did not end with an error that names attn_fit and says
interrupted (or, interrupted too late to matter, with its model saved: either no error, or the
bare 'interrupted' SQLite itself gives when the interrupt lands after attn_fit has returned but
before its statement has ended -- then the model must be there whole and answer). Saving is the exception:
its model's BLOB is written by one SQLite statement, which SQLite does not interrupt midway, and
the file is made and copied before it (a second for this 33 MB model on a slow VM): that phase
is printed and held to SAVE_BOUND only.
It asserts a time: tests/run_all.sh runs it alone (ALONE).
Run from the repository root: /usr/bin/python3 tests/test_interrupt_latency.py
"""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability as R  # noqa: E402

R.reexec_with_preload()
R.require_extension()
check = R.check

BOUND = 0.1
SAVE_BOUND = 1.0
PATH = ":memory:"
OPTIONS = ('{"epochs":2,"subword_buckets":1048576,"embed_dim":8,"hidden":8,"fc_hidden":8,'
           '"batch_size":32,"progress":false}')
FIT = f"SELECT attn_fit('n', 'SELECT text, label FROM docs', '{OPTIONS}')"


# the rows every run trains on, made once: each run's connection gets a copy (under ASan making
# them took a fifth of a second a run, the test's ninth part, with a core idle beside it)
TEMPLATE = R.connect(":memory:")
R.make_table(TEMPLATE, n=3000)


def connection():
    db = R.connect(PATH)
    TEMPLATE.backup(db)
    return db


def phase_now(watch):
    """The training's phase as attn_status shows it from another connection."""
    row = watch.execute("SELECT phase, epoch, batch FROM attn_status").fetchone()
    if row is None:
        return "not started or ended"
    phase, epoch, batch = row
    if phase == "training" and not epoch and not batch:
        return "training: vocabulary and tables"
    if phase == "training":
        return "training: epochs"
    return phase


def run(delay, watch):
    """attn_fit interrupted after `delay` s: (phase at the interrupt, seconds to the error, error)."""
    db = connection()
    done = {}

    def work():
        try:
            db.execute(FIT).fetchall()
            done["error"] = None
        except Exception as e:  # noqa: BLE001 (any error is reported)
            done["error"] = str(e)
        done["at"] = time.monotonic()

    worker = threading.Thread(target=work)
    start = time.monotonic()
    worker.start()
    time.sleep(delay)
    phase = phase_now(watch)
    asked = time.monotonic()
    db.interrupt()
    worker.join(120)
    saved = saved_whole(db)
    db.close()
    return phase, done.get("at", float("inf")) - asked, done.get("error"), asked - start, saved


def saved_whole(db):
    """Whether model 'n' is in the store and predicts: never half there."""
    if db.execute("SELECT count(*) FROM sqlite_schema WHERE name = 'attn_models'").fetchone()[0] == 0:
        return False
    if db.execute("SELECT count(*) FROM attn_models WHERE name = 'n'").fetchone()[0] == 0:
        return False
    return db.execute("SELECT attn_predict('n', 'a text')").fetchone()[0] is not None


watch = R.connect(":memory:")
# a clean run: its length and its phases
db = connection()
seen, stop = [], threading.Event()


def sample():
    while not stop.is_set():
        p = phase_now(watch)
        if not seen or seen[-1][1] != p:
            seen.append((time.monotonic(), p))
        time.sleep(0.002)


sampler = threading.Thread(target=sample)
begin = time.monotonic()
sampler.start()
db.execute(FIT).fetchall()
total = time.monotonic() - begin
stop.set()
sampler.join()
db.close()
print(f"     a clean fit: {total:.2f} s; phases: " +
      ", ".join(f"{p} at {t - begin:.2f} s" for t, p in seen))

worst = {}
delays = [0.005, 0.02] + [total * k / 24 for k in range(1, 24)]
# and more inside each phase the clean run showed: at a quarter, half and three quarters of it;
# one shorter than 20 ms at its middle only (three interrupts within a few ms of each other are
# one moment: the fit has not yet begun, or has just ended, where each such run is a whole fit)
for i, (t, p) in enumerate(seen):
    end = seen[i + 1][0] if i + 1 < len(seen) else begin + total
    parts = (0.25, 0.5, 0.75) if end - t >= 0.02 else (0.5,)
    delays += [t - begin + (end - t) * f for f in parts]
for delay in sorted(delays):
    phase, took, error, at, saved = run(delay, watch)
    ok = (error is not None and error.startswith("attn_fit: ") and error.endswith("interrupted")
          and not saved) \
        or (error is None and phase == "not started or ended") \
        or (error == "interrupted" and saved)
    check(ok, f"interrupted at {at:.3f} s ({phase}): {error!r}"
              f"{', the model saved' if saved else ''}")
    if phase != "not started or ended":
        print(f"     at {at:.3f} s, {phase}: answered in {took * 1000:.1f} ms")
        worst[phase] = max(worst.get(phase, 0.0), took)
print("     the worst per phase: " +
      ", ".join(f"{p} {s * 1000:.1f} ms" for p, s in sorted(worst.items(), key=lambda x: -x[1])))
for phase in ("training: vocabulary and tables", "training: epochs"):
    check(phase in worst, f"a run was interrupted in '{phase}'")
top = max((s for p, s in worst.items() if p != "saving"), default=float("inf"))
check(top < BOUND, f"every phase but saving answered within {BOUND} s: the worst took "
                   f"{top * 1000:.1f} ms")
save = worst.get("saving", 0.0)
check(save < SAVE_BOUND, f"saving answered within {SAVE_BOUND} s: the worst took "
                         f"{save * 1000:.1f} ms")
R.finish("test_interrupt_latency")
