"""test_hostile_weights.py -- corrupted safetensors BLOBs through attn_import and through a
corrupted `weights` column of attn_models read by attn_predict / attn_probs / attn_classify.

Each BLOB (derived from a model the extension saved) is either refused with an error naming the
function, or loads as a model that predicts; never a crash, and never an out-of-bounds read
(under `make test-asan` the extension is built with ASan). Which may load: a flip inside a float
of the data (refused only when it makes a value NaN or infinite), and a flip of the header that
leaves it JSON with every tensor's dtype, shape and offsets as they were (a metadata string);
every other corruption must be refused.
Kinds: truncated at many lengths, single-bit flips across the header and the data, header
length oversized / 2^64-1 / one past the end, tensors overlapping or outside the data, wrong
dtype, wrong shape, missing or extra tensors, newer format version, absurd config in the
metadata, vocabulary and labels of the wrong size, non-BLOB values; and a float16 version's BLOB
("storage": "float16", F16 tensors) with its dtype, sizes, storage and length corrupted.
Run from the repository root: /usr/bin/python3 tests/test_hostile_weights.py
"""
import json
import os
import random
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability as R  # noqa: E402

R.reexec_with_preload()
R.require_extension()
check = R.check

db = R.connect(":memory:")
R.make_table(db)
R.train(db, options='{"epochs":1,"hidden":4,"embed_dim":4,"fc_hidden":4,"vocab_size":40,'
                    '"cell":"gru","bidirectional":true,"progress":false}')
good = db.execute("SELECT weights FROM attn_models WHERE name = 'm'").fetchone()[0]
hlen = struct.unpack("<Q", good[:8])[0]
header = json.loads(good[8:8 + hlen])
data = good[8 + hlen:]
tensors = [k for k in header if k != "__metadata__"]
print(f"model BLOB: {len(good)} bytes, header {hlen} bytes, {len(tensors)} tensors")


def build(hdr, payload=data, pad=True):
    h = json.dumps(hdr, separators=(",", ":")).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + payload


def variant(fn):
    hdr = json.loads(json.dumps(header))
    fn(hdr)
    return build(hdr)


check(build(header) != b"" and R.error_of(db, "SELECT attn_import('x', ?)", (build(header),)) is None,
      "the re-serialised header of the good BLOB imports")
db.execute("DELETE FROM attn_models WHERE name = 'x'")
before = R.snapshot(db)

first, second = tensors[0], tensors[1]
blobs = {}
for n in sorted({0, 1, 7, 8, 9, 8 + hlen // 2, 8 + hlen - 1, 8 + hlen, 8 + hlen + 1,
                 len(good) // 2, len(good) - 4, len(good) - 1}):
    blobs[f"truncated to {n} bytes"] = good[:n]
blobs["header length 2^64-1"] = struct.pack("<Q", 2**64 - 1) + good[8:]
blobs["header length 2^63"] = struct.pack("<Q", 2**63) + good[8:]
blobs["header length = blob length"] = struct.pack("<Q", len(good)) + good[8:]
blobs["header length one past the end"] = struct.pack("<Q", len(good) - 7) + good[8:]
blobs["header length 0"] = struct.pack("<Q", 0) + good[8:]
blobs["header of 100 MB declared"] = struct.pack("<Q", 100 << 20) + good[8:]
blobs["header not JSON"] = struct.pack("<Q", 8) + b"\xff\xfe{{[[ \x00" + data
blobs["header JSON array"] = build([1, 2, 3])
blobs["header nested 10000 deep"] = build(json.loads("[" * 50 + "]" * 50)) if False else \
    struct.pack("<Q", 20000) + b"[" * 10000 + b"]" * 10000 + data


def set_offsets(name, begin, end):
    def f(h):
        h[name]["data_offsets"] = [begin, end]
    return f


b0, e0 = header[first]["data_offsets"]
b1, e1 = header[second]["data_offsets"]
blobs["overlapping offsets"] = variant(set_offsets(second, b0, b0 + (e1 - b1)))
blobs["offsets past the data"] = variant(set_offsets(first, len(data) - 4, len(data) - 4 + e0 - b0))
blobs["offsets 2^64 - 8 .. 2^64"] = variant(set_offsets(first, 2**64 - 8, 2**64))
blobs["offsets wrapping around"] = variant(set_offsets(first, 2**64 - 4, e0 - b0 - 4))
blobs["offsets begin > end"] = variant(set_offsets(first, e0, b0))
blobs["offsets negative"] = variant(set_offsets(first, -4, e0))
blobs["offsets not integers"] = variant(set_offsets(first, "0", 1.5))
blobs["size not matching the shape"] = variant(set_offsets(first, b0, e0 - 4))
blobs["data not covered (a gap)"] = build(header, data + b"\0" * 64)
for dt in ("F16", "BF16", "F64", "I32", "I64", "U8", "BOOL", "F8_E4M3", "", 32):
    def f(h, dt=dt):
        h[first]["dtype"] = dt
    blobs[f"dtype {dt!r}"] = variant(f)
for shape in ([], [0], [1], [2**62, 2**62], [-1, 4], [1, 2, 3, 4, 5], ["4"], None):
    def f(h, shape=shape):
        h[first]["shape"] = shape
    blobs[f"shape {shape}"] = variant(f)


def swap_shape(h):
    h[first]["shape"] = list(reversed(h[first]["shape"]))
blobs["shape transposed"] = variant(swap_shape)
blobs["a tensor missing"] = variant(lambda h: h.pop(second))
blobs["an extra tensor"] = variant(lambda h: h.__setitem__("extra.weight", {
    "dtype": "F32", "shape": [1], "data_offsets": [0, 4]}))
blobs["a tensor renamed"] = variant(lambda h: h.__setitem__("zzz", h.pop(first)))
blobs["no metadata"] = variant(lambda h: h.pop("__metadata__"))


def meta(key, value):
    def f(h):
        if value is None:
            h["__metadata__"].pop(key)
        else:
            h["__metadata__"][key] = value
    return f


cfg = json.loads(header["__metadata__"]["config"])
vocab = json.loads(header["__metadata__"]["vocab"])
labels = json.loads(header["__metadata__"]["labels"])
for version in ("2", "999", "0", "-1", "1.0", "", "one", None, 2):
    blobs[f"format_version {version!r}"] = variant(meta("format_version", version))
for key, val in (("hidden", 1000000000), ("hidden", 8), ("vocab_size", 0), ("cell", "lstm"),
                 ("layers", 2), ("bidirectional", False), ("lr", float("inf")), ("max_len", 0),
                 ("attention", "self"), ("fc_hidden", 0), ("unknown_key", 1)):
    c = dict(cfg)
    c[key] = val
    blobs[f"config {key} = {val}"] = variant(meta("config", json.dumps(c)))
blobs["config not JSON"] = variant(meta("config", "{hidden:"))
blobs["config missing"] = variant(meta("config", None))
blobs["vocab one short"] = variant(meta("vocab", json.dumps(vocab[:-1])))
blobs["vocab one extra"] = variant(meta("vocab", json.dumps(vocab + ["zzextra"])))
blobs["vocab with a duplicate"] = variant(meta("vocab", json.dumps(vocab[:-1] + [vocab[2]])))
blobs["vocab not an array"] = variant(meta("vocab", json.dumps({"a": 1})))
blobs["vocab of numbers"] = variant(meta("vocab", json.dumps(list(range(len(vocab))))))
blobs["vocab missing"] = variant(meta("vocab", None))
blobs["labels one short"] = variant(meta("labels", json.dumps(labels[:-1])))
blobs["labels one extra"] = variant(meta("labels", json.dumps(labels + ["extra"])))
blobs["labels with a duplicate"] = variant(meta("labels", json.dumps([labels[0]] * len(labels))))
blobs["labels empty"] = variant(meta("labels", json.dumps([])))
blobs["labels with a NUL"] = variant(meta("labels", json.dumps(["a\u0000b"] + labels[1:])))
blobs["labels missing"] = variant(meta("labels", None))
blobs["metadata value not a string"] = variant(meta("labels", labels))

rng = random.Random(6)
flips = sorted(set(rng.randrange(len(good) * 8) for _ in range(200)) |
               {i * 8 + b for i in range(8) for b in (0, 7)} |
               set(rng.randrange((8 + hlen) * 8) for _ in range(200)))
for bit in flips:
    b = bytearray(good)
    b[bit // 8] ^= 1 << (bit % 8)
    blobs[f"bit {bit} flipped (byte {bit // 8})"] = bytes(b)

# ------------------------------------------------------------------ through attn_import
def in_data(what):
    """Whether the BLOB is a bit flip in the tensors' data (after the 8 + hlen header bytes)."""
    return what.startswith("bit ") and int(what.split()[1]) // 8 >= 8 + hlen


def same_layout(blob):
    """Whether the BLOB's header is JSON of the same length whose tensors are those of good."""
    if blob[:8] != good[:8]:
        return False
    try:  # invalid UTF-8 inside a string is accepted (a vocabulary token or a label as it is)
        h = json.loads(blob[8:8 + hlen].decode("utf-8", "surrogateescape"))
    except ValueError:
        return False
    return isinstance(h, dict) and {k: v for k, v in h.items() if k != "__metadata__"} == \
        {k: v for k, v in header.items() if k != "__metadata__"}


refused = loaded = bad = 0
for what, blob in blobs.items():
    err = R.error_of(db, "SELECT attn_import('imp', ?)", (blob,))
    if err is None:
        loaded += 1
        # hex(): a flip inside a label can leave it invalid UTF-8, which attnext returns as it
        # is (training accepts such labels, tests/test_hostile_inputs.py) but Python's sqlite3
        # cannot decode; the question here is whether the extension predicts
        ok = R.error_of(db, "SELECT hex(attn_predict('imp', 'goal match team'))") is None
        if not (ok and (in_data(what) or same_layout(blob))):
            bad += 1
            print(f"FAIL {what}: imported (predicts: {ok}); expected an error")
        # the version's rows everywhere (its lineage and the name's version mark too)
        for table in ("attn_models", "attn_lineage", "attn_versions"):
            db.execute(f"DELETE FROM {table} WHERE name = 'imp'")
    elif not err.startswith("attn_import: "):
        bad += 1
        print(f"FAIL {what}: error does not name attn_import: {err}")
    elif in_data(what) and "non-finite" not in err:
        bad += 1
        print(f"FAIL {what}: a flip in a float of the data refused, not for a non-finite value: "
              f"{err}")
    else:
        refused += 1
check(bad == 0, f"attn_import of {len(blobs)} corrupted BLOBs: {refused} refused, {loaded} "
                f"loaded (bit flips), {bad} wrong")
# A float16 version ("storage": "float16", 2 bytes a value): its sizes checked as exactly.
db.execute("SELECT * FROM attn_train('h', 'SELECT text, label FROM docs', ?)",
           ('{"epochs":1,"hidden":4,"embed_dim":4,"fc_hidden":4,"vocab_size":40,"cell":"gru",'
            '"bidirectional":true,"progress":false,"storage":"float16"}',)).fetchall()
half = db.execute("SELECT weights FROM attn_models WHERE name = 'h'").fetchone()[0]
hhlen = struct.unpack("<Q", half[:8])[0]
hheader = json.loads(half[8:8 + hhlen])
hdata = half[8 + hhlen:]
check(len(hdata) * 2 == len(data) and all(hheader[k]["dtype"] == "F16" for k in tensors),
      f"float16 BLOB: {len(half)} bytes, data {len(hdata)} bytes (float32: {len(data)}), all F16")
hb0, he0 = hheader[first]["data_offsets"]
halves = {}


def hvariant(fn, payload=hdata):
    hdr = json.loads(json.dumps(hheader))
    fn(hdr)
    return build(hdr, payload)


for dt in ("F32", "BF16", "F64", "I32", "I64", "U8", "f16", ""):
    halves[f"dtype {dt!r}"] = hvariant(lambda h, dt=dt: h[first].__setitem__("dtype", dt))
halves["one value short"] = hvariant(lambda h: h[first].__setitem__("data_offsets", [hb0, he0 - 2]))
halves["one byte short"] = hvariant(lambda h: h[first].__setitem__("data_offsets", [hb0, he0 - 1]))
halves["offsets of the float32 size"] = hvariant(
    lambda h: h[first].__setitem__("data_offsets", [hb0, hb0 + 2 * (he0 - hb0)]))
halves["data not covered (a gap)"] = build(hheader, hdata + b"\0\0")
halves["an odd byte at the end"] = build(hheader, hdata + b"\0")
halves["shape transposed"] = hvariant(lambda h: h[first].__setitem__(
    "shape", list(reversed(h[first]["shape"]))))
halves["shape doubled"] = hvariant(lambda h: h[first].__setitem__(
    "shape", [2 * h[first]["shape"][0]] + h[first]["shape"][1:]))
hcfg = json.loads(hheader["__metadata__"]["config"])
for storage in ("float32", "bfloat16", None):
    def set_storage(h, storage=storage):
        c = dict(hcfg)
        if storage is None:
            c.pop("storage")  # a file of before the option: float32
        else:
            c["storage"] = storage
        h["__metadata__"]["config"] = json.dumps(c)
    halves[f"config storage {storage!r}"] = hvariant(set_storage)
for n in sorted(set(range(0, len(half), max(1, len(half) // 300))) | {len(half) - 1, len(half) - 2}):
    halves[f"truncated to {n} bytes"] = half[:n]
bad = 0
for what, blob in halves.items():
    err = R.error_of(db, "SELECT attn_import('imp', ?)", (blob,))
    if err is None or not err.startswith("attn_import: "):
        bad += 1
        print(f"FAIL float16 {what}: {err or 'imported'}; expected an error naming attn_import")
# a flip in the data: loads, unless it makes a value infinite or NaN (refused, named so)
hrng = random.Random(16)
flipped = 0
for bit in sorted(set(hrng.randrange(len(hdata) * 8) for _ in range(150))):
    b = bytearray(half)
    b[8 + hhlen + bit // 8] ^= 1 << (bit % 8)
    err = R.error_of(db, "SELECT attn_import('imp', ?)", (bytes(b),))
    if err is None:
        for table in ("attn_models", "attn_lineage", "attn_versions"):
            db.execute(f"DELETE FROM {table} WHERE name = 'imp'")
    elif "non-finite" not in err:
        bad += 1
        print(f"FAIL float16 data bit {bit}: {err}")
    flipped += 1
check(bad == 0, f"attn_import of {len(halves)} corrupted float16 BLOBs refused, {flipped} data "
                f"bit flips loaded or refused as non-finite")
for what in ("dtype 'F32'", "one value short", "config storage 'float32'", "config storage None"):
    print(f"     float16 {what}: {R.error_of(db, 'SELECT attn_import(?, ?)', ('imp', halves[what]))}")
db.execute("DELETE FROM attn_models WHERE name = 'h'")
db.execute("DELETE FROM attn_lineage WHERE name = 'h'")
db.execute("DELETE FROM attn_versions WHERE name = 'h'")
db.execute("DELETE FROM attn_training_log WHERE name = 'h'")
for what in ("header length 2^64-1", "overlapping offsets", "dtype 'F16'", "shape transposed",
             "format_version '2'", "config hidden = 1000000000", "truncated to 0 bytes"):
    err = R.error_of(db, "SELECT attn_import('imp', ?)", (blobs[what],))
    print(f"     {what}: {err}")
for what, value in (("NULL", None), ("text", "abc"), ("integer", 7), ("real", 1.5),
                    ("empty BLOB", b""), ("zeroblob(100000)", None)):
    sql = ("SELECT attn_import('imp', zeroblob(100000))" if what.startswith("zeroblob")
           else "SELECT attn_import('imp', ?)")
    err = R.error_of(db, sql, () if what.startswith("zeroblob") else (value,))
    check(err is not None and err.startswith("attn_import: "), f"attn_import of {what}: {err}")
check(R.snapshot(db) == before, "database unchanged by every refused import")

# ------------------------------------------------------------------ through the weights column
# Each corrupted BLOB replaces the weights of a deployed version; a fresh connection (no cache)
# must answer every function with an error naming it, or predict (a flip in the data).
path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"attn_hostile_{os.getpid()}.db")
if os.path.exists(path):
    os.remove(path)
disk = R.connect(path)
disk.execute("CREATE TABLE docs(id INTEGER PRIMARY KEY, text, label)")
disk.executemany("INSERT INTO docs(text, label) VALUES(?, ?)", R.make_rows(60))
disk.execute("SELECT attn_import('m', ?)", (good,)).fetchall()
selected = [w for w in blobs if not w.startswith("bit ")] + \
    [w for w in blobs if w.startswith("bit ")][::8]
bad = 0
for what in selected:
    disk.execute("UPDATE attn_models SET weights = ? WHERE name = 'm'", (blobs[what],))
    fresh = R.connect(path)
    # labels as hex() (a flipped label may be invalid UTF-8: see the attn_import loop above)
    errs = [R.error_of(fresh, "SELECT hex(attn_predict('m', 'goal match'))"),
            R.error_of(fresh, "SELECT hex(attn_predict('goal match'))"),
            R.error_of(fresh, "SELECT hex(label), probability FROM attn_probs('m', 'goal')"),
            R.error_of(fresh, "SELECT * FROM attn_weights('m', 'goal')"),
            R.error_of(fresh, "SELECT id, hex(label) FROM attn_classify('m', "
                              "'SELECT id, text FROM docs')"),
            R.error_of(fresh, "SELECT hex(label), f1 FROM attn_evaluate('m', "
                              "'SELECT text, label FROM docs')")]
    fns = ["attn_predict", "attn_predict", "attn_probs", "attn_weights", "attn_classify",
           "attn_evaluate"]
    for fn, err in zip(fns, errs):
        if err is None:
            if not what.startswith("bit "):
                bad += 1
                print(f"FAIL weights column {what}: {fn} answered; expected an error")
        elif not err.startswith(fn + ": "):
            bad += 1
            print(f"FAIL weights column {what}: {fn} error does not name it: {err}")
    fresh.close()
disk.execute("UPDATE attn_models SET weights = ? WHERE name = 'm'", (blobs["dtype 'F16'"],))
fresh = R.connect(path)
print("     e.g.", R.error_of(fresh, "SELECT attn_predict('m', 'goal match')"))
fresh.close()
check(bad == 0, f"{len(selected)} corrupted weights columns x 6 functions: errors name the "
                f"function, no crash")
disk.close()
os.remove(path)
R.finish("test_hostile_weights")
