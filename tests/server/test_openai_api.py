"""The server driven by the official `openai` client (and raw HTTP where the client hides what is
checked: status codes, error bodies, disconnects), on the bundled model."""

import concurrent.futures
import json
import os
import socket
import subprocess
import tempfile
import time
import unittest

import openai

from server_util import Server, binary_from_env, client_for, reference, run_reference, sse_events

PROMPTS = ["Once upon a time", "The little dog", "Lily and Tom went to the park", "One day, a bird"]
# Prompts whose greedy answers run past 32 tokens without an end of text.
LONG_PROMPTS = [
    "Once upon a time",
    "One day, a bird",
    "Tim had a red ball",
    "Mom said",
    "The sun was shining",
]


class OpenAIApi(unittest.TestCase):
    """One server with four slots for every test that does not need other flags."""

    @classmethod
    def setUpClass(cls):
        cls.binary = binary_from_env()
        cls.server = Server(cls.binary, "--parallel", "4", "-c", "1024").__enter__()
        cls.client = client_for(cls.server)
        cls.model = cls.client.models.list().data[0].id

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        assert cls.server.exit_code == 0, "server exit code %s\n%s" % (
            cls.server.exit_code,
            cls.server.log(),
        )

    def complete(self, prompt, **kw):
        return self.client.completions.create(model=self.model, prompt=prompt, **kw)

    def chat(self, content, **kw):
        return self.client.chat.completions.create(
            model=self.model, messages=[{"role": "user", "content": content}], **kw
        )

    def stream_text(self, stream, chat):
        text, finish, usage = "", None, None
        for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for c in chunk.choices:
                piece = c.delta.content if chat else c.text
                text += piece or ""
                if c.finish_reason is not None:
                    finish = c.finish_reason
        return text, finish, usage

    def test_health_and_models(self):
        h = self.server.health()
        self.assertEqual(h["status"], "ok")
        self.assertEqual(h["slots_total"], 4)
        models = self.client.models.list().data
        self.assertEqual([m.id for m in models], ["tiny-moe-q8_0"])
        self.assertEqual(self.client.models.retrieve("tiny-moe-q8_0").id, "tiny-moe-q8_0")
        with self.assertRaises(openai.NotFoundError):
            self.client.models.retrieve("gpt-4")

    def test_greedy_completion_equals_run(self):
        for prompt in PROMPTS[:2]:
            want = run_reference(self.binary, prompt, 24)
            r = self.complete(prompt, max_tokens=24, temperature=0)
            self.assertEqual(r.choices[0].text, want)
            self.assertEqual(r.object, "text_completion")
            self.assertEqual(r.model, self.model)
            self.assertEqual(r.usage.completion_tokens, 24)
            self.assertEqual(r.choices[0].finish_reason, "length")
            self.assertEqual(r.usage.total_tokens, r.usage.prompt_tokens + 24)

    def test_completion_stream_equals_whole(self):
        whole = self.complete(PROMPTS[0], max_tokens=20, temperature=0)
        stream = self.complete(
            PROMPTS[0],
            max_tokens=20,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
        text, finish, usage = self.stream_text(stream, chat=False)
        self.assertEqual(text, whole.choices[0].text)
        self.assertEqual(finish, "length")
        self.assertEqual(usage.completion_tokens, 20)
        self.assertEqual(usage.prompt_tokens, whole.usage.prompt_tokens)

    def test_raw_stream_framing(self):
        status, _, raw = self.server.request(
            "POST",
            "/v1/chat/completions",
            {
                "messages": [{"role": "user", "content": "Hello"}],
                "max_tokens": 5,
                "temperature": 0,
                "stream": True,
            },
        )
        self.assertEqual(status, 200)
        events = sse_events(raw)
        self.assertEqual(events[-1], "[DONE]")
        chunks = [json.loads(e) for e in events[:-1]]
        self.assertEqual(chunks[0]["choices"][0]["delta"], {"role": "assistant", "content": ""})
        self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], "length")
        self.assertTrue(all(c["object"] == "chat.completion.chunk" for c in chunks))
        self.assertEqual(len({c["id"] for c in chunks}), 1)
        self.assertNotIn("usage", chunks[0])

    def test_chat_whole_and_stream(self):
        # The bundled base model talks through the raw format: one user message is its text, so
        # the chat answer is the completion answer.
        for prompt in (PROMPTS[0], PROMPTS[2]):  # runs to max_tokens; ends with end-of-text
            want = self.complete(prompt, max_tokens=16, temperature=0)
            r = self.chat(prompt, max_tokens=16, temperature=0)
            self.assertEqual(r.object, "chat.completion")
            self.assertEqual(r.choices[0].message.role, "assistant")
            self.assertEqual(r.choices[0].message.content, want.choices[0].text)
            self.assertEqual(r.choices[0].finish_reason, want.choices[0].finish_reason)
            self.assertEqual(r.usage.completion_tokens, want.usage.completion_tokens)
            text, finish, usage = self.stream_text(
                self.chat(
                    prompt,
                    max_tokens=16,
                    temperature=0,
                    stream=True,
                    stream_options={"include_usage": True},
                ),
                chat=True,
            )
            self.assertEqual(text, want.choices[0].text)
            self.assertEqual(finish, want.choices[0].finish_reason)
            self.assertEqual(usage.completion_tokens, want.usage.completion_tokens)
        self.assertEqual(
            self.chat(PROMPTS[2], max_tokens=16, temperature=0).choices[0].finish_reason, "stop"
        )
        # Greedy, so the answer cannot end early: sampled at the default temperature, end-of-text
        # came within three tokens on one CI run.
        r = self.client.chat.completions.create(
            model=self.model,
            max_completion_tokens=3,
            temperature=0,
            messages=[
                {"role": "system", "content": "Stories."},
                {"role": "user", "content": [{"type": "text", "text": "Once upon"}]},
            ],
        )
        self.assertEqual(r.choices[0].finish_reason, "length")
        self.assertEqual(r.usage.completion_tokens, 3)

    def test_tool_calls(self):
        # The bundled base model knows no tools: a required call is held to the envelope, a
        # declared name and its schema; the call then goes back into the history with its result.
        tools = [
            {"type": "function", "function": {"name": "get_weather", "description": "Weather now",
             "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                            "days": {"type": "integer", "minimum": 1, "maximum": 3}},
                            "required": ["city", "days"], "additionalProperties": False}}},
            {"type": "function", "function": {"name": "get_time"}},
        ]
        msgs = [{"role": "user", "content": PROMPTS[0]}]
        greedy = None  # the greedy required call, which the streamed one must equal
        for choice in ("required", {"type": "function", "function": {"name": "get_weather"}}):
            for kw in ({"temperature": 0}, {"temperature": 1.0, "seed": 4}):
                for parallel in (True, False):
                    r = self.client.chat.completions.create(
                        model=self.model, messages=msgs, tools=tools, tool_choice=choice,
                        max_tokens=200, parallel_tool_calls=parallel, **kw
                    )
                    c = r.choices[0]
                    self.assertEqual(c.finish_reason, "tool_calls", c.message)
                    self.assertIsNone(c.message.content)
                    self.assertGreaterEqual(len(c.message.tool_calls), 1)
                    if not parallel:
                        self.assertEqual(len(c.message.tool_calls), 1)
                    if choice == "required" and kw["temperature"] == 0 and parallel:
                        greedy = c.message.tool_calls
                        greedy_tokens = r.usage.completion_tokens
                    for call in c.message.tool_calls:
                        self.assertTrue(call.id.startswith("call_"))
                        args = json.loads(call.function.arguments)
                        if isinstance(choice, dict):
                            self.assertEqual(call.function.name, "get_weather")
                        if call.function.name == "get_weather":
                            self.assertEqual(sorted(args), ["city", "days"])
                            self.assertLessEqual(len(args["city"]), 12)
                            self.assertIn(args["days"], (1, 2, 3))
                        else:
                            self.assertEqual(call.function.name, "get_time")
        # Streamed: the calls arrive whole, each with its index, in one chunk before the finish.
        deltas, finish = [], None
        for chunk in self.client.chat.completions.create(
            model=self.model, messages=msgs, tools=tools, tool_choice="required", max_tokens=200,
            temperature=0, stream=True,
        ):
            for ch in chunk.choices:
                deltas += ch.delta.tool_calls or []
                finish = ch.finish_reason or finish
        self.assertEqual(finish, "tool_calls")
        self.assertEqual([d.index for d in deltas], list(range(len(greedy))))
        self.assertEqual([(d.function.name, d.function.arguments) for d in deltas],
                         [(g.function.name, g.function.arguments) for g in greedy])
        call = greedy[0]
        # The call and its result in the history: the next answer is text (tool_choice auto).
        history = msgs + [
            {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
            {"role": "tool", "tool_call_id": call.id, "content": '{"temperature": 18}'},
        ]
        r = self.client.chat.completions.create(
            model=self.model, messages=history, tools=tools, max_tokens=8, temperature=0
        )
        self.assertIn(r.choices[0].finish_reason, ("stop", "length", "tool_calls"))
        with self.assertRaises(openai.BadRequestError):
            self.client.chat.completions.create(
                model=self.model, messages=msgs, tools=tools,
                tool_choice={"type": "function", "function": {"name": "nope"}},
            )
        # Parallel calls cut by max_tokens inside a later call (end of text banned, so the calls
        # go on): the whole calls before it are returned, with finish reason length.
        _, eos, _ = self.server.request("POST", "/tokenize", {"content": "</s>"})
        self.assertEqual(len(eos["tokens"]), 1, eos)
        # The greedy answer's calls come first whatever follows them: any longer limit keeps them.
        cut = 0
        for max_tokens in range(greedy_tokens + 2, 3 * greedy_tokens, max(1, greedy_tokens // 4)):
            r = self.client.chat.completions.create(
                model=self.model, messages=msgs, tools=tools, tool_choice="required",
                max_tokens=max_tokens, temperature=0, logit_bias={str(eos["tokens"][0]): -100},
            )
            c = r.choices[0]
            self.assertGreaterEqual(len(c.message.tool_calls or []), 1, (max_tokens, c))
            cut += c.finish_reason == "length"
        self.assertGreater(cut, 0)

    def test_metrics(self):
        before = self.server.health()
        self.complete(PROMPTS[3], max_tokens=4, temperature=0, extra_body={"cache_prompt": False})
        status, _, raw = self.server.request("GET", "/metrics")
        self.assertEqual(status, 200)
        values = {}
        for line in raw.decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.split()
                values[name] = int(value)
        self.assertEqual(values["turbospark_slots"], 4)
        self.assertGreater(values["turbospark_prefill_rows_total"], before["prefill_rows"])
        self.assertGreaterEqual(values["turbospark_decode_rows_total"], before["decode_rows"] + 3)
        for name in ("forward_passes_total", "cached_prompt_tokens_total", "slots_busy",
                     "requests_queued"):
            self.assertIn("turbospark_" + name, values)

    def test_tokenize_and_detokenize(self):
        # llama.cpp's endpoints: the prompt's token count equals what a completion reports.
        status, j, _ = self.server.request("POST", "/tokenize", {"content": PROMPTS[2], "add_special": True})
        self.assertEqual(status, 200)
        r = self.complete(PROMPTS[2], max_tokens=1, temperature=0)
        self.assertEqual(len(j["tokens"]), r.usage.prompt_tokens)
        status, d, _ = self.server.request("POST", "/detokenize", {"tokens": j["tokens"][1:]})
        self.assertEqual(status, 200)
        self.assertEqual(d["content"].strip(), PROMPTS[2])
        status, e, _ = self.server.request("POST", "/detokenize", {"tokens": [10**9]})
        self.assertEqual(status, 400)
        self.assertIn("vocabulary size", e["error"]["message"])

    def test_prompt_cache(self):
        # The same prompt again is answered from its slot's cached rows and kept logits: the same
        # text, every prompt token counted as cached. The next turn of a conversation starts from
        # the rows of the one before.
        first = self.complete(LONG_PROMPTS[2], max_tokens=12, temperature=0)
        before = self.server.health()["cached_rows"]
        again = self.complete(LONG_PROMPTS[2], max_tokens=12, temperature=0)
        self.assertEqual(again.choices[0].text, first.choices[0].text)
        self.assertEqual(again.usage.prompt_tokens_details.cached_tokens, again.usage.prompt_tokens)
        self.assertEqual(self.server.health()["cached_rows"] - before, again.usage.prompt_tokens)
        fresh = self.complete(
            LONG_PROMPTS[2], max_tokens=12, temperature=0, extra_body={"cache_prompt": False}
        )
        self.assertEqual(fresh.choices[0].text, first.choices[0].text)
        self.assertEqual(fresh.usage.prompt_tokens_details.cached_tokens, 0)
        # A client resending the conversation as one prompt (the raw chat format of the bundled
        # model would join the turns with spaces, which the answer's tokens do not start with).
        one = self.complete(LONG_PROMPTS[3], max_tokens=24, temperature=0)
        self.assertEqual(one.usage.prompt_tokens_details.cached_tokens, 0)
        two = self.complete(
            LONG_PROMPTS[3] + one.choices[0].text + " And then", max_tokens=8, temperature=0
        )
        cached = two.usage.prompt_tokens_details.cached_tokens
        self.assertGreater(cached, one.usage.prompt_tokens + 12)
        self.assertLess(cached, two.usage.prompt_tokens)

    def test_stop_strings(self):
        full = self.complete(PROMPTS[0], max_tokens=32, temperature=0).choices[0].text
        cut = full.index(" ", len(full) // 2)
        stop = full[cut : cut + 4]
        want = full[: full.index(stop)]
        for stops in (stop, ["never there", stop]):
            r = self.complete(PROMPTS[0], max_tokens=32, temperature=0, stop=stops)
            self.assertEqual(r.choices[0].text, want)
            self.assertEqual(r.choices[0].finish_reason, "stop")
            text, finish, _ = self.stream_text(
                self.complete(PROMPTS[0], max_tokens=32, temperature=0, stop=stops, stream=True),
                chat=False,
            )
            self.assertEqual(text, want)
            self.assertEqual(finish, "stop")
        r = self.chat(PROMPTS[0], max_tokens=32, temperature=0, stop=stop)
        self.assertEqual(r.choices[0].message.content, want)

    def test_seed_reproducible(self):
        def sample(seed, stream=False):
            if stream:
                return self.stream_text(
                    self.complete(
                        PROMPTS[1], max_tokens=24, temperature=0.9, seed=seed, stream=True
                    ),
                    chat=False,
                )[0]
            return (
                self.complete(PROMPTS[1], max_tokens=24, temperature=0.9, seed=seed).choices[0].text
            )

        first = sample(1234)
        self.assertEqual(sample(1234), first)
        self.assertEqual(sample(1234, stream=True), first)
        others = {sample(s) for s in (1, 2, 3, 4)}
        self.assertTrue(others - {first}, "four other seeds all gave the text of seed 1234")
        self.assertNotEqual(
            first, self.complete(PROMPTS[1], max_tokens=24, temperature=0).choices[0].text
        )

    def test_n_choices(self):
        # n answers to one prompt: choice i draws as a lone request with seed + i does, whole or
        # streamed (each chunk under its choice's index), the usage counting the prompt once.
        kw = dict(max_tokens=24, temperature=0.9)
        lone = [self.complete(PROMPTS[1], seed=50 + i, **kw) for i in range(3)]
        r = self.complete(PROMPTS[1], seed=50, n=3, **kw)
        self.assertEqual([c.index for c in r.choices], [0, 1, 2])
        self.assertEqual([c.text for c in r.choices], [x.choices[0].text for x in lone])
        self.assertGreater(len({c.text for c in r.choices}), 1)
        self.assertEqual(r.usage.prompt_tokens, lone[0].usage.prompt_tokens)
        self.assertEqual(r.usage.completion_tokens, sum(x.usage.completion_tokens for x in lone))
        texts, finishes, usage = ["", "", ""], [None, None, None], None
        for chunk in self.complete(
            PROMPTS[1], seed=50, n=3, stream=True, stream_options={"include_usage": True}, **kw
        ):
            usage = chunk.usage or usage
            for c in chunk.choices:
                texts[c.index] += c.text
                finishes[c.index] = c.finish_reason or finishes[c.index]
        self.assertEqual(texts, [c.text for c in r.choices])
        self.assertEqual(finishes, [c.finish_reason for c in r.choices])
        self.assertEqual(usage.completion_tokens, r.usage.completion_tokens)
        chat = self.chat(PROMPTS[0], max_tokens=16, temperature=0, n=2)
        self.assertEqual(len(chat.choices), 2)
        self.assertEqual(chat.choices[0].message.content, chat.choices[1].message.content)

    def test_penalties_change_greedy_text(self):
        plain = self.complete(PROMPTS[0], max_tokens=32, temperature=0).choices[0].text
        for kw in ({"frequency_penalty": 2.0}, {"presence_penalty": 2.0}):
            r = self.complete(PROMPTS[0], max_tokens=32, temperature=0, **kw)
            self.assertNotEqual(r.choices[0].text, plain, kw)
        top_p = self.complete(PROMPTS[0], max_tokens=8, temperature=0.7, top_p=0.5, seed=3)
        self.assertEqual(top_p.usage.completion_tokens, 8)

    def test_logit_bias_bans_and_forces(self):
        plain = self.complete(PROMPTS[0], max_tokens=6, temperature=0).choices[0]
        forced = self.complete(
            PROMPTS[0], max_tokens=3, temperature=0, logit_bias={"300": 100}, logprobs=0
        ).choices[0]
        self.assertEqual(len(forced.logprobs.tokens), 3)
        self.assertEqual(len(set(forced.logprobs.tokens)), 1)  # one token three times
        self.assertNotEqual(forced.text, plain.text)
        banned = self.complete(
            PROMPTS[0], max_tokens=6, temperature=0, logit_bias={"300": -100}, logprobs=0
        ).choices[0]
        self.assertNotIn(forced.logprobs.tokens[0], banned.logprobs.tokens)

    def test_json_mode(self):
        # A base model that never saw JSON: the mask makes every answer one object (or its
        # beginning, when max_tokens cuts it), greedy, sampled and streamed.
        for kw in ({"temperature": 0}, {"temperature": 1.0, "seed": 5}):
            r = self.chat(PROMPTS[1], max_tokens=300, response_format={"type": "json_object"}, **kw)
            choice = r.choices[0]
            if choice.finish_reason == "stop":
                self.assertIsInstance(json.loads(choice.message.content), dict, kw)
            else:
                self.assertEqual(choice.finish_reason, "length")
                self.assertTrue(choice.message.content.lstrip().startswith("{"), kw)
            text, finish, _ = self.stream_text(
                self.chat(
                    PROMPTS[1],
                    max_tokens=300,
                    response_format={"type": "json_object"},
                    stream=True,
                    **kw,
                ),
                chat=True,
            )
            self.assertEqual((text, finish), (choice.message.content, choice.finish_reason), kw)

    def test_structured_outputs(self):
        # response_format json_schema: every answer is an instance, sampled and streamed. Greedy,
        # the bundled base model pads with whitespace runs until max_tokens cuts it (a prefix).
        schema = {
            "type": "object",
            "properties": {
                "name": {"type": "string", "maxLength": 16},
                "age": {"type": "integer"},
                "kind": {"enum": ["cat", "dog"]},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                "owner": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            },
            "required": ["name", "age", "kind", "tags", "owner"],
            "additionalProperties": False,
        }
        fmt = {"type": "json_schema", "json_schema": {"name": "pet", "schema": schema, "strict": True}}
        stopped = 0
        for kw in ({"temperature": 0}, {"temperature": 1.0, "seed": 5}, {"temperature": 0.8, "seed": 9}):
            r = self.chat(PROMPTS[1], max_tokens=400, response_format=fmt, **kw)
            text, finish, _ = self.stream_text(
                self.chat(PROMPTS[1], max_tokens=400, response_format=fmt, stream=True, **kw),
                chat=True,
            )
            self.assertEqual((text, finish), (r.choices[0].message.content, r.choices[0].finish_reason), kw)
            if r.choices[0].finish_reason == "length":
                self.assertTrue(text.lstrip().startswith("{"), kw)
                continue
            stopped += 1
            pet = json.loads(r.choices[0].message.content)
            self.assertEqual(sorted(pet), sorted(schema["properties"]))
            self.assertLessEqual(len(pet["name"]), 16)
            self.assertIsInstance(pet["age"], int)
            self.assertIn(pet["kind"], ("cat", "dog"))
            self.assertLessEqual(len(pet["tags"]), 2)
            self.assertTrue(all(isinstance(t, str) for t in pet["tags"]))
            self.assertTrue(pet["owner"] is None or isinstance(pet["owner"], str))
        self.assertGreaterEqual(stopped, 2)
        for bad in (
            {"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}},
            {"type": "array"},
        ):
            with self.assertRaises(openai.BadRequestError) as e:
                self.chat(
                    PROMPTS[1],
                    response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": bad}},
                )
            self.assertIn("json_schema at #", str(e.exception))

    def test_logprobs(self):
        r = self.chat(PROMPTS[0], max_tokens=6, temperature=0, logprobs=True, top_logprobs=3)
        content = r.choices[0].logprobs.content
        self.assertEqual(len(content), 6)
        self.assertEqual("".join(t.token for t in content), r.choices[0].message.content)
        for t in content:
            self.assertEqual(len(t.top_logprobs), 3)
            self.assertEqual(t.top_logprobs[0].token, t.token)  # greedy takes the most likely
            self.assertAlmostEqual(t.top_logprobs[0].logprob, t.logprob, places=5)
            self.assertLessEqual(t.logprob, 0.0)
        c = self.complete(PROMPTS[0], max_tokens=4, temperature=0, logprobs=2).choices[0]
        self.assertEqual(len(c.logprobs.tokens), 4)
        self.assertEqual(c.logprobs.text_offset[0], 0)
        self.assertEqual("".join(c.logprobs.tokens), c.text)

    def test_errors_are_openai_json(self):
        def expect(status, code, method, path, body, headers=None):
            got, j, raw = self.server.request(method, path, body, headers)
            self.assertEqual(got, status, raw)
            self.assertIn("error", j, raw)
            self.assertIsInstance(j["error"]["message"], str)
            self.assertIn("type", j["error"])
            if code is not None:
                self.assertEqual(j["error"]["code"], code)

        expect(404, "unknown_url", "GET", "/v1/nothing", None)
        expect(404, "unknown_url", "GET", "/v1/completions", None)
        expect(
            404, "model_not_found", "POST", "/v1/completions", {"model": "gpt-4", "prompt": "Hi"}
        )
        expect(400, None, "POST", "/v1/completions", b'{"prompt": "Hi",')
        expect(400, None, "POST", "/v1/completions", b'["prompt"]')
        expect(400, None, "POST", "/v1/completions", {"max_tokens": 4})
        expect(400, None, "POST", "/v1/completions", {"prompt": "Hi", "temperature": "hot"})
        expect(400, None, "POST", "/v1/completions", {"prompt": "Hi", "max_tokens": -3})
        expect(400, None, "POST", "/v1/completions", {"prompt": ["a", 5]})
        expect(400, None, "POST", "/v1/completions", {"prompt": ["a"] * 9, "n": 2})
        expect(400, None, "POST", "/v1/completions", {"prompt": [1, 2, 99999999]})
        expect(400, None, "POST", "/v1/completions", {"prompt": "Hi " * 2000})  # > -c 1024
        expect(400, None, "POST", "/v1/chat/completions", {"messages": []})
        expect(
            400,
            None,
            "POST",
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": 5}]},
        )
        expect(
            400,
            None,
            "POST",
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "Hi"}], "tools": [{"type": "function"}]},
        )
        expect(400, None, "POST", "/v1/completions", b"\xff\xfe not utf-8")
        # Fields the server does not implement are refused by name, never ignored.
        for field, value in (("grammar", "root ::= x"), ("mirostat", 2), ("typo_field", 1)):
            status, j, raw = self.server.request(
                "POST", "/v1/chat/completions",
                {"messages": [{"role": "user", "content": "Hi"}], field: value},
            )
            self.assertEqual(status, 400, raw)
            self.assertIn("'%s'" % field, j["error"]["message"])
        with self.assertRaises(openai.BadRequestError):
            self.chat("Hi", extra_body={"mirostat": 2})
        with self.assertRaises(openai.BadRequestError):
            self.complete("Hi", temperature=5)
        with self.assertRaises(openai.BadRequestError):
            self.complete("Hi", n=17)
        with self.assertRaises(openai.NotFoundError):
            self.client.completions.create(model="other", prompt="Hi")
        self.assertTrue(self.server.alive())

    def test_prompt_list(self):
        # A list of prompts gets one choice per prompt (n of them with n), numbered prompt by
        # prompt, each the answer that prompt gets alone (up to a near-tie: they share forward
        # passes); usage counts every prompt.
        prompts = PROMPTS[:3]
        refs = [reference(self.server, p, 8) for p in prompts]
        alone = [self.complete(p, max_tokens=8, temperature=0) for p in prompts]
        r = self.complete(prompts, max_tokens=8, temperature=0)
        self.assertEqual([c.index for c in r.choices], [0, 1, 2])
        for ref, c in zip(refs, r.choices):
            self.assertIsNone(ref.check(c.text))
        self.assertEqual(r.usage.prompt_tokens, sum(a.usage.prompt_tokens for a in alone))
        self.assertEqual(r.usage.completion_tokens, sum(a.usage.completion_tokens for a in alone))
        r = self.complete(prompts[:2], max_tokens=8, temperature=0, n=2)
        self.assertEqual([c.index for c in r.choices], [0, 1, 2, 3])
        for i, c in enumerate(r.choices):
            self.assertIsNone(refs[i // 2].check(c.text))
        texts = {}
        for chunk in self.complete(prompts, max_tokens=8, temperature=0, stream=True):
            for c in chunk.choices:
                texts[c.index] = texts.get(c.index, "") + c.text
        self.assertEqual(sorted(texts), [0, 1, 2])
        for ref, i in zip(refs, range(3)):
            self.assertIsNone(ref.check(texts[i]))

    def test_token_id_prompt(self):
        ids = [1, 100, 200, 300, 400]
        r = self.client.completions.create(
            model=self.model, prompt=ids, max_tokens=4, temperature=0
        )
        self.assertEqual(r.usage.prompt_tokens, len(ids))
        self.assertEqual(r.usage.completion_tokens, 4)

    def test_disconnect_frees_slot(self):
        # Timing-free: the request is seen busy (polled), and after the client leaves the slot is
        # freed having decoded far fewer than the 900 tokens asked for.
        for stream in (True, False):
            body = json.dumps(
                {
                    "prompt": PROMPTS[0],
                    "max_tokens": 900,
                    "ignore_eos": True,
                    "temperature": 0,
                    "stream": stream,
                }
            ).encode()
            decoded_before = self.server.health()["decode_rows"]
            s = socket.create_connection(("127.0.0.1", self.server.port))
            s.sendall(
                b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n" % len(body) + body
            )
            deadline = time.time() + 5
            while self.server.health()["slots_free"] == 4 and time.time() < deadline:
                time.sleep(0.005)
            self.assertLess(self.server.health()["slots_free"], 4, "stream=%s" % stream)
            s.close()
            self.assertIs(self.server.wait_idle(timeout=10), True)
            decoded = self.server.health()["decode_rows"] - decoded_before
            self.assertLess(decoded, 850, "stream=%s: the slot ran on after the disconnect" % stream)

    def test_concurrent_requests_match_lone_answers(self):
        refs = {p: reference(self.server, p, 24) for p in LONG_PROMPTS}
        for p, ref in refs.items():
            self.assertEqual(ref.finish, "length", "pick prompts whose answers run to max_tokens")
        jobs = LONG_PROMPTS * 3
        with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
            answers = list(pool.map(lambda p: self.complete(p, max_tokens=24, temperature=0), jobs))
        for p, a in zip(jobs, answers):
            self.assertIsNone(refs[p].check(a.choices[0].text))
            self.assertEqual(a.usage.completion_tokens, 24)
        h = self.server.health()
        self.assertEqual(h["slots_free"], 4)


class ServerFlags(unittest.TestCase):
    """Behaviour that needs a server of its own: API key, body limit, a full queue."""

    @classmethod
    def setUpClass(cls):
        cls.binary = binary_from_env()

    def test_chat_template_file(self):
        # A template given as a file is what the server runs (its prompt is that template's text,
        # token for token); its variables come from chat_template_kwargs; a generation prompt that
        # opens <think> makes the answer reasoning_content, whole and streamed; a final assistant
        # message is continued; an unknown role is refused.
        template = (
            "{%- for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor -%}"
            "{%- if add_generation_prompt %}assistant:"
            "{% if enable_thinking is not defined or enable_thinking %} <think>\n{% endif %}"
            "{% endif %}{# models write </think> to end their thinking #}"
        )
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "think.jinja")
            with open(path, "w") as f:
                f.write(template)
            with Server(self.binary, "--chat-template", path, "--parallel", "2", "-c", "512") as s:
                c = client_for(s)
                messages = [{"role": "user", "content": "Once upon a time"}]
                r = c.chat.completions.create(
                    model="tiny-moe-q8_0", messages=messages, max_tokens=12, temperature=0
                )
                _, toks, _ = s.request(
                    "POST",
                    "/tokenize",
                    {"content": "user: Once upon a time\nassistant: <think>\n", "add_special": True},
                )
                self.assertEqual(r.usage.prompt_tokens, len(toks["tokens"]))
                reasoning = r.choices[0].message.reasoning_content
                self.assertTrue(reasoning)  # the base model never closes the block
                self.assertFalse(r.choices[0].message.content)
                streamed = ""
                for chunk in c.chat.completions.create(
                    model="tiny-moe-q8_0",
                    messages=messages,
                    max_tokens=12,
                    temperature=0,
                    stream=True,
                ):
                    for ch in chunk.choices:
                        streamed += getattr(ch.delta, "reasoning_content", None) or ""
                        self.assertFalse(ch.delta.content)
                self.assertEqual(streamed, reasoning)
                off = c.chat.completions.create(
                    model="tiny-moe-q8_0",
                    messages=messages,
                    max_tokens=12,
                    temperature=0,
                    extra_body={"chat_template_kwargs": {"enable_thinking": False}},
                )
                self.assertTrue(off.choices[0].message.content)
                self.assertIsNone(getattr(off.choices[0].message, "reasoning_content", None))
                # Prefill: the answer continues the assistant's text, as a completion of it would.
                prefill = c.chat.completions.create(
                    model="tiny-moe-q8_0",
                    messages=messages + [{"role": "assistant", "content": "The little dog"}],
                    max_tokens=8,
                    temperature=0,
                )
                want = c.completions.create(
                    model="tiny-moe-q8_0",
                    prompt="user: Once upon a time\nassistant: The little dog",
                    max_tokens=8,
                    temperature=0,
                )
                self.assertEqual(prefill.choices[0].message.content, want.choices[0].text)
                status, j, raw = s.request(
                    "POST",
                    "/v1/chat/completions",
                    {"messages": [{"role": "narrator", "content": "x"}]},
                )
                self.assertEqual(status, 400, raw)
                self.assertIn("narrator", j["error"]["message"])
            self.assertEqual(s.exit_code, 0)

    def test_api_key(self):
        with Server(self.binary, "--api-key", "s3cret", "--parallel", "1", "-c", "256") as s:
            self.assertEqual(s.health()["status"], "ok")  # /health needs no key
            with self.assertRaises(openai.AuthenticationError):
                client_for(s, "wrong").models.list()
            with self.assertRaises(openai.AuthenticationError):
                client_for(s, "wrong").completions.create(
                    model="tiny-moe-q8_0", prompt="Hi", max_tokens=2
                )
            status, j, _ = s.request("GET", "/v1/models")
            self.assertEqual(status, 401)
            self.assertEqual(j["error"]["code"], "invalid_api_key")
            r = client_for(s, "s3cret").completions.create(
                model="tiny-moe-q8_0", prompt="Hi", max_tokens=2, temperature=0
            )
            self.assertEqual(r.usage.completion_tokens, 2)
        self.assertEqual(s.exit_code, 0)

    def test_body_too_large(self):
        with Server(self.binary, "--max-body", "64K", "--parallel", "1", "-c", "256") as s:
            status, j, raw = s.request(
                "POST", "/v1/completions", {"prompt": "x" * 100000, "max_tokens": 1}
            )
            self.assertEqual(status, 413, raw)
            self.assertEqual(j["error"]["code"], "request_too_large")
            status, _, _ = s.request("POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 1})
            self.assertEqual(status, 200)
        self.assertEqual(s.exit_code, 0)

    def test_full_queue_answers_503(self):
        # The held request must still be generating when the third arrives: with 1500 tokens it
        # once ended first (a 2-core machine busy compiling, the queue empty again by then).
        # Closing it ends it early, so a longer one costs nothing.
        with Server(self.binary, "--parallel", "1", "--queue", "1", "-c", "8192") as s:
            long = json.dumps(
                {"prompt": "Once", "max_tokens": 8000, "ignore_eos": True, "stream": True}
            ).encode()
            held = []
            # One generating, then one waiting: the second is sent only once the first holds the
            # slot (sent together, on a loaded machine the second could find the first still
            # queued and be refused itself, and the queue then never fills).
            for wait_for in ("slot", "queue"):
                c = socket.create_connection(("127.0.0.1", s.port))
                c.sendall(
                    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                    b"\r\nContent-Length: %d\r\n\r\n" % len(long) + long
                )
                held.append(c)
                deadline = time.time() + 10
                while time.time() < deadline:
                    h = s.health()
                    if (h["slots_free"] == 0) if wait_for == "slot" else (h["queued"] >= 1):
                        break
                    time.sleep(0.02)
            status, j, raw = s.request("POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 2})
            self.assertEqual(status, 503, raw)
            self.assertEqual(j["error"]["code"], "queue_full")
            with self.assertRaises(openai.InternalServerError):
                client_for(s).completions.create(model="tiny-moe-q8_0", prompt="Hi", max_tokens=2)
            for c in held:
                c.close()
            self.assertIs(s.wait_idle(timeout=5), True)
            status, _, _ = s.request("POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 2})
            self.assertEqual(status, 200)
        self.assertEqual(s.exit_code, 0)

    def test_refuses_port_in_use(self):
        with Server(self.binary, "--parallel", "1", "-c", "64") as s:
            out = subprocess.run(
                [self.binary, "serve", "--port", str(s.port), "-c", "64"],
                capture_output=True,
                text=True,
                timeout=120,
            )
            self.assertEqual(out.returncode, 1)
            self.assertIn("cannot listen", out.stderr)


if __name__ == "__main__":
    unittest.main()
