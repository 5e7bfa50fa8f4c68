"""test_viz.py -- the pictures and word-vector functions of attnext (ext/attn_heatmap_svg.c,
attn_training_svg.c, attn_svg.c, attn_matrix.c, attn_vectors.c), through Debian's Python sqlite3 module.

Checks, each printing what it compared:
  - attn_heatmap_svg / attn_heatmap_query_svg: every SVG parses as XML (xml.etree), its title holds the
    label and probability attn_probs gives, every token of attn_weights is drawn with its weight,
    the most attended token has the darkest colour; the row limit, NULL rows, read-only queries;
  - hostile texts: markup characters, a 5,000-byte token, invalid UTF-8, control characters, in
    texts, labels and model names: the XML still parses, the text comes back as text, long
    tokens are cut with an ellipsis, invalid bytes become U+FFFD;
  - attn_training_svg: one polyline per series, a marked line per learning-rate drop of the log, the
    best epoch circled; versions, missing values and errors;
  - attn_vectors_load: a tiny GloVe file read back float for float; word2vec header, blank lines,
    CRLF; bad lines named in the error; direct-only (refused inside a view);
  - attn_matrix: weights equal an independent NumPy computation of softmax(QK^T / sqrt(d)) with
    the lower-case fallback and zero vectors; attn_matrix_svg draws one cell per pair;
  - attn_train's "embeddings" / "freeze_embeddings" options: rows found in the table start as
    the vectors, a frozen embedding stays bit-identical through training, dimension errors;
  - every SVG is rendered to PNG with rsvg-convert (librsvg2-bin), and the PNG (decoded here with
    zlib) has the SVG's size and is not blank;
  - attn_heatmap_svg / attn_heatmap_query_svg with 'occlusion': attn_explain's occlusion drawn for every
    token, red above 0 and blue below, the largest |occlusion| at the end of a legend that runs
    blue .. white at 0 .. red; 'attention' is the default picture byte for byte; a bad third
    argument is an error naming the function.
Run from the repository root: /usr/bin/python3 tests/test_viz.py
"""
import math
import os
import re
import shutil
import sqlite3
import struct
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
import zlib

import numpy as np

SVG = "{http://www.w3.org/2000/svg}"
failures = 0
rendered = 0


def check(cond, what):
    global failures
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures += 1
    return cond


def reexec_with_preload():
    """Under make test-asan: restart with $ATTNEXT_PRELOAD (libasan) in LD_PRELOAD."""
    pre = os.environ.get("ATTNEXT_PRELOAD")
    if pre and pre not in os.environ.get("LD_PRELOAD", ""):
        env = dict(os.environ)
        env["LD_PRELOAD"] = pre + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
        opts = env.get("ASAN_OPTIONS", "")
        env["ASAN_OPTIONS"] = (opts + ":" if opts else "") + "detect_leaks=0"
        os.execve(sys.executable, [sys.executable] + sys.argv, env)


def connect(path):
    db = sqlite3.connect(path, isolation_level=None)
    db.enable_load_extension(True)
    db.load_extension(os.path.abspath(os.environ.get("ATTNEXT", "attnext")))
    return db


def error_of(db, sql, args=()):
    try:
        db.execute(sql, args).fetchall()
    except sqlite3.Error as e:
        return str(e)
    return None


# ------------------------------------------------------------------ PNG decoding (zlib only)

def png_pixels(data):
    """(width, height, rows of RGBA tuples) of an 8-bit RGBA or RGB PNG, non-interlaced."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
            channels = 4 if color == 6 else 3
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows, channels


def render(svg_text, name, tmp, min_ink=200):
    """Parse, render with rsvg-convert, decode, check size and ink. Returns the root element."""
    global rendered
    try:
        root = ET.fromstring(svg_text.encode("utf-8"))
    except ET.ParseError as e:
        check(False, f"{name}: SVG parses as XML ({e})")
        return None
    check(root.tag == SVG + "svg", f"{name}: root element is <svg> ({root.tag})")
    w, h = int(root.get("width")), int(root.get("height"))
    check(0 < w <= 2000 and 0 < h <= 20000, f"{name}: size {w}x{h} is bounded")
    if not shutil.which("rsvg-convert"):
        return root
    svg_path, png_path = os.path.join(tmp, name + ".svg"), os.path.join(tmp, name + ".png")
    with open(svg_path, "w", encoding="utf-8") as f:
        f.write(svg_text)
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    r = subprocess.run(["rsvg-convert", "-o", png_path, svg_path], capture_output=True, text=True,
                       env=env)
    if not check(r.returncode == 0, f"{name}: rsvg-convert renders it {r.stderr.strip()[:200]}"):
        return root
    pw, ph, rows, ch = png_pixels(open(png_path, "rb").read())
    ink = 0
    for row in rows[::2]:
        for x in range(0, pw * ch, 2 * ch):
            if row[x] < 200 or row[x + 1] < 200 or row[x + 2] < 200:
                ink += 1
    check((pw, ph) == (w, h), f"{name}: PNG is {pw}x{ph}, the SVG says {w}x{h}")
    check(ink >= min_ink, f"{name}: not blank: {ink} dark pixels (of every 4th) >= {min_ink}")
    rendered += 1
    return root


def texts_of(root):
    """The character data of every <text> element (with its children)."""
    return ["".join(t.itertext()) for t in root.iter(SVG + "text")]


# ------------------------------------------------------------------ the tests

def train_news(db):
    import csv
    with open("data/headlines.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))[1:]
    db.execute("CREATE TABLE headlines(title TEXT, category TEXT)")
    db.executemany("INSERT INTO headlines VALUES (?, ?)", rows)
    opts = ('{"cell":"gru","embed_dim":16,"hidden":16,"fc_hidden":16,"epochs":12,'
            '"batch_size":16,"lr":0.01,"lr_patience":0,"seed":7,"progress":false}')
    log = db.execute("SELECT epoch, lr FROM attn_train('news', 'SELECT title, category FROM "
                     "headlines', ?)", (opts,)).fetchall()
    return log


def test_heatmap(db, tmp):
    text = "Glenwood Hawks striker Okafor scores twice in cup final"
    svg = db.execute("SELECT attn_heatmap_svg('news', ?)", (text,)).fetchone()[0]
    root = render(svg, "heatmap", tmp)
    if root is None:
        return
    label, prob = db.execute("SELECT label, probability FROM attn_probs('news', ?)",
                             (text,)).fetchone()
    title = root.find(SVG + "title").text
    want = f"{label} (p = {prob:.3f})"
    check(want in title, f"heatmap: <title> {title!r} holds {want!r} (attn_probs)")
    check(any(want in t for t in texts_of(root)), "heatmap: the visible title holds it too")
    weights = db.execute("SELECT token, weight, start, \"end\" FROM attn_weights('news', ?)",
                         (text,)).fetchall()
    drawn = texts_of(root)
    missing = [w for w in weights if text[w[2]:w[3]] not in drawn or f"{w[1]:.3f}" not in drawn]
    check(not missing, f"heatmap: all {len(weights)} tokens drawn with their weights "
                       f"(missing {missing})")
    # the most attended token has the darkest box (the top of the scale)
    top = max(weights, key=lambda w: w[1])
    fills = {}
    for g in root.iter(SVG + "g"):
        rect, t = g.find(SVG + "rect"), g.findall(SVG + "text")
        if rect is not None and t:
            fills["".join(t[0].itertext())] = rect.get("fill")
    check(fills.get(text[top[2]:top[3]]) == "#67000d",
          f"heatmap: the most attended token {text[top[2]:top[3]]!r} ({top[1]:.3f}) is "
          f"#67000d, got {fills.get(text[top[2]:top[3]])}")
    check(db.execute("SELECT attn_heatmap_svg('news', NULL)").fetchone()[0] is None,
          "heatmap: NULL text gives NULL")
    e = error_of(db, "SELECT attn_heatmap_svg('nope', 'x')")
    check(e == "attn_heatmap_svg: no model named 'nope'", f"heatmap: unknown model: {e}")
    e = error_of(db, "SELECT attn_heatmap_svg(NULL, 'x')")
    check(e == "attn_heatmap_svg: the model name must be a non-empty text, got NULL",
          f"heatmap: NULL model: {e}")
    # a text with no token at all: one <UNK>, drawn with the vocabulary's name, escaped
    svg = db.execute("SELECT attn_heatmap_svg('news', '  ')").fetchone()[0]
    root = render(svg, "heatmap_empty", tmp)
    if root is not None:
        check("<UNK>" in texts_of(root), "heatmap: a text with no token shows <UNK> (escaped)")


def test_heatmap_occlusion(db, tmp):
    """attn_heatmap_svg(..., 'occlusion'): attn_explain's occlusion on a diverging scale centred on 0."""
    text = "Glenwood Hawks striker Okafor scores twice in cup final"
    plain = db.execute("SELECT attn_heatmap_svg('news', ?)", (text,)).fetchone()[0]
    same = db.execute("SELECT attn_heatmap_svg('news', ?, 'attention')", (text,)).fetchone()[0]
    check(plain == same, "heatmap: 'attention' gives the default picture byte for byte")
    svg = db.execute("SELECT attn_heatmap_svg('news', ?, 'occlusion')", (text,)).fetchone()[0]
    root = render(svg, "heatmap_occlusion", tmp)
    if root is None:
        return
    rows = db.execute("SELECT token, occlusion, start, \"end\" FROM attn_explain('news', ?)",
                      (text,)).fetchall()
    drawn = texts_of(root)
    missing = [r for r in rows if text[r[2]:r[3]] not in drawn or f"{r[1]:.3f}" not in drawn]
    check(not missing, f"heatmap occlusion: all {len(rows)} tokens drawn with attn_explain's "
                       f"occlusion (missing {missing})")
    fills = {}
    for g in root.iter(SVG + "g"):
        rect, t = g.find(SVG + "rect"), g.findall(SVG + "text")
        if rect is not None and t:
            fills["".join(t[0].itertext())] = rect.get("fill")
    m = max(abs(r[1]) for r in rows)
    for r in rows:
        fill = fills.get(text[r[2]:r[3]], "#000000")
        red, blue = int(fill[1:3], 16), int(fill[5:7], 16)
        if abs(r[1]) >= m - 1e-9:
            want = "#b2182b" if r[1] > 0 else "#2166ac"
            check(fill == want, f"heatmap occlusion: the largest |occlusion| {r[1]:.3f} "
                                f"({text[r[2]:r[3]]!r}) is the end of the scale {want}, got {fill}")
        elif abs(r[1]) > 0.02 * m:
            check((red > blue) == (r[1] > 0), f"heatmap occlusion: {text[r[2]:r[3]]!r} "
                  f"({r[1]:+.3f}) is {'red' if r[1] > 0 else 'blue'}: {fill}")
    stops = [s.get("stop-color") for s in root.iter(SVG + "stop")]
    check(len(stops) == 9 and stops[4] == "#ffffff" and stops[0] == "#2166ac"
          and stops[8] == "#b2182b", f"heatmap occlusion: legend blue .. white at 0 .. red: {stops}")
    check(f"{-m:.3f}" in drawn and "0" in drawn and f"{m:.3f}" in drawn,
          f"heatmap occlusion: legend from {-m:.3f} through 0 to {m:.3f}")
    check(any("occlusion" in t for t in drawn), "heatmap occlusion: the legend says occlusion")
    svg = db.execute("SELECT attn_heatmap_query_svg('news', 'SELECT title FROM headlines LIMIT 5', "
                     "'occlusion')").fetchone()[0]
    root = render(svg, "heatmap_query_occlusion", tmp)
    if root is not None:
        check(any(t.startswith("Occlusion over 5 texts") for t in texts_of(root)),
              "heatmap_query occlusion: titled 'Occlusion over 5 texts'")
    svg = db.execute("SELECT attn_heatmap_svg('news', '', 'occlusion')").fetchone()[0]
    render(svg, "heatmap_occlusion_empty", tmp)
    hostile = "<b>&amp;</b> " + "x" * 5000 + " \U0001F600 caf\u00e9 " + "tennis " * 3000
    svg = db.execute("SELECT attn_heatmap_svg('news', ?, 'occlusion')", (hostile,)).fetchone()[0]
    render(svg, "heatmap_occlusion_hostile", tmp)
    for sql, want in {
        "SELECT attn_heatmap_svg('news', 'x', 'gradient')":
            "attn_heatmap_svg: the third argument must be 'attention' or 'occlusion', got 'gradient'",
        "SELECT attn_heatmap_svg('news', 'x', NULL)":
            "attn_heatmap_svg: the third argument must be 'attention' or 'occlusion', got NULL",
        "SELECT attn_heatmap_query_svg('news', 'SELECT 1', 'Occlusion')":
            "attn_heatmap_query_svg: the third argument must be 'attention' or 'occlusion', got "
            "'Occlusion'",
    }.items():
        e = error_of(db, sql)
        check(e == want, f"heatmap: {sql}: {e!r}")


def test_hostile(db, tmp):
    long_token = "x" * 5000
    hostile = ("<script>alert('&amp;')</script> \"quoted\" AT&T " + long_token +
               " caf\u00e9 \u4e2d\u6587 \U0001F600 end")
    svg = db.execute("SELECT attn_heatmap_svg('news', ?)", (hostile,)).fetchone()[0]
    root = render(svg, "hostile", tmp)
    if root is not None:
        drawn = texts_of(root)
        check("<script" not in svg and "script" in drawn and "alert" in drawn,
              "hostile: markup characters in the text never reach the SVG raw (tokens drawn: "
              "script, alert)")
        check(not any(len(t) > 80 for t in drawn), "hostile: no drawn text is longer than 80 "
              f"characters (longest {max(len(t) for t in drawn)})")
        check(any(t.startswith("xxxxxxxx") and t.endswith("\u2026") and len(t) == 24
                  for t in drawn), "hostile: the 5,000-byte token is cut to 24 characters with …")
        check(len(svg) < 200000, f"hostile: SVG size {len(svg)} bytes is bounded")
    # invalid UTF-8 and control characters (bytes SQLite passes through unchanged)
    svg = db.execute("SELECT attn_heatmap_svg('news', CAST(x'48617773ff20e28220c0af2062616401'"
                     " || x'0720666f6f' AS TEXT))").fetchone()[0]
    if isinstance(svg, bytes):
        svg = svg.decode("utf-8")
    render(svg, "invalid_utf8", tmp)  # the tokenizer drops the bytes; the SVG stays valid
    # bytes that do reach the SVG: tokens of attn_matrix_svg (split on white space only)
    svg = db.execute("SELECT attn_matrix_svg(CAST(x'48617773ff20e28220c0af20626164010720666f6f'"
                     " AS TEXT), 'cat', 'glove')").fetchone()[0]
    if isinstance(svg, bytes):
        svg = svg.decode("utf-8")
    root = render(svg, "invalid_utf8_matrix", tmp)
    if root is not None:
        drawn = texts_of(root)
        want = ["Haws\ufffd", "\ufffd\ufffd", "\ufffd\ufffd", "bad\ufffd\ufffd", "foo"]
        check(all(w in drawn for w in want),
              f"invalid UTF-8 and control characters: each bad byte is one U+FFFD: {drawn[:8]}")
    # a model whose name and labels are hostile
    evil_labels = ["<b>&amp;\"'</b>", "x" * 300]
    db.execute("CREATE TABLE evil(t TEXT, l TEXT)")
    for i in range(40):
        db.execute("INSERT INTO evil VALUES (?, ?)",
                   (f"word{i % 7} other{i % 3} thing", evil_labels[i % 2]))
    name = "<m&'\">"
    db.execute("SELECT count(*) FROM attn_train(?, 'SELECT t, l FROM evil', "
               "'{\"epochs\":2,\"embed_dim\":4,\"hidden\":4,\"fc_hidden\":4,\"progress\":false}')",
               (name,)).fetchall()
    svg = db.execute("SELECT attn_heatmap_svg(?, 'word1 other2 thing')", (name,)).fetchone()[0]
    root = render(svg, "evil_labels", tmp)
    if root is not None:
        title = root.find(SVG + "title").text
        check(title.startswith("predicted: ") and
              (evil_labels[0] in title or title.startswith("predicted: " + "x" * 30)),
              f"hostile labels: the title holds the label as text: {title[:60]!r}")
        check(any(name in t for t in texts_of(root)), "hostile model name shown as text")
    svg = db.execute("SELECT attn_training_svg(?)", (name,)).fetchone()[0]
    render(svg, "evil_curves", tmp)


def test_heatmap_query(db, tmp):
    svg = db.execute("SELECT attn_heatmap_query_svg('news', 'SELECT title FROM headlines "
                     "WHERE rowid <= 5 UNION ALL SELECT NULL')").fetchone()[0]
    root = render(svg, "heatmap_query", tmp)
    if root is not None:
        heads = [t for t in texts_of(root) if re.match(r"^\d+\. .* \(p = [01]\.\d{3}\)", t)]
        check(len(heads) == 5, f"heatmap_query: 5 row headings for 5 texts and a NULL ({len(heads)})")
        titles = db.execute("SELECT title FROM headlines WHERE rowid <= 5").fetchall()
        for i, (t,) in enumerate(titles):
            label = db.execute("SELECT attn_predict('news', ?)", (t,)).fetchone()[0]
            if not heads[i:i + 1] or not heads[i].startswith(f"{i + 1}. {label} "):
                check(False, f"heatmap_query: row {i + 1} is labelled {label}: {heads[i:i + 1]}")
                break
        else:
            check(True, "heatmap_query: each row's heading is attn_predict's label")
    svg = db.execute("SELECT attn_heatmap_query_svg('news', 'SELECT title FROM headlines')").fetchone()[0]
    root = ET.fromstring(svg.encode())
    heads = [t for t in texts_of(root) if re.match(r"^\d+\. ", t)]
    check(len(heads) == 100 and any("the first 100 rows" in t for t in texts_of(root)),
          f"heatmap_query: 800 rows are cut to 100 and it says so ({len(heads)})")
    e = error_of(db, "SELECT attn_heatmap_query_svg('news', 'DELETE FROM headlines')")
    check(e == "attn_heatmap_query_svg: the query must be read-only (a SELECT)", f"read-only: {e}")
    e = error_of(db, "SELECT attn_heatmap_query_svg('news', 'SELECT title FROM headlines WHERE 0')")
    check(e == "attn_heatmap_query_svg: the query returned no text (no rows, or only NULLs)",
          f"no rows: {e}")
    check(db.execute("SELECT count(*) FROM headlines").fetchone()[0] == 800, "the table is intact")


def test_curves(db, tmp, log):
    svg = db.execute("SELECT attn_training_svg('news')").fetchone()[0]
    root = render(svg, "curves", tmp)
    if root is None:
        return
    lines = root.findall(f".//{SVG}polyline")
    check(len(lines) == 4, f"curves: 4 series (train loss, val loss, accuracy, F1): {len(lines)}")
    npts = [len(p.get("points").split()) for p in lines]
    check(all(n == len(log) for n in npts), f"curves: {len(log)} epochs per series: {npts}")
    drops = sum(1 for a, b in zip(log, log[1:]) if b[1] < a[1])
    marks = [t for t in texts_of(root) if t.startswith("lr ")]
    check(len(marks) == 2 * drops, f"curves: {drops} learning-rate drops marked in both panels "
                                    f"({len(marks)} marks: {marks[:4]})")
    check(drops > 0, f"curves: the test's training log has a drop (lrs {[r[1] for r in log]})")
    # y of the train-loss points follows the log: the highest point is the largest loss
    rows = db.execute("SELECT train_loss FROM attn_training_log WHERE name = 'news' "
                      "ORDER BY epoch").fetchall()
    ys = [float(p.split(",")[1]) for p in lines[0].get("points").split()]
    spread = max(r[0] for r in rows) - min(r[0] for r in rows)
    order_ok = all((ys[i] < ys[j]) == (rows[i][0] > rows[j][0])
                   for i in range(len(ys)) for j in range(len(ys))
                   if abs(rows[i][0] - rows[j][0]) > 0.01 * spread)
    check(order_ok, "curves: train-loss points are ordered as the logged losses")
    # version 2 with missing values and a single epoch
    db.execute("INSERT INTO attn_models(name, version, created_at, deployed, config, labels, "
               "weights) VALUES ('news', 2, '2026-01-01', 0, '{}', '[]', x'00')")
    db.execute("INSERT INTO attn_training_log VALUES ('news', 2, 1, 0.5, NULL, 0.5, NULL, 0.001, 1)")
    svg = db.execute("SELECT attn_training_svg('news', 2)").fetchone()[0]
    root = render(svg, "curves_v2", tmp, min_ink=100)
    if root is not None:
        check(len(root.findall(f".//{SVG}polyline")) == 2,
              "curves: NULL values are left out (2 series of 4)")
    svg1 = db.execute("SELECT attn_training_svg('news', 1)").fetchone()[0]
    svgd = db.execute("SELECT attn_training_svg('news')").fetchone()[0]
    check(svg1 == svgd, "curves: no version = the deployed one (1)")
    for sql, want in [
        ("SELECT attn_training_svg('nope')", "attn_training_svg: no model named 'nope'"),
        ("SELECT attn_training_svg('news', 9)", "attn_training_svg: model 'news' has no version 9"),
        ("SELECT attn_training_svg('news', 'two')", "attn_training_svg: the version must be an integer, got 'two'"),
        ("SELECT attn_training_svg(NULL)", "attn_training_svg: the model name must be a non-empty text, got NULL"),
    ]:
        e = error_of(db, sql)
        check(e == want, f"{sql}: {e}")
    db.execute("INSERT INTO attn_models(name, version, created_at, deployed, config, labels, "
               "weights) VALUES ('imported', 1, '2026-01-01', 0, '{}', '[]', x'00')")
    e = error_of(db, "SELECT attn_training_svg('imported')")
    check(e == "attn_training_svg: model 'imported' version 1 has no training log (imported?)", e)
    e = error_of(sqlite3_fresh(), "SELECT attn_training_svg('news')")
    check(e == "attn_training_svg: no model named 'news' (this database has no model store)", e)


def sqlite3_fresh():
    return connect(":memory:")


GLOVE = """the 0.418 0.24968 -0.41242 0.1217
cat 0.45281 -0.50108 -0.53714 -0.015697
sat -0.21 0.61 0.11 0.33
on 0.30045 0.25006 -0.16692 0.1923
mat 0.5 0.4 -0.3 0.2
dog 0.11008 -0.38781 -0.57615 -0.27714
a 0.21705 0.46515 -0.46757 0.10082
"""


def test_vectors(db, tmp):
    path = os.path.join(tmp, "glove.txt")
    with open(path, "w") as f:
        f.write(GLOVE)
    db.execute("CREATE TABLE glove AS SELECT * FROM attn_vectors_load(?)", (path,))
    rows = db.execute("SELECT word, vector FROM glove").fetchall()
    want = [(l.split()[0], [float(x) for x in l.split()[1:]]) for l in GLOVE.strip().split("\n")]
    got = [(w, list(struct.unpack("<4f", v))) for w, v in rows]
    same = len(got) == len(want) and all(
        g[0] == w[0] and all(np.float32(a) == np.float32(b) for a, b in zip(g[1], w[1]))
        for g, w in zip(got, want))
    check(same, f"vectors: {len(got)} words read back as float32 ({got[:1]})")
    # word2vec header, blank lines, CRLF, tabs
    path2 = os.path.join(tmp, "w2v.txt")
    with open(path2, "wb") as f:
        f.write(b"2 3\r\n\r\nfoo 1 2 3\r\nbar\t-1e-3 4.5E+1   6 \r\n\n")
    got = db.execute("SELECT word, vector FROM attn_vectors_load(?)", (path2,)).fetchall()
    got = [(w, struct.unpack("<3f", v)) for w, v in got]
    check(got == [("foo", (1.0, 2.0, 3.0)), ("bar", (np.float32(-1e-3), 45.0, 6.0))],
          f"vectors: header skipped, CRLF/tabs/blank lines: {got}")
    bad = [
        (b"a 1 2 3\nb 1 2\n", "line 2 of '{p}': expected 3 numbers after the word (as line 1), got 2"),
        (b"a 1 2\nb 1 zz\n", "line 2 of '{p}': number 2 of 'b' is not a finite number: 'zz'"),
        (b"a 1 nan\n", "line 1 of '{p}': number 2 of 'a' is not a finite number: 'nan'"),
        (b"a 1 1e999\n", "line 1 of '{p}': number 2 of 'a' is not a finite number: '1e999'"),
        (b"lonely\n", "line 1 of '{p}': expected a word and its numbers, got only 'lonely'"),
        (b"a 1\x00 2\n", "line 1 of '{p}' holds a NUL byte (not a text file?)"),
    ]
    for i, (content, msg) in enumerate(bad):
        p = os.path.join(tmp, f"bad{i}.txt")
        with open(p, "wb") as f:
            f.write(content)
        e = error_of(db, "SELECT count(*) FROM attn_vectors_load(?)", (p,))
        want = "attn_vectors_load: " + msg.format(p=p)
        check(e == want, f"vectors: bad line: {e!r}")
    e = error_of(db, "SELECT * FROM attn_vectors_load('/nonexistent/g.txt')")
    check(e == "attn_vectors_load: cannot open '/nonexistent/g.txt': No such file or directory", e)
    e = error_of(db, "SELECT * FROM attn_vectors_load()")
    check(e == "attn_vectors_load: expected 1 argument: attn_vectors_load(path)", e)
    db.execute("CREATE VIEW vv AS SELECT * FROM attn_vectors_load(%s)" % ("'" + path + "'"))
    e = error_of(db, "SELECT * FROM vv")
    check(e is not None and "unsafe use of" in e, f"vectors: direct-only, refused in a view: {e}")


def reference_matrix(db, q, k, table, vec=None):
    if vec is None:
        vec = {w: np.frombuffer(v, dtype="<f4").astype(np.float64)
               for w, v in db.execute(f"SELECT word, vector FROM {table}")}
    d = len(next(iter(vec.values())))

    def look(t):
        return vec.get(t, vec.get(t.lower(), np.zeros(d)))
    Q = np.array([look(t) for t in q.split()])
    K = np.array([look(t) for t in k.split()])
    s = Q @ K.T / math.sqrt(d)
    s = np.exp(s - s.max(axis=1, keepdims=True))
    return q.split(), k.split(), s / s.sum(axis=1, keepdims=True)


def test_matrix(db, tmp):
    q, k = "The cat  sat on\tthe MAT zebra", "a dog sat on the mat"
    rows = db.execute("SELECT * FROM attn_matrix(?, ?, 'glove')", (q, k)).fetchall()
    qt, kt, ref = reference_matrix(db, q, k, "glove")
    check(len(rows) == len(qt) * len(kt), f"matrix: {len(rows)} rows = {len(qt)} x {len(kt)}")
    worst = max(abs(r[4] - ref[r[0], r[2]]) for r in rows)
    check(worst < 1e-6, f"matrix: weights vs NumPy softmax(QK^T/sqrt(d)): max diff {worst:.2e}")
    check(all(r[1] == qt[r[0]] and r[3] == kt[r[2]] for r in rows),
          "matrix: tokens as split on white space, positions 0-based")
    zebra = [r[4] for r in rows if r[1] == "zebra"]
    check(max(abs(w - 1 / len(kt)) for w in zebra) < 1e-12,
          "matrix: a token missing from the vectors (zebra) is a zero vector: uniform weights")
    # a trained model's word vectors: its embedding rows, looked up in its vocabulary
    vocab, emb, _ = embedding_of(db, "news", 1)
    mvec = {w: emb[i].astype(np.float64) for i, w in enumerate(vocab) if i >= 2}
    q2, k2 = "Striker SCORES twice in the cup final", "Hawks win the final match qqqzzz"
    rows2 = db.execute("SELECT * FROM attn_matrix(?, ?, 'model:news')", (q2, k2)).fetchall()
    _, _, ref2 = reference_matrix(db, q2, k2, None, mvec)
    worst = max(abs(r[4] - ref2[r[0], r[2]]) for r in rows2)
    check(len(rows2) == 42 and worst < 1e-6,
          f"matrix 'model:news': {len(rows2)} rows vs NumPy on the stored embeddings.weight: "
          f"max diff {worst:.2e}")
    e = error_of(db, "SELECT * FROM attn_matrix('a', 'b', 'model:nope')")
    check(e == "attn_matrix: no model named 'nope'", f"matrix: unknown model: {e}")
    rows4 = db.execute("SELECT * FROM attn_matrix(?, ?, 'glove', 'dot')", (q, k)).fetchall()
    check(rows4 == rows, "matrix: kind 'dot' is the default")
    for sql, want in [
        ("SELECT * FROM attn_matrix('a', 'b', 'glove', 'cosine')",
         "attn_matrix: kind must be 'dot' (scaled dot-product), 'trainable' (query, key and "
         "value layers) or 'additive', got 'cosine'"),
        ("SELECT * FROM attn_matrix('a', 'b', 'nosuch')",
         "attn_matrix: cannot read the vectors table 'nosuch' (columns word, vector): "
         "no such table: nosuch"),
        ("SELECT * FROM attn_matrix('a', 'b')",
         "attn_matrix: expected 3 to 5 arguments: attn_matrix(query_text, key_text, vectors[, "
         "kind[, seed]])"),
        ("SELECT * FROM attn_matrix(NULL, 'b', 'glove')",
         "attn_matrix: the query and key texts must not be NULL"),
    ]:
        e = error_of(db, sql)
        check(e == want, f"{sql}: {e}")
    db.execute("CREATE TABLE badvec(word TEXT, vector BLOB)")
    db.execute("INSERT INTO badvec VALUES ('a', x'0000803f'), ('b', x'0000803f0000803f')")
    e = error_of(db, "SELECT * FROM attn_matrix('a', 'b', 'badvec')")
    check(e == "attn_matrix: the vector of 'b' in 'badvec' has 2 dimensions, the ones before it 1", e)
    e = error_of(db, "SELECT * FROM attn_matrix(?, 'b', 'glove')", (" ".join(["w"] * 600),))
    check(e == "attn_matrix: the query text has 600 tokens, at most 512 are allowed", e)
    svg = db.execute("SELECT attn_matrix_svg(?, ?, 'glove')", (q, k)).fetchone()[0]
    root = render(svg, "matrix", tmp)
    if root is not None:
        cells = [r for r in root.iter(SVG + "rect") if r.find(SVG + "title") is not None]
        check(len(cells) == len(qt) * len(kt), f"matrix_svg: {len(cells)} cells")
        vals = [float(c.find(SVG + "title").text) for c in cells]
        check(max(abs(v - ref.flat[i]) for i, v in enumerate(vals)) < 1e-4,
              "matrix_svg: cell i*nk+j holds weight (i, j)")
    hostile = "<b>&amp; \"'q'\" " + "y" * 3000 + " \x01ctl"
    svg = db.execute("SELECT attn_matrix_svg(?, ?, 'glove')", (hostile, "cat & <dog>")).fetchone()[0]
    root = render(svg, "matrix_hostile", tmp)
    if root is not None:
        drawn = texts_of(root)
        check("<b>&amp;" in drawn and "<dog>" in drawn, "matrix_svg: markup tokens come back as text")
        check(not any(len(t) > 100 for t in drawn), "matrix_svg: long tokens cut")
    def first_cell_x(text):
        svg = db.execute("SELECT attn_matrix_svg(?, 'cat', 'glove')", (text,)).fetchone()[0]
        root = ET.fromstring(svg.encode())
        return float(next(r for r in root.iter(SVG + "rect")
                          if r.find(SVG + "title") is not None).get("x"))
    wide, narrow = first_cell_x("\u6771\u4eac\u6771\u4eac"), first_cell_x("abcd")
    check(abs((wide - 20 - 10) - 2 * (narrow - 20 - 10)) < 1,
          f"matrix_svg: 4 wide characters take the room of 8 ({wide - 30:.1f} vs {narrow - 30:.1f} px)")
    e = error_of(db, "SELECT attn_matrix_svg(?, 'b', 'glove')", (" ".join(["w"] * 81),))
    check(e == "attn_matrix_svg: the query text has 81 tokens, at most 80 are allowed", e)
    db.execute("CREATE VIEW mv AS SELECT * FROM attn_matrix('a', 'b', 'glove')")
    e = error_of(db, "SELECT * FROM mv")
    check(e is not None and "unsafe use of" in e, f"matrix: direct-only, refused in a view: {e}")


def embedding_of(db, name, version):
    """(vocab list, embeddings.weight as a (V, E) array, config dict) of a stored model."""
    import json
    blob, = db.execute("SELECT weights FROM attn_models WHERE name = ? AND version = ?",
                       (name, version)).fetchone()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    t = header["embeddings.weight"]
    a, b = t["data_offsets"]
    w = np.frombuffer(blob[8 + n + a:8 + n + b], dtype="<f4").reshape(t["shape"])
    meta = header["__metadata__"]
    return json.loads(meta["vocab"]), w, json.loads(meta["config"])


def test_embeddings(db, tmp):
    import json
    rng = np.random.default_rng(5)
    words = ["cup", "final", "shares", "bank", "striker", "zzznotaword", "<UNK>", "<PAD>"]
    vecs = {w: rng.standard_normal(8).astype("<f4") for w in words}
    db.execute("CREATE TABLE wv(word TEXT, vector BLOB)")
    db.executemany("INSERT INTO wv VALUES (?, ?)", [(w, v.tobytes()) for w, v in vecs.items()])
    base = ('"hidden":8,"fc_hidden":8,"epochs":3,"batch_size":32,"seed":11,"progress":false')
    q = "SELECT count(*) FROM attn_train(?, 'SELECT title, category FROM headlines', ?)"
    db.execute(q, ("e_frozen", '{"embeddings":"wv","freeze_embeddings":true,' + base + "}")).fetchall()
    db.execute(q, ("e_init", '{"embed_dim":8,"freeze_embeddings":1,' + base + "}")).fetchall()
    db.execute(q, ("e_free", '{"embeddings":"wv",' + base + "}")).fetchall()
    vocab, frozen, cfg = embedding_of(db, "e_frozen", 1)
    _, init, _ = embedding_of(db, "e_init", 1)
    _, free, _ = embedding_of(db, "e_free", 1)
    check(cfg["embed_dim"] == 8, f"embeddings: embed_dim taken from the table: {cfg['embed_dim']}")
    shared = [w for w in vocab[2:] if w in vecs]
    check(len(shared) == 5, f"embeddings: the test's table shares 5 words with the vocabulary: {shared}")
    ok = all(np.array_equal(frozen[vocab.index(w)], vecs[w]) for w in shared)
    check(ok, "embeddings (frozen): rows of words in the table are the table's vectors, bit for bit")
    others = [i for i, w in enumerate(vocab) if w not in shared]
    check(np.array_equal(frozen[others], init[others]),
          f"embeddings (frozen): the other {len(others)} rows are the N(0,1) initialisation of the "
          "same seed, untouched by training (compared with a frozen run without the table)")
    check(not frozen[0].any(), "embeddings: the <PAD> row stays zero")
    moved = sum(not np.array_equal(free[vocab.index(w)], vecs[w]) for w in shared)
    check(moved == len(shared), f"embeddings (not frozen): {moved} of {len(shared)} pretrained rows "
                                "were trained")
    m = json.loads(db.execute("SELECT metrics FROM attn_models WHERE name = 'e_frozen'").fetchone()[0])
    check(m.get("pretrained_words") == 5 and m.get("freeze_embeddings") is True,
          f"embeddings: metrics record them: {m.get('pretrained_words')}, {m.get('freeze_embeddings')}")
    m = json.loads(db.execute("SELECT metrics FROM attn_models WHERE name = 'news'").fetchone()[0])
    check("pretrained_words" not in m, "embeddings: a run without them records nothing")
    db.execute("CREATE TABLE wv_bad(word TEXT, vector BLOB)")
    db.execute("INSERT INTO wv_bad VALUES ('cup', zeroblob(32)), ('bank', zeroblob(12))")
    for opts, want in [
        ('{"embeddings":"wv","embed_dim":16}',
         "option \"embeddings\": table 'wv' has 8-dimensional vectors, but embed_dim is 16 "
         "(leave embed_dim out to use 8)"),
        ('{"embeddings":3}',
         "option \"embeddings\" must be the name of a table of (word, vector), got 3"),
        ('{"embeddings":"wv","freeze_embeddings":2}',
         "option \"freeze_embeddings\" must be true or false, got 2"),
        ('{"embeddings":"wv","freeze_embeddings":"yes"}',
         "option \"freeze_embeddings\" must be true or false, got yes"),
        ('{"embeddings":"none_such"}',
         "option \"embeddings\": cannot read table 'none_such' (columns word, vector): "
         "no such table: none_such"),
        ('{"embeddings":"wv_bad"}',
         "option \"embeddings\": the vector of 'bank' (row 2 of 'wv_bad') must be a BLOB of 8 "
         "float32, got 12 bytes"),
        ('{"embeddings":"wv","epochs":0}', 'option "epochs" must be an integer from 1 to 100000, got 0'),
    ]:
        e = error_of(db, q, ("e_err", opts))
        check(e == "attn_train: " + want, f"embeddings error {opts}: {e}")
    check(db.execute("SELECT count(*) FROM attn_models WHERE name = 'e_err'").fetchone()[0] == 0,
          "embeddings: failed runs store nothing")


def main():
    reexec_with_preload()
    ext = os.path.abspath(os.environ.get("ATTNEXT", "attnext")) + ".so"
    if not os.path.exists(ext):
        print(f"{ext} not built (run make)")
        return 77
    if not shutil.which("rsvg-convert"):
        print("note: rsvg-convert (librsvg2-bin) not found: SVGs are parsed but not rendered")
    tmp = tempfile.mkdtemp(prefix="attn_viz_")
    try:
        db = connect(os.path.join(tmp, "viz.db"))
        log = train_news(db)
        test_heatmap(db, tmp)
        test_heatmap_query(db, tmp)
        test_heatmap_occlusion(db, tmp)
        test_curves(db, tmp, log)
        test_vectors(db, tmp)
        test_hostile(db, tmp)
        test_matrix(db, tmp)
        test_embeddings(db, tmp)
        if os.environ.get("KEEP_VIZ"):
            print("pictures kept in", tmp)
    finally:
        if not os.environ.get("KEEP_VIZ"):
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"{rendered} SVGs rendered to PNG and checked; {failures} failures")
    if not shutil.which("rsvg-convert"):
        print("rsvg-convert not found (Debian librsvg2-bin): rendering not checked")
        return 77 if failures == 0 else 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
