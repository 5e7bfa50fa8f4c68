"""test_concurrency.py -- one connection predicts in a loop while another trains, deploys and
deletes versions of the same model (WAL mode, two threads, two connections).

Every training run k labels its classes "g<k>_<class>", so a prediction tells which version
answered. Checked for every statement of the predicting connection:
  - all rows of one statement come from one version (attn_predict over 60 rows, attn_probs'
    classes, attn_classify over the table): never a mix of two versions;
  - attn_probs' probabilities sum to 1 and name the classes of that one version;
  - the only errors are SQLITE_BUSY ("database is locked"), none expected in WAL mode;
  - after the writer stops, the next statement answers from the deployed version.
Run from the repository root: /usr/bin/python3 tests/test_concurrency.py
"""
import os
import shutil
import sqlite3
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability as R  # noqa: E402

R.reexec_with_preload()
R.require_extension()
check = R.check

SECONDS = float(os.environ.get("CONCURRENCY_SECONDS", "4"))
tmp = tempfile.mkdtemp(prefix="attn_conc_")
path = os.path.join(tmp, "c.db")
setup = R.connect(path)
setup.execute("PRAGMA journal_mode=WAL")
R.make_table(setup, n=60)
OPTS = '{"epochs":1,"hidden":4,"embed_dim":4,"fc_hidden":4,"vocab_size":50,"progress":false}'


def train_tagged(conn, k):
    conn.execute("SELECT * FROM attn_train('m', 'SELECT text, ''g%d_'' || label FROM docs', ?)"
                 % k, (OPTS,)).fetchall()


train_tagged(setup, 0)
setup.close()

stop = threading.Event()
stats = {"statements": 0, "mixed": [], "errors": [], "busy": 0, "versions_seen": set()}
writer_stats = {"trained": 0, "deployed": 0, "deleted": 0, "errors": [], "busy": 0}


def tag_of(label):
    return label.split("_", 1)[0] if isinstance(label, str) and "_" in label else None


def reader():
    db = R.connect(path)
    db.execute("PRAGMA busy_timeout = 2000")
    texts = [r[0] for r in db.execute("SELECT text FROM docs")]
    i = 0
    while not stop.is_set():
        i += 1
        try:
            kind = i % 3
            if kind == 0:
                labels = [r[0] for r in db.execute("SELECT attn_predict('m', text) FROM docs")]
            elif kind == 1:
                rows = db.execute("SELECT label, probability FROM attn_probs('m', ?)",
                                  (texts[i % len(texts)],)).fetchall()
                labels = [r[0] for r in rows]
                total = sum(r[1] for r in rows)
                if abs(total - 1) > 1e-4 or len(rows) != 3:
                    stats["mixed"].append(f"attn_probs: {len(rows)} rows sum {total}")
            else:
                labels = [r[1] for r in db.execute(
                    "SELECT * FROM attn_classify('m', 'SELECT id, text FROM docs')")]
            tags = {tag_of(x) for x in labels}
            stats["versions_seen"] |= tags
            if len(tags) != 1 or None in tags:
                stats["mixed"].append(f"statement kind {kind}: tags {sorted(map(str, tags))}")
            stats["statements"] += 1
        except sqlite3.OperationalError as e:
            if "locked" in str(e) or "busy" in str(e):
                stats["busy"] += 1
            else:
                stats["errors"].append(str(e))
    db.close()


def writer():
    db = R.connect(path)
    db.execute("PRAGMA busy_timeout = 2000")
    k = 0
    while not stop.is_set():
        k += 1
        try:
            train_tagged(db, k)
            writer_stats["trained"] += 1
            versions = [r[0] for r in db.execute(
                "SELECT version FROM attn_models WHERE name = 'm' ORDER BY version")]
            if k % 3 == 0 and len(versions) > 1:  # redeploy an older version
                db.execute("SELECT attn_deploy('m', ?)", (versions[-2],)).fetchall()
                writer_stats["deployed"] += 1
            if len(versions) > 4:  # delete the oldest versions that are not deployed
                db.execute("DELETE FROM attn_models WHERE name = 'm' AND deployed = 0 AND "
                           "version < ?", (versions[-3],))
                writer_stats["deleted"] += db.execute("SELECT changes()").fetchone()[0]
        except sqlite3.OperationalError as e:
            if "locked" in str(e) or "busy" in str(e):
                writer_stats["busy"] += 1
            else:
                writer_stats["errors"].append(str(e))
        time.sleep(0.005)
    db.close()


threads = [threading.Thread(target=reader), threading.Thread(target=writer)]
for t in threads:
    t.start()
time.sleep(SECONDS)
stop.set()
for t in threads:
    t.join()

print(f"{SECONDS}s: reader ran {stats['statements']} statements, saw {len(stats['versions_seen'])} "
      f"versions; writer trained {writer_stats['trained']}, redeployed {writer_stats['deployed']}, "
      f"deleted {writer_stats['deleted']}")
check(stats["statements"] > 20 and writer_stats["trained"] > 3,
      f"both connections worked concurrently ({stats['statements']} statements, "
      f"{writer_stats['trained']} trainings)")
check(len(stats["versions_seen"]) > 2,
      f"the reader saw several versions: {sorted(stats['versions_seen'])[:10]}")
check(not stats["mixed"], f"every statement answered from one version: "
                          f"{len(stats['mixed'])} mixed {stats['mixed'][:3]}")
check(not stats["errors"], f"reader errors other than busy: {stats['errors'][:3]}")
check(not writer_stats["errors"], f"writer errors other than busy: {writer_stats['errors'][:3]}")
print(f"     busy errors: reader {stats['busy']}, writer {writer_stats['busy']} (documented "
      f"SQLITE_BUSY; WAL readers do not block the writer)")

db = R.connect(path)
deployed = db.execute("SELECT version, labels FROM attn_models WHERE name = 'm' AND deployed = 1"
                      ).fetchall()
got = db.execute("SELECT attn_predict('m', 'goal match team')").fetchone()[0]
check(len(deployed) == 1 and tag_of(got) in deployed[0][1],
      f"after the writer stopped: one deployed version ({deployed[0][0] if deployed else None}), "
      f"and the prediction '{got}' is from it")
db.close()
shutil.rmtree(tmp)
R.finish("test_concurrency")
