"""lesson_text.py -- the Made-With-ML "Attention" lesson's data handling, without torch.

Shared by tests/bench/pytorch_recipe.py (the PyTorch side of the benchmark) and
tests/bench/attnext_bench.py (the attnext side, which only needs the CSV reader and the token
count). Pure Python + numpy so the attnext side never pays for importing torch.

What it reproduces from the lesson (madewithml.com/courses/foundations/attention):
  preprocess()   lower; drop NLTK English stop words (the 179-word list, in NLTK's order, as
                 one regex alternation); drop text in parentheses; space out -;.,!?<=>; every
                 run of non [A-Za-z0-9] becomes one space; trim
  Tokenizer      word level, Counter.most_common(num_tokens - 2) after <PAD>=0, <UNK>=1
  pad_sequences  zero padding to the longest sequence of the batch
The lesson uses pandas, nltk and sklearn; Debian's python3 here has none of them, so the stop
word list is inlined, the stratified split and the weighted F1 are written out below (same
definitions as sklearn's train_test_split(stratify=y) proportions and
precision_recall_fscore_support(average="weighted")).

    from lesson_text import read_csv, preprocess, Tokenizer, stratified_split, weighted_f1
    titles, labels = read_csv(os.path.join(data_dir(), "ag_news_train_10k.csv"))
"""
import csv
import os
import platform
import random
import re
from collections import Counter

# numpy is imported inside the functions that need it (the PyTorch side's): importing it here
# would load numpy's OpenBLAS into attnext_bench.py's process before attnext.so, and the
# extension would then run on that (threaded) OpenBLAS instead of the one it was linked with.

# NLTK 3.x stopwords.words("english"): 179 words, NLTK's order (the regex alternation below
# depends on the order, exactly as the lesson's does).
STOPWORDS = (
    "i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself "
    "yourselves he him his himself she she's her hers herself it it's its itself they them "
    "their theirs themselves what which who whom this that that'll these those am is are was "
    "were be been being have has had having do does did doing a an the and but if or because "
    "as until while of at by for with about against between into through during before after "
    "above below to from up down in out on off over under again further then once here there "
    "when where why how all any both each few more most other some such no nor not only own "
    "same so than too very s t can will just don don't should should've now d ll m o re ve y "
    "ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn hasn't haven "
    "haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn "
    "shouldn't wasn wasn't weren weren't won won't wouldn wouldn't").split()
assert len(STOPWORDS) == 179, len(STOPWORDS)

_STOP_RE = re.compile(r"\b(" + r"|".join(STOPWORDS) + r")\b\s*")
_PAREN_RE = re.compile(r"\([^)]*\)")
_SPACE_OUT_RE = re.compile(r"([-;;.,!?<=>])")
_NON_ALNUM_RE = re.compile("[^A-Za-z0-9]+")
_SPACES_RE = re.compile(" +")


def preprocess(text):
    """The lesson's preprocess(text, stopwords=STOPWORDS)."""
    text = text.lower()
    text = _STOP_RE.sub("", text)
    text = _PAREN_RE.sub("", text)
    text = _SPACE_OUT_RE.sub(r" \1 ", text)
    text = _NON_ALNUM_RE.sub(" ", text)
    text = _SPACES_RE.sub(" ", text)
    return text.strip()


class Tokenizer:
    """The lesson's word-level Tokenizer (fit_on_texts / texts_to_sequences)."""

    def __init__(self, num_tokens=5000, pad_token="<PAD>", oov_token="<UNK>"):
        self.num_tokens = num_tokens - 2  # pad + unk
        self.oov_token = oov_token
        self.token_to_index = {pad_token: 0, oov_token: 1}

    def __len__(self):
        return len(self.token_to_index)

    def fit_on_texts(self, texts):
        counts = Counter(tok for text in texts for tok in text.split(" "))
        for token, _ in counts.most_common(self.num_tokens):
            self.token_to_index[token] = len(self.token_to_index)
        return self

    def texts_to_sequences(self, texts):
        unk = self.token_to_index[self.oov_token]
        get = self.token_to_index.get
        import numpy as np
        return [np.asarray([get(tok, unk) for tok in text.split(" ")]) for text in texts]


def pad_sequences(sequences, max_seq_len=0):
    """The lesson's pad_sequences: zeros to the longest sequence."""
    import numpy as np
    max_seq_len = max(max_seq_len, max(len(s) for s in sequences))
    padded = np.zeros((len(sequences), max_seq_len))
    for i, s in enumerate(sequences):
        padded[i][:len(s)] = s
    return padded


def read_csv(path):
    """(titles, labels) from a title,category CSV with a header (RFC 4180, CRLF)."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    if not rows or rows[0][:2] != ["title", "category"]:
        raise SystemExit("%s: expected a header title,category" % path)
    return [r[0] for r in rows[1:]], [r[1] for r in rows[1:]]


def subset(titles, labels, n):
    """n rows spread evenly over the file (the files are grouped by class in places, so the
    first n rows would miss classes); n == 0 or n >= len: all rows."""
    if not n or n >= len(titles):
        return list(titles), list(labels)
    idx = [i * len(titles) // n for i in range(n)]
    return [titles[i] for i in idx], [labels[i] for i in idx]


def replicate(titles, labels, k, seed=1234):
    """The rows repeated k times, shuffled deterministically (k == 1: unchanged)."""
    if k <= 1:
        return list(titles), list(labels)
    n = len(titles)
    order = list(range(n * k))
    random.Random(seed).shuffle(order)
    return [titles[i % n] for i in order], [labels[i % n] for i in order]


def stratified_split(y, test_size, seed):
    """(train_idx, test_idx) with each class split in proportion, as
    sklearn.model_selection.train_test_split(..., stratify=y) does (per class round of the
    test share, then shuffled)."""
    import numpy as np
    rng = np.random.RandomState(seed)
    y = np.asarray(y)
    train, test = [], []
    for c in sorted(set(y.tolist())):
        idx = np.flatnonzero(y == c)
        rng.shuffle(idx)
        n_test = int(round(len(idx) * test_size))
        test.extend(idx[:n_test].tolist())
        train.extend(idx[n_test:].tolist())
    train, test = np.asarray(train), np.asarray(test)
    rng.shuffle(train)
    rng.shuffle(test)
    return train, test


def weighted_metrics(y_true, y_pred, num_classes):
    """(accuracy, weighted precision, weighted recall, weighted F1) as sklearn's
    precision_recall_fscore_support(average="weighted") (0 where undefined)."""
    import numpy as np
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    cm = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(cm, (y_true, y_pred), 1)
    tp = np.diag(cm).astype(float)
    support = cm.sum(axis=1).astype(float)
    predicted = cm.sum(axis=0).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        prec = np.where(predicted > 0, tp / predicted, 0.0)
        rec = np.where(support > 0, tp / support, 0.0)
        f1 = np.where(prec + rec > 0, 2 * prec * rec / (prec + rec), 0.0)
    w = support / support.sum()
    return (float(tp.sum() / support.sum()), float((prec * w).sum()), float((rec * w).sum()),
            float((f1 * w).sum()))


def cpu_model():
    """The CPU's model name (/proc/cpuinfo), for the machine line of a benchmark's results."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def data_dir():
    """Where the AG News CSVs are (ag_news_train_10k.csv, ag_news_test.csv): $ATTNEXT_DATA, else
    data/ag_news/ of the repository, which `sh data/fetch_ag_news.sh` fills."""
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    return os.environ.get("ATTNEXT_DATA") or os.path.join(root, "data", "ag_news")


def add_run_args(ap, data_dir):
    """The data and model arguments every side of the benchmark takes (argparse)."""
    ap.add_argument("--train", default=os.path.join(data_dir, "ag_news_train_10k.csv"))
    ap.add_argument("--test", default=os.path.join(data_dir, "ag_news_test.csv"))
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--cell", choices=["rnn", "gru", "lstm"], default="rnn")
    ap.add_argument("--scale", type=int, default=1, help="replicate the training rows K times")
    ap.add_argument("--rows", type=int, default=0, help="use N training rows spread over the file")
    ap.add_argument("--test-rows", type=int, default=0, help="use N test rows spread over the file")


def count_tokens(titles):
    """Tokens per title after preprocessing (the lesson's split(" "): an empty title is 1)."""
    return [len(preprocess(t).split(" ")) for t in titles]
