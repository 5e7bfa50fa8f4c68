#!/bin/sh
# test_fetch_convert.sh -- tests data/fetch_ag_news.sh without a network:
#  1. --convert on a small hand-made file in the source's format (3 columns, no header) against
#     the expected title,category bytes written out here by hand;
#  2. bad input (wrong column count, bad class index) fails with a message naming the row;
#  3. when $ATTNEXT_DATA/ag_news_test.csv is present (default data/ag_news): it is turned back
#     into the source's format (class index, `$` -> `\$`, a description column, every field
#     quoted) and converted again; the result must be byte-identical to that file;
#  4. the download path with AG_NEWS_URL pointing at file:// URLs (needs curl): an unreachable
#     source fails with a clear message, an MD5 mismatch fails and writes nothing, and matching
#     MD5s give the converted files under the names the tests read (ag_news_test.csv and the
#     first AG_NEWS_SUBSET rows as ag_news_train_10k.csv) and the full ag_news_train.csv.
PYTHON=${PYTHON:-/usr/bin/python3}
export PYTHON
script=data/fetch_ag_news.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

# ---- 1. a small file with every case the conversion must handle
printf '%s\n' \
  '"3","Stocks \$ rally, bonds slip","Wall St. rose, and so on"' \
  '"1","Minister says ""no deal""","A description' \
  'over two lines"' \
  '"2"," Leading space","x"' \
  '"4","Trailing space ","y"' \
  '"4","Chip maker #39;s \$5 bid &lt;b&gt;...&lt;/b&gt;","z"' \
  '2,Unquoted title,unquoted description' \
  > "$tmp/source.csv"
printf '%s\r\n' \
  'title,category' \
  '"Stocks $ rally, bonds slip",Business' \
  '"Minister says ""no deal""",World' \
  '" Leading space",Sports' \
  '"Trailing space ",Sci/Tech' \
  'Chip maker #39;s $5 bid &lt;b&gt;...&lt;/b&gt;,Sci/Tech' \
  'Unquoted title,Sports' \
  > "$tmp/expected.csv"
if sh "$script" --convert "$tmp/source.csv" "$tmp/out.csv" && cmp -s "$tmp/out.csv" "$tmp/expected.csv"; then
  ok "--convert of 6 hand-made rows matches the expected bytes"
else
  fail "--convert of the hand-made file differs from the expected bytes"
  diff "$tmp/expected.csv" "$tmp/out.csv" | cat -A
fi

# ---- 2. bad input
printf '"1","two columns only"\n' > "$tmp/bad1.csv"
printf '"1","fine","d"\n"5","bad class","d"\n' > "$tmp/bad2.csv"
for case in "bad1:row 1: expected 3 columns" "bad2:row 2: class index must be 1 to 4, got '5'"; do
  f=${case%%:*}; want=${case#*:}
  msg=$(sh "$script" --convert "$tmp/$f.csv" "$tmp/$f.out" 2>&1)
  rc=$?
  if [ $rc -ne 0 ] && echo "$msg" | grep -qF "$want" && [ ! -e "$tmp/$f.out" ]; then
    ok "$f.csv refused: $msg"
  else
    fail "$f.csv: expected a failure saying '$want', got exit $rc: $msg"
  fi
done

# ---- 3. round trip through the AG News test split the other tests use
shared=${ATTNEXT_DATA:-data/ag_news}/ag_news_test.csv
if [ -f "$shared" ]; then
  "$PYTHON" - "$shared" "$tmp/test.csv" <<'EOF'
import csv, sys
index = {"World": "1", "Sports": "2", "Business": "3", "Sci/Tech": "4"}
with open(sys.argv[1], newline="") as f:
    rows = list(csv.reader(f))[1:]
with open(sys.argv[2], "w", newline="") as f:
    for title, category in rows:
        f.write('"%s","%s","%s"\n' % (index[category], title.replace("$", "\\$").replace('"', '""'),
                                        "desc, with comma"))
EOF
  if sh "$script" --convert "$tmp/test.csv" "$tmp/test_out.csv" && cmp "$tmp/test_out.csv" "$shared"; then
    ok "round trip of $shared ($(wc -l < "$shared") lines) is byte-identical"
  else
    fail "round trip of $shared differs"
  fi
else
  echo "note: $shared absent, round trip not run"
fi

# ---- 4. the download path, offline
if command -v curl >/dev/null 2>&1; then
  msg=$(AG_NEWS_URL="file://$tmp/nowhere" sh "$script" "$tmp/o1" 2>&1)
  rc=$?
  if [ $rc -ne 0 ] && echo "$msg" | grep -q "fetch_ag_news: cannot download file://$tmp/nowhere/train.csv: no network"; then
    ok "unreachable source refused: $(echo "$msg" | tail -n 1 | cut -c1-100)..."
  else
    fail "unreachable source: expected exit != 0 and 'cannot download', got exit $rc: $msg"
  fi
  mkdir -p "$tmp/mirror"
  cp "$tmp/source.csv" "$tmp/mirror/train.csv"
  head -n 1 "$tmp/source.csv" > "$tmp/mirror/test.csv"
  msg=$(AG_NEWS_URL="file://$tmp/mirror" sh "$script" "$tmp/o2" 2>&1)
  rc=$?
  if [ $rc -ne 0 ] && echo "$msg" | grep -q "train.csv has MD5 .*, expected b1a00f826fdfbd249f79597b59e1dc12" &&
     [ ! -e "$tmp/o2" ]; then
    ok "MD5 mismatch refused, nothing written"
  else
    fail "MD5 mismatch: expected a refusal and no output directory, got exit $rc: $msg"
  fi
  train_md5=$(md5sum "$tmp/mirror/train.csv" | cut -d' ' -f1)
  test_md5=$(md5sum "$tmp/mirror/test.csv" | cut -d' ' -f1)
  AG_NEWS_URL="file://$tmp/mirror" AG_NEWS_TRAIN_MD5=$train_md5 AG_NEWS_TEST_MD5=$test_md5 \
    AG_NEWS_SUBSET=3 sh "$script" "$tmp/o3" > "$tmp/o3.log" 2>&1
  rc=$?
  head -n 2 "$tmp/expected.csv" > "$tmp/expected_test.csv"
  head -n 4 "$tmp/expected.csv" > "$tmp/expected_10k.csv"
  if [ $rc -eq 0 ] && cmp -s "$tmp/o3/ag_news_train.csv" "$tmp/expected.csv" &&
     cmp -s "$tmp/o3/ag_news_test.csv" "$tmp/expected_test.csv" &&
     cmp -s "$tmp/o3/ag_news_train_10k.csv" "$tmp/expected_10k.csv"; then
    ok "download from a file:// mirror with matching MD5s gives the converted files" \
       "(ag_news_train.csv, ag_news_test.csv, ag_news_train_10k.csv = header + first 3 rows)"
  else
    fail "download from a file:// mirror: exit $rc"; cat "$tmp/o3.log"; ls -l "$tmp/o3"
  fi
else
  echo "note: curl absent, download path not tested"
fi

[ $fails -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all checks passed"
