"""Ollama's API driven by the official `ollama` Python client (and raw HTTP where the client hides
what is checked: status codes, error bodies, NDJSON framing), on the bundled model."""

import json
import os
import tempfile
import unittest

import ollama

from server_util import Server, binary_from_env, run_reference

MODEL = "tiny-moe-q8_0"
# Greedy and without Ollama's default repeat penalty: what `turbospark run --temp 0` computes.
GREEDY = {"temperature": 0, "repeat_penalty": 1.0}


class OllamaApi(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.binary = binary_from_env()
        cls.server = Server(cls.binary, "--parallel", "2", "-c", "512").__enter__()
        cls.client = ollama.Client(host=cls.server.base_url, timeout=120)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        assert cls.server.exit_code == 0, "server exit code %s\n%s" % (
            cls.server.exit_code,
            cls.server.log(),
        )

    def assert_error(self, path, body, status, field):
        """A raw request refused with `status` and Ollama's {"error": "..."} naming `field`."""
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        got, j, text = self.server.request("POST", path, raw)
        self.assertEqual(got, status, text[:300])
        self.assertIsInstance(j["error"], str, text[:300])
        self.assertIn(field, j["error"])
        self.assertTrue(self.server.alive())

    def test_tags_show_version_ps(self):
        models = self.client.list().models
        self.assertEqual([m.model for m in models], [MODEL])
        self.assertEqual(models[0].details.format, "gguf")
        self.assertGreater(models[0].size, 1_000_000)
        show = self.client.show(MODEL)
        self.assertIn("completion", show.capabilities)
        arch = show.modelinfo["general.architecture"]
        self.assertEqual(arch, models[0].details.family)
        self.assertGreater(show.modelinfo[arch + ".context_length"], 0)
        self.assertEqual(self.client.show(MODEL + ":latest").details.format, "gguf")
        with self.assertRaises(ollama.ResponseError) as e:
            self.client.show("no-such-model")
        self.assertEqual(e.exception.status_code, 404)
        status, j, _ = self.server.request("GET", "/api/version")
        self.assertEqual(status, 200)
        self.assertRegex(j["version"], r"^\d+\.\d+\.\d+$")
        self.assertEqual([m.model for m in self.client.ps().models], [MODEL])

    def test_generate_raw_equals_run(self):
        prompt = "In the morning, the children walked to the school"
        want = run_reference(self.binary, prompt, 16)
        r = self.client.generate(
            model=MODEL, prompt=prompt, raw=True, stream=False, options={**GREEDY, "num_predict": 16}
        )
        self.assertEqual(r.response, want)
        self.assertTrue(r.done)
        self.assertEqual(r.done_reason, "length")
        self.assertEqual(r.eval_count, 16)
        self.assertGreater(r.prompt_eval_count, 5)
        self.assertGreater(r.total_duration, 0)
        parts = list(
            self.client.generate(
                model=MODEL, prompt=prompt, raw=True, stream=True,
                options={**GREEDY, "num_predict": 16},
            )
        )
        self.assertEqual("".join(p.response for p in parts), want)
        self.assertEqual([p.done for p in parts], [False] * (len(parts) - 1) + [True])
        self.assertEqual(parts[-1].eval_count, 16)

    def test_chat_stream_equals_whole(self):
        messages = [{"role": "user", "content": "Once upon a time"}]
        whole = self.client.chat(
            model=MODEL, messages=messages, stream=False, options={"temperature": 0, "num_predict": 12}
        )
        self.assertEqual(whole.message.role, "assistant")
        self.assertTrue(whole.message.content)
        self.assertEqual(whole.eval_count, 12)
        streamed = ""
        last = None
        for part in self.client.chat(
            model=MODEL, messages=messages, stream=True, options={"temperature": 0, "num_predict": 12}
        ):
            streamed += part.message.content or ""
            last = part
        self.assertEqual(streamed, whole.message.content)
        self.assertTrue(last.done)
        self.assertEqual(last.done_reason, "length")
        # The raw stream is NDJSON: one object a line, the last one done.
        status, _, raw = self.server.request(
            "POST",
            "/api/chat",
            {"model": MODEL, "messages": messages, "options": {"num_predict": 4}},
        )
        self.assertEqual(status, 200)
        lines = [json.loads(l) for l in raw.decode().strip().split("\n")]
        self.assertTrue(lines[-1]["done"])
        self.assertTrue(all(not l["done"] for l in lines[:-1]))

    def test_options_are_mapped(self):
        prompt = "Once upon a time"
        # Ollama's defaults (repeat_penalty 1.1 over 64 tokens) are what the OpenAI route computes
        # when asked for them.
        ours = self.client.generate(
            model=MODEL, prompt=prompt, raw=True, stream=False, options={"temperature": 0, "num_predict": 40}
        )
        _, j, _ = self.server.request(
            "POST",
            "/v1/completions",
            {"prompt": prompt, "max_tokens": 40, "temperature": 0, "repeat_penalty": 1.1,
             "repeat_last_n": 64},
        )
        self.assertEqual(ours.response, j["choices"][0]["text"])
        # num_predict, stop, seed, top_k.
        stop = ours.response.split()[2]
        r = self.client.generate(
            model=MODEL, prompt=prompt, raw=True, stream=False,
            options={"temperature": 0, "num_predict": 40, "stop": [stop]},
        )
        self.assertEqual(r.done_reason, "stop")
        self.assertNotIn(stop, r.response)
        self.assertTrue(ours.response.startswith(r.response))
        seeded = [
            self.client.generate(
                model=MODEL, prompt=prompt, raw=True, stream=False,
                options={"temperature": 1.0, "seed": seed, "num_predict": 24, "top_k": 0, "top_p": 1.0},
            ).response
            for seed in (7, 7, 8)
        ]
        self.assertEqual(seeded[0], seeded[1])
        self.assertNotEqual(seeded[0], seeded[2])
        # Options that only tune loading are accepted (and do nothing here).
        r = self.client.generate(
            model=MODEL, prompt=prompt, raw=True, stream=False,
            options={**GREEDY, "num_predict": 3, "num_ctx": 8192, "num_thread": 2, "num_gpu": 99},
        )
        self.assertEqual(r.eval_count, 3)

    def test_format_json(self):
        r = self.client.chat(
            model=MODEL,
            messages=[{"role": "user", "content": "A list of names:"}],
            format="json",
            stream=False,
            options={"temperature": 0, "num_predict": 60},
        )
        if r.done_reason == "stop":
            self.assertIsInstance(json.loads(r.message.content), dict)
        else:
            self.assertTrue(r.message.content.lstrip().startswith("{"))
        schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
        r = self.client.chat(
            model=MODEL,
            messages=[{"role": "user", "content": "A number:"}],
            format=schema,
            stream=False,
            options={"temperature": 0, "num_predict": 60},
        )
        self.assertEqual(r.done_reason, "stop", r.message.content)
        self.assertIsInstance(json.loads(r.message.content)["n"], int)

    def test_tool_turns_are_accepted(self):
        tools = [{"type": "function", "function": {"name": "get_time", "description": "The time",
                  "parameters": {"type": "object", "properties": {}}}}]
        messages = [
            {"role": "user", "content": "What time is it?"},
            {"role": "assistant", "content": "",
             "tool_calls": [{"function": {"name": "get_time", "arguments": {}}}]},
            {"role": "tool", "content": "12:00", "tool_name": "get_time"},
        ]
        r = self.client.chat(model=MODEL, messages=messages, tools=tools, stream=False,
                             options={"num_predict": 4})
        self.assertTrue(r.done)
        self.assertIn(r.done_reason, ("stop", "length"))

    def test_load_call(self):
        r = self.client.generate(model=MODEL)
        self.assertTrue(r.done)
        self.assertEqual(r.done_reason, "load")
        self.assertEqual(r.response, "")

    def test_errors_name_the_field(self):
        chat = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": False}
        self.assert_error("/api/chat", b'{"model": ', 400, "JSON")
        self.assert_error("/api/chat", b"[1, 2]", 400, "JSON object")
        self.assert_error("/api/chat", b'{"model": ' + b"[" * 60000 + b"]" * 60000 + b"}", 400,
                          "deeper than 64 levels")
        self.assert_error("/api/generate", b'{"model": "m", "format": ' + b"[" * 60000 + b"]" * 60000
                          + b"}", 400, "deeper than 64 levels")
        self.assert_error("/api/chat", {**chat, "model": "nope"}, 404, "nope")
        self.assert_error("/api/chat", {**chat, "model": ""}, 400, "'model'")
        self.assert_error("/api/chat", {**chat, "messages": "hi"}, 400, "'messages'")
        self.assert_error("/api/chat", {**chat, "messages": [{"role": "user", "content": 5}]}, 400,
                          "messages[0].content")
        self.assert_error("/api/chat", {**chat, "options": {"temperature": "hot"}}, 400,
                          "'options.temperature'")
        self.assert_error("/api/chat", {**chat, "options": {"top_p": 7}}, 400, "'options.top_p'")
        self.assert_error("/api/chat", {**chat, "options": {"num_predict": 0}}, 400,
                          "'options.num_predict'")
        self.assert_error("/api/chat", {**chat, "options": {"mirostat": 2}}, 400, "'options.mirostat'")
        self.assert_error("/api/chat", {**chat, "options": {"warp": 1}}, 400, "'options.warp'")
        self.assert_error("/api/chat", {**chat, "options": []}, 400, "'options'")
        self.assert_error("/api/chat", {**chat, "format": 5}, 400, "'format'")
        self.assert_error("/api/chat", {**chat, "think": 5}, 400, "'think'")
        self.assert_error("/api/chat", {**chat, "stream": "yes"}, 400, "'stream'")
        self.assert_error("/api/chat", {**chat, "grammar": "x"}, 400, "'grammar'")
        self.assert_error("/api/chat", {**chat, "messages": [{"role": "user", "content": "hi",
                                                              "images": ["aGk="]}]}, 400, "images")
        gen = {"model": MODEL, "prompt": "hi", "stream": False}
        self.assert_error("/api/generate", {**gen, "suffix": "x"}, 400, "'suffix'")
        self.assert_error("/api/generate", {**gen, "context": [1, 2]}, 400, "'context'")
        self.assert_error("/api/generate", {**gen, "prompt": 3}, 400, "'prompt'")
        self.assert_error("/api/show", {"model": 3}, 400, "'model'")
        self.assert_error("/api/show", {}, 400, "'model'")
        self.assert_error("/api/pull", {"model": MODEL}, 404, "/api/pull")
        # The bundled model is no embedding model (test_embeddings_api serves one).
        self.assert_error("/api/embed", {"model": MODEL, "input": "x"}, 400, "declares no pooling")
        # The client raises Ollama's error with its status.
        with self.assertRaises(ollama.ResponseError) as e:
            self.client.chat(model="nope", messages=[{"role": "user", "content": "x"}])
        self.assertEqual(e.exception.status_code, 404)
        self.assertEqual(self.server.health()["status"], "ok")


# A template whose generation prompt opens <think>, unless enable_thinking is false.
THINK_TEMPLATE = (
    "{%- for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor -%}"
    "{%- if add_generation_prompt %}assistant:"
    "{% if enable_thinking is not defined or enable_thinking %} <think>\n{% endif %}"
    "{% endif %}{# models write </think> to end their thinking #}"
)


class OllamaOwnServers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.binary = binary_from_env()

    def test_api_key_and_body_limit(self):
        with Server(self.binary, "--api-key", "s3cret", "--max-body", "64K", "--parallel", "1",
                    "-c", "256") as s:
            for path in ("/api/tags", "/api/version", "/api/ps"):
                status, j, _ = s.request("GET", path)
                self.assertEqual(status, 401, path)
                self.assertIn("API key", j["error"])
            with self.assertRaises(ollama.ResponseError) as e:
                ollama.Client(host=s.base_url).chat(
                    model=MODEL, messages=[{"role": "user", "content": "hi"}]
                )
            self.assertEqual(e.exception.status_code, 401)
            keyed = ollama.Client(host=s.base_url, headers={"Authorization": "Bearer s3cret"})
            # Greedy: a sampled token may be the end of text, and the count then falls short.
            r = keyed.generate(model=MODEL, prompt="Hi", raw=True,
                               options={**GREEDY, "num_predict": 2})
            self.assertEqual(r.eval_count, 2)
            status, j, _ = s.request(
                "POST", "/api/generate", {"model": MODEL, "prompt": "x" * 100000},
                headers={"Authorization": "Bearer s3cret"},
            )
            self.assertEqual(status, 413)
            # Refused from the declared length by the connection gate, before any route is
            # chosen: the error is in the OpenAI shape, which the ollama client reports as well.
            self.assertIn("limit", j["error"]["message"])
        self.assertEqual(s.exit_code, 0)


    def test_thinking(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "think.jinja")
            with open(path, "w") as f:
                f.write(THINK_TEMPLATE)
            with Server(self.binary, "--chat-template", path, "--parallel", "1", "-c", "256") as s:
                c = ollama.Client(host=s.base_url)
                self.assertIn("thinking", c.show(MODEL).capabilities)
                messages = [{"role": "user", "content": "Once upon a time"}]
                opts = {"temperature": 0, "num_predict": 10}
                r = c.chat(model=MODEL, messages=messages, options=opts)
                self.assertTrue(r.message.thinking)  # the base model never closes the block
                self.assertFalse(r.message.content)
                streamed = "".join(
                    p.message.thinking or ""
                    for p in c.chat(model=MODEL, messages=messages, options=opts, stream=True)
                )
                self.assertEqual(streamed, r.message.thinking)
                off = c.chat(model=MODEL, messages=messages, options=opts, think=False)
                self.assertTrue(off.message.content)
                self.assertFalse(off.message.thinking)
                g = c.generate(model=MODEL, prompt="Once upon a time", options=opts)
                self.assertEqual(g.thinking, r.message.thinking)
            self.assertEqual(s.exit_code, 0)


if __name__ == "__main__":
    unittest.main()
