#!/bin/sh
# fetch_ag_news.sh -- downloads the full AG News corpus (120,000 train + 7,600 test titles) and
# converts it to the `title,category` CSVs attnext's lesson workflow imports.
#
#   sh data/fetch_ag_news.sh [OUTDIR]      (default OUTDIR: data/ag_news)
#     -> OUTDIR/ag_news_train.csv (120,000 titles), OUTDIR/ag_news_test.csv (7,600 titles),
#        OUTDIR/ag_news_train_10k.csv (the first 10,000 rows of the training split)
#   sh data/fetch_ag_news.sh --convert SOURCE.csv OUT.csv     (conversion only, no network)
#
# Source: the CSVs of mhjabreel/CharCnn_Keras (data/ag_news_csv/{train,test}.csv), the files
# torchtext's AG_NEWS loader downloads, pinned to commit 555590db.
# Both files are checked against the MD5s torchtext expects before anything is written.
# Conversion: the source has no header and three
# columns (class index, title, description); the description is dropped, 1..4 become World,
# Sports, Business, Sci/Tech, every `\$` becomes `$`, nothing else changes; rows keep the
# source order; output is RFC 4180 (a field is quoted when it has a comma, a double quote, a
# line break or leading/trailing whitespace), CRLF line endings, header `title,category`.
# The tests and the benchmark (tests/test_agnews.sh, tests/bench/) read ag_news_train_10k.csv and
# ag_news_test.csv from $ATTNEXT_DATA (default data/ag_news, this script's default OUTDIR). The
# 10k file is the first AG_NEWS_SUBSET (10,000) training rows in source order; the figures of
# tests/bench/RESULTS.md were measured on Made-With-ML's own 10,000-title subset, so accuracies
# on this one differ a little.
#
# Needs curl or wget, md5sum and python3 (standard library only). Environment overrides, for
# mirrors and tests: AG_NEWS_URL (directory holding train.csv and test.csv; file:// works),
# AG_NEWS_TRAIN_MD5, AG_NEWS_TEST_MD5, AG_NEWS_SUBSET (rows of the 10k file), PYTHON.
set -u

COMMIT=555590db4219b1243abb1918effd6a7425a2d75f
URL=${AG_NEWS_URL:-https://raw.githubusercontent.com/mhjabreel/CharCnn_Keras/$COMMIT/data/ag_news_csv}
TRAIN_MD5=${AG_NEWS_TRAIN_MD5:-b1a00f826fdfbd249f79597b59e1dc12}
TEST_MD5=${AG_NEWS_TEST_MD5:-d52ea96a97a2d943681189a97654912d}
SUBSET=${AG_NEWS_SUBSET:-10000}
PYTHON=${PYTHON:-python3}

die() { echo "fetch_ag_news: $*" >&2; exit 1; }

# convert SOURCE OUT [LIMIT]: the source CSV (3 columns, no header) -> title,category CSV (its
# first LIMIT rows when given).
convert() {
  "$PYTHON" - "$1" "$2" "${3:-0}" <<'EOF'
import csv, sys
src, dst, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
names = {"1": "World", "2": "Sports", "3": "Business", "4": "Sci/Tech"}

def field(s):
    if any(c in s for c in ',"\r\n') or s != s.strip():
        return '"' + s.replace('"', '""') + '"'
    return s

out = ["title,category"]
try:
    with open(src, newline="", encoding="utf-8") as f:
        for row in csv.reader(f):
            line = len(out)
            if len(row) != 3:
                sys.exit("fetch_ag_news: %s row %d: expected 3 columns (class, title, "
                         "description), got %d" % (src, line, len(row)))
            if row[0] not in names:
                sys.exit("fetch_ag_news: %s row %d: class index must be 1 to 4, got %r"
                         % (src, line, row[0]))
            out.append(field(row[1].replace("\\$", "$")) + "," + names[row[0]])
            if len(out) - 1 == limit:
                break
except (OSError, UnicodeDecodeError, csv.Error) as e:
    sys.exit("fetch_ag_news: cannot read %s: %s" % (src, e))
if len(out) == 1:
    sys.exit("fetch_ag_news: %s has no rows" % src)
with open(dst, "w", newline="", encoding="utf-8") as f:
    f.write("\r\n".join(out) + "\r\n")
print("fetch_ag_news: wrote %s (%d rows)" % (dst, len(out) - 1))
EOF
}

# download URL FILE
download() {
  if command -v curl >/dev/null 2>&1; then
    curl -fsSL --retry 2 --connect-timeout 20 -o "$2" "$1"
  elif command -v wget >/dev/null 2>&1; then
    wget -q -T 20 -O "$2" "$1"
  else
    die "neither curl nor wget is installed (apt-get install curl)"
  fi
}

if [ "${1:-}" = "--convert" ]; then
  [ $# -eq 3 ] || die "usage: sh data/fetch_ag_news.sh --convert SOURCE.csv OUT.csv"
  convert "$2" "$3"
  exit $?
fi
case "${1:-}" in -*) die "usage: sh data/fetch_ag_news.sh [OUTDIR] | --convert SOURCE.csv OUT.csv";; esac

out=${1:-data/ag_news}
command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found (apt-get install python3)"
command -v md5sum >/dev/null 2>&1 || die "md5sum not found (apt-get install coreutils)"
tmp=$(mktemp -d) || die "cannot create a temporary directory"
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

for split in train test; do
  if [ $split = train ]; then md5=$TRAIN_MD5; else md5=$TEST_MD5; fi
  echo "fetch_ag_news: downloading $URL/$split.csv"
  download "$URL/$split.csv" "$tmp/$split.csv" ||
    die "cannot download $URL/$split.csv: no network, or the source moved. Set AG_NEWS_URL to a mirror holding train.csv and test.csv, or copy the files and run: sh data/fetch_ag_news.sh --convert test.csv $out/ag_news_test.csv"
  got=$(md5sum "$tmp/$split.csv" | cut -d' ' -f1)
  [ "$got" = "$md5" ] || die "$split.csv has MD5 $got, expected $md5: incomplete or changed download; nothing written"
done
mkdir -p "$out" || die "cannot create $out"
for split in train test; do
  convert "$tmp/$split.csv" "$out/ag_news_$split.csv" || die "conversion of $split.csv failed"
done
convert "$tmp/train.csv" "$out/ag_news_train_10k.csv" "$SUBSET" || die "conversion of train.csv failed"
echo "fetch_ag_news: done. For the tests and the benchmark: export ATTNEXT_DATA=$out"
echo "fetch_ag_news: in sqlite3: .import --csv $out/ag_news_train.csv headlines"
