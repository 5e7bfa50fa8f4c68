#!/bin/sh
# test_old_sqlite.sh -- loaded into an SQLite older than 3.37 (Debian's sqlcipher 3.4.1 is
# SQLite 3.15.2), the extension refuses to load with an error naming the version it found and
# the one it needs, and nothing crashes afterwards. Before the check, `.load` succeeded and
# attn_predict died with SIGSEGV (sqlite3_txn_state is missing from 3.15's routine table).
ATTNEXT=${ATTNEXT:-./attnext}
command -v sqlcipher >/dev/null 2>&1 || { echo "FAIL sqlcipher not found (tests/deps.sh installs it)"; exit 1; }
fail=0
old=$(echo 'SELECT sqlite_version();' | sqlcipher :memory: 2>&1)
echo "sqlcipher is SQLite $old"
case $old in 3.[0-9].*|3.[12][0-9].*|3.3[0-6].*) ;;
  *) echo "sqlcipher's SQLite $old is not older than 3.37: this test proves nothing here"; exit 77 ;; esac
out=$(printf '.load %s\nSELECT attn_predict(%s);\nSELECT 42;\n' "$ATTNEXT" "'news', 'Stocks fall'" |
      env ${ATTNEXT_PRELOAD:+LD_PRELOAD=$ATTNEXT_PRELOAD} sqlcipher :memory: 2>&1)
rc=$?
echo "$out" | sed 's/^/  | /'
[ $rc -lt 128 ] && echo "ok no crash (exit $rc)" || { echo "FAIL sqlcipher died (exit $rc)"; fail=1; }
case $out in *"attnext: needs SQLite 3.37.0 or later, this is SQLite $old"*) echo "ok refused, naming $old and 3.37.0" ;;
  *) echo "FAIL no refusal naming SQLite $old and 3.37.0"; fail=1 ;; esac
case $out in *"no such function: attn_predict"*) echo "ok attn_predict not registered" ;;
  *) echo "FAIL attn_predict registered after a refused load"; fail=1 ;; esac
case $out in *42*) echo "ok the shell goes on" ;; *) echo "FAIL the shell stopped"; fail=1 ;; esac
exit $fail
