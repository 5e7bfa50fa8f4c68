#!/bin/sh
# test_schema_uses.sh -- the schema uses of attn_predict that ext/REFERENCE.md ("Using
# attn_predict in a schema", under attn_predict) calls safe and unsafe, as SQLite and attnext
# behave:
#  - an index expression or a generated column is refused (attn_predict is not deterministic);
#  - a CHECK constraint is accepted, and goes stale: after another version is deployed,
#    PRAGMA integrity_check reports "CHECK constraint failed";
#  - the pattern the reference gives stays consistent: a trigger stores the label (and the version
#    that gave it) when a row is inserted or its text changes, a view predicts on every read;
#    after a deployment integrity_check is "ok", stored labels keep their version, new rows get
#    the new one, the view follows the deployed version.
SQLITE3=${SQLITE3:-sqlite3}
ATTNEXT=${ATTNEXT:-./attnext}
[ -f "$ATTNEXT.so" ] || { echo "$ATTNEXT.so not built (run make)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # what, expected, actual
  if [ "$2" = "$3" ]; then echo "ok $1: $3"; else echo "FAIL $1: expected '$2', got '$3'"; fail=1; fi
}
db=$tmp/t.db
q() { $SQLITE3 -bail "$db" -cmd ".load $ATTNEXT" "$@" 2>&1; }
q ".import --csv data/headlines.csv headlines" >/dev/null
# two versions that label differently: 1 epoch, then 8
fit() { q "SELECT attn_fit('news', 'SELECT title, category FROM headlines', '{\"epochs\": $1, \"progress\": false}') IS NOT NULL"; }
fit 1 >/dev/null
out=$(q "CREATE INDEX i ON headlines(attn_predict('news', title))")
case $out in *"non-deterministic functions prohibited in index expressions"*) echo "ok index refused" ;;
  *) echo "FAIL index expression: $out"; fail=1 ;; esac
out=$(q "CREATE TABLE g(title TEXT, label TEXT AS (attn_predict('news', title)))")
case $out in *"non-deterministic functions prohibited in generated columns"*) echo "ok generated column refused" ;;
  *) echo "FAIL generated column: $out"; fail=1 ;; esac
# unsafe: CHECK
q "CREATE TABLE checked(title TEXT, label TEXT CHECK (label = attn_predict('news', title)));
   INSERT INTO checked SELECT title, attn_predict('news', title) FROM headlines LIMIT 200;" >/dev/null
check "CHECK accepted, integrity_check with version 1" "ok" "$(q 'PRAGMA integrity_check')"
# safe: the reference's pattern (keep this in step with ext/REFERENCE.md)
q "CREATE TABLE articles(id INTEGER PRIMARY KEY, title TEXT NOT NULL, label TEXT, labelled_by INTEGER);
   CREATE TRIGGER articles_label AFTER INSERT ON articles BEGIN
     UPDATE articles SET label = attn_predict('news', NEW.title),
       labelled_by = (SELECT version FROM attn_models WHERE name = 'news' AND deployed)
     WHERE id = NEW.id;
   END;
   CREATE TRIGGER articles_relabel AFTER UPDATE OF title ON articles BEGIN
     UPDATE articles SET label = attn_predict('news', NEW.title),
       labelled_by = (SELECT version FROM attn_models WHERE name = 'news' AND deployed)
     WHERE id = NEW.id;
   END;
   CREATE VIEW articles_now AS
     SELECT id, title, attn_predict('news', title) AS label FROM articles;
   INSERT INTO articles(title) SELECT title FROM headlines LIMIT 200;" >/dev/null
q "CREATE TABLE v1 AS SELECT id, label FROM articles" >/dev/null
fit 8 >/dev/null
check "version 2 deployed" "2" "$(q "SELECT version FROM attn_models WHERE name = 'news' AND deployed")"
differ=$(q "SELECT count(*) FROM articles WHERE label <> attn_predict('news', title)")
[ "$differ" -gt 0 ] && echo "ok versions 1 and 2 label $differ of 200 titles differently" ||
  { echo "FAIL the two versions label alike: the test proves nothing"; fail=1; }
out=$(q 'PRAGMA integrity_check(1000)' | sort | uniq -c | sed 's/^ *//') # (the default stops at 100)
check "CHECK constraint stale after attn_deploy" "$differ CHECK constraint failed in checked" "$out"
q "DROP TABLE checked" >/dev/null
check "integrity_check with the trigger pattern" "ok" "$(q 'PRAGMA integrity_check')"
check "stored labels keep version 1's (rows that differ)" "0" "$(q "SELECT count(*) FROM articles JOIN v1 USING (id) WHERE articles.label IS NOT v1.label")"
check "stored labels say which version gave them" "1 200" "$(q "SELECT labelled_by, count(*) FROM articles GROUP BY 1" | tr '|' ' ')"
q "INSERT INTO articles(title) VALUES ('Glenwood Hawks striker scores twice in cup final');
   UPDATE articles SET title = 'Oil prices climb as markets fall' WHERE id = 1;" >/dev/null
check "a new row and an edited title get version 2" "2 2" "$(q "SELECT labelled_by FROM articles WHERE id IN (1, 201) ORDER BY id" | tr '\n' ' ' | sed 's/ $//')"
check "the view follows the deployed version" "0" "$(q "SELECT count(*) FROM articles_now n JOIN headlines h ON h.title = n.title WHERE n.label <> attn_predict('news', h.title)")"
q "SELECT attn_deploy('news', 1)" >/dev/null
check "after a rollback (attn_deploy 1) the view gives version 1's labels (rows that differ)" "0" \
  "$(q "SELECT count(*) FROM articles_now JOIN v1 USING (id) WHERE id > 1 AND articles_now.label IS NOT v1.label")"
exit $fail
