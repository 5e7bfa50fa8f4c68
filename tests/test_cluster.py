"""test_cluster.py -- the model store on a three-node dqlite cluster (build/attnext-node), on
loopback ports, with dqlite's default timeouts (heartbeat 0.5 s, election 3 s): training runs as
a job beside Raft, its model is replicated, predictions survive the loss of the leader bit for
bit, and a restarted node catches up.

  1. three nodes (node 1 bootstraps, 2 and 3 --join); 800 headlines inserted through the dqlite
     shell; a model trained through the shell (SELECT * FROM attn_train(...) returns the job's
     row at once, the shell's BEGIN ... COMMIT records it; the job trains and commits); a second
     name imported from the first (attn_import)
  2. a write that would commit outside Raft (a SELECT calling attn_deploy, attn_train or
     attn_fit in autocommit mode, sent by the wire client below) is refused, no job is recorded,
     and the node lives on
  3. jobs: a training of at least 60 seconds through the cluster completes without a leadership
     change (the Raft term of every node is the same before and after), its progress is read
     through a follower's address while it runs and is in the followers' Raft logs, the leader
     answers meanwhile, and the model is the same on all three nodes (leadership handed to each
     in turn, its bytes read there); attn_cancel stops a job; a job whose leader hands leadership
     over mid-training finishes on the old leader and commits through the new one; kill -9 of a
     follower running a job: the leader marks it failed, no model anywhere; SIGTERM of a node
     running a job marks it failed before the node stops
  4. failover: probabilities and attention weights of 12 texts recorded; a job training on the
     leader and one on a follower; SIGKILL the leader; the survivors answer identically within
     seconds, the leader's job shows failed once a new leader is elected and left no model,
     version or log row, the follower's trains on and commits through the new leader; a connection
     opened on a follower before the failover sees the same version; a new version is trained
     on the new leader (INSERT INTO ... SELECT FROM attn_train: the form that works as a plain
     EXEC); a deployment made on one connection is seen by the next statement of another
  5. the killed node is restarted (same --dir, no --join); the other original node is killed;
     leadership is handed to the restarted node, which serves both versions (it caught up)
  6. SIGTERM stops the nodes cleanly

Prints the failover times, the time a model version takes to reach every node's Raft log, the
jobs' timings (the leader's answers during the 60-second training, kill to failed).
Exit 77 (skip) when dqlite is not installed.
"""
import json
import math
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BUILD", "build")
NODE = os.path.join(ROOT, BUILD, "attnext-node")
SHELL = shutil.which("dqlite")
DB = "news"
TEXTS = [
    "Blue chips slide after weak factory orders report",
    "Rahman signs 6-year deal with Redcliffe Rangers",
    "Inflation in Australia hits 0.4%, highest in 6 years",
    "Osei wins 1995 award",
    "Final tennis tournament starts next week",
    "New chip doubles battery life of phones",
    "Government talks collapse as rebels seize capital",
    "Shares of the software maker jump after earnings",
    "Striker scores twice in cup final",
    "Scientists find water on a distant moon",
    "Oil prices climb on supply fears",
    "Prime minister calls early election",
]
LONG_SECONDS = int(os.environ.get("ATTN_LONG_SECONDS", 60))  # the acceptance's training through the cluster, at least this long


def skip(why):
    print(why)
    sys.exit(77)


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


# ---------------------------------------------------------------- dqlite wire protocol client
# Enough of dqlite's protocol (version 1) to send a QUERY in autocommit mode (the dqlite shell
# always wraps statements in BEGIN ... COMMIT), keep a connection open across a failover, and
# transfer leadership.

class DqliteError(Exception):
    pass


def _text(s):
    b = s.encode() + b"\0"
    return b + b"\0" * (-len(b) % 8)


class Wire:
    def __init__(self, address, timeout=20):
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.sendall(struct.pack("<Q", 1))
        self.db = None

    def close(self):
        self.sock.close()

    def _recv(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by the node")
            buf += chunk
        return buf

    def _request(self, kind, body):
        self.sock.sendall(struct.pack("<IBBH", len(body) // 8, kind, 0, 0) + body)
        words, rkind, _, _ = struct.unpack("<IBBH", self._recv(8))
        body = self._recv(words * 8)
        if rkind == 0:
            code = struct.unpack_from("<Q", body)[0]
            raise DqliteError("%s (code %d)" % (body[8:].split(b"\0")[0].decode(), code))
        return body

    def leader(self):
        body = self._request(0, struct.pack("<Q", 0))
        return body[8:].split(b"\0")[0].decode()

    def transfer(self, node_id):
        self._request(17, struct.pack("<Q", node_id))

    def open(self, name):
        body = self._request(3, _text(name) + struct.pack("<Q", 0) + _text("volatile"))
        self.db = struct.unpack_from("<I", body)[0]

    def exec(self, sql):
        self._request(8, struct.pack("<Q", self.db) + _text(sql))

    def query(self, sql):
        """Rows of one statement (integers, reals, text, NULL, blobs)."""
        body = self._request(9, struct.pack("<Q", self.db) + _text(sql))
        rows = []
        while True:
            pos = 0
            (n,) = struct.unpack_from("<Q", body, pos)
            pos += 8
            for _ in range(n):  # column names
                end = body.index(b"\0", pos)
                pos = end + 1 + (-(end + 1) % 8)
            while True:
                (marker,) = struct.unpack_from("<Q", body, pos)
                if marker in (0xFFFFFFFFFFFFFFFF, 0xEEEEEEEEEEEEEEEE):
                    break
                hsize = (n + 1) // 2
                header = body[pos:pos + hsize]
                pos += hsize + (-hsize % 8)
                row = []
                for i in range(n):
                    t = (header[i // 2] >> (4 * (i % 2))) & 0xF
                    if t in (1, 9, 11):
                        row.append(struct.unpack_from("<q", body, pos)[0])
                        pos += 8
                    elif t == 2:
                        row.append(struct.unpack_from("<d", body, pos)[0])
                        pos += 8
                    elif t in (3, 10):
                        end = body.index(b"\0", pos)
                        row.append(body[pos:end].decode())
                        pos = end + 1 + (-(end + 1) % 8)
                    elif t == 4:
                        (ln,) = struct.unpack_from("<Q", body, pos)
                        pos += 8
                        row.append(body[pos:pos + ln])
                        pos += ln + (-ln % 8)
                    elif t == 5:
                        row.append(None)
                        pos += 8
                    else:
                        raise DqliteError("column type %d" % t)
                rows.append(tuple(row))
            if marker == 0xFFFFFFFFFFFFFFFF:
                return rows
            words, _, _, _ = struct.unpack("<IBBH", self._recv(8))  # the next batch
            body = self._recv(words * 8)


# ---------------------------------------------------------------- the cluster

def free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


class Cluster:
    def __init__(self, root, n=3):
        self.root = root
        self.addr = {i + 1: "127.0.0.1:%d" % p for i, p in enumerate(free_ports(n))}
        self.proc = {}

    def start(self, i, join=None):
        args = [NODE, "--id", str(i), "--address", self.addr[i],
                "--dir", os.path.join(self.root, "n%d" % i)]
        if join:
            args += ["--join", self.addr[join]]
        log = open(os.path.join(self.root, "node%d.log" % i), "a")
        self.proc[i] = subprocess.Popen(args, stderr=log, stdout=log)

    def alive(self):
        return [i for i, p in self.proc.items() if p.poll() is None]

    def shell(self, sql, nodes=None, timeout=20):
        """Run sql through the dqlite shell (it finds the leader); its rows as text lines."""
        args = [SHELL]
        for i in nodes or self.alive():
            args += ["-s", self.addr[i]]
        args += [DB, sql]
        r = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise DqliteError((r.stderr or r.stdout).strip())
        return r.stdout.rstrip("\n").split("\n") if r.stdout.strip() else []

    def leader(self):
        """The leader's id as the first live node answers, or None."""
        for i in self.alive():
            try:
                w = Wire(self.addr[i], timeout=2)
                a = w.leader()
                w.close()
            except (OSError, DqliteError):
                continue
            for j, b in self.addr.items():
                if a == b:
                    return j
        return None

    def wire(self, i):
        w = Wire(self.addr[i])
        w.open(DB)
        return w

    def stop_all(self):
        codes = {}
        for i, p in self.proc.items():
            if p.poll() is None:
                p.terminate()
        for i, p in self.proc.items():
            try:
                codes[i] = p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                codes[i] = "hung"
        return codes


def wait_for(what, fn, timeout):
    t0 = time.monotonic()
    last = None
    while time.monotonic() - t0 < timeout:
        try:
            r = fn()
            if r:
                return r, time.monotonic() - t0
        except (OSError, DqliteError, subprocess.TimeoutExpired) as e:
            last = e
        time.sleep(0.05)
    fail("%s: not within %d s (last error: %s)" % (what, timeout, last))


def predictions(c, nodes=None):
    """Probabilities and attention weights of every text, as the shell prints them."""
    out = []
    for t in TEXTS:
        q = t.replace("'", "''")
        out.append(c.shell("SELECT label, probability FROM attn_probs('news', '%s')" % q, nodes))
        out.append(c.shell("SELECT position, token, weight FROM attn_weights('news', '%s')" % q,
                           nodes))
    return out


def same(a, b, what):
    if a != b:
        for x, y in zip(a, b):
            if x != y:
                fail("%s: %r != %r" % (what, x, y))
        fail("%s: %d != %d results" % (what, len(a), len(b)))
    print("%s: %d results identical" % (what, len(a)))


def raft_has(c, i, needles):
    """Does one of the needles occur in node i's Raft log files (closed and open segments)?"""
    d = os.path.join(c.root, "n%d" % i)
    for f in os.listdir(d):
        if f[0].isdigit() or f.startswith("open-"):
            with open(os.path.join(d, f), "rb") as fh:
                data = fh.read()
            if any(n in data for n in needles):
                return True
    return False


# ---------------------------------------------------------------- jobs

def raft_term(c, i):
    """Node i's current Raft term, from its metadata files (format, version, term, vote)."""
    best = (-1, None)
    for name in ("metadata1", "metadata2"):
        try:
            with open(os.path.join(c.root, "n%d" % i, name), "rb") as f:
                data = f.read(32)
        except OSError:
            continue
        if len(data) == 32:
            _, version, term, _ = struct.unpack("<QQQQ", data)
            best = max(best, (version, term))
    return best[1]


JOB_COLS = ("state, coalesce(epoch, 0), coalesce(epochs, 0), coalesce(version, 0), node, "
            "coalesce(round(seconds, 2), 0), coalesce(error, '')")


def job(c, j, nodes=None, timeout=20):
    """The job's row as attn_jobs answers through the given nodes (the shell finds the leader)."""
    lines = c.shell("SELECT %s FROM attn_jobs WHERE job = %d" % (JOB_COLS, j), nodes, timeout)
    if len(lines) != 1:
        raise DqliteError("job %d: %r" % (j, lines))
    f = lines[0].split("|", 6)
    return {"state": f[0], "epoch": int(f[1]), "epochs": int(f[2]), "version": int(f[3]),
            "node": int(f[4]), "seconds": float(f[5]), "error": f[6]}


def wait_job(c, j, states, timeout, nodes=None, what=None):
    row, t = wait_for(what or "job %d %s" % (j, "/".join(states)),
                      lambda: (lambda r: r if r["state"] in states else None)(job(c, j, nodes)),
                      timeout)
    return row, t


def submit(c, sql, nodes=None):
    """Run a training statement through the shell: the job's id (attn_fit's JSON object or the
    job row of attn_train / attn_tune). dqlite writes one transaction at a time and a running
    job writes its progress once a second, so the statement can meet a busy database: the
    shell then fails without the message (dqlite 1.11 carries none for a query), and, as any
    client of dqlite does, the test runs it again -- once it has seen that no job was added."""
    for attempt in range(5):
        before = c.shell("SELECT count(*) FROM attn_jobs", nodes)
        try:
            lines = c.shell(sql, nodes)
            break
        except DqliteError:
            if attempt == 4 or c.shell("SELECT count(*) FROM attn_jobs", nodes) != before:
                raise
            print("NOTE: %s... failed with %s job(s) queued or run: again"
                  % (sql[:40], before[0] if before else "no"))
            time.sleep(0.3)
    if len(lines) != 1:
        fail("%s: %r" % (sql, lines))
    if lines[0].startswith("{"):
        got = json.loads(lines[0])
        if got.get("state") != "queued" or not isinstance(got.get("job"), int):
            fail("attn_fit in a node: %r" % got)
        return got["job"]
    f = lines[0].split("|")
    if len(f) != 6 or f[3] != "queued":
        fail("a job's row: %r" % lines)
    return int(f[0])


def store_rows(w, name):
    """What a name has in the store: versions, log rows, high-water mark."""
    return (w.query("SELECT version FROM attn_models WHERE name = '%s' ORDER BY version" % name),
            w.query("SELECT count(*) AS n FROM attn_training_log WHERE name = '%s'" % name),
            w.query("SELECT coalesce((SELECT last_version FROM attn_versions WHERE name = '%s'), "
                    "0) AS v" % name))


def lead_on(c, i, timeout=30):
    """Hand leadership to node i (TRANSFER to the leader); the time it took."""
    def step():
        lead = c.leader()
        if lead == i:
            return True
        if lead is not None:
            w = Wire(c.addr[lead])
            try:
                w.transfer(i)
            finally:
                w.close()
        return c.leader() == i
    return wait_for("node %d leads" % i, step, timeout)[1]


def model_bytes(c, i, name, version):
    """The model as node i holds it (it leads): weights, log rows, lineage, job row."""
    w = c.wire(i)
    try:
        return (w.query("SELECT weights, config, labels, metrics FROM attn_models WHERE name = "
                        "'%s' AND version = %d" % (name, version)),
                w.query("SELECT epoch, train_loss, val_loss, val_accuracy, val_f1, lr, seconds "
                        "FROM attn_training_log WHERE name = '%s' AND version = %d ORDER BY "
                        "epoch" % (name, version)),
                w.query("SELECT function, query, rows_sha256, options FROM attn_lineage WHERE "
                        "name = '%s' AND version = %d" % (name, version)))
    finally:
        w.close()


def main():
    if not SHELL:
        skip("dqlite not installed: no dqlite shell (sh tests/deps.sh installs go-dqlite)")
    if not os.path.exists(NODE):
        skip("no %s: make builds it where libdqlite-dev is installed (sh tests/deps.sh)"
             % os.path.join(BUILD, "attnext-node"))
    guard = True  # the dqlite write guard of ext/attn_conn.c (attn_conn_check_write)
    root = tempfile.mkdtemp(prefix="attn-cluster-")
    c = Cluster(root)
    t_start = time.monotonic()
    ok = False
    try:
        c.start(1)
        wait_for("node 1 leads", lambda: c.leader() == 1, 15)
        c.start(2, join=1)
        c.start(3, join=1)
        wait_for("three voters", lambda: sum(l.endswith("|voter") for l in c.shell(".cluster"))
                 == 3, 30)
        print("cluster: %s" % c.addr)

        # 1. data, training and an import through the shell
        import csv
        with open(os.path.join(ROOT, "data", "headlines.csv"), newline="") as f:
            rows = list(csv.DictReader(f))
        q = lambda s: "'" + s.replace("'", "''") + "'"
        c.shell("CREATE TABLE headlines(title TEXT, category TEXT)")
        c.shell("INSERT INTO headlines(title, category) VALUES " +
                ", ".join("(%s, %s)" % (q(r["title"]), q(r["category"])) for r in rows))
        c.shell("CREATE TABLE runs(version INTEGER, epoch INTEGER, val_accuracy REAL)")
        # "deploy": "always": every version trained here serves (the default, "if_better",
        # could keep version 1); this test is about replication, not the deploy policy. The
        # models start from the lesson's recipe (a documented, fixed one), so that their size
        # and pace here do not change with attnext's default recipe
        opts = ("json_object('recipe', 'lesson', 'cell', 'gru', 'embed_dim', 32, 'hidden', 32, "
                "'fc_hidden', 32, 'epochs', 4, 'batch_size', 16, 'lr', 0.005, 'deploy', "
                "'always', 'seed', %d)")
        # in a node the statement returns the job's row at once; the job trains beside Raft
        first = submit(c, "SELECT * FROM attn_train('news', 'SELECT title, category FROM "
                          "headlines', %s)" % (opts % 1234))
        done, t_job = wait_job(c, first, ("done", "failed"), 60)
        epochs = c.shell("SELECT json_array_length(losses), json_array_length(result), "
                         "json_extract(result, '$[#-1].version') FROM attn_jobs WHERE job = %d"
                         % first)
        if done["state"] != "done" or done["version"] != 1 or epochs != ["4|4|1"]:
            fail("training through the shell: %r, %r" % (done, epochs))
        print("attn_train through the shell: job %d done in %.2f s (4 epochs, version 1)"
              % (first, t_job))
        got = c.shell("SELECT attn_import('copy', (SELECT weights FROM attn_models "
                      "WHERE name = 'news' AND version = 1))")
        if got != ["1"]:
            fail("attn_import through the shell returned %r" % got)
        # The replication time of a version: a new model (version 1's weights with the last
        # float's lowest bit flipped) imported in BEGIN ... COMMIT by the wire client; from the
        # COMMIT request to its bytes in each node's Raft log files.
        w = c.wire(c.leader())
        blob = bytearray(w.query("SELECT weights FROM attn_models WHERE name = 'news'")[0][0])
        blob[-4] ^= 1
        needles = [bytes(blob[-40:]), bytes(blob[-80:-40])]
        w.exec("BEGIN")
        w.query("SELECT attn_import('probe', X'%s') AS version" % blob.hex())  # AS: dqlite 1.11 streams a column name over 4 KiB forever
        t0 = time.monotonic()
        w.exec("COMMIT")
        t_commit = time.monotonic() - t0
        w.close()
        _, t_all = wait_for("the new version in every node's Raft log",
                            lambda: all(raft_has(c, i, needles) for i in c.alive()), 10)
        print("a %d-byte model version: COMMIT answered (a majority has it) in %.3f s; "
              "in all three nodes' Raft logs %.3f s after the COMMIT" % (len(blob), t_commit,
                                                                         t_all))

        # 2. a write that would bypass Raft is refused, and the node lives on
        if guard:
            # dqlite 1.11 answers an error raised while a QUERY steps with the first column's
            # name instead of SQLite's message; an EXEC carries the message.
            lead = c.leader()
            w = c.wire(lead)
            jobs_before = w.query("SELECT count(*) AS n FROM attn_jobs")
            forms = ["SELECT attn_deploy('news', 1) AS v",
                     "SELECT * FROM attn_train('x', 'SELECT title, category FROM headlines', "
                     "%s)" % (opts % 1),
                     "SELECT attn_fit('x', 'SELECT title, category FROM headlines') AS v",
                     "SELECT attn_import('x', weights) AS v FROM attn_models WHERE name = 'copy'"]
            for form in forms:
                for how in (w.query, w.exec):
                    try:
                        how(form)
                        fail("not refused in autocommit mode: %s" % form)
                    except DqliteError as e:
                        msg = str(e)
                    if how == w.exec and "would commit outside Raft" not in msg:
                        fail("unexpected error for %s: %s" % (form, msg))
                print("refused in autocommit mode: %s" % msg)
            w.exec("INSERT INTO runs VALUES(0, 0, 0)")  # the node still writes
            if w.query("SELECT count(*) AS n FROM attn_models") != [(3,)] or \
                    w.query("SELECT version FROM attn_models WHERE name = 'news' "
                            "AND deployed") != [(1,)] or \
                    w.query("SELECT count(*) AS n FROM attn_jobs") != jobs_before:
                fail("a refused write changed the model store or recorded a job")
            w.close()
            if c.proc[lead].poll() is not None:
                fail("the leader died after a refused write")
        else:
            print("NOTE: the dqlite write guard (/work/notes/issue13-ext.patch) is not applied: "
                  "the refusal of writes outside Raft is not tested")

        # 3. jobs
        # A model whose epochs take a while (an LSTM of 256): a 6-epoch job gives the time of
        # an epoch here, from which the long job's epochs are counted.
        heavy = ("json_object('recipe', 'lesson', 'cell', 'lstm', 'embed_dim', 128, 'hidden', "
                 "256, 'fc_hidden', 64, 'batch_size', 16, 'patience', 100000, 'deploy', "
                 "'always', 'seed', 7, 'epochs', %d)")
        fit = ("SELECT attn_fit('%s', 'SELECT title, category FROM headlines', " + heavy + ")")
        j = submit(c, fit % ("long", 6))
        done, _ = wait_job(c, j, ("done", "failed"), 120)
        if done["state"] != "done":
            fail("a 6-epoch job: %r" % done)
        # the fastest epoch, and a margin: later epochs run up to a tenth faster than the first
        # ones, and the long job should not end before LONG_SECONDS if the machine gets less
        # busy meanwhile (it ends later when it gets busier; much less busy: see 3a). The
        # margin is 1.5: in make test the short job shares the cores with the batch's first
        # tests, and the long job's epochs ran 1.4x as fast (54 of 60 s with 1.2: a second long
        # job, two minutes more, where 1.5 costs a quarter of a minute when the paces match)
        per_epoch = float(c.shell("SELECT min(seconds) FROM attn_job_epochs WHERE job = %d"
                                  % j)[0])
        n_long = int(math.ceil(LONG_SECONDS * 1.5 / per_epoch)) + 1

        # 3a. at least 60 s of training through the cluster, dqlite's default timeouts. The
        # epochs were counted from a short job's pace; a job that trained less than LONG_SECONDS
        # (the machine got much less busy meanwhile) proves less than asked: one more, counted
        # from that job's own pace (LONG_SECONDS and more of epochs, measured under the load)
        for attempt in (1, 2):
            lead = c.leader()
            followers = [i for i in c.alive() if i != lead]
            terms = {i: raft_term(c, i) for i in c.alive()}
            w = c.wire(lead)  # as the shell does: BEGIN; SELECT attn_fit(...); COMMIT
            t0 = time.monotonic()
            w.exec("BEGIN")
            got = w.query(fit % ("long", n_long) + " AS job")
            w.exec("COMMIT")
            t_submit = time.monotonic() - t0
            j = json.loads(got[0][0])["job"]
            size = w.query("SELECT page_count * page_size AS n FROM pragma_page_count, "
                           "pragma_page_size")[0][0]
            print("job %d: %d epochs of ~%.2f s on the leader, node %d (terms %s); the "
                  "statement answered in %.3f s (BEGIN to COMMIT, a copy of the %.1f MB "
                  "database included)" % (j, n_long, per_epoch, lead, terms, t_submit,
                                          size / 1e6))
            seen, slowest, answers, in_logs = [], 0.0, 0, set()
            t_job = time.monotonic()
            while True:
                if time.monotonic() - t_job > 8 * LONG_SECONDS + 60:  # never hang CI
                    fail("job %d still %r after %.0f s" % (j, job(c, j), time.monotonic() - t_job))
                # progress through a follower's address (the shell asks it for the leader)
                f = followers[len(seen) % 2]
                row = job(c, j, [f])
                if row["state"] != "running" and row["state"] != "queued":
                    break
                seen.append(row["epoch"])
                hb = (c.shell("SELECT heartbeat_at FROM attn_job_runs WHERE job = %d AND "
                              "heartbeat_at IS NOT NULL" % j, [f]) or [""])[0]
                for k in followers:  # the progress rows are in the followers' own copies
                    if hb and k not in in_logs and wait_for(
                            "progress in node %d's Raft log" % k,
                            lambda: raft_has(c, k, [hb.encode()]), 10):
                        in_logs.add(k)
                # the leader answers while the job trains (its event loop is free)
                for _ in range(5):
                    t0 = time.monotonic()
                    if w.query("SELECT count(*) AS n FROM headlines") != [(800,)]:
                        fail("the leader's answer during the job")
                    slowest = max(slowest, time.monotonic() - t0)
                    answers += 1
                time.sleep(2)
            w.close()
            done, _ = wait_job(c, j, ("done", "failed"), 60)
            after = {i: raft_term(c, i) for i in c.alive()}
            if done["state"] != "done":
                fail("the %d-second job: %r" % (LONG_SECONDS, done))
            trained = float(c.shell("SELECT json_extract(result, '$.seconds') FROM attn_jobs "
                                    "WHERE job = %d" % j)[0])
            if after != terms or c.leader() != lead:
                fail("a leadership change during the job: terms %r -> %r, leader %d -> %s"
                     % (terms, after, lead, c.leader()))
            progress = sorted(set(seen))
            if len(progress) < 3 or in_logs != set(followers):
                fail("progress read through a follower while the job ran: epochs %r, in the "
                     "Raft logs of %r" % (seen, sorted(in_logs)))
            print("a %.1f-second training (%d epochs, job %d, %.1f s from start to commit) "
                  "through the cluster: done, version %d; Raft term %s before and after, leader "
                  "node %d throughout; progress read through the followers (epochs %s) and in "
                  "their Raft logs; the leader answered %d queries meanwhile, the slowest in "
                  "%.3f s" % (trained, done["epochs"], j, done["seconds"], done["version"],
                              terms[lead], lead, ",".join(map(str, progress)), answers, slowest))
            if trained >= LONG_SECONDS:
                break
            if attempt == 2:
                fail("the job trained %.1f s, not %d" % (trained, LONG_SECONDS))
            per_epoch = trained / done["epochs"]
            # a wide margin this time: the load of a shared machine moves both ways
            n_long = int(math.ceil(LONG_SECONDS * 1.5 / per_epoch)) + 1
            print("NOTE: job %d trained %.1f s, under %d s (the machine got less busy than when "
                  "its epochs were counted): again, %d epochs of its pace, %.3f s"
                  % (j, trained, LONG_SECONDS, n_long, per_epoch))
        # the same model on every node: leadership handed to each in turn, read there
        version = done["version"]
        reference = model_bytes(c, lead, "long", version)
        if len(reference[0]) != 1 or len(reference[1]) != done["epochs"] or \
                reference[2][0][0] != "attn_fit":
            fail("the job's model on node %d: %d rows, %d log rows, lineage %r"
                 % (lead, len(reference[0]), len(reference[1]), reference[2]))
        for i in followers:
            t = lead_on(c, i)
            if model_bytes(c, i, "long", version) != reference:
                fail("node %d holds another model 'long' version %d" % (i, version))
            print("node %d (leading after %.2f s) holds the same model: %d bytes of weights, "
                  "%d log rows, lineage" % (i, t, len(reference[0][0][0]), len(reference[1])))

        # 3b. one training at a time per node: a second job waits, queued; attn_cancel of a
        # queued job and of a running one: each stops within a second or two, nothing saved
        w = c.wire(c.leader())
        before = store_rows(w, "long")
        w.close()
        j = submit(c, fit % ("long", 1000))
        jq = submit(c, fit % ("long", 1000))
        wait_for("job %d trains" % j, lambda: job(c, j)["epoch"] >= 1, 60)
        if job(c, jq)["state"] != "queued":
            fail("a second job while one trains: %r" % job(c, jq))
        if c.shell("SELECT attn_cancel(%d)" % jq) != ["1"]:
            fail("attn_cancel of a queued job")
        t0 = time.monotonic()
        if c.shell("SELECT attn_cancel(%d)" % j) != ["1"]:
            fail("attn_cancel of a running job")
        t_cancel = time.monotonic() - t0
        # its thread stops: no training left in the leader's process (attn_status)
        w = c.wire(c.leader())
        _, t_stop = wait_for("job %d's training stops" % j, lambda: w.query(
            "SELECT count(*) AS n FROM attn_status") == [(0,)], 10)
        time.sleep(1)
        rows_j, rows_q = job(c, j), job(c, jq)
        if rows_j["state"] != "cancelled" or rows_q["state"] != "cancelled" or \
                store_rows(w, "long") != before or rows_q["epoch"] != 0:
            fail("cancelled jobs: %r, %r" % (rows_j, rows_q))
        w.close()
        if c.shell("SELECT attn_cancel(%d)" % j) != ["0"]:
            fail("attn_cancel of a job that ended")
        w = c.wire(c.leader())  # an EXEC: dqlite 1.11 carries the message of an error there
        w.exec("BEGIN")
        try:
            w.exec("SELECT attn_cancel(99999)")
            fail("attn_cancel of no job")
        except DqliteError as e:
            if "attn_cancel: no job 99999" not in str(e):
                fail("attn_cancel(99999): %s" % e)
        w.exec("ROLLBACK")
        w.close()
        print("attn_cancel: job %d cancelled while queued, job %d while training (the statement "
              "took %.3f s, the training stopped %.2f s later), nothing saved"
              % (jq, j, t_cancel, t_stop))

        # 3c. a leadership change during a job: it trains on, commits through the new leader
        old = c.leader()
        j = submit(c, fit % ("long", int(math.ceil(10 / per_epoch))))
        wait_for("job %d trains" % j, lambda: job(c, j)["epoch"] >= 1, 60)
        new = [i for i in c.alive() if i != old][0]
        t = lead_on(c, new)
        mid = job(c, j, [new])
        # its progress goes on through the new leader while it trains on the follower
        later, _ = wait_for("job %d's progress through node %d" % (j, new), lambda: (
            lambda r: r if r["epoch"] > mid["epoch"] or r["state"] != "running" else None)(
                job(c, j, [new])), 30)
        done, _ = wait_job(c, j, ("done", "failed"), 120)
        if mid["state"] != "running" or later["state"] != "running" or \
                done["state"] != "done" or done["node"] != old:
            fail("a job across a leadership change: %r, %r then %r" % (mid, later, done))
        w = c.wire(c.leader())
        if w.query("SELECT count(*) AS n FROM attn_models WHERE name = 'long' AND version = %d"
                   % done["version"]) != [(1,)]:
            fail("the job's model after the leadership change")
        w.close()
        print("job %d: leadership moved from node %d to node %d (%.2f s); the job trained on "
              "in node %d (epoch %d, then %d, read through node %d) and committed version %d "
              "through node %d" % (j, old, new, t, old, mid["epoch"], later["epoch"], new,
                                   done["version"], new))

        # 3e. attn_tune as a job: its trials (two at a time) saved together, the best deployed
        j = submit(c, "SELECT * FROM attn_tune('tuned', 'SELECT title, category FROM headlines', "
                      "'{\"hidden\":[16,32],\"lr\":[0.005,0.01]}', '{\"epochs\":3,\"embed_dim\":16,"
                      "\"fc_hidden\":16}')")
        done, _ = wait_job(c, j, ("done", "failed"), 60)
        trials = c.shell("SELECT json_extract(value, '$.trial'), json_extract(value, '$.version'), "
                         "json_extract(value, '$.chosen'), json_extract(value, '$.deployed') FROM "
                         "attn_jobs, json_each(result) WHERE job = %d" % j)
        stored = c.shell("SELECT version, deployed FROM attn_models WHERE name = 'tuned' ORDER BY "
                         "version")
        chosen = [t.split("|") for t in trials if t.split("|")[2] == "1"]
        if done["state"] != "done" or len(trials) != 4 or len(stored) != 4 or \
                chosen != [[chosen[0][0], str(done["version"]), "1", "1"]] or \
                "%d|1" % done["version"] not in stored:
            fail("attn_tune as a job: %r, %r, %r" % (done, trials, stored))
        print("attn_tune as a job (%.2f s): 4 trials stored as versions %s, trial %s (version %d) "
              "chosen and deployed" % (done["seconds"], ", ".join(t.split("|")[0] for t in stored),
                                       chosen[0][0], done["version"]))

        # 3e'. errors: a bad option fails in the statement (no job), an empty query in the job
        w = c.wire(c.leader())
        n_jobs = w.query("SELECT count(*) AS n FROM attn_jobs")
        w.exec("BEGIN")  # an EXEC: dqlite 1.11 carries the message of an error there
        try:
            w.exec("SELECT attn_fit('bad', 'SELECT title, category FROM headlines', "
                   "'{\"hiddn\":8}')")
            fail("a bad option was not refused in the statement")
        except DqliteError as e:
            refused = str(e).split(" (code")[0]
            if 'attn_fit: unknown option "hiddn"' not in refused:
                fail("a bad option: %s" % refused)
        w.exec("ROLLBACK")
        if w.query("SELECT count(*) AS n FROM attn_jobs") != n_jobs:
            fail("a refused statement recorded a job")
        w.close()
        j = submit(c, "SELECT attn_fit('none', 'SELECT title, category FROM headlines WHERE 0')")
        row, _ = wait_job(c, j, ("failed", "done"), 30)
        if row["state"] != "failed" or row["error"] != "attn_fit: the query returned no rows":
            fail("a job whose query returns no rows: %r" % row)
        print("a bad option fails in the statement (%s); an empty query fails the job: %s"
              % (refused, row["error"]))

        # 3f. "deploy": "if_better" against a deployment made while the job ran: not deployed
        # the lesson's recipe: its run compares by validation loss, which many epochs surely
        # lower below one epoch's (the job's own decision must be "deploy")
        # (the job's JSON object nests as an object: it carries the JSON subtype)
        got = c.shell("SELECT json_object('submitted', attn_fit('cas', 'SELECT title, category "
                      "FROM headlines', json_object('recipe', 'lesson', 'epochs', 1, "
                      "'embed_dim', 16, 'hidden', 16, 'fc_hidden', 16)))")
        if len(got) != 1 or not got[0].startswith('{"submitted":{"job":'):
            fail("attn_fit's job nested by json_object: %r" % got)
        j0 = json.loads(got[0])["submitted"]["job"]
        wait_job(c, j0, ("done",), 60)
        nested = c.shell("SELECT json_type(json_object('r', result), '$.r'), json_type("
                         "json_object('l', losses), '$.l') FROM attn_jobs WHERE job = %d" % j0)
        if nested != ["object|array"]:
            fail("attn_jobs' result and losses nested by json_object: %r" % nested)
        # about 4 s of this small model's own epochs (job j0's one epoch gives their pace: the
        # larger model's pace of per_epoch says little about it on a loaded machine)
        got = c.shell("SELECT min(seconds) FROM attn_job_epochs WHERE job = %d" % j0)
        cas_epoch = float(got[0]) if got and got[0] else per_epoch / 12
        j = submit(c, "SELECT attn_fit('cas', 'SELECT title, category FROM headlines', "
                      "json_object('recipe', 'lesson', 'epochs', %d, 'embed_dim', 16, 'hidden', "
                      "16, 'fc_hidden', 16, 'patience', 1000))"
                      % min(20000, int(math.ceil(4 / max(cas_epoch, 2e-4)))))
        wait_for("job %d trains" % j, lambda: job(c, j)["epoch"] >= 1, 60)
        c.shell("SELECT attn_import('cas', (SELECT weights FROM attn_models WHERE name = 'cas' "
                "AND version = 1))")  # version 2, deployed
        done, _ = wait_job(c, j, ("done", "failed"), 120)
        why = c.shell("SELECT json_extract(result, '$.deployed'), json_extract(result, "
                      "'$.deploy_reason') FROM attn_jobs WHERE job = %d" % j)
        deployed = c.shell("SELECT version FROM attn_models WHERE name = 'cas' AND deployed")
        if done["state"] != "done" or done["version"] != 3 or deployed != ["2"] or \
                not why[0].startswith("0|") or "changed while the job ran (1, now 2)" not in why[0]:
            fail("if_better against a deployment made during the job: %r, %r, %r"
                 % (done, why, deployed))
        print("a deployment made while job %d ran: its version %d was not deployed (%s)"
              % (j, done["version"], why[0].split("|", 1)[1]))

        # 3d. kill -9 of a follower running a job: the leader marks it failed, no model
        runner = c.leader()
        j = submit(c, fit % ("long", 1000))
        wait_for("job %d trains" % j, lambda: job(c, j)["epoch"] >= 1, 60)
        other = [i for i in c.alive() if i != runner][0]
        lead_on(c, other)
        w = c.wire(other)
        before = store_rows(w, "long")
        w.close()
        print("SIGKILL node %d, a follower running job %d" % (runner, j))
        t0 = time.monotonic()
        c.proc[runner].kill()
        c.proc[runner].wait()
        row, t_failed = wait_job(c, j, ("failed", "done", "cancelled"), 30)
        if row["state"] != "failed" or "node %d" % runner not in row["error"]:
            fail("the job of a killed follower: %r" % row)
        w = c.wire(c.leader())
        if store_rows(w, "long") != before:
            fail("the killed follower's job left rows: %r -> %r" % (before, store_rows(w, "long")))
        w.close()
        print("job %d failed %.2f s after the kill: %s" % (j, t_failed, row["error"]))
        c.start(runner)
        wait_for("node %d back" % runner, lambda: sum(
            l.endswith("|voter") for l in c.shell(".cluster")) == 3 and
            c.shell("SELECT 1", [runner]) == ["1"], 30)
        time.sleep(1)
        if job(c, j)["state"] != "failed":
            fail("a failed job after its node restarted: %r" % job(c, j))

        # 3g. SIGTERM of a node running a job: the job is marked failed before the node stops
        runner = c.leader()
        j = submit(c, fit % ("long", 1000))
        wait_for("job %d trains" % j, lambda: job(c, j)["epoch"] >= 1, 60)
        lead_on(c, [i for i in c.alive() if i != runner][0])
        t0 = time.monotonic()
        c.proc[runner].terminate()
        code = c.proc[runner].wait(timeout=15)
        t_term = time.monotonic() - t0
        row = job(c, j)
        if code != 0 or row["state"] != "failed" or "SIGTERM" not in row["error"]:
            fail("SIGTERM of the node running a job: exit %r, %r" % (code, row))
        print("SIGTERM of node %d running job %d: it stopped (exit 0) %.2f s later, the job "
              "marked failed: %s" % (runner, j, t_term, row["error"]))
        c.start(runner)
        wait_for("node %d back" % runner, lambda: c.shell("SELECT 1", [runner]) == ["1"], 30)

        # 4. failover: the same predictions from the survivors; the job on the killed leader
        # fails; a job training on a follower meanwhile trains on through the election and
        # commits its model through the new leader
        before = predictions(c)
        lead = c.leader()
        w = c.wire(lead)
        store_before = store_rows(w, "lost")
        w.close()
        keeper = [i for i in c.alive() if i != lead][0]
        lead_on(c, keeper)
        kept = submit(c, fit % ("kept", int(math.ceil(12 / per_epoch))))
        wait_for("job %d trains" % kept, lambda: job(c, kept)["epoch"] >= 1, 60)
        lead_on(c, lead)
        lost = submit(c, fit % ("lost", 1000))
        wait_for("job %d trains" % lost, lambda: job(c, lost)["epoch"] >= 1, 60)
        # its progress as the leader has it (written through it once a second)
        kept_before, _ = wait_for("job %d's progress through node %d" % (kept, lead), lambda: (
            lambda r: r if r["epoch"] >= 1 or r["state"] != "running" else None)(job(c, kept)), 30)
        if kept_before["state"] != "running" or kept_before["node"] != keeper:
            fail("job %d before the failover: %r" % (kept, kept_before))
        others = [i for i in c.alive() if i != lead]
        early = {}
        for i in others:  # connections opened on the followers before the failover
            early[i] = c.wire(i)
        print("SIGKILL the leader, node %d, while job %d trains there" % (lead, lost))
        c.proc[lead].kill()
        c.proc[lead].wait()
        _, t_fail = wait_for("a survivor answers",
                             lambda: c.shell("SELECT attn_predict('news', 'x')", timeout=10), 20)
        print("failover (kill -> first answer through the shell): %.2f s" % t_fail)
        row, t_lost = wait_job(c, lost, ("failed", "done", "cancelled"), 30)
        if row["state"] != "failed" or "node %d" % lead not in row["error"]:
            fail("the job of the killed leader: %r" % row)
        print("job %d shows failed %.2f s after the first answer: %s" % (lost, t_lost,
                                                                           row["error"]))
        done, t_kept = wait_job(c, kept, ("done", "failed", "cancelled"), 120)
        w = c.wire(c.leader())
        stored = w.query("SELECT version, deployed FROM attn_models WHERE name = 'kept'")
        logged = w.query("SELECT count(*) AS n FROM attn_training_log WHERE name = 'kept'")
        w.close()
        if done["state"] != "done" or done["node"] != keeper or done["version"] != 1 or \
                done["epochs"] != int(math.ceil(12 / per_epoch)) or stored != [(1, 1)] or \
                logged != [(done["epochs"],)]:
            fail("the job of node %d across the leader's loss: %r, %r, %r"
                 % (keeper, done, stored, logged))
        print("job %d on node %d (epoch %d at the kill) trained on through the election and "
              "committed version 1 (%d epochs, %d log rows) through node %d, %.2f s after the "
              "first answer" % (kept, keeper, kept_before["epoch"], done["epochs"], logged[0][0],
                                c.leader(), t_kept))
        after = predictions(c)
        same(before, after, "probabilities and attention, new leader vs old")
        new_lead = c.leader()
        w = early[new_lead]
        if store_rows(w, "lost") != store_before:
            fail("the killed leader's job left rows: %r" % (store_rows(w, "lost"),))
        probs = w.query("SELECT label, probability FROM attn_probs('news', %s)" % q(TEXTS[0]))
        if [(l, p) for l, p in probs] != [(l.split("|")[0], float(l.split("|")[1]))
                                          for l in before[0]]:
            fail("connection opened before the failover: %r vs %r" % (probs, before[0]))
        print("a connection opened on node %d before it led: same probabilities" % new_lead)

        # a new version on the new leader, as a plain EXEC: INSERT INTO ... SELECT FROM
        # attn_train records the job; it trains beside Raft and commits version 2
        n_jobs = w.query("SELECT max(job) AS j FROM attn_jobs")[0][0]
        w.exec("INSERT INTO runs SELECT 2, job, 0 FROM attn_train('news', "
               "'SELECT title, category FROM headlines', %s)" % (opts % 99))
        j2 = w.query("SELECT max(job) AS j FROM attn_jobs")[0][0]
        if j2 != n_jobs + 1 or w.query("SELECT epoch FROM runs WHERE version = 2") != [(j2,)]:
            fail("INSERT INTO runs SELECT ... FROM attn_train: job %r" % j2)
        done, _ = wait_job(c, j2, ("done", "failed"), 60)
        if done["state"] != "done" or done["version"] != 2:
            fail("the job of the plain EXEC: %r" % done)
        v2 = predictions(c)
        if v2 == before:
            fail("version 2 predicts like version 1")
        reader = c.wire(new_lead)  # another connection: caches version 2, sees deployments
        p2 = reader.query("SELECT probability FROM attn_probs('news', %s)" % q(TEXTS[0]))
        c.shell("SELECT attn_deploy('news', 1)")
        p1 = reader.query("SELECT probability FROM attn_probs('news', %s)" % q(TEXTS[0]))
        want1 = [float(l.split("|")[1]) for l in before[0]]
        want2 = [float(l.split("|")[1]) for l in v2[0]]
        if [r[0] for r in p2] != want2 or [r[0] for r in p1] != want1:
            fail("the next statement of another connection did not see the deployment: "
                 "%r then %r" % (p2, p1))
        c.shell("SELECT attn_deploy('news', 2)")
        reader.close()
        for x in early.values():
            x.close()
        print("a deployment made on one connection is seen by the next statement of another")

        # 5. restart the killed node, kill the other original node, the restarted one serves
        killed = lead
        c.start(killed)
        other = new_lead
        third = [i for i in c.alive() if i not in (killed, other)][0]
        print("restarted node %d; SIGKILL node %d; node %d remains" % (killed, other, third))
        c.proc[other].kill()
        c.proc[other].wait()
        def restarted_leads():
            lead = c.leader()
            if lead == third:  # hand leadership over: Raft does once the node caught up
                w = Wire(c.addr[third])
                w.transfer(killed)
                w.close()
            return c.leader() == killed
        _, t_fail2 = wait_for("the restarted node leads", restarted_leads, 30)
        print("the restarted node leads %.2f s after the kill" % t_fail2)
        nodes = [killed]
        same(v2, predictions(c, nodes), "version 2 served by the restarted node")
        c.shell("SELECT attn_deploy('news', 1)", nodes)
        same(before, predictions(c, nodes), "version 1 served by the restarted node")
        versions = c.shell("SELECT name, version FROM attn_models WHERE name IN ('copy', "
                           "'kept', 'news', 'probe', 'lost') ORDER BY name, version", nodes)
        if versions != ["copy|1", "kept|1", "news|1", "news|2", "probe|1"]:
            fail("model store on the restarted node: %r" % versions)
        states = c.shell("SELECT state, count(*) FROM attn_jobs GROUP BY state ORDER BY state",
                         nodes)
        print("jobs: %s" % ", ".join(states))
        if any(s.split("|")[0] in ("queued", "running") for s in states):
            fail("jobs left queued or running: %r" % states)
        ok = True
    finally:
        codes = c.stop_all()
        if ok:
            bad = {i: rc for i, rc in codes.items() if rc not in (0, -9)}
            stopped = [i for i in codes if codes[i] == 0]
            for i in stopped:
                with open(os.path.join(root, "node%d.log" % i)) as f:
                    if "stopped" not in f.read().splitlines()[-1]:
                        bad[i] = "no 'stopped' line"
            if bad:
                print("FAIL: nodes did not stop cleanly on SIGTERM: %r" % bad)
                ok = False
        if not ok:
            for i in c.proc:
                print("--- node %d log (last lines)" % i)
                with open(os.path.join(root, "node%d.log" % i)) as f:
                    print("".join(f.readlines()[-15:]))
        shutil.rmtree(root, ignore_errors=True)
    print("cluster test passed in %.1f s" % (time.monotonic() - t_start) if ok else "failed")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
