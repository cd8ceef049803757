#!/usr/bin/env python3
"""Time to the first token of a conversation's next turn, with and without the prompt cache.

A client that resends the conversation: turn 1 is a long document and a question; turn 2 is turn
1's prompt, its answer and a short follow-up. Each turn-2 request asks for one token, so its wall
time is the time to the first token. Each repetition answers turn 1 (32 tokens), then times turn 2
with `cache_prompt` on (the slot holds turn 1 and its answer: only the follow-up is prefilled),
off (prefilled whole, in the same slot) and on again (the same prompt as the turn before: no
forward pass). The best of --repeat runs of each is kept; /health's `cached_rows` says how many
rows were reused.

    python3 tests/server/bench_prompt_cache.py --binary build/turbospark [-m MODEL] [--threads T]
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_util import Server  # noqa: E402

DOCUMENT = (
    "The village sat at the edge of a dark forest, and every evening the children gathered by "
    "the well to tell stories about the creatures that lived among the trees. "
)


def complete(server, prompt, max_tokens, cache):
    t0 = time.time()
    status, body, raw = server.request(
        "POST",
        "/v1/completions",
        {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "cache_prompt": cache},
    )
    if status != 200:
        raise RuntimeError("status %d: %r" % (status, raw[:200]))
    return body, time.time() - t0


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--binary", required=True)
    ap.add_argument("-m", "--model", default=None)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--sentences", type=int, default=40, help="length of turn 1's document")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    args = ["--parallel", "1", "-c", "4096"]
    if a.model:
        args += ["-m", a.model]
    if a.threads:
        args += ["-t", str(a.threads)]
    turn1 = DOCUMENT * a.sentences + "\nQuestion: what did the children do?\nAnswer:"
    cases = ("next turn, cached", "next turn, prefilled whole", "same prompt again")
    best = {}
    with Server(a.binary, *args) as s:
        for _ in range(a.repeat):
            # Turn 1 again (its prompt from the cache, its greedy answer the same 32 tokens), so
            # the slot holds turn 1 and its answer as a client's next turn finds it.
            answer, _ = complete(s, turn1, 32, True)
            turn2 = turn1 + answer["choices"][0]["text"] + "\nQuestion: and then?\nAnswer:"
            for case, cache in zip(cases, (True, False, True)):
                before = s.health()["cached_rows"]
                body, seconds = complete(s, turn2, 1, cache)
                cached = s.health()["cached_rows"] - before
                if case not in best or seconds < best[case]["time_to_first_token_s"]:
                    best[case] = {
                        "case": case,
                        "prompt_tokens": body["usage"]["prompt_tokens"],
                        "cached_tokens": cached,
                        "time_to_first_token_s": round(seconds, 4),
                    }
    for case in cases:
        print(json.dumps(best[case]))
    whole = best[cases[1]]["time_to_first_token_s"]
    print(
        "next turn's first token: %.3f s cached, %.3f s prefilled whole (%.0fx); same prompt again:"
        " %.4f s"
        % (
            best[cases[0]]["time_to_first_token_s"],
            whole,
            whole / best[cases[0]]["time_to_first_token_s"],
            best[cases[2]]["time_to_first_token_s"],
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
