"""Start and stop a `turbospark serve` process for the tests, talk raw HTTP to it, and compare
answers with a reference.

The server is started on port 0 (any free port); the port is read from its "serving ... on
http://HOST:PORT" line on stderr. Its stderr is drained by a thread so that a chatty server never
blocks on a full pipe.
"""

import http.client
import json
import os
import re
import signal
import subprocess
import threading
import time

START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 30

# Batched rows are bit-close, not bit-identical, to a lone row (the f32 router matmul sums in an
# order that depends on the batch's row count; q8_0 activation rounding can turn that into up to
# ~0.1 in the logits on the bundled model). A greedy answer produced while other requests shared
# its forward passes may therefore part from the lone answer where the lone answer's top two
# log-probabilities are that close, and nowhere else.
TIE_GAP = 0.25


class Server:
    """`with Server(binary, "--parallel", "4") as s:` runs a server for the block."""

    def __init__(self, binary, *args):
        self.cmd = [binary, "serve", "--port", "0", *args]
        self.proc = None
        self.port = None
        self.stderr_lines = []
        self.exit_code = None
        self._ready = threading.Event()

    def __enter__(self):
        self.proc = subprocess.Popen(
            self.cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
        )
        threading.Thread(target=self._drain, daemon=True).start()
        if not self._ready.wait(START_TIMEOUT_S) or self.port is None:
            self._kill()
            raise RuntimeError("server did not start: " + " ".join(self.cmd) + "\n" + self.log())
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def _drain(self):
        for line in self.proc.stderr:
            self.stderr_lines.append(line)
            m = re.search(r"serving '.*' on http://[^:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                self._ready.set()
        self._ready.set()

    def _kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.exit_code = self.proc.wait()

    def stop(self):
        """SIGTERM, as a service manager would; the exit code is kept in exit_code."""
        if self.proc is None or self.exit_code is not None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.exit_code = self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._kill()
            raise RuntimeError("server did not stop within %d s of SIGTERM" % STOP_TIMEOUT_S)

    def log(self):
        return "".join(self.stderr_lines)

    @property
    def base_url(self):
        return "http://127.0.0.1:%d" % self.port

    def alive(self):
        return self.proc.poll() is None

    def rss_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmRSS for the server process")

    def request(self, method, path, body=None, headers=None, timeout=120):
        """Raw HTTP: returns (status, parsed JSON or None, raw body bytes)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
            hdrs = {"Content-Type": "application/json"}
            hdrs.update(headers or {})
            conn.request(method, path, body=data, headers=hdrs)
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            conn.close()
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
        return resp.status, parsed, raw

    def health(self):
        status, j, raw = self.request("GET", "/health", timeout=10)
        if status != 200:
            raise RuntimeError("GET /health answered %d: %r" % (status, raw))
        return j

    def wait_idle(self, timeout=15):
        """True once every slot is free and nothing waits; the last /health otherwise."""
        deadline = time.time() + timeout
        h = self.health()
        while time.time() < deadline:
            if h["slots_free"] == h["slots_total"] and h["queued"] == 0:
                return True
            time.sleep(0.05)
            h = self.health()
        return h


def sse_events(raw):
    """The data payloads of a server-sent event stream, in order."""
    events = []
    for block in raw.decode("utf-8").split("\n\n"):
        for line in block.split("\n"):
            if line.startswith("data: "):
                events.append(line[len("data: ") :])
    return events


def run_reference(binary, prompt, n):
    """The continuation `turbospark run --temp 0` prints for the bundled model."""
    out = subprocess.run(
        [binary, "run", "-p", prompt, "-n", str(n), "--temp", "0", "--no-display-prompt"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if out.returncode != 0:
        raise RuntimeError("turbospark run failed: " + out.stderr)
    assert out.stdout.endswith("\n")
    return out.stdout[:-1]


class Reference:
    """A greedy completion produced alone, with its tokens' top-two log-probability gaps."""

    def __init__(self, choice):
        lp = choice["logprobs"]
        self.text = choice["text"]
        self.finish = choice["finish_reason"]
        self.prefixes = []
        self.gaps = []
        text = ""
        for token, top in zip(lp["tokens"], lp["top_logprobs"]):
            text += token
            self.prefixes.append(text)
            best = sorted(top.values(), reverse=True)
            self.gaps.append(best[0] - best[1] if len(best) > 1 else float("inf"))

    def check(self, got):
        """None when `got` is this answer or parts from it only at a near-tie; else why not."""
        if got == self.text:
            return None
        if self.finish != "length":
            return "the reference ended by %s: its last step has no log-probabilities" % self.finish
        i = 0
        while i + 1 < len(self.prefixes) and got.startswith(self.prefixes[i]):
            i += 1
        # A different token may still spell the same text for a step: look one step back too.
        gap = min(self.gaps[i], self.gaps[i - 1] if i > 0 else self.gaps[i])
        if gap < TIE_GAP:
            return None
        return (
            "parted from the lone answer at step %d where its top two log-probabilities are "
            "%.3f apart\n got: %r\nwant: %r" % (i, gap, got, self.text)
        )


def reference(server, prompt, max_tokens):
    status, j, raw = server.request(
        "POST",
        "/v1/completions",
        {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "logprobs": 2},
    )
    if status != 200:
        raise RuntimeError("reference request failed: %d %r" % (status, raw))
    return Reference(j["choices"][0])


def binary_from_env():
    b = os.environ.get("TS_BINARY")
    if not b:
        raise RuntimeError("TS_BINARY is not set: run the tests through run_tests.py --binary PATH")
    return b


def client_for(server, key="none"):
    """An openai client for `server` (imported here: the benchmarks use this module without it)."""
    import openai

    return openai.OpenAI(base_url=server.base_url + "/v1", api_key=key, max_retries=0, timeout=120)
