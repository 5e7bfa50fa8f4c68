"""test_progress.py -- the progress line of attn_train on a real terminal.

The sqlite3 shell runs attn_train with its standard error on a pseudo-terminal (as in an
interactive session) and its standard output on a pipe. Checks that:
  - within each epoch a line "epoch E/N [###---] b/B batches loss L R rows/s m:ss left" is
    drawn with a carriage return, and erased ("\\r\\033[K") before the epoch's row is printed;
  - the option "progress": false draws nothing on the same terminal;
  - with standard error not a terminal (a pipe), nothing is drawn;
  - standard output (the rows) never contains any of it.
"""
import os
import pty
import re
import shlex
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SQLITE3 = shlex.split(os.environ.get("SQLITE3", "sqlite3"))  # a command line (make test-asan)
EXT = os.path.abspath(os.environ.get("ATTNEXT", os.path.join(ROOT, "attnext")))
failures = 0


def check(cond, what):
    global failures
    print(("ok:   " if cond else "FAIL: ") + what)
    if not cond:
        failures += 1


def script(db, progress):
    opts = '{"epochs":2,"batch_size":8,"progress":%s}' % ("true" if progress else "false")
    rows = ",".join("('%s word%d text', '%s')" % (c, i, c) for i in range(120) for c in ("alpha", "beta"))
    return f"""
.load {EXT}
CREATE TABLE t(text, label);
INSERT INTO t VALUES {rows};
SELECT epoch FROM attn_train('m{int(progress)}', 'SELECT text, label FROM t', '{opts}');
"""


def run(sql, stderr_tty):
    """Run the shell; returns (stdout bytes, stderr bytes)."""
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "p.db")
        if not stderr_tty:
            p = subprocess.run([*SQLITE3, "-bail", db], input=sql.encode(), capture_output=True, timeout=120)
            return p.stdout, p.stderr
        master, slave = pty.openpty()
        p = subprocess.Popen([*SQLITE3, "-bail", db], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=slave)
        os.close(slave)
        p.stdin.write(sql.encode())
        p.stdin.close()
        err = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the other side closed
                break
            if not chunk:
                break
            err += chunk
        out = p.stdout.read()
        p.wait(timeout=120)
        os.close(master)
        return out, err


line = re.compile(rb"\r\x1b\[Kepoch (\d+)/2  \[[#-]{20}\]  (\d+)/(\d+) batches  loss [0-9.]+  \d+ rows/s  \d+:\d\d left")

out, err = run(script(None, True), stderr_tty=True)
draws = line.findall(err)
check(out.split() == [b"1", b"2"], "rows of both epochs on stdout: %r" % out)
check(len(draws) >= 2, "progress lines drawn on the terminal: %d" % len(draws))
check({d[0] for d in draws} == {b"1", b"2"}, "a progress line in each epoch: %r" % sorted({d[0] for d in draws}))
check(any(d[1] == d[2] for d in draws), "the last batch of an epoch is drawn (b == B)")
check(err.rstrip(b"\r\n").endswith(b"\r\x1b[K"), "the line is erased at the end: %r" % err[-40:])
check(b"epoch" not in out and b"\x1b" not in out, "standard output holds only the rows")

out, err = run(script(None, False), stderr_tty=True)
check(out.split() == [b"1", b"2"], '"progress": false still trains: %r' % out)
check(b"epoch" not in err and b"\x1b" not in err, '"progress": false draws nothing: %r' % err[:80])

out, err = run(script(None, True), stderr_tty=False)
check(out.split() == [b"1", b"2"], "stderr on a pipe still trains: %r" % out)
check(err == b"", "stderr on a pipe gets nothing: %r" % err[:80])

print("%d failed" % failures)
sys.exit(1 if failures else 0)
