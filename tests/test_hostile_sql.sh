#!/bin/sh
# test_hostile_sql.sh -- hostile input through the real sqlite3 shell, small enough to run under
# valgrind (`make test-valgrind` runs it with SQLITE3="valgrind ... sqlite3"): training and
# prediction on NULL / empty / 1 MB / invalid UTF-8 / NUL-byte texts and BLOB labels,
# corrupted weights (truncated, bit-flipped, wrong header length) through attn_import and
# through the weights column, refused queries and options. Every statement is run with .bail
# off; each check prints "ok ..." or "FAIL ..."; the test fails on any FAIL, on a shell exit
# status other than 0 or 1 (1: the last statement's expected error), or on a crash.
# The extension is $ATTNEXT (default ./attnext); the shell is $SQLITE3 (a command line).
SQLITE3=${SQLITE3:-sqlite3}
ATTNEXT=${ATTNEXT:-./attnext}
command -v ${SQLITE3%% *} >/dev/null 2>&1 || { echo "${SQLITE3%% *} not found"; exit 77; }
[ -f "$ATTNEXT.so" ] || { echo "$ATTNEXT.so not built (run make)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/hostile.sql" <<'EOF'
.bail off
.headers off
CREATE TABLE docs(id INTEGER PRIMARY KEY, text, label);
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 59)
INSERT INTO docs(text, label)
  SELECT CASE i % 3 WHEN 0 THEN 'goal match team ' WHEN 1 THEN 'chip phone cloud '
         ELSE 'bank stocks market ' END || (i % 7), CASE i % 3 WHEN 0 THEN 'sports'
         WHEN 1 THEN 'tech' ELSE 'money' END FROM n;
SELECT count(*) FROM attn_train('m', 'SELECT text, label FROM docs',
  '{"epochs":2,"hidden":4,"embed_dim":4,"fc_hidden":4,"vocab_size":30,"progress":false}');
SELECT iif(count(*) = 1, 'ok', 'FAIL') || ' trained one model' FROM attn_models;

-- hostile texts: each gives a label (NULL for NULL)
CREATE TABLE hostile(k, t);
INSERT INTO hostile VALUES ('NULL', NULL), ('empty', ''), ('spaces', '   '),
  ('1 MB', printf('%.*c', 1000000, 'x')), ('invalid UTF-8', CAST(x'fffec328e282' AS TEXT)),
  ('NUL bytes', CAST(x'676f616c00006d61746368' AS TEXT)), ('integer', 42), ('real', 1.5e300),
  ('BLOB', x'00ff00ff41'), ('parens', '((((((((');
SELECT iif((p IS NULL) = (t IS NULL) AND (p IS NULL OR p IN ('sports', 'tech', 'money')),
           'ok', 'FAIL') || ' attn_predict on ' || k
  FROM (SELECT k, t, attn_predict('m', t) AS p FROM hostile);
SELECT iif(count(*) = 10 AND count(label) = 9, 'ok', 'FAIL') || ' attn_classify on the hostile texts'
  FROM attn_classify('m', 'SELECT k, t FROM hostile');
SELECT iif(abs(sum(weight) - 1) < 1e-4, 'ok', 'FAIL') || ' attn_weights on invalid UTF-8 and NUL bytes'
  FROM attn_weights('m', CAST(x'fffe20676f616c00206d61746368' AS TEXT));
SELECT iif(abs(sum(probability) - 1) < 1e-4, 'ok', 'FAIL') || ' attn_probs on 1 MB'
  FROM attn_probs('m', printf('%.*c', 1000000, 'y'));

-- hostile training data: BLOB and number labels train; NULL labels are refused
SELECT count(*) FROM attn_train('b', 'SELECT text, CAST(label AS BLOB) FROM docs',
  '{"epochs":1,"hidden":2,"embed_dim":2,"fc_hidden":0,"progress":false}');
SELECT iif(count(*) = 1, 'ok', 'FAIL') || ' BLOB labels train' FROM attn_models WHERE name = 'b';
SELECT count(*) FROM attn_train('x', 'SELECT text, NULL FROM docs');
SELECT count(*) FROM attn_train('x', 'SELECT text FROM docs');
SELECT count(*) FROM attn_train('x', 'SELECT text, label FROM docs', '{"hidden":1e9}');
SELECT count(*) FROM attn_train('x', 'SELECT text, label FROM docs; DROP TABLE docs');
SELECT count(*) FROM attn_train('x', 'DELETE FROM docs');
SELECT iif(count(*) = 0, 'ok', 'FAIL') || ' refused training left no model' FROM attn_models WHERE name = 'x';
SELECT iif(count(*) = 60, 'ok', 'FAIL') || ' docs intact' FROM docs;

-- corrupted weights through attn_import
CREATE TABLE good AS SELECT weights AS w FROM attn_models WHERE name = 'm';
CREATE TABLE bad(k, w);
INSERT INTO bad SELECT 'truncated to ' || n, substr(w, 1, n) FROM good,
  (SELECT 0 AS n UNION SELECT 7 UNION SELECT 8 UNION SELECT 100 UNION SELECT 500) ;
INSERT INTO bad SELECT 'truncated by 4', substr(w, 1, length(w) - 4) FROM good;
INSERT INTO bad SELECT 'header length 2^63', CAST(x'0000000000000080' || substr(w, 9) AS BLOB) FROM good;
INSERT INTO bad SELECT 'header length too large', CAST(x'ffff000000000000' || substr(w, 9) AS BLOB) FROM good;
INSERT INTO bad SELECT 'header byte flipped', CAST(substr(w, 1, 40) || x'7b' || substr(w, 42) AS BLOB) FROM good;
INSERT INTO bad SELECT 'F32 -> F16', CAST(replace(CAST(w AS TEXT), '"F32"', '"F16"') AS BLOB) FROM good;
INSERT INTO bad SELECT 'format version 2',
  CAST(replace(CAST(w AS TEXT), '"format_version":"1"', '"format_version":"2"') AS BLOB) FROM good;
SELECT attn_import('imp', w) FROM bad WHERE k = 'truncated to 0';
SELECT attn_import('imp', w) FROM bad WHERE k = 'header length 2^63';
SELECT attn_import('imp', w) FROM bad WHERE k = 'F32 -> F16';
SELECT attn_import('imp', w) FROM bad WHERE k = 'format version 2';
SELECT attn_import('imp', w) FROM bad WHERE k = 'header byte flipped';
SELECT attn_import('imp', w) FROM bad WHERE k = 'truncated by 4';
SELECT iif(count(*) = 0, 'ok', 'FAIL') || ' no corrupted BLOB was imported' FROM attn_models WHERE name = 'imp';

EOF
# a corrupted weights column, read by new connections (nothing cached)
cat > "$tmp/corrupt.sql" <<'EOF'
.bail off
UPDATE attn_models SET weights = substr(weights, 1, length(weights) - 4) WHERE name = 'm';
EOF
cat > "$tmp/predict.sql" <<'EOF'
.bail off
SELECT attn_predict('m', 'goal match');
SELECT * FROM attn_probs('m', 'goal');
SELECT * FROM attn_classify('m', 'SELECT id, text FROM docs');
SELECT * FROM attn_evaluate('m', 'SELECT text, label FROM docs');
SELECT 'ok survived the corrupted weights column';
EOF
case "$ATTNEXT" in /*) ext=$ATTNEXT ;; *) ext=$(pwd)/$ATTNEXT ;; esac
cd "$tmp" || exit 1
$SQLITE3 -cmd ".load $ext" hostile.db < hostile.sql > out1 2>&1
rc1=$?
$SQLITE3 -cmd ".load $ext" hostile.db < corrupt.sql > out2 2>&1
rc2=$?
$SQLITE3 -cmd ".load $ext" hostile.db < predict.sql > out3 2>&1
rc3=$?
cd "$OLDPWD" || exit 1
cat "$tmp/out1" "$tmp/out2" "$tmp/out3"
fails=0
for rc in $rc1 $rc2 $rc3; do
  [ "$rc" -le 1 ] || { echo "FAIL: the shell exited with status $rc (crash or valgrind error)"; fails=1; }
done
grep -q '^FAIL' "$tmp/out1" "$tmp/out3" && fails=1
oks=$(cat "$tmp/out1" "$tmp/out3" | grep -c '^ok')
[ "$oks" -ge 18 ] || { echo "FAIL: expected at least 18 ok lines, got $oks"; fails=1; }
errs=$(grep -c '^Parse error\|^Runtime error\|^Error' "$tmp/out1")
echo "refused statements (errors as expected): $errs"
[ "$errs" -ge 10 ] || { echo "FAIL: expected at least 10 refused statements, got $errs"; fails=1; }
grep -q 'attn_predict: model .m. version 1 cannot be loaded' "$tmp/out3" ||
  { echo "FAIL: the corrupted weights column did not give attn_predict's load error"; fails=1; }
[ $fails -eq 0 ] && echo "ok: $oks checks passed"
exit $fails
