#!/usr/bin/env python3
"""bundle_libs.py -- makes the extension of a package directory self-contained, the way
auditwheel repairs a wheel, and says which platform the directory is for.

Linux (attnext.so, x86-64 or arm64): every shared library it needs beyond glibc and the
compiler's runtime (OpenBLAS, and OpenBLAS's libgfortran and libquadmath, on x86-64; nothing on
arm64, built without BLAS) is copied beside it under a name of its own
(libopenblas-<hash>.so.0: never confused with, nor interposed by, a system OpenBLAS loaded in
the same process), its SONAME and every NEEDED entry naming it rewritten (patchelf), and
RUNPATH $ORIGIN set so that the copies are found from wherever the directory is unpacked. The
libraries are stripped of their debugging symbols. The license of each bundled library (its
Debian package's copyright file) goes to DIR/licenses/<package>.txt. The ELF files are read
with readelf, which reads any architecture's: a cross build (make PLATFORM=linux-arm64) is
bundled on the machine that built it.

Windows (attnext.dll, make PLATFORM=windows-x64): nothing to bundle (the DLL links libgcc and
winpthreads statically); it is checked to import only Windows' own DLLs, and stripped.

    bundle_libs.py DIR        # DIR holds attnext.so (and attnext_cuda.so) or attnext.dll;
                              # prints the platform tag

The tag (PEP 425 / PEP 600): manylinux_2_X_<arch> with X the newest glibc symbol version that
a library of the directory uses and <arch> from its ELF header (x86_64, aarch64), or win_amd64.
build_wheel.py imports it, ext/packages/node/build.sh and debian/build.sh run it.

attnext_cuda.so is left as built: it links the CUDA runtime statically and opens cuBLAS with
dlopen only where a GPU is used, from the system's CUDA (its RUNPATH).
"""
import hashlib
import os
import platform
import re
import shutil
import struct
import subprocess
import sys

# What every glibc system has (PEP 600 / auditwheel's manylinux policies), never bundled.
SYSTEM = {"libc.so.6", "libm.so.6", "libmvec.so.1", "libpthread.so.0", "libdl.so.2",
          "librt.so.1", "libutil.so.1", "libresolv.so.2", "libnsl.so.1", "libanl.so.1",
          "libgcc_s.so.1", "libstdc++.so.6", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1",
          "linux-vdso.so.1"}
# ELF e_machine -> the architecture's name in wheel tags (and uname -m)
ELF_MACHINES = {62: "x86_64", 183: "aarch64"}
# What a Windows DLL may import: Windows' own DLLs and its C runtime (mingw-w64 links msvcrt).
WINDOWS_SYSTEM = re.compile(r"(kernel32|user32|advapi32|ws2_32|ntdll|bcrypt|msvcrt|ucrtbase|"
                            r"api-ms-win-.*)\.dll$", re.I)


def run(*args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def elf_machine(path):
    """The architecture of an ELF file (x86_64, aarch64), from its header."""
    with open(path, "rb") as f:
        head = f.read(20)
    if head[:4] != b"\x7fELF" or head[5] != 1:
        raise SystemExit("bundle_libs: %s is not a little-endian ELF file" % path)
    machine = struct.unpack_from("<H", head, 18)[0]
    if machine not in ELF_MACHINES:
        raise SystemExit("bundle_libs: %s: ELF machine %d, not one of %s"
                         % (path, machine, ", ".join(ELF_MACHINES.values())))
    return ELF_MACHINES[machine]


def needed(path):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", run("readelf", "-dW", path))


def glibc_max(path):
    found = re.findall(r"@GLIBC_([0-9]+)\.([0-9]+)", run("readelf", "--dyn-syms", "-W", path))
    return max(((int(a), int(b)) for a, b in found), default=(2, 17))


def strip_tool(machine):
    """The strip that reads machine's files: $STRIP, the host's own, or the cross binutils'."""
    if os.environ.get("STRIP"):
        return os.environ["STRIP"]
    return "strip" if machine == platform.machine() else machine + "-linux-gnu-strip"


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


def pe_imports(path):
    """The DLLs a Windows DLL imports (objdump reads PE files on an x86-64 host, as
    x86_64-w64-mingw32-objdump does)."""
    tool = "objdump" if shutil.which("objdump") else "x86_64-w64-mingw32-objdump"
    return re.findall(r"^\s*DLL Name:\s*(\S+)", run(tool, "-p", path), re.M)


def pe_machine(path):
    with open(path, "rb") as f:
        data = f.read(4096)
    if data[:2] != b"MZ":
        raise SystemExit("bundle_libs: %s is not a Windows DLL" % path)
    pe = struct.unpack_from("<I", data, 0x3C)[0]
    if data[pe:pe + 4] != b"PE\0\0":
        raise SystemExit("bundle_libs: %s has no PE header" % path)
    return struct.unpack_from("<H", data, pe + 4)[0]


def bundle_dll(directory, main):
    target = os.path.join(directory, main)
    if pe_machine(target) != 0x8664:
        raise SystemExit("bundle_libs: %s is not an x86-64 (AMD64) DLL" % target)
    foreign = [d for d in pe_imports(target) if not WINDOWS_SYSTEM.match(d)]
    if foreign:
        raise SystemExit("bundle_libs: %s imports %s, which Windows does not have: link it "
                         "statically (the Makefile's PLATFORM=windows-x64 does)"
                         % (target, ", ".join(foreign)))
    # strip writes a PE header with the time it ran, unless SOURCE_DATE_EPOCH says which: the
    # wheel's file dates (build_wheel.py), so that the same DLL makes the same packages
    env = dict(os.environ, SOURCE_DATE_EPOCH=os.environ.get("SOURCE_DATE_EPOCH", "1767225600"))
    subprocess.run([os.environ.get("STRIP") or "x86_64-w64-mingw32-strip", "--strip-unneeded",
                    target], check=True, capture_output=True, env=env)
    return "win_amd64", []


def bundle(directory, main=None):
    """Bundle the libraries of directory/main (attnext.so, or attnext.dll: the one there when
    main is None); returns (tag, [bundled file names]), the names relative to directory
    (licenses/ included)."""
    if main is None:
        main = "attnext.dll" if os.path.exists(os.path.join(directory, "attnext.dll")) \
            else "attnext.so"
    if main.endswith(".dll"):
        return bundle_dll(directory, main)
    if not shutil.which("patchelf"):
        raise SystemExit("bundle_libs: patchelf not found (Debian: apt-get install patchelf)")
    target = os.path.join(directory, main)
    machine = elf_machine(target)
    others = [os.path.join(directory, n) for n in sorted(os.listdir(directory))
              if n.endswith(".so") and n != main]
    for path in others:  # attnext_cuda.so: built for the same machine
        if elf_machine(path) != machine:
            raise SystemExit("bundle_libs: %s is for %s, %s for %s"
                             % (path, elf_machine(path), target, machine))
    deps = {}
    if any(n not in SYSTEM for n in needed(target)):
        # ldd runs the host's loader: it resolves only the host's own architecture
        if machine != platform.machine():
            raise SystemExit("bundle_libs: %s (%s) needs %s: bundling the libraries of another "
                             "architecture is not supported" % (target, machine, ", ".join(
                                 n for n in needed(target) if n not in SYSTEM)))
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
    strip = strip_tool(machine)
    for path in files:
        run(strip, "--strip-unneeded", "--remove-section=.comment", path)
        if deps:
            for old in needed(path):
                if old in renamed:
                    run("patchelf", "--replace-needed", old, renamed[old], path)
            run("patchelf", "--set-rpath", "$ORIGIN", path)
    # every library a file needs is now the system's or inside the directory
    inside = set(renamed.values())
    for path in files:
        for name in needed(path):
            if name not in SYSTEM and name not in inside:
                raise SystemExit("bundle_libs: %s still needs %s" % (path, name))
        if machine == platform.machine():  # and the host's loader finds them there
            for name, real in resolve(path).items():
                if name not in SYSTEM and os.path.dirname(real) != os.path.realpath(directory):
                    raise SystemExit("bundle_libs: %s still needs %s from %s"
                                     % (path, name, real))
    major, minor = max(glibc_max(p) for p in files + others)
    extra = [os.path.basename(p) for p in files[1:]]
    if os.path.isdir(os.path.join(directory, "licenses")):
        extra += ["licenses/" + n for n in sorted(os.listdir(os.path.join(directory, "licenses")))]
    return "manylinux_%d_%d_%s" % (major, minor, machine), extra


if __name__ == "__main__":
    tag, libs = bundle(sys.argv[1])
    print(tag)
