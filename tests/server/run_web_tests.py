#!/usr/bin/env python3
"""Runs the chat page's browser test (test_web_page.py) against a built `turbospark` binary.
Needs Debian's `chromium` and `chromium-driver` (installed with apt-get when missing and this runs
as root) and `selenium` (installed from PyPI when missing). Where any of them cannot be had the
test is skipped (exit code 77, which ctest reports as skipped), saying why.

    python3 tests/server/run_web_tests.py --binary build/turbospark
"""

import argparse
import os
import shutil
import subprocess
import sys
import unittest

from run_tests import SKIP, ensure

HERE = os.path.dirname(os.path.abspath(__file__))


def ensure_chromium():
    if shutil.which("chromium") and shutil.which("chromedriver"):
        return None
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return "chromium and chromium-driver are not installed, and this is not root with apt-get"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    r = subprocess.run(["apt-get", "-o", "DPkg::Lock::Timeout=120", "install", "-y", "-q",
                        "chromium", "chromium-driver"], capture_output=True, text=True, env=env,
                       timeout=900)
    if r.returncode != 0 or not (shutil.which("chromium") and shutil.which("chromedriver")):
        last = (r.stderr.strip().splitlines() or ["no output"])[-1]
        return "apt-get could not install chromium and chromium-driver (%s)" % last
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", required=True)
    args, rest = ap.parse_known_args()
    why = ensure_chromium()
    if why is None and not ensure("selenium"):
        why = "selenium could not be installed from PyPI"
    if why is not None:
        print("browser test skipped: " + why)
        return SKIP
    os.environ["TS_BINARY"] = os.path.abspath(args.binary)
    sys.path.insert(0, HERE)
    suite = unittest.defaultTestLoader.loadTestsFromNames(rest or ["test_web_page"])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
