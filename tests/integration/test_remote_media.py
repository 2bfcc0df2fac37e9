"""Remote media (--allow-remote-media) against the real server: the address
filter (loopback and private hosts refused by default, however spelled, on
every redirect hop; --allow-media-hosts opens named ones), redirects to other
schemes refused by name, one error text for every failed fetch, and fetches
that never hold a preparation thread (a silent remote server does not slow
a plain text chat). A local http.server counts what reaches it."""
from __future__ import annotations

import asyncio
import http.server
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
import websockets

from tern_server import TernServer

from test_media import chat, expect_error, image_msg, png, still_serves

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


class _Handler(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def log_message(self, *a):
        pass

    def _answer(self, status: int, body: bytes = b"", headers: dict | None = None):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802
        _Handler.hits.append(self.path)
        port = self.server.server_address[1]
        redirects = {
            "/to-loopback": f"http://127.0.0.1:{port}/cat.png",
            "/to-odd-loopback": f"http://2130706433:{port}/cat.png",
            "/to-file": "file:///etc/passwd",
            "/to-gopher": f"gopher://127.0.0.1:{port}/_GET%20/cat.png",
            "/loop": "/loop",
        }
        if self.path == "/cat.png":
            self._answer(200, png(12, 12), {"Content-Type": "image/png"})
        elif self.path in redirects:
            self._answer(302, headers={"Location": redirects[self.path]})
        elif self.path == "/huge":
            self._answer(200, b"\x00" * (2 << 20))
        else:
            self._answer(404)


@pytest.fixture(scope="module")
def origin():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield httpd.server_address[1]
    httpd.shutdown()


@pytest.fixture()
def hits():
    _Handler.hits.clear()
    return _Handler.hits


@pytest.fixture(scope="module")
def default_srv():
    """Remote media on, no host exempt from the address filter."""
    s = TernServer("--allow-remote-media", "--ctx", "512").start()
    yield s
    assert s.stop() == 0, s.log()[-3000:]


@pytest.fixture(scope="module")
def allowed_srv():
    """Remote media on, the name `localhost` exempt (not the address 127.0.0.1)."""
    s = TernServer("--allow-remote-media", "--allow-media-hosts", "localhost,10.0.0.5",
                   "--max-media-mb", "1", "--ctx", "512").start()
    yield s
    assert s.stop() == 0, s.log()[-3000:]


def fetch_error(srv, url: str) -> str:
    return expect_error(chat(srv, image_msg(url)), 400, "media_fetch_failed")["message"]


def test_loopback_is_refused_by_default_in_every_spelling(default_srv, origin, hits):
    hosts = ["127.0.0.1", "localhost", "[::1]", "0.0.0.0", "127.1", "2130706433", "0x7f.1",
             "[::ffff:127.0.0.1]"]
    messages = {fetch_error(default_srv, f"http://{h}:{origin}/cat.png") for h in hosts}
    # tern's own endpoints are loopback too.
    messages.add(fetch_error(default_srv, f"{default_srv.url}/metrics"))
    messages.add(fetch_error(default_srv, "http://169.254.169.254/latest/meta-data/"))
    assert len(messages) == 1, messages
    assert hits == []
    assert "non-public address" in default_srv.log()
    still_serves(default_srv)


def test_the_other_api_shapes_share_the_filter(default_srv, origin, hits):
    url = f"http://127.0.0.1:{origin}/cat.png"
    r = requests.post(default_srv.url + "/v1/messages", timeout=120, json={
        "model": "x", "max_tokens": 4, "messages": [{"role": "user", "content": [
            {"type": "image", "source": {"type": "url", "url": url}}]}]})
    assert r.status_code == 400, r.text
    assert "could not be fetched" in r.json()["error"]["message"], r.text
    r = requests.post(default_srv.url + "/v1/responses", timeout=120, json={
        "max_output_tokens": 4, "input": [{"role": "user", "content": [
            {"type": "input_image", "image_url": url}]}]})
    expect_error(r, 400, "media_fetch_failed")

    async def over_ws():
        async with websockets.connect(default_srv.ws_url) as ws:
            assert json.loads(await ws.recv())["type"] == "hello"
            await ws.send(json.dumps({"type": "generate", "id": "a", "max_tokens": 2,
                                      "messages": image_msg(url)}))
            return json.loads(await asyncio.wait_for(ws.recv(), 60))

    e = asyncio.run(over_ws())
    assert (e["type"], e["error"]["code"]) == ("error", "media_fetch_failed"), e
    assert hits == []


def test_an_allowed_name_is_fetched_but_its_redirects_are_checked_again(allowed_srv, origin,
                                                                        hits):
    expect_error(chat(allowed_srv, image_msg(f"http://localhost:{origin}/cat.png")), 400,
                 "model_not_multimodal")
    # The allow-list names `localhost`, not 127.0.0.1: a redirect there is refused.
    fetch_error(allowed_srv, f"http://localhost:{origin}/to-loopback")
    fetch_error(allowed_srv, f"http://localhost:{origin}/to-odd-loopback")
    fetch_error(allowed_srv, f"http://127.0.0.1:{origin}/cat.png")
    assert hits == ["/cat.png", "/to-loopback", "/to-odd-loopback"], hits


def test_redirects_to_other_schemes_are_refused_by_name(allowed_srv, origin, hits):
    fetch_error(allowed_srv, f"http://localhost:{origin}/to-file")
    fetch_error(allowed_srv, f"http://localhost:{origin}/to-gopher")
    # Not followed as a relative path on the same host.
    assert hits == ["/to-file", "/to-gopher"], hits
    log = allowed_srv.log()
    assert "a redirect to a 'file:' URL is not followed" in log
    assert "a redirect to a 'gopher:' URL is not followed" in log


def test_every_failed_fetch_reads_the_same(allowed_srv, origin):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]  # nothing listens once this closes
    messages = {
        fetch_error(allowed_srv, f"http://localhost:{origin}/nope"),    # HTTP 404
        fetch_error(allowed_srv, f"http://localhost:{origin}/loop"),    # too many redirects
        fetch_error(allowed_srv, f"http://localhost:{origin}/huge"),    # over --max-media-mb
        fetch_error(allowed_srv, f"http://localhost:{closed}/x.png"),   # connection refused
        fetch_error(allowed_srv, f"http://10.0.0.6:{origin}/x.png"),    # private, not listed
    }
    assert len(messages) == 1, messages
    log = allowed_srv.log()
    for detail in ("HTTP 404", "redirects", "over the limit", "10.0.0.6"):
        assert detail in log, detail
    still_serves(allowed_srv)


def test_a_silent_remote_server_does_not_hold_preparation(origin):
    """Six image URLs to a server that accepts and never answers, then a plain
    text chat: it must not wait for their 10 s time limit. One client has at
    most 4 fetches in flight; the other two wait their turn."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)
    held: list[socket.socket] = []

    def accept_and_hold():  # never reads, never answers
        while True:
            try:
                held.append(silent.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept_and_hold, daemon=True).start()
    url = f"http://127.0.0.1:{silent.getsockname()[1]}/slow.png"
    s = TernServer("--allow-remote-media", "--allow-media-hosts", "127.0.0.1", "--ctx",
                   "512").start()
    try:
        still_serves(s)  # warm
        with ThreadPoolExecutor(6) as pool:
            slow = [pool.submit(chat, s, image_msg(url)) for _ in range(6)]
            time.sleep(1.0)
            t0 = time.monotonic()
            still_serves(s)
            took = time.monotonic() - t0
            assert took < 5.0, f"a text chat took {took:.1f} s behind remote fetches"
            assert len(held) == 4, len(held)  # the per-client limit
            for f in slow:
                expect_error(f.result(timeout=90), 400, "media_fetch_failed")
        assert s.log().count("timed out after 10000 ms") == 6
    finally:
        silent.close()
        for c in held:
            c.close()
        assert s.stop() == 0, s.log()[-3000:]
