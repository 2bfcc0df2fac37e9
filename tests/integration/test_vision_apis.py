"""Images through the other API shapes on `tern serve --mmproj` (the generated
SmolVLM-shaped pair of test_vision_serve.py): Anthropic Messages image blocks
(base64 and url sources) with the anthropic SDK, and Responses input_image
parts with the OpenAI SDK, including a continuation by previous_response_id
that still shows the picture. Each equals chat completions on the same
picture and text (greedy), reuses the embedding cache, and bad images get the
API's own 4xx naming the block."""
from __future__ import annotations

import base64
import struct
import sys
import zlib
from pathlib import Path

import anthropic
import pytest
import requests
from openai import OpenAI

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_vision_serve import QUESTION, metric, pair, server  # noqa: E402,F401


def png_bytes(w: int, h: int, seed: int) -> bytes:
    """An RGB PNG of a seeded pattern (no filter, one IDAT)."""
    raw = b"".join(b"\0" + b"".join(bytes(((x * seed + y) & 255, (y * seed) & 255,
                                             ((x ^ y) * 7) & 255)) for x in range(w))
                   for y in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data) & 0xffffffff)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


@pytest.fixture(scope="module")
def picture(pair):
    data = png_bytes(56, 40, 9)
    path = Path(pair["media"]) / "p.png"
    path.write_bytes(data)
    return {"b64": base64.b64encode(data).decode(), "path": str(path),
            "url": "data:image/png;base64," + base64.b64encode(data).decode()}


def chat_text(server, messages, max_tokens=12) -> str:
    r = requests.post(server.url + "/v1/chat/completions", timeout=600, json={
        "messages": messages, "max_tokens": max_tokens, "temperature": 0})
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"]["content"]


def chat_image(url: str, text: str = QUESTION) -> dict:
    return {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                        {"type": "text", "text": text}]}


def test_anthropic_image_block_equals_chat_and_hits_the_cache(server, picture):
    want = chat_text(server, [chat_image(picture["url"])])
    misses = metric(server, "tern_mm_cache_misses_total")
    claude = anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0)
    m = claude.messages.create(model="tern", max_tokens=12, extra_body={"temperature": 0}, messages=[
        {"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": picture["b64"]}},
            {"type": "text", "text": QUESTION}]}])
    assert m.content[0].text == want
    assert metric(server, "tern_mm_cache_misses_total") == misses  # same pixels: no new encode
    # A url source (a file under --media-dir) is the same picture.
    m2 = claude.messages.create(model="tern", max_tokens=12, extra_body={"temperature": 0}, messages=[
        {"role": "user", "content": [
            {"type": "image", "source": {"type": "url", "url": picture["path"]}},
            {"type": "text", "text": QUESTION}]}])
    assert m2.content[0].text == want


def test_anthropic_bad_images_name_the_block(server, picture):
    claude = anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0)
    cases = [({"type": "base64", "media_type": "image/tiff", "data": picture["b64"]},
              "media_type"),
             ({"type": "base64", "media_type": "image/png", "data": "bm90IGFuIGltYWdl"},
              "messages[0].content[0]"),
             ({"type": "url", "url": "/etc/passwd"}, "messages[0].content[0]"),
             ({"type": "file", "file_id": "f"}, "source.type")]
    for source, needle in cases:
        with pytest.raises(anthropic.APIStatusError) as e:
            claude.messages.create(model="tern", max_tokens=4, messages=[
                {"role": "user", "content": [{"type": "image", "source": source}]}])
        assert e.value.status_code in (400, 403), source
        assert needle in e.value.message, (source, e.value.message)
    assert claude.messages.create(model="tern", max_tokens=2, messages=[
        {"role": "user", "content": "Hi"}]).content[0].text is not None


def test_responses_input_image_and_a_continuation(server, picture):
    client = OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
    want = chat_text(server, [chat_image(picture["url"])])
    r = client.responses.create(model="tern", max_output_tokens=12, temperature=0, input=[
        {"role": "user", "content": [{"type": "input_image", "image_url": picture["url"]},
                                     {"type": "input_text", "text": QUESTION}]}])
    assert r.output_text == want
    follow = "What colour is it?"
    r2 = client.responses.create(model="tern", max_output_tokens=8, temperature=0,
                                 previous_response_id=r.id, input=follow)
    # The continuation still shows the picture: it equals chat with the whole history.
    assert r2.output_text == chat_text(server, [
        chat_image(picture["url"]), {"role": "assistant", "content": want},
        {"role": "user", "content": follow}], max_tokens=8)
    assert r2.usage.input_tokens_details.cached_tokens > 0


def test_responses_bad_images_name_the_part(server, picture):
    client = OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
    for part, status, needle in [
            ({"type": "input_image", "file_id": "file-1"}, 400, "input[0].content[0].file_id"),
            ({"type": "input_image", "image_url": "/etc/passwd"}, 403, "input[0].content[0]"),
            ({"type": "input_image", "image_url": "data:image/png;base64,AAAA"}, 400,
             "input[0].content[0]")]:
        with pytest.raises(Exception) as e:
            client.responses.create(model="tern", max_output_tokens=4, input=[
                {"role": "user", "content": [part]}])
        assert getattr(e.value, "status_code", None) == status, (part, e.value)
        assert needle in str(e.value), (part, str(e.value))
