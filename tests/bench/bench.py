"""bench.py -- `make bench`: attnext against the PyTorch lesson it replaces, same machine, same run.

Runs, each in its own child process (so each has its own peak RSS):
  tests/bench/pytorch_recipe.py  the Made-With-ML "Attention" lesson in PyTorch (2 threads)
  tests/bench/attnext_bench.py   the same recipe through attnext.so (attn_train, attn_evaluate,
                                 attn_predict, attn_classify)
with the lesson's configuration (rnn 128, embed 100, fc 100, dropout 0.1, batch 64, Adam 1e-3,
class weights) on $ATTNEXT_DATA/ag_news_train_10k.csv (default data/ag_news/, which
`sh data/fetch_ag_news.sh` fills), tested on ag_news_test.csv, and prints a table: seconds per
epoch (median), training tokens/s, test accuracy and weighted F1 after the same number of
epochs, peak RSS, inference rows/s, with the ratio attnext/PyTorch and the target of each row
(ext/ARCHITECTURE.md: targets). Then the scaling study: epoch time at 1x, 2x, 4x, 8x the
training rows and at hidden 64..512, for rnn, gru and lstm, both systems, drawn as SVG charts.

Writes into --out (default tests/bench/out/): bench-<stamp>.json (everything, raw),
table-<stamp>.md, scaling_rows-<stamp>.svg, scaling_hidden-<stamp>.svg. A full run (not --quick)
also copies them to tests/bench/results.json, scaling_rows.svg, scaling_hidden.svg and replaces
the block between the bench markers in tests/bench/RESULTS.md.

    make bench                                   # full: about 15-20 minutes on 2 cores
    /usr/bin/python3 tests/bench/bench.py --quick --rows 400 --test-rows 300 --out /tmp/b
                                                 # smoke test (tests/test_bench_smoke.sh)
Timings on a shared machine are only as good as its quietness: each measurement records the CPU
that other processes used meanwhile ("others" in the JSON, in cores), and the table says so.
"""
import argparse
import datetime
import json
import math
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
PYTHON = os.environ.get("PYTHON", "/usr/bin/python3")
if not os.path.exists(PYTHON):
    PYTHON = sys.executable

# The rows of the table, in order; tests/test_bench_smoke.sh checks each one is printed.
ROWS = [
    "seconds per epoch",
    "seconds per epoch, PyTorch at its best thread count",
    "training rows/s",
    "training tokens/s",
    "training CPU seconds per epoch",
    "test accuracy",
    "test weighted F1",
    "test weighted F1 vs PyTorch packed",
    "peak RSS, training (MiB)",
    "RSS growth in training (MiB)",
    "attn_predict vs PyTorch batched",
    "attn_predict vs PyTorch one at a time",
    "attn_classify vs PyTorch batched",
    "attn_classify / attn_predict",
]


# ------------------------------------------------------------------ measuring

def proc_stat_busy():
    """Seconds of CPU the whole machine has spent busy (all processes), from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return None
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return (sum(v[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def available_cores(seconds=1.0):
    """How many cores two busy child processes get for `seconds`: 2.0 on an idle 2-core
    machine, less when other processes compete."""
    t0, c0 = time.perf_counter(), children_cpu()
    pids = []
    for _ in range(min(2, os.cpu_count() or 2)):
        pid = os.fork()
        if pid == 0:
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                pass
            os._exit(0)
        pids.append(pid)
    for pid in pids:
        os.waitpid(pid, 0)
    return (children_cpu() - c0) / (time.perf_counter() - t0)


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


NICE = 0  # --nice: niceness increment of the children (negative: ahead of other load; root)


def run_child(cmd, log):
    """Run a child that prints one JSON object last on stdout; (object, info) where info has
    wall seconds, the child's CPU seconds and the cores other processes used meanwhile."""
    busy0, child0, t0 = proc_stat_busy(), children_cpu(), time.perf_counter()
    print("bench: " + " ".join(cmd), file=log, flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                       preexec_fn=(lambda: os.nice(NICE)) if NICE else None)
    wall = time.perf_counter() - t0
    child = children_cpu() - child0
    others = None
    if busy0 is not None:
        others = max(0.0, (proc_stat_busy() - busy0 - child) / wall)
    log.write(p.stderr)
    log.flush()
    if p.returncode != 0:
        sys.stderr.write(p.stderr[-3000:])
        raise SystemExit("bench: %s failed with exit status %d" % (cmd[1], p.returncode))
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise SystemExit("bench: %s printed no JSON; stdout: %r" % (cmd[1], p.stdout[-500:]))
    return json.loads(lines[-1]), {"wall_seconds": wall, "cpu_seconds": child,
                                   "others_cores": others}


def best_run(runs):
    """Of several (result, info) runs of the main comparison: the run with the lowest median
    epoch time (the least disturbed by other load), with each inference rate the best of all
    runs. Accuracy and F1 come from that run (the same seed gives the same model)."""
    result, info = min(runs, key=lambda r: statistics.median(epoch_seconds(r[0])))
    result = dict(result)
    for key in [k for k in result if k.startswith("infer_") and k.endswith("rows_per_s")]:
        result[key] = max(r[0].get(key) or 0 for r in runs)
    result["runs"] = len(runs)
    return result, info


def epoch_seconds(result):
    return [e["seconds"] for e in result["epochs"]]


def machine():
    model, cores = platform.processor() or "?", os.cpu_count()
    try:
        out = subprocess.run(["lscpu"], stdout=subprocess.PIPE, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    commit = "?"
    try:
        commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout.strip()
    except OSError:
        pass
    return {"cpu": model, "cores": cores, "kernel": platform.release(), "commit": commit or "?",
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "loadavg_start": open("/proc/loadavg").read().split()[:3]}


# ------------------------------------------------------------------ the table

def fmt(x, digits=3):
    if x is None:
        return "n/a"
    if isinstance(x, str):
        return x
    if float(x).is_integer() and abs(x) >= 1:
        return "{:,d}".format(int(x))
    if abs(x) >= 1000:
        return "{:,.0f}".format(x)
    if abs(x) >= 100:
        return "%.0f" % x
    if abs(x) >= 10:
        return "%.1f" % x
    return ("%%.%dg" % digits) % x


def ratio(a, b):
    return a / b if a is not None and b else None


def verdict(ok):
    return "" if ok is None else ("met" if ok else "NOT met")


def threads_row(rounds):
    """The threads row from rounds of {threads: median epoch} (0 = the default, every core):
    the default's median over the rounds, the best fixed count's, and the median of the rounds'
    own ratios (each round runs them back to back, so the host's drift cancels in its ratio)."""
    fixed = sorted(t for t in rounds[0] if t)
    med = {t: statistics.median(r[t] for r in rounds) for t in [0] + fixed}
    t_best = min(fixed, key=med.get)
    r = statistics.median(ratio(rd[0], min(rd[t] for t in fixed)) for rd in rounds)
    return ["seconds per epoch, attnext threads 0 vs its best fixed thread count (%s; %s; "
            "median of %d rounds' ratios)" % (
                "%d thread%s" % (t_best, "" if t_best == 1 else "s"),
                ", ".join("%d: %.3g s" % (t, med[t]) for t in fixed), len(rounds)),
            med[0], med[t_best], r, "<= 1.1 (within 10%)", verdict(r is not None and r <= 1.1)]


def table(ax, pt, pk, epochs, p1=None, load=0, rounds=None):
    """Markdown table rows [metric, attnext, PyTorch, attnext/PyTorch, target, status].
    rounds: [{threads: median epoch}] of the default (0) and fixed thread counts, for its row."""
    rows = []
    a_ep, p_ep = statistics.median(epoch_seconds(ax)), statistics.median(epoch_seconds(pt))
    r = ratio(a_ep, p_ep)
    rows.append([ROWS[0] + " (median of %d)" % epochs, a_ep, p_ep, r,
                 "<= 0.1 (10x faster)", verdict(r is not None and r <= 0.1)])
    if rounds:
        # threads 0 (the default: every core) within 10% of attnext's best fixed
        # thread count; the "PyTorch" column holds that best attnext figure here
        rows.append(threads_row(rounds))
    # PyTorch at its best: the faster of its 2-thread and 1-thread runs (the target: >= 12x on an
    # idle machine, >= 10x with other CPU-bound processes running)
    target = 1 / 12.0 if not load else 0.1
    if p1 is not None:
        p1_ep = statistics.median(epoch_seconds(p1))
        best, threads = (p1_ep, 1) if p1_ep < p_ep else (p_ep, pt.get("threads", 2))
        r = ratio(a_ep, best)
        rows.append([ROWS[1] + " (%s thread%s, median of %d)"
                     % (threads, "" if threads == 1 else "s", epochs), a_ep, best, r,
                     "<= %.3g (%dx faster)" % (target, round(1 / target)),
                     verdict(r is not None and r <= target)])
    else:
        rows.append([ROWS[1], a_ep, "not run", "", "", ""])
    a_rows, p_rows = ax["train_rows"] / a_ep, pt["train_rows"] / p_ep
    rows.append([ROWS[2], a_rows, p_rows, ratio(a_rows, p_rows), "", ""])
    a_tok, p_tok = ax["train_tokens"] / a_ep, pt["train_tokens"] / p_ep
    r = ratio(a_tok, p_tok)
    rows.append([ROWS[3], a_tok, p_tok, r, ">= 10", verdict(r is not None and r >= 10)])
    a_cpu, p_cpu = ax["train_cpu_seconds"] / epochs, pt["train_cpu_seconds"] / epochs
    rows.append([ROWS[4], a_cpu, p_cpu, ratio(a_cpu, p_cpu), "", ""])
    rows.append([ROWS[5] + " (%d epochs)" % epochs, ax["test_accuracy"], pt["test_accuracy"],
                 ratio(ax["test_accuracy"], pt["test_accuracy"]), "", ""])
    d = ax["test_f1"] - pt["test_f1"]
    rows.append([ROWS[6] + " (%d epochs)" % epochs, ax["test_f1"], pt["test_f1"],
                 "%+.4f" % d, "difference >= -0.01", verdict(d >= -0.01)])
    if pk is not None:
        d = ax["test_f1"] - pk["test_f1"]
        rows.append([ROWS[7], ax["test_f1"], pk["test_f1"], "%+.4f" % d, "difference >= -0.01",
                     verdict(d >= -0.01)])
    else:
        rows.append([ROWS[7], ax["test_f1"], "not run", "", "", ""])
    rows.append([ROWS[8], ax["rss_mib_train"], pt["rss_mib_train"],
                 ratio(ax["rss_mib_train"], pt["rss_mib_train"]), "", ""])
    a_grow = ax["rss_mib_train"] - ax["rss_mib_before_model"]
    p_grow = pt["rss_mib_train"] - pt["rss_mib_before_model"]
    bound = memory_bound_mib(ax)
    rows.append([ROWS[9], a_grow, p_grow, ratio(a_grow, p_grow),
                 "attnext <= %.1f (README bound)" % bound, verdict(a_grow <= bound)])
    pred, cls = ax.get("infer_predict_rows_per_s"), ax.get("infer_classify_rows_per_s")
    pbat, pone = pt.get("infer_batched_rows_per_s"), pt.get("infer_single_rows_per_s")
    r = ratio(pred, pbat)
    rows.append([ROWS[10] + " (rows/s; attn_predict used %s cores)"
                 % fmt(ax.get("infer_predict_cores")), pred, pbat, r, ">= 100,000 rows/s and >= 4",
                 verdict(None if r is None else pred >= 100000 and r >= 4)])
    r = ratio(pred, pone)
    rows.append([ROWS[11] + " (rows/s)", pred, pone, r, ">= 30",
                 verdict(None if r is None else r >= 30)])
    rows.append([ROWS[12] + " (rows/s; attn_classify used %s cores)"
                 % fmt(ax.get("infer_classify_cores")), cls, pbat, ratio(cls, pbat), "", ""])
    r = ratio(cls, pred)
    rows.append([ROWS[13], r, "", "", ">= 2", verdict(None if r is None else r >= 2)])
    return rows


def memory_bound_mib(ax):
    """ext/ARCHITECTURE.md, targets: 4 x (parameters + Adam state + one batch of
    activations), in MiB.
    Parameters + gradients are 2P floats, Adam's moments 2P more; one batch of activations of
    the lesson's network is about B x T x (E + (gates + 1) x H + 2) floats for the recurrent
    part plus B x (H + 2F + C) after pooling, with T = 64 (max_len, the worst case)."""
    gates = {"rnn": 1, "gru": 3, "lstm": 4}[ax["cell"]]
    B, T, E, H, F, C = 64, 64, 100, ax["hidden"], 100, 4
    floats = 4 * ax["params"] + B * T * (E + (gates + 1) * H + 2) + B * (H + 2 * F + C)
    return 4 * floats * 4 / 2 ** 20


def render_table(rows):
    head = ["metric", "attnext", "PyTorch", "attnext/PyTorch", "target (README)", "status"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        lines.append("| " + " | ".join(fmt(c) for c in r) + " |")
    return "\n".join(lines)


# ------------------------------------------------------------------ SVG charts

COLORS = {"rnn": "#1f77b4", "gru": "#d62728", "lstm": "#2ca02c"}


def _log_ticks(lo, hi):
    ticks = []
    for k in range(int(math.floor(math.log10(lo))) - 1, int(math.ceil(math.log10(hi))) + 1):
        for m in (1, 2, 5):
            v = m * 10 ** k
            if lo <= v <= hi:
                ticks.append(v)
    return ticks


def svg_line_chart(path, title, xlabel, ylabel, series, xticks, hline=None):
    """A log-log line chart. series: [(label, color, dashed, [(x, y), ...])]; hline: an
    optional (y, label) reference line."""
    W, H, left, right, top, bottom = 760, 460, 70, 200, 40, 55
    pw, ph = W - left - right, H - top - bottom
    xs = [x for s in series for x, _ in s[3]] + list(xticks)
    ys = [y for s in series for _, y in s[3] if y > 0]
    if not ys:
        ys = [1.0]
    if hline:
        ys.append(hline[0])
    x0, x1 = min(xs) / 1.1, max(xs) * 1.1
    y0, y1 = min(ys) / 1.25, max(ys) * 1.25
    if x1 <= x0:
        x1 = x0 * 2
    lx0, lx1, ly0, ly1 = math.log10(x0), math.log10(x1), math.log10(y0), math.log10(y1)

    def X(x):
        return left + (math.log10(x) - lx0) / (lx1 - lx0) * pw

    def Y(y):
        return top + ph - (math.log10(y) - ly0) / (ly1 - ly0) * ph

    o = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
         'viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">' % (W, H, W, H),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>' % (left, esc(title))]
    for y in _log_ticks(y0, y1):
        o.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>'
                 % (left, Y(y), left + pw, Y(y)))
        o.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>' % (left - 6, Y(y) + 4, fmt(y)))
    for x in xticks:
        o.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>'
                 % (X(x), top, X(x), top + ph))
        o.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>'
                 % (X(x), top + ph + 16, fmt(x)))
    o.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="black"/>'
             % (left, top, pw, ph))
    o.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>'
             % (left + pw / 2, H - 12, esc(xlabel)))
    o.append('<text transform="translate(18,%.1f) rotate(-90)" text-anchor="middle">%s</text>'
             % (top + ph / 2, esc(ylabel)))
    if hline:
        o.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="black" stroke-dasharray="2,3"/>'
                 % (left, Y(hline[0]), left + pw, Y(hline[0])))
        o.append('<text x="%d" y="%.1f">%s</text>' % (left + 6, Y(hline[0]) - 5, esc(hline[1])))
    for i, (label, color, dashed, pts) in enumerate(series):
        pts = sorted(p for p in pts if p[1] > 0)
        dash = ' stroke-dasharray="6,4"' if dashed else ""
        if pts:
            o.append('<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>'
                     % (color, dash, " ".join("%.1f,%.1f" % (X(x), Y(y)) for x, y in pts)))
            for x, y in pts:
                o.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>' % (X(x), Y(y), color))
        ly = top + 10 + 20 * i
        o.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>'
                 % (left + pw + 15, ly, left + pw + 45, ly, color, dash))
        o.append('<text x="%d" y="%d">%s</text>' % (left + pw + 52, ly + 4, esc(label)))
    o.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(o) + "\n")


def esc(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def point_seconds(p):
    """Epoch seconds of a scaling point: the fastest of its epochs (least disturbed)."""
    return min(epoch_seconds(p))


def point_cpu_seconds(p):
    """CPU seconds per epoch of a scaling point (less disturbed by other load than wall time;
    attnext's includes its data preparation, PyTorch's does not)."""
    if "train_cpu_seconds" in p and p["system"] == "attnext":
        return p["train_cpu_seconds"] / max(1, len(p["epochs"]))
    return min(e.get("cpu_seconds", e["seconds"]) for e in p["epochs"])


def charts(sweeps, out, stamp):
    paths = {}
    for kind, key, xlabel in (("rows", "train_rows", "training rows per epoch"),
                              ("hidden", "hidden", "RNN hidden size")):
        series, xticks = [], set()
        for system, dashed in (("attnext", False), ("pytorch", True)):
            for cell in ("rnn", "gru", "lstm"):
                pts = []
                for p in sweeps.get(system, []):
                    if p["cell"] != cell:
                        continue
                    if kind == "rows" and p["hidden"] != 128:
                        continue
                    if kind == "hidden" and p["scale"] != 1:
                        continue
                    pts.append((p[key], point_seconds(p)))
                    xticks.add(p[key])
                if pts:
                    series.append(("%s %s" % ("attnext" if system == "attnext" else "PyTorch",
                                              cell), COLORS[cell], dashed, pts))
        if not series:
            continue
        path = os.path.join(out, "scaling_%s-%s.svg" % (kind, stamp))
        title = ("Epoch time vs training rows (hidden 128)" if kind == "rows"
                 else "Epoch time vs hidden size (10k rows)")
        svg_line_chart(path, title, xlabel, "seconds per epoch (log)", series, sorted(xticks))
        paths[kind] = path
        # Speed-up: PyTorch seconds / attnext seconds at each point, per cell.
        speed = []
        for cell in ("rnn", "gru", "lstm"):
            a = {x: y for lab, _, d, pts in series if not d and lab.endswith(" " + cell)
                 for x, y in pts}
            p = {x: y for lab, _, d, pts in series if d and lab.endswith(" " + cell)
                 for x, y in pts}
            pts = [(x, p[x] / a[x]) for x in sorted(a) if x in p and a[x] > 0]
            if pts:
                speed.append((cell, COLORS[cell], False, pts))
        if speed:
            path = os.path.join(out, "speedup_%s-%s.svg" % (kind, stamp))
            svg_line_chart(path, "Speed-up of attnext over PyTorch " + title[len("Epoch time "):],
                           xlabel, "PyTorch s/epoch / attnext s/epoch (log)", speed,
                           sorted(xticks), hline=(10.0, "target: 10x"))
            paths["speedup_" + kind] = path
    return paths


def scaling_table(sweeps):
    """Markdown: each point's epoch seconds for both systems and the speed-up."""
    index = {}
    for system, pts in sweeps.items():
        for p in pts:
            index[(system, p["cell"], p["hidden"], p["scale"])] = p
    keys = sorted({k[1:] for k in index}, key=lambda k: (["rnn", "gru", "lstm"].index(k[0]),
                                                         k[2], k[1]))
    lines = ["| cell | hidden | rows x | train rows | attnext s/epoch | PyTorch s/epoch | "
             "PyTorch/attnext | attnext CPU s/epoch | PyTorch CPU s/epoch | PyTorch/attnext CPU |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for cell, hidden, scale in keys:
        a, p = index.get(("attnext", cell, hidden, scale)), index.get(("pytorch", cell, hidden, scale))
        sa = point_seconds(a) if a else None
        sp = point_seconds(p) if p else None
        ca = point_cpu_seconds(a) if a else None
        cp = point_cpu_seconds(p) if p else None
        rows = (a or p)["train_rows"]
        lines.append("| %s | %d | %d | %d | %s | %s | %s | %s | %s | %s |" % (
            cell, hidden, scale, rows, fmt(sa), fmt(sp), fmt(ratio(sp, sa)), fmt(ca), fmt(cp),
            fmt(ratio(cp, ca))))
    return "\n".join(lines)


# ------------------------------------------------------------------ main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer epochs and points (smoke test)")
    ap.add_argument("--epochs", type=int, help="epochs of the main comparison (10; quick 2)")
    ap.add_argument("--main-runs", type=int, default=0,
                    help="runs of each system in the main comparison, best kept (2; quick 1)")
    ap.add_argument("--threads-rounds", type=int, default=0,
                    help="rounds of attnext at threads 0, 1, 2 (and every core) for the "
                         "default's row (5; quick 1)")
    ap.add_argument("--rows", type=int, default=0, help="N training rows spread over the file")
    ap.add_argument("--test-rows", type=int, default=0, help="N test rows spread over the file")
    ap.add_argument("--cells", default="rnn,gru,lstm", help="cells of the scaling study")
    ap.add_argument("--no-scaling", action="store_true", help="only the main comparison")
    ap.add_argument("--nice", type=int, default=0,
                    help="run the measured children at this niceness increment (e.g. -10 as "
                         "root, so other load on a shared machine disturbs them less)")
    ap.add_argument("--load", type=int, default=0,
                    help="start N CPU-bound processes for the whole run (a busy server); the "
                         "table goes to RESULTS.md's loaded block")
    ap.add_argument("--out", default=os.path.join(HERE, "out"))
    ap.add_argument("--ext", default=os.path.join(ROOT, "attnext"))
    args = ap.parse_args()
    global NICE
    NICE = args.nice
    epochs = args.epochs or (2 if args.quick else 10)
    if not os.path.exists(args.ext + ".so") and not os.path.exists(args.ext):
        raise SystemExit("bench: %s.so not found: run make first" % args.ext)
    os.makedirs(args.out, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    log_path = os.path.join(args.out, "bench-%s.log" % stamp)
    log = open(log_path, "w")
    started = time.perf_counter()
    info = machine()
    info["nice"] = args.nice
    info["available_cores_start"] = available_cores()
    info["load"] = args.load
    busy = [subprocess.Popen([PYTHON, "-c", "while True: pass"]) for _ in range(args.load)]
    try:
        run_all(args, info, started, log, log_path, stamp, epochs)
    finally:
        for b in busy:
            b.kill()
            b.wait()


def run_all(args, info, started, log, log_path, stamp, epochs):
    subset = []
    if args.rows:
        subset += ["--rows", str(args.rows)]
    if args.test_rows:
        subset += ["--test-rows", str(args.test_rows)]
    pt_cmd = [PYTHON, os.path.join(HERE, "pytorch_recipe.py")] + subset
    ax_cmd = [PYTHON, os.path.join(HERE, "attnext_bench.py"), "--ext", args.ext] + subset

    def say(msg):
        print("bench: %s (%.0fs)" % (msg, time.perf_counter() - started), file=sys.stderr,
              flush=True)

    main_runs = args.main_runs or (1 if args.quick else 2)
    say("main comparison, %d epochs each, %d run(s) each" % (epochs, main_runs))
    pt_runs, ax_runs = [], []
    for _ in range(main_runs):  # interleaved, so both see the machine in the same states
        pt_runs.append(run_child(pt_cmd + ["--epochs", str(epochs)], log))
        say("PyTorch: median epoch %.2fs" % statistics.median(epoch_seconds(pt_runs[-1][0])))
        ax_runs.append(run_child(ax_cmd + ["--epochs", str(epochs)], log))
        say("attnext: median epoch %.2fs" % statistics.median(epoch_seconds(ax_runs[-1][0])))
    pt, pt_info = best_run(pt_runs)
    ax, ax_info = best_run(ax_runs)
    # attnext's default (threads 0: every core) against fixed thread counts (1, 2 and every
    # core the process may use), in rounds: each round runs them all back to back, first one
    # another in turn; the row takes the median of the rounds' ratios. (Until 2026-11-28 it set
    # the best of 2 default runs against the best of 2 runs of each fixed count: the minimum of
    # 6 runs against that of 2, where threads 2 is the default's own code on 2 cores, and the
    # host's speed drifts by a third within minutes here.)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover (not Linux)
        cores = os.cpu_count() or 1
    configs = [0] + sorted({1, min(2, cores), cores})
    fixed_runs = {t: [] for t in configs if t}
    rounds = []
    for i in range(args.threads_rounds or (1 if args.quick else 5)):
        got = {}
        for t in configs[i % len(configs):] + configs[:i % len(configs)]:
            res = run_child(ax_cmd + ["--epochs", str(epochs), "--threads", str(t), "--no-test",
                                      "--no-infer"], log)
            got[t] = statistics.median(epoch_seconds(res[0]))
            if t:
                fixed_runs[t].append(res)
        rounds.append(got)
        say("attnext threads round %d: %s" % (i + 1, ", ".join(
            "%d: %.3fs" % (t, got[t]) for t in configs)))
    fixed = {t: best_run(runs)[0] for t, runs in fixed_runs.items()}
    pk, pk_info, p1 = None, None, None
    p1, _ = run_child(pt_cmd + ["--epochs", str(epochs), "--threads", "1", "--no-test"], log)
    say("PyTorch 1 thread: median epoch %.2fs" % statistics.median(epoch_seconds(p1)))
    if not args.quick:
        pk, pk_info = run_child(pt_cmd + ["--epochs", str(epochs), "--model", "packed",
                                          "--no-infer"], log)
        say("PyTorch packed/masked: test F1 %.4f" % pk["test_f1"])

    # Scaling study: (hidden, scale, epochs) per cell; 1 epoch for the big points (the fastest
    # epoch of each point is plotted).
    if args.quick:
        points = [(128, 1, 1), (128, 2, 1), (64, 1, 1)]
    else:
        points = [(128, 1, 2), (128, 2, 2), (128, 4, 1), (128, 8, 1),
                  (64, 1, 2), (256, 1, 2), (512, 1, 1)]
    sweeps, sweep_info = {"attnext": [], "pytorch": []}, []
    if not args.no_scaling:
        for cell in args.cells.split(","):
            for n_ep in sorted({e for _, _, e in points}):
                spec = ",".join("%s:%d:%d" % (cell, h, s) for h, s, e in points if e == n_ep)
                for system, cmd in (("pytorch", pt_cmd), ("attnext", ax_cmd)):
                    res, inf = run_child(cmd + ["--epochs", str(n_ep), "--sweep", spec], log)
                    sweeps[system].extend(res["sweep"])
                    sweep_info.append(dict(inf, system=system, cell=cell, points=spec))
                say("scaling %s (%d epoch points) done" % (cell, n_ep))

    info["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
    info["available_cores_end"] = available_cores()
    info["bench_seconds"] = time.perf_counter() - started
    rows = table(ax, pt, pk, epochs, p1, args.load, rounds)
    md = render_table(rows)
    others = [i["others_cores"] for i in [pt_info, ax_info] + sweep_info if i["others_cores"]]
    header = ("Machine: %s, %d cores, %s; commit %s; torch %s (%s threads, OpenBLAS threads %s, "
              "OMP_WAIT_POLICY %s); %s.\n"
              "Data: %d training rows (%d train / %d validation), %d test rows; %d epochs each "
              "(best of %d runs); niceness %+d; %s"
              "bench took %.0f s. Other processes used %.2f cores on average during the "
              "measurements (max %.2f); two busy processes got %.2f cores at the start and %.2f at "
              "the end: timings on a busy machine are slower and noisier.\n"
              % (info["cpu"], info["cores"], info["date"], info["commit"], pt.get("torch"),
                 pt.get("threads"), pt.get("openblas_threads"), pt.get("omp_wait_policy"),
                 ax.get("version"), ax["rows"], ax["train_rows"],
                 ax["val_rows"], ax.get("test_rows", 0), epochs, main_runs, args.nice,
                 "%d extra CPU-bound process%s ran throughout (--load); " % (
                     args.load, "" if args.load == 1 else "es") if args.load else "",
                 info["bench_seconds"],
                 statistics.mean(others) if others else 0.0, max(others) if others else 0.0,
                 info["available_cores_start"], info["available_cores_end"]))
    scal = scaling_table(sweeps) if not args.no_scaling else ""
    print(header)
    print(md)
    if scal:
        print("\nScaling (seconds per epoch, the fastest epoch of each point):\n")
        print(scal)
    paths = charts(sweeps, args.out, stamp)
    raw = {"machine": info, "epochs": epochs, "quick": args.quick, "rows_arg": args.rows,
           "test_rows_arg": args.test_rows,
           "main": {"attnext": ax, "pytorch": pt, "pytorch_packed": pk, "pytorch_1_thread": p1,
                    "attnext_fixed_threads": {str(t): r for t, r in fixed.items()},
                    "attnext_threads_rounds": [{str(t): e for t, e in rd.items()}
                                               for rd in rounds]},
           "main_runs": {"attnext": [r for r, _ in ax_runs], "pytorch": [r for r, _ in pt_runs]},
           "main_info": {"attnext": ax_info, "pytorch": pt_info, "pytorch_packed": pk_info},
           "table": [[r if isinstance(r, (int, float, str)) or r is None else str(r) for r in row]
                     for row in rows],
           "scaling": sweeps, "scaling_info": sweep_info}
    json_path = os.path.join(args.out, "bench-%s.json" % stamp)
    with open(json_path, "w") as f:
        json.dump(raw, f, indent=1)
    with open(os.path.join(args.out, "table-%s.md" % stamp), "w") as f:
        f.write(header + "\n" + md + "\n\n" + scal + "\n")
    print("\nbench: wrote %s, %s%s" % (json_path, log_path,
                                       "".join(", " + p for p in paths.values())))
    if not args.quick and not args.rows and not args.test_rows and (not args.no_scaling or args.load):
        publish(header, md, scal, json_path, paths, args.load)


def publish(header, md, scal, json_path, paths, load=0):
    """Copy the latest results next to RESULTS.md and replace its generated block (with --load,
    the loaded block, and results_load.json)."""
    if load:
        shutil.copyfile(json_path, os.path.join(HERE, "results_load.json"))
        path = os.path.join(HERE, "RESULTS.md")
        begin, end = "<!-- bench-load:begin -->", "<!-- bench-load:end -->"
        text = open(path).read() if os.path.exists(path) else ""
        if begin not in text or end not in text:
            text += "\n" + begin + "\n" + end + "\n"
        block = (begin + "\n" + header + "\n" + md + "\n\n" + scal +
                 "\n\nRaw figures: [results_load.json](results_load.json).\n" + end)
        a, b = text.index(begin), text.index(end) + len(end)
        with open(path, "w") as f:
            f.write(text[:a] + block + text[b:])
        print("bench: updated %s (loaded block)" % path)
        return
    shutil.copyfile(json_path, os.path.join(HERE, "results.json"))
    for kind, p in paths.items():
        name = kind if kind.startswith("speedup_") else "scaling_" + kind
        shutil.copyfile(p, os.path.join(HERE, "%s.svg" % name))
    path = os.path.join(HERE, "RESULTS.md")
    begin, end = "<!-- bench:begin -->", "<!-- bench:end -->"
    text = open(path).read() if os.path.exists(path) else begin + "\n" + end + "\n"
    if begin not in text or end not in text:
        text += "\n" + begin + "\n" + end + "\n"
    block = (begin + "\n" + header + "\n" + md + "\n\n### Scaling\n\nSeconds per epoch (the "
             "fastest epoch of each point; solid lines attnext, dashed PyTorch):\n\n"
             "![epoch time vs rows](scaling_rows.svg)\n![epoch time vs hidden]"
             "(scaling_hidden.svg)\n![speed-up vs rows](speedup_rows.svg)\n"
             "![speed-up vs hidden](speedup_hidden.svg)\n\n" + scal + "\n\nRaw figures: [results.json](results.json)."
             "\n" + end)
    a, b = text.index(begin), text.index(end) + len(end)
    with open(path, "w") as f:
        f.write(text[:a] + block + text[b:])
    print("bench: updated %s" % path)


if __name__ == "__main__":
    main()
