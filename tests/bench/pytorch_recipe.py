"""pytorch_recipe.py -- the Made-With-ML "Attention" lesson's recipe in PyTorch, timed.

The PyTorch side of `make bench` (tests/bench/bench.py): what a user of the lesson runs, on
the CPU with 2 threads, with the configuration attnext reproduces (ext/ARCHITECTURE.md):
  preprocess (lower, NLTK stop words, parentheses, punctuation) -> Tokenizer(5000) ->
  stratified 85/15 train/validation split (seed 1234) -> padded batches of 64 (the lesson's
  Dataset/collate_fn/DataLoader, not shuffled, as in the lesson) ->
  Embedding(V, 100, padding_idx=0) -> nn.RNN|GRU|LSTM(100, hidden, batch_first=True) ->
  attention e = Linear(hidden, 1)(out), softmax over time, context = bmm ->
  fc1 Linear(hidden, 100) -> Dropout(0.1) -> fc2 Linear(100, 4);
  CrossEntropyLoss(weight = 1/count), Adam(lr 1e-3), ReduceLROnPlateau(0.1, 3).
Two deliberate differences from the notebook, both as attnext does (ext/ARCHITECTURE.md):
lr 1e-3 (the notebook's cell says 1e-4) and the best-validation-loss weights are the ones
evaluated (the notebook's `best_model = self.model` keeps a reference to the last weights).
`--model packed` uses tests/attn_reference.py's AttnClassifier instead (packed sequences,
padding masked out of the attention, as attnext computes it).

Run with Debian's python3 (python3-torch), from the repository root or anywhere:
    /usr/bin/python3 tests/bench/pytorch_recipe.py --epochs 3
    /usr/bin/python3 tests/bench/pytorch_recipe.py --epochs 1 --cell gru --hidden 256 --scale 4 --no-infer
Prints one JSON object on stdout (progress on stderr): seconds per epoch (train, validation and
both), training tokens/s, test accuracy and weighted F1, peak RSS, inference rows/s batched (64)
and one title at a time (preprocessing + tokenising + forward, as a user would).
"""
import argparse
import copy
import json
import os
import resource
import sys
import time

# Debian's torch runs its GEMMs on OpenBLAS, whose own thread pool then competes with torch's
# OpenMP threads for the 2 cores: an epoch takes 3-4x longer than with one BLAS thread. A user
# who measured would set this, so the baseline does (override: --blas-threads or the env).
if __name__ == "__main__" and "--blas-threads" in sys.argv:
    os.environ["OPENBLAS_NUM_THREADS"] = sys.argv[sys.argv.index("--blas-threads") + 1]
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# GNU OpenMP's worker threads spin while they wait; when other processes share the 2 cores
# (as in this project's shared machine) an epoch then takes 5-10x longer than with passive
# waiting, which costs little on an idle machine. Measured 2026-11-21: 15-26 s vs 2-3 s/epoch.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402  (after OPENBLAS_NUM_THREADS: numpy loads OpenBLAS too)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
from lesson_text import (Tokenizer, add_run_args, data_dir, pad_sequences,  # noqa: E402
                         preprocess, read_csv, replicate, subset,
                         stratified_split, weighted_metrics)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

DATA = data_dir()


def rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class LessonModel(nn.Module):
    """The lesson's `RNN` module (attention over the RNN outputs), with the cell selectable."""

    def __init__(self, embedding_dim, vocab_size, rnn_hidden_dim, hidden_dim, dropout_p,
                 num_classes, cell="rnn", padding_idx=0):
        super().__init__()
        self.embeddings = nn.Embedding(embedding_dim=embedding_dim, num_embeddings=vocab_size,
                                       padding_idx=padding_idx)
        rnn = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}[cell]
        self.rnn = rnn(embedding_dim, rnn_hidden_dim, batch_first=True)
        self.attn = nn.Linear(rnn_hidden_dim, 1)
        self.dropout = nn.Dropout(dropout_p)
        self.fc1 = nn.Linear(rnn_hidden_dim, hidden_dim)
        self.fc2 = nn.Linear(hidden_dim, num_classes)

    def forward(self, inputs, apply_softmax=False):
        x_in, seq_lens = inputs
        x_in = self.embeddings(x_in)
        out, _ = self.rnn(x_in)
        e = self.attn(out)
        attn_vals = F.softmax(e.squeeze(2), dim=1)
        c = torch.bmm(attn_vals.unsqueeze(1), out).squeeze(1)
        z = self.fc1(c)
        z = self.dropout(z)
        y_pred = self.fc2(z)
        if apply_softmax:
            y_pred = F.softmax(y_pred, dim=1)
        return y_pred


class PackedModel(nn.Module):
    """tests/attn_reference.py's AttnClassifier behind the lesson's calling convention."""

    def __init__(self, cfg):
        super().__init__()
        from attn_reference import AttnClassifier
        self.net = AttnClassifier(cfg)

    def forward(self, inputs, apply_softmax=False):
        x_in, seq_lens = inputs
        logits, _ = self.net(x_in, seq_lens.clamp(min=1))
        return F.softmax(logits, dim=1) if apply_softmax else logits


class Dataset(torch.utils.data.Dataset):
    """The lesson's Dataset with its collate_fn (pads each batch to its longest row)."""

    def __init__(self, X, y):
        self.X, self.y = X, y

    def __len__(self):
        return len(self.y)

    def __getitem__(self, index):
        X = self.X[index]
        return [X, len(X), self.y[index]]

    def collate_fn(self, batch):
        batch = np.array(batch, dtype=object)
        X = pad_sequences(sequences=batch[:, 0])
        seq_lens = batch[:, 1]
        y = np.stack(batch[:, 2], axis=0)
        return (torch.LongTensor(X.astype(np.int32)), torch.LongTensor(seq_lens.astype(np.int32)),
                torch.LongTensor(y.astype(np.int32)))

    def create_dataloader(self, batch_size, shuffle=False):
        return torch.utils.data.DataLoader(dataset=self, batch_size=batch_size,
                                           collate_fn=self.collate_fn, shuffle=shuffle)


def train_step(model, loader, loss_fn, optimizer):
    model.train()
    loss = 0.0
    for i, (x, lens, y) in enumerate(loader):
        optimizer.zero_grad()
        z = model((x, lens))
        J = loss_fn(z, y)
        J.backward()
        optimizer.step()
        loss += (J.detach().item() - loss) / (i + 1)
    return loss


def eval_step(model, loader, loss_fn):
    model.eval()
    loss, y_true, y_pred = 0.0, [], []
    with torch.inference_mode():
        for i, (x, lens, y) in enumerate(loader):
            z = model((x, lens))
            loss += (loss_fn(z, y).item() - loss) / (i + 1)
            y_true.extend(y.numpy().tolist())
            y_pred.extend(z.argmax(dim=1).numpy().tolist())
    return loss, y_true, y_pred


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_run_args(ap, DATA)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--blas-threads", default=os.environ["OPENBLAS_NUM_THREADS"],
                    help="OpenBLAS threads (default 1, see the comment at the top)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--model", choices=["lesson", "packed"], default="lesson")
    ap.add_argument("--no-infer", action="store_true", help="skip the inference timings")
    ap.add_argument("--no-test", action="store_true", help="skip the test-set evaluation")
    ap.add_argument("--sweep", default="",
                    help="comma-separated cell:hidden:scale points, each trained --epochs in this "
                         "process without test or inference (the scaling study); prints "
                         '{"system": "pytorch", "sweep": [one object per point]}')
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if not args.sweep:
        print(json.dumps(run(args)))
        return
    points = []
    for spec in args.sweep.split(","):
        cell, hidden, scale = spec.split(":")
        a = argparse.Namespace(**vars(args))
        a.cell, a.hidden, a.scale, a.no_test, a.no_infer = cell, int(hidden), int(scale), True, True
        points.append(run(a))
    print(json.dumps({"system": "pytorch", "sweep": points}))


def run(args):
    """Train (and test, and time inference) as args say; the result object."""
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    t_start = time.perf_counter()

    titles, labels = read_csv(args.train)
    if args.rows:
        titles, labels = subset(titles, labels, args.rows)
    # Preprocess each distinct title once (replicated rows are identical).
    cache = {t: preprocess(t) for t in titles}
    titles, labels = replicate(titles, labels, args.scale, args.seed)
    X = [cache[t] for t in titles]
    classes = sorted(set(labels))
    class_to_index = {c: i for i, c in enumerate(classes)}
    y = np.asarray([class_to_index[c] for c in labels])
    train_idx, val_idx = stratified_split(y, 0.15, args.seed)
    X_train, y_train = [X[i] for i in train_idx], y[train_idx]
    X_val, y_val = [X[i] for i in val_idx], y[val_idx]
    counts = np.bincount(y_train, minlength=len(classes))
    class_weights = 1.0 / counts

    tokenizer = Tokenizer(num_tokens=5000).fit_on_texts(X_train)
    S_train = tokenizer.texts_to_sequences(X_train)
    S_val = tokenizer.texts_to_sequences(X_val)
    train_tokens = int(sum(len(s) for s in S_train))
    train_loader = Dataset(S_train, y_train).create_dataloader(64)
    val_loader = Dataset(S_val, y_val).create_dataloader(64)
    prep_seconds = time.perf_counter() - t_start
    rss_before_model = rss_mib()

    if args.model == "lesson":
        model = LessonModel(embedding_dim=100, vocab_size=len(tokenizer), rnn_hidden_dim=args.hidden,
                            hidden_dim=100, dropout_p=0.1, num_classes=len(classes), cell=args.cell)
    else:
        model = PackedModel({"cell": args.cell, "hidden": args.hidden, "vocab_size": len(tokenizer),
                             "num_classes": len(classes)})
    n_params = sum(p.numel() for p in model.parameters())
    loss_fn = nn.CrossEntropyLoss(weight=torch.Tensor(class_weights))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", factor=0.1,
                                                           patience=3)
    epochs = []
    best_val, best_state = float("inf"), None
    cpu_train = 0.0
    for epoch in range(args.epochs):
        c0 = cpu_seconds()
        t0 = time.perf_counter()
        train_loss = train_step(model, train_loader, loss_fn, optimizer)
        t1 = time.perf_counter()
        val_loss, yt, yp = eval_step(model, val_loader, loss_fn)
        scheduler.step(val_loss)
        if val_loss < best_val:
            best_val, best_state = val_loss, copy.deepcopy(model.state_dict())
        t2 = time.perf_counter()
        cpu = cpu_seconds() - c0
        cpu_train += cpu
        acc, _, _, f1 = weighted_metrics(yt, yp, len(classes))
        epochs.append({"epoch": epoch + 1, "train_loss": train_loss, "val_loss": val_loss,
                       "val_accuracy": acc, "val_f1": f1, "train_seconds": t1 - t0,
                       "val_seconds": t2 - t1, "seconds": t2 - t0, "cpu_seconds": cpu})
        print("pytorch %s h%d x%d epoch %d: %.2fs (train %.2fs) loss %.4f val_loss %.4f val_f1 %.4f"
              % (args.cell, args.hidden, args.scale, epoch + 1, t2 - t0, t1 - t0, train_loss,
                 val_loss, f1), file=sys.stderr)
    rss_train = rss_mib()
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()

    out = {"system": "pytorch", "torch": torch.__version__, "threads": torch.get_num_threads(),
           "openblas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
           "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
           "model": args.model, "cell": args.cell, "hidden": args.hidden, "scale": args.scale,
           "rows": len(titles), "train_rows": len(S_train), "val_rows": len(S_val),
           "train_tokens": train_tokens, "vocab": len(tokenizer), "params": n_params,
           "prep_seconds": prep_seconds, "epochs": epochs, "train_cpu_seconds": cpu_train,
           "rss_mib_before_model": rss_before_model, "rss_mib_train": rss_train}

    if not args.no_test:
        test_titles, test_labels = read_csv(args.test)
        if args.test_rows:
            test_titles, test_labels = subset(test_titles, test_labels, args.test_rows)
        y_test = np.asarray([class_to_index[c] for c in test_labels])
        preds = []

        def predict_batch(batch_titles):
            seqs = tokenizer.texts_to_sequences([preprocess(t) for t in batch_titles])
            x = torch.LongTensor(pad_sequences(seqs).astype(np.int32))
            lens = torch.LongTensor([len(s) for s in seqs])
            with torch.inference_mode():
                return model((x, lens), apply_softmax=True).argmax(dim=1).numpy()

        t0 = time.perf_counter()
        for i in range(0, len(test_titles), 64):
            preds.extend(predict_batch(test_titles[i:i + 64]).tolist())
        batched_s = time.perf_counter() - t0
        acc, prec, rec, f1 = weighted_metrics(y_test, preds, len(classes))
        out.update({"test_rows": len(test_titles), "test_accuracy": acc, "test_precision": prec,
                    "test_recall": rec, "test_f1": f1})
        if not args.no_infer:
            out["infer_batched_rows_per_s"] = len(test_titles) / batched_s
            # One title at a time, as a user calling the model per request would.
            t0 = time.perf_counter()
            agree = 0
            for i, t in enumerate(test_titles):
                seq = tokenizer.texts_to_sequences([preprocess(t)])[0]
                x = torch.LongTensor(seq.astype(np.int64)).unsqueeze(0)
                with torch.inference_mode():
                    p = model((x, torch.LongTensor([len(seq)])), apply_softmax=True)
                label = classes[int(p.argmax(dim=1))]
                agree += label == classes[preds[i]]
            single_s = time.perf_counter() - t0
            out["infer_single_rows_per_s"] = len(test_titles) / single_s
            out["infer_single_agrees_with_batched"] = agree / len(test_titles)
    out["rss_mib_peak"] = rss_mib()
    return out


if __name__ == "__main__":
    main()
