"""attnext: an attention-RNN text classifier inside SQLite, as a loadable extension.

    import sqlite3, attnext
    conn = sqlite3.connect("news.db")
    attnext.load(conn)           # loads the extension; Ctrl-C now interrupts its statements
    conn.execute("SELECT attn_version()").fetchone()

load() takes a sqlite3.Connection, an apsw.Connection or a sqlite_utils.Database.

Ctrl-C. While a statement runs, Python's sqlite3 holds the main thread inside SQLite: Python's
own SIGINT handler waits for it to return, so a training went on to its end and was saved, and
KeyboardInterrupt came only then. load() (or interrupt_on_ctrl_c(conn)) has a thread watch for
SIGINT (through signal.set_wakeup_fd, which any other wakeup fd is passed on to) and call
conn.interrupt(): the running statement fails with "attn_fit: interrupted" (attn_train,
attn_fit and attn_tune save nothing), and KeyboardInterrupt follows at the next line of Python
that runs -- unless that error is what ends the program, which then reports it alone.

The wheel carries the extension built for its platform beside this file: attnext.so on Linux
(x86-64: with attnext_cuda.so when it was built with nvcc, and the OpenBLAS it links, renamed,
found through the library's $ORIGIN RUNPATH: it needs no OpenBLAS on the machine; arm64: built
without BLAS), attnext.dll on Windows (x64).
"""
import os
import signal
import socket
import sys
import threading
import time
import weakref

__version__ = "@VERSION@"
__all__ = ["load", "loadable_path", "interrupt_on_ctrl_c", "__version__"]

_HERE = os.path.dirname(os.path.abspath(__file__))
# The extension's file name on each platform (SQLite adds the same suffix to a path without one)
_FILES = {"win32": "attnext.dll", "cygwin": "attnext.dll", "darwin": "attnext.dylib"}


def _library():
    """The extension's file for this platform; a RuntimeError naming what the wheel holds when
    it is another platform's wheel (pip install --platform, a copied site-packages)."""
    path = os.path.join(_HERE, _FILES.get(sys.platform, "attnext.so"))
    if not os.path.exists(path):
        held = sorted(n for n in os.listdir(_HERE) if n.startswith("attnext."))
        raise RuntimeError(
            "attnext: no %s in %s for this platform (%s): this is the wheel of another platform "
            "(it holds %s); install the wheel built for this one"
            % (os.path.basename(path), _HERE, sys.platform, ", ".join(held) or "no extension"))
    return path


def loadable_path():
    """The path of the extension without its suffix, as SQLite's load_extension wants it
    (SQLite adds .so on Linux, .dll on Windows)."""
    return os.path.splitext(_library())[0]


def _describe(obj):
    t = type(obj)
    return "%s.%s" % (t.__module__, t.__qualname__)


def _unwrap(conn):
    """The DB-API connection behind what load() was given (sqlite_utils.Database: its .conn)."""
    module = type(conn).__module__ or ""
    if module.split(".")[0] == "sqlite_utils" and hasattr(conn, "conn"):
        return conn.conn
    return conn


def load(conn, ctrl_c=True):
    """Load the extension into conn: a sqlite3.Connection, an apsw.Connection, or a
    sqlite_utils.Database (its .conn). Extension loading is switched back off afterwards.
    With ctrl_c (the default), Ctrl-C interrupts a statement running on it (see
    interrupt_on_ctrl_c). Returns conn."""
    raw = _unwrap(conn)
    module = (type(raw).__module__ or "").split(".")[0]
    if module == "apsw":
        # APSW: enable_load_extension / load_extension (3.44+), enableloadextension /
        # loadextension before
        enable = getattr(raw, "enable_load_extension", None) or getattr(raw, "enableloadextension")
        do_load = getattr(raw, "load_extension", None) or getattr(raw, "loadextension")
        enable(True)
        try:
            do_load(loadable_path())
        finally:
            enable(False)
    elif hasattr(raw, "enable_load_extension") and hasattr(raw, "load_extension"):
        raw.enable_load_extension(True)
        try:
            raw.load_extension(loadable_path())
        finally:
            raw.enable_load_extension(False)
    elif module in ("sqlite3", "pysqlite2") or (type(raw).__name__ == "Connection"
                                                 and hasattr(raw, "execute")):
        raise RuntimeError(
            "attnext.load: got a %s without enable_load_extension: this Python's sqlite3 module "
            "was built without extension loading (macOS's system Python and some pyenv builds "
            "are; Debian's python3 has it); use another Python, or APSW (pip install apsw) "
            "and pass an apsw.Connection" % _describe(raw))
    else:
        raise TypeError(
            "attnext.load: expected a sqlite3.Connection, an apsw.Connection or a "
            "sqlite_utils.Database, got %s" % _describe(conn))
    if ctrl_c:
        interrupt_on_ctrl_c(raw)
    return conn


def _self_refs():
    """How many references an open sqlite3.Connection holds to itself (its statement cache
    calls it back: 2 in CPython 3.11), measured on one that nothing else refers to."""
    import sqlite3
    holder = [sqlite3.connect(":memory:")]
    holder[0].execute("SELECT 1").fetchall()
    n = sys.getrefcount(holder[0]) - 2  # the list, getrefcount's argument
    holder[0].close()
    return n


class _CtrlC:
    """The one SIGINT watcher of the process: the C-level signal handler of Python writes the
    signal number to the wakeup fd at once, even while the main thread is inside SQLite; the
    watcher thread reads it and interrupts every registered connection (an idle one ignores
    it: SQLite clears the flag when its next statement starts)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.conns = {}  # id -> connection, or weakref to it
        self.reader, writer = socket.socketpair()
        writer.setblocking(False)
        self.writer = writer
        # main thread only (ValueError elsewhere); the previous fd (an asyncio loop's) gets
        # every byte passed on
        self.previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        self.interrupted_at = 0.0
        self.self_refs = _self_refs()
        # Python's own SIGINT handler, when it is the default one, is wrapped (see _on_sigint)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _on_sigint)
        self.thread = threading.Thread(target=self.run, name="attnext-ctrl-c", daemon=True)
        self.thread.start()

    def add(self, conn):
        import sqlite3
        try:
            entry = weakref.ref(conn)
        except TypeError:  # sqlite3.Connection (CPython) has no weak references
            # held until dropped (sqlite3.Connection: its self references known) or closed
            entry = (conn, self.self_refs if type(conn) is sqlite3.Connection else -1)
        with self.lock:
            self.conns[id(conn)] = entry

    def live(self):
        """The registered connections; drops the closed and (sqlite3.Connection, which cannot
        be weakly referenced) those nothing else refers to, so that they are freed (and
        closed, their transaction rolled back) as they would have been without attnext, within
        the watcher's second."""
        out = []
        with self.lock:
            for key in list(self.conns):
                entry = self.conns[key]
                if isinstance(entry, weakref.ref):
                    conn = entry()
                    if conn is None:
                        del self.conns[key]
                        continue
                else:
                    conn, self_refs = entry
                    del entry
                    # references beyond the entry, `conn`, getrefcount's argument and the
                    # ones a connection holds to itself: none means the program dropped it
                    if sys.getrefcount(conn) - 3 <= self_refs:
                        del self.conns[key]
                        continue
                out.append(conn)
                conn = entry = None
        return out

    def run(self):
        self.reader.settimeout(1.0)
        while True:
            try:
                data = self.reader.recv(64)
            except socket.timeout:
                self.live()  # let go of dropped connections
                continue
            except OSError:
                return
            if not data:
                return
            if self.previous != -1:
                try:
                    os.write(self.previous, data)
                except OSError:
                    pass
            if signal.SIGINT in data:
                self.interrupted_at = time.monotonic()
                for conn in self.live():
                    try:
                        conn.interrupt()
                    except Exception:  # closed: let go of it
                        with self.lock:
                            self.conns.pop(id(conn), None)
                conn = None


def _on_sigint(signum, frame):
    """Python's default SIGINT handler (KeyboardInterrupt), less one case: the handler runs at
    the main thread's next bytecode, which may come only once the interrupted statement's
    error has reached the top level and is being printed (no frame); a KeyboardInterrupt
    raised there lost the printing of that error ("lost sys.stderr"). The error, "attn_fit:
    interrupted", already says what happened."""
    if frame is None and _ctrl_c is not None and time.monotonic() - _ctrl_c.interrupted_at < 5:
        return
    signal.default_int_handler(signum, frame)


_ctrl_c = None
_ctrl_c_lock = threading.Lock()


def interrupt_on_ctrl_c(conn):
    """Make Ctrl-C (SIGINT) interrupt whatever statement runs on conn (anything with
    interrupt(): sqlite3.Connection, apsw.Connection; a sqlite_utils.Database's .conn): the
    statement fails with "... interrupted", an attnext training saving nothing, and
    KeyboardInterrupt follows at the next line of Python that runs.
    The first call must come from the main thread (Python's signal.set_wakeup_fd); returns
    False where it cannot (another thread first), True otherwise."""
    global _ctrl_c
    conn = _unwrap(conn)
    if not hasattr(conn, "interrupt"):
        raise TypeError("attnext.interrupt_on_ctrl_c: %s has no interrupt()" % _describe(conn))
    with _ctrl_c_lock:
        if _ctrl_c is None:
            if threading.current_thread() is not threading.main_thread():
                return False
            _ctrl_c = _CtrlC()
    _ctrl_c.add(conn)
    return True
