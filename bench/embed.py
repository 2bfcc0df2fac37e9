#!/usr/bin/env python3
"""Embedding throughput: tern serve against llama-server --embedding, same file and threads.

N inputs of 16-512 tokens (words drawn from the perplexity corpus, seeded),
sent to POST /v1/embeddings at client batch 1 (one input a request) and 32
(32 inputs a request), `--clients` requests in flight at a time. Reports
inputs/s and tokens/s (tokens as each server's usage counts them) and the
ratio; the issue's target is >= 3x llama-server's inputs/s at batch 32.
Measure only on a quiet machine (load < 1.5 on the 2-core box).

    .venv/bin/python bench/embed.py [--n 1000] [--threads 2] [--pooling mean]
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import os
import random
import sys
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve import CORPUS, PEER_BIN, REPO, Proc, free_port  # noqa: E402

MODEL = REPO / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def inputs(n: int, seed: int) -> list[str]:
    """n texts of 16-512 tokens (a word is about 1.3 tokens for SmolLM2)."""
    words = CORPUS.read_text().split()
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = int(rng.uniform(16, 512) / 1.3)
        at = rng.randrange(0, len(words) - k)
        out.append(" ".join(words[at:at + k]))
    return out


def run(url: str, texts: list[str], batch: int, clients: int) -> dict:
    reqs = [texts[i:i + batch] for i in range(0, len(texts), batch)]

    def one(chunk: list[str]) -> int:
        r = requests.post(url + "/v1/embeddings", json={"model": "m", "input": chunk}, timeout=3600)
        r.raise_for_status()
        body = r.json()
        assert len(body["data"]) == len(chunk)
        return int(body["usage"]["prompt_tokens"])

    t0 = time.monotonic()
    with cf.ThreadPoolExecutor(clients) as ex:
        tokens = sum(ex.map(one, reqs))
    dt = time.monotonic() - t0
    return {"inputs_s": len(texts) / dt, "tokens_s": tokens / dt, "s": dt}


def measure(name: str, cmd: list[str], port: int, texts, batches, clients, env=None) -> dict:
    srv = Proc(name, cmd, port, env)
    try:
        run(srv.url, texts[:8], 8, 1)  # warm-up
        return {b: run(srv.url, texts, b, clients) for b in batches}
    finally:
        srv.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=str(MODEL))
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pooling", default="mean")
    ap.add_argument("--clients", type=int, default=1, help="requests in flight at a time")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-peer", action="store_true")
    a = ap.parse_args()
    if os.getloadavg()[0] > 1.5:
        print(f"warning: load {os.getloadavg()[0]:.1f} > 1.5: numbers will be noisy",
              file=sys.stderr)
    texts = inputs(a.n, a.seed)
    batches = [int(b) for b in a.batches.split(",")]
    port = free_port()
    tern = [str(REPO / "build" / "tern"), "--log-level", "warn", "serve", "-m", a.model,
            "--port", str(port), "-t", str(a.threads), "--pooling", a.pooling]
    res = {"tern": measure("tern", tern, port, texts, batches, a.clients)}
    if not a.no_peer:
        port = free_port()
        peer = [str(PEER_BIN / "llama-server"), "-m", a.model, "--port", str(port),
                "-t", str(a.threads), "--embedding", "--pooling", a.pooling, "-np", "16",
                "-c", str(16 * 1024), "-b", "2048", "-ub", "2048", "--no-webui"]
        res["llama-server"] = measure("llama-server", peer, port, texts, batches, a.clients,
                                      {**os.environ, "LD_LIBRARY_PATH": str(PEER_BIN)})
    print(f"{a.n} inputs of 16-512 tokens, {Path(a.model).name}, {a.threads} threads, "
          f"pooling {a.pooling}, {a.clients} client(s)")
    print("| server | client batch | inputs/s | tokens/s |")
    print("|---|---|---|---|")
    for name, r in res.items():
        for b in batches:
            print(f"| {name} | {b} | {r[b]['inputs_s']:.1f} | {r[b]['tokens_s']:.0f} |")
    if "llama-server" in res:
        for b in batches:
            print(f"batch {b}: tern / llama-server inputs/s = "
                  f"{res['tern'][b]['inputs_s'] / res['llama-server'][b]['inputs_s']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
