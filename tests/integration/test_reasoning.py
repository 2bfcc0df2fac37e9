"""Reasoning output: a model that thinks between <think> and </think> has its
thinking delivered apart from its answer (reasoning_content, as vLLM and
llama.cpp's server do), and --reasoning-format none keeps the raw text.

The model is real and runs in the real engine: `tern gen-scripted-model`
writes a tiny GGUF whose greedy reply to any chat is a fixed token script, so
the output goes through the sampler, the detokenizer and the streams token by
token, tags split across pieces included."""
from __future__ import annotations

import asyncio
import json
import subprocess

import openai
import pytest
import requests
import websockets

from tern_server import TernServer, tern_bin

SCRIPT = "<think>|\\nWeighing| the| options|.\\n\\n|</think>|\\n\\nThe| answer| is| 42|."
RAW = "<think>\nWeighing the options.\n\n</think>\n\nThe answer is 42."
REASONING = "Weighing the options."
ANSWER = "The answer is 42."
ASK = [{"role": "user", "content": "What is the answer?"}]


def scripted_model(tmp_path_factory, script: str, name: str):
    path = tmp_path_factory.mktemp("scripted") / f"{name}.gguf"
    subprocess.run([str(tern_bin()), "gen-scripted-model", "--script", script, "--out", str(path)],
                   check=True, capture_output=True)
    return path


@pytest.fixture(scope="module")
def thinker(tmp_path_factory):
    model = scripted_model(tmp_path_factory, SCRIPT, "thinker")
    with TernServer(model=model) as srv:
        yield srv


def sdk(srv):
    return openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=0, timeout=120)


def test_the_scripted_model_really_writes_the_tags(thinker):
    # /v1/completions is raw text: the script comes out whole.
    r = requests.post(thinker.url + "/v1/completions", timeout=60, json={
        "prompt": "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", "max_tokens": 40,
        "temperature": 0})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["text"] == RAW


def test_chat_splits_reasoning_from_answer(thinker):
    c = sdk(thinker).chat.completions.create(model="m", messages=ASK, temperature=0,
                                             max_tokens=40)
    msg = c.choices[0].message
    assert msg.content == ANSWER
    assert msg.reasoning_content == REASONING
    assert c.choices[0].finish_reason == "stop"
    assert c.usage.completion_tokens == 12  # eleven script tokens and the end of turn


def test_streamed_chat_splits_the_same_way(thinker):
    stream = sdk(thinker).chat.completions.create(model="m", messages=ASK, temperature=0,
                                                  max_tokens=40, stream=True)
    reasoning, content, order = "", "", []
    for chunk in stream:
        if not chunk.choices:
            continue
        d = chunk.choices[0].delta
        r = getattr(d, "reasoning_content", None)
        if r:
            reasoning += r
            order.append("r")
        if d.content:
            content += d.content
            order.append("c")
        assert "<think>" not in (d.content or "") and "</think>" not in (d.content or "")
    assert reasoning == REASONING and content == ANSWER
    assert order == sorted(order, key=lambda k: k == "c")  # all reasoning before the answer


def test_unfinished_thinking_stays_reasoning(thinker):
    c = sdk(thinker).chat.completions.create(model="m", messages=ASK, temperature=0, max_tokens=3)
    assert c.choices[0].finish_reason == "length"
    assert c.choices[0].message.reasoning_content == "Weighing the"
    assert c.choices[0].message.content == ""


def test_websocket_deltas_carry_reasoning(thinker):
    async def go():
        async with websockets.connect(thinker.ws_url) as ws:
            assert json.loads(await ws.recv())["type"] == "hello"
            await ws.send(json.dumps({"type": "generate", "id": "g", "messages": ASK,
                                      "temperature": 0, "max_tokens": 40}))
            text, reasoning = "", ""
            while True:
                m = json.loads(await asyncio.wait_for(ws.recv(), 60))
                if m["type"] == "delta":
                    text += m["text"]
                    reasoning += m.get("reasoning", "")
                elif m["type"] == "done":
                    return text, reasoning
                elif m["type"] == "error":
                    raise AssertionError(m)

    assert asyncio.run(go()) == (ANSWER, REASONING)


def test_reasoning_format_none_keeps_raw_text(tmp_path_factory):
    model = scripted_model(tmp_path_factory, SCRIPT, "thinker-raw")
    with TernServer("--reasoning-format", "none", model=model) as srv:
        c = sdk(srv).chat.completions.create(model="m", messages=ASK, temperature=0,
                                             max_tokens=40)
        assert c.choices[0].message.content == RAW
        assert getattr(c.choices[0].message, "reasoning_content", None) is None


def test_model_without_think_tokens_is_not_split(tmp_path_factory):
    # Auto only splits for vocabularies that have the tags as tokens; text that
    # merely spells them is left alone.
    model = scripted_model(tmp_path_factory, "The| tag| <b>| stays", "plain")
    with TernServer(model=model) as srv:
        c = sdk(srv).chat.completions.create(model="m", messages=ASK, temperature=0,
                                             max_tokens=40)
        assert c.choices[0].message.content == "The tag <b> stays"
        assert getattr(c.choices[0].message, "reasoning_content", None) is None


def test_responses_api_gives_a_reasoning_item(thinker):
    r = sdk(thinker).responses.create(model="m", input="What is the answer?", temperature=0,
                                      max_output_tokens=40)
    assert [item.type for item in r.output] == ["reasoning", "message"]
    assert r.output[0].content[0].type == "reasoning_text"
    assert r.output[0].content[0].text == REASONING
    assert r.output_text == ANSWER
    # The stored response, continued: the history keeps the answer, not the thinking.
    again = sdk(thinker).responses.retrieve(r.id)
    assert again.output_text == ANSWER and again.output[0].content[0].text == REASONING


def test_streamed_responses_events_in_order(thinker):
    events = []
    with sdk(thinker).responses.stream(model="m", input="What is the answer?", temperature=0,
                                       max_output_tokens=40) as stream:
        for e in stream:
            events.append(e)
        final = stream.get_final_response()
    kinds = [e.type for e in events]
    reasoning = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert reasoning == REASONING and text == ANSWER
    assert kinds.index("response.reasoning_text.done") < kinds.index("response.output_text.delta")
    added = [e.output_index for e in events if e.type == "response.output_item.added"]
    assert added == [0, 1]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert final.output_text == ANSWER and final.output[0].type == "reasoning"


def anthropic_client(srv):
    import anthropic

    return anthropic.Anthropic(base_url=srv.url, api_key="x", max_retries=0, timeout=120)


def test_anthropic_thinking_blocks_when_enabled(thinker):
    claude = anthropic_client(thinker)
    kwargs = dict(model="m", max_tokens=40, messages=ASK, extra_body={"temperature": 0},
                  thinking={"type": "enabled", "budget_tokens": 1024})
    m = claude.messages.create(**kwargs)
    assert [b.type for b in m.content] == ["thinking", "text"]
    assert m.content[0].thinking == REASONING and m.content[1].text == ANSWER
    with claude.messages.stream(**kwargs) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == ANSWER
    assert [b.type for b in final.content] == ["thinking", "text"]
    assert final.content[0].thinking == REASONING
    # Without thinking enabled only the answer is returned, as with Claude.
    plain = claude.messages.create(model="m", max_tokens=40, messages=ASK,
                                   extra_body={"temperature": 0})
    assert [b.type for b in plain.content] == ["text"] and plain.content[0].text == ANSWER
