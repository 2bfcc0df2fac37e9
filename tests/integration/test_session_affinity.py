"""Session affinity for agent swarms: a request with a session key (the
X-Session-Id header, the `user` field, or the WebSocket connection) leaves its
KV pinned in DRAM for --session-ttl seconds, so other traffic evicts it last.

The server gets a DRAM budget of 13 blocks (5 MiB; 32 tokens a block, ~11 KB
a token for the default model) and no flash tier worth speaking of, so a few
unrelated conversations are enough to push an unpinned conversation out.
"""
from __future__ import annotations

import asyncio
import json
import uuid

import pytest
import requests
import websockets

from tern_server import TernServer


def agent_messages(nonce: str, turn: str) -> list[dict]:
    tools = " ".join(f"Tool {i} lists the files of folder {i} and returns their sizes." for i in range(1, 9))
    return [{"role": "system", "content": f"Agent {nonce}. You are an agent with tools. {tools}"},
            {"role": "user", "content": turn}]


def chat(url: str, messages: list[dict], headers: dict | None = None, **extra) -> dict:
    r = requests.post(url + "/v1/chat/completions", timeout=600, headers=headers or {},
                      json={"messages": messages, "max_tokens": 4, "temperature": 0, **extra})
    assert r.status_code == 200, r.text
    return r.json()


def shared_blocks(url: str, a: list[dict], b: list[dict]) -> int:
    """Tokens in the full 32-token blocks that two chats' prompts share."""
    def ids(messages):
        r = requests.post(url + "/tokenize", json={"messages": messages, "add_generation_prompt": True})
        assert r.status_code == 200, r.text
        return r.json()["tokens"]
    x, y = ids(a), ids(b)
    n = 0
    while n < min(len(x), len(y)) and x[n] == y[n]:
        n += 1
    return n // 32 * 32


def flood(url: str, n: int) -> None:
    for _ in range(n):
        chat(url, agent_messages(uuid.uuid4().hex, "What can you do?"))


@pytest.fixture(scope="module")
def small():
    with TernServer("--kv-dram-mb", "5", "--kv-flash-mb", "1", "--session-ttl", "600") as srv:
        yield srv


def cached(r: dict) -> int:
    return r["usage"]["prompt_tokens_details"]["cached_tokens"]


def test_session_header_keeps_the_kv_through_other_traffic(small):
    nonce = uuid.uuid4().hex
    first = chat(small.url, agent_messages(nonce, "List folder 1."), {"X-Session-Id": "agent-7"})
    assert first["timings"]["session_cache_n"] == 0
    n_prompt = first["usage"]["prompt_tokens"]
    assert n_prompt > 128, n_prompt
    # The sequence is released just after its last chunk is sent.
    small.wait_metric('tern_kv_blocks{tier="dram",state="pinned"}', lambda v: v >= n_prompt // 32 - 1)
    flood(small.url, 6)  # each ~5 blocks: far more than the unpinned room
    second = chat(small.url, agent_messages(nonce, "List folder 2."), {"X-Session-Id": "agent-7"})
    # Every full block before the first token where the turns differ came from the cache.
    assert cached(second) == shared_blocks(small.url, agent_messages(nonce, "List folder 1."),
                                           agent_messages(nonce, "List folder 2.")), second["usage"]
    assert cached(second) >= 96
    assert small.metrics()["tern_kv_pinned_evicted_total"] == 0
    assert second["timings"]["session_cache_n"] == cached(second)


def test_without_a_session_key_the_same_traffic_evicts_it(small):
    nonce = uuid.uuid4().hex
    first = chat(small.url, agent_messages(nonce, "List folder 1."))
    assert "session_cache_n" not in first["timings"]
    flood(small.url, 6)
    second = chat(small.url, agent_messages(nonce, "List folder 2."))
    assert cached(second) == 0, second["usage"]


def test_user_field_is_a_session_key(small):
    nonce = uuid.uuid4().hex
    chat(small.url, agent_messages(nonce, "List folder 1."), user="agent-9")
    flood(small.url, 6)
    second = chat(small.url, agent_messages(nonce, "List folder 2."), user="agent-9")
    assert cached(second) > 96, second["usage"]
    assert second["timings"]["session_cache_n"] == cached(second)


def test_websocket_connection_is_a_session(small):
    nonce = uuid.uuid4().hex

    async def go():
        async with websockets.connect(small.ws_url, max_size=None) as ws:
            async def generate(turn: str) -> dict:
                await ws.send(json.dumps({"type": "generate", "id": turn, "max_tokens": 4,
                                          "temperature": 0, "messages": agent_messages(nonce, turn)}))
                while True:
                    m = json.loads(await ws.recv())
                    assert m["type"] != "error", m
                    if m["type"] == "done":
                        return m
            await generate("List folder 1.")
            await asyncio.to_thread(flood, small.url, 6)
            return await generate("List folder 2.")

    done = asyncio.run(go())
    assert done["usage"]["prompt_tokens_details"]["cached_tokens"] > 96, done


def test_bad_session_keys_are_400(small):
    r = requests.post(small.url + "/v1/chat/completions", headers={"X-Session-Id": "x" * 300},
                      json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1})
    assert r.status_code == 400 and "X-Session-Id" in r.json()["error"]["message"]
    r = requests.post(small.url + "/v1/chat/completions",
                      json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "user": 5})
    assert r.status_code == 400 and r.json()["error"]["param"] == "user"
    chat(small.url, [{"role": "user", "content": "still serving?"}])
