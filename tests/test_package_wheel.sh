#!/bin/sh
# test_package_wheel.sh -- the Python wheel (make wheel: build/dist/attnext-*.whl) installs
# offline into a fresh venv of Debian's python3 (pip install --no-index) and works there:
# attnext.loadable_path() names the carried library, attnext.load(conn) loads it, and a round
# trip trains (then commit(): Python's sqlite3 opens a transaction) and predicts.
PYTHON=${PYTHON:-/usr/bin/python3}
BUILD=${BUILD:-build}
ATTNEXT=${ATTNEXT:-./attnext}
[ "$ATTNEXT" = ./attnext ] || { echo "packages carry the default build (ATTNEXT=$ATTNEXT)"; exit 77; }
wheel=$(ls "$BUILD"/dist/attnext-*.whl 2>/dev/null | tail -n 1)
[ -f "$wheel" ] || { echo "FAIL no $BUILD/dist/attnext-*.whl (make wheel; make test builds it)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Debian's python3 (not a sanitizer wrapper): its venv module needs python3-venv (tests/deps.sh)
/usr/bin/python3 -m venv "$tmp/venv" || { echo "FAIL python3 -m venv (Debian: python3-venv)"; exit 1; }
"$tmp/venv/bin/pip" install --no-index --no-cache-dir --disable-pip-version-check -q "$wheel" ||
  { echo "FAIL pip install --no-index $wheel"; exit 1; }
cp tests/package_roundtrip.sql "$tmp/"
cd "$tmp" && "$tmp/venv/bin/python" - <<'PY'
import os, sqlite3, sys
import attnext
path = attnext.loadable_path()
print("attnext", attnext.__version__, "from", path)
assert path.startswith(os.path.join(sys.prefix, "lib")), "loadable_path outside the venv: " + path
assert os.path.isfile(path + ".so"), path + ".so missing"
db = os.path.join(os.getcwd(), "t.db")
conn = sqlite3.connect(db)
attnext.load(conn)
lines = [l for l in open("package_roundtrip.sql") if not l.startswith("--")]
rows = []
for stmt in "".join(lines).split(";\n"):
    if stmt.strip():
        rows += conn.execute(stmt).fetchall()
conn.commit()  # the default transaction mode: training's writes are in an open transaction
print(rows[-1][0])
assert rows[-1][0] == "roundtrip sports tech", rows
# the model is in the file: another connection sees it
other = sqlite3.connect(db)
attnext.load(other)
assert other.execute("SELECT attn_predict('m', 'goal match team win')").fetchone()[0] == "sports"
print("ok wheel: installed offline in a venv, loaded, trained, committed, predicted")
PY
