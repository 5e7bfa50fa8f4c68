#!/usr/bin/env python3
"""test_json_subtype.py -- every value attnext returns as JSON text carries SQLite's JSON subtype
('J', as json() and json_object() give theirs), so that json_object('r', attn_fit(...)) nests an
object instead of an escaped string.

Every function of the registration tables (ext/attnext.c, and the dqlite node's own,
ext/node/attn_jobs.c) is called here (the test fails when a new one is not), in the tests' module
that registers attnext as the node does (require_jobs_extension); each text value it returns that is a JSON object or array is put through
json_object('v', value) and must come back as an object or array, not a string. Before the fix,
attn_fit's summary and attn_tune's config column came back quoted.
"""
import os
import re
import sqlite3
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reliability import TINY, check, connect, finish, make_table, reexec_with_preload, \
    require_extension, require_jobs_extension  # noqa: E402

reexec_with_preload()
require_extension()
require_jobs_extension()

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TQ = "'SELECT text, label FROM docs'"
IDQ = "'SELECT id, text FROM docs'"
OPTS = "'" + TINY + "'"

tmp = tempfile.mkdtemp()
vec_path = os.path.join(tmp, "vec.txt")
with open(vec_path, "w") as f:
    f.write("goal 0.1 0.2\nchip 0.3 -0.1\nmatch 0.0 0.5\n")

# One call per registered function: (name, query over its value(s) with {v} for a column or
# None for a scalar query whose only column is the value).
CALLS = [
    ("attn_version", "SELECT attn_version()"),
    ("attn_fit", f"SELECT attn_fit('m', {TQ}, {OPTS})"),
    ("attn_train", f"SELECT {{v}} FROM attn_train('m', {TQ}, {OPTS})"),
    ("attn_tune", "SELECT {v} FROM attn_tune('t', " + TQ + ", '{\"hidden\":[4,5]}', " + OPTS + ")"),
    ("attn_deploy", "SELECT attn_deploy('m', 1)"),
    ("attn_import", "SELECT attn_import('imp', (SELECT weights FROM attn_models WHERE name = 'm' "
                    "AND version = 1))"),
    ("attn_predict", "SELECT attn_predict('m', 'goal match team')"),
    ("attn_predict", "SELECT attn_predict('goal match team')"),
    ("attn_probs", "SELECT {v} FROM attn_probs('m', 'goal match team')"),
    ("attn_weights", "SELECT {v} FROM attn_weights('m', 'goal match team')"),
    ("attn_explain", "SELECT {v} FROM attn_explain('m', 'goal match team')"),
    ("attn_cache_limit", "SELECT attn_cache_limit()"),
    ("attn_cache_limit", "SELECT attn_cache_limit(1 << 28)"),
    ("attn_classify", f"SELECT {{v}} FROM attn_classify('m', {IDQ})"),
    ("attn_uncertain", f"SELECT {{v}} FROM attn_uncertain('m', {IDQ})"),
    ("attn_evaluate", f"SELECT {{v}} FROM attn_evaluate('m', {TQ})"),
    ("attn_confusion", f"SELECT {{v}} FROM attn_confusion('m', {TQ})"),
    ("attn_metrics", f"SELECT {{v}} FROM attn_metrics('m', {TQ})"),
    ("attn_heatmap_svg", "SELECT attn_heatmap_svg('m', 'goal match')"),
    ("attn_heatmap_svg", "SELECT attn_heatmap_svg('m', 'goal match', 'occlusion')"),
    ("attn_heatmap_query_svg", "SELECT attn_heatmap_query_svg('m', 'SELECT text FROM docs LIMIT 2')"),
    ("attn_heatmap_query_svg", "SELECT attn_heatmap_query_svg('m', 'SELECT text FROM docs LIMIT 2', "
                           "'occlusion')"),
    ("attn_training_svg", "SELECT attn_training_svg('m')"),
    ("attn_training_svg", "SELECT attn_training_svg('m', 1)"),
    ("attn_vectors_load", f"SELECT {{v}} FROM attn_vectors_load('{vec_path}')"),
    ("attn_matrix", "SELECT {v} FROM attn_matrix('goal match', 'chip', 'vec')"),
    ("attn_matrix_svg", "SELECT attn_matrix_svg('goal match', 'chip', 'vec')"),
    ("attn_matrix_svg", "SELECT attn_matrix_svg('goal match', 'chip', 'vec', 'dot')"),
    ("attn_curve", f"SELECT {{v}} FROM attn_curve('m', {TQ})"),
    ("attn_curve_svg", f"SELECT attn_curve_svg('m', {TQ})"),
    ("attn_embed", "SELECT attn_embed('m', 'goal match team')"),
    ("attn_prune", "SELECT attn_prune('t', 1)"),
    ("attn_status", "SELECT {v} FROM attn_status"),
    # the job tables of a copy of a dqlite node's database (made below): losses and result
    ("attn_jobs", "SELECT {v} FROM attn_jobs"),
]
# Functions that only act in a dqlite node where it runs jobs (tests/test_cluster.py): here,
# with no job runner, they refuse, with these messages, and return no value at all.
REFUSED = [
    ("attn_cancel", "SELECT attn_cancel(1)", "attn_cancel: no jobs here"),
    ("attn_job_commit", "SELECT attn_job_commit(1, 'token', x'00')",
     "attn_job_commit: a dqlite node's job thread commits its result with it"),
]

registered = set()
for table in (("ext", "attnext.c"), ("ext", "node", "attn_jobs.c")):
    with open(os.path.join(ROOT, *table)) as f:
        registered |= set(re.findall(r'^\s*\{"(attn_\w+)",', f.read(), re.M))
check({"attn_predict", "attn_jobs", "attn_cancel"} <= registered,
      f"the registration tables read: {len(registered)} functions")
called = {name for name, _ in CALLS} | {name for name, _, _ in REFUSED}
check(registered <= called, "every registered function is called here: missing "
      + (", ".join(sorted(registered - called)) or "none"))

db = connect(os.path.join(tmp, "t.db"))
make_table(db)
db.execute(f"CREATE TABLE vec AS SELECT * FROM attn_vectors_load('{vec_path}')")
db.execute(f"SELECT * FROM attn_train('m', {TQ}, {OPTS})").fetchall()  # version 1
# a finished job as a node records it (the tables of ATTN_JOB_SCHEMA, ext/node/attn_jobs.h)
db.executescript("""
CREATE TABLE attn_job_runs(job INTEGER PRIMARY KEY, function TEXT NOT NULL, name TEXT NOT NULL,
  query TEXT, grid TEXT, options TEXT, state TEXT NOT NULL, node INTEGER, address TEXT,
  incarnation TEXT, token TEXT, submitted_at TEXT, started_at TEXT, finished_at TEXT,
  heartbeat_at TEXT, phase TEXT, trial INTEGER, trials INTEGER, epoch INTEGER, epochs INTEGER,
  batch INTEGER, batches INTEGER, train_loss REAL, val_loss REAL, val_accuracy REAL,
  val_f1 REAL, version INTEGER, deployed INTEGER, result TEXT, error TEXT);
CREATE TABLE attn_job_epochs(job INTEGER NOT NULL, trial INTEGER NOT NULL, epoch INTEGER NOT NULL,
  train_loss REAL, val_loss REAL, val_accuracy REAL, val_f1 REAL, lr REAL, seconds REAL,
  PRIMARY KEY(job, trial, epoch));
INSERT INTO attn_job_runs(job, function, name, state, node, submitted_at, epoch, epochs, version,
  result) VALUES (1, 'attn_fit', 'm', 'done', 1, '2025-01-01T10:00:00.000Z', 1, 1, 1,
  '{"name":"m","version":1,"epochs":1}');
INSERT INTO attn_job_epochs VALUES (1, 0, 1, 1.0, 0.9, 0.5, 0.45, 0.001, 3);
""")
for name, query, message in REFUSED:
    try:
        got = db.execute(query).fetchall()
        check(False, f"{name} outside a node: {got!r}, not refused")
    except sqlite3.Error as e:
        check(str(e).startswith(message), f"{name} outside a node refuses: {e}")


def is_json_container(value):
    if not isinstance(value, str) or not value[:1] in ("{", "["):
        return False
    return db.execute("SELECT json_valid(?)", (value,)).fetchone()[0] == 1


json_values = 0
for name, query in CALLS:
    if "{v}" in query:
        cols = [d[0] for d in db.execute(query.replace("{v}", "*") + " LIMIT 1").description]
    else:
        cols = [None]
    for col in cols:
        q = query.replace("{v}", f"\"{col}\"") if col else query
        try:
            values = [r[0] for r in db.execute(q).fetchall()]
        except sqlite3.Error as e:
            check(False, f"{name}: {q}: {e}")
            continue
        if not any(is_json_container(v) for v in values):
            continue
        json_values += 1
        expr, rest = (q[len("SELECT "):].split(" FROM ", 1)[0], q[q.index(" FROM "):]) if col \
            else (q[len("SELECT "):], "")
        wrapped = f"SELECT json_type(json_object('v', {expr}), '$.v'){rest}"
        types = {r[0] for r in db.execute(wrapped).fetchall()}
        check(types <= {"object", "array"},
              f"{name}{'.' + col if col else ''}: JSON value nested as {sorted(types)} by json_object")

check(json_values >= 4, f"JSON-returning values found: {json_values} (attn_fit, attn_tune.config, "
      "attn_jobs.losses, attn_jobs.result)")
# the documented use: the summary of a training inside a larger JSON document
doc = db.execute(f"SELECT json_object('run', 'nightly', 'result', attn_fit('m', {TQ}, {OPTS}))"
                 ).fetchone()[0]
check(doc.startswith('{"run":"nightly","result":{"name":"m","version":'),
      "json_object('run', 'nightly', 'result', attn_fit(...)) = " + doc[:60] + "...")
# the subtype does not leak into stored values: a column keeps plain text
db.execute(f"CREATE TABLE runs AS SELECT attn_fit('m', {TQ}, {OPTS}) AS r")
check(db.execute("SELECT json_type(json_object('v', r), '$.v') FROM runs").fetchone()[0] == "text",
      "a stored summary is text (json(r) parses it): SQLite keeps no subtype in a table")
finish("test_json_subtype")
