#!/usr/bin/env python3
"""test_jobs_json.py -- attn_jobs' losses column, written by ext/ (attn_json_value) since the
jobs left SQLite's JSON functions behind (a host may lack JSON1), is byte for byte what the
JSON1 query it replaced gives on this SQLite: json_group_array of json_object over a job's
epochs, REAL values as SQLite's JSON writes them (1.0, 1.0e+20, 15 significant digits, Inf),
NULL as null, a tune's trial keys, text escaped, no epochs as []. A BLOB figure is refused as
JSON1 refuses it.
The node-side writers (attn_job_commit's json_set, the runner's results) are covered by
tests/test_cluster.py. attn_jobs is a dqlite node's (ext/node/attn_jobs.c): it runs here in the
tests' module that registers attnext as the node does (require_jobs_extension).
"""
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reliability import check, connect, finish, reexec_with_preload, require_extension, \
    require_jobs_extension  # noqa

reexec_with_preload()
require_extension()
require_jobs_extension()

# the query attn_jobs ran when it used SQLite's JSON functions (ext/node/attn_jobs.c), as its
# reference
JSON1_LOSSES = """
SELECT r.job, (SELECT json_group_array(CASE WHEN e.trial > 0 THEN json_object('trial', e.trial,
  'epoch', e.epoch, 'train_loss', e.train_loss, 'val_loss', e.val_loss, 'val_accuracy',
  e.val_accuracy, 'val_f1', e.val_f1) ELSE json_object('epoch', e.epoch, 'train_loss',
  e.train_loss, 'val_loss', e.val_loss, 'val_accuracy', e.val_accuracy, 'val_f1', e.val_f1) END)
  FROM (SELECT * FROM main.attn_job_epochs AS x WHERE x.job = r.job ORDER BY x.trial, x.epoch)
  AS e) FROM main.attn_job_runs AS r ORDER BY r.job"""

SCHEMA = """
CREATE TABLE attn_job_runs(job INTEGER PRIMARY KEY, function TEXT NOT NULL, name TEXT NOT NULL,
  query TEXT, grid TEXT, options TEXT, state TEXT NOT NULL, node INTEGER, address TEXT,
  incarnation TEXT, token TEXT, submitted_at TEXT, started_at TEXT, finished_at TEXT,
  heartbeat_at TEXT, phase TEXT, trial INTEGER, trials INTEGER, epoch INTEGER, epochs INTEGER,
  batch INTEGER, batches INTEGER, train_loss REAL, val_loss REAL, val_accuracy REAL,
  val_f1 REAL, version INTEGER, deployed INTEGER, result TEXT, error TEXT);
CREATE TABLE attn_job_epochs(job INTEGER NOT NULL, trial INTEGER NOT NULL, epoch INTEGER NOT NULL,
  train_loss REAL, val_loss REAL, val_accuracy REAL, val_f1 REAL, lr REAL, seconds REAL,
  PRIMARY KEY(job, trial, epoch));
INSERT INTO attn_job_runs(job, function, name, state) VALUES (1, 'attn_train', 'm', 'done'),
  (2, 'attn_tune', 'm', 'done'), (3, 'attn_fit', 'm', 'failed'), (4, 'attn_fit', 'm', 'done');
INSERT INTO attn_job_epochs VALUES
  (1, 0, 1, 1.2345678901234567, 0.5, 1.0, 0.25, 0.003, 1.5),
  (1, 0, 2, 1e-20, NULL, 1e20, 0.1, NULL, NULL),
  (1, 0, 3, 123456789012345678.0, -0.0, 3, NULL, 1, 1),
  (2, 2, 1, 0.3, 0.30000000000000004, 0.9, 0.8, 1, 1),
  (2, 1, 1, 0.7, 0.6, 0.5, 0.4, 1, 1),
  (2, 1, 2, 1e300 * 1e10, -1e300 * 1e10, 'text "q" \\ ' || char(8, 9, 10, 12, 1), 7, 1, 1),
  (2, -1, 5, 1, 2, 3, 4, 5, 6),
  (4, 'x', 1, 1, 2, 3, 4, 5, 6),
  (4, 0.5, 2, 1.5, 2, 3, 4, 5, 6);
"""

tmp = tempfile.mkdtemp(prefix="attn_jobs_json_")
db = connect(os.path.join(tmp, "t.db"))
db.executescript(SCHEMA)
want = db.execute(JSON1_LOSSES).fetchall()
got = db.execute("SELECT job, losses FROM attn_jobs").fetchall()
check(len(got) == 4, f"attn_jobs has the 4 jobs: {len(got)}")
for (job, w), (gjob, g) in zip(want, got):
    check(job == gjob and w == g, f"job {job}: losses as JSON1 wrote them: {g[:90]}...")
check(got[2][1] == "[]", f"a job without epochs: [] ({got[2][1]!r})")

# a BLOB figure has no JSON form: both refuse it, with JSON1's words
db.execute("INSERT INTO attn_job_epochs VALUES (3, 0, 1, x'00', 1, 1, 1, 1, 1)")
for what, query in (("JSON1", JSON1_LOSSES), ("attn_jobs", "SELECT job, losses FROM attn_jobs")):
    try:
        db.execute(query).fetchall()
        check(False, f"{what}: a BLOB loss is refused")
    except Exception as e:
        check("JSON cannot hold BLOB values" in str(e), f"{what}: a BLOB loss is refused: {e}")

# the same answers from tables without rowid (each job's epochs read by a query of their own)
db.execute("DELETE FROM attn_job_epochs WHERE typeof(val_loss) = 'blob' OR "
           "typeof(train_loss) = 'blob'")
want = db.execute("SELECT job, losses FROM attn_jobs").fetchall()
db.executescript("""
ALTER TABLE attn_job_epochs RENAME TO e_copy;
CREATE TABLE attn_job_epochs(job, trial, epoch, train_loss, val_loss, val_accuracy, val_f1, lr,
  seconds, PRIMARY KEY(job, trial, epoch)) WITHOUT ROWID;
INSERT INTO attn_job_epochs SELECT * FROM e_copy;
""")
got = db.execute("SELECT job, losses FROM attn_jobs").fetchall()
check(got == want, f"attn_job_epochs without rowid: the same losses ({len(got)} jobs)")
db.executescript("DROP TABLE attn_job_epochs; ALTER TABLE e_copy RENAME TO attn_job_epochs;")

# crafted tables of 20,000 jobs and 20,000 epochs without an index: one scan of each (with an
# automatic index), not a scan of the epochs per job (10 s of CPU; 0.9 s, 2.0 s under ASan)
big = connect(os.path.join(tmp, "big.db"))
big.executescript("""
CREATE TABLE attn_job_runs(job, function, name, state, node, phase, trial, trials, epoch, epochs,
  batch, batches, train_loss, val_loss, val_accuracy, val_f1, version, deployed, submitted_at,
  started_at, finished_at, result, error);
CREATE TABLE attn_job_epochs(job, trial, epoch, train_loss, val_loss, val_accuracy, val_f1, lr,
  seconds);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
INSERT INTO attn_job_runs(job, function, name, state) SELECT i, 'attn_fit', 'm', 'done' FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
INSERT INTO attn_job_epochs SELECT i, 0, 1, 0.5, 0.5, 0.5, 0.5, 0.001, 1 FROM n;
""")
# this process's CPU time, not the wall clock: other processes on a busy machine do not count
start = time.process_time()
got = big.execute("SELECT count(*), sum(losses = '[{\"epoch\":1,\"train_loss\":0.5,"
                  "\"val_loss\":0.5,\"val_accuracy\":0.5,\"val_f1\":0.5}]') FROM attn_jobs"
                  ).fetchone()
secs = time.process_time() - start
check(got == (20000, 20000) and secs < 5,
      f"20,000 jobs x 20,000 epochs without an index: {got} in {secs:.2f} s of CPU (< 5 s)")
big.close()

# without attn_job_epochs the column is NULL
db.execute("DROP TABLE attn_job_epochs")
got = db.execute("SELECT count(*), count(losses) FROM attn_jobs").fetchone()
check(got == (4, 0), f"no attn_job_epochs: losses NULL on every row ({got})")
finish("test_jobs_json")
