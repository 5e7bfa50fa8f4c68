"""test_bench_tools.py -- the accuracy benchmark's helpers compute what RESULTS.md
says they do, on data made here (no AG News, no fastText needed):

  - quality.py seed_spread: the default's runs only (its own seed and "seed k"), not the
    ensemble's or an ablation's; the sample standard deviation; None for one seed.
  - val_fraction_holdout.py split: "random" is a stratified 15% per label, disjoint from the
    rest, another draw per seed; "tail" is the last 15% of the rows in order, the same for every
    seed. paired: per-seed differences, their mean and sample sd; None when the seeds differ.
  - val_fraction_holdout.py end to end through the extension (--holdout tail, two option sets,
    two seeds): a line per seed and option set, the mean line of the second set carrying its
    per-seed differences against the first.
  - default_time.py refuses --rounds 0, and --options that is not a JSON object, with
    argparse's error (exit 2), before training;
    val_fraction_holdout.py refuses an empty or malformed --variants the same way.
  - pretrained_holdout.py: tokens as attnext's default reads them; read_vectors standardises a
    word2vec text file (mean 0, sd 1 over all its numbers) and skips malformed lines.
"""
import csv
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "bench"))
import quality  # noqa: E402
import val_fraction_holdout as holdout  # noqa: E402
import pretrained_holdout  # noqa: E402

passed = failures = 0


def check(ok, what):
    global passed, failures
    print(("ok   " if ok else "FAIL ") + what)
    passed += bool(ok)
    failures += not ok


# ---- seed_spread
results = [("attnext default", {"test_f1": 0.70}), ("attnext default + ensemble 3", {"test_f1": 0.9}),
           ("default - dropout 0.5", {"test_f1": 0.1}), ("attnext default, seed 1", {"test_f1": 0.72}),
           ("attnext default, seed 2", {"test_f1": 0.74}), ("fastText", {"error": "not installed"})]
s = quality.seed_spread(results)
check(s is not None and s["seeds"] == 3 and s["test_f1"] == [0.70, 0.72, 0.74],
      "seed_spread takes the default's three runs only (%s)" % (s and s["test_f1"]))
check(s is not None and abs(s["mean"] - 0.72) < 1e-12 and abs(s["sd"] - 0.02) < 1e-12
      and s["min"] == 0.70 and s["max"] == 0.74,
      "seed_spread: mean 0.72, sample sd 0.02, range 0.70-0.74 (%s)" % s)
check(quality.seed_spread(results[:3]) is None, "seed_spread: one seed gives None")

# ---- split and paired
rows = [("text %d" % i, "abc"[i % 3] if i < 80 else "a") for i in range(100)]
inner1, held1 = holdout.split(rows, "random", 1)
inner2, held2 = holdout.split(rows, "random", 2)
counts = {c: sum(r[1] == c for r in rows) for c in "abc"}
held_counts = {c: sum(r[1] == c for r in held1) for c in "abc"}
check(held_counts == {c: round(0.15 * n) for c, n in counts.items()},
      "random: 15%% of each label held out (%s of %s)" % (held_counts, counts))
check(sorted(inner1 + held1) == sorted(rows) and not set(inner1) & set(held1),
      "random: holdout and the rest are disjoint and make the rows")
check(set(held1) != set(held2), "random: another seed, another holdout")
inner_t, held_t = holdout.split(rows, "tail", 1)
check(held_t == rows[85:] and inner_t == rows[:85] and holdout.split(rows, "tail", 7) == (inner_t, held_t),
      "tail: the last 15 rows in order, the same for every seed")
d = holdout.paired([0.5, 0.7, 0.6], [0.4, 0.7, 0.5])
check(d is not None and [round(x, 12) for x in d[0]] == [0.1, 0.0, 0.1]
      and abs(d[1] - statistics.mean([0.1, 0.0, 0.1])) < 1e-12
      and abs(d[2] - statistics.stdev([0.1, 0.0, 0.1])) < 1e-12,
      "paired: per-seed differences, their mean and sample sd (%s)" % (d,))
check(holdout.paired([0.5, 0.6], [0.5]) is None and holdout.paired([0.5], [0.4]) is None,
      "paired: None for unequal seeds or one seed")

# ---- val_fraction_holdout.py end to end, and default_time.py's argument check
words = {"sports": "goal match team win coach league", "tech": "chip phone cloud app data code",
         "money": "bank stocks market rate profit loan"}
with tempfile.TemporaryDirectory() as d:
    with open(os.path.join(d, "ag_news_train_10k.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["title", "category"])
        for i in range(240):
            label = sorted(words)[i % 3]
            vocab = words[label].split()
            w.writerow([" ".join(vocab[(i * k) % len(vocab)] for k in (1, 2, 5)) + " %d" % (i % 7),
                        label])
    ext = os.environ.get("ATTNEXT", os.path.join(ROOT, "attnext"))
    run = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "bench", "val_fraction_holdout.py"),
                          "--ext", ext, "--data", d, "--corpora", "ag", "--holdout", "tail",
                          "--seeds", "1,2", "--variants",
                          '[{"epochs": 2, "threads": 1}, {"epochs": 3, "threads": 1}]'],
                         capture_output=True, text=True, timeout=300)
    out = run.stdout
    per_seed = re.findall(r"^ag tail seed [12] \{.*\}: holdout F1 [01]\.\d{4} ", out, re.M)
    check(run.returncode == 0 and len(per_seed) == 4,
          "val_fraction_holdout --holdout tail: a line per seed and option set (exit %d, %d lines)%s"
          % (run.returncode, len(per_seed), "" if run.returncode == 0 else "\n" + run.stderr[-2000:]))
    m = re.search(r'^ag tail mean of 2: \{"epochs": 3, "threads": 1\} ([01]\.\d{4}) \(against '
                  r'\{"epochs": 2, "threads": 1\}, per seed ([-+]\d\.\d{4}) ([-+]\d\.\d{4}): '
                  r'mean ([-+]\d\.\d{4}), sd (\d\.\d{4})\)$', out, re.M)
    check(m is not None and abs((float(m.group(2)) + float(m.group(3))) / 2 - float(m.group(4))) < 2e-4,
          "val_fraction_holdout: the second set's mean line has its paired differences and their "
          "mean (%s)" % (m.group(0) if m else out[-600:]))
for bad in ("[]", "[3]", "{"):
    run = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "bench", "default_time.py"),
                          "--options", bad], capture_output=True, text=True, timeout=60)
    check(run.returncode == 2 and "error: --options" in run.stderr
          and "Traceback" not in run.stderr,
          "default_time.py --options %r: argparse's error (exit %d: %s)"
          % (bad, run.returncode, run.stderr.strip()[-200:]))
for bad in ("[]", "{}", "[1]", "[{"):
    run = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "bench",
                                                       "val_fraction_holdout.py"),
                          "--variants", bad], capture_output=True, text=True, timeout=60)
    check(run.returncode == 2 and "error: --variants" in run.stderr
          and "Traceback" not in run.stderr,
          "val_fraction_holdout --variants %r: argparse's error (exit %d: %s)"
          % (bad, run.returncode, run.stderr.strip()[-200:]))
run = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "bench", "default_time.py"),
                      "--rounds", "0"], capture_output=True, text=True, timeout=60)
check(run.returncode == 2 and "--rounds must be at least 1" in run.stderr,
      "default_time.py --rounds 0: argparse's error (exit %d: %s)" % (run.returncode,
                                                                     run.stderr.strip()[-200:]))

# ---- pretrained_holdout.py's helpers (fastText itself is the bench's, not make test's)
check(pretrained_holdout.tokens("Oil (Reuters) -- U.S. prices hit $50!") ==
      ["oil", "reuters", "u", "s", "prices", "hit", "50"],
      "pretrained_holdout.tokens: lower case, runs of [a-z0-9]")
with tempfile.TemporaryDirectory() as d:
    vec = os.path.join(d, "v.vec")
    with open(vec, "w") as f:
        f.write("3 2\nalpha 1 3\nbeta 5 7\nbroken 1\ngamma 9 11\n")
    v = pretrained_holdout.read_vectors(vec, 2)
    flat = [1, 3, 5, 7, 9, 11]
    m, sd = statistics.mean(flat), statistics.pstdev(flat)
    check(sorted(v) == ["alpha", "beta", "gamma"]
          and all(abs(a - (b - m) / sd) < 1e-12 for a, b in zip(v["beta"], [5, 7]))
          and abs(statistics.mean([x for w in v.values() for x in w])) < 1e-12
          and abs(statistics.pstdev([x for w in v.values() for x in w]) - 1) < 1e-12,
          "pretrained_holdout.read_vectors: standardised, the short line skipped (%s)" % (v,))

print("%d checks passed, %d failed" % (passed, failures))
sys.exit(1 if failures else 0)
