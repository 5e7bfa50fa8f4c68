"""test_hostile_store.py -- a database file attnext did not write.

  - a model store that is not an ordinary table of the expected shape is refused with an error
    naming the function and the problem, never a crash: attn_models or attn_training_log as a
    view that calls attnext back (unbounded recursion, SIGSEGV before the fix) through
    attn_predict (one and two arguments), attn_probs, attn_weights, attn_heatmap_svg, attn_training_svg,
    with trusted_schema on and off and SQLITE_DBCONFIG_DEFENSIVE on and off; attn_models as a
    virtual table, with a generated column, WITHOUT ROWID, with a column named rowid, without
    its PRIMARY KEY (attn_import then wrote a second deployed row of the same version);
  - triggers of the store that call attnext while it writes run, bounded, and do not crash;
  - a collation of the application's that calls attnext while the store is read: refused;
  - attn_training_svg draws valid SVG (no nan or inf coordinates) for logs of huge, infinite,
    NULL, text and single-epoch values.
Each hostile case runs in its own sqlite3 shell ($SQLITE3), so a crash is reported as one
failure. Run from the repository root: /usr/bin/python3 tests/test_hostile_store.py
"""
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import xml.dom.minidom

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability as R  # noqa: E402

R.reexec_with_preload()
R.require_extension()
check = R.check

SQLITE3 = shlex.split(os.environ.get("SQLITE3", "sqlite3"))
if not shutil.which(SQLITE3[-1]) and not shutil.which(SQLITE3[0]):
    print("sqlite3 shell not found")
    sys.exit(77)

tmp = tempfile.mkdtemp()
base = os.path.join(tmp, "base.db")
db = R.connect(base)
R.make_table(db)
R.train(db)
blob = db.execute("SELECT weights FROM attn_models WHERE name = 'm'").fetchone()[0]
db.close()

STORE_COLUMNS = "rowid, name, version, created_at, deployed, deployed_seq, weights"


def shell(path, sql, trusted=True, defensive=False):
    """Run sql in a sqlite3 shell on path: (exit status, output). A signal: status < 0."""
    script = ".bail on\n"
    if defensive:
        script += ".dbconfig defensive on\n"
    script += f"PRAGMA trusted_schema = {'ON' if trusted else 'OFF'};\n"
    script += f".load {R.extension_path()}\n" + sql + "\n"
    p = subprocess.run(SQLITE3 + [path], input=script, capture_output=True, text=True,
                       timeout=120)
    return p.returncode, (p.stdout + p.stderr).strip()


def hostile_db(name, setup):
    """A copy of the base database changed by setup (SQL run with writable schema off)."""
    path = os.path.join(tmp, name + ".db")
    shutil.copy(base, path)
    d = R.connect(path)
    d.executescript(setup)
    d.close()
    return path


def dump(path):
    """The whole database as SQL text (any kind of table): what 'unchanged' means here."""
    d = R.connect(path)
    text = "\n".join(d.iterdump())
    d.close()
    return text


def crashed(status):
    return status < 0 or status >= 128


# ---------------------------------------------------------------- views that call attnext back
callers = {
    "attn_predict": ("attn_predict('m', 'x')", "SELECT attn_predict('m', 'hi') AS p"),
    "attn_predict (one argument)": ("attn_predict('x')", "SELECT attn_predict('hi') AS p"),
    "attn_probs": ("(SELECT count(*) FROM attn_probs('m', 'x'))",
                   "SELECT count(*) AS p FROM attn_probs('m', 'hi')"),
    "attn_weights": ("(SELECT count(*) FROM attn_weights('m', 'x'))",
                     "SELECT count(*) AS p FROM attn_weights('m', 'hi')"),
    "attn_heatmap_svg": ("attn_heatmap_svg('m', 'x')", "SELECT attn_heatmap_svg('m', 'hi') AS p"),
    "attn_training_svg": ("attn_training_svg('m')", "SELECT attn_training_svg('m') AS p"),
}
for fn, (inner, outer) in callers.items():
    path = hostile_db("view_" + fn.split()[0] + str(len(fn)), f"""
        ALTER TABLE attn_models RENAME TO real_models;
        CREATE VIEW attn_models({STORE_COLUMNS}) AS SELECT 1, 'm', 1, 't', 1, 1, {inner};
        CREATE VIEW harmless AS {outer};""")
    for trusted, defensive in ((False, True), (True, False)):
        status, out = shell(path, "SELECT p FROM harmless;", trusted, defensive)
        what = (f"{fn} through a view attn_models that calls {fn.split()[0]} back "
                f"(trusted_schema {'on' if trusted else 'off'}, defensive "
                f"{'on' if defensive else 'off'})")
        check(not crashed(status) and "attn_models is a view" in out,
              f"{what}: refused with an error, no crash (exit {status}: {out[-160:]!r})")

# attn_training_svg reads attn_training_log too
path = hostile_db("view_log", f"""
    ALTER TABLE attn_training_log RENAME TO real_log;
    CREATE VIEW attn_training_log(name, version, epoch, train_loss, val_loss, val_accuracy,
                                  val_f1, lr, seconds)
      AS SELECT 'm', 1, 1, 1.0, 1.0, 0.5, 0.5, 0.1, length(attn_training_svg('m'));
    CREATE VIEW harmless AS SELECT attn_training_svg('m') AS p;""")
for trusted, defensive in ((False, True), (True, False)):
    status, out = shell(path, "SELECT p FROM harmless;", trusted, defensive)
    check(not crashed(status) and "attn_training_log is a view" in out,
          f"attn_training_svg through a view attn_training_log that calls attn_training_svg: refused "
          f"(exit {status}: {out[-160:]!r})")
status, out = shell(path, "SELECT attn_predict('m', 'goal match') IS NOT NULL;")
check(status != 0 and "attn_training_log is a view" in out,
      f"attn_predict in that database: refused too (the store is checked as a whole): {out[-120:]!r}")

# ---------------------------------------------------------------- other shapes of attn_models
SHAPES = {
    "a virtual table": ("ALTER TABLE attn_models RENAME TO real_models;"
                        "CREATE VIRTUAL TABLE attn_models USING fts5(name, version, created_at, "
                        "deployed, deployed_seq, config, labels, metrics, weights);"
                        "INSERT INTO attn_models SELECT name, version, created_at, deployed, "
                        "deployed_seq, config, labels, metrics, weights FROM real_models;",
                        "attn_models is a virtual table"),
    "a generated column": ("ALTER TABLE attn_models RENAME TO real_models;"
                           "CREATE TABLE attn_models(name TEXT NOT NULL, version INTEGER NOT NULL, "
                           "created_at TEXT NOT NULL, deployed INTEGER, deployed_seq INTEGER, "
                           "config TEXT, labels TEXT, metrics TEXT, raw BLOB, "
                           "weights BLOB AS (raw || zeroblob(0)), PRIMARY KEY(name, version));"
                           "INSERT INTO attn_models SELECT name, version, created_at, deployed, "
                           "deployed_seq, config, labels, metrics, weights FROM real_models;",
                           "attn_models has a generated column 'weights'"),
    "WITHOUT ROWID": ("ALTER TABLE attn_models RENAME TO real_models;"
                      "CREATE TABLE attn_models(name TEXT NOT NULL, version INTEGER NOT NULL, "
                      "created_at TEXT NOT NULL, deployed INTEGER, deployed_seq INTEGER, "
                      "config TEXT, labels TEXT, metrics TEXT, weights BLOB, "
                      "PRIMARY KEY(name, version)) WITHOUT ROWID;"
                      "INSERT INTO attn_models SELECT name, version, created_at, deployed, "
                      "deployed_seq, config, labels, metrics, weights FROM real_models;",
                      "attn_models is a WITHOUT ROWID table"),
    "a column named rowid": ("ALTER TABLE attn_models ADD COLUMN rowid INTEGER;",
                             "attn_models has a column that hides the rowid 'rowid'"),
    "no PRIMARY KEY": ("ALTER TABLE attn_models RENAME TO real_models;"
                       "CREATE TABLE attn_models AS SELECT * FROM real_models;",
                       "attn_models has a PRIMARY KEY other than the expected one"),
    "a PRIMARY KEY of name only": (
        "ALTER TABLE attn_models RENAME TO real_models;"
        "CREATE TABLE attn_models(name TEXT PRIMARY KEY, version INTEGER NOT NULL, "
        "created_at TEXT NOT NULL, deployed INTEGER, deployed_seq INTEGER, config TEXT, "
        "labels TEXT, metrics TEXT, weights BLOB);"
        "INSERT INTO attn_models SELECT name, version, created_at, deployed, deployed_seq, "
        "config, labels, metrics, weights FROM real_models;",
        "attn_models has a PRIMARY KEY other than the expected one"),
    "a missing column": ("ALTER TABLE attn_models DROP COLUMN metrics;",
                         "attn_models lacks a column 'metrics'"),
}
for shape, (setup, expected) in SHAPES.items():
    path = hostile_db("shape" + str(len(shape)), setup)
    for sql, fn in (("SELECT attn_predict('m', 'goal match');", "attn_predict"),
                    ("SELECT count(*) FROM attn_probs('m', 'goal');", "attn_probs"),
                    ("SELECT attn_import('m', readfile('%s'));" % os.path.join(tmp, "m.bin"),
                     "attn_import"),
                    ("SELECT attn_deploy('m', 1);", "attn_deploy")):
        with open(os.path.join(tmp, "m.bin"), "wb") as f:
            f.write(blob)
        before = dump(path)
        status, out = shell(path, sql)
        after = dump(path)
        check(not crashed(status) and f"{fn}: {expected}" in out and before == after,
              f"attn_models with {shape}: {fn} refused, database unchanged "
              f"(exit {status}: {out[-140:]!r})")

# The attack the primary key check stops: a store without the key, whose version column holds
# text, made attn_import write a second deployed version 1.
path = hostile_db("duplicate", """
    ALTER TABLE attn_models RENAME TO real_models;
    CREATE TABLE attn_models AS SELECT * FROM real_models;
    UPDATE attn_models SET version = 'x';
    INSERT INTO attn_models SELECT name, 1, created_at, 0, 0, config, labels, metrics, weights
      FROM real_models;""")
status, out = shell(path, "SELECT attn_import('m', readfile('%s'));" % os.path.join(tmp, "m.bin"))
d = R.connect(path)
n = d.execute("SELECT count(*) FROM attn_models WHERE name = 'm' AND version = 1").fetchone()[0]
d.close()
check(n == 1 and "PRIMARY KEY" in out,
      f"attn_import into a store without its key: refused, no duplicate version ({n} rows of "
      f"version 1; {out[-100:]!r})")

# ---------------------------------------------------------------- triggers of the store
path = hostile_db("triggers", """
    CREATE TABLE seen(p);
    CREATE TRIGGER t1 AFTER UPDATE ON attn_models BEGIN
      INSERT INTO seen SELECT attn_predict('m', 'goal match'); END;
    CREATE TRIGGER t2 AFTER INSERT ON attn_models BEGIN
      INSERT INTO seen SELECT attn_predict('m', 'chip phone'); END;""")
for trusted in (True, False):
    status, out = shell(path, "SELECT attn_deploy('m', 1);\n"
                              "SELECT attn_import('m', readfile('%s'));\n"
                              "SELECT attn_predict('m', 'goal');" % os.path.join(tmp, "m.bin"),
                        trusted)
    check(not crashed(status),
          f"triggers of attn_models that call attn_predict while attn_deploy and attn_import "
          f"write (trusted_schema {'on' if trusted else 'off'}): no crash (exit {status}: "
          f"{out[-120:]!r})")

# A healthy store still works, and so does a store with a column of the user's own.
path = hostile_db("extra", "ALTER TABLE attn_models ADD COLUMN note TEXT;")
status, out = shell(path, "SELECT attn_predict('m', 'goal match') IN ('sports', 'tech', 'money');")
check(status == 0 and out.endswith("1"), f"a store with an extra column of the user's: works ({out!r})")

# The check is remembered while the database is unchanged, and redone after a schema change made
# by the same connection.
path = hostile_db("same_connection", "")
d = R.connect(path)
d.execute("BEGIN")
first = d.execute("SELECT attn_predict('m', 'goal'), attn_predict('m', 'match')").fetchone()
d.execute("COMMIT")
d.executescript("ALTER TABLE attn_models RENAME TO real_models;"
                "CREATE VIEW attn_models AS SELECT rowid, * FROM real_models;")
err = R.error_of(d, "SELECT attn_predict('m', 'goal')")
d.close()
check(None not in first and err is not None and "attn_models is a view" in err,
      f"a view put in place by the same connection after a lookup: refused ({err!r})")

# A collation of the application's, named by the store's name column, that calls attnext back:
# the one callback the check cannot see (a collation is the program's, not the file's). The
# store's read compares names through it; the nested lookup is refused by name, the outer one
# answers, and nothing recurses.
path = hostile_db("collation", "")
d = R.connect(path)
nested, depth = [], [0]


def calls_back(a, b):
    if depth[0] == 0:
        depth[0] += 1
        nested.append(R.error_of(d, "SELECT attn_predict('m', 'goal')"))
        depth[0] -= 1
    return (a > b) - (a < b)


d.create_collation("app_names", calls_back)
schema = d.execute("SELECT sql FROM sqlite_schema WHERE name = 'attn_models'").fetchone()[0]
d.executescript(schema.replace("CREATE TABLE attn_models(", "CREATE TABLE copied(", 1)
                .replace("name TEXT NOT NULL,", "name TEXT NOT NULL COLLATE app_names,", 1) +
                ";INSERT INTO copied SELECT * FROM attn_models; DROP TABLE attn_models;"
                "ALTER TABLE copied RENAME TO attn_models;")
nested.clear()
outer = d.execute("SELECT attn_predict('m', 'goal match')").fetchone()[0]
d.close()
check(outer in ("sports", "tech", "money") and nested and all(
          e is not None and e.startswith("attn_predict: the model store was read again while it "
                                         "was being read") for e in nested),
      f"a collation that calls attnext while the store is read: the nested lookup refused, the "
      f"outer one answers ({outer!r}, {nested[:1]!r})")

# ---------------------------------------------------------------- attn_training_svg on hostile logs
db = R.connect(os.path.join(tmp, "curves.db"))
db.execute("SELECT attn_import('c', ?)", (blob,))
logs = {
    "huge and infinite values": [(1, 1e308, -1e308, 9e999, -9e999, 1e300),
                                 (2, 1.0, 2.0, 0.5, 0.5, 0.1), (3, None, "text", 1e-320, 0, 0)],
    "huge epochs": [(1e300, 1.0, 1.0, 0.5, 0.5, 0.1), (-1e300, 2.0, 2.0, 0.6, 0.6, 0.1),
                    (5, 1.5, 1.5, 0.7, 0.7, 0.1)],
    "one epoch": [(1, 0.5, 0.5, 0.5, 0.5, 0.1)],
    "constant values": [(1, 2.0, 2.0, 1.0, 1.0, 0.1), (2, 2.0, 2.0, 1.0, 1.0, 0.1)],
    "tiny steps": [(1, 1.0, 1.0, 0.5, 0.5, 1e-300), (1 + 1e-12, 1.0 + 1e-300, 1.0, 0.5, 0.5, 1e-320)],
    "only NULLs": [(1, None, None, None, None, None), (2, None, None, None, None, None)],
}
for what, rows in logs.items():
    db.execute("DELETE FROM attn_training_log")
    db.executemany("INSERT INTO attn_training_log(name, version, epoch, train_loss, val_loss, "
                   "val_accuracy, val_f1, lr, seconds) VALUES('c', 1, ?, ?, ?, ?, ?, ?, 1)", rows)
    try:
        svg = db.execute("SELECT attn_training_svg('c')").fetchone()[0]
        err = None
    except Exception as e:  # noqa: BLE001
        svg, err = "", str(e)
    low = svg.lower()
    valid = True
    try:
        xml.dom.minidom.parseString(svg.encode())
    except Exception:  # noqa: BLE001
        valid = False
    check(err is None and valid and "nan" not in low and "inf" not in low,
          f"attn_training_svg on a log of {what}: valid SVG without nan/inf ({len(svg)} bytes, "
          f"error {err!r})")
db.close()

shutil.rmtree(tmp)
R.finish("test_hostile_store")
