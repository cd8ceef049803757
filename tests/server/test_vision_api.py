"""Images through the chat API (`image_url` parts with data: URLs) on the Qwen3-VL fixture (skipped
without the shared data): the first answer token and its log-probability equal what
`turbospark logits --image` gives for the same ids; an http(s) URL, bad base64 and an image a
text-only server cannot take are 400s that say why; the prompt cache keys image rows by the image's
bytes (another image is not answered from the first one's rows, the same one sent again is)."""

import base64
import math
import os
import struct
import subprocess
import tempfile
import unittest

import openai

from server_util import Server, binary_from_env

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "..", "..", "shared", "fixtures", "qwen3_vl")
CHATML_USER = "<|im_start|>user\n"
CHATML_TAIL = "<|im_end|>\n<|im_start|>assistant\n"


def data_url(path, mime="image/png"):
    with open(path, "rb") as f:
        return "data:%s;base64,%s" % (mime, base64.b64encode(f.read()).decode())


def image_message(url, before="Describe", after=" it"):
    return [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": before},
                {"type": "image_url", "image_url": {"url": url}},
                {"type": "text", "text": after},
            ],
        }
    ]


@unittest.skipUnless(os.path.isdir(os.path.join(FIXTURE, "hf")), "shared fixture qwen3_vl absent")
class VisionApi(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.binary = binary_from_env()
        cls.server = Server(
            cls.binary, "-m", os.path.join(FIXTURE, "hf"), "--chat-template", "chatml",
            "--kv-type", "f32", "-t", "2", "-c", "256", "--parallel", "2",
        ).__enter__()
        cls.client = openai.OpenAI(base_url=cls.server.base_url + "/v1", api_key="none",
                                   max_retries=0, timeout=120)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def tokenize(self, text, bos):
        status, body, _ = self.server.request("POST", "/tokenize",
                                              {"content": text, "add_special": bos})
        self.assertEqual(status, 200)
        return body["tokens"]

    def cli_last_logits(self, ids):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "l.f32")
            subprocess.run(
                [self.binary, "logits", "-m", os.path.join(FIXTURE, "hf"), "--image",
                 os.path.join(FIXTURE, "image.png"), "--tokens", ",".join(map(str, ids)),
                 "--out", out, "--kv-type", "f32", "-t", "2"],
                check=True, capture_output=True)
            with open(out, "rb") as f:
                data = f.read()
        vocab = len(data) // 4 // len(ids)
        return struct.unpack("<%df" % vocab, data[-4 * vocab:])

    def test_answer_equals_cli_logits(self):
        r = self.client.chat.completions.create(
            model="hf", messages=image_message(data_url(os.path.join(FIXTURE, "image.png"))),
            temperature=0, max_tokens=1, logprobs=True, top_logprobs=1)
        # The prompt as the server builds it: chatml around the text, the image's block (vision
        # start 5, 6 placeholders 7 for the 64 x 96 image, vision end 6) where its part was.
        ids = (self.tokenize(CHATML_USER + "Describe", True) + [5] + [7] * 6 + [6]
               + self.tokenize(" it" + CHATML_TAIL, False))
        self.assertEqual(r.usage.prompt_tokens, len(ids))
        logits = self.cli_last_logits(ids)
        top = max(range(len(logits)), key=lambda i: logits[i])
        lse = max(logits) + math.log(sum(math.exp(x - max(logits)) for x in logits))
        # Greedy: the answer's token is the CLI's argmax, its log-probability the same.
        got = r.choices[0].logprobs.content[0]
        self.assertAlmostEqual(got.logprob, logits[top] - lse, delta=1e-4)
        second = sorted(logits)[-2]
        self.assertGreater(logits[top] - second, 1e-3)  # a clear argmax, so the check can tell

    def test_other_image_is_not_taken_from_the_cache(self):
        png = data_url(os.path.join(FIXTURE, "image.png"))
        first = self.client.chat.completions.create(
            model="hf", messages=image_message(png), temperature=0, max_tokens=1,
            logprobs=True, top_logprobs=1)
        # The same conversation with the image flipped (a different PNG of the same size).
        import zlib
        with open(os.path.join(FIXTURE, "image_rgb.u8"), "rb") as f:
            rgb = f.read()
        h, w = 64, 96
        rows = [rgb[(h - 1 - y) * w * 3:(h - y) * w * 3] for y in range(h)]
        raw = b"".join(b"\x00" + r for r in rows)

        def chunk(kind, data):
            return (struct.pack(">I", len(data)) + kind + data
                    + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff))
        flipped = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                   + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
        url = "data:image/png;base64," + base64.b64encode(flipped).decode()
        second = self.client.chat.completions.create(
            model="hf", messages=image_message(url), temperature=0, max_tokens=1,
            logprobs=True, top_logprobs=1)
        self.assertNotAlmostEqual(first.choices[0].logprobs.content[0].logprob,
                                  second.choices[0].logprobs.content[0].logprob, delta=1e-6)
        # The cache keys image rows by the image's bytes: the other image's rows were computed
        # afresh (nothing past the text before it was taken from a cache) ...
        first_image_row = len(self.tokenize(CHATML_USER + "Describe", True)) + 1
        self.assertLessEqual(second.usage.prompt_tokens_details.cached_tokens, first_image_row)
        # ... and the first image sent again is answered from its rows, with the same answer.
        again = self.client.chat.completions.create(
            model="hf", messages=image_message(png), temperature=0, max_tokens=1,
            logprobs=True, top_logprobs=1)
        self.assertGreater(again.usage.prompt_tokens_details.cached_tokens, first_image_row + 6)
        self.assertAlmostEqual(first.choices[0].logprobs.content[0].logprob,
                               again.choices[0].logprobs.content[0].logprob, delta=1e-5)

    def test_bad_images_are_400s(self):
        cases = [
            ("https://example.com/cat.png", "does not fetch image URLs"),
            ("data:image/png;base64,%%%", "not valid base64"),
            ("data:image/png;base64," + base64.b64encode(b"GIF89a....").decode(),
             "unsupported format"),
            ("data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\nxx").decode(),
             "bad PNG data"),
            ("file:///etc/passwd", "not a data: URL"),
        ]
        # More images than the context (256) holds: 40 x 8 rows.
        png = data_url(os.path.join(FIXTURE, "image.png"))
        many = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": png}}] * 40}]
        status, body, raw = self.server.request("POST", "/v1/chat/completions", {"messages": many})
        self.assertEqual(status, 400, raw)
        self.assertIn("context", body["error"]["message"])
        for url, why in cases:
            status, body, raw = self.server.request(
                "POST", "/v1/chat/completions", {"messages": image_message(url)})
            self.assertEqual(status, 400, raw)
            self.assertIn(why, body["error"]["message"])


@unittest.skipUnless(os.path.isdir(os.path.join(FIXTURE, "hf")), "shared fixture qwen3_vl absent")
class ImageUrls(unittest.TestCase):
    """--allow-image-urls: an http URL is fetched (here from a local file server) and answered as
    the same image sent inline; a URL that fails is a 400 naming it."""

    def test_fetched_like_inline(self):
        import functools
        import http.server
        import threading
        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=FIXTURE)
        handler.log_message = lambda *a: None
        files = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=files.serve_forever, daemon=True).start()
        base = "http://127.0.0.1:%d/" % files.server_address[1]
        try:
            with Server(binary_from_env(), "-m", os.path.join(FIXTURE, "hf"), "--chat-template",
                        "chatml", "--kv-type", "f32", "-t", "2", "-c", "256", "--parallel", "1",
                        "--allow-image-urls") as s:
                client = openai.OpenAI(base_url=s.base_url + "/v1", api_key="none", max_retries=0)
                answers = [
                    client.chat.completions.create(
                        model="hf", messages=image_message(url), temperature=0, max_tokens=1,
                        logprobs=True, top_logprobs=1, extra_body={"cache_prompt": False})
                    .choices[0].logprobs.content[0].logprob
                    for url in (base + "image.png",
                                data_url(os.path.join(FIXTURE, "image.png")))
                ]
                self.assertAlmostEqual(answers[0], answers[1], delta=1e-6)
                status, body, raw = s.request("POST", "/v1/chat/completions",
                                              {"messages": image_message(base + "missing.png")})
                self.assertEqual(status, 400, raw)
                self.assertIn("answered HTTP 404", body["error"]["message"])
        finally:
            files.shutdown()


class TextOnlyServerRefusesImages(unittest.TestCase):
    def test_refused(self):
        png = os.path.join(HERE, "..", "fixtures", "images", "wide.png")
        with Server(binary_from_env(), "-c", "256", "--parallel", "1") as s:
            status, body, raw = s.request(
                "POST", "/v1/chat/completions", {"messages": image_message(data_url(png))})
            self.assertEqual(status, 400, raw)
            self.assertIn("takes no images", body["error"]["message"])


if __name__ == "__main__":
    unittest.main()
