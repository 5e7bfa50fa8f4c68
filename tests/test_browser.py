#!/usr/bin/env python3
"""test_browser.py -- the browser page of make PLATFORM=wasm web, in Debian's headless chromium.

Builds the page if needed (make PLATFORM=wasm web: $BUILD/wasm/web/), opens
$BUILD/wasm/web/index.html?demo=1 from file:// (as a person opens it: no server), and drives
chromium through its DevTools protocol over a pipe (--remote-debugging-pipe: no port, no
WebSocket library), waiting until the page says it is done: it has loaded the bundled headlines,
trained a small model with attn_fit in a Web Worker, predicted a headline and drawn its
attn_heatmap_svg. Then it checks
  (a) the DOM: the training figures (validation rows, accuracy and F1 as numbers, one log row
      per epoch), the prediction (Sports, with its probabilities summing to 1), that SQL ran in
      a Web Worker, and no error;
  (b) a screenshot (saved as $BUILD/browser_demo.png): inside the heatmap image's box, the
      pixels of the token boxes have the fill colours of the SVG that attn_heatmap_svg returned;
  (c) the file input: a CSV with quoted fields, given to it as a person picks a file, lands in
      the page's rows table as written;
  (d) the SQL entry point (ext/wasm/web_api.c) through the page's worker: column types,
      parameters from a JSON array, an SQL error and a missing parameter as messages;
  (e) without Web Workers (undefined before the page loads) the page runs its SQL on its own
      thread and says so.
Training is seeded and WebAssembly runs it on one thread: the same figures every run.
Skipped (exit 77) under a sanitizer build (ATTNEXT set: the page does not use the library that
build checks); a missing chromium or emcc is a skip with the command that installs it (CI=true
fails on it).
"""
import base64
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

BUILD = os.environ.get("BUILD", "build")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the wasm build's directory under this build's (make test: build/wasm, as make PLATFORM=wasm)
WASM_BUILD = os.path.join(BUILD, "wasm")
WEB = os.path.join(ROOT, WASM_BUILD, "web")
DEADLINE = 90  # seconds for the page to finish (about 10 s on 2 cores)
LABELS = {"Business", "Sci/Tech", "Sports", "World"}


def skip(why):
    print(why)
    sys.exit(77)


def fail(why):
    print("FAIL", why)
    sys.exit(1)


class DevTools:
    """Chromium's DevTools protocol over --remote-debugging-pipe: JSON messages ending in a NUL
    byte, read by chromium from its fd 3, written to its fd 4."""

    def __init__(self, argv, log):
        # the shell puts our pipes on fds 3 and 4, chromium's stdin and stdout on /dev/null
        self.proc = subprocess.Popen(
            ["sh", "-c", 'exec "$0" "$@" 3<&0 4>&1 </dev/null >/dev/null'] + argv,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
        self.next_id = 0
        self.replies = queue.Queue()
        self.events = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        buf = b""
        while True:
            chunk = self.proc.stdout.read1(1 << 20)
            if not chunk:
                self.replies.put(None)
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                if "id" in msg:
                    self.replies.put(msg)
                else:
                    self.events.append(msg)

    def call(self, method, session=None, timeout=30, **params):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        self.proc.stdin.write(json.dumps(msg).encode() + b"\0")
        self.proc.stdin.flush()
        end = time.time() + timeout
        while True:
            try:
                reply = self.replies.get(timeout=max(0.1, end - time.time()))
            except queue.Empty:
                fail(f"chromium did not answer {method} within {timeout} s")
            if reply is None:
                fail(f"chromium exited while answering {method} (exit {self.proc.poll()})")
            if reply["id"] == self.next_id:
                break
        if "error" in reply:
            fail(f"{method}: {reply['error']}")
        return reply["result"]

    def close(self):
        try:
            self.proc.stdin.write(json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


def evaluate(tools, session, expression):
    out = tools.call("Runtime.evaluate", session, expression=expression, returnByValue=True)
    if "exceptionDetails" in out:
        fail(f"evaluating {expression!r}: {out['exceptionDetails']}")
    return out["result"].get("value")


def main():
    atn = os.environ.get("ATTNEXT")
    if atn and atn != "./attnext":
        skip(f"the browser page is checked by make test (ATTNEXT={atn}: the page runs the "
             "WebAssembly build, not this library)")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        skip("no chromium (sh tests/deps.sh installs Debian's chromium)")
    try:
        from PIL import Image
    except ImportError:
        skip("no PIL to read the screenshot (sh tests/deps.sh installs python3-pil)")

    # the page, built when missing or out of date (a no-op after make test's build of it)
    if not shutil.which("emcc"):
        if not os.path.exists(os.path.join(WEB, "index.html")):
            skip("no emcc to build the page (sh tests/deps.sh installs Debian's emscripten)")
    else:
        began = time.time()
        made = subprocess.run(["make", "--no-print-directory", "PLATFORM=wasm",
                               f"BUILD={WASM_BUILD}", "web"], cwd=ROOT, capture_output=True,
                              text=True)
        if made.returncode != 0:
            fail("make PLATFORM=wasm web:\n" + made.stdout + made.stderr)
        print(f"make PLATFORM=wasm web: {time.time() - began:.1f} s")

    os.makedirs(BUILD, exist_ok=True)
    shot_path = os.path.join(BUILD, "browser_demo.png")
    url = "file://" + os.path.join(WEB, "index.html") + "?demo=1"
    with tempfile.TemporaryDirectory(prefix="attnext-browser-") as profile:
        log = open(os.path.join(profile, "chromium.log"), "w+")
        argv = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--disable-sync",
                "--hide-scrollbars", "--remote-debugging-pipe", f"--user-data-dir={profile}",
                "--window-size=1000,1400", "--force-device-scale-factor=1", "about:blank"]
        tools = DevTools(argv, log)
        try:
            began = time.time()
            target = tools.call("Target.createTarget", url="about:blank")["targetId"]
            session = tools.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            tools.call("Runtime.enable", session)
            tools.call("Emulation.setDeviceMetricsOverride", session, width=1000, height=1400,
                       deviceScaleFactor=1, mobile=False)
            tools.call("Page.navigate", session, url=url)
            state = None
            while time.time() - began < DEADLINE:
                state = evaluate(tools, session, "document.getElementById('done') && "
                                 "document.getElementById('done').dataset.state || null")
                if state in ("done", "error"):
                    break
                time.sleep(0.25)
            took = time.time() - began
            errors = [e["params"] for e in tools.events
                      if e.get("method") == "Runtime.exceptionThrown" or
                      (e.get("method") == "Runtime.consoleAPICalled" and
                       e["params"].get("type") == "error")]
            page = evaluate(tools, session, """(() => {
              const $ = id => document.getElementById(id);
              const rows = t => [...$(t).rows].map(r => [...r.cells].map(c => c.textContent));
              const img = $('heatmap'), box = img.getBoundingClientRect();
              return {done: $('done').textContent, worker: $('done').dataset.worker || '',
                      engine: $('engine').textContent, rows: $('rows-status').textContent,
                      train: $('train-status').textContent, figures: rows('figures'),
                      log: rows('epoch-log'), probs: rows('probs'),
                      predicted: $('predicted') ? $('predicted').textContent : null,
                      svg: img.dataset.svg || '', complete: img.complete, width: img.naturalWidth,
                      box: [box.left + scrollX, box.top + scrollY, box.width, box.height],
                      height: document.documentElement.scrollHeight,
                      html: document.documentElement.outerHTML.length};
            })()""")
            print(f"page: {state} after {took:.1f} s: {page['done']}")
            print(f"  {page['engine']}")
            print(f"  {page['rows']}")
            print(f"  {page['train']}")
            for row in page["figures"]:
                print("  " + " | ".join(row))
            if state != "done":
                fail(f"the page did not finish within {DEADLINE} s (state {state}); errors: "
                     f"{json.dumps(errors)[:2000]}")
            if errors:
                fail(f"the page logged errors: {json.dumps(errors)[:2000]}")

            # (a) the DOM
            figures = {row[0]: row[1] for row in page["figures"][1:]}
            for key in ("training rows", "validation rows", "validation accuracy",
                        "validation F1 (weighted)", "validation loss", "epochs run"):
                if not re.fullmatch(r"[0-9]+(\.[0-9]+)?", figures.get(key, "")):
                    fail(f"figure {key!r} is {figures.get(key)!r}, not a number")
            if int(figures["training rows"]) + int(figures["validation rows"]) != 800:
                fail(f"training + validation rows: {figures['training rows']} + "
                     f"{figures['validation rows']}, not the 800 demo rows")
            if not 0.4 <= float(figures["validation accuracy"]) <= 1:
                fail(f"validation accuracy {figures['validation accuracy']}: the demo model "
                     "learned nothing (4 classes: 0.25 by chance)")
            if len(page["log"]) - 1 != int(figures["epochs run"]):
                fail(f"{len(page['log']) - 1} rows in the epoch log, {figures['epochs run']} epochs run")
            if page["worker"] != "yes" or "Web Worker" not in page["engine"]:
                fail(f"SQL did not run in a Web Worker: {page['engine']}")
            if page["predicted"] != "Sports":
                fail(f"predicted {page['predicted']!r} for the football headline, not 'Sports'")
            probs = {row[0]: float(row[1]) for row in page["probs"][1:]}
            if set(probs) != LABELS or abs(sum(probs.values()) - 1) > 0.01:
                fail(f"attn_probs on the page: {probs}")
            print(f"  predicted {page['predicted']}: {probs}")

            # (b) the screenshot: the whole page, the heatmap's box cut out of it
            svg = page["svg"]
            if not svg.startswith("<?xml") or not page["complete"] or page["width"] == 0:
                fail(f"no heatmap image on the page (svg {len(svg)} chars, "
                     f"loaded {page['complete']}, width {page['width']})")
            tools.call("Emulation.setDeviceMetricsOverride", session, width=1000,
                       height=int(page["height"]), deviceScaleFactor=1, mobile=False)
            time.sleep(0.2)
            shot = tools.call("Page.captureScreenshot", session, format="png",
                              captureBeyondViewport=True)["data"]

            # the file input: a CSV with quoted fields (a comma, a doubled quote, a line break
            # inside quotes, CRLF line ends) read by the page's parser into the rows table
            csv_path = os.path.join(profile, "my_rows.csv")
            with open(csv_path, "w", newline="") as f:
                f.write('text,label\r\nplain words,a\r\n"a comma, inside",b\r\n'
                        '"say ""hi""",b\r\n"two\nlines",a\r\n')
            root = tools.call("DOM.getDocument", session)["root"]["nodeId"]
            node = tools.call("DOM.querySelector", session, nodeId=root, selector="#csv")["nodeId"]
            tools.call("DOM.setFileInputFiles", session, nodeId=node, files=[csv_path])
            status = ""
            for _ in range(100):
                status = evaluate(tools, session, "document.getElementById('rows-status').textContent")
                if "my_rows.csv" in status:
                    break
                time.sleep(0.1)
            stored = tools.call("Runtime.evaluate", session, awaitPromise=True, returnByValue=True,
                                expression="engine.sql('SELECT text, label FROM rows ORDER BY "
                                "rowid').then(r => r.rows)")["result"].get("value")
            want = [["plain words", "a"], ["a comma, inside", "b"], ['say "hi"', "b"],
                    ["two\nlines", "a"]]
            print(f"file input: {status!r}; rows {stored}")
            if status != "4 rows from my_rows.csv, 2 labels." or stored != want:
                fail(f"the CSV file gave {status!r} and rows {stored}, not {want}")

            # the page's SQL entry point (ext/wasm/web_api.c): types, parameters, an error
            def sql(text, params="null"):
                return tools.call("Runtime.evaluate", session, awaitPromise=True,
                                  returnByValue=True, expression=(
                                      f"engine.sql({json.dumps(text)}, {params}).then("
                                      "r => ({columns: r.columns, rows: r.rows}), "
                                      "e => ({error: e.message}))"))["result"].get("value")
            checks = [
                (sql("SELECT 1 AS i, 2.5 AS r, NULL AS n, 'x\"y' || char(10) AS t, 1e999 AS inf, "
                     "x'00ff' AS b"),
                 {"columns": ["i", "r", "n", "t", "inf", "b"],
                  "rows": [[1, 2.5, None, 'x"y\n', None, {"blob_bytes": 2}]]}),
                (sql("SELECT ?1 || ?2, typeof(?3), ?4 ->> '$.k'", '["a", "b", 3, {"k": "v"}]'),
                 {"columns": ["?1 || ?2", "typeof(?3)", "?4 ->> '$.k'"],
                  "rows": [["ab", "integer", "v"]]}),
                (sql("SELECT attn_predict('no_such_model', 'x')"),
                 {"error": "attn_predict: no model named 'no_such_model'"}),
                (sql("SELECT ?1, ?2", '["only one"]'),
                 {"error": "attnext_web_exec: the statement has 2 parameters, 1 given"}),
            ]
            for got, want in checks:
                print(f"sql: {json.dumps(got)}")
                if got != want:
                    fail(f"attnext_web_exec gave {got}, not {want}")

            # a browser without Web Workers: the same SQL on the page's thread
            tools.call("Page.enable", session)
            tools.call("Page.addScriptToEvaluateOnNewDocument", session,
                       source="window.Worker = undefined;")
            tools.call("Page.navigate", session, url=url.replace("?demo=1", ""))
            engine_line = ""
            for _ in range(200):
                # the demo page until the navigation has replaced it
                engine_line = evaluate(tools, session, "location.search === '' && "
                                       "document.getElementById('engine') ? "
                                       "document.getElementById('engine').textContent : ''")
                if "SQL runs in" in engine_line:
                    break
                time.sleep(0.1)
            print(f"without workers: {engine_line}")
            if "the page's thread" not in engine_line or "attnext " not in engine_line:
                fail(f"without Web Workers the page says {engine_line!r}")
            got = sql("SELECT attn_predict('no_such_model', 'x')")
            if got != checks[2][1]:
                fail(f"without Web Workers the SQL gave {got}")
        finally:
            tools.close()
            log.seek(0)
            chromium_log = "".join(line for line in log if "dbus" not in line)
            log.close()
    with open(shot_path, "wb") as f:
        f.write(base64.b64decode(shot))
    image = Image.open(shot_path).convert("RGB")
    x, y, w, h = (round(v) for v in page["box"])
    crop = image.crop((x, y, x + w, y + h))
    print(f"screenshot {shot_path}: {image.size[0]}x{image.size[1]}, heatmap at {x},{y} {w}x{h}")
    counts = {}
    for n, colour in crop.getcolors(maxcolors=1 << 20):
        counts[colour] = n
    # the token boxes' fills: rect elements with a solid fill and the token boxes' stroke
    fills = re.findall(r'<rect[^>]*fill="#([0-9a-f]{6})" stroke="#(?:bbbbbb|555555)"', svg)
    if not fills:
        fail(f"no token box in the SVG of attn_heatmap_svg: {svg[:400]}")

    def near(want):  # pixels within 3 of each channel: anti-aliasing and colour management
        return sum(n for got, n in counts.items() if all(abs(got[k] - want[k]) <= 3 for k in range(3)))
    missing = []
    for hexcolour in sorted(set(fills)):
        want = tuple(int(hexcolour[k:k + 2], 16) for k in (0, 2, 4))
        n = near(want)
        print(f"  token fill #{hexcolour}: {n} pixels in the heatmap's box")
        # a box holds hundreds of its pixels; the legend's gradient holds ~40 of each colour
        if n < 200:
            missing.append(hexcolour)
    if missing:
        fail(f"the screenshot's heatmap lacks the token colours {missing} (chromium log: "
             f"{chromium_log[-1500:]})")
    # the strongest attention is one of the darker reds of the scale (not all pale)
    reds = sum(n for (r, g, b), n in counts.items() if r >= 150 and g <= 120 and b <= 120)
    if reds < 50:
        fail(f"only {reds} strongly red pixels in the heatmap's box")
    print(f"PASS: trained, predicted and drew the heatmap in {took:.1f} s "
          f"({len(set(fills))} token colours found, {reds} strongly red pixels)")


if __name__ == "__main__":
    main()
