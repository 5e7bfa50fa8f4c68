"""attnext: an attention-RNN text classifier inside SQLite, as a loadable extension.

    import sqlite3, attnext
    conn = sqlite3.connect("news.db")
    attnext.load(conn)           # conn.enable_load_extension + load_extension
    conn.execute("SELECT attn_version()").fetchone()

The wheel carries attnext.so (and attnext_cuda.so when it was built with nvcc). It links
Debian's OpenBLAS (libopenblas0-pthread), which the wheel does not bundle.
"""
import os

__version__ = "@VERSION@"

_HERE = os.path.dirname(os.path.abspath(__file__))


def loadable_path():
    """The path of the extension without its suffix, as SQLite's load_extension wants it."""
    return os.path.join(_HERE, "attnext")


def load(conn):
    """Load the extension into a sqlite3.Connection (or anything with enable_load_extension and
    load_extension). Load-extension permission is switched back off afterwards."""
    if not hasattr(conn, "enable_load_extension"):
        raise RuntimeError("this Python's sqlite3 module was built without extension loading "
                           "(enable_load_extension is missing); Debian's python3 has it")
    conn.enable_load_extension(True)
    try:
        conn.load_extension(loadable_path())
    finally:
        conn.enable_load_extension(False)
