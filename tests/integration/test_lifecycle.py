"""Client disconnects, overload, authentication and graceful shutdown, each
against a real server (some with their own flags)."""
from __future__ import annotations

import json
import signal
import socket
import threading
import time

import openai
import pytest
import requests

from tern_server import TernServer

# Runs until the context is full (thousands of tokens): always still running
# when a test disconnects or overloads the server.
LONG = {"messages": [{"role": "user", "content": "Tell me a very long story."}],
        "ignore_eos": True, "temperature": 0}


def test_disconnect_mid_stream_frees_the_slot(server, healthy):
    cancelled = server.metrics()['tern_requests_total{outcome="cancelled"}']
    r = requests.post(server.url + "/v1/chat/completions", json={**LONG, "stream": True},
                      stream=True, timeout=300)
    try:
        # Read until real content arrived, then hang up. The line iterator is
        # kept: dropping it closes the generator, and urllib3 then closes the
        # connection at once (the hang-up would come before the check below).
        lines = r.iter_lines()
        for line in lines:
            if b'"content":"' in line and b'"content":""' not in line:
                break
        server.wait_metric("tern_running_sequences", lambda v: v == 1, timeout=10)
    finally:
        r.close()
    server.wait_metric('tern_requests_total{outcome="cancelled"}', lambda v: v == cancelled + 1)
    server.wait_metric("tern_running_sequences", lambda v: v == 0)
    server.wait_metric("tern_kv_sequences_used", lambda v: v == 0)


def test_disconnect_while_waiting_for_non_streaming(server, healthy):
    cancelled = server.metrics()['tern_requests_total{outcome="cancelled"}']
    body = b'{"messages": [{"role": "user", "content": "Story"}], "ignore_eos": true}'
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        server.wait_metric('tern_requests_total{outcome="submitted"}', lambda v: v > 0)
        server.wait_metric("tern_running_sequences", lambda v: v == 1)
    server.wait_metric('tern_requests_total{outcome="cancelled"}', lambda v: v == cancelled + 1)
    server.wait_metric("tern_running_sequences", lambda v: v == 0)


def raw_post(port: int, path: str, body: dict) -> socket.socket:
    """Sends a request on a raw socket (closing it later is a disconnect)."""
    data = json.dumps(body).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
    return s


def test_full_queue_answers_429_and_recovers():
    with TernServer("--max-batch", "1", "--max-queue", "1", "--ctx", "4096") as srv:
        url = srv.url + "/v1/chat/completions"
        running = raw_post(srv.port, "/v1/chat/completions", LONG)
        srv.wait_metric("tern_running_sequences", lambda v: v == 1)
        waiting = raw_post(srv.port, "/v1/chat/completions", LONG)
        srv.wait_metric("tern_queue_depth", lambda v: v == 1)
        # The batch and the queue are full: more requests are refused at once.
        for _ in range(2):
            r = requests.post(url, json=LONG, timeout=30)
            assert r.status_code == 429, r.text[:300]
            assert r.json()["error"]["code"] == "queue_full"
            assert r.headers.get("retry-after")
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=0)
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(model="m", messages=LONG["messages"], max_tokens=1)
        assert srv.metrics()['tern_requests_total{outcome="rejected"}'] == 3
        # Both clients leave: the waiting one is dropped, the running one freed.
        waiting.close()
        running.close()
        srv.wait_metric('tern_requests_total{outcome="cancelled"}', lambda v: v == 2)
        srv.wait_metric("tern_queue_depth", lambda v: v == 0)
        srv.wait_metric("tern_running_sequences", lambda v: v == 0)
        r = requests.post(url, json={"messages": LONG["messages"], "max_tokens": 3}, timeout=60)
        assert r.status_code == 200, r.text
        assert srv.stop() == 0, srv.log()[-3000:]


def test_api_key():
    with TernServer("--api-key", "sekrit", "--ctx", "512") as srv:
        r = requests.get(srv.url + "/v1/models", timeout=10)
        assert r.status_code == 401
        assert r.json()["error"]["code"] == "missing_api_key"
        r = requests.get(srv.url + "/v1/models", headers={"Authorization": "Bearer nope"}, timeout=10)
        assert r.status_code == 401
        assert r.json()["error"]["code"] == "invalid_api_key"
        assert requests.get(srv.url + "/metrics", timeout=10).status_code == 401
        # /health and the demo page stay public.
        assert requests.get(srv.url + "/health", timeout=10).status_code == 200
        bad = openai.OpenAI(base_url=srv.url + "/v1", api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            bad.models.list()
        good = openai.OpenAI(base_url=srv.url + "/v1", api_key="sekrit", max_retries=0)
        assert good.models.list().data
        r = good.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}],
                                         max_tokens=2)
        assert r.choices[0].message.content is not None
        # WebSocket: header or ?api_key=.
        import asyncio
        import websockets

        async def ws_try(url, headers=None):
            try:
                async with websockets.connect(url, additional_headers=headers) as ws:
                    return (await ws.recv())[:20]
            except websockets.exceptions.InvalidStatus as e:
                return e.response.status_code

        assert asyncio.run(ws_try(srv.ws_url)) == 401
        assert asyncio.run(ws_try(srv.ws_url + "?api_key=wrong")) == 401
        assert asyncio.run(ws_try(srv.ws_url + "?api_key=sekrit")).startswith('{"')
        assert asyncio.run(ws_try(srv.ws_url, {"Authorization": "Bearer sekrit"})).startswith('{"')


def test_graceful_shutdown_lets_generations_finish():
    srv = TernServer("--ctx", "512", "--shutdown-grace", "60").start()
    try:
        result = {}

        def stream():
            r = requests.post(srv.url + "/v1/chat/completions", stream=True, timeout=300,
                              json={"messages": [{"role": "user", "content": "Count to 100."}],
                                    "max_tokens": 300, "ignore_eos": True, "stream": True})
            result["lines"] = [line for line in r.iter_lines() if line]

        t = threading.Thread(target=stream)
        t.start()
        srv.wait_metric("tern_running_sequences", lambda v: v == 1)
        srv.proc.send_signal(signal.SIGTERM)
        # New work is refused (503, not a refused connection) while the running stream finishes.
        time.sleep(0.3)
        assert requests.get(srv.url + "/health", timeout=5).status_code == 503
        t.join(timeout=300)
        assert result["lines"][-1] == b"data: [DONE]"
        assert b'"finish_reason":"length"' in result["lines"][-2]
        assert srv.proc.wait(timeout=60) == 0
        assert "server stopped" in srv.log()
    finally:
        srv.stop(signal.SIGKILL)


def test_shutdown_after_grace_cancels_and_closes():
    srv = TernServer("--ctx", "4096", "--shutdown-grace", "0.5").start()
    try:
        import asyncio
        import json
        import websockets

        async def go():
            ws = await websockets.connect(srv.ws_url)
            await ws.recv()  # hello
            await ws.send(json.dumps({"type": "generate", "id": "a", "ignore_eos": True,
                                      "messages": [{"role": "user", "content": "Go on."}]}))
            msgs = []
            while not msgs or msgs[-1]["type"] != "delta":
                msgs.append(json.loads(await ws.recv()))
            srv.proc.send_signal(signal.SIGTERM)
            try:
                while True:
                    msgs.append(json.loads(await asyncio.wait_for(ws.recv(), 60)))
            except websockets.exceptions.ConnectionClosed as e:
                return msgs, e.rcvd.code if e.rcvd else None

        t0 = time.monotonic()
        msgs, close_code = asyncio.run(go())
        assert msgs[-1]["type"] == "done"
        assert msgs[-1]["finish_reason"] == "cancelled"
        assert close_code == 1001
        assert srv.proc.wait(timeout=60) == 0
        assert time.monotonic() - t0 < 30
    finally:
        srv.stop(signal.SIGKILL)
