#!/usr/bin/env python3
"""build_wheel.py -- writes the attnext wheel (a zip with the package, METADATA, WHEEL, RECORD)
without any build backend or network: `make wheel` runs it.

    build_wheel.py VERSION OUTDIR LIB [LIB...]

The libraries (attnext.so, attnext_cuda.so) go into the package directory next to
__init__.py. The tag is py3-none-linux_x86_64: the extension is no Python module, any Python 3
loads it, and it needs the glibc and OpenBLAS of a Debian 12 class system (not manylinux)."""
import base64
import hashlib
import os
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def main():
    version, outdir, libs = sys.argv[1], sys.argv[2], sys.argv[3:]
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    with open(os.path.join(HERE, "attnext", "__init__.py"), encoding="utf-8") as f:
        init = f.read().replace("@VERSION@", version)
    with open(os.path.join(ROOT, "LICENSE"), "rb") as f:
        license_text = f.read()
    dist_info = "attnext-%s.dist-info" % version
    metadata = "\n".join([
        "Metadata-Version: 2.1",
        "Name: attnext",
        "Version: " + version,
        "Summary: Attention-RNN text classifier inside SQLite (loadable extension)",
        "License: MIT",
        "Requires-Python: >=3.7",
        "Classifier: License :: OSI Approved :: MIT License",
        "Classifier: Operating System :: POSIX :: Linux",
        "Description-Content-Type: text/markdown",
        "", readme]).encode()
    wheel = ("Wheel-Version: 1.0\nGenerator: attnext build_wheel.py\nRoot-Is-Purelib: false\n"
             "Tag: py3-none-linux_x86_64\n").encode()
    files = [("attnext/__init__.py", init.encode())]
    for lib in libs:
        with open(lib, "rb") as f:
            files.append(("attnext/" + os.path.basename(lib), f.read()))
    files += [(dist_info + "/METADATA", metadata), (dist_info + "/WHEEL", wheel),
              (dist_info + "/LICENSE", license_text)]
    record = [record_line(n, d) for n, d in files] + [dist_info + "/RECORD,,"]
    files.append((dist_info + "/RECORD", ("\n".join(record) + "\n").encode()))
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, "attnext-%s-py3-none-linux_x86_64.whl" % version)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if name.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    print(path)


if __name__ == "__main__":
    main()
