"""The load test in a size that fits the default test run (load_test.py runs the full one)."""

import unittest

from load_test import run_load
from server_util import binary_from_env


class ShortLoad(unittest.TestCase):
    def test_short_load(self):
        report = run_load(
            binary_from_env(),
            clients=16,
            requests=200,
            parallel=4,
            seed=2,
            log=lambda line: print("\n" + line),
        )
        self.assertEqual(report["failures"], 0)
        self.assertGreater(report["results"].get("ok", 0), 0)
        self.assertGreater(report["results"].get("disconnect", 0), 0)
        self.assertGreater(report["results"].get("malformed", 0), 0)


if __name__ == "__main__":
    unittest.main()
