"""Image encodes scheduled between token steps, through the real server:
`tern serve` with the SmolVLM-shaped text model (`tern gen-vlm-text`) and a
real-shape SigLIP-B/16-512 idefics3 projector (`tern gen-mmproj --shape real
--preproc-size 512`: a 512x512 picture is one tile + the global image, each
1024 patch rows through 12 layers, so an encode is long enough to watch).

* A text stream that started before an image request keeps receiving tokens
  between the image request's submission and its first token (events, not
  wall-clock thresholds), the encode ran in several slices, and the image
  answer equals the same request's answer later on its own.
* Two concurrent requests with the same new picture cause one encode (the
  second waits on the first's: /metrics and timings), and both give the
  solo answer.
* A request cancelled while its picture is encoding, with nobody else
  waiting, drops the encode; the server keeps serving."""
from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import pytest
import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from test_vision_cli import SMOLLM2, tern, write_bmp  # noqa: E402

from tern_server import TernServer  # noqa: E402


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("vlm_sched")
    media = d / "media"
    media.mkdir()
    f = {"text": str(d / "smolvlm-text.gguf"), "mmproj": str(d / "i3-real.gguf"),
         "media": str(media)}
    for i in range(4):  # 512x512 BMPs are too big for a data: URL body; sent by path
        f[f"img{i}"] = write_bmp(media / f"p{i}.bmp", 512, 512, 100 + i)
    for args in (["gen-vlm-text", "--from", SMOLLM2, "--out", f["text"]],
                 ["gen-mmproj", "--type", "idefics3", "--shape", "real", "--seed", "3",
                  "--n-embd", "576", "--weights", "q8_0", "--preproc-size", "512",
                  "--out", f["mmproj"]]):
        r = tern(*args, timeout=600)
        assert r.returncode == 0, r.stderr
    return f


@pytest.fixture(scope="module")
def server(pair):
    with TernServer("--mmproj", pair["mmproj"], "--media-dir", pair["media"], model=pair["text"],
                    startup_timeout=300) as srv:
        yield srv


def image_body(path: str, stream: bool, max_tokens: int = 6) -> dict:
    return {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": path}},
        {"type": "text", "text": "Describe the picture."}]}],
        "max_tokens": max_tokens, "temperature": 0, "stream": stream,
        **({"stream_options": {"include_usage": True}} if stream else {})}


def ask(server, path: str) -> dict:
    r = requests.post(server.url + "/v1/chat/completions", json=image_body(path, False),
                      timeout=900)
    assert r.status_code == 200, r.text
    return r.json()


class Stream(threading.Thread):
    """A streaming chat completion; records (monotonic time, piece) per chunk."""

    def __init__(self, server, body: dict):
        super().__init__(daemon=True)
        self.server, self.body = server, body
        self.sent = 0.0
        self.events: list[tuple[float, str]] = []
        self.final: dict | None = None
        self.error: str | None = None

    def run(self):
        try:
            self.sent = time.monotonic()
            with requests.post(self.server.url + "/v1/chat/completions", json=self.body,
                               stream=True, timeout=900) as r:
                if r.status_code != 200:
                    self.error = r.text
                    return
                for line in r.iter_lines():
                    if not line.startswith(b"data: ") or line == b"data: [DONE]":
                        continue
                    chunk = json.loads(line[6:])
                    for c in chunk.get("choices", []):
                        piece = (c.get("delta") or {}).get("content")
                        if piece:
                            self.events.append((time.monotonic(), piece))
                    if chunk.get("timings") or chunk.get("usage"):
                        self.final = chunk
        except Exception as e:  # reported by the test
            self.error = repr(e)

    def text(self) -> str:
        return "".join(p for _, p in self.events)


def text_body(i: int, n: int) -> dict:
    return {"messages": [{"role": "user", "content": f"Count slowly from {i} upwards."}],
            "max_tokens": n, "temperature": 0, "ignore_eos": True, "stream": True}


def metric(server, name: str) -> float:
    return server.metrics().get(name, 0.0)


def test_text_streams_keep_decoding_while_an_image_encodes(server, pair):
    slices0 = metric(server, "tern_vision_encode_slices_total")
    encodes0 = metric(server, "tern_vision_encodes_total")
    texts = [Stream(server, text_body(i, 400)) for i in range(2)]
    for t in texts:
        t.start()
    while not all(t.events for t in texts):  # both are decoding
        assert all(t.is_alive() or t.events for t in texts), [t.error for t in texts]
        time.sleep(0.05)
    img = Stream(server, image_body(pair["img0"], True))
    img.start()
    img.join(900)
    for t in texts:
        t.join(900)
    assert img.error is None and all(t.error is None for t in texts), \
        [img.error] + [t.error for t in texts]
    assert img.events, "the image request produced no text"
    first = img.events[0][0]
    # Tokens of the text streams that arrived while the image request was
    # being encoded (after it was sent, before its first token).
    between = [ts for t in texts for ts, _ in t.events if img.sent < ts < first]
    assert len(between) >= 4, f"text streams stalled while the image encoded ({len(between)} tokens)"
    assert metric(server, "tern_vision_encodes_total") == encodes0 + 1
    assert metric(server, "tern_vision_encode_slices_total") > slices0 + 1  # more than one slice
    # The same answer alone (its KV, image included, now from the prefix cache).
    alone = ask(server, pair["img0"])
    assert alone["choices"][0]["message"]["content"] == img.text()


def test_two_requests_with_the_same_new_picture_encode_it_once(server, pair):
    encodes0 = metric(server, "tern_vision_encodes_total")
    shared0 = metric(server, "tern_vision_encodes_shared_total")
    misses0 = metric(server, "tern_mm_cache_misses_total")
    out: list[dict] = [{}, {}]

    def go(i):
        out[i] = ask(server, pair["img1"])

    th = [threading.Thread(target=go, args=(i,)) for i in range(2)]
    for t in th:
        t.start()
    for t in th:
        t.join(900)
    assert metric(server, "tern_vision_encodes_total") == encodes0 + 1
    hits = sorted(o["timings"]["image_cache_hits"] for o in out)
    assert hits == [0, 1]  # one encoded it; the other waited on that encode, or found it cached
    assert [o["timings"]["image_n"] for o in out] == [1, 1]
    shared = metric(server, "tern_vision_encodes_shared_total") - shared0
    misses = metric(server, "tern_mm_cache_misses_total") - misses0
    assert shared + misses >= 1 and misses <= 1
    enc = [o for o in out if o["timings"]["image_cache_hits"] == 0][0]
    assert enc["timings"]["image_encode_ms"] > 0
    solo = ask(server, pair["img1"])
    texts = {o["choices"][0]["message"]["content"] for o in out + [solo]}
    assert len(texts) == 1, texts


def test_cancelling_the_only_waiter_drops_the_encode(server, pair):
    dropped0 = metric(server, "tern_vision_encodes_dropped_total")
    encodes0 = metric(server, "tern_vision_encodes_total")
    with requests.post(server.url + "/v1/chat/completions", json=image_body(pair["img2"], True),
                       stream=True, timeout=900) as r:
        assert r.status_code == 200
        deadline = time.monotonic() + 300  # waits for the encode to start, not a measured bound
        while metric(server, "tern_vision_encodes_total") == encodes0:
            assert time.monotonic() < deadline
            time.sleep(0.02)
    # The client went away: the scheduler cancels it and drops the encode.
    deadline = time.monotonic() + 300
    while metric(server, "tern_vision_encodes_dropped_total") == dropped0:
        assert time.monotonic() < deadline, "the encode was not dropped"
        time.sleep(0.1)
    # Still serving, and the picture is encoded afresh when asked again.
    r = ask(server, pair["img2"])
    assert r["timings"]["image_cache_hits"] == 0 and r["choices"][0]["message"]["content"]
