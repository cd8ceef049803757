"""The load test of the default test run: 1,000 requests, a fifth of them clients that leave
mid-answer, every greedy answer checked against the one the request gets alone."""

import unittest

from load_test import run_load
from server_util import binary_from_env

# The whole load takes a few seconds on the bundled model; a server that makes clients wait on
# each other (a queue that is not bounded, workers held by idle connections) takes far longer.
MAX_SECONDS = 120


class ShortLoad(unittest.TestCase):
    def test_load(self):
        report = run_load(
            binary_from_env(),
            clients=64,
            requests=1000,
            parallel=4,
            seed=2,
            log=lambda line: print("\n" + line),
        )
        self.assertEqual(report["failures"], 0)
        self.assertGreater(report["results"].get("ok", 0), 0)
        self.assertGreater(report["results"].get("disconnect", 0), 150)
        self.assertGreater(report["results"].get("malformed", 0), 0)
        self.assertLess(report["seconds"], MAX_SECONDS)


if __name__ == "__main__":
    unittest.main()
