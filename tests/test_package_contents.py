"""test_package_contents.py -- the packages of the platform built ($PLATFORM: linux-x64 when
empty, linux-arm64, windows-x64), in $BUILD/dist (make packages; make PLATFORM=... packages),
hold what they must and say what they are:

- the wheel: its name's tag is the WHEEL file's (manylinux_2_X_x86_64 / _aarch64 with X the
  newest glibc symbol version its libraries use, read here with readelf; win_amd64), RECORD
  lists every file once with its SHA-256 and size, METADATA names the version and operating
  system; the extension (attnext/attnext.so or attnext.dll) is the platform's machine code and
  needs nothing but the system's libraries and what the wheel carries (the x86-64 build's
  OpenBLAS, renamed, with its license); attnext.loadable_path() names it with sys.platform set
  to the platform's, and says which wheel it is with another's;
- the deb (Linux): Architecture, Depends (libc6 >= the same glibc version; Debian's OpenBLAS
  exactly when the library links it), the library in /usr/lib/<multiarch>/ with its SONAME and
  no RUNPATH, md5sums of every file, the documents; lintian on a cross build's deb (the native
  one's is tests/test_package_deb.sh's); no deb for Windows;
- npm: the platform package (attnext-linux-x64, attnext-linux-arm64, attnext-windows-x64)
  with "os" and "cpu" and its library in lib/, the `attnext` package with the loader and every
  platform package as an optional dependency of its version; the loader, with process.platform
  and process.arch set to this platform's, finds the platform package, and names the platform
  or the package missing when it cannot;
- where this machine runs the platform's code (make test-linux-arm64: qemu-aarch64 and the
  arm64 sqlite3 shell; make test-windows-x64: wine and sqlite3.exe, $SQLITE3), the deb's (arm64)
  and the wheel's extension load into that shell and train and predict
  (tests/package_roundtrip.sql). The native packages' are loaded by test_package_deb.sh,
  test_package_wheel.sh and test_package_npm.sh.
"""
import base64
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import zipfile

BUILD = os.environ.get("BUILD", "build")
ATTNEXT = os.environ.get("ATTNEXT", "./attnext")
PLATFORM = os.environ.get("PLATFORM", "")
SQLITE3 = os.environ.get("SQLITE3", "sqlite3")
# platform -> what its packages are
TARGETS = {
    "linux-x64": dict(deb="amd64", multiarch="x86_64-linux-gnu", tag=r"manylinux_2_(\d+)_x86_64",
                      npm="attnext-linux-x64", key="linux-x64", sys_platform="linux",
                      lib="attnext.so", machine="x86_64", os="POSIX :: Linux"),
    "linux-arm64": dict(deb="arm64", multiarch="aarch64-linux-gnu",
                        tag=r"manylinux_2_(\d+)_aarch64", npm="attnext-linux-arm64",
                        key="linux-arm64", sys_platform="linux", lib="attnext.so",
                        machine="aarch64", os="POSIX :: Linux"),
    "windows-x64": dict(deb=None, tag=r"win_amd64", npm="attnext-windows-x64", key="win32-x64",
                        sys_platform="win32", lib="attnext.dll", machine="x86_64",
                        os="Microsoft :: Windows"),
}
# What a Linux extension may link without carrying it (manylinux), and a Windows DLL import.
LINUX_SYSTEM = {"libc.so.6", "libm.so.6", "libmvec.so.1", "libpthread.so.0", "libdl.so.2",
                "librt.so.1", "libgcc_s.so.1", "libstdc++.so.6", "ld-linux-x86-64.so.2",
                "ld-linux-aarch64.so.1"}
WINDOWS_SYSTEM = re.compile(r"(kernel32|user32|advapi32|ws2_32|ntdll|bcrypt|msvcrt|ucrtbase|"
                            r"api-ms-win-.*)\.dll$", re.I)
failures = []


def check(ok, what):
    print(("ok " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)
    return ok


def run(*args, **kw):
    return subprocess.run(args, capture_output=True, text=True, **kw)


def machine_of(path):
    """x86_64 or aarch64 (ELF), or x86_64 (a PE file for AMD64); None for anything else."""
    with open(path, "rb") as f:
        data = f.read(4096)
    if data[:4] == b"\x7fELF":
        return {62: "x86_64", 183: "aarch64"}.get(struct.unpack_from("<H", data, 18)[0])
    if data[:2] == b"MZ":
        pe = struct.unpack_from("<I", data, 0x3C)[0]
        if data[pe:pe + 4] == b"PE\0\0" and struct.unpack_from("<H", data, pe + 4)[0] == 0x8664:
            return "x86_64"
    return None


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def needed(path):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", run("readelf", "-dW", path).stdout)


def dynamic(path, tag):
    m = re.search(r"\(%s\)\s+\S+ \S+: \[([^\]]+)\]" % tag, run("readelf", "-dW", path).stdout)
    return m.group(1) if m else None


def glibc_max(paths):
    found = []
    for p in paths:
        found += re.findall(r"@GLIBC_([0-9]+)\.([0-9]+)", run("readelf", "--dyn-syms", "-W", p).stdout)
    return max(((int(a), int(b)) for a, b in found), default=(2, 17))


def check_elf_closure(directory, files, what):
    """Every library each ELF file needs is the system's or a file of directory."""
    here = set(os.listdir(directory))
    missing = ["%s: %s" % (os.path.basename(f), n) for f in files for n in needed(f)
               if n not in LINUX_SYSTEM and n not in here]
    check(not missing, "%s: every library needed is the system's or carried (%s)%s"
          % (what, ", ".join(sorted({n for f in files for n in needed(f)})),
             "" if not missing else "; missing: " + ", ".join(missing)))
    bundled = sorted(n for n in here if re.match(r"lib.*-[0-9a-f]{8}\.so", n))
    for name in bundled:
        package = {"libopenblas": "libopenblas0-pthread"}.get(name.split("-")[0])
        if package:
            check(os.path.isfile(os.path.join(directory, "licenses", package + ".txt")),
                  "%s: %s carried with its license (licenses/%s.txt)" % (what, name, package))
    return bundled


def check_windows_dll(path, what):
    tool = "objdump" if shutil.which("objdump") else "x86_64-w64-mingw32-objdump"
    out = run(tool, "-p", path).stdout
    imports = re.findall(r"^\s*DLL Name:\s*(\S+)", out, re.M)
    foreign = [d for d in imports if not WINDOWS_SYSTEM.match(d)]
    check(imports and not foreign, "%s: imports Windows' own DLLs only (%s)%s"
          % (what, ", ".join(imports), "; not Windows': " + ", ".join(foreign) if foreign else ""))
    exports = re.findall(r"^\s*\[\s*\d+\]\s+(\S+)$", out.split("Ordinal/Name Pointer")[-1], re.M)
    check(exports == ["sqlite3_attnext_init"], "%s: exports sqlite3_attnext_init alone (%s)"
          % (what, ", ".join(exports)))


def record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def check_wheel(t, version, dist, tmp):
    name_file = os.path.join(dist, "attnext.whl.name")
    name = open(name_file).read().strip() if os.path.exists(name_file) else ""
    wheel = os.path.join(dist, name)
    if not check(name and os.path.isfile(wheel), "the wheel %s is in %s" % (name or "(none)", dist)):
        return None
    m = re.fullmatch(r"attnext-%s-py3-none-(%s)\.whl" % (re.escape(version), t["tag"]), name)
    check(m, "the wheel's name %s: version %s, a py3-none-%s tag" % (name, version, t["tag"].replace(r"(\d+)", "X")))
    tag = m.group(1) if m else ""
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        data = {n: z.read(n) for n in names}
        z.extractall(os.path.join(tmp, "wheel"))
    info = "attnext-%s.dist-info" % version
    wheel_meta = data.get(info + "/WHEEL", b"").decode()
    check("Tag: py3-none-%s\n" % tag in wheel_meta and "Root-Is-Purelib: false" in wheel_meta,
          "WHEEL: Tag py3-none-%s, Root-Is-Purelib false" % tag)
    metadata = data.get(info + "/METADATA", b"").decode()
    check("Name: attnext\n" in metadata and "Version: %s\n" % version in metadata
          and "Classifier: Operating System :: %s\n" % t["os"] in metadata,
          "METADATA: Name attnext, Version %s, Operating System :: %s" % (version, t["os"]))
    # RECORD: every file once, with its hash and size; RECORD itself without
    rows = [line.rsplit(",", 2) for line in data.get(info + "/RECORD", b"").decode().splitlines()]
    listed = [r[0] for r in rows]
    bad = [r[0] for r in rows if r[0] != info + "/RECORD" and
           (r[0] not in data or r[1] != record_hash(data[r[0]]) or r[2] != str(len(data[r[0]])))]
    check(sorted(listed) == sorted(names) and len(set(listed)) == len(listed),
          "RECORD lists each of the %d files once" % len(names))
    check(not bad and [info + "/RECORD", "", ""] in rows,
          "RECORD: the SHA-256 and size of every file match%s" % (" (not: %s)" % bad if bad else ""))
    package = os.path.join(tmp, "wheel", "attnext")
    lib = os.path.join(package, t["lib"])
    other = "attnext.so" if t["lib"] == "attnext.dll" else "attnext.dll"
    if not check(os.path.isfile(lib) and not os.path.exists(os.path.join(package, other)),
                 "the wheel holds attnext/%s (and no %s)" % (t["lib"], other)):
        return None
    check(machine_of(lib) == t["machine"], "attnext/%s is %s code (%s)"
          % (t["lib"], t["machine"], machine_of(lib)))
    if t["lib"] == "attnext.so":
        elves = [os.path.join(package, n) for n in sorted(os.listdir(package))
                 if os.path.isfile(os.path.join(package, n)) and is_elf(os.path.join(package, n))]
        major, minor = glibc_max(elves)
        check(m and int(m.group(2)) == minor and major == 2,
              "the tag's glibc 2.%s is the newest its libraries use (GLIBC_%d.%d)"
              % (m.group(2) if m else "?", major, minor))
        bundled = check_elf_closure(package, elves, "wheel")
        runpath = dynamic(lib, "RUNPATH")
        check(runpath == ("$ORIGIN" if bundled else None), "attnext.so: RUNPATH %s (%s carried)"
              % (runpath, ", ".join(bundled) or "nothing"))
        if t["machine"] == "aarch64":
            check(not bundled and "libopenblas.so.0" not in needed(lib),
                  "arm64: built without BLAS, no OpenBLAS linked or carried")
    else:
        check_windows_dll(lib, "wheel's attnext.dll")
    # the loader names the platform's file, and says which wheel it is on another platform
    probe = ("import os, signal, socket, threading, time, weakref, sys\n"
             "sys.platform = sys.argv[2]\nsys.path.insert(0, sys.argv[1])\nimport attnext\n"
             "try:\n    print(attnext.loadable_path())\n"
             "except RuntimeError as e:\n    print('RuntimeError: %s' % e)\n")
    here = run("/usr/bin/python3", "-c", probe, os.path.join(tmp, "wheel"), t["sys_platform"]).stdout.strip()
    check(here == os.path.join(package, "attnext"), "attnext.loadable_path() with sys.platform %s: %s"
          % (t["sys_platform"], here))
    elsewhere = "linux" if t["sys_platform"] == "win32" else "win32"
    there = run("/usr/bin/python3", "-c", probe, os.path.join(tmp, "wheel"), elsewhere).stdout.strip()
    check(there.startswith("RuntimeError: attnext: no ") and t["lib"] in there,
          "with sys.platform %s, an error that names what the wheel holds: %s" % (elsewhere, there))
    return lib


def check_deb(t, version, dist, tmp):
    debs = sorted(f for f in os.listdir(dist) if f.endswith(".deb"))
    if not t["deb"]:
        check(not debs, "no Debian package for this platform (%s)" % (", ".join(debs) or "none"))
        return None
    name = "attnext_%s_%s.deb" % (version, t["deb"])
    deb = os.path.join(dist, name)
    if not check(os.path.isfile(deb), "the deb %s is in %s" % (name, dist)):
        return None
    field = lambda f: run("dpkg-deb", "-f", deb, f).stdout.strip()
    check(field("Package") == "attnext" and field("Version") == version,
          "control: Package attnext, Version %s" % version)
    check(field("Architecture") == t["deb"], "control: Architecture %s (%s)" % (t["deb"], field("Architecture")))
    root = os.path.join(tmp, "deb")
    run("dpkg-deb", "-x", deb, root)
    libdir = os.path.join(root, "usr/lib", t["multiarch"])
    lib = os.path.join(libdir, "attnext.so")
    if not check(os.path.isfile(lib), "/usr/lib/%s/attnext.so" % t["multiarch"]):
        return None
    libs = [os.path.join(libdir, n) for n in sorted(os.listdir(libdir))]
    check(all(machine_of(p) == t["machine"] for p in libs), "%s: %s code" % (
        ", ".join(os.path.basename(p) for p in libs), t["machine"]))
    check(all(dynamic(p, "SONAME") == os.path.basename(p) and dynamic(p, "RUNPATH") is None
              for p in libs), "each library has its file name as SONAME, no RUNPATH")
    major, minor = glibc_max(libs)
    depends = [d.strip() for d in field("Depends").split(",")]
    links_blas = any("libopenblas.so.0" in needed(p) for p in libs)
    check("libc6 (>= %d.%d)" % (major, minor) in depends, "Depends: libc6 (>= %d.%d), the newest "
          "glibc its libraries use (%s)" % (major, minor, ", ".join(depends)))
    check(("libopenblas0-pthread" in depends) == links_blas and
          any(d.startswith("libsqlite3-0") for d in depends),
          "Depends: libsqlite3-0, and OpenBLAS %s (the library %s libopenblas.so.0)"
          % ("too" if links_blas else "not", "links" if links_blas else "does not link"))
    files = sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)
    control = os.path.join(tmp, "control")
    run("dpkg-deb", "-e", deb, control)
    sums = {}
    for line in open(os.path.join(control, "md5sums")).read().splitlines():
        digest, path = line.split(None, 1)
        sums[path] = digest
    check(sorted(sums) == files and all(
        hashlib.md5(open(os.path.join(root, p), "rb").read()).hexdigest() == sums[p] for p in files),
        "md5sums: the %d files, each one's digest" % len(files))
    doc = "usr/share/doc/attnext/"
    check(all(doc + f in files for f in ("README.md", "copyright", "changelog.gz", "ext/CLIENTS.md")),
          "the documents, copyright and changelog in /" + doc)
    if t["deb"] != "amd64":
        if shutil.which("lintian"):
            out = run("lintian", "--allow-root", "--fail-on", "none", deb).stdout
            for line in out.splitlines():
                print("  lintian: " + line)
            errors = [line for line in out.splitlines() if line.startswith("E:")]
            check(not errors, "lintian: %d errors, %d warnings"
                  % (len(errors), len(re.findall(r"^W:", out, re.M))))
        else:
            check(False, "lintian not found (tests/deps.sh installs it)")
    return lib


def npm_read(tgz):
    with tarfile.open(tgz) as t:
        names = sorted(t.getnames())
        meta = json.load(t.extractfile("package/package.json"))
    return names, meta


def check_npm(t, version, dist, tmp):
    main = os.path.join(dist, "attnext-%s.tgz" % version)
    plat = os.path.join(dist, "%s-%s.tgz" % (t["npm"], version))
    if not (check(os.path.isfile(plat), "the platform package %s is in %s" % (os.path.basename(plat), dist))
            & check(os.path.isfile(main), "the package attnext-%s.tgz is in %s" % (version, dist))):
        return None
    names, meta = npm_read(plat)
    os_, cpu = t["key"].split("-")
    check(meta.get("name") == t["npm"] and meta.get("version") == version,
          "%s: name %s, version %s" % (os.path.basename(plat), meta.get("name"), meta.get("version")))
    check(meta.get("os") == [os_] and meta.get("cpu") == [cpu],
          "%s: os %s, cpu %s" % (t["npm"], meta.get("os"), meta.get("cpu")))
    check("package/lib/" + t["lib"] in names and "package/LICENSE" in names and
          "package/index.js" not in names and meta.get("files") == ["lib/", "README.md", "LICENSE"],
          "%s: lib/%s, LICENSE, files [lib/, README.md, LICENSE], no loader" % (t["npm"], t["lib"]))
    names_main, meta_main = npm_read(main)
    modules = os.path.join(tmp, "npm", "node_modules")
    for tgz, dest in ((plat, t["npm"]), (main, "attnext")):
        with tarfile.open(tgz) as tf:
            tf.extractall(os.path.join(tmp, "npm", dest))
        os.makedirs(modules, exist_ok=True)
        os.rename(os.path.join(tmp, "npm", dest, "package"), os.path.join(modules, dest))
    lib_dir = os.path.join(modules, t["npm"], "lib")
    lib = os.path.join(lib_dir, t["lib"])
    check(machine_of(lib) == t["machine"], "%s: lib/%s is %s code" % (t["npm"], t["lib"], t["machine"]))
    if t["lib"] == "attnext.so":
        elves = [os.path.join(lib_dir, n) for n in os.listdir(lib_dir)
                 if os.path.isfile(os.path.join(lib_dir, n)) and is_elf(os.path.join(lib_dir, n))]
        check_elf_closure(lib_dir, elves, t["npm"])
    else:
        check_windows_dll(lib, t["npm"] + "'s attnext.dll")
    table = json.loads(run("node", "-e", "process.stdout.write(JSON.stringify(require(process.argv[1]).PLATFORMS))",
                           os.path.join(modules, "attnext")).stdout or "{}")
    check(table.get(t["key"]) == {"package": t["npm"], "file": t["lib"]},
          "the loader's PLATFORMS: %s -> %s, lib/%s" % (t["key"], t["npm"], t["lib"]))
    want = {e["package"]: version for e in table.values()}
    check(meta_main.get("name") == "attnext" and meta_main.get("version") == version and
          meta_main.get("optionalDependencies") == want and len(want) >= 3,
          "attnext: version %s, optionalDependencies %s" % (meta_main.get("version"),
                                                             meta_main.get("optionalDependencies")))
    check("os" not in meta_main and "cpu" not in meta_main and
          not any(n.startswith("package/lib/") for n in names_main) and
          {"package/index.js", "package/index.d.ts", "package/LICENSE"} <= set(names_main),
          "attnext: index.js, index.d.ts, LICENSE, no library, no os/cpu (it installs anywhere)")
    # the loader as it runs on each platform: process.platform and process.arch set
    probe = ("const [plat, arch] = process.argv.slice(1);\n"
             "Object.defineProperty(process, 'platform', { value: plat });\n"
             "Object.defineProperty(process, 'arch', { value: arch });\n"
             "try { console.log(require('attnext').getLoadablePath()); }\n"
             "catch (e) { console.log('Error: ' + e.message); }\n")
    def loader(key):
        return run("node", "-e", probe, *key.split("-"), cwd=os.path.join(tmp, "npm")).stdout.strip()
    got = loader(t["key"])
    check(got == os.path.join(os.path.realpath(modules), t["npm"], "lib", "attnext"),
          "getLoadablePath() on %s: %s" % (t["key"], got))
    got = loader("darwin-arm64")
    check(got.startswith("Error: attnext: no build for this platform, darwin-arm64") and
          t["key"] in got, "on darwin-arm64: %s" % got)
    absent = next(k for k in sorted(table) if k != t["key"])
    got = loader(absent)
    check(got.startswith("Error: attnext: the package %s" % table[absent]["package"]) and
          "npm install " + table[absent]["package"] in got,
          "on %s, its package not installed: %s" % (absent, got))
    return lib


def roundtrip(lib, what):
    """Loads lib (without its suffix) into $SQLITE3 and trains and predicts."""
    with open("tests/package_roundtrip.sql") as f:
        sql = f.read()
    out = subprocess.run(shlex.split(SQLITE3) + [":memory:", "-cmd", ".load " + os.path.splitext(lib)[0]],
                         input=sql, capture_output=True, text=True, timeout=600)
    text = (out.stdout + out.stderr).strip()
    check("roundtrip sports tech" in text, "%s loads into %s, trains, predicts: %s"
          % (what, os.path.basename(shlex.split(SQLITE3)[-1]), text.splitlines()[-1] if text else "(nothing)"))


def main():
    target = PLATFORM or {"x86_64": "linux-x64"}.get(platform.machine(), "")
    if target not in TARGETS:
        print("no packages for %s (PLATFORM=%s)" % (platform.machine(), PLATFORM))
        return 77
    if not PLATFORM and ATTNEXT != "./attnext":
        print("packages carry the default build (ATTNEXT=%s)" % ATTNEXT)
        return 77
    for tool in ("readelf", "dpkg-deb", "node"):
        if not shutil.which(tool):
            print("FAIL %s not found" % tool)
            return 1
    t = TARGETS[target]
    with open("engine/version.c") as f:
        version = re.search(r'#define NN_VERSION "(.*)"', f.read()).group(1)
    dist = os.path.join(BUILD, "dist")
    if not os.path.isdir(dist):
        print("FAIL no %s (make%s packages)" % (dist, " PLATFORM=" + PLATFORM if PLATFORM else ""))
        return 1
    print("the %s packages of %s, version %s" % (target, dist, version))
    tmp = tempfile.mkdtemp()
    try:
        wheel_lib = check_wheel(t, version, dist, tmp)
        deb_lib = check_deb(t, version, dist, tmp)
        npm_lib = check_npm(t, version, dist, tmp)
        if wheel_lib and npm_lib:
            same = open(wheel_lib, "rb").read() == open(npm_lib, "rb").read()
            check(same, "the npm package's lib/%s is the wheel's, byte for byte" % t["lib"])
        if not PLATFORM:
            print("ok the native packages are loaded by test_package_deb, test_package_wheel, "
                  "test_package_npm")
        else:
            # the shell of the platform ($SQLITE3: under qemu or wine)
            for lib, what in ((deb_lib, "the deb's attnext.so"), (wheel_lib, "the wheel's " + t["lib"])):
                if lib:
                    roundtrip(lib, what)
    finally:
        shutil.rmtree(tmp)
    print("%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
