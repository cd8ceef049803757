"""What running the server as a service needs: CORS for web pages on other origins, the access
log (text and JSON), and a graceful stop on SIGTERM within --shutdown-timeout."""

import http.client
import json
import re
import signal
import socket
import time
import unittest

from server_util import Server, binary_from_env

MODEL = "tiny-moe-q8_0"


def wait_for(pred, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    return pred()


def open_stream(server, body):
    """A streamed completion: the connection, its response, and the first event read."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    conn.request("POST", "/v1/completions", body=json.dumps(body),
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    first = resp.readline()
    while first.strip() == b"":
        first = resp.readline()
    return conn, resp, first


def rest_of(resp):
    try:
        return resp.read()
    except (http.client.IncompleteRead, ConnectionError) as e:
        return getattr(e, "partial", b"")


class ServerOps(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.binary = binary_from_env()

    def test_cors(self):
        origin = "https://app.example"
        with Server(self.binary, "--cors", origin, "--api-key", "k", "--parallel", "1",
                    "-c", "256") as s:
            conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
            conn.request("OPTIONS", "/v1/chat/completions", headers={
                "Origin": origin,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization, content-type"})
            r = conn.getresponse()
            r.read()
            self.assertEqual(r.status, 204)  # the preflight carries no key, and needs none
            self.assertEqual(r.getheader("Access-Control-Allow-Origin"), origin)
            self.assertIn("POST", r.getheader("Access-Control-Allow-Methods"))
            self.assertEqual(r.getheader("Access-Control-Allow-Headers"),
                             "authorization, content-type")
            # The answers carry the header too, a refusal included (the page can read why).
            status, _, _ = s.request("GET", "/v1/models", headers={"Origin": origin})
            self.assertEqual(status, 401)
            conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
            conn.request("GET", "/api/tags", headers={"Origin": origin,
                                                      "Authorization": "Bearer k"})
            r = conn.getresponse()
            r.read()
            self.assertEqual(r.status, 200)
            self.assertEqual(r.getheader("Access-Control-Allow-Origin"), origin)
            # Another origin gets no CORS header: the browser keeps the answer from its page.
            conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
            conn.request("GET", "/api/tags", headers={"Origin": "https://evil.example",
                                                      "Authorization": "Bearer k"})
            r = conn.getresponse()
            r.read()
            self.assertIsNone(r.getheader("Access-Control-Allow-Origin"))
        with Server(self.binary, "--cors", "*", "--parallel", "1", "-c", "256") as s:
            conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
            conn.request("POST", "/v1/completions", body=json.dumps({"prompt": "Hi", "max_tokens": 1}),
                         headers={"Origin": "http://localhost:3000",
                                  "Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
            self.assertEqual(r.getheader("Access-Control-Allow-Origin"), "*")
        with Server(self.binary, "--parallel", "1", "-c", "256") as s:
            conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
            conn.request("GET", "/v1/models", headers={"Origin": origin})
            r = conn.getresponse()
            r.read()
            self.assertIsNone(r.getheader("Access-Control-Allow-Origin"))

    def test_access_log(self):
        with Server(self.binary, "--log-format", "json", "--parallel", "1", "-c", "256") as s:
            # Counts of generated tokens are asserted: no end of text may cut an answer short.
            _, j, _ = s.request("POST", "/v1/completions",
                                {"prompt": "Once upon a time", "max_tokens": 5, "ignore_eos": True})
            s.request("GET", "/no/such/route")
            s.request("POST", "/api/generate", {"model": MODEL, "prompt": "Once upon a time",
                                                "raw": True, "stream": True,
                                                "options": {"num_predict": 3, "temperature": 0}})

            def lines():
                out = []
                for l in s.log().splitlines():
                    if l.startswith("{"):
                        out.append(json.loads(l))
                return out if len(out) >= 3 else None

            got = wait_for(lines)
            self.assertIsNotNone(got, s.log())
            by_path = {l["path"]: l for l in got}
            c = by_path["/v1/completions"]
            self.assertEqual((c["method"], c["status"]), ("POST", 200))
            self.assertEqual(c["prompt_tokens"], j["usage"]["prompt_tokens"])
            self.assertEqual(c["generated_tokens"], 5)
            self.assertGreaterEqual(c["ms"], 0)
            self.assertRegex(c["time"], r"^\d{4}-\d\d-\d\dT")
            self.assertEqual(by_path["/no/such/route"]["status"], 404)
            g = by_path["/api/generate"]  # streamed: logged once its body is written
            self.assertEqual((g["status"], g["generated_tokens"]), (200, 3))
        with Server(self.binary, "--parallel", "1", "-c", "256") as s:
            s.request("POST", "/v1/completions",
                      {"prompt": "Hi", "max_tokens": 2, "ignore_eos": True})
            line = wait_for(lambda: re.search(
                r"\S+Z POST /v1/completions 200 prompt=\d+ generated=2 ms=\d+", s.log()))
            self.assertIsNotNone(line, s.log())
        with Server(self.binary, "--log-format", "off", "--parallel", "1", "-c", "256") as s:
            s.request("POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 2})
            time.sleep(0.3)
            self.assertNotIn("/v1/completions", s.log())

    def test_sigterm_lets_a_stream_finish(self):
        with Server(self.binary, "--shutdown-timeout", "60", "--parallel", "1", "-c", "1024") as s:
            conn, resp, first = open_stream(
                s, {"prompt": "Once upon a time", "max_tokens": 300, "ignore_eos": True,
                    "stream": True, "temperature": 0})
            self.assertTrue(first.startswith(b"data: "), first)
            s.proc.send_signal(signal.SIGTERM)
            # No new connections while it drains (refused at once, not left waiting).
            def refused():
                try:
                    socket.create_connection(("127.0.0.1", s.port), timeout=2).close()
                    return False
                except ConnectionRefusedError:
                    return True
            self.assertTrue(wait_for(refused, 5))
            body = first + rest_of(resp)
            conn.close()
            events = [l[6:] for l in body.decode().split("\n") if l.startswith("data: ")]
            self.assertEqual(events[-1], "[DONE]")
            self.assertEqual(json.loads(events[-2])["choices"][0]["finish_reason"], "length")
            text = "".join(json.loads(e)["choices"][0]["text"] for e in events[:-1])
            s.proc.wait(60)
            s.stop()
        self.assertEqual(s.exit_code, 0)
        self.assertGreater(len(text), 300)  # 300 tokens arrived, not a cut stream

    def test_sigterm_ends_streams_past_the_timeout(self):
        with Server(self.binary, "--shutdown-timeout", "1", "--parallel", "1", "-c", "16384") as s:
            conn, resp, first = open_stream(
                s, {"prompt": "Once upon a time", "max_tokens": 16000, "ignore_eos": True,
                    "stream": True})
            start = time.time()
            s.proc.send_signal(signal.SIGTERM)
            body = first + rest_of(resp)
            conn.close()
            s.proc.wait(30)
            took = time.time() - start
            s.stop()
        self.assertEqual(s.exit_code, 0)
        # 16000 tokens take minutes on this model; the stream was ended after about a second.
        self.assertLess(took, 15)
        self.assertNotIn(b"[DONE]", body)


if __name__ == "__main__":
    unittest.main()
