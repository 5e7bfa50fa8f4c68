"""test_interop.py -- weight files move both ways between PyTorch and the engine.

(1) PyTorch -> engine: a tests/attn_reference.py AttnClassifier (random weights) is written as a
    safetensors file with the __metadata__ the engine expects (format_version "1", config JSON,
    vocab JSON array, labels JSON array); tests/tool_predict loads it with nn_model_load,
    tokenizes the texts below with the engine's tokenizer and prints the token ids, logits and
    attention weights; PyTorch, fed the same ids, must give the same logits and weights.
(2) engine -> PyTorch: tool_predict --save-random writes a model made by nn_model_create with
    nn_model_save; PyTorch loads it with load_state_dict(strict=True) and its logits on the same
    texts (ids from the engine) must match the engine's.
Tolerance: rtol 1e-4, atol 1e-6 (|got - expected| <= atol + rtol * |expected|).

    /usr/bin/python3 tests/test_interop.py        (from the repository root; BUILD=build)
Exit 0 pass, 1 fail, 77 when PyTorch is not installed.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import numpy as np
    import torch
    from attn_reference import (AttnClassifier, engine_config, engine_file, from_engine_file,
                                st_load)
except ImportError as e:  # pragma: no cover
    print("skipped: PyTorch/numpy not importable by %s (%s)" % (sys.executable, e))
    sys.exit(77)

RTOL, ATOL = 1e-4, 1e-6
BUILD = os.environ.get("BUILD", "build")
TOOL = os.path.join(BUILD, "tests", "tool_predict")

WORDS = ["stocks", "market", "rally", "oil", "prices", "team", "wins", "game", "final", "tennis",
         "season", "coach", "election", "vote", "minister", "talks", "peace", "war", "troops",
         "iraq", "software", "google", "apple", "microsoft", "space", "nasa", "launch", "profit",
         "shares", "bank", "rates", "growth", "cup", "league", "players", "court", "police",
         "chip", "web", "phone"]

TEXTS = [
    "Stocks rally as oil prices fall",
    "Final tennis tournament starts next week",
    "Google and Microsoft shares (NASDAQ) up; Apple down!",
    "war",
    "the of and",                                     # only stop words: one <UNK>
    "",                                               # empty: one <UNK>
    "NASA launch delayed, space team waits... again? market, bank, rates, growth, profit, cup",
    "Iraq peace talks: minister says troops stay -- police on the web phone chip",
    "unknownword anotherunknown stocks",
    "Coach wins the league cup with players in court season game final vote election",
]

failures = []


def check_close(what, got, expected):
    got, expected = np.asarray(got, np.float64), np.asarray(expected, np.float64)
    if got.shape != expected.shape:
        failures.append("%s: shape %s, expected %s" % (what, got.shape, expected.shape))
        print("FAIL", failures[-1])
        return
    d = np.abs(got - expected)
    bad = d > ATOL + RTOL * np.abs(expected)
    rel = float((d / np.maximum(np.abs(expected), ATOL)).max()) if d.size else 0.0
    if bad.any():
        i = int(np.argmax(bad.ravel()))
        failures.append("%s: %d of %d differ, e.g. [%d] got %.9g expected %.9g"
                        % (what, int(bad.sum()), bad.size, i, got.ravel()[i], expected.ravel()[i]))
        print("FAIL", failures[-1])
    return rel, float(d.max()) if d.size else 0.0


def run_tool(model_path, texts):
    """[(ids, logits, attn)] per text, as the engine computes them."""
    p = subprocess.run([TOOL, model_path], input="\n".join(texts) + "\n", capture_output=True,
                       text=True)
    if p.returncode != 0:
        raise RuntimeError("%s %s failed (%d): %s" % (TOOL, model_path, p.returncode, p.stderr))
    out = []
    for line in p.stdout.splitlines():
        ids, logits, attn = line.split(" | ")
        assert ids.startswith("ids") and logits.startswith("logits") and attn.startswith("attn")
        out.append(([int(x) for x in ids.split()[1:]], [float(x) for x in logits.split()[1:]],
                    [float(x) for x in attn.split()[1:]]))
    if len(out) != len(texts):
        raise RuntimeError("tool_predict printed %d lines for %d texts" % (len(out), len(texts)))
    return out


def torch_predict(model, results):
    """PyTorch logits and attention on the engine's ids, as one padded batch."""
    lengths = [len(ids) for ids, _, _ in results]
    T = max(lengths)
    tokens = torch.zeros(len(results), T, dtype=torch.long)
    for b, (ids, _, _) in enumerate(results):
        tokens[b, :len(ids)] = torch.tensor(ids)
    model.eval()
    with torch.no_grad():
        logits, attn = model(tokens, torch.tensor(lengths))
    return logits.numpy(), [attn[b, :n].numpy() for b, n in enumerate(lengths)]


def compare(name, model, results):
    logits, attn = torch_predict(model, results)
    r1 = check_close(name + " logits", np.array([lo for _, lo, _ in results]), logits)
    r2 = check_close(name + " attn", np.concatenate([np.array(a) for _, _, a in results]),
                     np.concatenate(attn))
    known = sum(1 for ids, _, _ in results for i in ids if i >= 2)
    if known < 10:
        failures.append("%s: only %d in-vocabulary tokens: the texts test little" % (name, known))
        print("FAIL", failures[-1])
    if r1 and r2:
        print("%-40s %d texts, %d known tokens: logits max rel err %.2g (abs %.2g), "
              "attn max rel err %.2g (abs %.2g)" % (name, len(results), known, r1[0], r1[1],
                                                    r2[0], r2[1]))


# (1) PyTorch -> engine
TO_ENGINE = [
    dict(cell="rnn", layers=1, bidirectional=False, attention="linear"),
    dict(cell="gru", layers=2, bidirectional=True, attention="self"),
    dict(cell="lstm", layers=1, bidirectional=True, attention="additive", fc_hidden=0),
    dict(cell="lstm", layers=2, bidirectional=False, attention="self", max_len=6),
    dict(cell="gru", layers=1, bidirectional=True, attention="dot"),
]
# (2) engine -> PyTorch
FROM_ENGINE = [
    dict(cell="gru", layers=1, bidirectional=True, attention="linear"),
    dict(cell="lstm", layers=2, bidirectional=True, attention="self"),
    dict(cell="rnn", layers=1, bidirectional=False, attention="additive", fc_hidden=0),
    dict(cell="lstm", layers=2, bidirectional=True, attention="dot", fc_hidden=0),
]
SIZES = dict(embed_dim=16, hidden=12, fc_hidden=10, dropout=0.1)


def main():
    if not os.path.exists(TOOL):
        print("FAIL: %s is not built (make %s)" % (TOOL, TOOL))
        return 1
    tmp = tempfile.mkdtemp(prefix="attn_interop_")
    labels = ["Business", "Sci/Tech", "Sports", "World"]
    vocab = ["<PAD>", "<UNK>"] + WORDS
    for i, spec in enumerate(TO_ENGINE):
        cfg = dict(SIZES)
        cfg.update(spec)
        cfg.update(vocab_size=len(vocab), num_classes=len(labels))
        torch.manual_seed(100 + i)
        model = AttnClassifier(cfg)
        path = os.path.join(tmp, "torch_%d.safetensors" % i)
        with open(path, "wb") as f:
            f.write(engine_file(model, vocab, labels,
                                {"max_len": spec["max_len"]} if "max_len" in spec else None))
        name = "torch->engine %s%s %s%s" % (spec["cell"], "x%d" % spec["layers"],
                                            "bi" if spec["bidirectional"] else "uni",
                                            " " + spec["attention"])
        try:
            results = run_tool(path, TEXTS)
        except RuntimeError as e:
            failures.append("%s: %s" % (name, e))
            print("FAIL", failures[-1])
            continue
        # the engine's tokenizer, checked on one text: lower-cased, stop word "as" dropped,
        # "fall" not in the vocabulary
        if results[0][0] != [vocab.index(w) if w in vocab else 1
                             for w in ["stocks", "rally", "oil", "prices", "fall"]]:
            failures.append("%s: ids of %r: %s" % (name, TEXTS[0], results[0][0]))
            print("FAIL", failures[-1])
        if "max_len" in spec and max(len(ids) for ids, _, _ in results) > spec["max_len"]:
            failures.append("%s: max_len %d not applied" % (name, spec["max_len"]))
            print("FAIL", failures[-1])
        compare(name, model, results)

    for i, spec in enumerate(FROM_ENGINE):
        cfg = dict(SIZES)
        cfg.update(spec)
        cfg["vocab_size"] = 50
        config = engine_config(cfg)
        path = os.path.join(tmp, "engine_%d.safetensors" % i)
        name = "engine->torch %s%s %s%s" % (spec["cell"], "x%d" % spec["layers"],
                                            "bi" if spec["bidirectional"] else "uni",
                                            " " + spec["attention"])
        p = subprocess.run([TOOL, "--save-random", json.dumps(config), path] + labels,
                           capture_output=True, text=True)
        if p.returncode != 0:
            failures.append("%s: tool_predict --save-random failed: %s" % (name, p.stderr.strip()))
            print("FAIL", failures[-1])
            continue
        with open(path, "rb") as f:
            tensors, meta = st_load(f.read())
        if meta.get("format_version") != "1":
            failures.append("%s: format_version %r, expected \"1\"" % (name,
                                                                        meta.get("format_version")))
            print("FAIL", failures[-1])
        file_cfg = json.loads(meta["config"])
        file_vocab = json.loads(meta["vocab"])
        file_labels = json.loads(meta["labels"])
        for k, v in config.items():
            if file_cfg.get(k) != v and not (isinstance(v, float) and
                                             abs(file_cfg.get(k, 1e9) - v) < 1e-6):
                failures.append("%s: config %s = %r in the file, %r given" % (name, k,
                                                                             file_cfg.get(k), v))
                print("FAIL", failures[-1])
        if file_labels != labels or len(file_vocab) != 50 or file_vocab[:2] != ["<PAD>", "<UNK>"]:
            failures.append("%s: labels %r / vocab %r" % (name, file_labels, file_vocab[:5]))
            print("FAIL", failures[-1])
        bad = [k for k, v in tensors.items() if v.dtype != np.float32]
        if bad:
            failures.append("%s: tensors not F32: %s" % (name, bad))
            print("FAIL", failures[-1])
        try:  # load_state_dict(strict=True) inside
            with open(path, "rb") as f:
                model = from_engine_file(f.read())[0]
        except (RuntimeError, KeyError, ValueError) as e:
            failures.append("%s: loading into AttnClassifier: %s" % (name, e))
            print("FAIL", failures[-1])
            continue
        try:
            results = run_tool(path, TEXTS)
        except RuntimeError as e:
            failures.append("%s: %s" % (name, e))
            print("FAIL", failures[-1])
            continue
        compare(name, model, results)

    for f in os.listdir(tmp):
        os.remove(os.path.join(tmp, f))
    os.rmdir(tmp)
    if failures:
        print("%d failures" % len(failures))
        return 1
    print("test_interop: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
