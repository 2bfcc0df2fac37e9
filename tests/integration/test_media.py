"""Images and video in chat messages against the real server (SmolLM2, a text
model): every media part is loaded and validated under the server's policy
(data: URLs, --media-dir, --allow-remote-media, size and pixel limits) and
refused with OpenAI's error shape; valid media then gets 400
model_not_multimodal, since the model has no vision projector. After each
refusal the server must still serve.

Test images and clips are generated here: PNG with zlib, an uncompressed AVI
(BGR24 frames) with struct, a local http.server for the remote URLs."""
from __future__ import annotations

import asyncio
import base64
import http.server
import json
import os
import struct
import threading
import zlib
from pathlib import Path

import openai
import pytest
import requests
import websockets

from tern_server import TernServer

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


# --- generated media ---------------------------------------------------------

def png(w: int, h: int, seed: int = 1) -> bytes:
    rows = b"".join(b"\x00" + bytes((x * 7 + y * 13 + seed * 29 + c) & 0xFF
                                    for x in range(w) for c in range(3)) for y in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def avi(n_frames: int, w: int = 32, h: int = 24, fps: int = 10) -> bytes:
    """An AVI of uncompressed bottom-up BGR24 frames (FFmpeg reads it as rawvideo)."""
    stride = (w * 3 + 3) & ~3
    frames = [bytes([(10 + 20 * k) & 0xFF]) * (stride * h) for k in range(n_frames)]

    def ck(fourcc: bytes, data: bytes) -> bytes:
        return fourcc + struct.pack("<I", len(data)) + data + (b"\x00" if len(data) % 2 else b"")

    def lst(kind: bytes, data: bytes) -> bytes:
        return ck(b"LIST", kind + data)

    avih = struct.pack("<IIIIIIIIII16x", 1_000_000 // fps, 0, 0, 0x10, n_frames, 0, 1,
                       stride * h, w, h)
    strh = struct.pack("<4s4sIHHIIIIIIIIhhhh", b"vids", b"\x00\x00\x00\x00", 0, 0, 0, 0, 1, fps,
                       0, n_frames, stride * h, 0xFFFFFFFF, 0, 0, 0, w, h)
    strf = struct.pack("<IiiHHIIiiII", 40, w, h, 1, 24, 0, stride * h, 0, 0, 0, 0)
    hdrl = lst(b"hdrl", ck(b"avih", avih) + lst(b"strl", ck(b"strh", strh) + ck(b"strf", strf)))
    movi_body, idx, off = b"", b"", 4
    for f in frames:
        idx += struct.pack("<4sIII", b"00db", 0x10, off, len(f))
        c = ck(b"00db", f)
        movi_body += c
        off += len(c)
    body = b"AVI " + hdrl + lst(b"movi", movi_body) + ck(b"idx1", idx)
    return b"RIFF" + struct.pack("<I", len(body)) + body


def data_url(b: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64," + base64.b64encode(b).decode()


def image_msg(url, text="What is in this picture?"):
    return [{"role": "user", "content": [{"type": "text", "text": text},
                                          {"type": "image_url", "image_url": {"url": url}}]}]


# --- servers -----------------------------------------------------------------

@pytest.fixture(scope="module")
def media_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("media")
    inside = root / "media"
    inside.mkdir()
    (inside / "cat.png").write_bytes(png(16, 12))
    (inside / "big.png").write_bytes(png(120, 100))
    (inside / "notes.txt").write_bytes(b"not an image at all")
    (inside / "clip.avi").write_bytes(avi(5))
    (inside / "empty.avi").write_bytes(avi(0))
    (root / "secret.png").write_bytes(png(8, 8, seed=9))
    os.symlink(root / "secret.png", inside / "escape.png")
    return root


@pytest.fixture(scope="module")
def srv(media_dir):
    s = TernServer("--media-dir", str(media_dir / "media"), "--max-image-pixels", "10000",
                   "--body-limit", "256", "--mm-cache-dir", str(media_dir / "mmcache"),
                   "--ctx", "1024").start()
    yield s
    assert s.stop() == 0, s.log()[-3000:]


@pytest.fixture(scope="module")
def sdk(srv):
    return openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=0, timeout=120)


def chat(srv, messages, **extra):
    return requests.post(srv.url + "/v1/chat/completions", timeout=120,
                         json={"messages": messages, "max_tokens": 4, **extra})


def still_serves(srv):
    r = requests.post(srv.url + "/v1/chat/completions", timeout=300,
                      json={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})
    assert r.status_code == 200, r.text


def expect_error(r, status: int, code: str, param: str | None = None):
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) >= {"message", "type", "param", "code"}, err
    assert err["code"] == code, err
    assert err["message"]
    if param is not None:
        assert err["param"] == param, err
    return err


# --- tests -------------------------------------------------------------------

def test_models_say_no_vision(srv, sdk):
    r = requests.get(srv.url + "/v1/models", timeout=10).json()
    assert r["data"][0]["capabilities"]["vision"] is False
    assert sdk.models.list().data[0].id


def test_valid_image_to_a_text_model_is_model_not_multimodal(srv, sdk):
    with pytest.raises(openai.BadRequestError) as e:
        sdk.chat.completions.create(model="x", messages=image_msg(data_url(png(10, 10))),
                                    max_tokens=4)
    assert e.value.status_code == 400
    assert e.value.code == "model_not_multimodal"
    assert "--mmproj" in e.value.message
    assert e.value.param == "messages[0].content[1]"
    still_serves(srv)


@pytest.mark.parametrize("url", ["cat.png", "file://{dir}/media/cat.png", "{dir}/media/cat.png"])
def test_paths_inside_the_media_dir_load(srv, media_dir, url):
    r = chat(srv, image_msg(url.format(dir=media_dir)))
    expect_error(r, 400, "model_not_multimodal")


@pytest.mark.parametrize("url", ["../secret.png", "{dir}/secret.png", "file://{dir}/secret.png",
                                 "escape.png", "/etc/passwd", "media/../../secret.png"])
def test_paths_outside_the_media_dir_are_forbidden(srv, media_dir, url):
    r = chat(srv, image_msg(url.format(dir=media_dir)))
    err = expect_error(r, 403, "media_forbidden", "messages[0].content[1].image_url.url")
    assert "outside the media directory" in err["message"]
    still_serves(srv)


@pytest.mark.parametrize("url,status,code", [
    ("data:image/png;base64,iVBORw0KGgo!!!!", 400, "invalid_image"),       # bad base64
    ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAA", 400, "invalid_image"),  # bad length
    ("https://example.com/cat.png", 403, "media_forbidden"),                 # remote, not allowed
    ("ftp://example.com/cat.png", 400, "unsupported_media"),
    ("big.png", 400, "media_too_large"),                                     # 12000 px > 10000
    ("notes.txt", 400, "invalid_image"),                                     # not an image
    ("missing.png", 400, "invalid_image"),
])
def test_bad_images_are_refused_and_the_server_keeps_serving(srv, url, status, code):
    expect_error(chat(srv, image_msg(url)), status, code, "messages[0].content[1].image_url.url")
    still_serves(srv)


def test_corrupt_and_truncated_images(srv):
    good = png(20, 20)
    for bad in (good[: len(good) // 2], good[:40], b"GIF89a" + b"\x00" * 30):
        expect_error(chat(srv, image_msg(data_url(bad))), 400, "invalid_image")
    still_serves(srv)


def test_a_body_over_the_limit_is_413(srv):
    r = chat(srv, image_msg(data_url(os.urandom(300 * 1024))))
    assert r.status_code == 413, r.text
    still_serves(srv)


def test_content_part_shapes_name_the_param(srv):
    cases = [
        ({"type": "image_url", "image_url": {}}, "messages[0].content[1].image_url.url"),
        ({"type": "image_url"}, "messages[0].content[1].image_url"),
        ({"type": "image_url", "image_url": {"url": "cat.png", "detail": "huge"}},
         "messages[0].content[1].image_url.detail"),
        ({"type": "video_url", "video_url": {"url": "clip.avi", "fps": -1}},
         "messages[0].content[1].video_url.fps"),
        ({"type": "video", "frames": []}, "messages[0].content[1].frames"),
        ({"type": "video", "frames": [3]}, "messages[0].content[1].frames[0]"),
    ]
    for part, param in cases:
        r = chat(srv, [{"role": "user", "content": [{"type": "text", "text": "x"}, part]}])
        assert r.status_code == 400, (part, r.text)
        assert r.json()["error"]["param"] == param, (part, r.text)


def test_video(srv):
    video = lambda url, **kw: [{"role": "user", "content": [  # noqa: E731
        {"type": "video_url", "video_url": {"url": url, **kw}}]}]
    expect_error(chat(srv, video("clip.avi", fps=2, max_frames=3)), 400, "model_not_multimodal")
    expect_error(chat(srv, video(data_url(avi(3), "video/x-msvideo"))), 400, "model_not_multimodal")
    err = expect_error(chat(srv, video("empty.avi")), 400, "invalid_video",
                       "messages[0].content[0].video_url.url")
    assert "frames" in err["message"], err
    expect_error(chat(srv, video(data_url(os.urandom(5000), "video/mp4"))), 400, "invalid_video")
    expect_error(chat(srv, video("../secret.png")), 403, "media_forbidden")
    frames = [{"role": "user", "content": [{"type": "video", "frames": ["cat.png", "cat.png"]}]}]
    expect_error(chat(srv, frames), 400, "model_not_multimodal")
    frames[0]["content"][0]["frames"].append("escape.png")
    expect_error(chat(srv, frames), 403, "media_forbidden", "messages[0].content[0].frames")
    still_serves(srv)


def test_websocket_generate_checks_media_too(srv):
    async def go():
        ws = await websockets.connect(srv.ws_url, max_size=None)
        assert json.loads(await ws.recv())["type"] == "hello"
        out = []
        for gid, url in (("a", data_url(png(8, 8))), ("b", "../secret.png"), ("c", "notes.txt")):
            await ws.send(json.dumps({"type": "generate", "id": gid, "max_tokens": 2,
                                      "messages": image_msg(url)}))
            out.append(json.loads(await asyncio.wait_for(ws.recv(), 60)))
        await ws.send(json.dumps({"type": "generate", "id": "d", "max_tokens": 2,
                                  "messages": [{"role": "user", "content": "Hi"}]}))
        while True:
            m = json.loads(await asyncio.wait_for(ws.recv(), 300))
            if m["type"] in ("done", "error"):
                out.append(m)
                break
        await ws.close()
        return out

    a, b, c, d = asyncio.run(go())
    assert (a["type"], a["error"]["code"]) == ("error", "model_not_multimodal"), a
    assert (b["error"]["code"], b["error"]["status"]) == ("media_forbidden", 403), b
    assert c["error"]["code"] == "invalid_image", c
    assert d["type"] == "done", d


def test_metrics_count_media(srv):
    chat(srv, image_msg(data_url(png(9, 9))))
    m = srv.metrics()
    assert m['tern_media_items_total{kind="image"}'] >= 1
    assert m["tern_media_refused_total"] >= 1
    assert m['tern_mm_cache_bytes{tier="dram"}'] == 0  # nothing is encoded without a projector
    assert "tern_mm_cache_hits_total{tier=\"flash\"}" in m


# --- remote URLs -------------------------------------------------------------

class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):  # noqa: N802
        if self.path == "/cat.png":
            body = png(12, 12)
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif self.path == "/moved":
            self.send_response(302)
            self.send_header("Location", "/cat.png")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/loop":
            self.send_response(302)
            self.send_header("Location", "/loop")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/huge":
            self.send_response(200)
            self.send_header("Content-Length", str(3 << 20))
            self.end_headers()
            try:
                self.wfile.write(b"\x00" * (3 << 20))
            except OSError:
                pass
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()


@pytest.fixture(scope="module")
def remote():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_remote_media_with_the_flag(remote):
    # The test server is on loopback: refused unless exempt (test_remote_media.py).
    s = TernServer("--allow-remote-media", "--allow-media-hosts", "127.0.0.1", "--max-media-mb",
                   "1", "--ctx", "512").start()
    try:
        expect_error(chat(s, image_msg(remote + "/cat.png")), 400, "model_not_multimodal")
        expect_error(chat(s, image_msg(remote + "/moved")), 400, "model_not_multimodal")
        # Every failed fetch reads the same; the reason is in the log.
        for path in ("/loop", "/nope", "/huge"):
            err = expect_error(chat(s, image_msg(remote + path)), 400, "media_fetch_failed")
            assert "could not be fetched" in err["message"], err
        assert "redirects" in s.log() and "HTTP 404" in s.log() and "over the limit" in s.log()
        # Local paths stay refused without --media-dir.
        expect_error(chat(s, image_msg("cat.png")), 403, "media_forbidden")
        still_serves(s)
    finally:
        assert s.stop() == 0, s.log()[-3000:]
