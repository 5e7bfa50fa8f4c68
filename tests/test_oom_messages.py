"""test_oom_messages.py -- the engine's out of memory reaches each client as a message that names
the function and says what ran out, in Python's sqlite3 and in the sqlite3 shell
(tests/test_field_node.js checks Node's better-sqlite3).

Python's sqlite3 turns SQLITE_NOMEM into a bare MemoryError('') and drops the message, so
attnext returns these errors as SQLITE_ERROR with their text. Two ways to run out:
  - PRAGMA hard_heap_limit = 20000000 and a model of 100,000 subword buckets (25 MB of
    parameters): "out of memory creating the model";
  - a batch whose activations take one block past 2^31 bytes (64 texts of 4,096 words through a
    hidden size of 1,024), which sqlite3_malloc64 never gives: "out of memory for a batch of ...";
    on the CPU (a GPU of 80 GiB holds it)
Each through attn_fit (a scalar function) and attn_train (a table-valued one).
Run from the repository root: /usr/bin/python3 tests/test_oom_messages.py
"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability as R  # noqa: E402

R.reexec_with_preload()
R.require_extension()
check = R.check

DOCS = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "sql", "docs.inc")).read()
LONG = """CREATE TABLE long(text, label);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 64)
INSERT INTO long SELECT (SELECT group_concat('w' || ((i * 7 + j) % 50), ' ') FROM
  (WITH RECURSIVE k(j) AS (SELECT 1 UNION ALL SELECT j + 1 FROM k WHERE j < 4096) SELECT j FROM k)),
  'l' || (i % 2) FROM n;
"""
HEAP = ("PRAGMA hard_heap_limit = 20000000",
        "'SELECT text, label FROM docs'",
        '{"epochs":1,"subword_buckets":100000,"progress":false}',
        "out of memory creating the model")
BATCH = ("",
         "'SELECT text, label FROM long'",
         '{"epochs":1,"hidden":1024,"embed_dim":8,"fc_hidden":0,"subword_buckets":0,'
         '"max_len":4096,"batch_size":64,"stopwords":false,"progress":false,"device":"cpu"}',
         "out of memory for a batch of ")
CALLS = {"attn_fit": "SELECT attn_fit('n', {query}, '{options}')",
         "attn_train": "SELECT count(*) FROM attn_train('n', {query}, '{options}')"}

# the batch first: PRAGMA hard_heap_limit limits the whole process and can only be lowered
for case, (pragma, query, options, want) in (("2^31-byte batch", BATCH), ("heap limit", HEAP)):
    for fn, call in CALLS.items():
        sql = call.format(query=query, options=options)
        # Python's sqlite3
        db = R.connect(":memory:")
        db.executescript(DOCS + LONG)
        if pragma:
            db.execute(pragma)
        try:
            db.execute(sql).fetchall()
            got = "no error"
        except Exception as e:  # MemoryError is not a sqlite3.Error
            got = f"{type(e).__name__}({str(e)!r})"
        db.close()
        check(got.startswith(f"OperationalError('{fn}: {want}"),
              f"Python, {case}, {fn}: {got}")
        # the sqlite3 shell
        shell = os.environ.get("SQLITE3", "sqlite3")
        if shutil.which(shell.split()[-1]) is None:
            print(f"skip the shell: {shell} not found")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            script = (f".load {R.extension_path()}\n{DOCS}{LONG}"
                      f"{pragma + ';' if pragma else ''}\n{sql};\n")
            p = subprocess.run(shell.split() + ["-batch", os.path.join(tmp, "t.db")],
                               input=script, capture_output=True, text=True, timeout=300)
        lines = [line for line in (p.stdout + p.stderr).splitlines() if "error" in line]
        got = lines[-1] if lines else (p.stdout + p.stderr).strip()[-200:]
        check(f": {fn}: {want}" in got, f"shell, {case}, {fn}: {got}")

R.finish("test_oom_messages")
