#!/usr/bin/env python3
"""Multi-LoRA serving benchmark: 16 concurrent greedy completions spread over
1, 4 and 16 adapters (rank 16 on every linear layer, made by `tern gen-lora`)
against the same load without adapters; aggregate generated tokens per second
and the ratio to the no-adapter run (target >= 0.85 with rank 16 everywhere).
With --peer, the same loads against the native llama-server (scripts/setup.sh
--peer) holding the same adapter files (--lora F ... --lora-init-without-apply;
each request picks one with "lora": [{"id": k, "scale": 1}]), ratios printed.

    .venv/bin/python bench/lora.py [-m MODEL] [-t 2] [--rank 16] [-n 16]
                                   [--max-tokens 64] [--adapters 1,4,16] [--peer]

Benchmarks on a shared machine are noisy: the load average is printed before
and after; only numbers taken with it under ~1.5 mean anything.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve import PEER_BIN, REPO, Proc, free_port  # noqa: E402

TERN = os.environ.get("TERN_BIN", str(REPO / "build" / "tern"))


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def start_tern(args, loras: list[str]) -> Proc:
    port = free_port()
    cmd = [TERN, "--log-level", "warn", "serve", "-m", args.model, "--port", str(port),
           "-t", str(args.threads), "--max-batch", str(args.n), "-c", "1024"]
    for i, f in enumerate(loras):
        cmd += ["--lora", f"l{i}={f}"]
    return Proc("tern", cmd, port)


def start_peer(args, loras: list[str]) -> Proc:
    port = free_port()
    cmd = [str(PEER_BIN / "llama-server"), "-m", args.model, "--port", str(port),
           "-t", str(args.threads), "-np", str(args.n), "-c", str(1024 * args.n),
           "--cont-batching", "--no-webui"]
    for f in loras:
        cmd += ["--lora", f]
    if loras:
        cmd += ["--lora-init-without-apply"]
    return Proc("llama-server", cmd, port, {**os.environ, "LD_LIBRARY_PATH": str(PEER_BIN)})


def run_load(url: str, args, n_adapters: int, peer: bool) -> float:
    """Aggregate generated tokens/s of args.n concurrent requests, request i on
    adapter i % n_adapters (none when n_adapters is 0)."""
    def one(i: int) -> int:
        body = {"prompt": f"Request {i}: write a long story about a lighthouse keeper.",
                "max_tokens": args.max_tokens, "temperature": 0, "ignore_eos": True}
        if n_adapters:
            k = i % n_adapters
            body["lora"] = [{"id": k, "scale": 1.0}] if peer else f"l{k}"
        r = requests.post(url + "/v1/completions", json=body, timeout=900)
        r.raise_for_status()
        return r.json()["usage"]["completion_tokens"]

    one(0)  # warm-up
    t0 = time.monotonic()
    with cf.ThreadPoolExecutor(args.n) as ex:
        tokens = sum(ex.map(one, range(args.n)))
    return tokens / (time.monotonic() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", default=str(REPO / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("-n", type=int, default=16, help="concurrent requests")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--adapters", default="1,4,16")
    ap.add_argument("--peer", action="store_true", help="also run llama-server")
    args = ap.parse_args()
    counts = [int(x) for x in args.adapters.split(",")]
    print(f"load average before: {loadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i in range(max(counts)):
            f = os.path.join(tmp, f"l{i}.gguf")
            subprocess.run([TERN, "gen-lora", "--base", args.model, "--rank", str(args.rank),
                            "--seed", str(i + 1), "--out", f], check=True, capture_output=True)
            files.append(f)
        servers = [("tern", start_tern)] + ([("llama-server", start_peer)] if args.peer else [])
        results = {}
        for name, start in servers:
            for n_ad in [0] + counts:
                p = start(args, files[:n_ad])
                try:
                    results[(name, n_ad)] = run_load(p.url, args, n_ad, name != "tern")
                finally:
                    p.stop()
                print(f"{name:12s} {n_ad:2d} adapters: {results[(name, n_ad)]:8.1f} tok/s", flush=True)
    print(f"\n{args.n} concurrent requests x {args.max_tokens} tokens, rank {args.rank} on "
          f"q/k/v/o/gate/up/down, {args.threads} threads")
    print("adapters   tern tok/s  vs none   " + ("llama-server tok/s  vs none  tern/llama" if args.peer else ""))
    for n_ad in [0] + counts:
        t = results[("tern", n_ad)]
        line = f"{n_ad:8d}  {t:10.1f}  {t / results[('tern', 0)]:7.2f}x"
        if args.peer:
            p = results[("llama-server", n_ad)]
            line += f"   {p:16.1f}  {p / results[('llama-server', 0)]:7.2f}x  {t / p:8.2f}x"
        print(line)
    print(f"load average after: {loadavg()}")


if __name__ == "__main__":
    main()
