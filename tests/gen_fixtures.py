"""gen_fixtures.py -- regenerate the PyTorch golden fixtures of tests/test_golden.c and
tests/test_golden_train.c.

    /usr/bin/python3 tests/gen_fixtures.py          (from the repository root; rewrites
                                                     tests/fixtures/golden/ and golden_train/)
    /usr/bin/python3 tests/gen_fixtures.py --train  (golden_train/ only: the comment above
                                                     TRAIN_ROWS; runs build/tests/test_golden_train)

One safetensors file per network variant, tests/fixtures/golden/<case>.safetensors, holding:
  <param name>          every parameter of tests/attn_reference.py's AttnClassifier (state_dict names)
  tokens (B,T) I64      a padded batch of mixed, unsorted lengths (one of length 1, one of length T);
                        padding is 0, real positions hold ids 1..V-1
  lengths (B) I64, labels (B) I64, class_weights (C) F32
  logits (B,C), attn (B,T)                 forward with dropout 0
  loss [1]                                 nn.CrossEntropyLoss(weight=class_weights, label_smoothing=
                                           the case's label_smoothing: 0.1 in *_smooth and *_subwords,
                                           else 0), mean
  grad.<param name>                        after loss.backward()
  adam_losses [5]                          loss before each of 5 torch.optim.Adam(lr=1e-2) steps
                                           on the same batch
  adam_final.<param name>                  parameters after those 5 steps
  __metadata__ config                      the engine's config JSON (nn_config keys) plus
                                           "num_classes"; case = the case name; params = the
                                           parameter names in state_dict order, comma-separated
The parameters are drawn in float32 with PyTorch's default initialisation (torch.manual_seed per
case); the expected values are computed in float64 from those float32 parameters and stored as
float32, so they are the exact answer to float32 precision. The script also runs the same case in
float32 PyTorch and prints how far float32 PyTorch is from the stored answer, as a yardstick for
the tolerance of test_golden (rtol 1e-4, atol 1e-6).
"""
import copy
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attn_reference import (AttnClassifier, EnsembleClassifier, classifier,  # noqa: E402
                            engine_config, st_save)

V, E, H, FC, C, B, T = 30, 8, 6, 5, 3, 5, 7
LR, ADAM_STEPS = 1e-2, 5
RTOL, ATOL = 1e-4, 1e-6
# tests/golden.h names the V tokens so; the subword case hashes their n-grams into few buckets,
# so that buckets are shared between words (as in a real vocabulary) and some stay untouched
VOCAB = ["<PAD>", "<UNK>"] + ["tok%d" % i for i in range(2, V)]
SUBWORD_BUCKETS = 24


def cases():
    out = []
    for cell in ("rnn", "gru", "lstm"):
        for bi in (False, True):
            for attn in ("linear", "additive", "self"):
                out.append(("%s_%s_%s" % (cell, "bi" if bi else "uni", attn),
                            dict(cell=cell, layers=1, bidirectional=bi, attention=attn)))
    out.append(("gru_l2_bi_self", dict(cell="gru", layers=2, bidirectional=True, attention="self")))
    out.append(("lstm_l2_uni_linear", dict(cell="lstm", layers=2, bidirectional=False,
                                           attention="linear")))
    out.append(("lstm_bi_additive_nofc1", dict(cell="lstm", layers=1, bidirectional=True,
                                               attention="additive", fc_hidden=0)))
    # the dot attention, after the others so that their seeds stay the same
    for cell in ("rnn", "gru", "lstm"):
        for bi in (False, True):
            out.append(("%s_%s_dot" % (cell, "bi" if bi else "uni"),
                        dict(cell=cell, layers=1, bidirectional=bi, attention="dot")))
    out.append(("gru_l2_bi_dot", dict(cell="gru", layers=2, bidirectional=True, attention="dot")))
    out.append(("lstm_bi_dot_nofc1", dict(cell="lstm", layers=1, bidirectional=True,
                                          attention="dot", fc_hidden=0)))
    # label smoothing: torch.nn.CrossEntropyLoss(weight=w, label_smoothing=0.1)
    out.append(("gru_uni_linear_smooth", dict(cell="gru", layers=1, bidirectional=False,
                                              attention="linear", label_smoothing=0.1)))
    # subwords in a training step, not only forward: the default recipe's GRU with hashed character
    # n-grams of the runner's vocabulary ("<PAD>", "<UNK>", "tok2".."tok29") and its smoothing
    out.append(("gru_uni_linear_subwords", dict(cell="gru", layers=1, bidirectional=False,
                                                attention="linear", label_smoothing=0.1,
                                                subword_buckets=SUBWORD_BUCKETS, subword_min=3,
                                                subword_max=5, vocab=VOCAB)))
    for _, cfg in out:
        cfg.setdefault("fc_hidden", FC)
        cfg.update(vocab_size=V, embed_dim=E, hidden=H, dropout=0.0, num_classes=C)
    return out


def make_batch(gen):
    while True:  # mixed lengths (1 and T among them) in an order that is not sorted
        lengths = torch.tensor([4, T, 1, 5, 2], dtype=torch.long)[torch.randperm(B, generator=gen)]
        order = lengths.tolist()
        if order != sorted(order) and order != sorted(order, reverse=True):
            break
    tokens = torch.randint(1, V, (B, T), generator=gen)
    for b in range(B):
        tokens[b, lengths[b]:] = 0
    labels = torch.randint(0, C, (B,), generator=gen)
    class_weights = (0.5 + 1.5 * torch.rand(C, generator=gen)).float()
    return tokens, lengths, labels, class_weights


def run(model, tokens, lengths, labels, class_weights, dtype, smoothing=0.0):
    """forward/backward and 5 Adam steps of a copy of model in dtype; returns a dict of arrays."""
    m = copy.deepcopy(model).to(dtype)
    m.train()  # dropout is 0: training mode is deterministic
    w = class_weights.to(dtype)
    loss_fn = nn.CrossEntropyLoss(weight=w, label_smoothing=smoothing)
    logits, attn = m(tokens, lengths)
    loss = loss_fn(logits, labels)
    m.zero_grad()
    loss.backward()
    res = {"logits": logits.detach(), "attn": attn.detach(), "loss": loss.detach().reshape(1)}
    for name, p in m.named_parameters():
        res["grad." + name] = p.grad.detach().clone()
    opt = torch.optim.Adam(m.parameters(), lr=LR)
    losses = []
    for _ in range(ADAM_STEPS):
        opt.zero_grad()
        lo, _ = m(tokens, lengths)
        step_loss = loss_fn(lo, labels)
        losses.append(step_loss.item())
        step_loss.backward()
        opt.step()
    res["adam_losses"] = torch.tensor(losses, dtype=torch.float64)
    for name, p in m.named_parameters():
        res["adam_final." + name] = p.detach().clone()
    return {k: v.to(torch.float32).numpy() for k, v in res.items()}


def rel_err(got, exp, atol=ATOL):
    """check.h's check_rel_err elementwise: 0 where |got - exp| <= atol, else the relative error."""
    d = np.abs(got.astype(np.float64) - exp.astype(np.float64))
    s = np.abs(exp.astype(np.float64))
    return np.where(d <= atol, 0.0, d / np.maximum(s, atol))


def noise_driven(grad, name, tokens, lengths):
    """Mask of the parameters whose step-0 gradient is below float32 rounding noise (G_NOISE),
    e.g. attn.bias of linear attention (softmax ignores a shift, so its gradient is 0 up to
    rounding). Adam normalises the gradient, so such parameters move by up to ~lr per step in a
    direction set by rounding: test_golden compares them with atol LR * ADAM_STEPS. Rows of
    embeddings.weight of ids absent from the batch are never read: they must not move at all,
    so they stay strictly compared."""
    mask = np.abs(grad) < G_NOISE
    if name == "embeddings.weight":
        used = np.zeros(grad.shape[0], dtype=bool)
        for b in range(tokens.shape[0]):
            used[tokens[b, :lengths[b]]] = True
        mask[~used, :] = False
    return mask


G_NOISE = 1e-6


def worst(a, b):
    """(max |a - b|, max CHECK_CLOSE relative error)"""
    if a.size == 0:
        return 0.0, 0.0
    return (float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max()),
            float(rel_err(a, b).max()))


def check_reference(model, tokens, lengths, exact):
    """The reference itself: each sequence alone (no padding) gives the logits it gets in the
    padded batch, and the ids at padded positions change nothing."""
    m = copy.deepcopy(model).to(torch.float64).eval()
    with torch.no_grad():
        for b in range(B):
            n = int(lengths[b])
            lo, a = m(tokens[b:b + 1, :n], lengths[b:b + 1])
            assert np.allclose(lo.numpy()[0], exact["logits"][b], rtol=1e-5, atol=1e-6), b
            assert np.allclose(a.numpy()[0], exact["attn"][b, :n], rtol=1e-5, atol=1e-6), b
            assert np.all(exact["attn"][b, n:] == 0)
        noisy = tokens.clone()
        for b in range(B):
            noisy[b, int(lengths[b]):] = torch.randint(1, V, (T - int(lengths[b]),))
        lo, _ = m(noisy, lengths)
        assert np.allclose(lo.numpy(), exact["logits"], rtol=1e-5, atol=1e-6)


def main():
    outdir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "golden")
    os.makedirs(outdir, exist_ok=True)
    for old in os.listdir(outdir):
        if old.endswith(".safetensors"):
            os.remove(os.path.join(outdir, old))
    for index, (name, cfg) in enumerate(cases()):
        torch.manual_seed(1000 + index)
        model = AttnClassifier(cfg)
        gen = torch.Generator().manual_seed(2000 + index)
        tokens, lengths, labels, class_weights = make_batch(gen)
        smoothing = cfg.get("label_smoothing", 0.0)
        exact = run(model, tokens, lengths, labels, class_weights, torch.float64, smoothing)
        check_reference(model, tokens, lengths, exact)
        single = run(model, tokens, lengths, labels, class_weights, torch.float32, smoothing)
        tensors = {}
        for pname, p in model.state_dict().items():
            tensors[pname] = p.detach().to(torch.float32).numpy()
        tensors["tokens"] = tokens.numpy().astype(np.int64)
        tensors["lengths"] = lengths.numpy().astype(np.int64)
        tensors["labels"] = labels.numpy().astype(np.int64)
        tensors["class_weights"] = class_weights.numpy().astype(np.float32)
        tensors.update(exact)
        config = engine_config(cfg)
        config["num_classes"] = C
        meta = {"config": json.dumps(config), "case": name,
                "params": ",".join(model.state_dict().keys())}
        path = os.path.join(outdir, name + ".safetensors")
        with open(path, "wb") as f:
            f.write(st_save(tensors, meta))
        # float32 PyTorch against the stored answer: what rtol/atol must absorb
        report = []
        for what, keys in (("logits", ["logits"]), ("attn", ["attn"]), ("loss", ["loss"]),
                           ("grads", [k for k in exact if k.startswith("grad.")]),
                           ("adam_losses", ["adam_losses"]),
                           ("adam_final", [k for k in exact if k.startswith("adam_final.")])):
            maxabs, maxrel, loose = 0.0, 0.0, 0
            for k in keys:
                got, exp = single[k].ravel(), exact[k].ravel()
                if what == "adam_final":
                    pname = k[len("adam_final."):]
                    noisy = noise_driven(exact["grad." + pname], pname, tokens.numpy(),
                                         lengths.numpy()).ravel()
                    loose += int(noisy.sum())
                    if np.abs(got[noisy] - exp[noisy]).max(initial=0) > LR * ADAM_STEPS:
                        maxrel = float("inf")
                    got, exp = got[~noisy], exp[~noisy]
                a, r = worst(got, exp)
                maxabs, maxrel = max(maxabs, a), max(maxrel, r)
            report.append("%s %.2g/%.2g%s" % (what, maxabs, maxrel,
                                              " (%d noise-driven)" % loose if loose else ""))
        print("%-22s %5d bytes, lengths %s; float32 torch vs stored (max abs/rel err): %s"
              % (name, os.path.getsize(path), lengths.tolist(), ", ".join(report)))

# ---------------------------------------------------------------- training-loop fixtures
#
# tests/fixtures/golden_train/<case>.safetensors, for tests/test_golden_train.c: the engine's
# trainer (nn_trainer_epoch: its batches, learning-rate schedule, optimizer) as a warm start
# from the fixture's parameters, against a float64 PyTorch loop over the same batches:
#   <param name>             the initial parameters (state_dict names)
#   batch_tokens (S,B,T) I64, batch_lengths (S,B) I64, batch_labels (S,B) I64
#                            the batch of each of the S steps, in the order the trainer must
#                            form it (rows sorted by length within a batch: test_golden_train
#                            finds a seed whose shuffle gives this order of the batches)
#   class_weights (C) F32    set with nn_trainer_set_class_weights
#   lrs (S) F32              the learning rate of each step, read from the optimizer before it
#   train_loss (S) F32       the running mean of the epoch's batch losses after each step (the
#                            value nn_progress_fn is given; an ensemble's batch loss: its
#                            members' mean)
#   final.<param name>       the parameters after the S steps
#   emb_masks (S,B,T,E) F32, head_masks (S,B,F) F32
#                            the cases *dropouts only: the embed_dropout and dropout masks of
#                            each step (0 or 1 / keep; batch row order), as the engine drew them
#                            with the seed of its training options: engine_record runs
#                            test_golden_train --record for them and for the batches (word_dropout
#                            applied), check_draws checks them, PyTorch is given them. An
#                            ensemble: (S*K,B,T,E) and (S,K,B,F), each member's, and
#   member_tokens (S,K,B,T) I64  each member's copy of the batch, its own words dropped
#                            (batch_tokens: member 0's)
#   __metadata__ config      the model's config JSON plus "num_classes" (as above); train: the
#                            nn_config options of the training (JSON); texts: the rows' texts,
#                            one a line; labels: their labels, comma-separated; case; params
# Linear attention's attn.bias has a zero gradient up to rounding (softmax ignores a shift), so
# Adam moves it by up to ~lr a step in a direction rounding decides (as in the fixtures above):
# test_golden_train compares it with atol sum(lrs).
# The rows have distinct lengths, so the engine's sort by length fixes every batch's rows and
# their order; only the order of the batches within an epoch is the shuffle's.
#
# lazy_adam: the rows of the word and subword tables that a batch reads are stepped by
# torch.optim.SparseAdam (which rows move, which moments persist, one step count), every other
# parameter by torch.optim.Adam. The engine steps those rows with Adam's arithmetic (adam.c),
# whose eps is added after sqrt(v) is bias-corrected: sqrt(v) / sqrt(1 - b2^t) + eps, while
# SparseAdam adds it before: (sqrt(v) + eps) / sqrt(1 - b2^t). The two differ where a gradient
# is near eps / sqrt(1 - b2^t) (3e-7 at the first step), as on rarely read subword rows: after
# the 4 steps of lazy_adam and cosine_lazy_ensemble, plain SparseAdam is 0.11 and 0.6 in
# relative error from the engine (the tolerance is 1e-4). So SparseAdam runs with
# eps * sqrt(1 - b2^t) at step t, which is Adam's placement exactly.
TRAIN_ROWS, TRAIN_B, TRAIN_EPOCHS, TRAIN_LR = 8, 4, 2, 1e-2
TRAIN_SUBWORD_BUCKETS = 64  # enough that each batch leaves some subword rows untouched


def train_cases():
    net = dict(cell="gru", layers=1, bidirectional=False, attention="linear", fc_hidden=FC,
               vocab_size=V, embed_dim=E, hidden=H, dropout=0.0, num_classes=C,
               subword_buckets=TRAIN_SUBWORD_BUCKETS, subword_min=3, subword_max=5, vocab=VOCAB)
    base = {"epochs": TRAIN_EPOCHS, "batch_size": TRAIN_B, "lr": TRAIN_LR,
            "label_smoothing": 0.1, "validation": "none", "class_weights": False,
            "pretrain_epochs": 0, "dropout": 0, "embed_dropout": 0, "word_dropout": 0,
            "patience": 100, "lr_schedule": "plateau", "lazy_adam": False}
    return [
        # lr * (1 + cos(pi step / steps)) / 2 every batch: LambdaLR
        ("cosine", net, dict(base, lr_schedule="cosine")),
        # the batch's embedding and subword rows by SparseAdam, the rest by Adam
        ("lazy_adam", net, dict(base, lazy_adam=True)),
        # two networks, each learning from its own loss
        ("ensemble", dict(net, ensemble=2), dict(base)),
        # the three together
        ("cosine_lazy_ensemble", dict(net, ensemble=2),
         dict(base, lr_schedule="cosine", lazy_adam=True)),
        # the default recipe's dropouts, drawn by the engine (recorded with seed 1)
        ("dropouts", net, dict(base, embed_dropout=0.5, word_dropout=0.2, dropout=0.5, seed=1)),
        # and in an ensemble: each member its own words dropped, its own masks, its own loss
        ("ensemble_dropouts", dict(net, ensemble=2),
         dict(base, embed_dropout=0.5, word_dropout=0.2, dropout=0.5, seed=1)),
        # Not here: lazy_adam with word_dropout in an ensemble. The engine steps every member's
        # tables at the rows that any member read (train.c list_batch_rows: the union of the
        # members' copies), so a member's row that only another member read moves by its
        # momentum; SparseAdam per member steps only its own rows. This case with
        # lazy_adam=True fails at 0.024 relative error after the 4 steps (with lr_schedule
        # "cosine" too, 1.0); a single network with lazy_adam and the dropouts agrees (1.2e-5).
    ]


def train_rows(gen):
    """TRAIN_ROWS rows of distinct lengths 1..TRAIN_ROWS in shuffled order; the short rows (the
    first batch) draw their words from ids 2..13, the long ones from 10..25, so that the batches
    touch different embedding rows (some both, 26..29 none)."""
    lengths = (torch.randperm(TRAIN_ROWS, generator=gen) + 1).tolist()
    rows = []
    for n in lengths:
        lo, hi = (2, 14) if n <= TRAIN_B else (10, 26)
        ids = torch.randint(lo, hi, (n,), generator=gen).tolist()
        rows.append((ids, int(torch.randint(0, C, (1,), generator=gen))))
    return rows


def train_batches(rows, order):
    """The trainer's batches: rows sorted by length, cut into batches of TRAIN_B, taken in
    `order` (one list of batch indices per epoch)."""
    ranked = sorted(rows, key=lambda r: len(r[0]))
    cut = [ranked[i:i + TRAIN_B] for i in range(0, len(ranked), TRAIN_B)]
    out = []
    for epoch in order:
        for k in epoch:
            batch = cut[k]
            T = max(len(ids) for ids, _ in batch)
            tokens = torch.zeros(len(batch), T, dtype=torch.long)
            for b, (ids, _) in enumerate(batch):
                tokens[b, :len(ids)] = torch.tensor(ids)
            out.append((tokens, torch.tensor([len(ids) for ids, _ in batch]),
                        torch.tensor([label for _, label in batch])))
    return out


def table_rows(model, tokens, lengths):
    """{parameter: the rows a batch reads} of the embedding tables of model (one network): its
    word ids, and their subword buckets."""
    ids = sorted({int(tokens[b, t]) for b in range(tokens.shape[0]) for t in range(lengths[b])})
    out = {model.embeddings.weight: ids}
    if model.subwords is not None:
        sub = model.sub_bucket[torch.isin(model.sub_word, torch.tensor(ids))]
        out[model.subwords.weight] = sorted(set(sub.tolist()))
    return out


class FixedMask(nn.Module):
    """A dropout whose mask is given: x * mask (0 or 1 / keep, as the engine drew it)."""

    def __init__(self):
        super().__init__()
        self.mask = None

    def forward(self, x):
        return x * self.mask


def train_run(model, batches, class_weights, train, dtype, per_epoch, masks=None):
    """The PyTorch loop of the engine's trainer over batches; returns lrs, train_loss, final.
    A batch's tokens are (B, T), or (K, B, T): each member's own copy. masks: each step's
    (embed_dropout masks (K, B, T, E), dropout masks (K, B, F)), or None."""
    m = copy.deepcopy(model).to(dtype)
    m.train()
    loss_fn = nn.CrossEntropyLoss(weight=class_weights.to(dtype),
                                  label_smoothing=train["label_smoothing"])
    members = list(m.members) if isinstance(m, EnsembleClassifier) else [m]
    for net in members if masks is not None else []:
        net.embed_dropout, net.dropout = FixedMask(), FixedMask()
    tables = [] if not train["lazy_adam"] else \
        [t for net in members for t in (net.embeddings.weight, net.subwords.weight)]
    dense = [p for p in m.parameters() if all(p is not t for t in tables)]
    opts = [torch.optim.Adam(dense, lr=train["lr"])]
    if tables:
        opts.append(torch.optim.SparseAdam(tables, lr=train["lr"]))
    steps = len(batches)
    scheds = []
    if train["lr_schedule"] == "cosine":
        scheds = [torch.optim.lr_scheduler.LambdaLR(
            o, lambda s: (1 + math.cos(math.pi * s / steps)) / 2) for o in opts]
    lrs, running = [], []
    mean = 0.0
    for k, (tokens, lengths, labels) in enumerate(batches):
        if k % per_epoch == 0:  # the engine's running mean is the epoch's
            mean = 0.0
        lrs.append(opts[0].param_groups[0]["lr"])
        for o in opts:
            o.zero_grad()
        own = [tokens[j] if tokens.dim() == 3 else tokens for j in range(len(members))]
        for j, net in enumerate(members if masks is not None else []):
            net.embed_dropout.mask = torch.from_numpy(masks[k][0][j]).to(dtype)
            net.dropout.mask = torch.from_numpy(masks[k][1][j]).to(dtype)
        if isinstance(m, EnsembleClassifier) and tokens.dim() == 2 and masks is None:
            losses = m.training_losses(tokens, lengths, labels, loss_fn)  # the reference's own
        else:  # each member its own copy of the tokens and its own masks
            losses = [loss_fn(net(own[j], lengths)[0], labels) for j, net in enumerate(members)]
        sum(losses).backward()
        mean += (sum(l.item() for l in losses) / len(losses) - mean) / (k % per_epoch + 1)
        running.append(mean)
        for table in tables:  # the rows the batch read, as the engine lists them: sparse
            j = next(j for j, n in enumerate(members)
                     if table is n.embeddings.weight or table is n.subwords.weight)
            rows = torch.tensor(table_rows(members[j], own[j], lengths)[table], dtype=torch.long)
            table.grad = torch.sparse_coo_tensor(rows[None, :], table.grad[rows],
                                                 table.shape).coalesce()
        if tables:  # Adam's eps placement (the comment above TRAIN_ROWS)
            sparse = opts[1]
            t = sparse.state[tables[0]]["step"] + 1 if sparse.state.get(tables[0]) else 1
            sparse.param_groups[0]["eps"] = 1e-8 * math.sqrt(1 - 0.999 ** float(t))
        for o in opts:
            o.step()
        for sc in scheds:
            sc.step()
    res = {"lrs": torch.tensor(lrs, dtype=torch.float64),
           "train_loss": torch.tensor(running, dtype=torch.float64)}
    for name, p in m.named_parameters():
        res["final." + name] = p.detach().clone()
    return {k: v.to(torch.float32).numpy() for k, v in res.items()}


def check_draws(rows, batches, masks, train):
    """What the engine drew is what the options say, before PyTorch is given it: each batch is
    rows of the data with some words replaced by <UNK> (1), mask values are 0 or 1 / keep, and
    the rates are within 4 standard deviations of the options'."""
    words = {(tuple(ids), label) for ids, label in rows}
    dropped = real = 0
    for tokens, lengths, labels in batches:
        for b, member in ((b, j) for j in range(tokens.shape[0] if tokens.dim() == 3 else 1)
                          for b in range(lengths.shape[0])):
            got = (tokens[member] if tokens.dim() == 3 else tokens)[b, :lengths[b]].tolist()
            match = [ids for ids, label in words
                     if label == int(labels[b]) and len(ids) == len(got)
                     and all(g == i or g == 1 for g, i in zip(got, ids))]
            assert len(match) == 1, ("not a row of the data with words dropped", got)
            dropped += sum(g != i for g, i in zip(got, match[0]))
            real += len(got)
    for p, n, k in ((train["word_dropout"], real, dropped),
                    (train["embed_dropout"], real * E,
                     sum(int((e[:, b, :int(n_[b])] == 0).sum()) for (e, _), (_, n_, _)
                         in zip(masks, batches) for b in range(e.shape[1]))),
                    (train["dropout"], sum(h.size for _, h in masks),
                     sum(int((h == 0).sum()) for _, h in masks))):
        assert abs(k - p * n) <= 4 * math.sqrt(n * p * (1 - p)), (p, n, k)
    for e, h in masks:
        assert set(np.unique(e)) <= {0.0, np.float32(1 / (1 - train["embed_dropout"]))}
        assert set(np.unique(h)) <= {0.0, np.float32(1 / (1 - train["dropout"]))}


def path_of(outdir, name):
    return os.path.join(outdir, name + ".safetensors")


def engine_record(path, tensors, meta):
    """Run the engine's trainer on the fixture so far (tests/test_golden_train --record): each
    step's batch (word_dropout applied: each member's copy) and dropout masks, as [(tokens
    (K, B, T), lengths, labels, embed masks (K, B, T, E), dropout masks (K, B, F))]."""
    import subprocess
    import tempfile
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tool = os.path.join(root, os.environ.get("BUILD", "build"), "tests", "test_golden_train")
    if not os.path.exists(tool):
        sys.exit("gen_fixtures.py: %s is needed to draw the dropouts: make %s first"
                 % (tool, os.path.relpath(tool, root)))
    with tempfile.TemporaryDirectory() as tmp:
        fixture, record = os.path.join(tmp, "fixture.safetensors"), os.path.join(tmp, "record")
        with open(fixture, "wb") as f:
            f.write(st_save(tensors, meta))
        subprocess.run([tool, "--record", record, fixture], cwd=root, check=True,
                       stdout=subprocess.DEVNULL)
        blob = open(record, "rb").read()
    steps, at = [], 0

    def take(dtype, n):
        nonlocal at
        a = np.frombuffer(blob, dtype=dtype, count=n, offset=at)
        at += 4 * n
        return a

    while at < len(blob):
        Bs, Ts, Es, Fs, Ks = (int(x) for x in take("<i4", 5))
        tokens = take("<i4", Ks * Bs * Ts).reshape(Ks, Bs, Ts).astype(np.int64)
        lengths = take("<i4", Bs).astype(np.int64)
        labels = take("<i4", Bs).astype(np.int64)
        take("<f4", 1)  # the lr
        emb = take("<f4", Ks * Bs * Ts * Es).reshape(Ks, Bs, Ts, Es).copy()
        head = take("<f4", Ks * Bs * Fs).reshape(Ks, Bs, Fs).copy()
        steps.append((tokens, lengths, labels, emb, head))
    return steps


def train_main():
    outdir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "golden_train")
    os.makedirs(outdir, exist_ok=True)
    for old in os.listdir(outdir):
        if old.endswith(".safetensors"):
            os.remove(os.path.join(outdir, old))
    for index, (name, cfg, train) in enumerate(train_cases()):
        torch.manual_seed(3000 + index)
        model = classifier(cfg)
        gen = torch.Generator().manual_seed(4000 + index)
        rows = train_rows(gen)
        class_weights = (0.5 + 1.5 * torch.rand(C, generator=gen)).float()
        tensors = {k: v.detach().to(torch.float32).numpy() for k, v in model.state_dict().items()}
        tensors["class_weights"] = class_weights.numpy().astype(np.float32)
        config = engine_config(cfg)
        config["num_classes"] = C
        meta = {"config": json.dumps(config), "train": json.dumps(train), "case": name,
                "texts": "\n".join(" ".join(VOCAB[i] for i in ids) for ids, _ in rows),
                "labels": ",".join(str(label) for _, label in rows),
                "params": ",".join(model.state_dict().keys())}
        per_epoch = TRAIN_ROWS // TRAIN_B
        masks = None
        if "seed" in train:  # the engine's draws: its batches and masks, given to PyTorch
            steps = engine_record(path_of(outdir, name), tensors, meta)
            K = steps[0][0].shape[0]  # an ensemble: each member's own tokens (K, B, T)
            batches = [(torch.from_numpy(t[:, :, :int(n.max())].copy() if K > 1
                                         else t[0, :, :int(n.max())].copy()),
                        torch.from_numpy(n), torch.from_numpy(y)) for t, n, y, _, _ in steps]
            masks = [(e[:, :, :int(n.max())], h) for _, n, _, e, h in steps]
            check_draws(rows, batches, masks, train)
        else:  # the second epoch takes the batches in the other order than the first
            order = [[1, 0], [0, 1]] if index % 2 == 0 else [[0, 1], [1, 0]]
            batches = train_batches(rows, order[:TRAIN_EPOCHS])
        exact = train_run(model, batches, class_weights, train, torch.float64, per_epoch, masks)
        single = train_run(model, batches, class_weights, train, torch.float32, per_epoch, masks)
        S, T = len(batches), max(int(b[1].max()) for b in batches)
        K = batches[0][0].shape[0] if batches[0][0].dim() == 3 else 1
        tokens = np.zeros((S, K, TRAIN_B, T), dtype=np.int64)
        for s, (tok, _, _) in enumerate(batches):
            tokens[s, :, :, :tok.shape[-1]] = tok.numpy()
        tensors["batch_tokens"] = tokens[:, 0]
        if K > 1:
            tensors["member_tokens"] = tokens
        tensors["batch_lengths"] = np.stack([b[1].numpy() for b in batches]).astype(np.int64)
        tensors["batch_labels"] = np.stack([b[2].numpy() for b in batches]).astype(np.int64)
        if masks is not None:
            emb = np.zeros((S, K, TRAIN_B, T, E), dtype=np.float32)
            for s, (e, _) in enumerate(masks):
                emb[s, :, :, :e.shape[2]] = e
            head = np.stack([h for _, h in masks]).astype(np.float32)
            # (S * K, ...): the engine's safetensors reader takes 4 dimensions at most
            tensors["emb_masks"] = emb.reshape(S * K, TRAIN_B, T, E) if K > 1 else emb[:, 0]
            tensors["head_masks"] = head if K > 1 else head[:, 0]
        tensors.update(exact)
        path = path_of(outdir, name)
        with open(path, "wb") as f:
            f.write(st_save(tensors, meta))
        finals = [k for k in exact if k.startswith("final.") and not k.endswith("attn.bias")]
        a, r = max((worst(single[k], exact[k]) for k in finals), key=lambda x: x[1])
        print("%-22s %5d bytes, %d steps, lrs %s; float32 torch vs stored (max abs/rel err): "
              "final %.2g/%.2g (attn.bias aside), train_loss %.2g/%.2g"
              % (name, os.path.getsize(path), S, " ".join("%.4g" % x for x in exact["lrs"]), a, r,
                 *worst(single["train_loss"], exact["train_loss"])))


if __name__ == "__main__":
    if sys.argv[1:] == ["--train"]:
        train_main()
    elif sys.argv[1:]:
        sys.exit("usage: gen_fixtures.py [--train]")
    else:
        main()
        train_main()
