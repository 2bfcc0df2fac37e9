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
