#!/usr/bin/env python3
"""make_corpora.py -- builds real short-text corpora from what a Debian machine holds, for the
accuracy benchmark (tests/bench/quality.py), beside AG News:

  debian   one-line package descriptions -> their Debian section (the 20 largest sections of
           bookworm main), e.g. "Python 3 library for parsing ISO 8601 strings" -> python.
           Written by Debian's maintainers; read from apt's package lists (`apt-get update`
           fills them). Split by *source* package (a hash of its name), so the -dev, -doc and
           library packages of one source never sit on both sides: 30,000 training rows
           (a fixed random sample), the test split whole (~9,900 rows).
  wordnet  WordNet 3.0 noun definitions (glosses, without their quoted examples) -> the
           lexicographer file of the synset (noun.artifact, noun.person, ... 26 classes),
           e.g. "a vessel that carries passengers or freight" -> noun.artifact. Written by
           Princeton's lexicographers; Debian package wordnet-base. 25,000 training rows,
           7,500 test rows, distinct definitions, a fixed shuffle.
  gcloud   texts of a few sentences: the DESCRIPTION of each Google Cloud CLI command's manual
           page -> its command group (compute, container, iam, ... the 34 groups of 50 distinct
           descriptions or more), e.g. "Node templates are used to create the nodes in node
           groups. Nodes are Compute Engine servers that are dedicated to your workload. ..."
           -> compute. Written by Google; only where google-cloud-cli is installed (not a
           Debian package: skipped with a line saying so, and no gcloud CSVs left). The
           command lines ("gcloud compute instances create") are cut out, since they name the
           group; the products' names stay, as in any text about them (about a third of the
           rows name their group's product: "Compute Engine", "Cloud Spanner"). Alpha and beta
           pages that repeat a text are one row. Split by command family (the command's path
           less its last word, hashed), so the create / delete / list pages of one resource
           never sit on both sides: 2,983 training rows and 877 test rows (version 528.0.0).

    /usr/bin/python3 data/make_corpora.py [OUTDIR]        (default OUTDIR: data/corpora)
      -> OUTDIR/{debian,wordnet,gcloud}_{train,test}.csv  (title,category; RFC 4180, LF line
         ends)
         OUTDIR/SOURCES.txt  (what each was built from, row counts, SHA-256 of each file)

Deterministic: the same package lists and WordNet files give the same bytes. Nothing here is
downloaded; a missing source is reported with the command that installs it (exit 1).
"""
import collections
import csv
import glob
import gzip
import hashlib
import io
import os
import random
import re
import subprocess
import sys

TOP_SECTIONS = 20
DEBIAN_TRAIN_ROWS = 30000
WORDNET_TRAIN_ROWS, WORDNET_TEST_ROWS = 25000, 7500
WORDNET_DIR = "/usr/share/wordnet"
# WordNet's lexicographer files, by number (lexnames(5WN)); nouns are 03..28
LEXNAMES = ["adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal",
            "noun.artifact", "noun.attribute", "noun.body", "noun.cognition",
            "noun.communication", "noun.event", "noun.feeling", "noun.food", "noun.group",
            "noun.location", "noun.motive", "noun.object", "noun.person", "noun.phenomenon",
            "noun.plant", "noun.possession", "noun.process", "noun.quantity", "noun.relation",
            "noun.shape", "noun.state", "noun.substance", "noun.time"]


def die(msg):
    sys.exit("make_corpora: " + msg)


def stable_hash(s):
    return int(hashlib.sha1(s.encode("utf-8")).hexdigest()[:8], 16)


def write_csv(path, rows):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["title", "category"])
    w.writerows(rows)
    data = buf.getvalue().encode("utf-8")
    with open(path, "wb") as f:
        f.write(data)
    return hashlib.sha256(data).hexdigest()


def package_lists():
    """The Packages indexes of bookworm main (amd64), as apt stores them (maybe compressed)."""
    found = sorted(glob.glob("/var/lib/apt/lists/*_dists_bookworm_main_binary-amd64_Packages*"))
    found = [p for p in found if not p.endswith(".diff_Index")]
    if not found:
        die("no package list of Debian bookworm main in /var/lib/apt/lists "
            "(run: sudo apt-get update)")
    return found[0]


def read_packages(path):
    """(description, section, source) of every package of the index."""
    helper = "/usr/lib/apt/apt-helper"
    try:  # apt-helper reads any compression apt uses (lz4, xz, gz)
        text = subprocess.run([helper, "cat-file", path], check=True, capture_output=True,
                              text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        die("cannot read %s with %s: %s" % (path, helper, e))
    out = []
    for para in text.split("\n\n"):
        d = {}
        for line in para.split("\n"):
            if line and not line[0].isspace() and ":" in line:
                k, v = line.split(":", 1)
                d[k] = v.strip()
        if "Package" in d and d.get("Description") and "Section" in d:
            source = d.get("Source", d["Package"]).split()[0]
            out.append((d["Description"], d["Section"].split("/")[-1], source))
    return out


def debian(outdir):
    path = package_lists()
    packages = read_packages(path)
    counts = collections.Counter(section for _, section, _ in packages)
    top = {s for s, _ in counts.most_common(TOP_SECTIONS)}
    seen, train, test = set(), [], []
    for text, section, source in packages:  # index order; the first of equal texts kept
        if section not in top or text in seen:
            continue
        seen.add(text)
        (test if stable_hash(source) % 5 == 0 else train).append((text, section))
    random.Random(7).shuffle(train)
    train = train[:DEBIAN_TRAIN_ROWS]
    sums = (write_csv(os.path.join(outdir, "debian_train.csv"), train),
            write_csv(os.path.join(outdir, "debian_test.csv"), test))
    return ("debian: %s (%d packages), the %d largest sections, %d train / %d test rows\n"
            "  debian_train.csv %s\n  debian_test.csv %s\n"
            % (os.path.basename(path), len(packages), TOP_SECTIONS, len(train), len(test),
               sums[0], sums[1]))


def wordnet(outdir):
    path = os.path.join(WORDNET_DIR, "data.noun")
    if not os.path.exists(path):
        die("%s not found (run: sudo apt-get install wordnet-base)" % path)
    rows = []
    with open(path, encoding="latin-1") as f:
        for line in f:
            if line.startswith("  "):  # the licence header
                continue
            fields = line.split(" ", 2)
            gloss = line.split(" | ", 1)[1].strip()
            definition = gloss.split('; "')[0].strip()
            rows.append((definition, LEXNAMES[int(fields[1])]))
    random.Random(1).shuffle(rows)
    seen, distinct = set(), []
    for definition, lexname in rows:
        if definition not in seen:
            seen.add(definition)
            distinct.append((definition, lexname))
    train = distinct[:WORDNET_TRAIN_ROWS]
    test = distinct[WORDNET_TRAIN_ROWS:WORDNET_TRAIN_ROWS + WORDNET_TEST_ROWS]
    sums = (write_csv(os.path.join(outdir, "wordnet_train.csv"), train),
            write_csv(os.path.join(outdir, "wordnet_test.csv"), test))
    return ("wordnet: %s (%d synsets, %d distinct definitions), %d train / %d test rows\n"
            "  wordnet_train.csv %s\n  wordnet_test.csv %s\n"
            % (path, len(rows), len(distinct), len(train), len(test), sums[0], sums[1]))


GCLOUD_MAN = "/usr/share/man/man1"
GCLOUD_MIN_ROWS = 50
ROFF_CODE = re.compile(r"\\f[B5](.*?)\\f[RP]", re.S)  # bold and code spans: commands, flags
ROFF_FONT = re.compile(r"\\f[A-Z0-9]")
# \e (a backslash) last, so that the backslash it leaves starts no other escape
ROFF_ESCAPES = [(r"\-", "-"), (r"\(em", "-"), (r"\(en", "-"), (r"\(aq", "'"), (r"\'", "'"),
                (r"\(dq", '"'), (r"\(bu", ""), (r"\&", ""), (r"\ ", " "), (r"\(oq", "'"),
                (r"\(cq", "'"), (r"\|", ""), (r"\e", "\\")]


def man_description(path, command):
    """The text of a manual page's DESCRIPTION section, its first 100 words, with the command
    lines (`command`: a compiled pattern) and bold or code spans (commands, flags) cut out."""
    lines, inside = [], False
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith(".SH"):
                if inside:
                    break
                inside = '"DESCRIPTION"' in line or line.strip() == ".SH DESCRIPTION"
            elif inside and not line.startswith("."):
                lines.append(line.rstrip("\n"))
    text = ROFF_FONT.sub("", ROFF_CODE.sub(" ", " ".join(lines)))
    for escape, plain in ROFF_ESCAPES:
        text = text.replace(escape, plain)
    text = command.sub(" ", text)
    return " ".join(text.split()[:100])


def gcloud(outdir):
    pages = sorted(glob.glob(os.path.join(GCLOUD_MAN, "gcloud_*.1.gz")))
    if not pages:
        for name in ("gcloud_train.csv", "gcloud_test.csv"):  # none left from another machine
            if os.path.exists(os.path.join(outdir, name)):
                os.remove(os.path.join(outdir, name))
        return "gcloud: skipped (no Google Cloud CLI manual pages in %s)\n" % GCLOUD_MAN
    paths = [os.path.basename(p)[len("gcloud_"):-len(".1.gz")].split("_") for p in pages]
    # "gcloud" and the words of command paths after it (the pages' names): a sentence's own
    # words after a command ("... the gcloud command group lets you ...") stay
    words = sorted({w for path in paths for w in path}, key=len, reverse=True)
    command = re.compile(r"\$?\s*\bgcloud(?:\s+(?:%s)\b)*" % "|".join(map(re.escape, words)))
    rows = {}  # text -> (group, family); the first page of a text kept
    for path, name in zip(pages, paths):
        if name[0] in ("alpha", "beta", "preview"):
            name = name[1:]
        if len(name) < 2:  # a group's own page
            continue
        text = man_description(path, command)
        if len(text.split()) >= 5:
            rows.setdefault(text, (name[0], "_".join(name[:-1])))
    groups = collections.Counter(group for group, _ in rows.values())
    train, test = [], []
    for text, (group, family) in rows.items():
        if groups[group] >= GCLOUD_MIN_ROWS:
            (test if stable_hash(family) % 5 == 0 else train).append((text, group))
    random.Random(7).shuffle(train)
    random.Random(8).shuffle(test)
    sums = (write_csv(os.path.join(outdir, "gcloud_train.csv"), train),
            write_csv(os.path.join(outdir, "gcloud_test.csv"), test))
    kept = sum(1 for n in groups.values() if n >= GCLOUD_MIN_ROWS)
    version = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "google-cloud-cli"],
                             capture_output=True, text=True).stdout or "unknown"
    return ("gcloud: %d manual pages (google-cloud-cli %s), %d distinct descriptions, the %d "
            "groups of %d or more, %d train / %d test rows\n  gcloud_train.csv %s\n"
            "  gcloud_test.csv %s\n"
            % (len(pages), version, len(rows), kept, GCLOUD_MIN_ROWS, len(train), len(test),
               sums[0], sums[1]))


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "corpora")
    os.makedirs(outdir, exist_ok=True)
    report = debian(outdir) + wordnet(outdir) + gcloud(outdir)
    with open(os.path.join(outdir, "SOURCES.txt"), "w") as f:
        f.write(report)
    sys.stdout.write(report)


if __name__ == "__main__":
    main()
