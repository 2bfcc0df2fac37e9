"""The WebSocket protocol (web/PROTOCOL.md): many generations on one socket,
cancellation, errors for bad frames, and cleanup when a client goes away."""
from __future__ import annotations

import asyncio
import json

import pytest
import websockets

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


async def recv_json(ws, timeout=300):
    return json.loads(await asyncio.wait_for(ws.recv(), timeout))


async def open_ws(server):
    ws = await websockets.connect(server.ws_url, max_size=None)
    hello = await recv_json(ws)
    assert hello["type"] == "hello"
    assert hello["model"]
    return ws


async def collect(ws, ids):
    """Reads until every id in `ids` is done; returns {id: (text, done msg, deltas)}."""
    out = {i: ["", None, 0] for i in ids}
    while any(v[1] is None for v in out.values()):
        msg = await recv_json(ws)
        if msg["type"] == "delta":
            out[msg["id"]][0] += msg["text"]
            out[msg["id"]][2] += 1
        elif msg["type"] == "done":
            out[msg["id"]][1] = msg
        elif msg["type"] == "error":
            raise AssertionError(msg)
    return out


def run(coro):
    return asyncio.run(coro)


def test_many_generations_on_one_socket(server, client, healthy):
    prompts = {f"g{i}": f"Tell me a fact about the number {i}." for i in range(6)}

    async def go():
        ws = await open_ws(server)
        for gid, p in prompts.items():
            await ws.send(json.dumps({"type": "generate", "id": gid, "max_tokens": 10,
                                      "temperature": 0,
                                      "messages": [{"role": "user", "content": p}]}))
        result = await collect(ws, prompts)
        await ws.close()
        return result

    result = run(go())
    for gid, p in prompts.items():
        text, done, _ = result[gid]
        assert done["finish_reason"] in ("stop", "length")
        assert done["usage"]["completion_tokens"] > 0
        assert "predicted_per_second" in done["timings"]
        # Same text as the HTTP API gives for the same greedy request.
        http = client.chat.completions.create(model="tern", max_tokens=10, temperature=0,
                                              messages=[{"role": "user", "content": p}])
        assert text == http.choices[0].message.content, gid


def test_cancel_frees_the_slot(server, healthy):
    async def go():
        ws = await open_ws(server)
        await ws.send(json.dumps({"type": "generate", "id": "long", "ignore_eos": True, "temperature": 0,
                                  "messages": [{"role": "user", "content": "Tell a long story."}]}))
        # Wait for the first text, then cancel.
        while True:
            msg = await recv_json(ws)
            if msg["type"] == "delta":
                break
        await ws.send(json.dumps({"type": "cancel", "id": "long"}))
        while True:
            msg = await recv_json(ws)
            if msg["type"] == "done":
                break
        await ws.close()
        return msg

    cancelled_before = server.metrics()['tern_requests_total{outcome="cancelled"}']
    done = run(go())
    assert done["finish_reason"] == "cancelled"
    assert done["usage"]["completion_tokens"] < 4000
    server.wait_metric("tern_running_sequences", lambda v: v == 0)
    assert server.metrics()['tern_requests_total{outcome="cancelled"}'] == cancelled_before + 1


def test_closing_the_socket_cancels_its_generations(server, healthy):
    async def go():
        ws = await open_ws(server)
        for i in range(3):
            await ws.send(json.dumps({"type": "generate", "id": f"x{i}", "ignore_eos": True,
                                      "messages": [{"role": "user", "content": "Go on forever."}]}))
        started = 0
        while started < 3:
            msg = await recv_json(ws)
            started += msg["type"] == "start"
        await ws.close()

    cancelled_before = server.metrics()['tern_requests_total{outcome="cancelled"}']
    run(go())
    server.wait_metric('tern_requests_total{outcome="cancelled"}',
                       lambda v: v >= cancelled_before + 3)
    server.wait_metric("tern_running_sequences", lambda v: v == 0)
    server.wait_metric("tern_queue_depth", lambda v: v == 0)


@pytest.mark.parametrize("frame,code", [
    ("not json", "invalid_json"),
    ("[1, 2]", "invalid_json"),
    ('{"id": "a"}', "missing_required_parameter"),
    ('{"type": "dance", "id": "a"}', "invalid_value"),
    ('{"type": "generate"}', "invalid_value"),
    ('{"type": "generate", "id": "a", "messages": "hi"}', "invalid_type"),
    ('{"type": "generate", "id": "a", "messages": [{"role": "user", "content": "x"}], "temperature": 9}',
     "invalid_value"),
    ('{"type": "generate", "id": "a", "messages": [{"role": "user", "content": "x"}], "n": 2}',
     "unsupported_value"),
    ('{"type": "generate", "id": "a", "messages": [{"role": "user", "content": "x"}], '
     '"logprobs": true}', "unsupported_parameter"),
    ('{"type": "cancel", "id": "nope"}', "not_found"),
])
def test_bad_frames_get_errors_and_the_socket_lives(server, frame, code):
    async def go():
        ws = await open_ws(server)
        await ws.send(frame)
        err = await recv_json(ws)
        # The same socket still works.
        await ws.send(json.dumps({"type": "generate", "id": "ok", "max_tokens": 2,
                                  "messages": [{"role": "user", "content": "Hi"}]}))
        result = await collect(ws, ["ok"])
        await ws.close()
        return err, result

    err, result = run(go())
    assert err["type"] == "error"
    assert err["error"]["code"] == code, err
    assert err["error"]["status"] in (400, 404)
    assert result["ok"][1]["finish_reason"] in ("stop", "length")


def test_binary_frame_and_duplicate_id(server):
    async def go():
        ws = await open_ws(server)
        await ws.send(b"\x00\x01")
        e1 = await recv_json(ws)
        gen = {"type": "generate", "id": "dup", "ignore_eos": True,
               "messages": [{"role": "user", "content": "Hi"}]}
        await ws.send(json.dumps(gen))
        await ws.send(json.dumps(gen))
        msgs = []
        while not any(m["type"] == "error" for m in msgs):
            msgs.append(await recv_json(ws))
        await ws.send(json.dumps({"type": "cancel", "id": "dup"}))
        while msgs[-1]["type"] != "done":
            msgs.append(await recv_json(ws))
        await ws.send(json.dumps({"type": "ping"}))
        pong = await recv_json(ws)
        await ws.close()
        return e1, msgs, pong

    e1, msgs, pong = run(go())
    assert e1["error"]["code"] == "invalid_frame"
    assert [m for m in msgs if m["type"] == "error"][0]["error"]["code"] == "duplicate_id"
    assert msgs[-1]["finish_reason"] == "cancelled"
    assert pong == {"type": "pong"}
