#!/usr/bin/env python3
"""A bounded load test of `turbospark serve` on loopback, on the bundled model.

Many clients send a seeded random mix of requests: greedy completions and chats (whole and
streamed), sampled ones, malformed bodies and broken HTTP, and clients that disconnect at a random
moment. It then checks:
  * the server never crashed and stops cleanly on SIGTERM (exit code 0);
  * every well-formed request was answered correctly: greedy answers equal the answer the same
    request gets alone (or part from it only at a near-tie of the lone answer's top two
    log-probabilities: batched rows are bit-close, not bit-identical, see server_util.TIE_GAP);
    sampled answers are well-formed with consistent usage and finish reasons;
  * every malformed request got its OpenAI-style error and status;
  * no slot leaked: /health reports every slot free and nothing queued at the end;
  * memory came back: the resident set after the second half of the load is within a small
    margin of what it was after the first half (a per-request leak grows it linearly).

    python3 tests/server/load_test.py --binary build/turbospark --clients 64 --requests 1000
"""

import argparse
import concurrent.futures
import json
import os
import random
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_util import Server, reference, sse_events  # noqa: E402

PROMPTS = [
    "Once upon a time",
    "One day, a bird",
    "Tim had a red ball",
    "Mom said",
    "The sun was shining",
]
MAX_TOKENS = (8, 24)
MAX_BODY = 256 * 1024
# Growth of the resident set allowed between the middle and the end of the load. The server's
# buffers are allocated at start; what may still move is allocator caching (glibc arenas of the
# HTTP threads). A leak of one request's job or strings (a few KiB) per request would exceed it
# after a few hundred requests.
RSS_GROWTH_KIB = 3 * 1024


class Check(Exception):
    pass


def http_raw(port, payload, timeout=120):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(payload)
        data = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            data += d
    finally:
        s.close()
    return data


def post_bytes(path, body):
    return (
        b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
        b"Content-Length: %d\r\n\r\n" % (path.encode(), len(body))
    ) + body


def dechunk(raw):
    """Status and body of a raw HTTP/1.1 response (chunked or with a length)."""
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if b"transfer-encoding: chunked" not in head.lower():
        return status, body
    out = b""
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2 :]
    return status, out


class Load:
    def __init__(self, server, refs, rng):
        self.s = server
        self.refs = refs
        self.rng = rng
        self.ties = 0
        self.tokens = 0

    # --- well-formed ---------------------------------------------------------------------------
    def greedy(self, chat, stream):
        prompt = self.rng.choice(PROMPTS)
        n = self.rng.choice(MAX_TOKENS)
        body = {"max_tokens": n, "temperature": 0, "stream": stream}
        if chat:
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        return lambda: self._answer(body, chat, stream, self.refs[(prompt, n)])

    def sampled(self, chat, stream):
        body = {
            "max_tokens": self.rng.choice(MAX_TOKENS),
            "temperature": 0.8,
            "seed": self.rng.randrange(1 << 31),
            "stream": stream,
            "presence_penalty": self.rng.choice([0.0, 0.5]),
        }
        if chat:
            body["messages"] = [{"role": "user", "content": self.rng.choice(PROMPTS)}]
        else:
            body["prompt"] = self.rng.choice(PROMPTS)
        return lambda: self._answer(body, chat, stream, None)

    def _answer(self, body, chat, stream, ref):
        if stream:
            body["stream_options"] = {"include_usage": True}
        path = "/v1/chat/completions" if chat else "/v1/completions"
        status, raw = dechunk(http_raw(self.s.port, post_bytes(path, json.dumps(body).encode())))
        if status != 200:
            raise Check("%s answered %d: %r" % (path, status, raw[:300]))
        if stream:
            events = sse_events(raw)
            if not events or events[-1] != "[DONE]":
                raise Check("stream does not end with [DONE]: %r" % raw[-200:])
            chunks = [json.loads(e) for e in events[:-1]]
            text, finish = "", None
            for c in chunks:
                for ch in c["choices"]:
                    text += (ch["delta"].get("content") or "") if chat else ch["text"]
                    finish = ch["finish_reason"] or finish
            usage = chunks[-1]["usage"]
        else:
            j = json.loads(raw)
            ch = j["choices"][0]
            text = ch["message"]["content"] if chat else ch["text"]
            finish, usage = ch["finish_reason"], j["usage"]
        n = body["max_tokens"]
        if (
            finish not in ("stop", "length")
            or usage["completion_tokens"] > n
            or (finish == "length") != (usage["completion_tokens"] == n)
        ):
            raise Check(
                "inconsistent finish %s with usage %s for max_tokens %d" % (finish, usage, n)
            )
        self.tokens += usage["completion_tokens"]
        if ref is not None:
            why = ref.check(text)
            if why:
                raise Check(why)
            if text != ref.text:
                self.ties += 1
        return "ok"

    # --- malformed -----------------------------------------------------------------------------
    def malformed(self):
        cases = [
            ("/v1/completions", b'{"prompt": "Hi", ', 400),
            ("/v1/completions", b"[1, 2, 3]", 400),
            ("/v1/completions", b'{"prompt": "Hi", "temperature": "warm"}', 400),
            ("/v1/completions", b'{"prompt": "Hi", "max_tokens": 0}', 400),
            ("/v1/chat/completions", b'{"messages": "Hi"}', 400),
            (
                "/v1/chat/completions",
                b'{"messages": [{"role": "user", "content": "Hi"}], "n": 17}',
                400,
            ),
            ("/v1/completions", b'{"model": "gpt-9", "prompt": "Hi"}', 404),
            ("/v1/nowhere", b"{}", 404),
            ("/v1/completions", b'{"prompt": "' + b"a" * (MAX_BODY + 10) + b'"}', 413),
            ("/v1/completions", b"\xc3\x28 not utf-8", 400),
            ("/v1/completions", b'{"prompt": ' + b"[" * 60000 + b"]" * 60000 + b"}", 400),
        ]
        path, body, want = self.rng.choice(cases)

        def run():
            status, raw = dechunk(http_raw(self.s.port, post_bytes(path, body)))
            if status != want:
                raise Check("malformed %r to %s: %d, want %d" % (body[:40], path, status, want))
            if "error" not in json.loads(raw):
                raise Check("error without an OpenAI error body: %r" % raw[:200])
            return "malformed"

        return run

    def broken_http(self):
        payload = self.rng.choice(
            [
                b"GARBAGE\r\n\r\n",
                b"POST /v1/completions HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
                b"\x00\x01\x02\x03" * 50 + b"\r\n\r\n",
            ]
        )

        def run():
            # No Connection: close here: read the answer, then leave (the server closes its end
            # after one request).
            s = socket.create_connection(("127.0.0.1", self.s.port), timeout=30)
            try:
                s.sendall(payload)
                raw = s.recv(65536)
            finally:
                s.close()
            if raw and not raw.startswith(b"HTTP/1.1 4"):
                raise Check("broken HTTP answered %r" % raw[:80])
            return "broken"

        return run

    # --- clients that leave ----------------------------------------------------------------------
    def disconnect(self):
        body = json.dumps(
            {
                "prompt": self.rng.choice(PROMPTS),
                "max_tokens": self.rng.randrange(32, 300),
                "ignore_eos": True,
                "stream": self.rng.random() < 0.5,
            }
        ).encode()
        wait = self.rng.random() * 0.3
        read_some = self.rng.random() < 0.5

        def run():
            s = socket.create_connection(("127.0.0.1", self.s.port), timeout=60)
            s.sendall(
                post_bytes("/v1/completions", body).replace(
                    b"Connection: close", b"Connection: keep-alive"
                )
            )
            time.sleep(wait)
            if read_some:
                s.recv(100)
            s.close()
            return "disconnect"

        return run

    def plan(self, n):
        kinds = [
            (23, lambda: self.greedy(False, False)),
            (10, lambda: self.greedy(False, True)),
            (12, lambda: self.greedy(True, self.rng.random() < 0.5)),
            (15, lambda: self.sampled(self.rng.random() < 0.5, self.rng.random() < 0.5)),
            (15, self.malformed),
            (5, self.broken_http),
            (20, self.disconnect),
        ]
        weights = [w for w, _ in kinds]
        return [self.rng.choices(kinds, weights)[0][1]() for _ in range(n)]


def timed(job):
    t0 = time.time()
    kind = job()
    return kind, time.time() - t0


def run_pool(jobs, clients, seconds=None):
    results, failures = {}, []
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        for fut in concurrent.futures.as_completed([pool.submit(timed, j) for j in jobs]):
            try:
                kind, took = fut.result()
                results[kind] = results.get(kind, 0) + 1
                if seconds is not None:
                    seconds[kind] = max(seconds.get(kind, 0.0), took)
            except Exception as e:  # noqa: BLE001 -- every failure is reported, none hides another
                failures.append("%s: %s" % (type(e).__name__, e))
    return results, failures


def run_load(binary, clients=64, requests=1000, parallel=4, seed=1, log=print):
    """Runs the load; returns a report dict. Raises Check with every failure listed."""
    rng = random.Random(seed)
    with Server(
        binary,
        "--parallel",
        str(parallel),
        # A client that left holds its place until the server notices (within a poll), while
        # the client's next request is already in: twice the clients leaves room for that.
        "--queue",
        str(2 * clients),
        "-c",
        "512",
        "--max-body",
        str(MAX_BODY),
    ) as s:
        refs = {(p, n): reference(s, p, n) for p in PROMPTS for n in MAX_TOKENS}
        for k, r in refs.items():
            if r.finish != "length":
                raise Check(
                    "reference %r ended by %s: pick prompts that run to max_tokens" % (k, r.finish)
                )
        load = Load(s, refs, rng)
        # Warm-up: every HTTP thread and allocator arena comes into use once.
        run_pool(load.plan(clients), clients)
        load.ties, load.tokens = 0, 0
        rss_start = s.rss_kib()
        jobs = load.plan(requests)
        half = len(jobs) // 2
        t0 = time.time()
        slowest = {}
        r1, f1 = run_pool(jobs[:half], clients, slowest)
        idle1 = s.wait_idle()
        rss_mid = s.rss_kib()
        r2, f2 = run_pool(jobs[half:], clients, slowest)
        elapsed = time.time() - t0
        idle2 = s.wait_idle()
        rss_end = s.rss_kib()
        failures = f1 + f2
        if idle1 is not True or idle2 is not True:
            failures.append("slots or queue not back to idle: %s / %s" % (idle1, idle2))
        if rss_end - rss_mid > RSS_GROWTH_KIB:
            failures.append(
                "resident set grew by %d KiB between the halves (allowed %d)"
                % (rss_end - rss_mid, RSS_GROWTH_KIB)
            )
        if not s.alive():
            failures.append("the server died:\n" + s.log()[-2000:])
        results = {k: r1.get(k, 0) + r2.get(k, 0) for k in set(r1) | set(r2)}
    if s.exit_code != 0:
        failures.append("exit code %s after SIGTERM:\n%s" % (s.exit_code, s.log()[-2000:]))
    report = {
        "requests": requests,
        "clients": clients,
        "parallel": parallel,
        "results": results,
        "greedy_answers_parted_at_a_near_tie": load.ties,
        "seconds": round(elapsed, 1),
        "generated_tokens": load.tokens,
        "tokens_per_s": round(load.tokens / elapsed, 1),
        "slowest_s": {k: round(v, 2) for k, v in slowest.items()},
        "rss_start_kib": rss_start,
        "rss_mid_kib": rss_mid,
        "rss_end_kib": rss_end,
        "failures": len(failures),
    }
    log(json.dumps(report))
    if failures:
        raise Check("%d failures, first ones:\n" % len(failures) + "\n".join(failures[:20]))
    return report


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--binary", required=True)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    try:
        run_load(a.binary, a.clients, a.requests, a.parallel, a.seed)
    except Check as e:
        print("FAILED: %s" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
