"""Requests that once took the server down or around its limits (issue 32): each is refused
with its status while the server stays up and /health keeps answering."""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import unittest

from server_util import Server, binary_from_env

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Deeper than the server's bound of 64 levels by far: each of these overflowed the stack once.
DEPTH = 60000


def deep(n, leaf="1"):
    return "[" * n + leaf + "]" * n


def chat_body(extra):
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
    return json.dumps(body)[:-1] + ", " + extra + "}"


def send_head(port, head):
    """Sends raw bytes and returns the status line's code (or the exception's name)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(head)
        return int(s.recv(64).split(b" ")[1])
    finally:
        s.close()


class Hardening(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.binary = binary_from_env()

    def assert_refused(self, server, path, body, status=400, text="deeper than 64 levels"):
        got, j, raw = server.request("POST", path, body.encode())
        self.assertEqual(got, status, raw[:200])
        self.assertIn(text, j["error"]["message"])
        self.assertTrue(server.alive())
        self.assertEqual(server.health()["status"], "ok")

    def test_deep_nesting_is_a_400(self):
        with Server(self.binary, "--parallel", "1", "-c", "256", "--chat-template", "chatml") as s:
            props = '{"type": "object", "properties": {"a": ' * 30000 + "{}" + "}}" * 30000
            self.assert_refused(
                s,
                "/v1/chat/completions",
                chat_body('"tools": [{"type": "function", "function": {"name": "f", '
                          '"parameters": %s}}]' % props),
            )
            self.assert_refused(s, "/detokenize", '{"tokens": %s}' % deep(DEPTH))
            self.assert_refused(
                s,
                "/v1/chat/completions",
                chat_body('"response_format": {"type": "json_schema", "json_schema": {"name": '
                          '"x", "schema": {"enum": [%s]}}}' % deep(DEPTH)),
            )
            self.assert_refused(
                s,
                "/v1/chat/completions",
                chat_body('"tools": [{"type": "function", "function": {"name": "f", "parameters": '
                          '{"type": "object", "properties": {"a": {"enum": [%s]}}}}}]'
                          % deep(DEPTH)),
            )
            # Arguments are JSON text inside a string: the body's own nesting is shallow.
            messages = [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "type": "function",
                            "id": "c",
                            "function": {"name": "f", "arguments": '{"a": %s}' % deep(DEPTH)},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c", "content": "x"},
            ]
            self.assert_refused(
                s,
                "/v1/chat/completions",
                json.dumps({"messages": messages}),
                text="must be a JSON object",
            )
        self.assertEqual(s.exit_code, 0)

    def test_chunked_body_is_cut_at_the_limit(self):
        with Server(self.binary, "--max-body", "1M", "--parallel", "1", "-c", "256") as s:
            rss = s.rss_kib()
            c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
            c.sendall(
                b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            # The answer is read as soon as it comes: once the server closes, what the client
            # still sends resets the connection, and a reset may drop an answer not yet read.
            answer = []
            reader = threading.Thread(target=lambda: answer.append(c.recv(256)))
            reader.start()
            chunk = b"%x\r\n" % (1 << 20) + b" " * (1 << 20) + b"\r\n"
            sent = 0
            try:
                for _ in range(64):  # 64 MiB unless the server stops reading
                    c.sendall(chunk)
                    sent += 1
            except OSError:
                pass
            reader.join(10)
            c.close()
            answer = answer[0] if answer else b""
            self.assertTrue(answer.startswith(b"HTTP/1.1 413 "), answer)
            self.assertLess(sent, 64)
            self.assertLess(s.rss_kib() - rss, 16 << 10)
            self.assertEqual(s.health()["status"], "ok")

    def test_too_many_headers_is_a_431(self):
        with Server(self.binary, "--parallel", "1", "-c", "256") as s:
            rss = s.rss_kib()
            headers = b"".join(b"X-H%d: v\r\n" % i for i in range(10000))
            self.assertEqual(send_head(s.port, b"GET /health HTTP/1.1\r\n" + headers + b"\r\n"), 431)
            self.assertEqual(send_head(s.port, b"GET /" + b"a" * 10000 + b" HTTP/1.1\r\n\r\n"), 414)
            self.assertLess(s.rss_kib() - rss, 8 << 10)
            self.assertEqual(s.health()["status"], "ok")

    def test_slow_headers_do_not_starve_health(self):
        with Server(self.binary, "--parallel", "1", "-c", "256") as s:
            slow = []
            for _ in range(300):
                c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
                c.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # never finished
                slow.append(c)
            t0 = time.time()
            self.assertEqual(s.health()["status"], "ok")
            self.assertLess(time.time() - t0, 1.0)
            status, _, _ = s.request("POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 1})
            self.assertEqual(status, 200)
            for c in slow:
                c.close()

    def test_over_capacity_is_a_quick_503(self):
        # Two request workers, both held by streams: the third request is refused at once, while
        # /health (a lane of its own) still answers.
        with Server(self.binary, "--parallel", "2", "--http-threads", "2", "-c", "8192") as s:
            long = json.dumps(
                {"prompt": "Once", "max_tokens": 8000, "ignore_eos": True, "stream": True}
            ).encode()
            held = []
            for _ in range(2):
                c = socket.create_connection(("127.0.0.1", s.port))
                c.sendall(
                    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                    b"\r\nContent-Length: %d\r\n\r\n" % len(long) + long
                )
                c.recv(16)  # its stream has started: it holds a worker
                held.append(c)
            t0 = time.time()
            status, j, raw = s.request("POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 2})
            self.assertEqual(status, 503, raw)
            self.assertEqual(j["error"]["code"], "server_busy")
            self.assertLess(time.time() - t0, 1.0)
            self.assertEqual(s.health()["status"], "ok")
            for c in held:
                c.close()
            self.assertIs(s.wait_idle(timeout=10), True)
            status, _, _ = s.request("POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 2})
            self.assertEqual(status, 200)

    def test_failed_generation_is_a_500(self):
        with Server(self.binary, "--parallel", "1", "-c", "256") as s:
            bias = {str(i): -100 for i in range(4096)}  # every token of the bundled model banned
            status, j, raw = s.request(
                "POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 2, "logit_bias": bias}
            )
            self.assertEqual(status, 500, raw)
            self.assertEqual(j["error"]["type"], "server_error")
            self.assertIn("every token is banned", j["error"]["message"])

    def test_model_rewritten_in_place_is_detected(self):
        with tempfile.TemporaryDirectory() as d:
            model = os.path.join(d, "model.gguf")
            shutil.copyfile(os.path.join(REPO, "models", "tiny-moe-q8_0.gguf"), model)
            with Server(self.binary, "-m", model, "--parallel", "1", "-c", "256") as s:
                body = {"prompt": "Hi", "max_tokens": 2, "temperature": 0}
                self.assertEqual(s.request("POST", "/v1/completions", body)[0], 200)
                # The same size, new bytes (the same ones, even: the write is what counts).
                with open(model, "r+b") as f:
                    data = f.read()
                    f.seek(0)
                    f.write(data)
                status, j, raw = s.request("POST", "/v1/completions", body)
                self.assertEqual(status, 500, raw)
                self.assertIn("changed under the server", j["error"]["message"])
                status, j, raw = s.request("GET", "/health")
                self.assertEqual(status, 503, raw)
                self.assertEqual(j["status"], "failed")
                status, j, raw = s.request("POST", "/v1/completions", body)
                self.assertEqual(status, 503, raw)
                self.assertIn("changed under the server", j["error"]["message"])

    def test_memory_budget_counts_every_slot(self):
        out = subprocess.run(
            [self.binary, "serve", "--port", "0", "--parallel", "32", "--memory-budget", "40M"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertIn("cannot hold the KV caches of 32 slots", out.stderr)


if __name__ == "__main__":
    unittest.main()
