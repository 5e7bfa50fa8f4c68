#!/usr/bin/env python3
"""build_wheel.py -- writes the attnext wheel (a zip with the package, METADATA, WHEEL, RECORD)
without any build backend or network: `make wheel` runs it.

    build_wheel.py VERSION OUTDIR LIB [LIB...]

The libraries (attnext.so and attnext_cuda.so, or attnext.dll) go into the package directory
next to __init__.py, with the OpenBLAS the x86-64 attnext.so links (and its libgfortran,
libquadmath) bundled beside it under names of their own, found through RUNPATH $ORIGIN
(bundle_libs.py, as auditwheel repairs a wheel): the wheel needs no OpenBLAS on the machine.
The extension is no Python module, any Python 3 loads it: the tag is py3-none-<platform>, the
platform the one bundle_libs.py finds (PEP 425, PEP 600): manylinux_2_X_x86_64 or
manylinux_2_X_aarch64, X the newest glibc symbol version a library of the wheel uses, or
win_amd64 (make PLATFORM=windows-x64 wheel). The wheel's name carries the tag;
OUTDIR/attnext.whl.name holds it for the Makefile and the tests."""
import base64
import hashlib
import os
import shutil
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.dirname(HERE))
from bundle_libs import bundle  # noqa: E402


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


# The Trove classifier of each platform tag's operating system.
OPERATING_SYSTEMS = {"manylinux": "POSIX :: Linux", "win": "Microsoft :: Windows"}


def main():
    version, outdir, libs = sys.argv[1], sys.argv[2], sys.argv[3:]
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    with open(os.path.join(HERE, "attnext", "__init__.py"), encoding="utf-8") as f:
        init = f.read().replace("@VERSION@", version)
    with open(os.path.join(ROOT, "LICENSE"), "rb") as f:
        license_text = f.read()
    dist_info = "attnext-%s.dist-info" % version
    stage = tempfile.mkdtemp()
    try:
        for lib in libs:
            shutil.copyfile(lib, os.path.join(stage, os.path.basename(lib)))
        platform, bundled = bundle(stage)
        files = [("attnext/__init__.py", init.encode())]
        for name in [os.path.basename(lib) for lib in libs] + bundled:
            with open(os.path.join(stage, name), "rb") as f:
                files.append(("attnext/" + name, f.read()))
    finally:
        shutil.rmtree(stage)
    operating_system = OPERATING_SYSTEMS[platform.split("_")[0]]
    metadata = "\n".join([
        "Metadata-Version: 2.1",
        "Name: attnext",
        "Version: " + version,
        "Summary: Attention-RNN text classifier inside SQLite (loadable extension)",
        "License: MIT",
        "Requires-Python: >=3.7",
        "Classifier: License :: OSI Approved :: MIT License",
        "Classifier: Operating System :: " + operating_system,
        "Description-Content-Type: text/markdown",
        "", readme]).encode()
    tag = "py3-none-" + platform
    wheel = ("Wheel-Version: 1.0\nGenerator: attnext build_wheel.py\nRoot-Is-Purelib: false\n"
             "Tag: %s\n" % tag).encode()
    files += [(dist_info + "/METADATA", metadata), (dist_info + "/WHEEL", wheel),
              (dist_info + "/LICENSE", license_text)]
    record = [record_line(n, d) for n, d in files] + [dist_info + "/RECORD,,"]
    files.append((dist_info + "/RECORD", ("\n".join(record) + "\n").encode()))
    os.makedirs(outdir, exist_ok=True)
    wheel_name = "attnext-%s-%s.whl" % (version, tag)
    for old in os.listdir(outdir):  # an earlier build's wheel with another tag
        if old.startswith("attnext-") and old.endswith(".whl") and old != wheel_name:
            os.remove(os.path.join(outdir, old))
    path = os.path.join(outdir, wheel_name)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if name.endswith((".so", ".dll")) else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    with open(os.path.join(outdir, "attnext.whl.name"), "w") as f:
        f.write(wheel_name + "\n")
    print(path)


if __name__ == "__main__":
    main()
