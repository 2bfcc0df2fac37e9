"""Tool calling through the real OpenAI SDK against the real server.

SmolLM2-135M (the shared server) is far too small to call tools well on its
own, so the calls it must make (tool_choice required, a named function) are
decoded under the tool-call grammar: the name is one of the tools and the
arguments validate against that tool's JSON Schema. Calls a model writes on
its own (tool_choice auto) are parsed from its text: a scripted model
(`tern gen-scripted-model`, a real GGUF run by the real engine) writes one
token by token, with text in front, so the parser sees the tags split across
pieces exactly as a real model produces them."""
from __future__ import annotations

import json

import jsonschema
import openai
import pydantic
import pytest
import requests

from tern_server import TernServer
from test_reasoning import scripted_model

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "City name"},
                   "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"],
    "additionalProperties": False,
}
ADD = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
                                      "parameters": WEATHER}},
    {"type": "function", "function": {"name": "add", "description": "Add two integers",
                                      "parameters": ADD}},
]
SCHEMAS = {"get_weather": WEATHER, "add": ADD}
ASK = [{"role": "user", "content": "What is the weather like in Paris today?"}]


def check_calls(calls):
    assert calls, "no tool calls"
    for c in calls:
        assert c.type == "function"
        assert c.id.startswith("call_")
        assert c.function.name in SCHEMAS
        jsonschema.validate(json.loads(c.function.arguments), SCHEMAS[c.function.name])


def test_required_gives_valid_calls(client, healthy):
    r = client.chat.completions.create(model="m", messages=ASK, tools=TOOLS, tool_choice="required",
                                       temperature=0, max_tokens=120)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls"
    assert c.message.content is None
    check_calls(c.message.tool_calls)
    assert len({t.id for t in c.message.tool_calls}) == len(c.message.tool_calls)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_named_function_is_called_even_when_sampling(client, seed):
    r = client.chat.completions.create(
        model="m", messages=ASK, tools=TOOLS, temperature=1.0, seed=seed, max_tokens=160,
        tool_choice={"type": "function", "function": {"name": "add"}}, parallel_tool_calls=False)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls"
    assert len(c.message.tool_calls) == 1
    assert c.message.tool_calls[0].function.name == "add"
    check_calls(c.message.tool_calls)


def test_round_trip_tool_result_then_answer(client):
    first = client.chat.completions.create(model="m", messages=ASK, tools=TOOLS,
                                           tool_choice={"type": "function",
                                                        "function": {"name": "get_weather"}},
                                           parallel_tool_calls=False, temperature=0, max_tokens=120)
    call = first.choices[0].message.tool_calls[0]
    args = json.loads(call.function.arguments)
    history = ASK + [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id,
         "content": json.dumps({"city": args["city"], "temperature": 18, "sky": "sunny"})},
    ]
    final = client.chat.completions.create(model="m", messages=history, tools=TOOLS,
                                           tool_choice="none", temperature=0, max_tokens=40)
    c = final.choices[0]
    assert c.finish_reason in ("stop", "length")
    assert c.message.tool_calls is None
    assert c.message.content.strip()
    # The call and its result reached the prompt (tool_choice none leaves the tool list out).
    plain = client.chat.completions.create(model="m", messages=ASK, max_tokens=1)
    assert final.usage.prompt_tokens > plain.usage.prompt_tokens + 30


def test_streamed_tool_deltas_reassemble(client):
    kwargs = dict(model="m", messages=ASK, tools=TOOLS, tool_choice="required", temperature=0,
                  max_tokens=120)
    whole = client.chat.completions.create(**kwargs).choices[0].message.tool_calls
    # The SDK's stream helper accumulates delta.tool_calls into the final message.
    with client.chat.completions.stream(**kwargs) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion()
    got = final.choices[0].message.tool_calls
    assert final.choices[0].finish_reason == "tool_calls"
    check_calls(got)
    assert [(t.function.name, json.loads(t.function.arguments)) for t in got] == \
        [(t.function.name, json.loads(t.function.arguments)) for t in whole]
    # By hand: the first delta of a call carries index, id, type and name; its
    # arguments follow in fragments as the model writes them.
    heads, fragments = [], {}
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        for d in chunk.choices[0].delta.tool_calls or [] if chunk.choices else []:
            if d.id:
                assert d.type == "function" and d.function.name
                heads.append(d.index)
            elif d.function.arguments:
                fragments.setdefault(d.index, []).append(d.function.arguments)
    assert heads == list(range(len(whole)))
    assert all(len(fragments[i]) > 1 for i in heads), fragments
    assert [json.loads("".join(fragments[i])) for i in heads] == \
        [json.loads(t.function.arguments) for t in whole]


class Weather(pydantic.BaseModel):
    city: str
    unit: str


class Answer(pydantic.BaseModel):
    city: str
    sunny: bool
    temperature: int


def test_sdk_parse_with_pydantic_models(client):
    r = client.chat.completions.parse(model="m", messages=ASK, response_format=Answer,
                                      temperature=0, max_tokens=80)
    assert isinstance(r.choices[0].message.parsed, Answer)
    # Strict function tools from a pydantic model: parsed_arguments comes back typed.
    r = client.chat.completions.parse(model="m", messages=ASK,
                                      tools=[openai.pydantic_function_tool(Weather)],
                                      tool_choice="required", temperature=0, max_tokens=80)
    call = r.choices[0].message.tool_calls[0]
    assert call.function.name == "Weather"
    assert isinstance(call.function.parsed_arguments, Weather)


def post(server, body):
    return requests.post(server.url + "/v1/chat/completions", json=body, timeout=60)


@pytest.mark.parametrize("body,param,words", [
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": "{not json"}}]},
     "tools[0].function.parameters", "not valid JSON"),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
     "tool_choice.function.name", "nope"),
    ({"tools": TOOLS, "tool_choice": "sometimes"}, "tool_choice", "sometimes"),
    ({"tools": [{"type": "function", "function": {
        "name": "f", "strict": True,
        "parameters": {"type": "object", "properties": {"s": {"type": "string", "pattern": "a+"}}}}}]},
     "tools[0].function.parameters", "pattern"),
    ({"tools": [{"type": "function", "function": {"name": "bad name!"}}]},
     "tools[0].function.name", "bad name!"),
    ({"tools": TOOLS, "tool_choice": "required", "n": 2}, "tools", "n > 1"),
    ({"messages": ASK + [{"role": "tool", "content": "42"}]}, "messages[1].tool_call_id",
     "tool_call_id"),
    ({"messages": ASK + [{"role": "assistant", "tool_calls": [
        {"type": "function", "function": {"name": "add", "arguments": "{}"}}]}]},
     "messages[1].tool_calls[0].id", "id"),
])
def test_bad_tool_input_is_a_400_naming_it(server, healthy, body, param, words):
    r = post(server, {"messages": ASK, "max_tokens": 4, **body})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["param"] == param
    assert words in err["message"]


# Every token of a script is distinct (the scripted model's next token depends
# only on the current one); the tags are split across tokens on purpose.
SCRIPT = ("Let| me| check|.\\n<|tool|_call>|\\n{\"name\": \"get_weather\", |\"arguments\": "
          "{\"city\": \"Paris\", \"unit\": \"celsius\"}}|\\n</|tool_call|>")


@pytest.fixture(scope="module")
def caller(tmp_path_factory):
    model = scripted_model(tmp_path_factory, SCRIPT, "caller")
    with TernServer(model=model) as srv:
        yield srv


def sdk(srv):
    return openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=0, timeout=120)


def test_auto_parses_a_call_the_model_writes(caller):
    r = sdk(caller).chat.completions.create(model="m", messages=ASK, tools=TOOLS, temperature=0,
                                            max_tokens=60)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls"
    assert c.message.content == "Let me check.\n"
    assert [(t.function.name, json.loads(t.function.arguments)) for t in c.message.tool_calls] == \
        [("get_weather", {"city": "Paris", "unit": "celsius"})]


def test_auto_streamed_keeps_text_before_the_call(caller):
    stream = sdk(caller).chat.completions.create(model="m", messages=ASK, tools=TOOLS,
                                                 temperature=0, max_tokens=60, stream=True)
    text, calls, finish = "", {}, None
    for chunk in stream:
        if not chunk.choices:
            continue
        d = chunk.choices[0].delta
        text += d.content or ""
        for t in d.tool_calls or []:
            entry = calls.setdefault(t.index, {"name": "", "arguments": ""})
            entry["name"] += t.function.name or ""
            entry["arguments"] += t.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert "<tool" not in text
    assert text == "Let me check.\n"
    assert finish == "tool_calls"
    assert list(calls) == [0]
    assert calls[0]["name"] == "get_weather"
    assert json.loads(calls[0]["arguments"]) == {"city": "Paris", "unit": "celsius"}


def test_without_tools_the_tags_stay_text(caller):
    r = sdk(caller).chat.completions.create(model="m", messages=ASK, temperature=0, max_tokens=60)
    assert "<tool_call>" in r.choices[0].message.content
    assert r.choices[0].message.tool_calls is None


def test_websocket_generate_sends_tool_call_messages(caller):
    import asyncio

    import websockets

    async def go():
        async with websockets.connect(caller.ws_url) as ws:
            assert json.loads(await ws.recv())["type"] == "hello"
            await ws.send(json.dumps({"type": "generate", "id": "g", "messages": ASK,
                                      "tools": TOOLS, "temperature": 0, "max_tokens": 60}))
            seen = []
            while True:
                m = json.loads(await asyncio.wait_for(ws.recv(), 60))
                if m["type"] == "error":
                    raise AssertionError(m)
                seen.append(m)
                if m["type"] == "done":
                    return seen

    seen = asyncio.run(go())
    text = "".join(m["text"] for m in seen if m["type"] == "delta")
    calls = [m for m in seen if m["type"] == "tool_call"]
    assert text == "Let me check.\n"
    assert [(c["index"], c["name"], json.loads(c["arguments"])) for c in calls] == \
        [(0, "get_weather", {"city": "Paris", "unit": "celsius"})]
    assert calls[0]["call_id"].startswith("call_")
    assert seen[-1]["finish_reason"] == "tool_calls"
    # The text before the call arrives before it.
    kinds = [m["type"] for m in seen if m["type"] in ("delta", "tool_call") and m.get("text", "x")]
    assert kinds.index("tool_call") > kinds.index("delta")


RESPONSES_TOOLS = [{"type": "function", "name": t["function"]["name"],
                    "description": t["function"]["description"],
                    "parameters": t["function"]["parameters"]} for t in TOOLS]


def test_responses_api_function_call_round_trip(client):
    r = client.responses.create(model="m", input="What is the weather in Paris?",
                                tools=RESPONSES_TOOLS, tool_choice="required",
                                parallel_tool_calls=False, temperature=0, max_output_tokens=120)
    calls = [o for o in r.output if o.type == "function_call"]
    assert len(calls) == 1, r.output
    call = calls[0]
    assert call.name in SCHEMAS and call.call_id.startswith("call_")
    jsonschema.validate(json.loads(call.arguments), SCHEMAS[call.name])
    # The result goes back as a function_call_output item, after the call itself.
    final = client.responses.create(
        model="m", tools=RESPONSES_TOOLS, tool_choice="none", temperature=0, max_output_tokens=40,
        input=[{"role": "user", "content": "What is the weather in Paris?"},
               {"type": "function_call", "call_id": call.call_id, "name": call.name,
                "arguments": call.arguments},
               {"type": "function_call_output", "call_id": call.call_id,
                "output": json.dumps({"temperature": 18})}])
    assert final.output_text.strip()
    assert not [o for o in final.output if o.type == "function_call"]


def test_responses_api_streams_function_call_items(client):
    with client.responses.stream(model="m", input="What is 2 plus 3?", tools=RESPONSES_TOOLS,
                                 tool_choice={"type": "function", "name": "add"},
                                 parallel_tool_calls=False, temperature=0,
                                 max_output_tokens=120) as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_response()
    assert "response.function_call_arguments.done" in kinds
    calls = [o for o in final.output if o.type == "function_call"]
    assert [c.name for c in calls] == ["add"]
    jsonschema.validate(json.loads(calls[0].arguments), ADD)


def test_responses_api_bad_tool_is_a_400(server, healthy):
    r = requests.post(server.url + "/v1/responses", timeout=60, json={
        "input": "hi", "tools": RESPONSES_TOOLS, "tool_choice": {"type": "function", "name": "nope"}})
    assert r.status_code == 400, r.text
    assert "nope" in r.json()["error"]["message"]


ANTHROPIC_TOOLS = [{"name": t["function"]["name"], "description": t["function"]["description"],
                    "input_schema": t["function"]["parameters"]} for t in TOOLS]


def anthropic_client(srv):
    import anthropic

    return anthropic.Anthropic(base_url=srv.url, api_key="x", max_retries=0, timeout=120)


def test_anthropic_tool_use_round_trip(server):
    a = anthropic_client(server)
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    r = a.messages.create(model="m", max_tokens=120, messages=ask,
                          tools=ANTHROPIC_TOOLS,
                          tool_choice={"type": "any", "disable_parallel_tool_use": True})
    assert r.stop_reason == "tool_use"
    uses = [b for b in r.content if b.type == "tool_use"]
    assert len(uses) == 1 and uses[0].id.startswith("toolu_")
    jsonschema.validate(uses[0].input, SCHEMAS[uses[0].name])
    final = a.messages.create(
        model="m", max_tokens=40, tools=ANTHROPIC_TOOLS, tool_choice={"type": "none"},
        messages=ask + [{"role": "assistant", "content": r.content},
                        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0].id,
                                                      "content": "18C and sunny"}]}])
    assert final.stop_reason in ("end_turn", "max_tokens")
    assert final.content[0].type == "text" and final.content[0].text.strip()


def test_anthropic_streamed_tool_use(server):
    a = anthropic_client(server)
    with a.messages.stream(model="m", max_tokens=120,
                           messages=[{"role": "user", "content": "What is 2 plus 3?"}],
                           tools=ANTHROPIC_TOOLS, tool_choice={"type": "tool", "name": "add"}) as s:
        final = s.get_final_message()
    uses = [b for b in final.content if b.type == "tool_use"]
    assert [u.name for u in uses][:1] == ["add"]
    jsonschema.validate(uses[0].input, ADD)
    assert final.stop_reason == "tool_use"


def test_anthropic_bad_tool_choice_is_a_400(server, healthy):
    r = requests.post(server.url + "/v1/messages", timeout=60, json={
        "model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}],
        "tools": ANTHROPIC_TOOLS, "tool_choice": {"type": "tool", "name": "nope"}})
    assert r.status_code == 400, r.text
    assert "nope" in r.json()["error"]["message"]


def test_auto_with_a_strict_tool_constrains_the_call_once_opened(caller):
    # The scripted model writes unit "celsius"; the strict schema allows only
    # "kelvin" and short city names. Its text stays free; its call is forced
    # into the schema from the moment it opens <tool_call>.
    strict = {"type": "object", "additionalProperties": False, "required": ["city", "unit"],
              "properties": {"city": {"type": "string", "maxLength": 8},
                             "unit": {"type": "string", "enum": ["kelvin"]}}}
    tools = [{"type": "function", "function": {"name": "get_weather", "strict": True,
                                               "parameters": strict}}]
    # (The scripted vocabulary spells the forced JSON byte by byte: room for it.)
    r = sdk(caller).chat.completions.create(model="m", messages=ASK, tools=tools, temperature=0,
                                            max_tokens=200)
    c = r.choices[0]
    assert c.message.content.startswith("Let me check.")
    assert c.message.tool_calls and len(c.message.tool_calls) == 1, repr(c.message.content)
    args = json.loads(c.message.tool_calls[0].function.arguments)
    jsonschema.validate(args, strict)
    assert args["unit"] == "kelvin"
