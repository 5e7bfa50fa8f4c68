-- jobs.sql -- training jobs outside a dqlite node (ext/node/attn_jobs.c): attn_jobs, attn_cancel
-- and attn_job_commit exist only in build/attnext-node, so this script loads the tests' module
-- that registers attnext as the node does (build/tests/attnext_jobs_test.so, no job runner).
-- attn_train, attn_fit and attn_tune train in the caller's statement here, so there is no job;
-- attn_jobs reads the job tables of a copy of a node's database as they were; attn_cancel and
-- attn_job_commit refuse.
.load ./attnext_jobs_test
.headers on
SELECT count(*) AS jobs FROM attn_jobs;
SELECT attn_cancel(1);
SELECT attn_cancel('one');
SELECT attn_job_commit(1, 'token', x'00');
-- a copy of a node's database (the tables the first job of a node creates)
CREATE TABLE attn_job_runs(job INTEGER PRIMARY KEY, function TEXT NOT NULL, name TEXT NOT NULL,
  query TEXT, grid TEXT, options TEXT, state TEXT NOT NULL, node INTEGER, address TEXT,
  incarnation TEXT, token TEXT, submitted_at TEXT, started_at TEXT, finished_at TEXT,
  heartbeat_at TEXT, phase TEXT, trial INTEGER, trials INTEGER, epoch INTEGER, epochs INTEGER,
  batch INTEGER, batches INTEGER, train_loss REAL, val_loss REAL, val_accuracy REAL,
  val_f1 REAL, version INTEGER, deployed INTEGER, result TEXT, error TEXT);
INSERT INTO attn_job_runs(job, function, name, state, node, submitted_at, started_at,
  finished_at, epoch, version, deployed, result)
  VALUES (1, 'attn_fit', 'news', 'done', 2, '2025-01-01T10:00:00.000Z',
          '2025-01-01T10:00:00.500Z', '2025-01-01T10:01:00.500Z', 2, 3, 1,
          '{"name":"news","version":3,"epochs":2}');
INSERT INTO attn_job_runs(job, function, name, state, node, submitted_at, started_at,
  finished_at, error)
  VALUES (2, 'attn_train', 'news', 'failed', 1, '2025-01-01T11:00:00.000Z',
          '2025-01-01T11:00:00.500Z', '2025-01-01T11:00:05.000Z',
          'node 1 (127.0.0.1:9001) is gone (killed or crashed) while the job ran: the model was not saved');
SELECT job, function, name, state, node, epoch, version, deployed, round(seconds, 1) AS seconds,
       losses, error FROM attn_jobs;
CREATE TABLE attn_job_epochs(job INTEGER NOT NULL, trial INTEGER NOT NULL, epoch INTEGER NOT NULL,
  train_loss REAL, val_loss REAL, val_accuracy REAL, val_f1 REAL, lr REAL, seconds REAL,
  PRIMARY KEY(job, trial, epoch));
INSERT INTO attn_job_epochs VALUES (1, 0, 2, 0.5, 0.6, 0.8, 0.79, 0.001, 30),
  (1, 0, 1, 1.0, 0.9, 0.5, 0.45, 0.001, 30);
SELECT job, losses, json_extract(result, '$.version') AS version FROM attn_jobs WHERE job = 1;
SELECT json_object('job', job, 'result', result) AS nested FROM attn_jobs WHERE job = 1;
-- training here is unchanged: the statement trains (rows per epoch), no job is recorded
CREATE TABLE t(a, b);
INSERT INTO t VALUES ('x y', 'p'), ('z w', 'q'), ('x z', 'p'), ('y w', 'q'), ('x', 'p'), ('w', 'q'),
  ('x x', 'p'), ('w w', 'q'), ('y x', 'p'), ('w z', 'q'), ('x y z', 'p'), ('z w y', 'q');
SELECT epoch FROM attn_train('m', 'SELECT a, b FROM t', '{"epochs":2}');
SELECT count(*) AS jobs FROM attn_jobs;
-- a view in its place is not the table attnext writes
DROP TABLE attn_job_epochs;
CREATE VIEW attn_job_epochs AS SELECT 1 AS job;
SELECT count(*) FROM attn_jobs;
