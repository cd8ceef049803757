"""Embeddings through the official `openai` and `ollama` clients (and raw HTTP where a client hides
what is checked: statuses, error bodies, base64), on the Qwen3-Embedding-style fixture whose
sentence-transformers vectors are in its ref.json; the bundled model, which declares no pooling, is
refused. Also `turbospark embed`, and a BERT encoder served (BertEncoder)."""

import base64
import json
import math
import os
import struct
import subprocess
import unittest

import openai

from server_util import Server, binary_from_env, client_for

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "fixtures", "models", "qwen3_embedding")
GGUF = os.path.join(FIXTURE, "model-f32.gguf")
MODEL = "qwen3-embed"


def reference():
    with open(os.path.join(FIXTURE, "ref.json")) as f:
        return json.load(f)


def embed_command(model, texts):
    """`turbospark embed`'s vector of each text (one a stdin line)."""
    r = subprocess.run(
        [binary_from_env(), "embed", "-m", model, "-t", "2"],
        input="\n".join(texts) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()]


def cosine(a, b):
    ab = sum(x * y for x, y in zip(a, b))
    return ab / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


class Refusals:
    """For a test case whose `server` is running."""

    def assert_refused(self, path, body, status, words):
        """A raw request refused with `status` and a one-line message holding `words`."""
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        got, j, text = self.server.request("POST", path, raw)
        self.assertEqual(got, status, text[:300])
        message = j["error"] if path.startswith("/api/") else j["error"]["message"]
        self.assertIn(words, message)
        self.assertNotIn("\n", message)
        self.assertTrue(self.server.alive())


class EmbeddingsApi(Refusals, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.binary = binary_from_env()
        cls.ref = reference()
        cls.server = Server(
            cls.binary, "-m", GGUF, "--alias", MODEL, "--parallel", "2", "-c", "128"
        ).__enter__()
        cls.client = client_for(cls.server)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        assert cls.server.exit_code == 0, cls.server.log()

    def assert_matches(self, vectors, key="embeddings"):
        self.assertEqual(len(vectors), len(self.ref[key]))
        for got, want in zip(vectors, self.ref[key]):
            self.assertEqual(len(got), len(want))
            self.assertGreaterEqual(cosine(got, want), 0.9999)

    def test_batch_of_texts_float_and_base64(self):
        inputs = self.ref["inputs"]
        # The client asks for base64 unless told otherwise, and decodes it.
        r = self.client.embeddings.create(model=MODEL, input=inputs)
        self.assertEqual([d.index for d in r.data], list(range(len(inputs))))
        self.assert_matches([d.embedding for d in r.data])
        self.assertEqual(r.model, MODEL)
        self.assertEqual(r.usage.prompt_tokens, sum(len(i) for i in self.ref["ids"]))
        self.assertEqual(r.usage.total_tokens, r.usage.prompt_tokens)
        f = self.client.embeddings.create(model=MODEL, input=inputs, encoding_format="float")
        self.assert_matches([d.embedding for d in f.data])
        # base64 is the float vector's little-endian float32 bytes.
        status, j, _ = self.server.request(
            "POST", "/v1/embeddings", {"input": inputs[0], "encoding_format": "base64"}
        )
        self.assertEqual(status, 200)
        raw = base64.b64decode(j["data"][0]["embedding"])
        unpacked = list(struct.unpack("<%df" % (len(raw) // 4), raw))
        self.assertEqual(unpacked, f.data[0].embedding)
        one = self.client.embeddings.create(model=MODEL, input=inputs[1], dimensions=64)
        self.assertEqual(len(one.data), 1)
        self.assertGreaterEqual(cosine(one.data[0].embedding, self.ref["embeddings"][1]), 0.9999)

    def test_token_id_inputs(self):
        ids = self.ref["ids"]
        r = self.client.embeddings.create(model=MODEL, input=ids, encoding_format="float")
        self.assert_matches([d.embedding for d in r.data])
        self.assertEqual(r.usage.prompt_tokens, sum(len(i) for i in ids))
        one = self.client.embeddings.create(model=MODEL, input=ids[0], encoding_format="float")
        self.assertGreaterEqual(cosine(one.data[0].embedding, self.ref["embeddings"][0]), 0.9999)

    def test_large_batch_in_order(self):
        # More inputs than the queue holds (64): the route keeps --parallel of them queued.
        inputs = ["item number %d of the batch" % i for i in range(150)]
        r = self.client.embeddings.create(model=MODEL, input=inputs, encoding_format="float")
        self.assertEqual([d.index for d in r.data], list(range(150)))
        for i in (0, 77, 149):
            alone = self.client.embeddings.create(
                model=MODEL, input=inputs[i], encoding_format="float"
            )
            self.assertGreaterEqual(cosine(r.data[i].embedding, alone.data[0].embedding), 0.9999)
        self.assertEqual(self.server.health()["slots_free"], 2)

    def test_beside_a_generation(self):
        # An embedding's prompt rows share forward passes with another slot's decode rows.
        import threading

        done = {}

        def generate():
            done["r"] = self.client.completions.create(
                model=MODEL, prompt="The river", max_tokens=40, temperature=0
            )

        t = threading.Thread(target=generate)
        t.start()
        for _ in range(3):
            r = self.client.embeddings.create(
                model=MODEL, input=self.ref["inputs"], encoding_format="float"
            )
            self.assert_matches([d.embedding for d in r.data])
        t.join()
        self.assertEqual(done["r"].usage.completion_tokens, 40)

    def test_hostile_inputs(self):
        p = "/v1/embeddings"
        self.assert_refused(p, {}, 400, "'input' is required")
        self.assert_refused(p, {"input": []}, 400, "'input' is an empty list")
        self.assert_refused(p, {"input": ""}, 400, "'input' is an empty string")
        self.assert_refused(p, {"input": ["a", ""]}, 400, "'input[1]' is an empty string")
        self.assert_refused(p, {"input": ["x"] * 2049}, 400, "more than the 2048")
        self.assert_refused(p, {"input": [[1, "x"]]}, 400, "'input[0]' must hold token ids")
        self.assert_refused(p, {"input": [1.5, 2]}, 400, "must hold token ids")
        self.assert_refused(p, {"input": ["a", 5]}, 400, "'input[1]' must be a string or a list")
        self.assert_refused(p, {"input": [[]]}, 400, "'input[0]' is an empty list of token ids")
        self.assert_refused(p, {"input": [[5, 99999]]}, 400, "outside the vocabulary")
        self.assert_refused(p, {"input": [-1]}, 400, "token id -1")
        self.assert_refused(p, {"input": {"a": 1}}, 400, "'input' must be a string")
        self.assert_refused(p, {"input": "a", "encoding_format": "hex"}, 400, "encoding_format")
        self.assert_refused(p, {"input": "a", "dimensions": 32}, 400, "'dimensions' must be 64")
        self.assert_refused(p, {"input": "a", "dimensions": "x"}, 400, "'dimensions'")
        self.assert_refused(p, {"input": "a", "model": "other"}, 404, "does not exist")
        self.assert_refused(p, {"input": list(range(200))}, 400, "context")
        self.assert_refused(p, b"[1, 2", 400, "not valid JSON")
        with self.assertRaises(openai.BadRequestError):
            self.client.embeddings.create(model=MODEL, input="")

    def test_ollama_embed(self):
        try:
            import ollama
        except ImportError:
            self.skipTest("the 'ollama' package is missing (run_tests.py installs it)")

        client = ollama.Client(host=self.server.base_url, timeout=120)
        r = client.embed(model=MODEL, input=self.ref["inputs"])
        self.assert_matches(r.embeddings)
        self.assertEqual(r.prompt_eval_count, sum(len(i) for i in self.ref["ids"]))
        one = client.embed(model=MODEL + ":latest", input=self.ref["inputs"][2])
        self.assertGreaterEqual(cosine(one.embeddings[0], self.ref["embeddings"][2]), 0.9999)
        legacy = client.embeddings(model=MODEL, prompt=self.ref["inputs"][3])
        self.assertGreaterEqual(cosine(legacy.embedding, self.ref["embeddings"][3]), 0.9999)
        # truncate (on by default) keeps the context's first tokens; off, a long input is refused.
        long_text = " ".join(["word"] * 300)
        self.assertEqual(len(client.embed(model=MODEL, input=long_text).embeddings[0]), 64)
        self.assert_refused(
            "/api/embed", {"model": MODEL, "input": long_text, "truncate": False}, 400, "context"
        )
        self.assert_refused("/api/embed", {"model": "other", "input": "a"}, 404, "not found")
        self.assert_refused("/api/embed", {"model": MODEL, "input": []}, 400, "empty list")
        self.assert_refused("/api/embed", {"model": MODEL, "input": [[1, 2]]}, 400, "must be")
        self.assert_refused("/api/embed", {"input": "a"}, 400, "'model' is required")
        self.assert_refused("/api/embed", {"model": MODEL, "input": "a", "x": 1}, 400, "'x'")
        self.assert_refused("/api/embeddings", {"model": MODEL, "prompt": ["a"]}, 400, "'prompt'")


class NoPooling(unittest.TestCase):
    def test_refused_with_400(self):
        with Server(binary_from_env(), "--parallel", "1", "-c", "256") as s:
            model = s.request("GET", "/v1/models")[1]["data"][0]["id"]
            for path, body in (
                ("/v1/embeddings", {"input": "hello"}),
                ("/api/embed", {"model": model, "input": "hello"}),
                ("/api/embeddings", {"model": model, "prompt": "hello"}),
            ):
                status, j, text = s.request("POST", path, body)
                self.assertEqual(status, 400, text[:300])
                message = j["error"] if path.startswith("/api/") else j["error"]["message"]
                self.assertTrue(message.startswith("model declares no pooling;"), message)


class EmbedCommand(unittest.TestCase):
    def run_embed(self, *args, stdin=None):
        return subprocess.run(
            [binary_from_env(), "embed", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def test_texts_and_stdin_lines(self):
        ref = reference()
        r = self.run_embed("-m", GGUF, ref["inputs"][0], ref["inputs"][1])
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 2)
        for line, want in zip(lines, ref["embeddings"]):
            self.assertGreaterEqual(cosine(json.loads(line), want), 0.9999)
        r = self.run_embed("-m", os.path.join(FIXTURE, "hf"), stdin="\n".join(ref["inputs"]) + "\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        got = [json.loads(line) for line in r.stdout.splitlines()]
        self.assertEqual(len(got), len(ref["inputs"]))
        for g, want in zip(got, ref["embeddings"]):
            self.assertGreaterEqual(cosine(g, want), 0.9999)

    def test_model_without_pooling(self):
        plain = os.path.join(HERE, "..", "fixtures", "models", "qwen3", "model-f32.gguf")
        r = self.run_embed("-m", plain, "hello")
        self.assertEqual(r.returncode, 2)
        self.assertIn("model declares no pooling", r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1)


class BertEncoder(Refusals, unittest.TestCase):
    """A BERT encoder (tests/fixtures/models/bert_embedding, 64 positions) served: /v1/embeddings
    and Ollama's /api/embed give `turbospark embed`'s vectors bit for bit (and sentence-transformers'
    within the encoder test's bound), whichever texts share its passes; generation is refused by
    name; the tokenizer routes use its WordPiece vocabulary."""

    BERT = os.path.join(HERE, "..", "fixtures", "models", "bert_embedding")
    MODEL = "bert-embed"
    # sentence-transformers' vectors against the encoder's, elementwise (test_bert_embedding.cpp).
    REF_TOL = 3e-7

    @classmethod
    def setUpClass(cls):
        with open(os.path.join(cls.BERT, "ref.json")) as f:
            cls.ref = json.load(f)
        cls.gguf = os.path.join(cls.BERT, "model-f32.gguf")
        # A queue shorter than the batches below: the route keeps --parallel of them queued.
        args = ["-m", cls.gguf, "--alias", cls.MODEL, "--parallel", "3", "--queue", "2", "-t", "2"]
        cls.server = Server(binary_from_env(), *args).__enter__()
        cls.client = client_for(cls.server)
        cls.cli = embed_command(cls.gguf, cls.ref["inputs"])

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        assert cls.server.exit_code == 0, cls.server.log()

    def embed(self, inputs, **kw):
        return self.client.embeddings.create(model=self.MODEL, input=inputs, **kw)

    def test_vectors_are_the_embed_commands(self):
        self.assertEqual(len(self.cli), len(self.ref["inputs"]))
        # The client asks for base64 unless told otherwise, and decodes it.
        for fmt in ({"encoding_format": "float"}, {}):
            r = self.embed(self.ref["inputs"], **fmt)
            self.assertEqual([d.index for d in r.data], list(range(len(self.cli))))
            got = [d.embedding for d in r.data]
            self.assertEqual(got, self.cli, fmt)
            for g, want in zip(got, self.ref["embeddings"]):
                self.assertGreaterEqual(cosine(g, want), 0.9999)
                self.assertLessEqual(max(abs(x - y) for x, y in zip(g, want)), self.REF_TOL)
            self.assertEqual(r.model, self.MODEL)
            self.assertEqual(r.usage.prompt_tokens, sum(len(i) for i in self.ref["ids"]))
            self.assertEqual(r.usage.total_tokens, r.usage.prompt_tokens)
        # Token ids, a list of them and one alone, are the texts' vectors.
        ids = self.ref["ids"]
        self.assertEqual(
            [d.embedding for d in self.embed(ids, encoding_format="float").data], self.cli
        )
        one = self.embed(ids[3], encoding_format="float")
        self.assertEqual(one.data[0].embedding, self.cli[3])
        self.assertEqual(one.usage.prompt_tokens, len(ids[3]))
        self.assertEqual(
            self.embed(self.ref["inputs"][1], dimensions=32).data[0].embedding, self.cli[1]
        )

    def test_large_batch_in_order(self):
        # More inputs than the queue holds; texts of many lengths share the passes.
        inputs = [self.ref["inputs"][i % 5] + " %d" % i for i in range(120)]
        r = self.embed(inputs, encoding_format="float")
        self.assertEqual([d.index for d in r.data], list(range(120)))
        for i in (0, 61, 119):
            alone = self.embed(inputs[i], encoding_format="float")
            self.assertEqual(r.data[i].embedding, alone.data[0].embedding)
        health = self.server.health()
        self.assertEqual(health["status"], "ok")
        self.assertEqual(health["slots_free"], 3)
        self.assertEqual(health["queued"], 0)

    def test_ollama_embed_truncates_only_when_asked(self):
        long_text = " ".join(["word"] * 100)  # 202 tokens with [CLS] and [SEP]
        self.assert_refused(
            "/v1/embeddings",
            {"input": ["a", long_text]},
            400,
            "'input[1]': 202 tokens exceed the encoder's 64 positions",
        )
        self.assert_refused(
            "/api/embed",
            {"model": self.MODEL, "input": long_text, "truncate": False},
            400,
            "202 tokens exceed the encoder's 64 positions",
        )
        status, j, text = self.server.request(
            "POST", "/api/embed", {"model": self.MODEL, "input": [long_text, self.ref["inputs"][0]]}
        )
        self.assertEqual(status, 200, text[:300])
        self.assertEqual(j["prompt_eval_count"], 64 + len(self.ref["ids"][0]))
        self.assertEqual(j["embeddings"][1], self.cli[0])
        status, j, text = self.server.request(
            "POST", "/api/embeddings", {"model": self.MODEL, "prompt": self.ref["inputs"][2]}
        )
        self.assertEqual(status, 200, text[:300])
        self.assertEqual(j["embedding"], self.cli[2])

    def test_hostile_inputs(self):
        p = "/v1/embeddings"
        self.assert_refused(p, {"input": []}, 400, "'input' is an empty list")
        self.assert_refused(p, {"input": ["a", ""]}, 400, "'input[1]' is an empty string")
        self.assert_refused(p, {"input": ["x"] * 2049}, 400, "more than the 2048")
        self.assert_refused(p, {"input": [[2, 300, 3]]}, 400, "outside the vocabulary of 300")
        self.assert_refused(p, {"input": list(range(2, 70))}, 400, "68 tokens exceed the encoder's")
        self.assert_refused(p, {"input": "a", "dimensions": 16}, 400, "'dimensions' must be 32")
        self.assert_refused(p, {"input": "a", "model": "other"}, 404, "does not exist")

    def test_generation_is_refused_by_name(self):
        why = "model is an embedding encoder; it cannot generate"
        msgs = [{"role": "user", "content": "hello"}]
        self.assert_refused("/v1/completions", {"prompt": "hello"}, 400, why)
        self.assert_refused("/v1/chat/completions", {"messages": msgs}, 400, why)
        self.assert_refused("/v1/chat/completions", {"messages": msgs, "stream": True}, 400, why)
        self.assert_refused("/v1/responses", {"input": "hello"}, 400, why)
        self.assert_refused("/api/generate", {"model": self.MODEL, "prompt": "hello"}, 400, why)
        self.assert_refused("/api/chat", {"model": self.MODEL, "messages": msgs}, 400, why)
        with self.assertRaises(openai.BadRequestError) as e:
            self.client.chat.completions.create(model=self.MODEL, messages=msgs)
        self.assertIn(why, str(e.exception))

    def test_models_health_and_tokenizer(self):
        self.assertEqual([m.id for m in self.client.models.list().data], [self.MODEL])
        self.assertEqual(self.server.health()["status"], "ok")
        status, j, _ = self.server.request("POST", "/tokenize", {"content": self.ref["inputs"][0]})
        self.assertEqual(status, 200)
        self.assertEqual(j["tokens"], self.ref["ids"][0][1:-1])  # without [CLS] and [SEP]
        status, j, _ = self.server.request("POST", "/api/show", {"model": self.MODEL})
        self.assertEqual(status, 200)
        self.assertEqual(j["capabilities"], ["embedding"])
        self.assertEqual(j["details"]["family"], "bert")
        self.assertIn("footprint  server: encoder weights", self.server.log())

    def test_refusals_at_start(self):
        hf = os.path.join(self.BERT, "hf")
        for args, words in (
            (["--memory-budget", "100K"], "cannot hold the server: encoder weights"),
            (["--backend", "cuda"], "runs on the CPU only: use --backend cpu"),
        ):
            r = subprocess.run(
                [binary_from_env(), "serve", "-m", hf, "--port", "0", *args],
                capture_output=True,
                text=True,
                timeout=120,
            )
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(words, r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)

    def test_serves_the_hf_directory_too(self):
        with Server(binary_from_env(), "-m", os.path.join(self.BERT, "hf"), "--parallel", "2") as s:
            status, j, text = s.request(
                "POST", "/v1/embeddings", {"input": self.ref["inputs"], "encoding_format": "float"}
            )
            self.assertEqual(status, 200, text[:300])
            for g, want in zip([d["embedding"] for d in j["data"]], self.ref["embeddings"]):
                self.assertLessEqual(max(abs(x - y) for x, y in zip(g, want)), self.REF_TOL)


class NomicEncoder(unittest.TestCase):
    """A nomic-bert encoder (tests/fixtures/models/nomic_bert: rotary positions, SwiGLU) served:
    /v1/embeddings gives `turbospark embed`'s vectors bit for bit and transformers' within the
    encoder test's bound, from its GGUF and from its directory; /api/show names the family."""

    MODEL_DIR = os.path.join(HERE, "..", "fixtures", "models", "nomic_bert")
    MODEL = "nomic-embed"
    REF_TOL = 6e-7  # test_nomic_bert_embedding.cpp's bound
    FAMILY = "nomic-bert"

    @classmethod
    def setUpClass(cls):
        with open(os.path.join(cls.MODEL_DIR, "ref.json")) as f:
            cls.ref = json.load(f)
        cls.gguf = os.path.join(cls.MODEL_DIR, "model-f32.gguf")
        cls.cli = embed_command(cls.gguf, cls.ref["inputs"])

    def check_served(self, model_path):
        args = ["-m", model_path, "--alias", self.MODEL, "--parallel", "2", "-t", "2"]
        with Server(binary_from_env(), *args) as server:
            client = client_for(server)
            r = client.embeddings.create(
                model=self.MODEL, input=self.ref["inputs"], encoding_format="float"
            )
            got = [d.embedding for d in r.data]
            self.assertEqual(got, self.cli, model_path)
            for g, want in zip(got, self.ref["embeddings"]):
                self.assertGreaterEqual(cosine(g, want), 0.9999)
                self.assertLessEqual(max(abs(x - y) for x, y in zip(g, want)), self.REF_TOL)
            self.assertEqual(r.usage.prompt_tokens, sum(len(i) for i in self.ref["ids"]))
            status, j, _ = server.request("POST", "/api/show", {"model": self.MODEL})
            self.assertEqual(status, 200)
            self.assertEqual(j["details"]["family"], self.FAMILY)
            self.assertEqual(j["capabilities"], ["embedding"])
        self.assertEqual(server.exit_code, 0, server.log())

    def test_gguf_is_the_embed_commands(self):
        self.check_served(self.gguf)

    def test_directory_is_the_embed_commands(self):
        self.check_served(os.path.join(self.MODEL_DIR, "hf"))


class XlmRobertaEncoder(NomicEncoder):
    """XLM-RoBERTa (tests/fixtures/models/xlm_roberta: bge-m3's architecture, its Unigram
    tokenizer, CLS pooling) served as the nomic-bert encoder is: the embed command's vectors bit
    for bit and sentence-transformers' within the encoder test's bound, from both forms."""

    MODEL_DIR = os.path.join(HERE, "..", "fixtures", "models", "xlm_roberta")
    MODEL = "bge-m3-tiny"
    REF_TOL = 3e-7  # test_xlm_roberta_embedding.cpp's bound
    FAMILY = "bert"


class EncoderMemory(unittest.TestCase):
    """The memory an encoder's server announces at start (its weights and the buffers of its
    largest pass) is what it takes: a random BERT large enough for that to dwarf the process's own
    noise (made with transformers, skipped without it) serves full passes, and its peak resident
    set grows from the start by about the announced total, not more."""

    # What a request adds beside the announced buffers: its JSON in and out, the HTTP workers'
    # stacks, malloc's arenas.
    SLACK_MIB = 4.0

    def make_model(self, out):
        try:
            import torch
            from transformers import BertConfig, BertModel
        except ImportError:
            self.skipTest("torch and transformers are needed to make the model")
        import shutil

        src = os.path.join(HERE, "..", "fixtures", "models", "bert_embedding", "hf")
        with open(os.path.join(src, "config.json")) as f:
            cfg = json.load(f)
        cfg.update(
            hidden_size=256,
            intermediate_size=1024,
            num_hidden_layers=4,
            num_attention_heads=4,
            max_position_embeddings=512,
        )
        torch.manual_seed(0)
        BertModel(BertConfig(**cfg)).save_pretrained(out)
        for name in os.listdir(src):
            if name not in ("config.json", "model.safetensors"):
                p = os.path.join(src, name)
                (shutil.copytree if os.path.isdir(p) else shutil.copy)(p, os.path.join(out, name))
        pooling = os.path.join(out, "1_Pooling", "config.json")
        with open(pooling) as f:
            pcfg = json.load(f)
        pcfg["word_embedding_dimension"] = 256
        with open(pooling, "w") as f:
            json.dump(pcfg, f)

    def test_peak_rss_is_the_announced_footprint(self):
        import re
        import tempfile

        with tempfile.TemporaryDirectory() as out:
            self.make_model(out)
            with Server(binary_from_env(), "-m", out, "--parallel", "4", "-t", "2") as s:
                m = re.search(r"footprint  server: .* = ([0-9.]+) MiB", s.log())
                self.assertIsNotNone(m, s.log())
                announced = float(m.group(1))
                start = s.rss_kib() / 1024
                # Texts of the encoder's 512 positions, so that passes of 4 fill their buffers.
                ids = [[2] + [5 + (7 * i + j) % 290 for j in range(510)] + [3] for i in range(12)]
                status, j, text = s.request("POST", "/v1/embeddings", {"input": ids}, timeout=600)
                self.assertEqual(status, 200, text[:300])
                with open("/proc/%d/status" % s.proc.pid) as f:
                    peak = [int(l.split()[1]) for l in f if l.startswith("VmHWM:")][0] / 1024
        grown = peak - start
        print("announced %.2f MiB, peak RSS %.2f MiB (%.2f at start)" % (announced, peak, start))
        self.assertLessEqual(grown, announced + self.SLACK_MIB)
        self.assertGreaterEqual(grown, 0.9 * announced)


if __name__ == "__main__":
    unittest.main()
