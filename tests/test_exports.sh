#!/bin/sh
# test_exports.sh -- attnext.so exports its SQLite entry point and nothing else: the engine's
# functions (nn_*) and the extension's helpers (attn_*) stay hidden, so they cannot clash with
# the host's symbols (SQLite opens extensions with RTLD_GLOBAL in some hosts). Checks the
# dynamic symbol table with nm -D --defined-only, then that the shell still loads the library.
ATTNEXT=${ATTNEXT:-./attnext}
SQLITE3=${SQLITE3:-sqlite3}
command -v nm >/dev/null 2>&1 || { echo "nm not found (binutils)"; exit 77; }
[ -f "$ATTNEXT.so" ] || { echo "$ATTNEXT.so not built (run make)"; exit 77; }
exports=$(nm -D --defined-only "$ATTNEXT.so" | awk '{print $NF}' | sort | tr '\n' ' ')
echo "exported by $ATTNEXT.so: $exports"
[ "$exports" = "sqlite3_attnext_init " ] || { echo "FAIL expected only sqlite3_attnext_init"; exit 1; }
# the engine's code is in there, just not exported
nm "$ATTNEXT.so" 2>/dev/null | grep -q ' nn_model_init$' && echo "ok nn_model_init present, hidden"
out=$($SQLITE3 :memory: ".load $ATTNEXT" "SELECT attn_version() LIKE 'attnext %';" 2>&1)
[ "$out" = 1 ] || { echo "FAIL load after hiding: $out"; exit 1; }
echo "ok loads and serves attn_version()"
