#!/bin/sh
# test_readme.sh -- README.md documents exactly the SQL functions attnext.so registers.
#  - registered: attn_* names from pragma_function_list (scalar functions) and
#    pragma_module_list (table-valued functions) after `.load ./attnext`;
#  - documented: every `attn_NAME(` in README.md, less the model store tables of sql/schema.sql;
#  each set must contain the other. Also: the README's first two commands are `make demo` and
#  `make test`.
SQLITE3=${SQLITE3:-sqlite3}
command -v "$SQLITE3" >/dev/null 2>&1 || { echo "$SQLITE3 not found"; exit 77; }
[ -f attnext.so ] || { echo "attnext.so not built (run make)"; exit 77; }
[ -f README.md ] || { echo "FAIL: README.md is missing"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

"$SQLITE3" -bail :memory: -cmd '.load ./attnext' \
  "SELECT name FROM pragma_function_list WHERE name LIKE 'attn\_%' ESCAPE '\\'
   UNION SELECT name FROM pragma_module_list WHERE name LIKE 'attn\_%' ESCAPE '\\'
   ORDER BY 1;" > "$tmp/registered" 2> "$tmp/err" || {
  echo "FAIL: cannot list the functions of attnext.so:"; cat "$tmp/err"; exit 1; }
[ -s "$tmp/registered" ] || { echo "FAIL: attnext.so registers no attn_* function"; exit 1; }

sed -n 's/.*CREATE TABLE IF NOT EXISTS \([a-z_]*\).*/\1/p' sql/schema.sql | sort -u > "$tmp/tables"
grep -o 'attn_[a-z0-9_]*(' README.md | tr -d '(' | sort -u | grep -vxF -f "$tmp/tables" > "$tmp/documented"

echo "registered by attnext.so: $(tr '\n' ' ' < "$tmp/registered")"
echo "documented in README.md:  $(tr '\n' ' ' < "$tmp/documented")"
echo "(model store tables left out of the README list: $(tr '\n' ' ' < "$tmp/tables"))"
missing=$(comm -23 "$tmp/registered" "$tmp/documented")
extra=$(comm -13 "$tmp/registered" "$tmp/documented")
if [ -n "$missing" ]; then
  echo "FAIL: registered but not documented in README.md (as name( ): $missing"; fails=1
fi
if [ -n "$extra" ]; then
  echo "FAIL: documented in README.md but not registered by attnext.so: $extra"; fails=1
fi

first=$(awk '/^```/ { inside = !inside; next } inside && NF { print; n++ } n == 2 { exit }' README.md |
        tr '\n' ';')
if [ "$first" = "make demo;make test;" ]; then
  echo "ok: README.md starts with make demo, make test"
else
  echo "FAIL: README.md's first two commands must be 'make demo' and 'make test', got: $first"; fails=1
fi
[ $fails -eq 0 ] || exit 1
echo "ok: README.md and attnext.so agree on $(wc -l < "$tmp/registered") functions"
