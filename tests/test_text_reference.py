#!/usr/bin/python3
"""test_text_reference.py -- the engine's preprocessing and vocabulary (engine/text.c) against
the Made-With-ML "Attention" lesson's own Python, run here verbatim:
  1. all 17,600 AG News titles (train 10k + test 7.6k): the cleaned text, line for line;
  2. the vocabulary fit on the 10k training titles (Tokenizer(num_tokens=5000), all tokens,
     and char level), token for token in id order;
  3. token spans on the AG News titles (each token's span starts and ends on its letters);
  4. 20,000 random strings (stop words, apostrophes, parentheses, "_", Unicode letters and
     white space, NUL, invalid UTF-8) in every mode: default (exactly the lesson), no lower,
     no stop words, unicode (the lesson with ASCII-only lower() and [\\W_]+ as the filter), keep
     parentheses (preprocess() without its \\(...\\) line),
     word spans and char-level tokens.
It builds nothing: it runs build/tests/tool_tokenize (made by `make test`). Without the AG News
CSVs, part 4 runs (it needs no data) and then the test skips (77) for parts 1-3.
"""
import csv
import os
import random
import re
import subprocess
import sys
from collections import Counter

BUILD = os.environ.get("BUILD", "build")
TOOL = os.path.join(BUILD, "tests", "tool_tokenize")
# The AG News CSVs: $ATTNEXT_DATA, else data/ag_news/ (which `sh data/fetch_ag_news.sh` fills).
DATA = os.environ.get("ATTNEXT_DATA") or os.path.join("data", "ag_news")

# nltk.corpus.stopwords.words("english") (nltk_data corpora/stopwords/english, 179 words).
STOPWORDS = """i me my myself we our ours ourselves you you're you've you'll you'd your yours
yourself yourselves he him his himself she she's her hers herself it it's its itself they them
their theirs themselves what which who whom this that that'll these those am is are was were be
been being have has had having do does did doing a an the and but if or because as until while
of at by for with about against between into through during before after above below to from up
down in out on off over under again further then once here there when where why how all any
both each few more most other some such no nor not only own same so than too very s t can will
just don don't should should've now d ll m o re ve y ain aren aren't couldn couldn't didn didn't
doesn doesn't hadn hadn't hasn hasn't haven haven't isn isn't ma mightn mightn't mustn mustn't
needn needn't shan shan't shouldn shouldn't wasn wasn't weren weren't won won't wouldn
wouldn't""".split()


# ---------------------------------------------------------------- the lesson, verbatim
def preprocess(text, stopwords=STOPWORDS):
    """Conditional preprocessing on our text unique to our task."""
    # Lower
    text = text.lower()

    # Remove stopwords
    pattern = re.compile(r'\b(' + r'|'.join(stopwords) + r')\b\s*')
    text = pattern.sub('', text)

    # Remove words in paranthesis
    text = re.sub(r'\([^)]*\)', '', text)

    # Spacing and filters
    text = re.sub(r"([-;;.,!?<=>])", r" \1 ", text)
    text = re.sub('[^A-Za-z0-9]+', ' ', text) # remove non alphanumeric chars
    text = re.sub(' +', ' ', text)  # remove multiple spaces
    text = text.strip()

    return text


class Tokenizer(object):
    def __init__(self, char_level, num_tokens=None,
                 pad_token='<PAD>', oov_token='<UNK>',
                 token_to_index=None):
        self.char_level = char_level
        self.separator = '' if self.char_level else ' '
        if num_tokens: num_tokens -= 2 # pad + unk tokens
        self.num_tokens = num_tokens
        self.pad_token = pad_token
        self.oov_token = oov_token
        if not token_to_index:
            token_to_index = {pad_token: 0, oov_token: 1}
        self.token_to_index = token_to_index
        self.index_to_token = {v: k for k, v in self.token_to_index.items()}

    def __len__(self):
        return len(self.token_to_index)

    def fit_on_texts(self, texts):
        if not self.char_level:
            texts = [text.split(" ") for text in texts]
        all_tokens = [token for text in texts for token in text]
        counts = Counter(all_tokens).most_common(self.num_tokens)
        self.min_token_freq = counts[-1][1]
        for token, count in counts:
            index = len(self)
            self.token_to_index[token] = index
            self.index_to_token[index] = token
        return self


# ---------------------------------------------------------------- the modes, as regexes
ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


def reference(text, lower=True, stopwords=True, unicode=False, parentheses=True):
    """preprocess() with the engine's options. unicode: lower-case ASCII only (the engine never
    case-maps non-ASCII there) and keep every Unicode letter or digit ([\\W_]+ as the filter)."""
    if lower:
        text = text.translate(ASCII_LOWER) if unicode else text.lower()
    if stopwords:
        text = re.sub(r'\b(' + r'|'.join(STOPWORDS) + r')\b\s*', '', text)
    if parentheses:  # drop_parentheses (the lesson)
        text = re.sub(r'\([^)]*\)', '', text)
    text = re.sub(r"([-;;.,!?<=>])", r" \1 ", text)
    text = re.sub(r'[\W_]+' if unicode else '[^A-Za-z0-9]+', ' ', text)
    return re.sub(' +', ' ', text).strip()


# ---------------------------------------------------------------- helpers
failures = 0


def check(ok, what):
    global failures
    if not ok:
        failures += 1
        print("FAIL:", what)
    return ok


def run_tool(args, lines):
    """lines: list of bytes without b"\\n". Returns the output lines (bytes)."""
    data = b"".join(line + b"\n" for line in lines)
    res = subprocess.run([TOOL] + args, input=data, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, check=False)
    if res.returncode != 0:
        print("FAIL: %s %s exited with %d: %s" % (TOOL, " ".join(args), res.returncode,
                                                  res.stderr.decode(errors="replace")))
        sys.exit(1)
    out = res.stdout.split(b"\n")
    assert out[-1] == b""
    return out[:-1]


def compare_lines(name, inputs, got, expected):
    """Line for line; prints the count and the first mismatches."""
    bad = [i for i in range(len(expected)) if i >= len(got) or got[i] != expected[i]]
    check(len(got) == len(expected), "%s: %d lines out for %d in" % (name, len(got), len(expected)))
    print("%s: %d lines compared, %d differ" % (name, len(expected), len(bad)))
    for i in bad[:5]:
        print("  line %d: input %r\n    C      %r\n    Python %r"
              % (i + 1, inputs[i], got[i] if i < len(got) else None, expected[i]))
    check(not bad, "%s: %d lines differ" % (name, len(bad)))


def parse_spans(line, char_level=False):
    """tool --spans output line -> list of (token bytes, start, end)."""
    if line == b"":
        return []
    parts = line.split(b"\t")
    check(len(parts) % 3 == 0, "spans line has %d fields: %r" % (len(parts), line))
    return [(parts[i], int(parts[i + 1]), int(parts[i + 2])) for i in range(0, len(parts) - 2, 3)]


def check_spans(name, raw, tokens, lower):
    """Spans are increasing, disjoint, inside the text; a token's first and last letter are the
    bytes at its span's ends (for ASCII letters)."""
    prev_end = 0
    for tok, start, end in tokens:
        if start == -1 and end == -1 and tok == b" ":
            continue
        if not check(prev_end <= start < end <= len(raw),
                     "%s: span [%d,%d) of %r in %r (previous end %d)"
                     % (name, start, end, tok, raw, prev_end)):
            return False
        prev_end = end
        first, last = raw[start:start + 1], raw[end - 1:end]
        if lower:
            first, last = first.lower(), last.lower()
        if raw[start] < 0x80 and not check(first == tok[:1], "%s: token %r starts at %d with %r in %r"
                                           % (name, tok, start, first, raw)):
            return False
        if raw[end - 1] < 0x80 and not check(last == tok[-1:], "%s: token %r ends at %d with %r in %r"
                                             % (name, tok, end, last, raw)):
            return False
    return True


# ---------------------------------------------------------------- random strings
PIECES = [w.encode() for w in STOPWORDS] + [
    b"news", b"oil", b"Iraq", b"A", b"I", b"THE", b"The", b"Don't", b"isn't", b"x", b"abc",
    b"2004", b"9", b"_", b"__the", b"the_", b"'", b"''", b"(", b")", b"((", b"))", b"-", b".",
    b",", b";", b"!", b"?", b"<", b"=", b">", b"&", b"#39;", b"/", b"\\", b'"', b":",
    b" ", b" ", b" ", b"  ", b"\t", b"\x0b", b"\x0c", b"\r", b"\x1c", b"\x1f", b"\x00",
] + [s.encode() for s in [
    "\u00e9", "\u00c9", "\u00fc", "\u00df", "\u2019", "\u201c", "\u201d", "\u2014", "\u00a0",
    "\u0085", "\u2028", "\u3000", "\u1680", "\u4e2d", "\u0661", "\u00b2", "\U0001F600",
    "\u0130", "\u212a", "\u0307", "\u0131", "caf\u00e9", "na\u00efve", "\u00e9the",
]] + [b"\xff", b"\x80", b"\xe2\x82", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\xc3"]


def random_line(rng):
    n = rng.randrange(0, 14)
    out = []
    for _ in range(n):
        piece = rng.choice(PIECES)
        if rng.random() < 0.15:
            piece = piece.upper()
        out.append(piece)
        if rng.random() < 0.6:
            out.append(rng.choice([b" ", b" ", b"-", b"(", b")", b"'", b"\t"]))
    return b"".join(out)


def random_strings():
    """4. random strings in every mode (needs no data)."""
    rng = random.Random(1234)
    lines = [random_line(rng) for _ in range(20000)]
    lines = [l for l in lines if b"\n" not in l]
    texts = [l.decode("utf-8", "surrogateescape") for l in lines]
    modes = [
        ([], {}),
        (["--no-lower"], {"lower": False}),
        (["--no-stopwords"], {"stopwords": False}),
        (["--unicode"], {"unicode": True}),
        (["--unicode", "--no-lower"], {"unicode": True, "lower": False}),
        (["--keep-parentheses"], {"parentheses": False}),
        (["--keep-parentheses", "--no-stopwords", "--unicode"],
         {"parentheses": False, "stopwords": False, "unicode": True}),
    ]
    for args, kw in modes:
        want = [reference(t, **kw).encode("utf-8") for t in texts]
        if not kw:  # the default mode is the lesson's function itself
            check(want == [preprocess(t).encode() for t in texts], "reference() != preprocess()")
        compare_lines("random %s" % (" ".join(args) or "default"), lines,
                      run_tool(args, lines), want)
        span_out = run_tool(args + ["--spans"], lines)
        char_out = run_tool(args + ["--spans", "--char"], lines)
        bad = 0
        for i in range(len(lines)):
            words = parse_spans(span_out[i])
            chars = parse_spans(char_out[i])
            ok = check([t for t, _, _ in words] == (want[i].split(b" ") if want[i] else []),
                       "random %s line %d %r: word tokens %r, expected %r"
                       % (args, i + 1, lines[i], words, want[i]))
            ok = check([t.decode() for t, _, _ in chars] == list(want[i].decode()),
                       "random %s line %d %r: char tokens %r, expected %r"
                       % (args, i + 1, lines[i], chars, want[i])) and ok
            ok = check_spans("random %s line %d" % (args, i + 1), lines[i], words,
                             kw.get("lower", True)) and ok
            ok = check_spans("random chars %s line %d" % (args, i + 1), lines[i], chars,
                             kw.get("lower", True)) and ok
            bad += not ok
            if failures > 40:
                break
        print("random %s: word and char tokens with spans, %d lines, %d wrong"
              % (" ".join(args) or "default", len(lines), bad))



def main():
    if not os.access(TOOL, os.X_OK):
        print("FAIL: %s is missing: run `make test` (it builds the tools) first" % TOOL)
        return 1
    train_path = os.path.join(DATA, "ag_news_train_10k.csv")
    test_path = os.path.join(DATA, "ag_news_test.csv")
    check(len(STOPWORDS) == 179 and len(set(STOPWORDS)) == 179,
          "%d stop words, expected 179 distinct" % len(STOPWORDS))
    # the comparisons that need no data run first, so that a machine without it still runs them
    random_strings()
    if not (os.path.exists(train_path) and os.path.exists(test_path)):
        if failures:
            print("test_text_reference: FAILED (%d)" % failures)
            return 1
        return skip("AG News data not found in %s (set ATTNEXT_DATA, or run sh "
                    "data/fetch_ag_news.sh): parts 1-3 not run, part 4 passed" % DATA)

    def titles(path):
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
        assert rows[0] == ["title", "category"], rows[0]
        return [r[0] for r in rows[1:]]

    train, test = titles(train_path), titles(test_path)
    every = train + test
    print("AG News: %d train + %d test titles" % (len(train), len(test)))
    assert all("\n" not in t for t in every)

    # 1. cleaned text, line for line
    raw = [t.encode("utf-8") for t in every]
    expected = [preprocess(t) for t in every]
    got = run_tool([], raw)
    compare_lines("AG News cleaned", every, got, [e.encode() for e in expected])

    # 2. vocabularies, fit on the cleaned training titles as the lesson does
    clean_train = [preprocess(t) for t in train]
    raw_train = [t.encode("utf-8") for t in train]
    for args, tokenizer, note in [
        (["--vocab", "5000"], Tokenizer(char_level=False, num_tokens=5000), ""),
        (["--vocab", "100000"], Tokenizer(char_level=False, num_tokens=100000),
         " (without the lesson's \"\" token of an empty title)"),
        (["--char", "--vocab", "1000"], Tokenizer(char_level=True, num_tokens=1000), ""),
    ]:
        tokenizer.fit_on_texts(clean_train)
        want = [t for t in tokenizer.token_to_index if t != ""]
        if len(want) != len(tokenizer.token_to_index):
            print("note: the lesson counts %d empty title(s) as a token \"\"; the engine does not"
                  % Counter(clean_train)[""])
        have = [t.decode() for t in run_tool(args, raw_train)]
        same = sum(1 for a, b in zip(have, want) if a == b)
        print("vocabulary %s: %d tokens (Python %d), %d identical in order%s"
              % (" ".join(args), len(have), len(want), same, note))
        first_diff = next((i for i in range(min(len(have), len(want))) if have[i] != want[i]), None)
        if first_diff is not None:
            print("  first difference at id %d: C %r, Python %r"
                  % (first_diff, have[first_diff], want[first_diff]))
        check(have == want, "vocabulary %s differs" % " ".join(args))

    # 3. spans on the AG News titles
    span_lines = run_tool(["--spans"], raw)
    merged = 0
    for i, line in enumerate(span_lines):
        tokens = parse_spans(line)
        check([t for t, _, _ in tokens] == (expected[i].encode().split(b" ") if expected[i] else []),
              "spans line %d: tokens %r, cleaned %r" % (i + 1, tokens, expected[i]))
        check_spans("AG News spans line %d" % (i + 1), raw[i], tokens, True)
        merged += sum(1 for t, s, e in tokens if raw[i][s:e].lower() != t)
    print("AG News spans: %d lines checked (%d tokens span removed text, e.g. '(...)')"
          % (len(span_lines), merged))

    print("test_text_reference: %s" % ("FAILED (%d)" % failures if failures else "all identical"))
    return 1 if failures else 0


def skip(why):
    print("skipped: %s" % why)
    return 77


if __name__ == "__main__":
    sys.exit(main())
