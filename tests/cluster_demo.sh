#!/bin/sh
# cluster_demo.sh -- `make cluster-demo`: the model store on a three-node dqlite cluster.
# Starts three attnext-node processes on loopback ports, imports the demo headlines
# (data/headlines.csv), trains through the dqlite shell (a job: attn_jobs shows its progress),
# predicts, kills the leader, predicts
# the same from the new leader, restarts the killed node and stops everything. Also times
# predictions through the dqlite shell against a local sqlite3 connection.
#   BUILD=build sh tests/cluster_demo.sh        (from the repository root, after make)
set -u
BUILD=${BUILD:-build}
NODE=$BUILD/attnext-node
PY=${PYTHON:-/usr/bin/python3}
SQLITE3=${SQLITE3:-sqlite3}
command -v dqlite >/dev/null || { echo "cluster-demo: no dqlite shell (sh tests/deps.sh installs go-dqlite)"; exit 1; }
[ -x "$NODE" ] || { echo "cluster-demo: no $NODE (install libdqlite-dev, then make)"; exit 1; }

dir=$(mktemp -d /tmp/attn-cluster-demo.XXXXXX)
ports=$($PY -c 'import socket
s=[socket.socket() for _ in range(3)]
[x.bind(("127.0.0.1", 0)) for x in s]
print(" ".join(str(x.getsockname()[1]) for x in s))')
set -- $ports
A1=127.0.0.1:$1 A2=127.0.0.1:$2 A3=127.0.0.1:$3
ALL="-s $A1 -s $A2 -s $A3"
pids=""

start() { # id [join address]
  if [ $# -gt 1 ]; then
    "$NODE" --id "$1" --address "$(addr "$1")" --dir "$dir/n$1" --join "$2" 2>>"$dir/node$1.log" &
  else
    "$NODE" --id "$1" --address "$(addr "$1")" --dir "$dir/n$1" 2>>"$dir/node$1.log" &
  fi
  echo $! > "$dir/pid$1"
}
addr() { eval echo "\$A$1"; }
alive() { kill -0 "$(cat "$dir/pid$1")" 2>/dev/null; }
servers() { s=""; for i in 1 2 3; do alive $i && s="$s -s $(addr $i)"; done; echo "$s"; }
sql() { dqlite $(servers) news "$1"; }
show() { echo "dqlite> $1"; sql "$1"; }
stop_all() {
  for i in 1 2 3; do alive $i && kill "$(cat "$dir/pid$i")"; done
  for i in 1 2 3; do [ -f "$dir/pid$i" ] && wait "$(cat "$dir/pid$i")" 2>/dev/null; done
}
die() {
  echo "cluster-demo: $*"
  for i in 1 2 3; do echo "--- node $i"; tail -n 5 "$dir/node$i.log" 2>/dev/null; done
  stop_all; rm -rf "$dir"; exit 1
}
now() { $PY -c 'import time; print(time.monotonic())'; }
since() { $PY -c "import time; print('%.2f' % (time.monotonic() - $1))"; }
trap 'stop_all; rm -rf "$dir"; exit 1' INT TERM

echo "== 1. Three nodes on $A1 $A2 $A3 (data in $dir; logs: node*.log)"
start 1
sleep 0.5
start 2 "$A1"
start 3 "$A1"
n=0
until [ "$(dqlite $ALL news .cluster 2>/dev/null | grep -c '|voter$')" = 3 ]; do
  n=$((n + 1)); [ $n -gt 150 ] && die "the cluster did not form"
  sleep 0.2
done
show .cluster

echo
echo "== 2. Import data/headlines.csv through the shell (every fifth row held out)"
$PY - "$dir/import.sql" <<'EOF'
import csv, sys
q = lambda s: "'" + s.replace("'", "''") + "'"
rows = list(csv.DictReader(open("data/headlines.csv", newline="")))
new = list(csv.DictReader(open("data/new_headlines.csv", newline="")))
with open(sys.argv[1], "w") as f:
    f.write("INSERT INTO headlines(title, category) VALUES " + ", ".join(
        "(%s, %s)" % (q(r["title"]), q(r["category"])) for r in rows) + "\n")
    f.write("INSERT INTO new_headlines(title, category) VALUES " + ", ".join(
        "(%s, %s)" % (q(r["title"]), q(r["category"])) for r in new) + "\n")
EOF
sql "CREATE TABLE headlines(title TEXT, category TEXT)" || die "create table"
sql "CREATE TABLE new_headlines(title TEXT, category TEXT)" || die "create table"
sql "$(sed -n 1p "$dir/import.sql")" || die "insert"
sql "$(sed -n 2p "$dir/import.sql")" || die "insert"
show "SELECT category, count(*) FROM headlines GROUP BY category ORDER BY category"

echo
echo "== 3. Train through the shell: the statement records a job and returns at once (the shell"
echo "     runs it inside BEGIN ... COMMIT: replicated); the job trains beside Raft, not on the"
echo "     leader's event loop, and commits the model through the leader"
show "SELECT attn_fit('news', 'SELECT title, category FROM headlines WHERE rowid % 5 != 0', json_object('cell', 'gru', 'embed_dim', 64, 'hidden', 64, 'fc_hidden', 64, 'epochs', 12, 'batch_size', 16, 'lr', 0.002, 'seed', 1234))" || die "training"
job=$(sql "SELECT max(job) FROM attn_jobs")
n=0
while :; do
  state=$(sql "SELECT state || '|' || coalesce(epoch, 0) || '/' || coalesce(epochs, '?') || '|' || coalesce(round(train_loss, 4), '') FROM attn_jobs WHERE job = $job")
  echo "  job $job: $state"
  case $state in done*) break ;; running*|queued*) ;; *) die "job $job: $state" ;; esac
  n=$((n + 1)); [ $n -gt 300 ] && die "job $job did not end"
  sleep 0.5
done
show "SELECT job, state, version, deployed, round(seconds, 2), json_array_length(losses) FROM attn_jobs WHERE job = $job"
show "SELECT name, version, deployed, length(weights) FROM attn_models"
show "SELECT label, round(f1, 3), support FROM attn_evaluate('news', 'SELECT title, category FROM headlines WHERE rowid % 5 = 0')"

PRED="SELECT title, category, attn_predict('news', title) FROM new_headlines WHERE rowid <= 8"
PROBS="SELECT label, probability FROM attn_probs('news', 'Final tennis tournament starts next week')"
ATT="SELECT position, token, weight FROM attn_weights('news', 'Final tennis tournament starts next week')"
echo
echo "== 4. Predictions through the shell (the leader answers)"
show "$PRED" | tee "$dir/before.txt" || die "predict"
show "$PROBS" | tee -a "$dir/before.txt"
show "$ATT" | tee -a "$dir/before.txt"

echo
echo "== 5. Throughput on this machine: 8,000 predictions in one statement, one prediction per"
echo "     shell run, and a local sqlite3 connection on a copy of the model"
TEN="(WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 10) SELECT i FROM r)"
t=$(now); sql "SELECT title, attn_predict('news', title) FROM headlines, $TEN" > /dev/null; s1=$(since "$t")
t=$(now); i=0; while [ $i -lt 20 ]; do sql "SELECT attn_predict('news', 'Striker scores twice in cup final')" > /dev/null; i=$((i + 1)); done; s2=$(since "$t")
sql "SELECT hex(weights) FROM attn_models WHERE name = 'news' AND deployed" > "$dir/hex.txt"
{ echo ".load ./attnext"
  echo ".import --csv data/headlines.csv headlines"
  echo "SELECT attn_import('news', X'$(cat "$dir/hex.txt")') AS version;"; } > "$dir/local.sql"
$SQLITE3 "$dir/local.db" < "$dir/local.sql" > /dev/null || die "local copy"
t=$(now); $SQLITE3 "$dir/local.db" ".load ./attnext" "SELECT title, attn_predict('news', title) FROM headlines, $TEN" > /dev/null; s3=$(since "$t")
$PY - "$s1" "$s2" "$s3" <<'EOF'
import sys
s1, s2, s3 = map(float, sys.argv[1:])
print("  dqlite shell, one statement, 8,000 rows:  %6.0f predictions/s (%.2f s)" % (8000 / s1, s1))
print("  dqlite shell, one run per prediction:    %6.0f predictions/s (%.2f s for 20)" % (20 / s2, s2))
print("  local sqlite3, one statement, 8,000 rows: %6.0f predictions/s (%.2f s, with start-up)" % (8000 / s3, s3))
EOF

echo
lead=$(dqlite $ALL news .leader)
for i in 1 2 3; do [ "$(addr $i)" = "$lead" ] && L=$i; done
echo "== 6. SIGKILL the leader, node $L ($lead)"
kill -9 "$(cat "$dir/pid$L")"
wait "$(cat "$dir/pid$L")" 2>/dev/null
t=$(now)
n=0
until sql "SELECT 1" > /dev/null 2>&1; do n=$((n + 1)); [ $n -gt 100 ] && die "no new leader"; sleep 0.1; done
echo "a new leader answers after $(since "$t") s: $(dqlite $(servers) news .leader)"
echo "The same predictions from the new leader:"
{ show "$PRED"; show "$PROBS"; show "$ATT"; } | tee "$dir/after.txt"
if cmp -s "$dir/before.txt" "$dir/after.txt"; then
  echo "identical to the old leader's, bit for bit"
else
  diff "$dir/before.txt" "$dir/after.txt"; die "the predictions differ after the failover"
fi

echo
echo "== 7. Restart node $L (same --dir, no --join): it rejoins and catches up"
start "$L"
sleep 2
show .cluster

echo
echo "== 8. Stop everything (SIGTERM)"
stop_all
grep -h "stopped" "$dir"/node*.log
rm -rf "$dir"
