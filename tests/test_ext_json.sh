#!/bin/sh
# test_ext_json.sh -- ext/ reads and writes JSON with the engine (engine/json.c: nn_json_parse,
# nn_options_parse, nn_strbuf; attn_json_value for SQL values), not with SQLite's JSON
# functions, so that attnext needs no JSON1 in its host (a host built with
# SQLITE_OMIT_JSON; the entry point no longer checks for it). Fails on any json(, jsonb( or
# json_*( / jsonb_*( call and any -> / ->> operator in the SQL strings of ext/ and ext/node/.
found=$(grep -nE '"([^"]*[^a-z_"])?jsonb?(_[a-z_]+)?\(|"[^"]*(->>|-> *'"'"')' ext/*.c ext/*.h ext/node/*.c)
if [ -n "$found" ]; then
  printf '%s\n' "$found" | sed 's/^/FAIL SQLite JSON function: /'
  exit 1
fi
grep -q 'json_valid' ext/attnext.c && { echo "FAIL ext/attnext.c still checks for JSON1"; exit 1; }
echo "ok ext/ calls no SQLite JSON function"
