"""test_store_speed.py -- the time of an attn_predict statement does not grow with the number of
stored versions, through Debian's Python sqlite3 on a file database.

One model, version 1 deployed; then 999 more versions of it (undeployed copies, as attn_tune
leaves them). For each form -- attn_predict('m', text) and the default model's attn_predict(text)
-- the time of one statement (min over repetitions of a few hundred statements):
  - warm: statements one after another (the lookup of the deployed version is remembered while
    the database is unchanged);
  - cold: an UPDATE of another table before each statement (the database changed: the lookup
    runs again, served by the index of deployed rows);
  - a store made before that index existed (dropped here), warm;
must be within 1.5x at 1,000 versions of the time at 1 version. A timing check: a failing
comparison is measured again (up to 3 times) before it counts, as the machine may be busy.
Run from the repository root: /usr/bin/python3 tests/test_store_speed.py
"""
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability as R  # noqa: E402

check = R.check
LIMIT = 1.5


def statement_us(db, sql, cold, n=300, reps=7):
    best = float("inf")
    for _ in range(reps):
        total = 0.0
        for _ in range(n):
            if cold:
                db.execute("UPDATE counter SET n = n + 1")
            t = time.perf_counter()
            db.execute(sql).fetchone()
            total += time.perf_counter() - t
        best = min(best, total / n)
    return best * 1e6


def add_versions(db, upto):
    db.execute("INSERT INTO attn_models(name, version, created_at, deployed, deployed_seq, "
               "config, labels, metrics, weights) SELECT name, version + s.value, created_at, "
               "0, 0, config, labels, metrics, weights FROM attn_models, (WITH RECURSIVE "
               "s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < ?) "
               "SELECT value FROM s) AS s WHERE name = 'm' AND version = 1", (upto - 1,))


def main():
    R.reexec_with_preload()
    R.require_extension()
    if os.environ.get("ATTNEXT_PRELOAD"):
        print("timing is meaningless under AddressSanitizer: skipped")
        return 77
    tmp = tempfile.mkdtemp(prefix="attn_speed_")
    try:
        forms = {"named": "SELECT attn_predict('m', 'goal team coach')",
                 "default": "SELECT attn_predict('goal team coach')"}
        cases = [(form, cold) for form in forms for cold in (False, True)]
        one, many = {}, {}
        paths = {}
        for label in ("one", "many", "old"):
            path = os.path.join(tmp, label + ".db")
            db = R.connect(path)
            db.execute("PRAGMA journal_mode=WAL")
            R.make_table(db, n=60)
            db.execute("CREATE TABLE counter(n)")
            db.execute("INSERT INTO counter VALUES (0)")
            R.train(db)
            if label != "one":
                add_versions(db, 1000)
            if label == "old":
                db.execute("DROP INDEX IF EXISTS attn_models_deployed")
            n = db.execute("SELECT count(*) FROM attn_models").fetchone()[0]
            assert n == (1 if label == "one" else 1000), n
            db.close()
            paths[label] = path

        def measure(label, form, cold):
            db = R.connect(paths[label])
            db.execute(forms[form]).fetchone()  # parse the model once
            us = statement_us(db, forms[form], cold)
            db.close()
            return us

        for form, cold in cases + [("named", False), ("default", False)]:
            old = (form, cold) in [("named", False), ("default", False)] and \
                (form, cold) in one
            label = "old" if old else "many"
            for attempt in range(3):
                a = measure("one", form, cold)
                b = measure(label, form, cold)
                if b <= LIMIT * a:
                    break
            one[(form, cold)] = a
            what = ("cold" if cold else "warm") + (", store without the index" if old else "")
            check(b <= LIMIT * a,
                  f"attn_predict {form} form, {what}: {a:.1f} us a statement at 1 version, "
                  f"{b:.1f} us at 1,000 ({b / a:.2f}x, limit {LIMIT}x)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("FAILED: %d check(s)" % R.failures if R.failures else "all store speed checks passed")
    return 1 if R.failures else 0


if __name__ == "__main__":
    sys.exit(main())
