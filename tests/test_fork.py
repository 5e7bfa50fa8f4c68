"""test_fork.py -- fork() beside a running training, through Debian's Python.

A thread of this process trains (attn_fit, two threads of its own, OpenBLAS in every batch) while
the main thread forks 50 times, as a prefork server or multiprocessing's 'fork' start method
does. Each child opens its own connection to another database file and predicts there
(attn_predict, and attn_classify, whose batched products go through OpenBLAS and the engine's
process-wide BLAS setting), then exits. Then the same 100 times while two threads each run one
long statement of predictions in a third database (they allocate through SQLite's allocator
without pause, whose mutex a fork must not leave held: before ext/attnext.c's fork handler, one
of the first children hung in its first sqlite3_open). Checked: every child finishes within its
time limit (none hangs on a lock that a thread of the parent held at the fork; the first that
does ends the count) with the right answers.
Run from the repository root: /usr/bin/python3 tests/test_fork.py
"""
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability as R  # noqa: E402

check = R.check
FORKS = 50
BUSY_FORKS = 100
CHILD_SECONDS = int(os.environ.get("FORK_CHILD_SECONDS", "30"))


def child(path, expected):
    try:
        db = R.connect(path)
        labels = [db.execute("SELECT attn_predict('m', text) FROM docs WHERE id = ?", (i,)
                             ).fetchone()[0] for i in (1, 2, 3)]
        batch = [r[0] for r in db.execute(
            "SELECT label FROM attn_classify('m', 'SELECT id, text FROM docs ORDER BY id')")]
        db.close()
        os._exit(0 if labels == expected[:3] and batch == expected else 3)
    except BaseException:
        os._exit(4)


def fork_children(n, path, expected, pause):
    """Fork n children one after another; each predicts in path. Their outcomes, counted."""
    outcomes = {"ok": 0, "wrong": 0, "hung": 0}
    for i in range(n):
        time.sleep(pause * (i % 7))
        pid = os.fork()
        if pid == 0:
            child(path, expected)
        deadline = time.time() + CHILD_SECONDS
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                code = os.waitstatus_to_exitcode(status)
                outcomes["ok" if code == 0 else "wrong"] += 1
                break
            if time.time() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                outcomes["hung"] += 1
                return outcomes  # one is enough: the next would likely hang too
            time.sleep(0.005)
    return outcomes


def main():
    R.reexec_with_preload()
    R.require_extension()
    warnings.simplefilter("ignore", DeprecationWarning)  # fork() in a process with threads
    tmp = tempfile.mkdtemp(prefix="attn_fork_")
    try:
        other = os.path.join(tmp, "other.db")
        db = R.connect(other)
        R.make_table(db, n=90)
        R.train(db)
        expected = [r[0] for r in db.execute(
            "SELECT label FROM attn_classify('m', 'SELECT id, text FROM docs ORDER BY id')")]
        db.close()

        train_db = R.connect(os.path.join(tmp, "train.db"))
        R.make_table(train_db, n=600)
        result = {}

        def trainer():
            try:
                result["fit"] = train_db.execute(
                    "SELECT attn_fit('t', 'SELECT text, label FROM docs', '{\"epochs\":100000,"
                    "\"patience\":100000,\"hidden\":32,\"embed_dim\":32,\"batch_size\":16,"
                    "\"threads\":2,\"progress\":false}')").fetchone()
            except Exception as e:  # interrupted at the end, as intended
                result["error"] = str(e)

        th = threading.Thread(target=trainer)
        th.start()
        time.sleep(0.5)
        start = time.time()
        outcomes = fork_children(FORKS, other, expected, pause=0.01)
        training = th.is_alive()
        train_db.interrupt()
        th.join()
        check(training, "the training ran during every fork")
        check(outcomes == {"ok": FORKS, "wrong": 0, "hung": 0},
              f"{FORKS} forks beside a training in {time.time() - start:.1f} s: {outcomes} "
              f"(a child that hangs is killed after {CHILD_SECONDS} s)")
        check(result.get("error") == "attn_fit: interrupted",
              f"the training stopped when interrupted: {result}")
        train_db.close()

        # Forks beside predictions that never pause, in a third file (a child must not open
        # a file that its parent's connections have open: their locks would come along held).
        busy = os.path.join(tmp, "busy.db")
        shutil.copyfile(other, busy)
        predicted = [None, None]

        pdbs = [R.connect(busy) for _ in range(2)]

        def predictor(k):  # one long statement each (no return to Python), until interrupted
            try:
                predicted[k] = pdbs[k].execute(
                    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
                    "WHERE i < 100000000) SELECT count(attn_predict('m', 'news ' || i)) "
                    "FROM n").fetchone()[0]
            except Exception as e:  # interrupted at the end, as intended
                predicted[k] = str(e)

        threads = [threading.Thread(target=predictor, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        time.sleep(0.3)
        start = time.time()
        outcomes = fork_children(BUSY_FORKS, other, expected, pause=0.0)
        running = [t.is_alive() for t in threads]
        for pdb in pdbs:
            pdb.interrupt()
        for t in threads:
            t.join()
        for pdb in pdbs:
            pdb.close()
        check(running == [True, True] and predicted == ["interrupted"] * 2,
              f"two threads predicted during every fork: {running}, {predicted}")
        check(outcomes == {"ok": BUSY_FORKS, "wrong": 0, "hung": 0},
              f"{BUSY_FORKS} forks beside predictions in {time.time() - start:.1f} s: "
              f"{outcomes} (a child that hangs is killed after {CHILD_SECONDS} s)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("FAILED: %d check(s)" % R.failures if R.failures else "all fork checks passed")
    return 1 if R.failures else 0


if __name__ == "__main__":
    sys.exit(main())
