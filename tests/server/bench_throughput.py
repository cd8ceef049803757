#!/usr/bin/env python3
"""Aggregate decode throughput of `turbospark serve` with 1..N concurrent streams.

Each stream is a streamed greedy completion of --tokens tokens (end of text ignored, so every
stream generates exactly that many). For each concurrency the streams start together; the
aggregate rate is all generated tokens over the wall time from the first request to the last
[DONE]. The server's /health counters give the forward passes taken and the rows per pass.

    python3 tests/server/bench_throughput.py --binary build/turbospark [-m MODEL] [--threads T]
"""

import argparse
import concurrent.futures
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_util import Server, sse_events  # noqa: E402

PROMPTS = [
    "Once upon a time",
    "One day, a bird",
    "Tim had a red ball",
    "Mom said",
    "The sun was shining",
    "The little dog",
    "In a small town",
    "A big fish",
]


def one_stream(server, i, tokens):
    t0 = time.time()
    status, _, raw = server.request(
        "POST",
        "/v1/completions",
        {
            "prompt": PROMPTS[i % len(PROMPTS)],
            "max_tokens": tokens,
            "temperature": 0,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )
    if status != 200:
        raise RuntimeError("status %d: %r" % (status, raw[:200]))
    events = sse_events(raw)
    usage = json.loads(events[-2])["usage"]
    return usage["completion_tokens"], time.time() - t0


def measure(server, n, tokens):
    before = server.health()
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        results = list(pool.map(lambda i: one_stream(server, i, tokens), range(n)))
    wall = time.time() - t0
    after = server.health()
    generated = sum(r[0] for r in results)
    steps = after["steps"] - before["steps"]
    decode = after["decode_rows"] - before["decode_rows"]
    return {
        "streams": n,
        "generated": generated,
        "seconds": round(wall, 2),
        "aggregate_tok_s": round(generated / wall, 1),
        "per_stream_tok_s": round(generated / wall / n, 1),
        "forward_passes": steps,
        "decode_rows_per_pass": round(decode / max(steps, 1), 2),
    }


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--binary", required=True)
    ap.add_argument("-m", "--model", default=None)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--streams", default="1,2,4,8")
    ap.add_argument("--repeat", type=int, default=3, help="runs per concurrency; the best is kept")
    a = ap.parse_args()
    counts = [int(x) for x in a.streams.split(",")]
    args = ["--parallel", str(max(counts)), "-c", str(a.tokens + 64)]
    if a.model:
        args += ["-m", a.model]
    if a.threads:
        args += ["-t", str(a.threads)]
    with Server(a.binary, *args) as s:
        measure(s, 1, 16)  # warm-up
        rows = []
        for n in counts:
            best = max(
                (measure(s, n, a.tokens) for _ in range(a.repeat)),
                key=lambda r: r["aggregate_tok_s"],
            )
            rows.append(best)
            print(json.dumps(best), flush=True)
    base = rows[0]["aggregate_tok_s"]
    for r in rows:
        print(
            "%d streams: %.1f tok/s aggregate (%.2fx of %d), %.1f tok/s per stream, "
            "%.2f decode rows per pass"
            % (
                r["streams"],
                r["aggregate_tok_s"],
                r["aggregate_tok_s"] / base,
                rows[0]["streams"],
                r["per_stream_tok_s"],
                r["decode_rows_per_pass"],
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
