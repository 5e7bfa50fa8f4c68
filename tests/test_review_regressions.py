"""test_review_regressions.py -- regressions of bugs found in a cold review of the extension.

1. attn_classify / attn_evaluate / attn_confusion run a query given as text at top level, where
   direct-only functions (writefile, load_extension, ...) are allowed: from a view or trigger of
   an untrusted database that was a way around SQLite's protections. They are direct-only now.
2. A model save whose commit fails with SQLITE_BUSY (another connection holds a read lock)
   left the savepoint's transaction open: everything the connection did next was lost.
3. SELECT ... FROM attn_train(...) LIMIT <epochs> stopped at the last row and stored nothing.
4. A comment after the query's ';' was refused as "a second statement"; a real second
   statement behind a comment is still refused.
5. attn_import accepted NaN weights; every prediction was then the same class, silently.
6. attn_vectors_load read numbers with the host's locale (',' as decimal point in de_DE).
7. Options given as '' or whitespace trained to the end, then failed to save the lineage
   ("malformed JSON"): they are no options.
Run with Debian's python3; the extension is ./attnext.so.
"""
import json
import locale
import os
import sqlite3
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXT = os.path.abspath(os.environ.get("ATTNEXT", os.path.join(ROOT, "attnext")))
failures = 0


def check(cond, what):
    global failures
    print(("ok:   " if cond else "FAIL: ") + what)
    if not cond:
        failures += 1


def connect(path, **kw):
    db = sqlite3.connect(path, isolation_level=None, **kw)
    db.enable_load_extension(True)
    db.load_extension(EXT)
    return db


def error_of(db, sql):
    try:
        db.execute(sql).fetchall()
        return None
    except sqlite3.Error as e:
        return str(e)


tmp = tempfile.mkdtemp()
path = os.path.join(tmp, "r.db")
db = connect(path)
db.execute("CREATE TABLE t(x, y)")
rows = [("good fun day %d" % i, "p") if i % 2 else ("bad sad end %d" % i, "q") for i in range(60)]
db.executemany("INSERT INTO t VALUES (?, ?)", rows)
OPTS = '{"epochs":2,"hidden":8,"embed_dim":4,"progress":false}'

# 3. LIMIT = epochs keeps the model
got = db.execute("SELECT epoch FROM attn_train('lim', 'SELECT x, y FROM t', '%s') LIMIT 2" % OPTS).fetchall()
n = db.execute("SELECT count(*) FROM attn_models WHERE name = 'lim'").fetchone()[0]
logs = db.execute("SELECT count(*) FROM attn_training_log WHERE name = 'lim'").fetchone()[0]
check(got == [(1,), (2,)] and n == 1 and logs == 2, "LIMIT 2 over 2 epochs stores the model: rows %r, versions %d, log rows %d" % (got, n, logs))
got = db.execute("SELECT epoch FROM attn_train('lim1', 'SELECT x, y FROM t', '%s') LIMIT 1" % OPTS).fetchall()
n = db.execute("SELECT count(*) FROM attn_models WHERE name = 'lim1'").fetchone()[0]
logs = db.execute("SELECT count(*) FROM attn_training_log WHERE name = 'lim1'").fetchone()[0]
# a cursor closed before its last epoch finishes the training and saves it (a client that
# steps once and resets, or a LIMIT, would otherwise lose the model).
check(got == [(1,)] and n == 1 and logs == 2, "LIMIT 1 over 2 epochs returns one row, trains both epochs and stores the model (versions %d, log rows %d)" % (n, logs))
db.execute("SELECT count(*) FROM attn_train('m', 'SELECT x, y FROM t', '%s')" % OPTS).fetchall()

# 1. direct-only: views and triggers cannot run these table-valued functions
marker = os.path.join(tmp, "written")
for fn, query in [("attn_classify", "SELECT 1, writefile(''%s'', ''x'')" % marker),
                  ("attn_evaluate", "SELECT writefile(''%s'', ''x''), ''p''" % marker),
                  ("attn_confusion", "SELECT writefile(''%s'', ''x''), ''p''" % marker)]:
    db.execute("DROP VIEW IF EXISTS v")
    db.execute("CREATE VIEW v AS SELECT count(*) FROM %s('m', '%s')" % (fn, query))
    err = error_of(db, "SELECT * FROM v")
    check(err is not None and "unsafe use" in err and not os.path.exists(marker), "%s refused in a view: %s" % (fn, err))
    db.execute("DROP TRIGGER IF EXISTS tg")
    db.execute("CREATE TABLE IF NOT EXISTS log(a)")
    db.execute("CREATE TRIGGER tg AFTER INSERT ON log BEGIN SELECT count(*) FROM %s('m', '%s'); END" % (fn, query))
    err = error_of(db, "INSERT INTO log VALUES (1)")
    check(err is not None and "unsafe use" in err and not os.path.exists(marker), "%s refused in a trigger: %s" % (fn, err))
    direct = db.execute("SELECT count(*) FROM %s('m', 'SELECT x, y FROM t LIMIT 3')" % fn).fetchone()[0]
    check(direct > 0, "%s still works when called directly (%d rows)" % (fn, direct))
db.execute("DROP VIEW v")
db.execute("DROP TRIGGER tg")

# 4. comments after the statement
n = db.execute("SELECT count(*) FROM attn_classify('m', 'SELECT rowid, x FROM t; -- all rows')").fetchone()[0]
check(n == 60, "a trailing -- comment is accepted (%d rows)" % n)
n = db.execute("SELECT count(*) FROM attn_classify('m', 'SELECT rowid, x FROM t; /* c */ ;')").fetchone()[0]
check(n == 60, "a trailing /* */ comment is accepted (%d rows)" % n)
err = error_of(db, "SELECT count(*) FROM attn_classify('m', 'SELECT rowid, x FROM t; -- c\nDELETE FROM t')")
check(err is not None and "single statement" in err, "a statement behind a comment is refused: %s" % err)
check(db.execute("SELECT count(*) FROM t").fetchone()[0] == 60, "the table is untouched")

# 5. NaN weights refused by attn_import
blob = db.execute("SELECT weights FROM attn_models WHERE name = 'm'").fetchone()[0]
hlen = struct.unpack("<Q", blob[:8])[0]
header = json.loads(blob[8:8 + hlen])
begin = header["fc2.bias"]["data_offsets"][0]
at = 8 + hlen + begin
bad = blob[:at] + struct.pack("<f", float("nan")) + blob[at + 4:]
before = db.execute("SELECT count(*) FROM attn_models").fetchone()[0]
err = error_of(db, "SELECT attn_import('nan', x'%s')" % bad.hex())
after = db.execute("SELECT count(*) FROM attn_models").fetchone()[0]
check(err is not None and "fc2.bias" in err and "NaN" in err and before == after, "NaN weights refused: %s" % err)
good = db.execute("SELECT attn_import('copy', ?)", (blob,)).fetchone()[0]
check(good == 1, "the unpatched weights import (version %r)" % good)

# 2. a busy commit leaves no open transaction
db.close()
reader = sqlite3.connect(path, isolation_level=None, timeout=0)
writer = connect(path, timeout=0)
reader.execute("BEGIN")
reader.execute("SELECT count(*) FROM attn_models").fetchone()  # holds a SHARED lock
err = error_of(writer, "SELECT attn_import('busy', (SELECT weights FROM attn_models WHERE name = 'm'))")
check(err is not None and "locked" in err, "import while another connection reads: %s" % err)
check(not writer.in_transaction, "no transaction left open on the writing connection")
reader.execute("COMMIT")
v = writer.execute("SELECT attn_import('busy', (SELECT weights FROM attn_models WHERE name = 'm'))").fetchone()[0]
writer.execute("CREATE TABLE later(a)")
writer.close()
check_db = sqlite3.connect(path)
names = [r[0] for r in check_db.execute("SELECT name FROM attn_models WHERE name = 'busy'")]
later = check_db.execute("SELECT count(*) FROM sqlite_schema WHERE name = 'later'").fetchone()[0]
check(v == 1 and names == ["busy"] and later == 1, "work after the busy error is kept (import v%r, %r, table %d)" % (v, names, later))
check_db.close()
reader.close()

# 6. attn_vectors_load under a locale whose decimal point is ','
vec = os.path.join(tmp, "vectors.txt")
with open(vec, "w") as f:
    f.write("tennis 0.5 -1.25\nmatch 2.0 0.125\n")
locdir = os.path.join(tmp, "locales")
os.mkdir(locdir)
made = subprocess.run(["localedef", "-i", "de_DE", "-f", "UTF-8", os.path.join(locdir, "de_DE.UTF-8")],
                      capture_output=True).returncode in (0, 1)  # 1: warnings only
child = r"""
import locale, sqlite3, struct, sys
locale.setlocale(locale.LC_ALL, 'de_DE.UTF-8')
assert locale.localeconv()['decimal_point'] == ','
db = sqlite3.connect(':memory:'); db.enable_load_extension(True); db.load_extension(sys.argv[1])
rows = db.execute("SELECT word, vector FROM attn_vectors_load(?)", (sys.argv[2],)).fetchall()
print([(w, struct.unpack('<2f', v)) for w, v in rows])
"""
r = subprocess.run([sys.executable, "-c", child, EXT, vec], capture_output=True, text=True,
                   env=dict(os.environ, LOCPATH=locdir))
check(made and r.returncode == 0 and "('tennis', (0.5, -1.25))" in r.stdout and "('match', (2.0, 0.125))" in r.stdout,
      "attn_vectors_load under de_DE: %s%s" % (r.stdout.strip(), r.stderr.strip()[-300:]))

# 7. blank options are no options: the version is saved, its lineage holds no options
db = connect(":memory:")
db.execute("CREATE TABLE t(x, y)")
db.executemany("INSERT INTO t VALUES (?, ?)", rows)
for fn, blank in (("attn_fit", ""), ("attn_train", " \n")):
    sql = ("SELECT attn_fit('blank', 'SELECT x, y FROM t', ?)" if fn == "attn_fit" else
           "SELECT count(*) FROM attn_train('blank', 'SELECT x, y FROM t', ?)")
    try:
        db.execute(sql, (blank,)).fetchone()
        err = None
    except sqlite3.Error as e:
        err = str(e)
    check(err is None, "%s with options %r trains and saves: %s" % (fn, blank, err))
got = db.execute("SELECT version, options IS NULL FROM attn_lineage WHERE name = 'blank' "
                 "ORDER BY version").fetchall()
check(got == [(1, 1), (2, 1)], "both versions saved, no options in their lineage: %r" % got)

print("%d failed" % failures)
sys.exit(1 if failures else 0)
