"""Structured output (response_format) through the OpenAI Python SDK: every
output must parse and validate against its schema, greedy and sampled."""
from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from enum import Enum
from typing import Literal, Optional

import jsonschema
import openai
import pytest
from pydantic import BaseModel, Field

PROMPT = [{"role": "user", "content": "Describe a person as JSON."}]

# Every string is bounded, so each output has a bounded length: the grammar
# forces it to finish within max_tokens.
S = {"type": "string", "maxLength": 24}
SCHEMAS = {
    "person": {"type": "object", "properties": {"name": S, "age": {"type": "integer", "minimum": 0, "maximum": 120}},
               "required": ["name", "age"], "additionalProperties": False},
    "colors": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "minItems": 1, "maxItems": 4},
    "flag": {"type": "object", "properties": {"ok": {"type": "boolean"}, "note": {"anyOf": [S, {"type": "null"}]}},
             "required": ["ok", "note"], "additionalProperties": False},
    "point": {"type": "object", "properties": {"x": {"type": "number", "minimum": -10, "maximum": 10},
                                               "y": {"type": "number", "minimum": -10, "maximum": 10}},
              "required": ["x", "y"], "additionalProperties": False},
    "tuple": {"type": "array", "prefixItems": [S, {"type": "integer", "minimum": 1, "maximum": 9}, {"type": "boolean"}],
              "items": False, "minItems": 3},
    "const": {"type": "object", "properties": {"kind": {"const": "event"}, "id": {"type": "integer", "minimum": 0, "maximum": 999}},
              "required": ["kind", "id"], "additionalProperties": False},
    "union": {"oneOf": [
        {"type": "object", "properties": {"cat": S}, "required": ["cat"], "additionalProperties": False},
        {"type": "object", "properties": {"dog": S}, "required": ["dog"], "additionalProperties": False}]},
    "tree": {"$defs": {"node": {"type": "object", "properties": {
        "label": {"type": "string", "maxLength": 8},
        "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
        "required": ["label"], "additionalProperties": False}},
        "$ref": "#/$defs/node"},
    "nullable": {"type": ["integer", "null"], "minimum": 3, "maximum": 7},
    "tags": {"type": "object", "properties": {"title": {"type": "string", "minLength": 1, "maxLength": 16},
                                              "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3}},
             "required": ["title", "tags"], "additionalProperties": False},
}


# Thirty more, for the issue's suite of >= 40: scalars with ranges, enums and
# constants with escapes and unicode, nested objects and arrays, unions,
# optional properties, $defs references (typed additionalProperties, whose
# key names are unbounded, are walked in tests/unit/sampling/json_schema_test.cpp). (Recursion
# is in "tree" above; an unbounded recursive schema could run to max_tokens.)
N = {"type": "integer", "minimum": -5, "maximum": 50}
MORE = {
    "bool": {"type": "boolean"},
    "null": {"type": "null"},
    "small_int": {"type": "integer", "minimum": 0, "maximum": 9},
    "negative": {"type": "integer", "minimum": -99, "maximum": -1},
    "ratio": {"type": "number", "minimum": 0, "maximum": 1},
    "short_string": {"type": "string", "minLength": 2, "maxLength": 6},
    "unicode_enum": {"enum": ["caf\u00e9", "na\u00efve", "\u65e5\u672c", "\u00fcber"]},
    "escape_enum": {"enum": ["a\"b", "back\\slash", "tab\there", "new\nline"]},
    "mixed_enum": {"enum": ["x", 1, 2.5, True, None, {"k": [1, 2]}]},
    "const_unicode": {"type": "object", "properties": {"greeting": {"const": "gr\u00fc\u00df dich"}},
                      "required": ["greeting"], "additionalProperties": False},
    "string_or_int": {"anyOf": [S, N]},
    "one_of_scalars": {"oneOf": [{"type": "boolean"}, {"type": "null"}]},
    "int_array": {"type": "array", "items": N, "minItems": 2, "maxItems": 5},
    "matrix": {"type": "array", "items": {"type": "array", "items": N, "minItems": 1, "maxItems": 3},
               "minItems": 1, "maxItems": 3},
    "empty_array": {"type": "array", "maxItems": 0},
    "address": {"type": "object", "properties": {
        "street": S, "city": S, "zip": {"type": "string", "minLength": 5, "maxLength": 5}},
        "required": ["street", "city", "zip"], "additionalProperties": False},
    "nested": {"type": "object", "properties": {
        "user": {"type": "object", "properties": {"name": S, "age": N}, "required": ["name", "age"],
                 "additionalProperties": False},
        "active": {"type": "boolean"}}, "required": ["user", "active"], "additionalProperties": False},
    "optional_props": {"type": "object", "properties": {"a": N, "b": S, "c": {"type": "boolean"}},
                       "required": ["a"], "additionalProperties": False},
    "flags": {"type": "object", "properties": {"read": {"type": "boolean"}, "write": {"type": "boolean"},
                                               "exec": {"type": "boolean"}},
              "required": ["read", "write", "exec"], "additionalProperties": False},
    "list_of_objects": {"type": "array", "items": {
        "type": "object", "properties": {"k": {"enum": ["a", "b"]}, "v": N}, "required": ["k", "v"],
        "additionalProperties": False}, "minItems": 1, "maxItems": 3},
    "nullable_string": {"type": ["string", "null"], "maxLength": 10},
    "nullable_object": {"anyOf": [{"type": "null"}, {"type": "object", "properties": {"x": N},
                                                      "required": ["x"], "additionalProperties": False}]},
    "tuple_open": {"type": "array", "prefixItems": [{"const": "head"}, N], "items": {"type": "boolean"},
                   "minItems": 2, "maxItems": 4},
    "event": {"type": "object", "properties": {
        "type": {"enum": ["click", "view", "buy"]}, "ts": {"type": "integer", "minimum": 0, "maximum": 99999},
        "meta": {"type": "object", "properties": {"src": S}, "required": ["src"], "additionalProperties": False}},
        "required": ["type", "ts", "meta"], "additionalProperties": False},
    "defs_ref": {"$defs": {"pt": {"type": "object", "properties": {"x": N, "y": N}, "required": ["x", "y"],
                                  "additionalProperties": False}},
                 "type": "object", "properties": {"from": {"$ref": "#/$defs/pt"}, "to": {"$ref": "#/$defs/pt"}},
                 "required": ["from", "to"], "additionalProperties": False},
    "color_hex": {"type": "string", "minLength": 7, "maxLength": 7},
    "pair": {"type": "array", "prefixItems": [{"type": "boolean"}, {"type": "null"}], "items": False,
             "minItems": 2},
    "tool_args": {"type": "object", "properties": {
        "path": {"type": "string", "minLength": 1, "maxLength": 20},
        "recursive": {"type": "boolean"}, "depth": {"type": "integer", "minimum": 1, "maximum": 5}},
        "required": ["path", "recursive", "depth"], "additionalProperties": False},
    "rating": {"type": "object", "properties": {"stars": {"type": "integer", "minimum": 1, "maximum": 5},
                                                "comment": {"type": ["string", "null"], "maxLength": 20}},
               "required": ["stars", "comment"], "additionalProperties": False},
    "words": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 6}, "minItems": 3,
              "maxItems": 3},
}
SCHEMAS.update(MORE)
assert len(SCHEMAS) >= 40

def response_format(name, schema):
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


def generate(client, name, schema, seed):
    kwargs = {"temperature": 0} if seed is None else {"temperature": 1.0, "seed": seed}
    r = client.chat.completions.create(model="tern", messages=PROMPT, max_tokens=400,
                                       response_format=response_format(name, schema), **kwargs)
    return r.choices[0]


@pytest.mark.parametrize("seed", [None, 1, 2])
def test_every_output_parses_and_validates(client, seed):
    with ThreadPoolExecutor(len(SCHEMAS)) as pool:
        futures = {name: pool.submit(generate, client, name, schema, seed) for name, schema in SCHEMAS.items()}
        for name, f in futures.items():
            choice = f.result()
            assert choice.finish_reason == "stop", (name, choice.message.content)
            value = json.loads(choice.message.content)
            jsonschema.validate(value, SCHEMAS[name])


def test_json_object(client):
    r = client.chat.completions.create(model="tern", messages=PROMPT, max_tokens=300, temperature=0,
                                       response_format={"type": "json_object"})
    choice = r.choices[0]
    if choice.finish_reason == "stop":
        assert isinstance(json.loads(choice.message.content), dict)
    else:
        assert choice.finish_reason == "length"
        assert choice.message.content.startswith("{")


def test_streaming_and_completions(client):
    schema = SCHEMAS["person"]
    stream = client.chat.completions.create(model="tern", messages=PROMPT, max_tokens=400, temperature=0,
                                            response_format=response_format("p", schema), stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    jsonschema.validate(json.loads(text), schema)
    r = client.completions.create(model="tern", prompt="A person:", max_tokens=400, temperature=0,
                                  extra_body={"response_format": response_format("p", schema)})
    assert r.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(r.choices[0].text), schema)


def test_max_tokens_truncation_is_length(client):
    r = client.chat.completions.create(model="tern", messages=PROMPT, max_tokens=3, temperature=0,
                                       response_format=response_format("p", SCHEMAS["person"]))
    assert r.choices[0].finish_reason == "length"
    assert r.choices[0].message.content.startswith("{")


class Color(str, Enum):
    red = "red"
    green = "green"


class Pet(BaseModel):
    name: str = Field(max_length=12)
    kind: Literal["cat", "dog"]


class Owner(BaseModel):
    name: str = Field(max_length=16)
    age: int = Field(ge=0, le=120)
    favourite: Color
    pets: list[Pet] = Field(max_length=2)
    nickname: Optional[str] = Field(max_length=10)


def test_sdk_parse_with_pydantic_model(client):
    r = client.chat.completions.parse(model="tern", messages=PROMPT, max_tokens=400, temperature=0,
                                      response_format=Owner)
    owner = r.choices[0].message.parsed
    assert isinstance(owner, Owner)
    assert 0 <= owner.age <= 120


def test_bad_schema_is_400_and_server_keeps_serving(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model="tern", messages=PROMPT, max_tokens=8,
            response_format=response_format("bad", {"type": "string", "pattern": "^a+$"}))
    assert "pattern" in str(e.value)
    assert e.value.body["param"] == "response_format.json_schema.schema"
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="tern", messages=PROMPT, max_tokens=8,
                                       response_format={"type": "yaml"})
    r = generate(client, "person", SCHEMAS["person"], None)
    jsonschema.validate(json.loads(r.message.content), SCHEMAS["person"])


def test_websocket_generate_with_response_format(server):
    import asyncio

    import websockets

    schema = SCHEMAS["colors"]

    async def go():
        async with websockets.connect(server.ws_url, max_size=None) as ws:
            json.loads(await ws.recv())  # hello
            await ws.send(json.dumps({"type": "generate", "id": "j", "max_tokens": 200, "temperature": 0,
                                      "messages": PROMPT, "response_format": response_format("c", schema)}))
            await ws.send(json.dumps({"type": "generate", "id": "bad", "messages": PROMPT,
                                      "response_format": response_format("b", {"type": "string", "format": "email"})}))
            text, done, error = "", None, None
            while done is None or error is None:
                msg = json.loads(await asyncio.wait_for(ws.recv(), 300))
                if msg["type"] == "delta" and msg["id"] == "j":
                    text += msg["text"]
                elif msg["type"] == "done" and msg["id"] == "j":
                    done = msg
                elif msg["type"] == "error":
                    error = msg
            return text, done, error

    text, done, error = asyncio.run(go())
    assert done["finish_reason"] == "stop"
    jsonschema.validate(json.loads(text), schema)
    assert "format" in json.dumps(error)


def deep_schema(levels: int) -> str:
    """{"type": "array", "items": {...}} nested `levels` deep, as JSON text (too
    deep for Python's json module to write)."""
    return '{"type":"array","items":' * levels + '{"type":"string"}' + "}" * levels


@pytest.mark.parametrize("levels", [1_000, 50_000])
def test_deep_schema_is_a_fast_400_naming_its_path(levels):
    import requests
    from tern_server import TernServer

    body = ('{"model":"tern","max_tokens":4,"messages":[{"role":"user","content":"hi"}],'
            '"response_format":{"type":"json_schema","json_schema":{"name":"deep","schema":'
            + deep_schema(levels) + "}}}")
    with TernServer("--ctx", "512", "--body-limit", "4096") as s:
        t0 = time.monotonic()
        r = requests.post(s.url + "/v1/chat/completions", data=body, timeout=30,
                          headers={"Content-Type": "application/json"})
        assert time.monotonic() - t0 < 5
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert err["param"] == "response_format.json_schema.schema"
        assert err["code"] == "invalid_json_schema"
        assert "$.items.items" in err["message"] and "64 levels" in err["message"], err
        assert "$ref" not in err["message"]
        assert requests.get(s.url + "/health", timeout=5).status_code == 200


def test_wide_schema_within_the_bounds_compiles_fast():
    """Members after a large sibling used to copy it at every level (cubic)."""
    import requests
    from tern_server import TernServer

    inner = {"type": "object", "properties": {f"p{i}": {"enum": list(range(40))} for i in range(400)}}
    schema = inner
    for _ in range(28):  # the big subtree first, then siblings that grow each parent
        schema = {"type": "object", "properties": {"a": schema, **{f"s{j}": {"type": "integer"} for j in range(12)}}}
    with TernServer("--ctx", "512", "--body-limit", "4096") as s:
        t0 = time.monotonic()
        r = requests.post(s.url + "/v1/chat/completions", timeout=60, json={
            "model": "tern", "max_tokens": 1, "messages": PROMPT,
            "response_format": response_format("wide", schema)})
        assert r.status_code == 200, r.text
        assert time.monotonic() - t0 < 5

