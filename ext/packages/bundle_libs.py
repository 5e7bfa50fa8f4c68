#!/usr/bin/env python3
"""bundle_libs.py -- makes the attnext.so of a package directory self-contained, the way
auditwheel repairs a wheel: every shared library it needs beyond glibc and the compiler's
runtime (OpenBLAS, and OpenBLAS's libgfortran and libquadmath) is copied beside it under a
name of its own (libopenblas-<hash>.so.0: never confused with, nor interposed by, a system
OpenBLAS loaded in the same process), its SONAME and every NEEDED entry naming it rewritten
(patchelf), and RUNPATH $ORIGIN set so that the copies are found from wherever the directory
is unpacked. The libraries are stripped of their debugging symbols. The license of each
bundled library (its Debian package's copyright file) goes to DIR/licenses/<package>.txt.

    bundle_libs.py DIR        # DIR holds attnext.so (and attnext_cuda.so); prints the tag

It prints the platform tag the directory needs, manylinux_2_X_x86_64 (PEP 600) with X the
newest glibc symbol version that attnext.so or a bundled library uses; build_wheel.py imports
it, ext/packages/node/build.sh runs it.

attnext_cuda.so is left as built: it links the CUDA runtime statically and opens cuBLAS with
dlopen only where a GPU is used, from the system's CUDA (its RUNPATH).
"""
import hashlib
import os
import re
import shutil
import subprocess
import sys

# What every glibc system has (PEP 600 / auditwheel's manylinux policies), never bundled.
SYSTEM = {"libc.so.6", "libm.so.6", "libmvec.so.1", "libpthread.so.0", "libdl.so.2",
          "librt.so.1", "libutil.so.1", "libresolv.so.2", "libnsl.so.1", "libanl.so.1",
          "libgcc_s.so.1", "libstdc++.so.6", "ld-linux-x86-64.so.2", "linux-vdso.so.1"}


def run(*args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def needed(path):
    return re.findall(r"^\s*NEEDED\s+(\S+)", run("objdump", "-p", path), re.M)


def glibc_max(path):
    found = re.findall(r"GLIBC_([0-9]+)\.([0-9]+)", run("objdump", "-T", path))
    return max(((int(a), int(b)) for a, b in found), default=(2, 17))


def resolve(path):
    """soname -> real path of every library path needs (ldd), recursively."""
    out = {}
    for line in run("ldd", path).splitlines():
        m = re.match(r"\s*(\S+)\s+=>\s+(/\S+)", line)
        if m:
            out[m.group(1)] = os.path.realpath(m.group(2))
        elif "not found" in line:
            raise SystemExit("bundle_libs: %s: %s" % (path, line.strip()))
    return out


def copy_license(real, licenses):
    """The copyright file of the Debian package that holds real, as licenses/<package>.txt."""
    owner = subprocess.run(["dpkg", "-S", real], capture_output=True, text=True).stdout
    package = owner.split(":")[0].strip() if owner else ""
    source = "/usr/share/doc/%s/copyright" % package
    if not package or not os.path.isfile(source):
        raise SystemExit("bundle_libs: no license found for %s (dpkg -S: %r)" % (real, owner))
    os.makedirs(licenses, exist_ok=True)
    shutil.copyfile(source, os.path.join(licenses, package + ".txt"))


def bundle(directory, main="attnext.so"):
    """Bundle the libraries of directory/main; returns (tag, [bundled file names]), the names
    relative to directory (licenses/ included)."""
    if not shutil.which("patchelf"):
        raise SystemExit("bundle_libs: patchelf not found (Debian: apt-get install patchelf)")
    target = os.path.join(directory, main)
    deps = {name: real for name, real in resolve(target).items() if name not in SYSTEM}
    renamed = {}
    for name, real in sorted(deps.items()):
        with open(real, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()[:8]
        stem, _, rest = name.partition(".so")
        renamed[name] = "%s-%s.so%s" % (stem, digest, rest)
    files = [target]
    for name, real in sorted(deps.items()):
        copy = os.path.join(directory, renamed[name])
        shutil.copyfile(real, copy)
        os.chmod(copy, 0o644)
        run("patchelf", "--set-soname", renamed[name], copy)
        files.append(copy)
        copy_license(real, os.path.join(directory, "licenses"))
    for path in files:
        run("strip", "--strip-unneeded", "--remove-section=.comment", path)
        for old in needed(path):
            if old in renamed:
                run("patchelf", "--replace-needed", old, renamed[old], path)
        run("patchelf", "--set-rpath", "$ORIGIN", path)
    # every non-system library now resolves inside the directory
    for path in files:
        for name, real in resolve(path).items():
            if name not in SYSTEM and os.path.dirname(real) != os.path.realpath(directory):
                raise SystemExit("bundle_libs: %s still needs %s from %s" % (path, name, real))
    major, minor = max(glibc_max(p) for p in files)
    extra = [os.path.basename(p) for p in files[1:]]
    if os.path.isdir(os.path.join(directory, "licenses")):
        extra += ["licenses/" + n for n in sorted(os.listdir(os.path.join(directory, "licenses")))]
    return "manylinux_%d_%d_x86_64" % (major, minor), extra


if __name__ == "__main__":
    tag, libs = bundle(sys.argv[1])
    print(tag)
