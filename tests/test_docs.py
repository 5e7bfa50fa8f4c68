"""test_docs.py -- the documents hold together: README.md is the front door and each
section it used to hold lives beside what it documents.

- README.md stays under 200 lines and links every document, and every section moved out of it
  (file#anchor), so that each is one click away;
- every relative link and image of README.md and of the documents resolves to a file of the
  tree, and its #anchor (where it has one) to a heading of the target, as GitHub makes anchors;
- every path ext/ARCHITECTURE.md names (in `code`, and each entry of its source tree) exists,
  and every file of engine/ and ext/ is in its source tree; every C function it names
  (`nn_*`, `attn_*`, `sqlite3_*`) is defined in engine/ or ext/, or is an SQL function of the
  registration table, a store table, or SQLite's;
- README.md's ten-line tour runs in the sqlite3 shell ($SQLITE3, $ATTNEXT) as written, and
  tests/bench/explain_quality.py --quick runs sql/TUTORIAL.md's SQL.
Run from the repository root with Debian's /usr/bin/python3.
"""
import glob
import os
import re
import shlex
import subprocess
import sys
import tempfile

# The documents and the README sections each one holds (the anchor README links; None: the
# document is the section).
DOCS = {
    "ext/REFERENCE.md": ["SQL functions", "Flags", "Training options", "The default recipe",
                         "Deploying a new version", "Validation splits"],
    "ext/CLIENTS.md": ["Install and load", "From your language"],
    "ext/CONCURRENCY.md": ["Concurrency", "The model store"],
    "ext/SECURITY.md": ["Security", "Weights format"],
    "ext/ARCHITECTURE.md": ["Architecture", "Source tree", "Targets",
                            "Where each SQL function lives"],
    "ext/node/README.md": [None],
    "ext/CHANGES.md": [None],
    "tests/README.md": ["Tests", "Performance"],
    "sql/TUTORIAL.md": ["The lesson's workflow on AG News", "The labelling loop",
                        "Is attention an explanation?", "Demo data"],
}
failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def prose(text):
    """The lines outside fenced code blocks."""
    out, fence = [], False
    for line in text.split("\n"):
        if line.startswith("```"):
            fence = not fence
            continue
        if not fence:
            out.append(line)
    return out


def slug(heading):
    """GitHub's anchor of a heading: lower case, markup and punctuation dropped but - and _,
    spaces as -."""
    h = re.sub(r"[`*]", "", heading.strip().lower())
    h = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", h)
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    for line in prose(read(path)):
        m = re.match(r"#{1,6} (.*)", line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else "%s-%d" % (s, n))
    return out


def links(path):
    """(target, line number) of every markdown link and image outside code."""
    out, fence = [], False
    for n, line in enumerate(read(path).split("\n"), 1):
        if line.startswith("```"):
            fence = not fence
            continue
        if fence:
            continue
        line = re.sub(r"`[^`]*`", "", line)  # not in code spans
        for m in re.finditer(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", line):
            out.append((m.group(1), n))
    return out


# -- README.md: the front door
readme = read("README.md")
lines = readme.count("\n")
check(lines <= 200, "README.md has %d lines (at most ~200: the rest belongs in a document)" % lines)
readme_links = {t for t, _ in links("README.md")}
for doc, sections in DOCS.items():
    check(os.path.isfile(doc), "%s exists" % doc)
    check(doc in readme_links, "README.md links %s" % doc)
    for sec in sections:
        if sec is None:
            continue
        check("%s#%s" % (doc, slug(sec)) in readme_links,
              "README.md links %s#%s (%s)" % (doc, slug(sec), sec))

# -- every relative link resolves
root = os.path.realpath(".")
pages = ["README.md"] + list(DOCS)
for page in pages:
    bad = 0
    for target, n in links(page):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, frag = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        where = "%s:%d: %s" % (page, n, target)
        if not os.path.realpath(dest).startswith(root + os.sep) and os.path.realpath(dest) != root:
            check(False, "%s leaves the repository" % where); bad += 1
            continue
        if not os.path.exists(dest):
            check(False, "%s: no file %s" % (where, dest)); bad += 1
            continue
        if frag and dest.endswith(".md") and frag not in anchors(dest):
            check(False, "%s: %s has no heading with anchor #%s" % (where, dest, frag)); bad += 1
    check(bad == 0, "%s: %d relative links resolve" % (page, len(links(page))))

# -- ext/ARCHITECTURE.md names only what exists
arch = read("ext/ARCHITECTURE.md")
named = set()
for span in re.findall(r"`([^`\n]+)`", arch):
    if re.fullmatch(r"(engine|ext|tests|sql|data|\.ci)/[\w./*-]*", span):
        named.add(span)
# the source tree: one entry per line, a directory's entries indented by two more spaces
tree = arch.split("## Source tree", 1)[1].split("```", 2)[1]
stack, listed = [], set()
for line in tree.split("\n"):
    if not line.strip():
        continue
    indent = len(line) - len(line.lstrip(" "))
    if indent >= 20:  # a description's second line
        continue
    depth = indent // 2
    entry = re.match(r"[^\s,]+(?:, [^\s,]+)*", line.strip()).group(0)
    stack = stack[:depth]
    names = [e.strip() for e in entry.split(",")]
    base = names[0]
    for name in names:
        if name.startswith(".") and "/" not in name and base != name:  # "attnext_wire.c, .h"
            name = base.rsplit(".", 1)[0] + name
        path = "/".join(stack + [name])
        named.add(path)
        listed.add(path.rstrip("/"))
    if base.endswith("/"):
        stack.append(base.rstrip("/"))
missing = sorted(p for p in named if not glob.glob(p.rstrip("/")))
check(not missing, "ext/ARCHITECTURE.md names %d paths, all exist%s"
      % (len(named), "; missing: " + ", ".join(missing) if missing else ""))
sources = sorted(glob.glob("engine/*.[ch]") + glob.glob("engine/*.cu") + glob.glob("engine/*.py")
                 + glob.glob("ext/*.[ch]") + glob.glob("ext/node/*.[ch]"))
unlisted = [s for s in sources if s not in listed]
check(not unlisted, "every source file of engine/ and ext/ is in ext/ARCHITECTURE.md's source "
      "tree%s" % ("; not there: " + ", ".join(unlisted) if unlisted else ""))

code = ""
for f in sorted(glob.glob("engine/*.[ch]") + glob.glob("engine/*.cu") + glob.glob("ext/*.[ch]")
                + glob.glob("ext/node/*.[ch]")):
    code += read(f)
# the SQL functions of attnext.so's registration table and of the dqlite node's own
registered = set(re.findall(r"\{\s*\"(attn_\w+)\"", read("ext/attnext.c")
                            + read("ext/node/attn_jobs.c")))
tables = set(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", read("sql/schema.sql")))
sqlite_h = "/usr/include/sqlite3.h"
sqlite_api = read(sqlite_h) if os.path.exists(sqlite_h) else ""
funcs = set(re.findall(r"`((?:nn|attn|sqlite3)_\w+)(?:\(\))?`", arch))
funcs |= set(re.findall(r"\b((?:nn|attn|sqlite3)_\w+)\(", arch))
unknown = []
for fn in sorted(funcs):
    if fn in registered or fn in tables:
        continue
    if re.search(r"\b%s\s*\(" % fn, code):  # defined or called as a C function
        continue
    if fn.startswith("sqlite3_") and (re.search(r"\b%s\b" % fn, sqlite_api) or not sqlite_api):
        continue
    unknown.append(fn)
check(not unknown, "ext/ARCHITECTURE.md names %d functions and tables, all in the code%s"
      % (len(funcs), "; unknown: " + ", ".join(unknown) if unknown else ""))

# -- the tour and the tutorial's SQL run
ATTNEXT = os.environ.get("ATTNEXT", "./attnext")
SQLITE3 = shlex.split(os.environ.get("SQLITE3", "sqlite3"))
if not os.path.exists(ATTNEXT + ".so"):
    print("%s.so not built (run make): the tour is not run" % ATTNEXT)
    if failures:
        sys.exit(1)
    sys.exit(77)
tour = re.search(r"## A ten-line tour\n.*?```sql\n(.*?)```", readme, re.S)
check(tour is not None, "README.md has a tour (a sql block under '## A ten-line tour')")
if tour:
    sql = tour.group(1)
    check(".load ./attnext\n" in sql, "the tour loads ./attnext")
    n = len([l for l in sql.split("\n") if l.strip()])
    check(n <= 12, "the tour has %d lines" % n)
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "news.db")
        run = subprocess.run(SQLITE3 + ["-bail", db], input=sql.replace(
            ".load ./attnext\n", ".load %s\n" % ATTNEXT), capture_output=True, text=True)
        out = run.stdout
        check(run.returncode == 0 and not run.stderr,
              "the tour runs in the sqlite3 shell (exit %d%s)"
              % (run.returncode, (": " + run.stderr.strip()) if run.stderr else ""))
        check('"version":1' in out, "attn_fit saved version 1")
        check(re.search(r"^overall\|", out, re.M) is not None, "attn_evaluate's overall row")
        check(re.search(r"^news\|1\|1\|\d+$", out, re.M) is not None,
              "attn_models shows version 1, deployed")
        check(re.search(r"^\d+\|.*\|2\|[01]$", out, re.M) is not None,
              "attn_train's last epoch row saved version 2")
ext = os.path.abspath(ATTNEXT)
tutorial = open("sql/TUTORIAL.md").read()
loop = re.search(r"## The labelling loop\n.*?```sql\n(.*?)```", tutorial, re.S)
check(loop is not None, "sql/TUTORIAL.md has the labelling loop (a sql block)")
if loop:
    with tempfile.TemporaryDirectory() as tmp:
        run = subprocess.run(SQLITE3 + ["-bail", os.path.join(tmp, "inbox.db")],
                             input=loop.group(1).replace(".load ./attnext\n",
                                                         ".load %s\n" % ATTNEXT),
                             capture_output=True, text=True)
        check(run.returncode == 0 and not run.stderr,
              "the labelling loop runs in the sqlite3 shell (exit %d%s)"
              % (run.returncode, (": " + run.stderr.strip()) if run.stderr else ""))
        curve = re.findall(r"^(\d+)\|(\d+)\|([0-9.]+)$", run.stdout, re.M)
        check([int(c[0]) for c in curve] == [40, 80, 120] and
              [int(c[1]) for c in curve] == [1, 2, 3],
              "the curve has 40, 80 and 120 labels for versions 1, 2, 3: %s" % curve)
        check(len(curve) == 3 and all(0.0 <= float(c[2]) <= 1.0 for c in curve),
              "each version's held-out F1 is a number from 0 to 1")
        asked = re.findall(r"^(\d+)\|[^|\n]+\|[^|\n]+\|([0-9.]+)$", run.stdout, re.M)
        check(len(asked) == 5 and [float(a[1]) for a in asked] == sorted(float(a[1]) for a in asked),
              "attn_uncertain gave 5 rows, least sure first: %s" % asked)
        print("the labelling loop's curve: %s" % curve)
        # the prose's figures are this block's: within 0.05, as another machine's float
        # kernels may move a prediction or two of the 40 held-out rows
        told = re.search(r"40\s+labels\s+([0-9]+\.[0-9]+),\s+80\s+labels\s+([0-9]+\.[0-9]+),"
                         r"\s+120\s+labels\s+([0-9]+\.[0-9]+)", tutorial)
        check(told is not None and len(curve) == 3 and
              all(abs(float(t) - float(c[2])) <= 0.05 for t, c in zip(told.groups(), curve)),
              "the tutorial tells the curve its block draws: %s against %s"
              % (told.groups() if told else None, [c[2] for c in curve]))

run = subprocess.run([sys.executable, "tests/bench/explain_quality.py", "--quick",
                      "--extension", ext], capture_output=True, text=True)
check(run.returncode == 0 and "| `linear`" in run.stdout,
      "explain_quality.py --quick runs sql/TUTORIAL.md's SQL (exit %d) %s"
      % (run.returncode, (run.stdout + run.stderr).strip().split("\n")[-1]))

print("%d failures" % len(failures))
sys.exit(1 if failures else 0)
