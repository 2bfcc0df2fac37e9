#!/usr/bin/env python3
"""Speculative decoding through the server: tern with --spec auto against
--spec off, on workloads with more or less text to copy.

Workloads (seeded, stated):
  code    a source file of this repository (300-1,500 tokens) and an edit
          instruction ("rename X to Y"); the answer is the whole edited file;
  predict the code edit with the file before the edit as OpenAI's
          `prediction` (Predicted Outputs);
  tool    a JSON tool result and a request to repeat some of its fields;
  chat    free chat, little to copy: speculation must not lose here.

For each workload and concurrency (default 1,4,16) the same greedy requests
go to a server started with --spec off and one with --spec auto (one server
at a time); printed: output tokens/s (aggregate over the requests), the
ratio auto/off, the guesses made and kept (timings.draft_n,
draft_accepted_n), and whether every answer was byte-identical.

    python bench/spec.py [--concurrency 1,4,16] [--requests 4] [-m MODEL]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve import PEER_BIN, REPO, Proc, free_port  # noqa: E402

SOURCES = ["src/sched/drafter.cpp", "src/server/answer.cpp", "src/sched/admission.cpp",
           "src/server/api_exchange.cpp"]


def workloads(seed: int, n: int) -> dict[str, list]:
    """name -> prompts (a prompt: its text, or (text, prediction))."""
    rng = random.Random(seed)
    code, tool, chat, predict = [], [], [], []
    for i in range(n):
        src = (REPO / SOURCES[i % len(SOURCES)]).read_text()
        code.append("Rewrite this file with the function `" + rng.choice(["propose", "add", "push"]) +
                    "` renamed to `" + rng.choice(["suggest", "append", "feed"]) +
                    "`. Output the whole file and nothing else.\n\n" + src)
        predict.append((code[-1], src))
        rows = [{"id": rng.randrange(10**6), "name": rng.choice(["alpha", "beta", "gamma", "delta"]),
                 "price": round(rng.uniform(1, 100), 2), "tags": rng.sample(
                     ["new", "sale", "eco", "fast", "blue", "red"], 3)} for _ in range(12)]
        tool.append("A tool returned this JSON:\n" + json.dumps(rows, indent=1) +
                    "\nRepeat every object whose name is '" + rng.choice(["alpha", "beta"]) +
                    "', as JSON, exactly as given.")
        chat.append(rng.choice(["Tell me about the history of tea.", "Why is the sky blue?",
                                "Write a poem about autumn leaves.",
                                "Give advice to someone learning to cook."]))
    return {"code": code, "tool": tool, "chat": chat, "predict": predict}


def one(url: str, prompt, max_tokens: int) -> dict:
    prompt, prediction = prompt if isinstance(prompt, tuple) else (prompt, None)
    body = {"messages": [{"role": "user", "content": prompt}], "temperature": 0,
            "max_tokens": max_tokens}
    if prediction is not None:
        body["prediction"] = {"type": "content", "content": prediction}
    r = requests.post(url + "/v1/chat/completions", timeout=600, json=body).json()
    t = r["timings"]
    return {"text": r["choices"][0]["message"]["content"], "n": t["predicted_n"],
            "ms": t["predicted_ms"], "draft": t.get("draft_n", 0),
            "kept": t.get("draft_accepted_n", t.get("draft_n_accepted", 0))}


def level(url: str, prompts: list[str], conc: int, max_tokens: int) -> tuple[float, list[dict]]:
    out: list[dict | None] = [None] * len(prompts)
    nxt = iter(range(len(prompts)))
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                i = next(nxt, None)
            if i is None:
                return
            out[i] = one(url, prompts[i], max_tokens)

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(conc)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    return sum(o["n"] for o in out) / wall, out


def measure(binary: str, model: str, spec: str, loads: dict, levels: list[int],
            max_tokens: int, extra: list[str]) -> dict:
    port = free_port()
    srv = Proc("tern", [binary, "--log-level", "warn", "serve", "-m", model, "--port", str(port),
                        "-t", "2", "--max-batch", str(max(levels)), "--spec", spec, *extra], port)
    try:
        res = {}
        for name, prompts in loads.items():
            for c in levels:
                res[(name, c)] = level(srv.url, prompts * max(1, c // len(prompts)), c, max_tokens)
        return res
    finally:
        srv.stop()


def measure_peer(model: str, spec_type: str, loads: dict, levels: list[int],
                 max_tokens: int) -> dict:
    """llama-server, flash attention, the same threads, one slot per client."""
    port, slots = free_port(), max(levels)
    cmd = [str(PEER_BIN / "llama-server"), "-m", model, "--port", str(port), "-t", "2",
           "-np", str(slots), "-c", str(slots * 4096), "-fa", "on", "--no-webui",
           "--spec-type", spec_type]
    srv = Proc("llama-server", cmd, port, {**os.environ, "LD_LIBRARY_PATH": str(PEER_BIN)})
    try:
        return {(name, c): level(srv.url, prompts * max(1, c // len(prompts)), c, max_tokens)
                for name, prompts in loads.items() for c in levels}
    finally:
        srv.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--requests", type=int, default=4, help="prompts per workload")
    ap.add_argument("--max-tokens", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workloads", default="code,predict,tool,chat")
    ap.add_argument("-m", "--model", default=str(REPO / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--bin", default=str(REPO / "build" / "tern"))
    ap.add_argument("--tern-arg", action="append", default=[], help="extra tern serve flag")
    ap.add_argument("--on", default="auto", choices=["auto", "ngram", "draft"],
                    help="the speculating server's --spec (draft: pass --tern-arg=--draft-model=F)")
    ap.add_argument("--peer", action="store_true",
                    help="also llama-server (scripts/build_peer.sh) with each --peer-types")
    ap.add_argument("--peer-types", default="none,ngram-mod,ngram-simple,ngram-map-k")
    args = ap.parse_args()
    levels = [int(x) for x in args.concurrency.split(",")]
    loads = {k: v for k, v in workloads(args.seed, args.requests).items()
             if k in args.workloads.split(",")}
    off = measure(args.bin, args.model, "off", loads, levels, args.max_tokens, args.tern_arg)
    auto = measure(args.bin, args.model, args.on, loads, levels, args.max_tokens, args.tern_arg)
    # tok/s: all requests' output tokens over the level's wall time (prefill
    # included); decode: output tokens over their generation time per request
    # (first token to last), summed over requests, as timings report them.
    def decode(o):
        return sum(x["n"] for x in o) / max(1e-9, sum(x["ms"] for x in o) / 1e3)

    print("| workload | concurrent | off tok/s | auto tok/s | auto/off | decode off | decode auto "
          "| decode auto/off | guessed | kept | identical |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    same_all = True
    for key in off:
        (tps0, o0), (tps1, o1) = off[key], auto[key]
        same = all(a["text"] == b["text"] for a, b in zip(o0, o1))
        same_all &= same
        guessed, kept = sum(o["draft"] for o in o1), sum(o["kept"] for o in o1)
        d0, d1 = decode(o0), decode(o1)
        print(f"| {key[0]} | {key[1]} | {tps0:.1f} | {tps1:.1f} | {tps1 / tps0:.2f}x | {d0:.1f} | "
              f"{d1:.1f} | {d1 / d0:.2f}x | {guessed} | "
              f"{kept} ({100 * kept / max(1, guessed):.0f} %) | {'yes' if same else 'NO'} |")
    if args.peer:
        print()
        print("| workload | concurrent | llama-server --spec-type | tok/s | decode tok/s | guessed "
              "| kept | tern auto / this (tok/s) | tern auto / this (decode) |")
        print("|---|---|---|---|---|---|---|---|---|")
        for t in args.peer_types.split(","):
            peer = measure_peer(args.model, t, loads, levels, args.max_tokens)
            for key, (tps, o) in peer.items():
                tern_tps, tern_o = auto[key]
                print(f"| {key[0]} | {key[1]} | {t} | {tps:.1f} | {decode(o):.1f} | "
                      f"{sum(x['draft'] for x in o)} | {sum(x['kept'] for x in o)} | "
                      f"{tern_tps / tps:.2f}x | {decode(tern_o) / decode(o):.2f}x |")
    return 0 if same_all else 1


if __name__ == "__main__":
    sys.exit(main())
