#!/bin/sh
# test_package_wheel.sh -- the Python wheel (make wheel: build/dist/attnext-*.whl, named by
# build/dist/attnext.whl.name) installs offline into a fresh venv of Debian's python3 (pip install
# --no-index; the venv sees Debian's apsw and sqlite_utils) and works there
# (tests/package_wheel.py): loadable_path(), load() with sqlite3, APSW and sqlite-utils, a round
# trip, Ctrl-C stopping attn_fit / attn_train with nothing saved. Then, as root, in a mount
# namespace where the system's OpenBLAS, libgfortran and libquadmath are hidden (unshare -m,
# /dev/null mounted over each), a plain build of attnext.so no longer loads, and the wheel's
# still does: it carries its own, renamed, beside attnext.so; its tag is manylinux_2_X.
PYTHON=${PYTHON:-/usr/bin/python3}
BUILD=${BUILD:-build}
ATTNEXT=${ATTNEXT:-./attnext}
[ "$ATTNEXT" = ./attnext ] || { echo "packages carry the default build (ATTNEXT=$ATTNEXT)"; exit 77; }
name=$(cat "$BUILD/dist/attnext.whl.name" 2>/dev/null)
wheel=$BUILD/dist/$name
[ -n "$name" ] && [ -f "$wheel" ] || { echo "FAIL no wheel in $BUILD/dist (make wheel; make test builds it)"; exit 1; }
fail=0
case $name in *-py3-none-manylinux_2_[0-9]*_x86_64.whl) echo "ok tag: $name" ;;
  *) echo "FAIL not a manylinux_2_X tag: $name"; fail=1 ;; esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Debian's python3 (not a sanitizer wrapper): its venv module needs python3-venv (tests/deps.sh)
/usr/bin/python3 -m venv --system-site-packages "$tmp/venv" || { echo "FAIL python3 -m venv (Debian: python3-venv)"; exit 1; }
"$tmp/venv/bin/pip" install --no-index --no-cache-dir --disable-pip-version-check -q "$wheel" ||
  { echo "FAIL pip install --no-index $wheel"; exit 1; }
cp tests/package_roundtrip.sql tests/package_wheel.py "$tmp/"
(cd "$tmp" && "$tmp/venv/bin/python" package_wheel.py all) || fail=1

# Without the system's OpenBLAS (and the Fortran runtime it needs)
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null 2>&1; then
  hide=""
  for lib in libopenblas.so.0 libgfortran.so.5 libquadmath.so.0; do
    real=$(ldd ./attnext.so | sed -n "s|^\s*$lib => \(/[^ ]*\).*|\1|p")
    [ -n "$real" ] && hide="$hide $(readlink -f "$real")"
  done
  echo "hidden in the namespace:$hide"
  plain=$(pwd)/attnext
  out=$(cd "$tmp" && unshare -m --propagation private sh -c '
    for f in '"$hide"'; do mount --bind /dev/null "$f" || exit 3; done
    echo "-- a plain build:"; sqlite3 :memory: ".load '"$plain"'" "SELECT 1" 2>&1
    echo "-- the wheel:"; venv/bin/python package_wheel.py roundtrip 2>&1' 2>&1)
  echo "$out" | sed 's/^/  | /'
  case $out in *"-- a plain build:"*"Error: "*"libopenblas.so.0"*"-- the wheel:"*) echo "ok the system OpenBLAS is hidden: a plain attnext.so does not load" ;;
    *) echo "FAIL the system OpenBLAS was not hidden (a plain attnext.so loaded)"; fail=1 ;; esac
  case $out in *"package_wheel.py roundtrip: 0 failed"*) echo "ok the wheel works without the system OpenBLAS" ;;
    *) echo "FAIL the wheel without the system OpenBLAS"; fail=1 ;; esac
else
  echo "FAIL not root or no unshare: the wheel was not tried without the system OpenBLAS (CI runs as root)"
  fail=1
fi
exit $fail
