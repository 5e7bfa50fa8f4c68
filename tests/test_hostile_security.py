"""test_hostile_security.py -- what a query or a schema may make attnext do.

  - the queries given to attn_train, attn_evaluate, attn_confusion and attn_classify must be
    one read-only statement: INSERT, UPDATE, DELETE, INSERT ... RETURNING, a CTE that writes,
    `SELECT ...; DROP TABLE` (a tail), PRAGMAs that write, ATTACH / DETACH, BEGIN / COMMIT,
    CREATE / DROP, VACUUM are refused with an error naming the function, and nothing changes;
  - such a query cannot write through the extension's own writing functions either:
    attn_deploy, attn_import and a nested attn_train called from inside it are refused;
  - the writing functions are direct-only: a view or a trigger that calls attn_train,
    attn_deploy or attn_import fails with "unsafe use of ...", with trusted_schema on or off;
    so do the reading ones that are direct-only (attn_tune, attn_metrics, attn_curve_svg,
    attn_heatmap_query_svg, attn_matrix_svg), each named in the message;
    the reading ones (attn_predict, attn_probs, ...) work in views.
Run from the repository root: /usr/bin/python3 tests/test_hostile_security.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability as R  # noqa: E402

R.reexec_with_preload()
R.require_extension()
check = R.check

db = R.connect(":memory:")
R.make_table(db)
R.train(db)
R.train(db)  # versions 1 and 2 of 'm'; 2 deployed
blob = db.execute("SELECT weights FROM attn_models WHERE version = 1").fetchone()[0]
db.execute("CREATE TABLE keep(x)")
db.execute("INSERT INTO keep VALUES(1)")
before = R.snapshot(db)

writing = [
    "INSERT INTO keep VALUES(2)",
    "INSERT INTO keep VALUES(2) RETURNING x, x",
    "UPDATE keep SET x = 3 RETURNING x, x",
    "DELETE FROM keep RETURNING x, x",
    "DELETE FROM attn_models",
    "WITH t AS (SELECT 1) INSERT INTO keep SELECT * FROM t",
    "SELECT text, label FROM docs; DROP TABLE keep",
    "SELECT text, label FROM docs;DROP TABLE keep;",
    "SELECT text, label FROM docs; -- a comment\nDROP TABLE keep",
    "PRAGMA user_version = 7",
    "PRAGMA journal_mode = OFF",
    "PRAGMA writable_schema = ON",
    "ATTACH ':memory:' AS other",
    "DETACH main",
    "BEGIN",
    "COMMIT",
    "SAVEPOINT x",
    "CREATE TABLE evil(a, b)",
    "DROP TABLE keep",
    "VACUUM",
    "REINDEX",
    "ANALYZE",
    "",
    "   ;  ",
    "-- only a comment",
]
functions = [
    ("attn_train", "SELECT * FROM attn_train('n', ?, '{\"epochs\":1,\"progress\":false}')"),
    ("attn_evaluate", "SELECT * FROM attn_evaluate('m', ?)"),
    ("attn_confusion", "SELECT * FROM attn_confusion('m', ?)"),
    ("attn_classify", "SELECT * FROM attn_classify('m', ?)"),
]
for fn, sql in functions:
    bad = []
    for query in writing:
        err = R.error_of(db, sql, (query,))
        if err is None or not err.startswith(fn + ": "):
            bad.append((query, err))
    check(not bad, f"{fn}: {len(writing)} writing or non-SELECT queries refused, each with an "
                   f"error naming {fn}{': wrong: ' + repr(bad[:3]) if bad else ''}")
    print("     e.g. " + str(R.error_of(db, sql, ("SELECT text, label FROM docs; DROP TABLE keep",))))
    print("     e.g. " + str(R.error_of(db, sql, ("PRAGMA user_version = 7",))))
check(R.snapshot(db) == before and db.execute("PRAGMA user_version").fetchone()[0] == 0,
      "database (and user_version) unchanged by every refused query")

# read-only PRAGMAs and table-valued functions are fine as queries
err = R.error_of(db, "SELECT count(*) FROM attn_classify('m', "
                     "'SELECT cid, name FROM pragma_table_info(''docs'')')")
check(err is None, f"attn_classify over a read-only pragma table: {err or 'works'}")

# writing through the extension's own functions from inside a query
nested = [
    ("attn_deploy", "SELECT text, attn_deploy('m', 1) FROM docs"),
    ("attn_import", "SELECT text, attn_import('m', x'00') FROM docs"),
    ("attn_import", "SELECT text, label FROM docs WHERE attn_import('m', "
                    "(SELECT weights FROM attn_models LIMIT 1)) > 0"),
    ("attn_train", "SELECT text, (SELECT count(*) FROM attn_train('n2', "
                   "'SELECT text, label FROM docs', '{\"epochs\":1,\"progress\":false}')) FROM docs"),
]
for fn, sql in functions:
    for inner, query in nested:
        if fn == "attn_classify":
            query = query.replace("SELECT text, ", "SELECT id, text, ", 1)
        err = R.error_of(db, sql, (query,))
        check(err is not None and inner in err and "inside the query of" in err,
              f"{fn} with a query calling {inner}: '{err}'")
err = R.error_of(db, "SELECT attn_heatmap_query_svg('m', 'SELECT text FROM docs WHERE "
                     "attn_deploy(''m'', 1) > 0')")
check(err is not None and "attn_deploy" in err and "inside the query of attn_heatmap_query_svg" in err,
      f"attn_heatmap_query_svg with a query calling attn_deploy: '{err}'")
check(R.snapshot(db) == before, "database unchanged: version 2 still deployed, no new model")
err = R.error_of(db, "SELECT attn_deploy('m', 2), attn_heatmap_query_svg('m', 'SELECT text FROM docs')")
check(err is None, f"after the refused calls the writing functions work again: {err or 'yes'}")
before = R.snapshot(db)  # attn_deploy renumbered deployed_seq

# direct-only: views and triggers
for trusted in (1, 0):
    db.execute(f"PRAGMA trusted_schema = {trusted}")
    db.execute("SAVEPOINT v")
    db.execute("CREATE VIEW v_deploy AS SELECT attn_deploy('m', 1) AS v")
    db.execute("CREATE VIEW v_import AS SELECT attn_import('x', x'00') AS v")
    db.execute("CREATE VIEW v_train AS SELECT * FROM attn_train('x', "
               "'SELECT text, label FROM docs', '{\"epochs\":1,\"progress\":false}')")
    # the direct-only functions that read (they run a query, or train): refused in a view and
    # in a trigger as well, each with SQLite's message naming it
    direct_reads = [
        ("attn_tune", "SELECT * FROM attn_tune('x', 'SELECT text, label FROM docs', "
         "'{\"hidden\":[4]}', '{\"epochs\":1,\"progress\":false}')",
         'unsafe use of virtual table "attn_tune"'),
        ("attn_metrics", "SELECT * FROM attn_metrics('m', 'SELECT text, label FROM docs')",
         'unsafe use of virtual table "attn_metrics"'),
        ("attn_curve_svg", "SELECT attn_curve_svg('m', 'SELECT text, label FROM docs')",
         "unsafe use of attn_curve_svg()"),
        ("attn_heatmap_query_svg", "SELECT attn_heatmap_query_svg('m', 'SELECT text FROM docs')",
         "unsafe use of attn_heatmap_query_svg()"),
        ("attn_matrix_svg", "SELECT attn_matrix_svg('goal match', 'goal', 'docs')",
         "unsafe use of attn_matrix_svg()"),
    ]
    for name, sql, _ in direct_reads:
        db.execute(f"CREATE VIEW v_{name} AS {sql}")
        db.execute(f"CREATE TABLE t_{name}(x)")
        db.execute(f"CREATE TRIGGER tr_{name} AFTER INSERT ON t_{name} BEGIN {sql}; END")
    for name, _, want in direct_reads:
        for what, sql in ((f"a view over {name}", f"SELECT * FROM v_{name}"),
                          (f"a trigger calling {name}", f"INSERT INTO t_{name} VALUES(1)")):
            err = R.error_of(db, sql)
            check(err is not None and want in err, f"trusted_schema={trusted}: {what}: '{err}'")
    for t in ("t_log1", "t_log2", "t_log3"):
        db.execute(f"CREATE TABLE {t}(x)")
    db.execute("CREATE TRIGGER t_deploy AFTER INSERT ON t_log1 "
               "BEGIN SELECT attn_deploy('m', 1); END")
    db.execute("CREATE TRIGGER t_import AFTER INSERT ON t_log2 "
               "BEGIN SELECT attn_import('x', (SELECT weights FROM attn_models LIMIT 1)); END")
    db.execute("CREATE TRIGGER t_train AFTER INSERT ON t_log3 "
               "BEGIN SELECT count(*) FROM attn_train('x', 'SELECT text, label FROM docs', "
               "'{\"epochs\":1,\"progress\":false}'); END")
    for what, sql in (("a view calling attn_deploy", "SELECT * FROM v_deploy"),
                      ("a view calling attn_import", "SELECT * FROM v_import"),
                      ("a view over attn_train", "SELECT * FROM v_train"),
                      ("a trigger calling attn_deploy", "INSERT INTO t_log1 VALUES(1)"),
                      ("a trigger calling attn_import", "INSERT INTO t_log2 VALUES(2)"),
                      ("a trigger over attn_train", "INSERT INTO t_log3 VALUES(3)")):
        err = R.error_of(db, sql)
        check(err is not None and "unsafe use of" in err,
              f"trusted_schema={trusted}: {what}: '{err}'")
    db.execute("CREATE VIEW v_read AS SELECT attn_predict('m', text) AS p FROM docs")
    err = R.error_of(db, "SELECT count(*) FROM v_read")
    check(err is None, f"trusted_schema={trusted}: a view calling attn_predict works: {err or 'yes'}")
    db.execute("ROLLBACK TO v")
    db.execute("RELEASE v")
db.execute("PRAGMA trusted_schema = 1")
check(R.snapshot(db) == before, "database unchanged by the views and triggers")

# attn_predict is not deterministic: it cannot go into an index or a generated column
for what, sql in (("an index", "CREATE INDEX i ON docs(attn_predict('m', text))"),
                  ("a generated column", "CREATE TABLE g(t, p AS (attn_predict('m', t)))")):
    db.execute("SAVEPOINT g")
    err = R.error_of(db, sql)
    if err is None and what != "an index":
        err = R.error_of(db, "INSERT INTO g(t) VALUES('goal')")
    db.execute("ROLLBACK TO g")
    db.execute("RELEASE g")
    check(err is not None, f"attn_predict in {what}: refused: '{err}'")
R.finish("test_hostile_security")
