#!/usr/bin/env python3
"""Runs the server tests: the OpenAI-client tests and a short load test, against a built
`turbospark` binary. Installs the `openai` and `ollama` packages from PyPI when they are missing; when that is not
possible the tests are skipped (exit code 77, which ctest reports as skipped), saying why.

    python3 tests/server/run_tests.py --binary build/turbospark [unittest args...]
"""

import argparse
import importlib
import os
import subprocess
import sys
import unittest

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))


def ensure(package):
    try:
        importlib.import_module(package)
        return True
    except ImportError:
        pass
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            package,
        ],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["no output"])[-1]
        print(
            "server tests skipped: the '%s' package is missing and pip could not install it "
            "(%s)" % (package, last)
        )
        return False
    importlib.invalidate_caches()
    return True


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--binary", required=True, help="the turbospark executable")
    args, rest = ap.parse_known_args()
    if not os.access(args.binary, os.X_OK):
        print("not an executable: " + args.binary)
        return 2
    if not ensure("openai"):
        return SKIP
    default = [
        "test_openai_api",
        "test_responses_api",
        "test_ollama_api",
        "test_hardening",
        "test_server_ops",
        "test_load_short",
        "test_vision_api",
        "test_embeddings_api",
    ]
    if not ensure("ollama"):
        # The OpenAI tests still run; the Ollama ones are left out, as said above.
        default.remove("test_ollama_api")
    os.environ["TS_BINARY"] = os.path.abspath(args.binary)
    sys.path.insert(0, HERE)
    names = rest or default
    suite = unittest.defaultTestLoader.loadTestsFromNames(names)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
