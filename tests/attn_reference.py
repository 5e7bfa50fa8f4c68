"""attn_reference.py -- the PyTorch reference of attnext's network, and a safetensors reader/writer.

The engine (engine/*.c) must compute what this module computes: the Made-With-ML "Attention"
lesson's classifier, generalised as ext/ARCHITECTURE.md (the model and its training) says:

    tokens (B, T) -> Embedding(V, E, padding_idx=0) -> RNN (tanh) | GRU | LSTM
    (layers, bidirectional, packed so padding is never read) -> attention pooling
    (linear | additive | self | dot, padded positions masked) -> fc1 -> dropout -> fc2 -> logits (B, C)

with, in training only, embed_dropout (inverted dropout on the embedded tokens) and
word_dropout (tokens replaced by <UNK> before the embedding; word_dropout() below). An ensemble
("ensemble": K > 1) is K such networks (EnsembleClassifier, state_dict names members.k.*): its
prediction averages the members' softmax probabilities (logits = their log) and its attention
averages theirs; in training each member learns from its own loss, summed.

Its state_dict names are the contract of the weight format (embeddings.weight, rnn.weight_ih_l0,
attn.weight, fc1.weight, ...). Used by tests/gen_fixtures.py (golden fixtures for
tests/test_golden.c), tests/test_interop.py and the benchmark. Run with Debian's /usr/bin/python3.

    from attn_reference import AttnClassifier, st_save, st_load, engine_file, from_engine_file
    model = AttnClassifier({"cell": "gru", "bidirectional": True, "attention": "additive",
                            "vocab_size": 30, "embed_dim": 8, "hidden": 6, "fc_hidden": 5,
                            "num_classes": 3})
    logits, attn = model(tokens, lengths)      # tokens (B, T) long, lengths (B) long
"""
import json
import math
import struct

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# The lesson's network (ext/REFERENCE.md, Training options: recipe "lesson"; nn_config_lesson in
# engine/config.c has the same).
DEFAULTS = {"cell": "rnn", "layers": 1, "bidirectional": False, "attention": "linear",
            "embed_dim": 100, "hidden": 128, "fc_hidden": 100, "dropout": 0.1,
            "embed_dropout": 0.0, "ensemble": 1, "vocab_size": 5000, "num_classes": 4,
            "subword_buckets": 0, "subword_min": 3, "subword_max": 5}


def subword_ids(token, buckets, n_min, n_max):
    """engine/text.c nn_subword_ids: the character n-grams (n_min..n_max characters) of
    "<" + token + ">", by start then length, each FNV-1a 32-bit over its UTF-8 bytes mod buckets."""
    chars = ["<"] + list(token) + [">"]
    out = []
    for a in range(len(chars)):
        for n in range(n_min, n_max + 1):
            if a + n > len(chars):
                break
            h = 2166136261
            for byte in "".join(chars[a:a + n]).encode("utf-8"):
                h = ((h ^ byte) * 16777619) & 0xFFFFFFFF
            out.append(h % buckets)
    return out


class Additive(nn.Module):
    """e_t = v . tanh(proj(h_t))   (Bahdanau-style scoring)."""

    def __init__(self, D):
        super().__init__()
        self.proj = nn.Linear(D, D)
        self.v = nn.Linear(D, 1, bias=False)

    def forward(self, out):  # out (B, T, D) -> e (B, T)
        return self.v(torch.tanh(self.proj(out))).squeeze(2)


class SelfAttn(nn.Module):
    """Scaled dot-product attention read at each sequence's last real token:
    q = query(h_last), e_t = q . key(h_t) / sqrt(D), values value(h_t)."""

    def __init__(self, D):
        super().__init__()
        self.query = nn.Linear(D, D)
        self.key = nn.Linear(D, D)
        self.value = nn.Linear(D, D)


class AttnClassifier(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c = dict(DEFAULTS)
        c.update(cfg)
        self.cfg = c
        V, E, H = c["vocab_size"], c["embed_dim"], c["hidden"]
        Fh, C, bi = c["fc_hidden"], c["num_classes"], bool(c["bidirectional"])
        self.embeddings = nn.Embedding(V, E, padding_idx=0)
        self.embed_dropout = nn.Dropout(c["embed_dropout"])
        # subwords ("subword_buckets" > 0): a word's input vector is the mean of its embedding
        # row and the rows of its character n-grams; cfg["vocab"] (the id-ordered token list)
        # gives the n-grams (<PAD> and <UNK> have none)
        self.subwords = None
        if c["subword_buckets"]:
            self.subwords = nn.Embedding(c["subword_buckets"], E)
            vocab = c["vocab"]
            rows, bags = [], []
            for v, tok in enumerate(vocab):
                ids = subword_ids(tok, c["subword_buckets"], c["subword_min"],
                                  c["subword_max"]) if v > 1 else []
                rows += [v] * len(ids)
                bags += ids
            self.register_buffer("sub_word", torch.tensor(rows, dtype=torch.long), persistent=False)
            self.register_buffer("sub_bucket", torch.tensor(bags, dtype=torch.long),
                                 persistent=False)
            count = torch.bincount(self.sub_word, minlength=V).to(torch.float32)
            self.register_buffer("sub_scale", (1.0 / (1.0 + count))[:, None], persistent=False)
        cell = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}[c["cell"]]
        self.rnn = cell(E, H, num_layers=c["layers"], batch_first=True, bidirectional=bi)
        D = H * (2 if bi else 1)
        self.D = D
        self.attention = c["attention"]
        if self.attention == "linear":
            self.attn = nn.Linear(D, 1)
        elif self.attention == "additive":
            self.attn = Additive(D)
        elif self.attention == "self":
            self.attn = SelfAttn(D)
        elif self.attention == "dot":
            self.attn = None  # the last step's self-attention: no parameters
        else:
            raise ValueError("attention must be linear, additive, self or dot, got %r"
                             % self.attention)
        if Fh:
            self.fc1 = nn.Linear(D, Fh)
        else:
            self.fc1 = None
        self.dropout = nn.Dropout(c["dropout"])
        self.fc2 = nn.Linear(Fh or D, C)

    def forward(self, tokens, lengths):
        """tokens (B, T) long, lengths (B) long (1..T) -> logits (B, C), attention (B, T)."""
        B, T = tokens.shape
        if self.subwords is None:
            emb = self.embeddings(tokens)  # (B, T, E)
        else:  # every word's composed vector (V, E), then looked up
            table = self.embeddings.weight.index_add(0, self.sub_word,
                                                     self.subwords.weight[self.sub_bucket])
            emb = F.embedding(tokens, table * self.sub_scale)
        emb = self.embed_dropout(emb)  # dropout in training only
        packed = nn.utils.rnn.pack_padded_sequence(emb, lengths.cpu(), batch_first=True,
                                                   enforce_sorted=False)
        out, _ = self.rnn(packed)
        out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=T)  # (B, T, D)
        mask = torch.arange(T, device=tokens.device)[None, :] < lengths.to(tokens.device)[:, None]
        if self.attention == "linear":
            e = self.attn(out).squeeze(2)  # (B, T)
            values = out
        elif self.attention == "additive":
            e = self.attn(out)
            values = out
        elif self.attention == "dot":
            # e_t = h_t . h_last, unscaled; bidirectional: the concatenated output,
            # whose reverse half at the last real token is the reverse direction's first step
            last = out[torch.arange(B, device=out.device), lengths.to(out.device) - 1]  # (B, D)
            e = torch.bmm(out, last.unsqueeze(2)).squeeze(2)                     # (B, T)
            values = out
        else:
            last = out[torch.arange(B, device=out.device), lengths.to(out.device) - 1]  # (B, D)
            q = self.attn.query(last)                                            # (B, D)
            k = self.attn.key(out)                                               # (B, T, D)
            e = torch.bmm(k, q.unsqueeze(2)).squeeze(2) / math.sqrt(self.D)      # (B, T)
            values = self.attn.value(out)                                        # (B, T, D)
        e = e.masked_fill(~mask, float("-inf"))
        a = F.softmax(e, dim=1)                                   # (B, T), 0 at padding
        context = torch.bmm(a.unsqueeze(1), values).squeeze(1)    # (B, D)
        z = self.fc1(context) if self.fc1 is not None else context
        z = self.dropout(z)
        return self.fc2(z), a


class EnsembleClassifier(nn.Module):
    """K AttnClassifiers of one cfg ("ensemble": K): members.0, members.1, ... Inference:
    logits = log(mean_k softmax(logits_k)), attention = mean_k attention_k. training_losses
    gives each member's own loss (their sum is what the engine minimises)."""

    def __init__(self, cfg):
        super().__init__()
        c = dict(DEFAULTS)
        c.update(cfg)
        self.cfg = c
        one = dict(c, ensemble=1)
        self.members = nn.ModuleList(AttnClassifier(one) for _ in range(c["ensemble"]))

    def forward(self, tokens, lengths):
        outs = [m(tokens, lengths) for m in self.members]
        probs = torch.stack([F.softmax(lo, dim=1) for lo, _ in outs]).mean(0)
        attn = torch.stack([a for _, a in outs]).mean(0)
        return torch.log(probs), attn

    def training_losses(self, tokens, lengths, labels, loss_fn):
        return [loss_fn(m(tokens, lengths)[0], labels) for m in self.members]


def classifier(cfg):
    """AttnClassifier, or EnsembleClassifier when cfg says "ensemble" > 1."""
    return EnsembleClassifier(cfg) if cfg.get("ensemble", 1) > 1 else AttnClassifier(cfg)


def word_dropout(tokens, lengths, p, generator=None):
    """word_dropout in training: each real token replaced by <UNK> (1) with probability p."""
    B, T = tokens.shape
    real = torch.arange(T)[None, :] < lengths[:, None]
    drop = (torch.rand(B, T, generator=generator) < p) & real
    return tokens.masked_fill(drop, 1)


def engine_config(cfg):
    """The config JSON object the engine reads (nn_config keys) for a reference cfg dict."""
    c = dict(DEFAULTS)
    c.update(cfg)
    keys = ["cell", "layers", "bidirectional", "attention", "embed_dim", "hidden", "fc_hidden",
            "dropout", "vocab_size"]
    out = {k: c[k] for k in keys}
    out["bidirectional"] = bool(out["bidirectional"])
    if c.get("ensemble", 1) > 1:
        out["ensemble"] = c["ensemble"]
    if c.get("embed_dropout", 0.0):
        out["embed_dropout"] = c["embed_dropout"]
    if c.get("subword_buckets", 0):
        for k in ("subword_buckets", "subword_min", "subword_max"):
            out[k] = c[k]
    if c.get("label_smoothing", 0.0):
        out["label_smoothing"] = c["label_smoothing"]
    return out


# ------------------------------------------------------------------ safetensors

_DTYPES = {np.dtype("float32"): "F32", np.dtype("int64"): "I64", np.dtype("int32"): "I32",
           np.dtype("float64"): "F64", np.dtype("float16"): "F16"}
_NP = {v: k for k, v in _DTYPES.items()}


def st_save(tensors, metadata=None):
    """safetensors bytes: 8-byte LE header length, JSON header (padded with spaces to a multiple
    of 8), then the little-endian tensor data in the order given. tensors: name -> numpy array or
    torch tensor; metadata: str -> str."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, t in tensors.items():
        if isinstance(t, torch.Tensor):
            t = t.detach().cpu().numpy()
        t = np.ascontiguousarray(t)
        if t.dtype not in _DTYPES:
            raise ValueError("st_save: tensor %s has dtype %s" % (name, t.dtype))
        data = t.astype(t.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def st_load(blob):
    """(tensors: name -> numpy array, metadata: dict) from safetensors bytes."""
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode())
    meta = header.pop("__metadata__", {}) or {}
    base = 8 + n
    tensors = {}
    for name, h in header.items():
        a, b = h["data_offsets"]
        dt = _NP[h["dtype"]].newbyteorder("<")
        tensors[name] = np.frombuffer(blob[base + a:base + b], dtype=dt).reshape(h["shape"])
    return tensors, meta


def engine_file(model, vocab, labels, extra_config=None):
    """The safetensors bytes the engine loads (nn_model_load / attn_import) for a PyTorch
    AttnClassifier: F32 state_dict + __metadata__ format_version "1", config, vocab, labels
    (JSON strings). extra_config: more nn_config keys (e.g. max_len, lower, stopwords)."""
    config = engine_config(model.cfg)
    config["vocab_size"] = len(vocab)
    config.update(extra_config or {})
    meta = {"format_version": "1", "config": json.dumps(config), "vocab": json.dumps(vocab),
            "labels": json.dumps(labels)}
    return st_save({k: v.float() for k, v in model.state_dict().items()}, meta)


def from_engine_file(blob):
    """(model, vocab, labels, config) from an engine weights file (nn_model_save, the
    attn_models.weights BLOB); the weights are loaded with load_state_dict(strict=True)."""
    tensors, meta = st_load(blob)
    config = json.loads(meta["config"])
    vocab, labels = json.loads(meta["vocab"]), json.loads(meta["labels"])
    cfg = {k: config[k] for k in DEFAULTS if k in config}
    cfg.update(vocab_size=len(vocab), num_classes=len(labels), vocab=vocab)
    model = classifier(cfg)
    # a "storage": "float16" file holds F16 tensors: float32 again, as the engine reads them
    model.load_state_dict({k: torch.from_numpy(v.astype(np.float32)) for k, v in tensors.items()},
                          strict=True)
    return model, vocab, labels, config
