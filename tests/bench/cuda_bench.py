"""cuda_bench.py -- attnext's CUDA backend against PyTorch CUDA, same GPU, same run.

For each configuration, both systems train on $ATTNEXT_DATA/ag_news_train_10k.csv (85/15 split)
and then classify ag_news_test.csv in large batches:
  lesson   rnn, embed 100, hidden 128, fc 100, dropout 0.1, batch 64, Adam 1e-3 (the lesson)
  large    the same with hidden 512 and batch 512 (large256, large1024: batch 256, 1024)
Measured, per system: seconds per epoch (median; an epoch = training over the split + the
validation pass, as make bench), and batched inference rows/s (forward of already encoded
rows, in batches of --infer-batch, logits back on the host; at least --seconds seconds after 2
warm-up batches). attnext runs build/tests/bench/tool_cuda_bench (the engine's nn_trainer and
nn_model_forward, device "cuda"); PyTorch runs the lesson's model (embedding -> RNN ->
attention -> fc1 -> dropout -> fc2, batch_first, padded batches moved to the GPU per batch,
CrossEntropyLoss with class weights, Adam) with torch.backends.cudnn on, TF32 off.

    make build/tests/bench/tool_cuda_bench attnext_cuda.so
    /usr/bin/python3 tests/bench/cuda_bench.py [--epochs 5] [--infer-batch 8192] [--seconds 3]
                                                [--only lesson|large] [--json out.json]
Prints a markdown table for tests/bench/RESULTS.md ("GPU" section) and writes the raw figures
as JSON (--json). Exits 77 when torch has no CUDA device or attnext has no CUDA backend.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from lesson_text import data_dir, read_csv, preprocess, Tokenizer, stratified_split  # noqa: E402
DATA = data_dir()

CONFIGS = {
    "lesson": dict(cell="rnn", embed_dim=100, hidden=128, fc_hidden=100, dropout=0.1,
                   batch_size=64, lr=1e-3),
    "large": dict(cell="rnn", embed_dim=100, hidden=512, fc_hidden=100, dropout=0.1,
                  batch_size=512, lr=1e-3),
}
# hidden 512 at batch 256 and 1024 beside it (the batches a GPU user trains with: 256-1024)
CONFIGS["large256"] = dict(CONFIGS["large"], batch_size=256)
CONFIGS["large1024"] = dict(CONFIGS["large"], batch_size=1024)


def write_tsv(path, titles, labels):
    with open(path, "w", encoding="utf-8") as f:
        for t, y in zip(titles, labels):
            f.write("%s\t%s\n" % (y.replace("\t", " "), t.replace("\t", " ").replace("\n", " ")
                                  .replace("\r", " ")))


def run_attnext(name, cfg, args, train_tsv, test_tsv):
    tool = args.tool
    opts = dict(cfg, device=args.device, epochs=args.epochs, patience=args.epochs + 1, seed=1234)
    env = dict(os.environ)
    env.setdefault("ATTNEXT_CUDA_LIB", args.cuda_lib)
    p = subprocess.run([tool, train_tsv, test_tsv, json.dumps(opts), str(args.infer_batch),
                        str(args.seconds)], capture_output=True, text=True, env=env)
    sys.stderr.write(p.stderr)
    if p.returncode != 0:
        raise SystemExit("attnext %s failed: %s" % (name, p.stderr.strip().splitlines()[-1:]))
    return json.loads(p.stdout.strip().splitlines()[-1])


def run_torch(name, cfg, args, train, test):
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device(args.device)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    torch.manual_seed(1234)
    (tr_x, tr_y), (va_x, va_y), vocab_size, C, class_w = train
    te_x = test[0]
    Cell = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}[cfg["cell"]]

    class Lesson(nn.Module):
        def __init__(self):
            super().__init__()
            self.embeddings = nn.Embedding(vocab_size, cfg["embed_dim"], padding_idx=0)
            self.rnn = Cell(cfg["embed_dim"], cfg["hidden"], batch_first=True)
            self.attn = nn.Linear(cfg["hidden"], 1)
            self.dropout = nn.Dropout(cfg["dropout"])
            self.fc1 = nn.Linear(cfg["hidden"], cfg["fc_hidden"])
            self.fc2 = nn.Linear(cfg["fc_hidden"], C)

        def forward(self, x):
            out, _ = self.rnn(self.embeddings(x))
            a = F.softmax(self.attn(out).squeeze(2), dim=1)
            c = torch.bmm(a.unsqueeze(1), out).squeeze(1)
            return self.fc2(self.dropout(self.fc1(c)))

    def batches(xs, ys, B, shuffle):
        idx = np.random.permutation(len(xs)) if shuffle else np.arange(len(xs))
        for i in range(0, len(xs), B):
            sel = idx[i:i + B]
            T = max(len(xs[j]) for j in sel)
            X = np.zeros((len(sel), T), dtype=np.int64)
            for r, j in enumerate(sel):
                X[r, :len(xs[j])] = xs[j]
            yield (torch.from_numpy(X).to(dev),
                   torch.tensor([ys[j] for j in sel], dtype=torch.long, device=dev) if ys else None)

    model = Lesson().to(dev)
    loss_fn = nn.CrossEntropyLoss(weight=torch.tensor(class_w, dtype=torch.float32, device=dev))
    opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"])
    epoch_s = []
    for epoch in range(args.epochs):
        sync()
        t0 = time.perf_counter()
        model.train()
        for X, y in batches(tr_x, tr_y, cfg["batch_size"], True):
            opt.zero_grad()
            loss = loss_fn(model(X), y)
            loss.backward()
            opt.step()
        model.eval()
        correct = 0
        with torch.inference_mode():
            for X, y in batches(va_x, va_y, cfg["batch_size"], False):
                correct += int((model(X).argmax(1) == y).sum().item())
        sync()
        epoch_s.append(time.perf_counter() - t0)
        sys.stderr.write("torch %s epoch %d: %.3fs val accuracy %.4f\n"
                         % (name, epoch + 1, epoch_s[-1], correct / len(va_x)))
    # batched inference over the encoded test rows, logits back on the host
    B = args.infer_batch
    enc = [te_x[i % len(te_x)] for i in range(B * ((len(te_x) + B - 1) // B))]
    done, rounds, t0 = 0, 0, None
    model.eval()
    with torch.inference_mode():
        while True:
            for X, _ in batches(enc, None, B, False):
                model(X).float().cpu()
                rounds += 1
                if rounds == 2:
                    sync()
                    t0 = time.perf_counter()
                elif rounds > 2:
                    done += X.shape[0]
                if t0 and rounds > 2 and time.perf_counter() - t0 >= args.seconds:
                    break
            if t0 and rounds > 2 and time.perf_counter() - t0 >= args.seconds:
                break
    rps = done / (time.perf_counter() - t0)
    return {"epoch_seconds": epoch_s, "val_accuracy": correct / len(va_x),
            "infer_rows_per_s": rps, "infer_batch": B, "torch": torch.__version__,
            "gpu": torch.cuda.get_device_name(0) if args.device == "cuda" else "none (cpu)"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", default=os.path.join(DATA, "ag_news_train_10k.csv"))
    ap.add_argument("--test", default=os.path.join(DATA, "ag_news_test.csv"))
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--infer-batch", type=int, default=8192)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--only", choices=sorted(CONFIGS), default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="cpu: a smoke test of this script on a machine without a GPU")
    ap.add_argument("--rows", type=int, default=0, help="use the first N rows (smoke tests)")
    ap.add_argument("--tool", default=os.path.join(ROOT, "build", "tests", "bench", "tool_cuda_bench"))
    ap.add_argument("--cuda-lib", default=os.path.join(ROOT, "attnext_cuda.so"),
                    help="attnext_cuda.so (unless $ATTNEXT_CUDA_LIB is set)")
    args = ap.parse_args()
    try:
        import torch
        if args.device == "cuda" and not torch.cuda.is_available():
            print("skipped: torch sees no CUDA device")
            return 77
    except ImportError:
        print("skipped: no torch")
        return 77
    titles, labels = read_csv(args.train)
    test_titles, _ = read_csv(args.test)
    if args.rows:
        titles, labels = titles[:args.rows], labels[:args.rows]
        test_titles = test_titles[:args.rows]
    # the lesson's stratified 85/15 split (PyTorch side; attnext splits inside nn_trainer)
    tr_i, val_i = stratified_split(labels, 0.15, 1234)
    tr_i, val_i = tr_i.tolist(), val_i.tolist()
    clean = [preprocess(t) for t in titles]
    tok = Tokenizer(num_tokens=5000)
    tok.fit_on_texts([clean[i] for i in tr_i])
    classes = sorted(set(labels))
    cid = {c: k for k, c in enumerate(classes)}

    def enc(texts):
        return [s.tolist()[:64] or [1] for s in tok.texts_to_sequences(texts)]

    xs = enc(clean)
    te = enc([preprocess(t) for t in test_titles])
    ys = [cid[y] for y in labels]
    counts = [sum(1 for i in tr_i if ys[i] == k) for k in range(len(classes))]
    torch_train = ([xs[i] for i in tr_i], [ys[i] for i in tr_i])
    torch_val = ([xs[i] for i in val_i], [ys[i] for i in val_i])
    tmp = tempfile.mkdtemp(prefix="cuda_bench_")
    train_tsv, test_tsv = os.path.join(tmp, "train.tsv"), os.path.join(tmp, "test.tsv")
    write_tsv(train_tsv, titles, labels)
    write_tsv(test_tsv, test_titles, ["?"] * len(test_titles))
    results = {}
    for name, cfg in CONFIGS.items():
        if args.only and name != args.only:
            continue
        a = run_attnext(name, cfg, args, train_tsv, test_tsv)
        t = run_torch(name, cfg, args,
                      (torch_train, torch_val, len(tok), len(classes), [1.0 / c for c in counts]),
                      (te, None))
        results[name] = {"config": cfg, "attnext": a, "torch": t}
    gpu = next(iter(results.values()))["torch"]["gpu"] if results else "?"
    print("GPU: %s; torch %s; %s" % (gpu, next(iter(results.values()))["torch"]["torch"],
                                     next(iter(results.values()))["attnext"]["backend"]))
    print("%d epochs each; inference in batches of %d rows\n" % (args.epochs, args.infer_batch))
    d = args.device.upper() if args.device == "cpu" else "CUDA"
    print("| config | metric | attnext %s | PyTorch %s | attnext/PyTorch | target |" % (d, d))
    print("|---|---|---|---|---|---|")
    for name, r in results.items():
        ea = statistics.median(r["attnext"]["epoch_seconds"])
        et = statistics.median(r["torch"]["epoch_seconds"])
        ia, it = r["attnext"]["infer_rows_per_s"], r["torch"]["infer_rows_per_s"]
        print("| %s | seconds per epoch (median) | %.3f | %.3f | %.3f | < 1 (faster) |"
              % (name, ea, et, ea / et))
        print("| %s | val accuracy after %d epochs | %.4f | %.4f | | |"
              % (name, args.epochs, r["attnext"]["val_accuracy"], r["torch"]["val_accuracy"]))
        print("| %s | batched inference rows/s | %.0f | %.0f | %.2f | >= 1,000,000 (H100) |"
              % (name, ia, it, ia / it))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
