#!/usr/bin/env python3
"""The GPU carry bundle: what scripts/gpu_check.sh runs on a bare GPU machine, gathered from a build.

  gpu_bundle.py make  BUILD_DIR OUT_DIR     gather the programs, the suite's test programs and every shared
                                            library they need that the GPU machine lacks; strip; RUNPATH
  gpu_bundle.py check BUNDLE_DIR [--chroot] every ELF resolves each library it needs inside the bundle or on
                                            the allow-list; size within the cap; the bundled artune runs
                                            (--chroot: inside a root holding only glibc and the allow-list)
  gpu_bundle.py tests BUNDLE_DIR SRC_DIR [--jobs N] [--list] [--only NAME,…] [--skip NAME,…] [--logs DIR]
                                            run the bundled suite (meson's own test definitions, paths
                                            rewritten) from a scratch copy, print one line per test and a
                                            closing count; the bundle itself is never written

The GPU machine is bare (no Debian packages): it has glibc, libstdc++, the NVIDIA driver (libcuda), CUDA 13 and
NCCL from the nvidia-nccl wheel. Everything else a program needs travels in lib/. libstdc++ and libgcc_s also travel
in lib/fallback/, which is not on any RUNPATH: gpu_check.sh puts it on LD_LIBRARY_PATH only if the machine's own
libstdc++ turns out older than the build's (a GLIBCXX_ version missing).

Layout of a bundle:
  bin/        artune, nccl-plugin-probe, bench_cuda_kernels      RUNPATH $ORIGIN/../lib
  lib/        libnccl-tuner-artune.so and the dependency closure  RUNPATH $ORIGIN
  lib/hwloc/  hwloc's PCI plugin (HWLOC_PLUGINS_PATH)             RUNPATH $ORIGIN/..
  lib/fallback/  libstdc++.so.6, libgcc_s.so.1
  tests.tar.xz   the suite's test programs (tests/…, RUNPATH $ORIGIN/../lib), compressed: they share most of
                 their code, so xz keeps the folder under the cap; `tests` unpacks it into a scratch folder
  manifest.json  every test of the suite: how to run it from the bundle, or why it is not bundled
  BUNDLE.txt     commit, build options, sizes, the newest glibc/libstdc++ symbol versions needed
"""

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

CAP_BYTES = 60 << 20

# Libraries the GPU machine provides: glibc, the C++ runtime, the NVIDIA driver, NCCL (the wheel's).
ALLOWED = {
    "linux-vdso.so.1", "ld-linux-x86-64.so.2", "libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0",
    "librt.so.1", "libutil.so.1", "libresolv.so.2",
    "libstdc++.so.6", "libgcc_s.so.1",
    "libcuda.so.1",
    "libnccl.so.2",
}
# The C++ runtime also travels, off the RUNPATH, for a machine whose own is older than the build's.
FALLBACK = ("libstdc++.so.6", "libgcc_s.so.1")
# Programs gpu_check.sh runs (build-relative path -> bundle folder).
PROGRAMS = {
    "cli/artune": "bin",
    "nccl_tuner/nccl-plugin-probe": "bin",
    "bench/bench_cuda_kernels": "bin",
    "nccl_tuner/libnccl-tuner-artune.so": "lib",
}
# hwloc plugins that travel (lib/hwloc/): PCI discovery.
HWLOC_PLUGINS = ("hwloc_pci.so",)
# Sanitizer runtimes: test programs that need one are sanitizer builds of host code, left out.
SANITIZER_LIBS = ("libasan.so", "libubsan.so", "libtsan.so", "liblsan.so")


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def is_elf(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def needed(path):
    """DT_NEEDED names of an ELF file."""
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", run(["readelf", "-d", path]))


def runpath(path):
    m = re.search(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[([^\]]*)\]", run(["readelf", "-d", path]))
    return m.group(1) if m else ""


def resolved(path):
    """name -> file of every shared library the loader finds for `path` on this machine (ldd)."""
    out = {}
    for line in run(["ldd", path]).splitlines():
        m = re.match(r"\s*(\S+) => (/\S+)", line)
        if m:
            out[m.group(1)] = m.group(2)
        elif "not found" in line:
            raise SystemExit(f"gpu_bundle: {path}: {line.strip()}")
    return out


def install_elf(src, dst, rpath):
    shutil.copyfile(src, dst)
    os.chmod(dst, 0o755)
    subprocess.run(["strip", "--strip-unneeded", dst], check=True)
    subprocess.run(["patchelf", "--set-rpath", rpath, dst], check=True)


def introspect_tests(build):
    return json.loads(run(["meson", "introspect", "--tests", build]))


def make(build, out):
    build = os.path.realpath(build)
    src = os.path.realpath(os.path.join(os.path.dirname(__file__), ".."))
    if os.path.lexists(out) and not os.path.isdir(out):
        raise SystemExit(f"gpu_bundle: {out} exists and is not a folder")
    if os.path.isdir(out):
        if not os.path.exists(os.path.join(out, "manifest.json")) and os.listdir(out):
            raise SystemExit(f"gpu_bundle: {out} is a folder that is not a bundle; not replacing it")
        shutil.rmtree(out)
    for d in ("bin", "lib", "lib/fallback"):
        os.makedirs(os.path.join(out, d))
    stage = tempfile.mkdtemp(prefix="gpu-bundle-tests-")
    try:
        return _make(build, src, out, stage)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _make(build, src, out, stage):
    elfs = []  # (source file, destination)
    for rel, folder in PROGRAMS.items():
        path = os.path.join(build, rel)
        if not os.path.exists(path):
            raise SystemExit(f"gpu_bundle: {path} is missing (a build with CUDA and Google Benchmark is needed)")
        elfs.append((path, os.path.join(out, folder, os.path.basename(rel))))

    # The suite: meson's own definitions, with build and source paths made relative to the bundle and the tree.
    manifest = {"tests": [], "not_bundled": []}
    bundled_files = {os.path.join(build, rel): f"@BUNDLE@/{folder}/{os.path.basename(rel)}"
                     for rel, folder in PROGRAMS.items()}
    # The folder of a shared library is a library path (LD_LIBRARY_PATH of the plugin's tests): lib/.
    for rel, folder in PROGRAMS.items():
        if folder == "lib":
            bundled_files[os.path.join(build, os.path.dirname(rel))] = "@BUNDLE@/lib"
    test_files = {}
    for t in introspect_tests(build):
        exe = t["cmd"][0]
        if not (exe.startswith(build + "/") and is_elf(exe)):
            prog = os.path.basename(exe)
            manifest["not_bundled"].append({"name": t["name"], "suite": t["suite"],
                                            "why": f"runs {prog} (needs the build machine's tools)"})
            continue
        deps = resolved(exe)
        san = [d for d in deps if d.startswith(SANITIZER_LIBS)]
        if san:
            manifest["not_bundled"].append({"name": t["name"], "suite": t["suite"],
                                            "why": f"a sanitizer build ({san[0]})"})
            continue
        rel = os.path.relpath(exe, build)
        test_files[exe] = rel
        bundled_files[exe] = f"@BUNDLE@/tests/{rel}"

    # Programs a bundled test starts itself (named in its arguments or environment, e.g. the MPI program
    # test_communicator_mpi launches) travel with it.
    for t in introspect_tests(build):
        if t["cmd"][0] not in test_files:
            continue
        for value in t["cmd"][1:] + list(t.get("env", {}).values()):
            for path in re.findall(re.escape(build) + r"/[^\s:;]+", value):
                if path not in bundled_files and os.path.isfile(path) and is_elf(path):
                    rel = os.path.relpath(path, build)
                    test_files[path] = rel
                    bundled_files[path] = f"@BUNDLE@/tests/{rel}"

    def rewrite(value):
        for path in sorted(bundled_files, key=len, reverse=True):
            value = value.replace(path, bundled_files[path])
        if build in value:
            return None  # a build file that does not travel
        return value.replace(src, "@SRC@")

    for t in introspect_tests(build):
        if t["cmd"][0] not in test_files:
            continue
        cmd = [rewrite(c) for c in t["cmd"]]
        env = {k: rewrite(v) for k, v in t.get("env", {}).items()}
        leftover = [v for v in t["cmd"] + list(t.get("env", {}).values()) if rewrite(v) is None]
        if leftover:
            manifest["not_bundled"].append({"name": t["name"], "suite": t["suite"],
                                            "why": f"needs a build file that does not travel ({leftover[0]})"})
            continue
        manifest["tests"].append({"name": t["name"], "suite": t["suite"], "cmd": cmd, "env": env,
                                  "timeout": t.get("timeout", 30), "is_parallel": t.get("is_parallel", True),
                                  "workdir": rewrite(t["workdir"]) if t.get("workdir") else None})
    used = {v for t in manifest["tests"] for v in t["cmd"] + list(t["env"].values())}
    test_dst = {exe: os.path.join(stage, "tests", rel) for exe, rel in test_files.items()
                if any(f"@BUNDLE@/tests/{rel}" in v for v in used)}
    for exe, dst in test_dst.items():
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        elfs.append((exe, dst))

    # hwloc's discovery plugins (PCI) from the libhwloc the programs link: a bundled libhwloc must not load the
    # GPU machine's own plugins, built for another hwloc version (gpu_check.sh sets HWLOC_PLUGINS_PATH to
    # lib/hwloc). The libxml2 XML plugin stays behind (libxml2 and ICU are larger than the whole bundle):
    # hwloc's built-in parser reads the XML hwloc exports.
    os.makedirs(os.path.join(out, "lib", "hwloc"))
    hwloc = resolved(os.path.join(build, "cli", "artune")).get("libhwloc.so.15")
    if hwloc:
        plugin_dir = os.path.join(os.path.dirname(os.path.realpath(hwloc)), "hwloc")
        for plugin in HWLOC_PLUGINS:
            if os.path.exists(os.path.join(plugin_dir, plugin)):
                elfs.append((os.path.join(plugin_dir, plugin), os.path.join(out, "lib", "hwloc", plugin)))

    # Programs, then the closure of what they need.
    libs = {}
    for path, dst in elfs:
        for name, file in resolved(path).items():
            if name not in ALLOWED:
                libs[name] = file
    pending = list(libs.items())
    while pending:
        name, file = pending.pop()
        for n2, f2 in resolved(file).items():
            if n2 not in ALLOWED and n2 not in libs:
                libs[n2] = f2
                pending.append((n2, f2))
    for path, dst in elfs:
        folder = os.path.dirname(dst)
        if folder == os.path.join(out, "lib"):
            rpath = "$ORIGIN"
        elif folder == os.path.join(out, "lib", "hwloc"):
            rpath = "$ORIGIN/.."
        else:
            depth = os.path.relpath(folder, os.path.join(stage if dst.startswith(stage) else out))
            rpath = "$ORIGIN/" + "/".join([".."] * len(depth.split("/"))) + "/lib"
        install_elf(path, dst, rpath)
    for name, file in libs.items():
        install_elf(file, os.path.join(out, "lib", name), "$ORIGIN")
    for name in FALLBACK:
        file = resolved(os.path.join(out, "bin", "artune")).get(name) or _find_system(name)
        shutil.copyfile(file, os.path.join(out, "lib", "fallback", name))

    _compress(os.path.join(stage, "tests"), os.path.join(out, "tests.tar.xz"))
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    _write_info(build, src, out, stage, libs)
    print(f"gpu_bundle: {out}: {len(manifest['tests'])} tests bundled, {len(manifest['not_bundled'])} not, "
          f"{len(libs)} libraries, {_size(out) / 2**20:.1f} MiB")
    return 0


def _compress(folder, archive):
    """folder -> archive (tar.xz), on every core where the xz program is there (the programs share most of
    their code: 100 MiB become about 9)."""
    xz = shutil.which("xz")
    if xz:
        with open(archive, "wb") as f:
            tar = subprocess.Popen(["tar", "-C", os.path.dirname(folder), "-cf", "-", os.path.basename(folder)],
                                   stdout=subprocess.PIPE)
            subprocess.run([xz, "-T0", "-6", "-c"], stdin=tar.stdout, stdout=f, check=True)
            if tar.wait() != 0:
                raise SystemExit("gpu_bundle: tar failed")
    else:
        with tarfile.open(archive, "w:xz", preset=6) as t:
            t.add(folder, arcname=os.path.basename(folder))


def _find_system(name):
    for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64"):
        if os.path.exists(os.path.join(d, name)):
            return os.path.join(d, name)
    raise SystemExit(f"gpu_bundle: {name} not found on this machine")


def _size(folder):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(folder) for f in fs)


def _versions(folder, prefix):
    found = set()
    for d, _, fs in os.walk(folder):
        for f in fs:
            p = os.path.join(d, f)
            if is_elf(p) and "fallback" not in p:
                found.update(re.findall(prefix + r"_[0-9.]+", run(["objdump", "-T", p])))
    key = lambda v: [int(x) for x in v.split("_")[1].split(".") if x]
    return max(found, key=key) if found else "-"


def _write_info(build, src, out, stage, libs):
    try:
        commit = run(["git", "-C", src, "describe", "--always", "--dirty"]).strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        commit = "unknown"
    opts = {o["name"]: o["value"] for o in json.loads(run(["meson", "introspect", "--buildoptions", build]))}
    lines = [
        f"commit {commit}, made {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {os.uname().nodename}",
        f"build: {build} (gpu_archs {opts.get('gpu_archs')}, buildtype {opts.get('buildtype')})",
        f"needs at most: {_versions(out, 'GLIBC')} and {_versions(out, 'GLIBCXX')} "
        f"(tests: {_versions(stage, 'GLIBC')}, {_versions(stage, 'GLIBCXX')})",
        "allow-list (provided by the GPU machine): " + " ".join(sorted(ALLOWED)),
        "bundled libraries: " + " ".join(sorted(libs)),
        f"size: {_size(out) / 2**20:.1f} MiB of {CAP_BYTES >> 20} MiB "
        f"(tests.tar.xz {os.path.getsize(os.path.join(out, 'tests.tar.xz')) / 2**20:.1f} MiB, "
        f"{_size(os.path.join(stage, 'tests')) / 2**20:.1f} MiB unpacked)",
    ]
    with open(os.path.join(out, "BUNDLE.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


# ------------------------------------------------------------------------------------------------ check

def _elf_files(folder):
    for d, _, fs in os.walk(folder):
        for f in fs:
            p = os.path.join(d, f)
            if is_elf(p) and os.sep + "fallback" + os.sep not in p:
                yield p


def check(bundle, use_chroot):
    bundle = os.path.realpath(bundle)
    problems = []
    size = _size(bundle)
    if size > CAP_BYTES:
        problems.append(f"size {size / 2**20:.1f} MiB is over the {CAP_BYTES >> 20} MiB cap")
    scratch = tempfile.mkdtemp(prefix="gpu-bundle-check-")
    try:
        with tarfile.open(os.path.join(bundle, "tests.tar.xz")) as tar:
            tar.extractall(os.path.join(scratch, "unpacked"))
        # Unpacked tests sit as they would in the bundle (tests/… beside lib/).
        lib_names = set(os.listdir(os.path.join(bundle, "lib")))
        count = 0
        for root in (bundle, os.path.join(scratch, "unpacked")):
            for p in _elf_files(root):
                count += 1
                rel = os.path.relpath(p, root)
                rp = runpath(p)
                for entry in filter(None, rp.split(":")):
                    if not entry.startswith("$ORIGIN"):
                        problems.append(f"{rel}: RUNPATH entry {entry} points outside the bundle")
                for name in needed(p):
                    if name not in lib_names and name not in ALLOWED:
                        problems.append(f"{rel}: needs {name}, neither bundled nor on the allow-list")
        manifest = json.load(open(os.path.join(bundle, "manifest.json")))
        for t in manifest["tests"]:
            exe = t["cmd"][0].replace("@BUNDLE@", os.path.join(scratch, "unpacked"))
            if not os.path.exists(exe):
                problems.append(f"manifest: test {t['name']}: {t['cmd'][0]} is not in tests.tar.xz")
        print(f"gpu_bundle check: {count} ELF files, {size / 2**20:.1f} MiB, "
              f"{len(manifest['tests'])} tests bundled")
        # The bundled artune from the bundle alone: a clean environment here, then (as root) a root holding
        # only glibc and the allow-listed libraries.
        cpu_run = ["run", "-t", "uniform:4", "-s", "xring", "--backend", "cpu", "-b", "1K", "-e", "64K", "-f", "8",
                   "-n", "2", "-w", "1", "-c", "1"]
        artune = os.path.join(bundle, "bin", "artune")
        for args in (["--version"], cpu_run):
            r = subprocess.run([artune] + args, env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True)
            if r.returncode != 0:
                problems.append(f"bin/artune {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
        if use_chroot:
            problems += _chroot_check(bundle, scratch, cpu_run)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for p in problems:
        print(f"FAIL: {p}")
    print("gpu_bundle check: " + ("ok" if not problems else f"{len(problems)} problem(s)"))
    return 1 if problems else 0


def _chroot_check(bundle, scratch, cpu_run):
    """bin/artune inside a root with nothing but glibc, the allow-listed libraries and the bundle."""
    if os.geteuid() != 0:
        print("gpu_bundle check: not root: the chroot run is left out")
        return []
    root = os.path.join(scratch, "root")
    os.makedirs(os.path.join(root, "lib64"))
    libdir = os.path.join(root, "lib", "x86_64-linux-gnu")
    os.makedirs(libdir)
    os.makedirs(os.path.join(root, "tmp"))
    os.makedirs(os.path.join(root, "dev"))
    os.makedirs(os.path.join(root, "proc"))
    artune = os.path.join(bundle, "bin", "artune")
    host = resolved(artune)
    for name in sorted(ALLOWED):
        file = host.get(name)
        if name == "ld-linux-x86-64.so.2":
            file = "/lib64/ld-linux-x86-64.so.2"
        if file is None:
            continue
        dst = os.path.join(root, "lib64" if name == "ld-linux-x86-64.so.2" else "lib/x86_64-linux-gnu", name)
        try:
            os.link(os.path.realpath(file), dst)  # libnccl is 200 MiB: a link where the file system allows
        except OSError:
            shutil.copyfile(os.path.realpath(file), dst)
    shutil.copytree(bundle, os.path.join(root, "bundle"), ignore=shutil.ignore_patterns("tests.tar.xz"))
    problems = []
    chroot = shutil.which("chroot") or "/usr/sbin/chroot"
    # The loader finds $ORIGIN of a program through /proc/self/exe: /proc is mounted inside the root, in a
    # mount namespace of its own (gone with the process). Where namespaces are refused, LD_ORIGIN_PATH (the
    # loader's fallback for the same lookup) names the program's folder instead.
    unshare = shutil.which("unshare") or "/usr/bin/unshare"
    isolated = subprocess.run([unshare, "--mount", "--fork", "true"], capture_output=True).returncode == 0
    for args in (["--version"], cpu_run):
        if isolated:
            cmd = [unshare, "--mount", "--fork", "sh", "-c", 'mount -t proc proc "$0/proc" && exec "$@"', root,
                   chroot, root, "/bundle/bin/artune"] + args
            env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
        else:
            cmd = [chroot, root, "/bundle/bin/artune"] + args
            env = {"PATH": "/bundle/bin", "LD_ORIGIN_PATH": "/bundle/bin"}
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        shown = " ".join(args)
        if r.returncode != 0:
            problems.append(f"chroot bin/artune {shown}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
        else:
            print(f"gpu_bundle check: in a root of glibc + allow-list only: artune {shown}: ok")
    return problems


# ------------------------------------------------------------------------------------------------ tests

def run_tests(bundle, src, jobs, list_only, only, skip, logs):
    bundle = os.path.realpath(bundle)
    src = os.path.realpath(src)
    manifest = json.load(open(os.path.join(bundle, "manifest.json")))
    for t in manifest["not_bundled"]:
        print(f"NOT BUNDLED {t['suite']}/{t['name']}: {t['why']}")
    tests = [t for t in manifest["tests"] if (not only or t["name"] in only) and t["name"] not in skip]
    if list_only:
        for t in tests:
            print(f"BUNDLED {t['suite']}/{t['name']}: {' '.join(t['cmd'])}")
        return 0
    # The test programs are unpacked beside a link to the bundle's lib/ (their RUNPATH is $ORIGIN/../…/lib), in
    # a scratch folder removed afterwards: the bundle itself is never written.
    scratch = tempfile.mkdtemp(prefix="gpu-bundle-run-")
    try:
        with tarfile.open(os.path.join(bundle, "tests.tar.xz")) as tar:
            tar.extractall(scratch)
        os.symlink(os.path.join(bundle, "lib"), os.path.join(scratch, "lib"))
        logdir = logs or os.path.join(scratch, "logs")
        os.makedirs(logdir, exist_ok=True)
        return _run_tests(bundle, scratch, src, jobs, tests, manifest, logdir)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run_tests(bundle, scratch, src, jobs, tests, manifest, logdir):
    def sub(v):
        return v.replace("@BUNDLE@/tests/", scratch + "/tests/").replace("@BUNDLE@", bundle).replace("@SRC@", src)

    def one(t):
        env = dict(os.environ)
        for k, v in t["env"].items():
            # A library path the test sets goes before the caller's (which names the machine's NCCL).
            env[k] = sub(v) + (":" + os.environ[k] if k == "LD_LIBRARY_PATH" and os.environ.get(k) else "")
        env.setdefault("MESON_TEST_ITERATION", "1")
        start = time.time()
        log = os.path.join(logdir, t["name"] + ".txt")
        with open(log, "w") as f:
            try:
                r = subprocess.run([sub(c) for c in t["cmd"]], env=env, cwd=sub(t["workdir"] or src), stdout=f,
                                   stderr=subprocess.STDOUT, timeout=t["timeout"] if t["timeout"] > 0 else None)
                rc = r.returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
        result = {0: "OK", 77: "SKIP"}.get(rc, "FAIL")
        if result == "OK":
            with open(log, errors="replace") as f:
                if any(line.startswith("REDUCED:") for line in f):
                    result = "REDUCED"  # passed, but said what it could not check here
        return t, result, rc, time.time() - start, log

    counts = {"OK": 0, "REDUCED": 0, "SKIP": 0, "FAIL": 0}
    serial = [t for t in tests if not t["is_parallel"]]
    parallel = [t for t in tests if t["is_parallel"]]
    results = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for r in pool.map(one, parallel):
            results.append(r)
            _report(r, counts)
    for t in serial:
        r = one(t)
        results.append(r)
        _report(r, counts)
    print(f"{counts['OK'] + counts['REDUCED']} passed ({counts['REDUCED']} reduced), {counts['FAIL']} failed, "
          f"{counts['SKIP']} skipped, {len(manifest['not_bundled'])} not bundled")
    return 1 if counts["FAIL"] else 0


def _report(r, counts):
    t, result, rc, secs, log = r
    counts[result] += 1
    print(f"{result:7} {t['suite']}/{t['name']} ({secs:.1f} s{'' if result != 'FAIL' else f', exit {rc}'})",
          flush=True)
    if result == "FAIL":
        with open(log) as f:
            tail = f.read()[-3000:]
        print("     | " + tail.replace("\n", "\n     | "))
    elif result == "SKIP":
        with open(log) as f:
            lines = [l for l in f.read().splitlines() if l.strip()]
        if lines:
            print(f"     | {lines[-1]}")
    elif result == "REDUCED":
        with open(log, errors="replace") as f:
            for line in f:
                if line.startswith("REDUCED:"):
                    print(f"     | {line.rstrip()}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sp = p.add_subparsers(dest="cmd", required=True)
    m = sp.add_parser("make")
    m.add_argument("build")
    m.add_argument("out")
    c = sp.add_parser("check")
    c.add_argument("bundle")
    c.add_argument("--chroot", action="store_true")
    t = sp.add_parser("tests")
    t.add_argument("bundle")
    t.add_argument("src")
    t.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    t.add_argument("--list", action="store_true")
    t.add_argument("--only", default="")
    t.add_argument("--skip", default="")
    t.add_argument("--logs", default="", help="folder for each test's output (default: dropped afterwards)")
    a = p.parse_args()
    if a.cmd == "make":
        return make(a.build, a.out)
    if a.cmd == "check":
        return check(a.bundle, a.chroot)
    return run_tests(a.bundle, a.src, a.jobs, a.list, set(filter(None, a.only.split(","))),
                     set(filter(None, a.skip.split(","))), a.logs)


if __name__ == "__main__":
    sys.exit(main())
