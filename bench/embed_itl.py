#!/usr/bin/env python3
"""Inter-token latency of a running stream while a big embedding request runs.

Starts `tern serve` (SmolLM2 by default, --spec off), runs one streaming chat
completion (greedy, ignore_eos) and measures the gaps between its SSE chunks:

  A. alone: every gap after its first token;
  B. the same, and once it decodes, one POST /v1/embeddings of --items inputs
     (16-512 tokens each, bench/embed.py's seeded texts): the gaps that end
     while that request runs. The stream stops once the embeddings are back.

Embedding sequences are prefill-only entries of the same batched steps, under
the same step token budget as any prompt, so the stream keeps decoding
between their chunks. Prints p50/p99 of both and the p99 ratio B/A (issue
29's target: <= 2). Quote it only on a quiet machine (load < 1.5 on the
2-core box); the script warns otherwise.

    .venv/bin/python bench/embed_itl.py [--items 512] [--threads 2] [--step-tokens N]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT / "bench"))
from embed import inputs  # noqa: E402
from tern_server import TernServer  # noqa: E402


class Stream(threading.Thread):
    """A streaming chat completion; records when each content chunk arrives."""

    def __init__(self, url: str, tokens: int):
        super().__init__(daemon=True)
        self.url, self.tokens = url, tokens
        self.times: list[float] = []
        self.stop = threading.Event()
        self.error = None

    def run(self):
        body = {"messages": [{"role": "user", "content": "Tell a long story."}],
                "max_tokens": self.tokens, "temperature": 0, "ignore_eos": True, "stream": True}
        try:
            with requests.post(self.url + "/v1/chat/completions", json=body, stream=True,
                               timeout=1800) as r:
                r.raise_for_status()
                for line in r.iter_lines():
                    if self.stop.is_set():
                        break  # closing the connection cancels the generation
                    if line.startswith(b"data: {"):
                        c = json.loads(line[6:])
                        if any((ch.get("delta") or {}).get("content") for ch in c["choices"]):
                            self.times.append(time.monotonic())
        except Exception as e:  # noqa: BLE001
            self.error = repr(e)


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def gaps(times: list[float], lo: float = 0.0, hi: float = float("inf")) -> list[float]:
    return [(b - a) * 1e3 for a, b in zip(times, times[1:]) if lo < b <= hi]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=512)
    ap.add_argument("--tokens", type=int, default=200, help="the idle stream's length")
    ap.add_argument("--threads", type=int, default=0, help="tern serve --threads (0: default)")
    ap.add_argument("--step-tokens", type=int, default=0, help="tern serve --step-tokens")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tern-arg", action="append", default=[], help="extra tern serve flag")
    a = ap.parse_args()
    load = os.getloadavg()[0]
    if load > 1.5:
        print(f"warning: load {load:.1f} > 1.5: the figures are under load", file=sys.stderr)
    texts = inputs(a.items, a.seed)
    # Speculation off: a drafted step emits several tokens at once, which
    # would read as near-zero gaps.
    extra = ["--spec", "off"] + (["--threads", str(a.threads)] if a.threads else []) + \
        (["--step-tokens", str(a.step_tokens)] if a.step_tokens else []) + a.tern_arg
    with TernServer(*extra, startup_timeout=300) as srv:
        warm = Stream(srv.url, 16)
        warm.start()
        warm.join()
        # A: the stream alone.
        idle = Stream(srv.url, a.tokens)
        idle.start()
        idle.join()
        ga = gaps(idle.times[1:])
        # B: the stream, and the embedding request once it decodes.
        busy = Stream(srv.url, 1 << 20)
        busy.start()
        while len(busy.times) < 3 and busy.is_alive():
            time.sleep(0.01)
        t0 = time.monotonic()
        r = requests.post(srv.url + "/v1/embeddings", json={"model": "m", "input": texts},
                          timeout=3600)
        t1 = time.monotonic()
        busy.stop.set()
        busy.join()
        if r.status_code != 200 or idle.error or busy.error:
            sys.exit(f"failed: {r.status_code} {r.text[:300]} {idle.error} {busy.error}")
        tokens = r.json()["usage"]["prompt_tokens"]
        gb = gaps(busy.times, t0, t1)
    if not ga or not gb:
        sys.exit(f"too few gaps to compare (idle {len(ga)}, busy {len(gb)}): raise --items/--tokens")
    print(f"{a.items} inputs, {tokens} tokens embedded in {t1 - t0:.1f} s "
          f"({tokens / (t1 - t0):.0f} tokens/s); load {load:.2f} at start")
    print(f"A idle:           n={len(ga)} p50={statistics.median(ga):.1f} ms "
          f"p99={pct(ga, 99):.1f} ms")
    print(f"B while embedding: n={len(gb)} p50={statistics.median(gb):.1f} ms "
          f"p99={pct(gb, 99):.1f} ms")
    print(f"p99 ratio B/A = {pct(gb, 99) / pct(ga, 99):.2f} (target <= 2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
