#!/usr/bin/env python3
"""Inter-token latency of running text streams while an image is encoded.

Starts `tern serve` with a generated SmolVLM-shaped pair (`tern gen-vlm-text`
from SmolLM2, `tern gen-mmproj --type idefics3 --shape real`: SigLIP-B/16-512,
12 layers, 1024 patch rows a tile), runs N streaming text completions
(ignore_eos, greedy) and measures the gaps between their SSE chunks:

  A. without an image: every gap after each stream's first token;
  B. the same, and once all streams decode, one request with a new 512x512
     picture: the gaps that end while it is waiting for its first token
     (its encode and prefill).

Prints p50/p99 of both and the p99 ratio B/A (issue 13's target: <= 2).
--tiles one: the projector's longest edge is 512 (one tile + the global
image); --tiles all: SmolVLM's 2048 (4x4 tiles + the global image).

    .venv/bin/python bench/vision_itl.py [--streams 8] [--tokens 200] [--tiles one]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT / "tests" / "cli"))
import requests  # noqa: E402
from tern_server import TernServer  # noqa: E402
from test_vision_cli import SMOLLM2, TERN, write_bmp  # noqa: E402


class Stream(threading.Thread):
    def __init__(self, url: str, body: dict):
        super().__init__(daemon=True)
        self.url, self.body = url, body
        self.sent = 0.0
        self.times: list[float] = []
        self.error = None

    def run(self):
        try:
            self.sent = time.monotonic()
            with requests.post(self.url + "/v1/chat/completions", json=self.body, stream=True,
                               timeout=1800) as r:
                r.raise_for_status()
                for line in r.iter_lines():
                    if line.startswith(b"data: {"):
                        c = json.loads(line[6:])
                        if any((ch.get("delta") or {}).get("content") for ch in c.get("choices", [])):
                            self.times.append(time.monotonic())
        except Exception as e:
            self.error = repr(e)


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def text_streams(url: str, n: int, tokens: int) -> list[Stream]:
    out = [Stream(url, {"messages": [{"role": "user", "content": f"Tell story number {i}."}],
                        "max_tokens": tokens, "temperature": 0, "ignore_eos": True,
                        "stream": True}) for i in range(n)]
    for s in out:
        s.start()
    return out


def gaps(streams: list[Stream], lo: float = 0.0, hi: float = float("inf")) -> list[float]:
    g = []
    for s in streams:
        for a, b in zip(s.times, s.times[1:]):
            if lo < b <= hi:
                g.append((b - a) * 1e3)
    return g


def gaps_around(url: str, n: int, tokens: int, content: list[dict]):
    """n streams decoding alone, then n more and, once all decode, one
    request with `content`: (gaps alone, gaps while that request waits for
    its first token, its wait in s)."""
    text_streams(url, n, 16)[0].join()  # warm-up
    base = text_streams(url, n, tokens)
    for s in base:
        s.join()
    load = text_streams(url, n, tokens * 4)
    while not all(s.times for s in load):
        time.sleep(0.01)
    req = Stream(url, {"messages": [{"role": "user", "content": content}], "max_tokens": 4,
                       "temperature": 0, "stream": True})
    req.start()
    req.join()
    first = req.times[0] if req.times else time.monotonic()
    for s in load:
        s.join()
    errors = [s.error for s in base + load + [req] if s.error]
    if errors:
        raise RuntimeError(f"errors: {errors}")
    return gaps(base), gaps(load, req.sent, first), first - req.sent


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--tiles", choices=["one", "all"], default="one")
    ap.add_argument("--threads", type=int, default=0, help="tern serve --threads (0: default)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        media = d / "media"
        media.mkdir()
        text, mmproj = d / "text.gguf", d / "mmproj.gguf"
        subprocess.run([TERN, "gen-vlm-text", "--from", SMOLLM2, "--out", str(text)], check=True,
                       capture_output=True)
        subprocess.run([TERN, "gen-mmproj", "--type", "idefics3", "--shape", "real", "--seed", "1",
                        "--weights", "q8_0", "--n-embd", "576", "--out", str(mmproj)] +
                       (["--preproc-size", "512"] if a.tiles == "one" else []),
                       check=True, capture_output=True)
        pic = write_bmp(media / "pic.bmp", 512, 512, int(time.time()) % 1000)
        extra = ["--threads", str(a.threads)] if a.threads else []
        with TernServer("--mmproj", str(mmproj), "--media-dir", str(media), *extra,
                        model=str(text), startup_timeout=300) as srv:
            ga, gb, wait = gaps_around(srv.url, a.streams, a.tokens, [
                {"type": "image_url", "image_url": {"url": pic}},
                {"type": "text", "text": "Describe the picture."}])
            m = requests.get(srv.url + "/metrics", timeout=10).text
            slices = [ln for ln in m.splitlines() if ln.startswith("tern_vision_encode_slices_total")]
    print(f"streams={a.streams} tiles={a.tiles} image wait={wait * 1e3:.0f} ms "
          f"({slices[0] if slices else 'no slice metric'})")
    print(f"A text only:   n={len(ga)} p50={statistics.median(ga):.1f} ms p99={pct(ga, 99):.1f} ms")
    print(f"B while image: n={len(gb)} p50={statistics.median(gb):.1f} ms p99={pct(gb, 99):.1f} ms")
    print(f"p99 ratio B/A = {pct(gb, 99) / pct(ga, 99):.2f} (target <= 2)")


if __name__ == "__main__":
    main()
