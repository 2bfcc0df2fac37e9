#!/usr/bin/env python3
"""Records the expected renderings of the chat-template corpus.

For every tests/fixtures/templates/*.jinja (copied from llama.cpp's
models/templates/), renders a fixed set of conversations with Python's jinja2
(3.1.6) configured as HF transformers and llama.cpp's server render chat
templates, and writes tests/fixtures/templates/expected/<template>.json:

  {"<conversation>": {"output": "..."}  or  {"error": "..."}, ...}

tern's corpus test (tests/unit/jinja/corpus_test.cpp) renders the same
conversations (their JSON is written next to the outputs, so the test does not
duplicate it) and compares byte for byte.

Usage: .venv/bin/python scripts/gen_template_corpus.py [--copy-from DIR]
"""
from __future__ import annotations

import argparse
import datetime
import json
import shutil
import sys
from pathlib import Path

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import SandboxedEnvironment

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "templates"
# strftime_now() returns this instant, formatted (tern's test passes the same).
FIXED_NOW = datetime.datetime(2025, 3, 7, 9, 5, 4)

TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"},
                           "unit": {"type": "string", "enum": ["c", "f"]}},
            "required": ["city"],
        },
    },
}]

SYSTEM = {"role": "system", "content": "You are terse. Answer in one line."}
USER = {"role": "user", "content": "Hello <|im_end|> there, ünïcödé \"quotes\" 'x'"}
ASSISTANT = {"role": "assistant", "content": "Hi! How can I help?"}
USER2 = {"role": "user", "content": "  What is 2+2?\n"}
CALL = {"role": "assistant", "content": "", "tool_calls": [{
    "id": "a1b2c3d4e", "type": "function",
    "function": {"name": "get_weather", "arguments": {"city": "Oslo", "unit": "c"}}}]}
RESULT = {"role": "tool", "tool_call_id": "a1b2c3d4e", "name": "get_weather",
          "content": "{\"temp\": 7, \"sky\": \"clear\"}"}

# name -> (messages, add_generation_prompt, tools or None)
CONVERSATIONS = {
    "user": ([USER], True, None),
    "system_user": ([SYSTEM, USER], True, None),
    "multi_turn": ([SYSTEM, USER, ASSISTANT, USER2], True, None),
    "multi_turn_no_gen": ([SYSTEM, USER, ASSISTANT, USER2], False, None),
    "tools": ([SYSTEM, {"role": "user", "content": "Weather in Oslo?"}, CALL, RESULT],
              True, TOOLS),
}
BOS, EOS = "<|bos|>", "<|eos|>"


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers' tojson: json.dumps with ensure_ascii off, not HTML-escaped.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


class Generation(Extension):
    """transformers' {% generation %}...{% endgeneration %}: renders its body."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.Scope(body, lineno=lineno)


def make_env() -> SandboxedEnvironment:
    env = SandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols, Generation])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: FIXED_NOW.strftime(fmt)
    return env


def render(env, source: str, conv) -> dict:
    messages, add_gen, tools = conv
    try:
        tmpl = env.from_string(source)
        # As llama.cpp's server: tools and add_generation_prompt only when set.
        ctx = {"messages": messages, "bos_token": BOS, "eos_token": EOS}
        if tools:
            ctx["tools"] = tools
        if add_gen:
            ctx["add_generation_prompt"] = True
        out = tmpl.render(**ctx)
        return {"output": out}
    except Exception as e:  # noqa: BLE001 - any failure is an expected error
        return {"error": f"{type(e).__name__}: {e}"}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copy-from", type=Path, help="llama.cpp's models/templates to copy first")
    args = ap.parse_args()
    if args.copy_from:
        for f in sorted(args.copy_from.glob("*.jinja")):
            shutil.copyfile(f, FIXTURES / f.name)
    (FIXTURES / "expected").mkdir(exist_ok=True)
    (FIXTURES / "conversations.json").write_text(json.dumps(
        {"bos_token": BOS, "eos_token": EOS, "now": FIXED_NOW.isoformat(),
         "conversations": {k: {"messages": m, "add_generation_prompt": g, "tools": t}
                           for k, (m, g, t) in CONVERSATIONS.items()}},
        ensure_ascii=False, indent=1) + "\n")
    env = make_env()
    n_ok = n_err = 0
    for f in sorted(FIXTURES.glob("*.jinja")):
        source = f.read_text()
        result = {}
        for name, conv in CONVERSATIONS.items():
            if name == "tools" and "tool" not in source:
                continue
            r = render(env, source, conv)
            n_ok += "output" in r
            n_err += "error" in r
            result[name] = r
        (FIXTURES / "expected" / (f.stem + ".json")).write_text(
            json.dumps(result, ensure_ascii=False, indent=1) + "\n")
    print(f"{n_ok} renderings, {n_err} expected errors", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
