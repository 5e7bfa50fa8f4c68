"""gen_fixtures.py -- regenerate the PyTorch golden fixtures of tests/test_golden.c.

    /usr/bin/python3 tests/gen_fixtures.py     (from the repository root; rewrites tests/fixtures/golden/)

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
import os
import sys

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attn_reference import AttnClassifier, engine_config, st_save  # noqa: E402

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
    # seed 004's dot attention (issue 14), after the others so that their seeds stay the same
    for cell in ("rnn", "gru", "lstm"):
        for bi in (False, True):
            out.append(("%s_%s_dot" % (cell, "bi" if bi else "uni"),
                        dict(cell=cell, layers=1, bidirectional=bi, attention="dot")))
    out.append(("gru_l2_bi_dot", dict(cell="gru", layers=2, bidirectional=True, attention="dot")))
    out.append(("lstm_bi_dot_nofc1", dict(cell="lstm", layers=1, bidirectional=True,
                                          attention="dot", fc_hidden=0)))
    # label smoothing (issue 20): torch.nn.CrossEntropyLoss(weight=w, label_smoothing=0.1)
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

if __name__ == "__main__":
    main()
