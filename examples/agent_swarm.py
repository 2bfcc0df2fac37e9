#!/usr/bin/env python3
"""An agent swarm over WebSockets: N agents, each on its own WebSocket session,
run multi-turn conversations at once (each turn feeds the model's answer back
as history, like an agent loop) and the script reports aggregate throughput.

Every agent's generations are batched by tern's scheduler with everyone
else's, so the aggregate tokens/s grows with N far beyond a single stream.

    pip install websockets
    python examples/agent_swarm.py --agents 16 --turns 3 --max-tokens 48
    python examples/agent_swarm.py --url ws://127.0.0.1:8080/v1/ws --api-key KEY

Protocol: web/PROTOCOL.md.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from urllib.parse import quote

import websockets

TASKS = [
    "Plan a three-step approach to organise a small library.",
    "Draft a packing list for a weekend hike.",
    "Outline a recipe for vegetable soup.",
    "Suggest names for a friendly robot.",
    "Describe a routine for learning to juggle.",
    "List questions to ask before adopting a cat.",
]
FOLLOW_UPS = ["Now make it shorter.", "Add one more idea.", "Summarise it in one sentence."]


async def agent(idx: int, args, stats: dict) -> None:
    url = args.url + (f"?api_key={quote(args.api_key)}" if args.api_key else "")
    async with websockets.connect(url, max_size=None) as ws:
        hello = json.loads(await ws.recv())
        assert hello["type"] == "hello", hello
        history = [{"role": "system", "content": f"You are agent {idx}, brief and practical."},
                   {"role": "user", "content": TASKS[idx % len(TASKS)]}]
        for turn in range(args.turns):
            gid = f"agent{idx}-turn{turn}"
            t0 = time.perf_counter()
            await ws.send(json.dumps({"type": "generate", "id": gid, "messages": history,
                                      "max_tokens": args.max_tokens, "temperature": 0.8,
                                      "ignore_eos": args.ignore_eos}))
            text, first = "", None
            while True:
                msg = json.loads(await ws.recv())
                if msg.get("id") != gid:
                    continue
                if msg["type"] == "delta":
                    if first is None and msg["text"]:
                        first = time.perf_counter()
                    text += msg["text"]
                elif msg["type"] == "done":
                    stats["tokens"] += msg["usage"]["completion_tokens"]
                    stats["ttft"].append((first or time.perf_counter()) - t0)
                    stats["turns"] += 1
                    break
                elif msg["type"] == "error":
                    stats["errors"].append(msg["error"]["message"])
                    return
            history.append({"role": "assistant", "content": text})
            history.append({"role": "user", "content": FOLLOW_UPS[turn % len(FOLLOW_UPS)]})
            if args.verbose:
                print(f"[agent {idx} turn {turn}] {text[:70]!r}")


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="ws://127.0.0.1:8080/v1/ws")
    ap.add_argument("--api-key", default="")
    ap.add_argument("--agents", type=int, default=8)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--ignore-eos", action="store_true", help="always generate --max-tokens")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()

    stats = {"tokens": 0, "turns": 0, "ttft": [], "errors": []}
    t0 = time.perf_counter()
    await asyncio.gather(*(agent(i, args, stats) for i in range(args.agents)))
    wall = time.perf_counter() - t0
    ttft = sorted(stats["ttft"])
    print(f"{args.agents} agents x {args.turns} turns: {stats['turns']} turns done in {wall:.1f} s")
    print(f"aggregate: {stats['tokens'] / wall:.1f} tokens/s ({stats['tokens']} tokens)")
    if ttft:
        p99 = ttft[min(len(ttft) - 1, int(0.99 * len(ttft)))]
        print(f"time to first token: p50 {1000 * statistics.median(ttft):.0f} ms, "
              f"p99 {1000 * p99:.0f} ms")
    for e in stats["errors"][:5]:
        print("error:", e)


if __name__ == "__main__":
    asyncio.run(main())
