#!/usr/bin/env python3
"""The install step, checked as a user meets it: the files installed (by `cmake --install` into a
prefix, or by the Debian package) are run from another directory, and must find the bundled model
and the CUDA plugin where they were installed, not in the build or source tree.

    install_test.py --mode prefix --build-dir build
    install_test.py --mode deb --build-dir build

--mode deb builds the package with CPack (as scripts/package.sh does), checks its contents, and
installs it with `apt-get install ./turbospark_*.deb` when this runs as root with apt-get (then
removes it again); elsewhere it unpacks the package into a temporary root instead, and says so.
"""

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

PROMPT = "In the morning, the children walked to the school"
MODEL = "tiny-moe-q8_0.gguf"


def run(cmd, cwd=None, timeout=300):
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise SystemExit("failed (%d): %s\n%s%s" % (r.returncode, " ".join(cmd), r.stdout, r.stderr))
    return r


def generate(binary, cwd):
    """What `turbospark run` prints for the bundled model, greedy (no -m: the bundled one)."""
    return run([binary, "run", "-p", PROMPT, "-n", "12", "--temp", "0", "--no-display-prompt"],
               cwd=cwd).stdout


def mapped_model(binary, cwd):
    """The model file a `serve` of `binary` maps (read from /proc/PID/maps)."""
    p = subprocess.Popen([binary, "serve", "--port", "0", "--parallel", "1", "-c", "128"],
                         cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for line in p.stderr:
            if "serving" in line:
                break
        with open("/proc/%d/maps" % p.pid) as f:
            paths = {l.split()[-1] for l in f if l.rstrip().endswith(".gguf")}
        return paths
    finally:
        p.terminate()
        p.wait(30)


def check_installed(binary, root, build_dir, away):
    """The installed `binary` (under `root`) run from `away`."""
    want = generate(os.path.join(build_dir, "turbospark"), away)
    got = generate(binary, away)
    if got != want:
        raise SystemExit("the installed binary generated %r, the build's %r" % (got, want))
    maps = mapped_model(binary, away)
    installed = [m for m in maps if m.startswith(os.path.realpath(root) + "/")]
    if not installed or not installed[0].endswith("/share/turbospark/models/" + MODEL):
        raise SystemExit("the installed binary mapped %s, not the model under %s" % (maps, root))
    if os.path.exists(os.path.join(build_dir, "libturbospark_cuda.so")):
        r = subprocess.run([binary, "run", "--backend", "cuda", "-p", "Hi", "-n", "1"], cwd=away,
                           capture_output=True, text=True, timeout=300)
        # Found and loaded: it either runs (a GPU) or says no device is there.
        if "not available" in r.stderr:
            raise SystemExit("the installed binary did not find its CUDA plugin: " + r.stderr)
    print("ok: %s generated the build's text from %s, mapping %s" % (binary, away, installed[0]))


def mode_prefix(build_dir):
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "prefix")
        run(["cmake", "--install", build_dir, "--prefix", prefix])
        away = os.path.join(tmp, "elsewhere")
        os.mkdir(away)
        check_installed(os.path.join(prefix, "bin", "turbospark"), prefix, build_dir, away)


def apt_install_possible():
    return os.geteuid() == 0 and shutil.which("apt-get") and os.environ.get("TURBOSPARK_NO_APT") is None


def mode_deb(build_dir):
    with tempfile.TemporaryDirectory() as tmp:
        run(["cpack", "--config", os.path.join(build_dir, "CPackConfig.cmake"), "-B", tmp])
        debs = glob.glob(os.path.join(tmp, "turbospark_*.deb"))
        if len(debs) != 1 or not re.match(r"turbospark_\d+\.\d+\.\d+_\w+\.deb$", os.path.basename(debs[0])):
            raise SystemExit("expected one turbospark_VERSION_ARCH.deb, got %s" % debs)
        listing = run(["dpkg-deb", "-c", debs[0]]).stdout
        for path in ("./usr/bin/turbospark", "./usr/share/turbospark/models/" + MODEL):
            if path not in listing:
                raise SystemExit("the package lacks " + path + ":\n" + listing)
        away = os.path.join(tmp, "elsewhere")
        os.mkdir(away)
        if apt_install_possible():
            status = subprocess.run(["dpkg-query", "-W", "-f=${Status}", "turbospark"],
                                    capture_output=True, text=True).stdout
            if "installed" in status.split():
                raise SystemExit("a turbospark package is already installed: not replacing it")
            apt = ["apt-get", "-o", "DPkg::Lock::Timeout=120", "-y", "-q"]
            env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
            r = subprocess.run(apt + ["install", "./" + os.path.basename(debs[0])], cwd=tmp,
                               capture_output=True, text=True, env=env, timeout=600)
            try:
                if r.returncode != 0:
                    raise SystemExit("apt-get install failed:\n" + r.stdout + r.stderr)
                check_installed("/usr/bin/turbospark", "/usr", build_dir, away)
            finally:
                subprocess.run(apt + ["purge", "turbospark"], capture_output=True, env=env,
                               timeout=600)
            print("ok: installed with apt-get, run, purged")
        else:
            print("apt-get install is not possible here (not root, no apt-get, or TURBOSPARK_NO_APT "
                  "set): the package is unpacked into a temporary root instead")
            root = os.path.join(tmp, "root")
            run(["dpkg-deb", "-x", debs[0], root])
            check_installed(os.path.join(root, "usr", "bin", "turbospark"), root, build_dir, away)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["prefix", "deb"], required=True)
    ap.add_argument("--build-dir", required=True)
    args = ap.parse_args()
    build_dir = os.path.abspath(args.build_dir)
    start = time.time()
    (mode_prefix if args.mode == "prefix" else mode_deb)(build_dir)
    print("%.1f s" % (time.time() - start))
    return 0


if __name__ == "__main__":
    sys.exit(main())
