#!/bin/sh
# test_ext_json.sh -- ext/ reads and writes JSON with the engine (engine/json.c: nn_json_parse,
# nn_options_parse, nn_strbuf), not with SQLite's JSON functions, so that attnext can leave
# SQLite's JSON1 behind (issue 23; a host built with SQLITE_OMIT_JSON). Lists every json_*( call
# and -> / ->> operator in the SQL strings of ext/; only the files below may still have them.
# When one of them stops using JSON1, take it off the list (the last one: also the JSON check of
# attn_host_check in ext/attnext.c, and the README's requirement).
allowed='ext/attn_jobs.c ext/attn_job_runner.c ext/attnext.c'
found=$(grep -nE '"([^"]*[^a-z_"])?json_[a-z_]+\(|"[^"]*(->>|-> *'"'"')' ext/*.c ext/node/*.c)
bad=0
files=$(printf '%s\n' "$found" | sed -n 's/:.*//p' | sort -u)
for f in $files; do
  case " $allowed " in
  *" $f "*) echo "allowed for now: $f ($(printf '%s\n' "$found" | grep -c "^$f:") lines)" ;;
  *) printf '%s\n' "$found" | grep "^$f:" | sed 's/^/FAIL SQLite JSON function: /'; bad=1 ;;
  esac
done
for f in $allowed; do
  printf '%s\n' "$found" | grep -q "^$f:" ||
    { echo "FAIL $f uses no JSON function any more: take it off the list in $0"; bad=1; }
done
[ $bad = 0 ] && echo "ok ext/ calls no SQLite JSON function outside: $allowed"
exit $bad
