#!/bin/sh
# test_readme.sh -- the reference (ext/REFERENCE.md) documents exactly the SQL functions
# attnext.so registers, and those that only a dqlite node (build/attnext-node) adds.
#  - registered: attn_* names from pragma_function_list (scalar functions) and
#    pragma_module_list (table-valued functions) after `.load ./attnext`;
#  - the node's: the names of the registration table of ext/node/attn_jobs.c, which attnext.so
#    must not register, each documented in a section that names attnext-node; the tests' module
#    $ATTNEXT_JOBS.so (attnext registered as the node registers it) must register exactly both
#    sets, and the sections are checked against it (against attnext.so where it is not built);
#  - documented: every `attn_NAME(` in ext/REFERENCE.md, less the model store tables of sql/schema.sql;
#  each set must contain the other; each function's section names its arguments and result
#  columns; every training option appears in the reference's options table with the default a model
#  trained without options stores in attn_models.config. Also: README.md's first two commands
#  are `make demo` and `make test`.
SQLITE3=${SQLITE3:-sqlite3}
export LC_ALL=C # sort and comm order as SQLite's ORDER BY
# $SQLITE3 may be a command line (make test-asan: env LD_PRELOAD=... sqlite3); the extension
# is $ATTNEXT (default ./attnext, as `.load` takes it: without .so).
ATTNEXT=${ATTNEXT:-./attnext}
ATTNEXT_JOBS=${ATTNEXT_JOBS:-${BUILD:-build}/tests/attnext_jobs_test}
command -v ${SQLITE3%% *} >/dev/null 2>&1 || { echo "$SQLITE3 not found"; exit 77; }
[ -f "$ATTNEXT.so" ] || { echo "$ATTNEXT.so not built (run make)"; exit 77; }
[ -f README.md ] || { echo "FAIL: README.md is missing"; exit 1; }
REF=ext/REFERENCE.md
[ -f $REF ] || { echo "FAIL: $REF is missing"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

$SQLITE3 -bail :memory: -cmd ".load $ATTNEXT" \
  "SELECT name FROM pragma_function_list WHERE name LIKE 'attn\_%' ESCAPE '\\'
   UNION SELECT name FROM pragma_module_list WHERE name LIKE 'attn\_%' ESCAPE '\\'
   ORDER BY 1;" > "$tmp/registered" 2> "$tmp/err" || {
  echo "FAIL: cannot list the functions of attnext.so:"; cat "$tmp/err"; exit 1; }
[ -s "$tmp/registered" ] || { echo "FAIL: attnext.so registers no attn_* function"; exit 1; }

sed -n 's/.*CREATE TABLE IF NOT EXISTS \([a-z_]*\).*/\1/p' sql/schema.sql | sort -u > "$tmp/tables"
grep -o 'attn_[a-z0-9_]*(' $REF | tr -d '(' | sort -u | grep -vxF -f "$tmp/tables" > "$tmp/documented"

# the node's own functions: its registration table (ext/node/attn_jobs.c)
sed -n 's/^ *{"\(attn_[a-z0-9_]*\)",.*/\1/p' ext/node/attn_jobs.c | sort -u > "$tmp/node"
[ -s "$tmp/node" ] || { echo "FAIL: no registration table read from ext/node/attn_jobs.c"; fails=1; }
both=$(comm -12 "$tmp/registered" "$tmp/node")
if [ -n "$both" ]; then
  echo "FAIL: attnext.so registers functions that only the node has: $both"; fails=1
else
  echo "ok: attnext.so registers none of the node's functions ($(tr '\n' ' ' < "$tmp/node"))"
fi
sort -u "$tmp/registered" "$tmp/node" > "$tmp/all"
loader=$ATTNEXT
if [ -f "$ATTNEXT_JOBS.so" ]; then
  $SQLITE3 -bail :memory: -cmd ".load $ATTNEXT_JOBS" \
    "SELECT name FROM pragma_function_list WHERE name LIKE 'attn\_%' ESCAPE '\\'
     UNION SELECT name FROM pragma_module_list WHERE name LIKE 'attn\_%' ESCAPE '\\'
     ORDER BY 1;" > "$tmp/node_registered" 2>&1
  if cmp -s "$tmp/node_registered" "$tmp/all"; then
    echo "ok: $ATTNEXT_JOBS.so (as the node) registers attnext.so's functions and the node's"
    loader=$ATTNEXT_JOBS
  else
    echo "FAIL: $ATTNEXT_JOBS.so registers $(tr '\n' ' ' < "$tmp/node_registered"), not attnext.so's and the node's"
    fails=1
  fi
elif [ -n "${PLATFORM:-}" ]; then
  echo "the node's functions are not built for $PLATFORM: their sections are not checked"
else
  echo "SKIP-PART the node's functions' sections: $ATTNEXT_JOBS.so not built (make check builds it)"
fi

echo "registered by attnext.so: $(tr '\n' ' ' < "$tmp/registered")"
echo "documented in $REF:  $(tr '\n' ' ' < "$tmp/documented")"
echo "(model store tables left out of the reference's list: $(tr '\n' ' ' < "$tmp/tables"))"
missing=$(comm -23 "$tmp/all" "$tmp/documented")
extra=$(comm -13 "$tmp/all" "$tmp/documented")
if [ -n "$missing" ]; then
  echo "FAIL: registered but not documented in $REF (as name( ): $missing"; fails=1
fi
if [ -n "$extra" ]; then
  echo "FAIL: documented in $REF but registered neither by attnext.so nor by the node: $extra"; fails=1
fi

# Each function has a section "### attn_NAME(args)": a table-valued function's arguments (its
# hidden columns) are named in the heading and its result columns appear in the section as
# `column`; a scalar function's heading shows each argument count it is registered with.
sql() { $SQLITE3 -bail :memory: -cmd ".load $loader" "$1"; }
section() { awk -v h="### $1(" 'index($0, h) == 1 { p = 1; print; next } /^##/ { p = 0 } p' $REF; }
# a node's function says where it is
for f in $(cat "$tmp/node"); do
  if section "$f" | grep -q 'attnext-node'; then echo "ok: $f: its section says it is the node's"
  else echo "FAIL: $f: its section in $REF does not say that only attnext-node has it"; fails=1; fi
done
# Every table-valued function's columns in one run of the shell (module|column|hidden), not a few
# runs per function: each run starts the shell and loads the extension (a second under qemu).
sql "SELECT m.name, x.name, x.hidden FROM pragma_module_list AS m, pragma_table_xinfo(m.name) AS x
     WHERE m.name LIKE 'attn\_%' ESCAPE '\\' ORDER BY m.name, x.cid" > "$tmp/columns" 2> "$tmp/err" ||
  { echo "FAIL: cannot list the table-valued functions' columns:"; cat "$tmp/err"; exit 1; }
# columns F WHAT: F's columns, in order; WHAT: shown, hidden (not arg_NAME) or args (arg_NAME)
columns() {
  awk -F'|' -v f="$1" -v what="$2" '$1 != f { next }
    what == "shown" && $3 == 0 || what == "hidden" && $3 != 0 && tolower($2) !~ /^arg_/ ||
    what == "args" && $3 != 0 && tolower($2) ~ /^arg_/ { print $2 }' "$tmp/columns"
}
for f in $(sql "SELECT name FROM pragma_module_list WHERE name LIKE 'attn\_%' ESCAPE '\\' ORDER BY 1"); do
  text=$(section "$f")
  if [ -z "$text" ]; then echo "FAIL: $REF has no section '### $f('"; fails=1; continue; fi
  heading=$(echo "$text" | head -n 1)
  grep -q "^$f|" "$tmp/columns" || { echo "FAIL: $f: pragma_table_xinfo lists no column"; fails=1; continue; }
  bad=0
  for col in $(columns "$f" shown); do
    echo "$text" | grep -qF "\`$col\`" || { echo "FAIL: $f: result column $col not in its section of $REF"; bad=1; }
  done
  # a hidden column that is not an argument (arg_NAME) is a result column SELECT * leaves out
  for col in $(columns "$f" hidden); do
    echo "$text" | grep -qF "\`$col\`" || { echo "FAIL: $f: hidden result column $col not in its section of $REF"; bad=1; }
  done
  for arg in $(columns "$f" args); do
    arg=${arg#arg_} # the arguments are named arg_NAME so as not to clash with result columns
    echo "$heading" | grep -qw "$arg" || { echo "FAIL: $f: argument $arg not in the heading: $heading"; bad=1; }
  done
  [ $bad -eq 0 ] || { fails=1; continue; }
  echo "ok: $f: columns $(columns "$f" shown | paste -sd, -) and arguments documented"
done
sql "SELECT DISTINCT name, narg FROM pragma_function_list WHERE name LIKE 'attn\_%' ESCAPE '\\' ORDER BY 1, 2" |
while IFS='|' read -r f narg; do
  counts=$(section "$f" | head -n 1 | grep -o "$f([^)]*)" |
           awk -F'(' '{ a = $2; sub(/\)$/, "", a); gsub(/[^,]/, "", a); print ($2 == ")") ? 0 : length(a) + 1 }')
  if echo "$counts" | grep -qx "$narg"; then
    echo "ok: $f with $narg argument(s) documented"
  else
    echo "FAIL: $f is registered with $narg argument(s); its heading in $REF shows: $(echo $counts)"
    echo 1 > "$tmp/scalar_fail"
  fi
done
[ -f "$tmp/scalar_fail" ] && fails=1

# Training options: the reference's table (## Training options) against the config JSON a model
# trained with no options stores (every nn_config key with its default); a documented option that is
# not in it (handled by ext/, e.g. "embeddings") must at least not be an unknown option.
data="CREATE TABLE t(a, b); INSERT INTO t VALUES ('x y', 'p'), ('z w', 'q'), ('x z', 'p'),
      ('y w', 'q'), ('x', 'p'), ('w', 'q'), ('x x', 'p'), ('w w', 'q');"
sql "$data SELECT count(*) FROM attn_train('m', 'SELECT a, b FROM t');
     SELECT key || '=' || CASE type WHEN 'text' THEN '\"' || value || '\"' WHEN 'true' THEN 'true'
       WHEN 'false' THEN 'false' ELSE value END FROM attn_models, json_each(config)
     ORDER BY key;" 2> "$tmp/err" | tail -n +2 | sort > "$tmp/config"
[ -s "$tmp/config" ] || { echo "FAIL: could not read a default config:"; cat "$tmp/err"; fails=1; }
sed -n '/^## Training options/,/^## /p' $REF |
  sed -n 's/^| `\([a-z_]*\)` | \([^|]*\) |.*/\1=\2/p' | sed 's/ *$//; s/`//g' | sort > "$tmp/options"
echo "options in $REF: $(cut -d= -f1 "$tmp/options" | tr '\n' ' ')"
# the options the default recipe sizes to the rows (engine/config.c, nn_config_size_to_data):
# documented as such, and stored (with the value chosen for these 8 rows)
sed -n 's/=sized to the data$//p' "$tmp/options" > "$tmp/sized"
for key in $(cat "$tmp/sized"); do
  grep -q "^$key=" "$tmp/config" || { echo "FAIL: $REF says $key is sized to the data, but no model stores it"; fails=1; }
done
echo "sized to the data: $(tr '\n' ' ' < "$tmp/sized")"
grep -v -f "$tmp/sized" -e '^$' "$tmp/config" | grep -v "^\($(paste -sd'|' "$tmp/sized" | sed 's/|/\\|/g')\)=" > "$tmp/config.fixed" || true
grep -v "=sized to the data$" "$tmp/options" > "$tmp/options.fixed"
mv "$tmp/config.fixed" "$tmp/config"; mv "$tmp/options.fixed" "$tmp/options"
missing=$(comm -23 "$tmp/config" "$tmp/options")
[ -z "$missing" ] || { echo "FAIL: option defaults of the engine not in $REF as documented (key=default): $missing"; fails=1; }
cut -d= -f1 "$tmp/config" > "$tmp/keys"
# All in one run of the shell (it goes on after an error: no -bail), each on a query of no rows:
# attn_train parses its options before it reads a row, so an unknown one is refused with no
# training (a training each took a second, ten under qemu); the made-up option first shows that
# this path does refuse one.
cut -d= -f1 "$tmp/options" | comm -13 "$tmp/keys" - > "$tmp/unstored"
{ echo "CREATE TABLE t(a, b);"
  for key in no_such_option_ $(cat "$tmp/unstored"); do
    echo "SELECT 'option $key';"
    echo "SELECT count(*) FROM attn_train('m', 'SELECT a, b FROM t WHERE 0', '{\"$key\": null}');"
  done
} | $SQLITE3 -batch :memory: -cmd ".load $ATTNEXT" > "$tmp/unstored.out" 2>&1
# said KEY: what the shell printed for option KEY
said() { awk -v k="option $1" '$0 == k { p = 1; next } /^option / { p = 0 } p' "$tmp/unstored.out"; }
if said no_such_option_ | grep -q "unknown option"; then
  echo "ok: a made-up option is refused on a query of no rows: $(said no_such_option_)"
else
  echo "FAIL: attn_train did not refuse a made-up option: $(said no_such_option_)"; fails=1
fi
for key in $(cat "$tmp/unstored"); do
  msg=$(said "$key")
  if [ -z "$msg" ] || echo "$msg" | grep -q "unknown option"; then
    echo "FAIL: $REF documents option $key, attn_train says: ${msg:-nothing}"; fails=1
  else
    echo "ok: option $key (not in the stored config) is known to attn_train"
  fi
done
[ -z "$missing" ] && echo "ok: $(wc -l < "$tmp/config") option defaults match $REF"
# ... and the prose says the same: a paragraph outside the tables that names one option and
# calls a value "(the default)", "by default `...`" or "the default is `...`" must give the
# table's default.
${PYTHON:-python3} - "$REF" "$tmp/options" <<'PYEOF' || fails=1
import re, sys
ref, options = sys.argv[1], sys.argv[2]
table = dict(l.rstrip("\n").split("=", 1) for l in open(options) if "=" in l)
bad = checked = 0
for para in re.split(r"\n\s*\n", open(ref).read()):
    if para.lstrip().startswith("|"):
        continue
    para = " ".join(para.split())
    said = [m.group(1) for m in re.finditer(r"`([^`]+)` \(the default\)", para)]
    said += [m.group(1) for m in re.finditer(r"(?:by default|the default is|default:) `([^`]+)`", para)]
    named = [k for k in table if re.search(r'[`"]%s[`"]' % re.escape(k), para)]
    if not said or len(named) != 1:
        continue
    want = table[named[0]].strip('"')
    for value in said:
        checked += 1
        if value.strip('"') != want:
            bad += 1
            print(f"FAIL: {ref} says {named[0]} is {value} by default, its table {want}: "
                  f"{para[:160]}")
print(f"ok: {checked} defaults told in the prose of {ref} match its table" if not bad else "")
sys.exit(1 if bad else 0)
PYEOF

first=$(awk '/^```/ { inside = !inside; next } inside && NF { print; n++ } n == 2 { exit }' README.md |
        tr '\n' ';')
if [ "$first" = "make demo;make test;" ]; then
  echo "ok: README.md starts with make demo, make test"
else
  echo "FAIL: README.md's first two commands must be 'make demo' and 'make test', got: $first"; fails=1
fi
[ $fails -eq 0 ] || exit 1
echo "ok: $REF, attnext.so and the node agree on $(wc -l < "$tmp/all") functions"
