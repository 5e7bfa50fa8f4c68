"""test_storage_float16.py -- option "storage": "float16" (engine/float16.c, nn_model_save /
nn_model_load, nn_trainer_take_model), through Debian's Python sqlite3 on a file database.

The bundled headlines train twice with the same options and seed, once stored as float32 (the
default) and once as float16. Checks, each printing what it compared:
  - the float16 version's weights are about half the bytes (0.49 to 0.51 of the float32 one's),
    every tensor F16 in the safetensors header, `storage` "float16" in its config and metrics;
  - what is stored is what was measured: the float16 tensors are the float32 version's weights
    rounded to nearest even (numpy's astype(float16)) bit for bit, the stored validation figures
    are the rounded model's and the float32 figures (val_f1_float32) are the float32 version's;
  - predictions: every probability of the float16 model within 0.01 of the float32 model's
    (stated tolerance; measured on AG News, Debian and WordNet in tests/bench/RESULTS.md), and
    a fresh connection (the version read from the file) gives the same probabilities, bit for
    bit, as the connection that trained it;
  - the default stays float32 ("recipe": "lesson" too), and a warm start from a float16 version
    trains and keeps float16 unless "storage" says otherwise;
  - hostile BLOBs: a tensor's dtype or data not matching its declared dtype and shape, F16
    tensors under a config that says float32 (and F32 under float16), the data cut short, an
    F16 infinity: attn_import refuses each with the loader's message, the store unchanged.
Run from the repository root: /usr/bin/python3 tests/test_storage_float16.py
"""
import csv
import json
import os
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability as R  # noqa: E402

R.reexec_with_preload()
R.require_extension()
check, error_of = R.check, R.error_of
try:
    import numpy as np
except ImportError:
    print("numpy not installed (python3-numpy)")
    sys.exit(77)

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
TOLERANCE = 0.01  # largest difference allowed between the two models' probabilities


def split(blob):
    n = struct.unpack("<Q", blob[:8])[0]
    return json.loads(blob[8:8 + n]), blob[8 + n:]


def build(header, data):
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


folder = tempfile.mkdtemp(prefix="attn_float16_")
path = os.path.join(folder, "news.db")
db = R.connect(path)
with open(os.path.join(ROOT, "data", "headlines.csv"), newline="") as f:
    rows = [r[:2] for r in list(csv.reader(f))[1:]]
with open(os.path.join(ROOT, "data", "new_headlines.csv"), newline="") as f:
    new = [r[0] for r in list(csv.reader(f))[1:]]
db.execute("CREATE TABLE headlines(title, category)")
db.executemany("INSERT INTO headlines VALUES(?, ?)", rows)
db.execute("CREATE TABLE new_headlines(id INTEGER PRIMARY KEY, title)")
db.executemany("INSERT INTO new_headlines(title) VALUES(?)", [(t,) for t in new])
Q = "SELECT title, category FROM headlines"
BASE = {"epochs": 4, "validation": "random", "progress": False}
s32 = json.loads(db.execute("SELECT attn_fit('f32', ?, ?)", (Q, json.dumps(BASE))).fetchone()[0])
s16 = json.loads(db.execute("SELECT attn_fit('f16', ?, ?)",
                            (Q, json.dumps(dict(BASE, storage="float16")))).fetchone()[0])

# ------------------------------------------------------------------ the bytes
w32, c32 = db.execute("SELECT weights, config FROM attn_models WHERE name = 'f32'").fetchone()
w16, c16, m16 = db.execute("SELECT weights, config, metrics FROM attn_models "
                           "WHERE name = 'f16'").fetchone()
ratio = len(w16) / len(w32)
check(0.49 <= ratio <= 0.51, f"float16 version {len(w16)} bytes, float32 {len(w32)}: {ratio:.4f} "
                             "of the bytes (expected 0.49 to 0.51)")
check(json.loads(c32)["storage"] == "float32" and json.loads(c16)["storage"] == "float16",
      "attn_models.config says storage float32 (the default) and float16")
h32, d32 = split(w32)
h16, d16 = split(w16)
names = [k for k in h32 if k != "__metadata__"]
check(all(h32[k]["dtype"] == "F32" for k in names) and all(h16[k]["dtype"] == "F16" for k in names)
      and sorted(names) == sorted(k for k in h16 if k != "__metadata__"),
      f"{len(names)} tensors: F32 in the default version, F16 in the float16 one")

# ------------------------------------------------------------------ stored = measured
same_bits, clamped = True, 0
for k in names:
    b32, e32 = h32[k]["data_offsets"]
    b16, e16 = h16[k]["data_offsets"]
    x = np.frombuffer(d32[b32:e32], dtype="<f4")
    big = np.abs(x) >= 65520
    clamped += int(big.sum())
    want = np.clip(x, -65504, 65504).astype("<f2")
    if want.tobytes() != d16[b16:e16]:
        same_bits = False
        print(f"     tensor {k}: float16 data differ from the float32 weights rounded")
check(same_bits, "the float16 tensors are the float32 version's weights rounded to nearest even "
                 f"(numpy astype(float16)), bit for bit ({clamped} clamped)")
m16 = json.loads(m16)
check(m16.get("storage") == "float16" and "val_f1_float32" in m16,
      f"metrics of the float16 version: storage {m16.get('storage')}, val_f1 {m16.get('val_f1')}, "
      f"val_f1_float32 {m16.get('val_f1_float32')}")
check(m16.get("val_f1_float32") == s32["val_f1"] and m16.get("val_loss_float32") == s32["val_loss"],
      f"its float32 figures are the float32 version's: val_f1 {s32['val_f1']}, val_loss "
      f"{s32['val_loss']} (the same training, rounded at the end)")
check(s16["val_loss"] != s32["val_loss"] and abs(s16["val_loss"] - s32["val_loss"]) < 0.01,
      f"its val_loss is the rounded weights' own: {s16['val_loss']} against {s32['val_loss']}")
check("storage" not in json.loads(db.execute(
    "SELECT metrics FROM attn_models WHERE name = 'f32'").fetchone()[0]),
      "the float32 version's metrics do not mention storage")

# ------------------------------------------------------------------ predictions
PROBS = "SELECT n.id, p.label, p.probability FROM new_headlines n, attn_probs(?, n.title) p"
p32 = {(i, l): p for i, l, p in db.execute(PROBS, ("f32",))}
p16 = {(i, l): p for i, l, p in db.execute(PROBS, ("f16",))}
worst = max(abs(p32[k] - p16[k]) for k in p32)
check(p32.keys() == p16.keys() and worst <= TOLERANCE,
      f"{len(new)} new headlines: largest probability difference {worst:.2e} (at most {TOLERANCE})")
labels = "SELECT attn_predict(?, title) FROM new_headlines ORDER BY id"
l32 = [r[0] for r in db.execute(labels, ("f32",))]
l16 = [r[0] for r in db.execute(labels, ("f16",))]
print(f"     labels: {sum(a != b for a, b in zip(l32, l16))} of {len(new)} differ")
fresh = R.connect(path)
q16 = {(i, l): p for i, l, p in fresh.execute(PROBS, ("f16",))}
check(q16 == p16, "a fresh connection reading the float16 version from the file: the same "
                  "probabilities, bit for bit")
batched = {r[0]: r[1] for r in fresh.execute(
    "SELECT id, label FROM attn_classify('f16', 'SELECT id, title FROM new_headlines')")}
check([batched[i + 1] for i in range(len(new))] == l16, "attn_classify agrees with attn_predict")
fresh.close()

# ------------------------------------------------------------------ defaults, warm starts
lesson = json.loads(db.execute("SELECT attn_fit('lesson', ?, ?)", (
    Q, '{"recipe":"lesson","epochs":1,"progress":false}')).fetchone()[0])
cfg = json.loads(db.execute("SELECT config FROM attn_models WHERE name = 'lesson'").fetchone()[0])
check(cfg["storage"] == "float32" and "storage" not in lesson,
      "\"recipe\": \"lesson\" stores float32")
warm = json.loads(db.execute("SELECT attn_fit('warm', ?, ?)", (
    Q, '{"from":"f16","epochs":1,"progress":false}')).fetchone()[0])
wcfg, wblob = db.execute("SELECT config, weights FROM attn_models WHERE name = 'warm'").fetchone()
check(warm.get("warm_start") and json.loads(wcfg)["storage"] == "float16"
      and abs(len(wblob) - len(w16)) < 64,
      "a warm start from the float16 version trains and keeps float16 (its recipe)")
warm32 = json.loads(db.execute("SELECT attn_fit('warm32', ?, ?)", (
    Q, '{"from":"f16","epochs":1,"storage":"float32","progress":false}')).fetchone()[0])
w32b = db.execute("SELECT weights FROM attn_models WHERE name = 'warm32'").fetchone()[0]
check(warm32.get("warm_start") and abs(len(w32b) - len(w32)) < 64,
      "... and with \"storage\": \"float32\" stores float32 again")
err = error_of(db, "SELECT attn_fit('x', ?, '{\"storage\":\"half\"}')", (Q,))
check(err == 'attn_fit: option "storage" must be "float32" or "float16", got "half"',
      f"a bad value: {err}")

# ------------------------------------------------------------------ hostile BLOBs
before = R.snapshot(db)
first = names[0]
n_first = int(np.prod(h16[first]["shape"]))


def variant(fn, data=d16):
    h = json.loads(json.dumps(h16))
    data = fn(h) or data
    return build(h, data)


def set_dtype(dt):
    def f(h):
        h[first]["dtype"] = dt
    return f


def set_config(storage):
    def f(h):
        c = json.loads(h["__metadata__"]["config"])
        c["storage"] = storage
        h["__metadata__"]["config"] = json.dumps(c)
    return f


b0, e0 = h16[first]["data_offsets"]
cases = {
    "F32 declared over F16 bytes": (
        variant(set_dtype("F32")),
        f'attn_import: safetensors: tensor "{first}": shape with dtype F32 needs {4 * n_first} '
        f"bytes but data_offsets span {2 * n_first}"),
    "F16 one value short": (
        variant(lambda h: h[first].__setitem__("data_offsets", [b0, e0 - 2])),
        f'attn_import: safetensors: tensor "{first}": shape with dtype F16 needs {2 * n_first} '
        f"bytes but data_offsets span {2 * n_first - 2}"),
    "F16 data under a float32 config": (
        variant(set_config("float32")),
        'attn_import: weights: tensor "embeddings.weight" has dtype F16, expected F32 (the '
        'config\'s "storage" is "float32")'),
    "F32 data under a float16 config": (
        build(dict(h32, __metadata__=dict(h32["__metadata__"], config=json.dumps(
            dict(json.loads(h32["__metadata__"]["config"]), storage="float16")))), d32),
        'attn_import: weights: tensor "embeddings.weight" has dtype F32, expected F16 (the '
        'config\'s "storage" is "float16")'),
    "F16 infinity": (
        variant(lambda h: None, data=d16[:b0] + b"\x00\x7c" + d16[b0 + 2:]),
        f'attn_import: weights: tensor "{first}" holds a non-finite value (infinity) at element 0'),
}
for what, (blob, want) in cases.items():
    err = error_of(db, "SELECT attn_import('imp', ?)", (blob,))
    check(err == want, f"{what}: {err}")
last = max(names, key=lambda k: h16[k]["data_offsets"][1])
err = error_of(db, "SELECT attn_import('imp', ?)", (w16[:-2],))
check(err is not None and err.startswith(f'attn_import: safetensors: tensor "{last}": data_offsets')
      and "outside the" in err, f"F16 data cut short by one value: {err}")
refused = sum(error_of(db, "SELECT attn_import('imp', ?)", (w16[:n],)) is not None
              for n in range(0, len(w16), max(1, len(w16) // 997)))
tried = len(range(0, len(w16), max(1, len(w16) // 997)))
check(refused == tried, f"the float16 BLOB truncated at {tried} lengths: {refused} refused")
check(R.snapshot(db) == before, "the store unchanged by every refused import")
check(error_of(db, "SELECT attn_import('imp', ?)", (w16,)) is None and
      db.execute("SELECT attn_predict('imp', 'Kessler Trucks shares tumble')").fetchone()[0] ==
      db.execute("SELECT attn_predict('f16', 'Kessler Trucks shares tumble')").fetchone()[0],
      "the float16 BLOB itself imports and predicts as its version")
db.close()
os.remove(path)
os.rmdir(folder)
R.finish("test_storage_float16")
