"""Decoded media under the memory budget, against the real server with the
SmolVLM-shaped test pair of test_mm_budget.py (a tiny idefics3 projector):

- a video bomb (an MS-RLE AVI of 2000x2000 frames of 2 bytes each, a few KB
  as a data: URL) is counted before its frames are decoded and each frame is
  scaled to what the projector needs as it is decoded: asking for more
  frames than a request may hold is refused without decoding them, and 16
  frames cost the process a few MB, not 16 full-size frames;
- decoded images are charged to the budget (pool mm_pixels, capped by
  --mm-pixels-mb): six 16-megapixel PNGs in one message get 503
  insufficient_memory before their pixels exist, the charge is given back
  when a request ends, and the server keeps serving;
- stored Responses keep their pictures' sources, not their pixels: resident
  memory does not grow with stored 16-megapixel pictures, and a continuation
  (previous_response_id) decodes the picture again.

Peak resident memory (VmHWM of the server) is the measure: every test reads
it before and after and bounds the growth.
"""
from __future__ import annotations

import base64
import struct
import time
import zlib

import requests

from test_mm_budget import chat, expect_error, pair, proc_kib  # noqa: F401 -- `pair` is a fixture
from tern_server import TernServer

MiB = 1 << 20


def msrle_avi(n_frames: int, w: int = 2000, h: int = 2000, fps: int = 10) -> bytes:
    """An AVI of MS-RLE (8-bit, palette) frames that each say only "end of
    bitmap" (2 bytes): every frame decodes to w x h pixels."""
    def ck(fourcc: bytes, data: bytes) -> bytes:
        return fourcc + struct.pack("<I", len(data)) + data + (b"\x00" if len(data) % 2 else b"")

    def lst(kind: bytes, data: bytes) -> bytes:
        return ck(b"LIST", kind + data)

    frame = b"\x00\x01"
    avih = struct.pack("<IIIIIIIIII16x", 1_000_000 // fps, 0, 0, 0x10, n_frames, 0, 1, w * h, w, h)
    strh = struct.pack("<4s4sIHHIIIIIIIIhhhh", b"vids", b"mrle", 0, 0, 0, 0, 1, fps, 0, n_frames,
                       w * h, 0xFFFFFFFF, 0, 0, 0, w, h)
    palette = b"".join(struct.pack("<BBBB", i, i, i, 0) for i in range(256))
    strf = struct.pack("<IiiHHIIiiII", 40, w, h, 1, 8, 1, w * h, 0, 0, 256, 0) + palette
    hdrl = lst(b"hdrl", ck(b"avih", avih) + lst(b"strl", ck(b"strh", strh) + ck(b"strf", strf)))
    movi, idx, off = b"", b"", 4
    for _ in range(n_frames):
        idx += struct.pack("<4sIII", b"00dc", 0x10, off, len(frame))
        c = ck(b"00dc", frame)
        movi += c
        off += len(c)
    body = b"AVI " + hdrl + lst(b"movi", movi) + ck(b"idx1", idx)
    return b"RIFF" + struct.pack("<I", len(body)) + body


def flat_png(w: int, h: int, seed: int) -> bytes:
    """A w x h RGB PNG of one colour (a few KB however large): seed picks it."""
    row = b"\x00" + bytes([seed & 0xFF, (seed * 7) & 0xFF, (seed * 13) & 0xFF]) * w

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(row * h, 9)) + chunk(b"IEND", b""))


def url(data: bytes, mime: str) -> str:
    return f"data:{mime};base64," + base64.b64encode(data).decode()


def video(clip: str, **kw) -> list[dict]:
    return [{"role": "user", "content": [{"type": "video_url", "video_url": {"url": clip, **kw}},
                                         {"type": "text", "text": "What happens?"}]}]


def hwm_growth_mib(srv, before_kib: int) -> float:
    return (proc_kib(srv, "VmHWM") - before_kib) / 1024


def warm(srv) -> int:
    """One small picture through the server (its buffers exist now); VmHWM after."""
    r = chat(srv, [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": url(flat_png(64, 64, 1), "image/png")}},
        {"type": "text", "text": "Hi"}]}], 1)
    assert r.status_code == 200, r.text
    return proc_kib(srv, "VmHWM")


def pixels_used(srv) -> float:
    """mm_pixels bytes charged once the last request has let go (it may take a moment)."""
    for _ in range(50):
        used = srv.metrics()['tern_mem_used_bytes{pool="mm_pixels"}']
        if used == 0:
            return used
        time.sleep(0.1)
    return used


def test_a_video_bomb_is_counted_before_decoding_and_scaled_as_decoded(pair):  # noqa: F811
    bomb = url(msrle_avi(200), "video/x-msvideo")
    assert len(bomb) < 16_000  # a few KB that decode to 200 x 12 MB of RGB
    with TernServer("--mmproj", pair["mmproj"], model=pair["text"]) as srv:
        before = warm(srv)
        # 128 frames asked, 64 allowed per request: refused before any is decoded.
        t0 = time.monotonic()
        err = expect_error(chat(srv, video(bomb, fps=1000, max_frames=128)), 400, "too_many_media")
        assert err["param"] == "messages[0].content[0]", err
        refused_s = time.monotonic() - t0
        grown_refused = hwm_growth_mib(srv, before)
        # 16 frames are served, each scaled to the projector's 64 pixels as decoded.
        r = chat(srv, video(bomb, fps=1000, max_frames=16), 1)
        assert r.status_code == 200, r.text
        grown_served = hwm_growth_mib(srv, before)
        print(f"\nvideo bomb: refused in {refused_s:.2f} s; VmHWM grew {grown_refused:.1f} MiB "
              f"(refused 128 frames), {grown_served:.1f} MiB (served 16 frames)")
        # One full-size frame (12 MB RGB, 4 MB in the decoder) at a time, never 16 or 64.
        assert grown_refused < 40, grown_refused
        assert grown_served < 40, grown_served
        assert pixels_used(srv) == 0


def test_decoded_images_are_charged_and_refused_past_the_limit(pair):  # noqa: F811
    # Six 16-megapixel pictures (48 MB of RGB each, 288 MB together) in ~100 KB.
    parts = [{"type": "image_url", "image_url": {"url": url(flat_png(4000, 4000, s), "image/png")}}
             for s in range(6)]
    with TernServer("--mmproj", pair["mmproj"], "--mm-pixels-mb", "64", model=pair["text"]) as srv:
        before = warm(srv)
        err = expect_error(chat(srv, [{"role": "user", "content": parts}], 1), 503,
                           "insufficient_memory")
        assert "--mm-pixels-mb" in err["message"], err
        grown = hwm_growth_mib(srv, before)
        m = srv.metrics()
        peak = m['tern_mem_peak_bytes{pool="mm_pixels"}']
        print(f"\n6 x 16 MP PNGs: VmHWM grew {grown:.1f} MiB; mm_pixels peak {peak / MiB:.1f} MiB")
        assert grown < 64, grown
        assert peak <= 64 * MiB
        # A picture that fits is served; its charge ends with the request.
        one = [{"type": "image_url", "image_url": {"url": url(flat_png(1000, 1000, 9), "image/png")}}]
        r = chat(srv, [{"role": "user", "content": one}], 1)
        assert r.status_code == 200, r.text
        assert srv.metrics()['tern_mem_peak_bytes{pool="mm_pixels"}'] >= 3 * 1000 * 1000
        assert pixels_used(srv) == 0
        r = chat(srv, [{"role": "user", "content": "Hello"}], 1)
        assert r.status_code == 200, r.text


def test_stored_responses_keep_sources_not_pixels(pair):  # noqa: F811
    with TernServer("--mmproj", pair["mmproj"], model=pair["text"]) as srv:
        warm(srv)
        rss0 = proc_kib(srv, "VmRSS")
        ids = []
        for s in range(4):  # 4 stored responses, a 16-megapixel picture each (48 MB of RGB)
            r = requests.post(srv.url + "/v1/responses", timeout=600, json={
                "model": "tern", "max_output_tokens": 1, "store": True, "input": [
                    {"role": "user", "content": [
                        {"type": "input_image",
                         "image_url": url(flat_png(4000, 4000, 100 + s), "image/png")},
                        {"type": "input_text", "text": "What is this?"}]}]})
            assert r.status_code == 200, r.text
            ids.append(r.json()["id"])
        time.sleep(1)  # the last request lets go of its picture
        grown = (proc_kib(srv, "VmRSS") - rss0) / 1024
        print(f"\n4 stored responses with a 16 MP picture each: VmRSS grew {grown:.1f} MiB")
        assert grown < 48, grown  # one picture's pixels would be 48 MB
        assert pixels_used(srv) == 0
        # A continuation decodes the stored picture again from its source.
        r = requests.post(srv.url + "/v1/responses", timeout=600, json={
            "model": "tern", "max_output_tokens": 1, "previous_response_id": ids[0],
            "input": "And now?"})
        assert r.status_code == 200, r.text
        assert r.json()["usage"]["input_tokens"] > 20  # the picture's rows are in the prompt
        assert pixels_used(srv) == 0
