"""Regression tests for holes an outside probe found: a WebSocket client that
never reads, HTTP/1.0 streaming, CORS preflight with an API key, the query
string key, a generation outgrowing a small KV budget, one connection taking
every batch slot, and requests arriving during a drain. Each runs against a
real server on loopback."""
from __future__ import annotations

import base64
import json
import os
import signal
import socket
import struct
import threading
import time

import requests

from tern_server import TernServer

SHORT_CHAT = {"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 8,
              "temperature": 0}


# --- a raw WebSocket client that writes frames and never reads ---------------

def ws_connect_raw(port: int, rcvbuf: int = 4096) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)  # fills fast: the server must cope
    s.connect(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET /v1/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
               f"Sec-WebSocket-Version: 13\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(1)
        assert chunk, "handshake failed"
        head += chunk
    assert b" 101 " in head.split(b"\r\n")[0], head
    return s


def ws_frame(text: str) -> bytes:
    """A masked text frame (clients must mask)."""
    payload = text.encode()
    mask = os.urandom(4)
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x81, 0x80 | n)
    elif n < 65536:
        head = struct.pack("!BBH", 0x81, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", 0x81, 0x80 | 127, n)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def stream_chat(url: str, max_tokens: int = 24) -> str:
    """A well-behaved streaming client: reads every event; returns the text."""
    body = {"messages": [{"role": "user", "content": "Count to twenty."}], "max_tokens": max_tokens,
            "temperature": 0, "stream": True, "ignore_eos": True}
    text = ""
    with requests.post(url + "/v1/chat/completions", json=body, stream=True, timeout=120) as r:
        assert r.status_code == 200, r.text
        for line in r.iter_lines():
            if line.startswith(b"data: {"):
                ev = json.loads(line[6:])
                for c in ev.get("choices", []):
                    text += c["delta"].get("content") or ""
    return text


def test_websocket_client_that_never_reads_is_bounded_and_closed():
    kv_mib = 32  # KV blocks are committed as they are used: the bound below includes them
    with TernServer("--write-timeout", "6", "--ws-outbox-kb", "64", "--max-batch", "16",
                    "--ctx", "1024", "--kv-dram-mb", str(kv_mib)) as srv:
        stop = threading.Event()
        sent = {"bytes": 0}
        flood = ws_connect_raw(srv.port)
        flood.settimeout(1.0)

        def flood_loop():
            i = 0
            while not stop.is_set():
                i += 1
                if i % 2:
                    msg = {"type": "generate", "id": f"g{i}", "prompt": "Hello", "max_tokens": 200,
                           "ignore_eos": True}
                else:
                    msg = {"type": "ping"}
                try:
                    flood.sendall(ws_frame(json.dumps(msg)))
                    sent["bytes"] += 1
                except socket.timeout:
                    continue  # the server stopped reading us: backpressure works
                except OSError:
                    return  # closed by the server

        t = threading.Thread(target=flood_loop, daemon=True)
        t.start()
        time.sleep(1.0)
        base = rss_kib(srv.proc.pid)
        # Meanwhile, eight well-behaved clients stream normally.
        results: list[str] = []
        errors: list[Exception] = []

        def good():
            try:
                results.append(stream_chat(srv.url))
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(e)

        peak = base
        for _round in range(2):
            ts = [threading.Thread(target=good) for _ in range(8)]
            for x in ts:
                x.start()
            while any(x.is_alive() for x in ts):
                peak = max(peak, rss_kib(srv.proc.pid))
                time.sleep(0.1)
        assert not errors, errors
        assert len(results) == 16 and all(len(r) > 0 for r in results)
        # The flooder's socket is closed once its frames waited past --write-timeout.
        srv.wait_metric("tern_websocket_stalled_total", lambda v: v >= 1, timeout=30)
        for _ in range(20):
            peak = max(peak, rss_kib(srv.proc.pid))
            time.sleep(0.1)
        stop.set()
        t.join(timeout=10)
        flood.close()
        # Bound: the KV budget (committed as used), the outbox (64 KiB), the
        # socket buffers, at most 32 bounded streams, and allocator slack;
        # without backpressure the pongs and errors alone grew the server by
        # ~3 MiB/s, without end.
        growth_mib = (peak - base) / 1024
        print(f"RSS growth {growth_mib:.1f} MiB")  # 34-42 MiB measured
        assert growth_mib < kv_mib + 32, f"server grew by {growth_mib:.1f} MiB"
        assert "1008" in srv.log()
        # The flooder's generations were cancelled; the server still serves.
        srv.wait_metric("tern_running_sequences", lambda v: v == 0, timeout=30)
        r = requests.post(srv.url + "/v1/chat/completions", json=SHORT_CHAT, timeout=60)
        assert r.status_code == 200


def test_http10_streaming_is_unframed_and_closes(server, healthy):
    body = json.dumps({"prompt": "Hello", "max_tokens": 6, "temperature": 0,
                       "stream": True}).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as s:
        s.sendall(b"POST /v1/completions HTTP/1.0\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        data = b""
        while True:  # the server closing the connection ends the body
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, payload = data.partition(b"\r\n\r\n")
    lines = head.decode().lower().split("\r\n")
    assert lines[0].startswith("http/1.0 200"), lines[0]
    assert not any(h.startswith("transfer-encoding") for h in lines), lines
    # The body is the event stream itself, no chunk-size lines.
    assert payload.startswith(b"data: {"), payload[:40]
    assert payload.rstrip().endswith(b"data: [DONE]")


def test_cors_preflight_with_api_key():
    origin = "http://app.example"
    pre = {"Origin": origin, "Access-Control-Request-Method": "POST",
           "Access-Control-Request-Headers": "authorization, content-type"}
    with TernServer("--api-key", "sekrit", "--cors-origin", origin) as srv:
        r = requests.options(srv.url + "/v1/chat/completions", headers=pre, timeout=10)
        assert r.status_code == 204
        assert r.headers["Access-Control-Allow-Origin"] == origin
        assert "authorization" in r.headers["Access-Control-Allow-Headers"].lower()
        # The request itself still needs the key.
        r = requests.post(srv.url + "/v1/chat/completions", json=SHORT_CHAT,
                          headers={"Origin": origin}, timeout=60)
        assert r.status_code == 401
        r = requests.post(srv.url + "/v1/chat/completions", json=SHORT_CHAT, timeout=60,
                          headers={"Origin": origin, "Authorization": "Bearer sekrit"})
        assert r.status_code == 200
        assert r.headers["Access-Control-Allow-Origin"] == origin
        # Another origin is not allowed: no CORS header at all.
        r = requests.options(srv.url + "/v1/chat/completions", timeout=10,
                             headers={**pre, "Origin": "http://evil.example"})
        assert not [h for h in r.headers if h.lower().startswith("access-control-")], r.headers


def test_no_cors_headers_by_default(server):
    r = requests.get(server.url + "/v1/models", headers={"Origin": "http://evil.example"},
                     timeout=10)
    assert r.status_code == 200
    assert "Access-Control-Allow-Origin" not in r.headers


def test_no_cors_headers_on_a_preflight_by_default(server):
    """Without --cors-origin no CORS header is sent, a preflight's included (README)."""
    pre = {"Origin": "http://app.example", "Access-Control-Request-Method": "POST",
           "Access-Control-Request-Headers": "authorization, content-type"}
    for path in ("/v1/chat/completions", "/v1/models", "/health"):
        r = requests.options(server.url + path, headers=pre, timeout=10)
        assert r.status_code == 204, r.text
        assert not [h for h in r.headers if h.lower().startswith("access-control-")], r.headers


def test_query_string_key_only_on_the_websocket_upgrade():
    upgrade = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
               "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode()}
    with TernServer("--api-key", "sekrit") as srv:
        for path in ("/metrics?api_key=sekrit", "/v1/models?api_key=sekrit"):
            assert requests.get(srv.url + path, headers=upgrade, timeout=10).status_code == 401
            assert requests.get(srv.url + path, timeout=10).status_code == 401
        r = requests.get(srv.url + "/v1/ws?api_key=sekrit", headers=upgrade, timeout=10,
                         stream=True)
        assert r.status_code == 101
        r.close()
        assert "sekrit" not in srv.log()


def test_generation_outgrowing_a_small_kv_budget_ends_with_length():
    # 1 MiB of int8-fp8 KV holds ~2-3 blocks of 32 tokens for the default model.
    with TernServer("--kv-dram-mb", "1", "--kv-flash-mb", "0", "--ctx", "2048") as srv:
        body = {"prompt": "Once upon a time", "max_tokens": 1000, "ignore_eos": True,
                "temperature": 0}
        r = requests.post(srv.url + "/v1/completions", json=body, timeout=300)
        assert r.status_code == 200, r.text
        j = r.json()
        assert j["choices"][0]["finish_reason"] == "length"
        assert j["usage"]["completion_tokens"] > 0 and j["choices"][0]["text"]
        assert j["usage"]["completion_tokens"] < 1000
        assert "KV" in j["timings"]["finish_detail"]
        # Streaming: the same end, with the reason in the final chunk's timings.
        events = []
        with requests.post(srv.url + "/v1/completions", json={**body, "stream": True},
                           stream=True, timeout=300) as s:
            for line in s.iter_lines():
                if line.startswith(b"data: {"):
                    events.append(json.loads(line[6:]))
        finish = [e for e in events if e["choices"] and e["choices"][0].get("finish_reason")]
        assert finish and finish[-1]["choices"][0]["finish_reason"] == "length"
        assert not any("error" in e for e in events)
        # A prompt the budget can never hold is refused up front, naming the budget.
        r = requests.post(srv.url + "/v1/completions", timeout=60,
                          json={"prompt": "word " * 600, "max_tokens": 4})
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert err["code"] == "context_length_exceeded"
        assert "--kv-dram-mb" in err["message"]
        assert "KV cache full" in srv.log()  # the log says why the first two stopped
        r = requests.post(srv.url + "/v1/completions", json={"prompt": "Hi", "max_tokens": 4},
                          timeout=60)
        assert r.status_code == 200


def ws_fragment(first: bool, fin: bool, payload: bytes) -> bytes:
    """A text frame (first) or continuation frame, masked with the zero key
    (clients must mask; a zero key leaves the payload as it is)."""
    b0 = (0x80 if fin else 0) | (0x1 if first else 0x0)
    n = len(payload)
    head = struct.pack("!BBQ", b0, 0x80 | 127, n) if n >= 65536 else \
        struct.pack("!BBH", b0, 0x80 | 126, n)
    return head + b"\0\0\0\0" + payload


def ws_read_frame(s: socket.socket) -> tuple[int, bytes]:
    """One unmasked server frame: (opcode, payload)."""
    def exactly(n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = s.recv(n - len(out))
            assert chunk, "connection closed mid-frame"
            out += chunk
        return out
    b0, n = exactly(2)
    if n == 126:
        n = struct.unpack("!H", exactly(2))[0]
    elif n == 127:
        n = struct.unpack("!Q", exactly(8))[0]
    return b0 & 0x0F, exactly(n)


def test_websocket_message_over_the_body_limit_closes_1009(server):
    """A message over --body-limit (1 MiB here) gets a close frame with 1009,
    message too big, whether it comes as one frame or as 100 MB in 1 MB
    fragments: the server refuses it while the client is still sending, and
    must read the rest (not reset the connection, which made the client lose
    the close frame), then close cleanly. The server keeps serving."""
    import asyncio

    import websockets

    # A raw client sends all 100 fragments without reading: every byte is
    # taken, then the close frame is there to read, and the server closes
    # after the client's own close frame.
    s = ws_connect_raw(server.port, rcvbuf=1 << 20)
    fragment = b"x" * 1_000_000
    for i in range(100):
        s.sendall(ws_fragment(i == 0, i == 99, fragment))  # a reset raises here
    s.settimeout(30)
    assert ws_read_frame(s)[0] == 0x1  # hello
    op, payload = ws_read_frame(s)
    assert op == 0x8 and struct.unpack("!H", payload[:2])[0] == 1009, payload
    s.sendall(struct.pack("!BBH", 0x88, 0x82, 1009) + b"\0\0\0\0")
    while s.recv(65536):
        pass
    s.close()

    async def refused(message) -> websockets.exceptions.ConnectionClosed:
        async with websockets.connect(server.ws_url, max_size=None) as ws:
            assert json.loads(await ws.recv())["type"] == "hello"
            try:
                await ws.send(message)
                await asyncio.wait_for(ws.recv(), 60)
            except websockets.exceptions.ConnectionClosed as e:
                return e
        raise AssertionError("the server accepted a message over --body-limit")

    text = "x" * 1_000_000
    for message in ("y" * 2_000_000, (text for _ in range(100)), (text for _ in range(100))):
        e = asyncio.run(refused(message))
        assert e.rcvd is not None, f"no close frame: {e!r}"
        assert e.rcvd.code == 1009, e

    async def still_serving() -> str:
        async with websockets.connect(server.ws_url) as ws:
            return json.loads(await ws.recv())["type"]
    assert asyncio.run(still_serving()) == "hello"


def test_one_connection_cannot_take_every_slot():
    import asyncio

    import websockets

    async def run(srv) -> tuple[dict, int, list[dict]]:
        async with websockets.connect(srv.ws_url, max_size=None) as ws:
            assert json.loads(await ws.recv())["type"] == "hello"
            for i in range(32):
                await ws.send(json.dumps({"type": "generate", "id": f"g{i}", "prompt": "Story:",
                                          "max_tokens": 160, "ignore_eos": True,
                                          "temperature": 0}))
            # Read until 16 of them are decoding (every slot taken by this socket).
            done: list[dict] = []
            started = 0
            while started < 32:
                m = json.loads(await ws.recv())
                started += m["type"] == "start"
            await asyncio.to_thread(srv.wait_metric, "tern_running_sequences",
                                    lambda v: v >= 16, 60)

            def short():
                return requests.post(srv.url + "/v1/chat/completions", json=SHORT_CHAT,
                                     timeout=300).json()

            task = asyncio.create_task(asyncio.to_thread(short))
            done_before = 0
            while not task.done():
                try:
                    m = json.loads(await asyncio.wait_for(ws.recv(), 0.05))
                except asyncio.TimeoutError:
                    continue
                if m["type"] == "done":
                    done.append(m)
            done_before = len(done)
            reply = await task
            while len(done) < 32:
                m = json.loads(await ws.recv())
                if m["type"] == "done":
                    done.append(m)
            return reply, done_before, done

    with TernServer("--max-batch", "16", "--ctx", "1024") as srv:
        reply, done_before, done = asyncio.run(run(srv))
        assert reply["choices"][0]["finish_reason"] in ("stop", "length"), reply
        # Served while the socket's first wave was still running, not after it.
        assert done_before < 16, f"the short request waited for {done_before} generations"
        # ... by taking a slot the socket's newest generation yielded, which resumed.
        assert all(d["finish_reason"] == "length" and d["usage"]["completion_tokens"] == 160
                   for d in done), done
        assert sum(d["timings"]["preemptions"] for d in done) >= 1


def test_requests_during_the_drain_get_503():
    srv = TernServer("--shutdown-grace", "20").start()
    try:
        body = {"prompt": "Story:", "max_tokens": 200, "ignore_eos": True, "stream": True}
        r = requests.post(srv.url + "/v1/completions", json=body, stream=True, timeout=120)
        lines = r.iter_lines()
        next(ln for ln in lines if ln.startswith(b"data: {"))
        srv.proc.send_signal(signal.SIGTERM)
        srv_log_wait(srv, "shutting down")
        late = requests.post(srv.url + "/v1/completions", json={"prompt": "Hi", "max_tokens": 2},
                             timeout=30)
        assert late.status_code == 503
        assert late.json()["error"]["code"] == "shutting_down"
        assert requests.get(srv.url + "/health", timeout=10).status_code == 503
        rest = b"\n".join(lines)  # the running stream still completes
        assert rest.rstrip().endswith(b"data: [DONE]")
        assert srv.proc.wait(timeout=60) == 0
        log = srv.log()
        assert "exception" not in log.lower(), log[-3000:]
    finally:
        srv.stop()


def srv_log_wait(srv: TernServer, text: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while text not in srv.log():
        assert time.monotonic() < deadline, srv.log()
        time.sleep(0.05)
