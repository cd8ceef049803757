"""OpenAI's Responses API driven by the official `openai` client's `responses` API (and raw HTTP
where the client hides what is checked: status codes, error bodies, event framing), on the
bundled model."""

import json
import os
import tempfile
import unittest

import openai

from server_util import Server, binary_from_env, client_for, sse_events

MODEL = "tiny-moe-q8_0"
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
# A template whose generation prompt opens <think>, as the thinking models' templates do.
THINK_TEMPLATE = (
    "{%- for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor -%}"
    "{%- if add_generation_prompt %}assistant:"
    "{% if enable_thinking is not defined or enable_thinking %} <think>\n{% endif %}"
    "{% endif %}{# models write </think> to end their thinking #}"
)


class ResponsesApi(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.binary = binary_from_env()
        cls.server = Server(cls.binary, "--parallel", "2", "-c", "1024").__enter__()
        cls.client = client_for(cls.server)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        assert cls.server.exit_code == 0, "server exit code %s\n%s" % (
            cls.server.exit_code,
            cls.server.log(),
        )

    def chat(self, messages, n):
        return self.client.chat.completions.create(
            model=MODEL, messages=messages, max_tokens=n, temperature=0
        )

    def assert_error(self, body, status, param, raw=None):
        got, j, text = self.server.request("POST", "/v1/responses", raw or body)
        self.assertEqual(got, status, text[:300])
        self.assertIn("message", j["error"], text[:300])
        if param is not None:
            self.assertEqual(j["error"]["param"], param, text[:300])
            self.assertIn(param, j["error"]["message"])
        self.assertTrue(self.server.alive())
        return j["error"]

    def test_create_equals_chat_completion(self):
        r = self.client.responses.create(
            model=MODEL, input="Once upon a time", max_output_tokens=12, temperature=0
        )
        want = self.chat([{"role": "user", "content": "Once upon a time"}], 12)
        self.assertEqual(r.output_text, want.choices[0].message.content)
        self.assertEqual(r.object, "response")
        self.assertTrue(r.id.startswith("resp_"))
        self.assertEqual(r.status, "incomplete")
        self.assertEqual(r.incomplete_details.reason, "max_output_tokens")
        self.assertEqual(r.usage.output_tokens, 12)
        self.assertEqual(r.usage.input_tokens, want.usage.prompt_tokens)
        self.assertEqual([o.type for o in r.output], ["message"])
        # Instructions are the system message; input items may be a list of messages.
        r = self.client.responses.create(
            model=MODEL,
            instructions="Tell a story.",
            input=[{"role": "user", "content": [{"type": "input_text", "text": "The little dog"}]}],
            max_output_tokens=10,
            temperature=0,
        )
        want = self.chat(
            [{"role": "system", "content": "Tell a story."},
             {"role": "user", "content": "The little dog"}], 10)
        self.assertEqual(r.output_text, want.choices[0].message.content)
        self.assertEqual(r.instructions, "Tell a story.")

    def test_stream_events(self):
        whole = self.client.responses.create(
            model=MODEL, input="One day, a bird", max_output_tokens=16, temperature=0
        )
        events = list(
            self.client.responses.create(
                model=MODEL, input="One day, a bird", max_output_tokens=16, temperature=0,
                stream=True,
            )
        )
        types = [e.type for e in events]
        self.assertEqual(types[:4], ["response.created", "response.in_progress",
                                     "response.output_item.added", "response.content_part.added"])
        self.assertEqual(types[-4:], ["response.output_text.done", "response.content_part.done",
                                      "response.output_item.done", "response.incomplete"])
        self.assertEqual([e.sequence_number for e in events], list(range(len(events))))
        deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        self.assertEqual(deltas, whole.output_text)
        done = [e for e in events if e.type == "response.output_text.done"][0]
        self.assertEqual(done.text, whole.output_text)
        added = [e for e in events if e.type == "response.output_item.added"][0]
        last = events[-1].response
        self.assertEqual(last.output[0].id, added.item.id)
        self.assertEqual(last.output_text, whole.output_text)
        self.assertEqual(events[0].response.id, last.id)
        # On the wire: each event names its type, as the client's stream helpers need.
        status, _, raw = self.server.request(
            "POST", "/v1/responses",
            {"model": MODEL, "input": "Hi", "max_output_tokens": 2, "stream": True},
        )
        self.assertEqual(status, 200)
        blocks = [b for b in raw.decode().split("\n\n") if b.strip()]
        for b in blocks:
            event, data = b.split("\n")
            self.assertEqual(event[len("event: "):], json.loads(data[len("data: "):])["type"])

    def test_previous_response_id(self):
        first = self.client.responses.create(
            model=MODEL, input="Once upon a time", max_output_tokens=8, temperature=0
        )
        second = self.client.responses.create(
            model=MODEL, input="The end", previous_response_id=first.id, max_output_tokens=8,
            temperature=0,
        )
        want = self.chat(
            [{"role": "user", "content": "Once upon a time"},
             {"role": "assistant", "content": first.output_text},
             {"role": "user", "content": "The end"}], 8)
        self.assertEqual(second.output_text, want.choices[0].message.content)
        self.assertEqual(second.usage.input_tokens, want.usage.prompt_tokens)
        self.assertEqual(second.previous_response_id, first.id)
        got = self.client.responses.retrieve(first.id)
        self.assertEqual(got.output_text, first.output_text)
        self.client.responses.delete(first.id)
        with self.assertRaises(openai.NotFoundError):
            self.client.responses.retrieve(first.id)
        with self.assertRaises(openai.NotFoundError) as e:
            self.client.responses.create(model=MODEL, input="x", previous_response_id=first.id)
        self.assertEqual(e.exception.body["param"], "previous_response_id")
        unstored = self.client.responses.create(
            model=MODEL, input="Hi", max_output_tokens=2, store=False
        )
        with self.assertRaises(openai.NotFoundError):
            self.client.responses.create(model=MODEL, input="x", previous_response_id=unstored.id)

    def test_structured_output(self):
        schema = {
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
            "required": ["name", "age"],
            "additionalProperties": False,
        }
        fmt = {"format": {"type": "json_schema", "name": "person", "schema": schema, "strict": True}}
        r = self.client.responses.create(
            model=MODEL, input="A person:", text=fmt, max_output_tokens=80, temperature=0
        )
        self.assertEqual(r.status, "completed", r.output_text)
        person = json.loads(r.output_text)
        self.assertIsInstance(person["name"], str)
        self.assertIsInstance(person["age"], int)
        self.assertEqual(r.text.format.type, "json_schema")
        # The client's stream helper assembles the same response from the events.
        with self.client.responses.stream(
            model=MODEL, input="A person:", text=fmt, max_output_tokens=80, temperature=0
        ) as stream:
            for _ in stream:
                pass
            final = stream.get_final_response()
        self.assertEqual(final.output_text, r.output_text)

    def test_tools(self):
        r = self.client.responses.create(
            model=MODEL, input="What is the weather in Paris?", tools=[WEATHER],
            tool_choice="required", max_output_tokens=200, temperature=0,
        )
        calls = [o for o in r.output if o.type == "function_call"]
        self.assertTrue(calls, r.output)
        self.assertEqual(calls[0].name, "get_weather")
        self.assertIsInstance(json.loads(calls[0].arguments)["city"], str)
        self.assertTrue(calls[0].call_id.startswith("call_"))
        self.assertEqual(r.status, "completed")
        # The call's output continues the stored conversation.
        follow = self.client.responses.create(
            model=MODEL, previous_response_id=r.id,
            input=[{"type": "function_call_output", "call_id": calls[0].call_id,
                    "output": "sunny"}],
            tools=[WEATHER], max_output_tokens=6, temperature=0,
        )
        self.assertEqual(follow.previous_response_id, r.id)
        self.assertGreater(follow.usage.input_tokens, r.usage.input_tokens)
        # Streamed: the call arrives as its own item with its arguments.
        with self.client.responses.stream(
            model=MODEL, input="What is the weather in Paris?", tools=[WEATHER],
            tool_choice={"type": "function", "name": "get_weather"}, max_output_tokens=200,
            temperature=0,
        ) as stream:
            done = [e for e in stream if e.type == "response.function_call_arguments.done"]
            final = stream.get_final_response()
        self.assertEqual(len(done), 1)
        self.assertEqual(json.loads(done[0].arguments), json.loads(calls[0].arguments))
        self.assertEqual([o.type for o in final.output], ["function_call"])

    def test_errors_name_the_field(self):
        self.assert_error(None, 400, None, raw=b'{"input": ')
        self.assert_error(None, 400, None, raw=b'"hi"')
        e = self.assert_error(None, 400, None,
                              raw=b'{"input": ' + b"[" * 60000 + b"]" * 60000 + b"}")
        self.assertIn("deeper than 64 levels", e["message"])
        self.assert_error({"model": MODEL}, 400, "input")
        self.assert_error({"input": 5}, 400, "input")
        self.assert_error({"input": [{"role": "user", "content": [{"type": "input_image"}]}]},
                          400, "input[0].content[0].type")
        self.assert_error({"input": [{"type": "computer_call"}]}, 400, "input[0].type")
        self.assert_error({"input": "hi", "max_output_tokens": 0}, 400, "max_output_tokens")
        self.assert_error({"input": "hi", "temperature": "warm"}, 400, "temperature")
        self.assert_error({"input": "hi", "tools": [{"type": "web_search"}]}, 400, "tools[0].type")
        self.assert_error({"input": "hi", "text": {"format": {"type": "yaml"}}}, 400,
                          "text.format.type")
        self.assert_error({"input": "hi", "text": {"format": {"type": "json_schema",
                                                              "schema": {"type": "tuple"}}}},
                          400, "text.format")
        self.assert_error({"input": "hi", "reasoning": {"effort": "extreme"}}, 400,
                          "reasoning.effort")
        self.assert_error({"input": "hi", "background": True}, 400, "background")
        self.assert_error({"input": "hi", "frobnicate": 1}, 400, "frobnicate")
        e = self.assert_error({"input": "hi", "model": "gpt-9"}, 404, "model")
        self.assertEqual(e["code"], "model_not_found")
        with self.assertRaises(openai.BadRequestError) as e:
            self.client.responses.create(model=MODEL, input="hi", max_output_tokens=0)
        self.assertIn("max_output_tokens", str(e.exception))
        self.assertEqual(self.server.health()["status"], "ok")


class ResponsesOwnServers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.binary = binary_from_env()

    def test_store_is_bounded(self):
        with Server(self.binary, "--store-responses", "2", "--parallel", "1", "-c", "256") as s:
            c = client_for(s)
            ids = [c.responses.create(model=MODEL, input="Hi %d" % i, max_output_tokens=2).id
                   for i in range(3)]
            with self.assertRaises(openai.NotFoundError):
                c.responses.create(model=MODEL, input="x", previous_response_id=ids[0])
            c.responses.create(model=MODEL, input="x", previous_response_id=ids[2],
                               max_output_tokens=2)
        self.assertEqual(s.exit_code, 0)

    def test_api_key_and_body_limit(self):
        with Server(self.binary, "--api-key", "s3cret", "--max-body", "64K", "--parallel", "1",
                    "-c", "256") as s:
            with self.assertRaises(openai.AuthenticationError):
                client_for(s, "wrong").responses.create(model=MODEL, input="Hi")
            with self.assertRaises(openai.AuthenticationError):
                client_for(s, "wrong").responses.retrieve("resp_x")
            r = client_for(s, "s3cret").responses.create(model=MODEL, input="Hi",
                                                          max_output_tokens=2)
            self.assertEqual(r.usage.output_tokens, 2)
            with self.assertRaises(openai.APIStatusError) as e:
                client_for(s, "s3cret").responses.create(model=MODEL, input="x" * 100000)
            self.assertEqual(e.exception.status_code, 413)
        self.assertEqual(s.exit_code, 0)

    def test_reasoning(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "think.jinja")
            with open(path, "w") as f:
                f.write(THINK_TEMPLATE)
            with Server(self.binary, "--chat-template", path, "--parallel", "1", "-c", "256") as s:
                c = client_for(s)
                want = c.chat.completions.create(
                    model=MODEL, messages=[{"role": "user", "content": "Once upon a time"}],
                    max_tokens=10, temperature=0,
                ).choices[0].message.reasoning_content
                self.assertTrue(want)
                r = c.responses.create(model=MODEL, input="Once upon a time",
                                       max_output_tokens=10, temperature=0)
                self.assertEqual(r.output[0].type, "reasoning")
                self.assertEqual(r.output[0].content[0].text, want)
                self.assertEqual(r.output[0].summary, [])
                r = c.responses.create(model=MODEL, input="Once upon a time",
                                       max_output_tokens=10, temperature=0,
                                       reasoning={"summary": "auto"})
                self.assertEqual(r.output[0].summary[0].text, want)
                events = list(c.responses.create(
                    model=MODEL, input="Once upon a time", max_output_tokens=10, temperature=0,
                    reasoning={"summary": "auto"}, stream=True))
                text = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
                summary = "".join(e.delta for e in events
                                  if e.type == "response.reasoning_summary_text.delta")
                self.assertEqual((text, summary), (want, want))
                self.assertEqual(events[-1].response.output[0].content[0].text, want)
            self.assertEqual(s.exit_code, 0)


if __name__ == "__main__":
    unittest.main()
