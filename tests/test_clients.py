#!/usr/bin/env python3
"""test_clients.py -- runs every snippet of ext/CLIENTS.md's "From your language" with its client, as
a user would copy it: Python's sqlite3, APSW, sqlite-utils, litecli, Go (mattn/go-sqlite3), Rust
(rusqlite), Java (sqlite-jdbc), Ruby, PHP, Perl (DBD::SQLite), Tcl -- each from Debian's
packages (tests/deps.sh installs them).

Each runs in a directory of its own holding attnext.so and news.db (the demo headlines in
headlines(title, category), a model 'news' already trained as version 1). A snippet that trains
must print attn_fit's summary of version 2 and a label; one that cancels a training of 'slow'
must print "cancelled" and leave no 'slow' model (and no third 'news' version) in the file.
Every code block of the section is run here or named in UNTESTED with the reason. Go and Rust
are compiled offline (Debian's Go sources and Rust crates) with their caches in build/clients/,
so a second run only links.
"""
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
CACHE = os.path.join(ROOT, "build", "clients")
ATTNEXT = os.environ.get("ATTNEXT", "./attnext")
CATEGORIES = {"World", "Sports", "Business", "Sci/Tech"}
UNTESTED = {"Node": "node-sqlite3 is not installable offline without a native build of minutes "
                    "(better-sqlite3 and node:sqlite are tested by test_package_npm.sh)"}
failures = 0


def check(cond, what):
    global failures
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    failures += 0 if cond else 1
    return cond


if ATTNEXT != "./attnext":
    print("the clients load the default build (ATTNEXT=%s)" % ATTNEXT)
    sys.exit(77)
if not os.path.exists(os.path.join(ROOT, "attnext.so")):
    print("attnext.so not built (run make)")
    sys.exit(77)


def snippets():
    """{heading: [(language, code)]} of the section "From your language"."""
    with open(os.path.join(ROOT, "ext", "CLIENTS.md"), encoding="utf-8") as f:
        text = f.read()
    section = text.split("\n## From your language\n", 1)[1].split("\n## ", 1)[0]
    out = {}
    for part in re.split(r"\n### ", section)[1:]:
        heading, body = part.split("\n", 1)
        out[heading.strip()] = re.findall(r"```(\w+)\n(.*?)```", body, re.S)
    return out


def base_db(path):
    """news.db: the demo headlines and a model 'news' (version 1)."""
    import csv
    conn = sqlite3.connect(path, isolation_level=None)
    conn.enable_load_extension(True)
    conn.load_extension(os.path.join(ROOT, "attnext"))
    conn.execute("CREATE TABLE headlines(title TEXT, category TEXT)")
    with open(os.path.join(ROOT, "data", "headlines.csv"), newline="") as f:
        rows = list(csv.reader(f))[1:]
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO headlines VALUES(?, ?)", rows)
    conn.execute("COMMIT")
    conn.execute("SELECT attn_fit('news', 'SELECT title, category FROM headlines', "
                 "'{\"epochs\": 1, \"progress\": false}')").fetchone()
    conn.close()


def go_build(work, code):
    with open(os.path.join(work, "main.go"), "w") as f:
        f.write(code)
    env = dict(os.environ, GO111MODULE="off", GOPATH="/usr/share/gocode", GOFLAGS="",
               GOPROXY="off", GOCACHE=os.path.join(CACHE, "go-cache"))
    return [["go", "build", "-tags", "libsqlite3", "-o", "example", "main.go"]], env, ["./example"]


def rust_build(work, code):
    project = os.path.join(CACHE, "rust")
    os.makedirs(os.path.join(project, "src"), exist_ok=True)
    os.makedirs(os.path.join(project, ".cargo"), exist_ok=True)
    with open(os.path.join(project, "Cargo.toml"), "w") as f:
        f.write('[package]\nname = "attnext_example"\nversion = "0.1.0"\nedition = "2021"\n\n'
                '[dependencies]\nrusqlite = { version = "0.28", features = ["load_extension"] }\n')
    with open(os.path.join(project, ".cargo", "config.toml"), "w") as f:
        f.write('[source.crates-io]\nreplace-with = "debian"\n[source.debian]\n'
                'directory = "/usr/share/cargo/registry"\n[net]\noffline = true\n')
    with open(os.path.join(project, "src", "main.rs"), "w") as f:
        f.write(code)
    target = os.path.join(project, "target")
    # cargo reads .cargo/config.toml from the directory it runs in
    return ([["sh", "-c", 'cd "$1" && cargo build -q --offline', "sh", project]],
            dict(os.environ, CARGO_TARGET_DIR=target),
            [os.path.join(target, "debug", "attnext_example")])


def simple(name, argv):
    def prepare(work, code):
        with open(os.path.join(work, name), "w") as f:
            f.write(code)
        return [], dict(os.environ), [a.replace("{work}", work) for a in argv]
    return prepare


# heading -> (language of its block, tool that must be there, how to build and run it)
CLIENTS = {
    "Python (sqlite3)": ("python", "/usr/bin/python3", simple("example.py", ["/usr/bin/python3", "example.py"])),
    "APSW": ("python", "/usr/bin/python3", simple("example.py", ["/usr/bin/python3", "example.py"])),
    "sqlite-utils": ("sh", "sqlite-utils", simple("example.sh", ["sh", "example.sh"])),
    "litecli": ("sh", "litecli", simple("example.sh", ["sh", "example.sh"])),
    "Go (mattn/go-sqlite3)": ("go", "go", go_build),
    "Rust (rusqlite)": ("rust", "cargo", rust_build),
    "Java (sqlite-jdbc)": ("java", "java", simple("Attnext.java", [
        "java", "-cp", "/usr/share/java/sqlite-jdbc.jar", "Attnext.java"])),
    "Ruby (sqlite3 gem)": ("ruby", "ruby", simple("example.rb", ["ruby", "example.rb"])),
    "PHP (SQLite3)": ("php", "php", simple("example.php", [
        "php", "-d", "sqlite3.extension_dir={work}", "example.php"])),
    "Perl (DBD::SQLite)": ("perl", "perl", simple("example.pl", ["perl", "example.pl"])),
    "Tcl": ("tcl", "tclsh", simple("example.tcl", ["tclsh", "example.tcl"])),
}

found = snippets()
for heading, blocks in found.items():
    if blocks and heading not in CLIENTS and not any(heading.startswith(u) for u in UNTESTED):
        check(False, "ext/CLIENTS.md section %r has code that no test runs" % heading)
for heading in CLIENTS:
    check(heading in found and found[heading], "ext/CLIENTS.md has a snippet under '### %s'" % heading)
for heading, why in UNTESTED.items():
    print("not run: %s: %s" % (heading, why))

tmp = tempfile.mkdtemp()
os.makedirs(CACHE, exist_ok=True)
base = os.path.join(tmp, "base.db")
base_db(base)
total = time.monotonic()
for heading, (lang, tool, prepare) in CLIENTS.items():
    blocks = [code for language, code in found.get(heading, []) if language == lang]
    if not blocks:
        continue
    code = blocks[0]
    if not shutil.which(tool):
        check(False, "%s: %s not found (tests/deps.sh installs it)" % (heading, tool))
        continue
    work = os.path.join(tmp, re.sub(r"\W+", "_", heading))
    os.makedirs(work)
    shutil.copyfile(base, os.path.join(work, "news.db"))
    # a copy: PHP refuses a link that leads out of sqlite3.extension_dir
    shutil.copyfile(os.path.join(ROOT, "attnext.so"), os.path.join(work, "attnext.so"))
    builds, env, run = prepare(work, code)
    if tool == "litecli":
        env["HOME"] = work  # it writes its config and history there
    start = time.monotonic()
    out, ok = "", True
    for cmd in builds:
        p = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            out, ok = p.stdout + p.stderr, False
            break
    built = time.monotonic() - start
    if ok:
        p = subprocess.run(run, cwd=work, env=env, capture_output=True, text=True, timeout=120,
                           stdin=subprocess.DEVNULL)
        out, ok = p.stdout + p.stderr, p.returncode == 0
    took = time.monotonic() - start
    lines = [line.strip() for line in out.splitlines()]
    print("  | " + "\n  | ".join(line[:110] for line in lines[-8:]))
    if not check(ok, "%s: ran (%.1f s, %.1f s of it building)" % (heading, took, built)):
        continue
    conn = sqlite3.connect(os.path.join(work, "news.db"))
    versions = dict(conn.execute("SELECT name, max(version) FROM attn_models GROUP BY name"))
    if "attn_fit" in code:
        check(any('"name":"news","version":2' in line.replace("\\", "") for line in lines),
              "%s: attn_fit trained version 2 and printed its summary" % heading)
        check(versions.get("news") == 2, "%s: the file holds 'news' versions 1..%s"
              % (heading, versions.get("news")))
    check(any(line.strip('[]{}" ').split('": "')[-1] in CATEGORIES for line in lines),
          "%s: printed a label" % heading)
    if "'slow'" in code or "100000" in code:
        check(any("cancelled" in line for line in lines), "%s: the slow training was cancelled" % heading)
        check("slow" not in versions, "%s: the cancelled training saved nothing" % heading)
print("all clients: %.1f s" % (time.monotonic() - total))
shutil.rmtree(tmp)
print("test_clients: %d failed" % failures)
sys.exit(1 if failures else 0)
