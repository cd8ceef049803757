#!/usr/bin/env python3
"""Expected renders of real chat templates, for the Jinja engine's test (test_jinja_templates).

Renders every template in tests/fixtures/chat_templates/*.jinja with Python's jinja2 exactly as
transformers' apply_chat_template does (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
loopcontrols, the {% generation %} tag, raise_exception, strftime_now, a tojson without HTML
escaping) for each conversation of CONVERSATIONS, and writes tests/fixtures/chat_templates/
expected.json: {template: {conversation: {"text": ...} | {"error": ...}}}, with the conversations
themselves under "conversations", so that the C++ test renders the same contexts.

    python3 tools/gen_chat_template_renders.py
"""
import glob
import json
import os

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

# strftime_now renders this instant, so that the expected text does not depend on the day.
FIXED_NOW = "2026-01-15T09:30:00"

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}

TOOL_CALL = {
    "id": "call_0001",
    "type": "function",
    "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}},
}

CONVERSATIONS = {
    "single_user": {
        "messages": [{"role": "user", "content": "Hello!"}],
        "add_generation_prompt": True,
    },
    "system_multi_turn": {
        "messages": [
            {"role": "system", "content": "You are a terse assistant."},
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": "4."},
            {"role": "user", "content": "And 3+3?"},
        ],
        "add_generation_prompt": True,
    },
    "no_generation_prompt": {
        "messages": [
            {"role": "user", "content": "Say hi."},
            {"role": "assistant", "content": "Hi."},
        ],
        "add_generation_prompt": False,
    },
    "tool_call_and_result": {
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": "", "tool_calls": [TOOL_CALL]},
            {"role": "tool", "tool_call_id": "call_0001", "name": "get_weather",
             "content": "{\"temperature\": 21}"},
        ],
        "tools": [WEATHER_TOOL],
        "add_generation_prompt": True,
    },
    "reasoning": {
        "messages": [
            {"role": "user", "content": "Is 17 prime?"},
            {"role": "assistant", "content": "Yes.",
             "reasoning_content": "17 has no divisor between 2 and 4."},
            {"role": "user", "content": "And 21?"},
        ],
        "add_generation_prompt": True,
        "enable_thinking": True,
    },
    "thinking_off": {
        "messages": [{"role": "user", "content": "Quick: capital of Italy?"}],
        "add_generation_prompt": True,
        "enable_thinking": False,
        "reasoning_effort": "low",
    },
    "parallel_calls_string_arguments": {
        "messages": [
            {"role": "system", "content": "Use tools when useful."},
            {"role": "user", "content": "Weather in Paris and Rome?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_a", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
                {"id": "call_b", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}},
            ]},
            {"role": "tool", "tool_call_id": "call_a", "content": "sunny"},
            {"role": "tool", "tool_call_id": "call_b", "content": "rain"},
            {"role": "assistant", "content": "Paris is sunny, Rome rainy."},
            {"role": "user", "content": "Thanks"},
        ],
        "tools": [WEATHER_TOOL],
        "add_generation_prompt": True,
    },
    "content_parts": {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Describe "},
                                         {"type": "text", "text": "this."}]},
        ],
        "add_generation_prompt": True,
    },
    "unicode_and_quotes": {
        "messages": [
            {"role": "system", "content": "  Réponds en français, s'il te plaît.\n"},
            {"role": "user", "content": "Quote: \"<b>&</b>\" — 日本語 ✓\nnext line  "},
        ],
        "add_generation_prompt": True,
    },
}

SPECIAL_TOKENS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
                  "pad_token": "<pad>"}


class AssistantTracker(Extension):
    """transformers' {% generation %} tag: renders its body (the mask is not used here)."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_generation", []), [], [], body).set_lineno(lineno)

    def _generation(self, caller):
        return caller()


def environment():
    from datetime import datetime

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.fromisoformat(FIXED_NOW).strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(env, source, conversation):
    context = dict(SPECIAL_TOKENS)
    context.update(conversation)
    try:
        return {"text": env.from_string(source).render(**context)}
    except jinja2.exceptions.TemplateError as e:  # raise_exception, undefined, sandbox, syntax
        return {"error": f"{type(e).__name__}: {e}"}
    except Exception as e:  # a Python error the template provoked (a bad operand type, ...)
        return {"error": f"{type(e).__name__}: {e}"}


def main():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out_dir = os.path.join(repo, "tests", "fixtures", "chat_templates")
    env = environment()
    renders = {}
    for path in sorted(glob.glob(os.path.join(out_dir, "*.jinja"))):
        with open(path, encoding="utf-8") as f:
            source = f.read()
        renders[os.path.basename(path)] = {
            name: render(env, source, conv) for name, conv in CONVERSATIONS.items()}
    result = {"now": FIXED_NOW, "special_tokens": SPECIAL_TOKENS, "conversations": CONVERSATIONS,
              "renders": renders}
    with open(os.path.join(out_dir, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False, indent=1)
        f.write("\n")
    errors = sum("error" in r for t in renders.values() for r in t.values())
    print(f"{len(renders)} templates x {len(CONVERSATIONS)} conversations, {errors} errors")


if __name__ == "__main__":
    main()
