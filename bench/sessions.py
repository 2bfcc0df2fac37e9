#!/usr/bin/env python3
"""Session affinity for agent swarms (issue 16's benchmark): turn-N time to
first token of many agent sessions whose contexts do not all fit in DRAM,
with and without a session key, and against llama-server.

The workload: S agent sessions (default 32) take T turns each (default 6),
round robin (every session's turn 1, then every session's turn 2, ...), as a
swarm whose agents wait on tools between turns. A session starts from its own
~1k-token context (a nonce and a passage of tests/fixtures/perplexity_text.txt)
and each turn appends a ~150-token tool result and the model's reply
(greedy, 16 tokens), so contexts grow to ~2k tokens. Between agent turns,
other clients send one-off prompts (--background per agent turn, ~512 tokens,
no session): the traffic that pushes an idle agent's KV out of a plain LRU.

tern runs with a DRAM KV budget of a third of the sessions' final contexts
(--dram-fraction) and a flash tier; modes:

  session    every agent request carries X-Session-Id (its KV is pinned for
             --session-ttl after each turn)
  plain      the same requests without the header
  llama-server  the native peer, -np 4 slots, --cache-ram set to tern's DRAM
             budget (its host-memory prompt cache)

Printed: TTFT mean and p50 per turn and mode, turn 2..T mean ratios. TTFT is
measured at the client: request sent -> first streamed content chunk.

    python3 bench/sessions.py --threads 2            # tern session vs plain
    python3 bench/sessions.py --threads 2 --peer     # and llama-server
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve import PEER_BIN, Proc, free_port, machine  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CORPUS = (REPO / "tests" / "fixtures" / "perplexity_text.txt").read_text()
WORDS = CORPUS.split()


def passage(start: int, n_words: int) -> str:
    start %= max(1, len(WORDS) - n_words)
    return " ".join(WORDS[start:start + n_words])


def stream_ttft(url: str, messages: list[dict], headers: dict, max_tokens: int) -> tuple[float, str]:
    body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0, "stream": True}
    t0 = time.perf_counter()
    ttft = None
    text = []
    with requests.post(url + "/v1/chat/completions", json=body, headers=headers, stream=True,
                       timeout=900) as r:
        if r.status_code != 200:
            raise RuntimeError(f"HTTP {r.status_code}: {r.text[:300]}")
        for line in r.iter_lines():
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            msg = json.loads(line[6:])
            for ch in msg.get("choices") or []:
                piece = (ch.get("delta") or {}).get("content")
                if piece:
                    if ttft is None:
                        ttft = time.perf_counter() - t0
                    text.append(piece)
    return (ttft if ttft is not None else time.perf_counter() - t0), "".join(text)


def run(url: str, args, use_session: bool) -> dict[int, list[float]]:
    """Runs the swarm once; returns TTFTs (s) per turn (1-based)."""
    run_id = uuid.uuid4().hex[:8]
    history = []
    for s in range(args.sessions):
        system = (f"Agent {run_id}-{s}. You are a research agent. Read the notes, call tools, "
                  f"and answer briefly. Notes: {passage(s * 997, args.context_words)}")
        history.append([{"role": "system", "content": system}])
    ttfts: dict[int, list[float]] = {t: [] for t in range(1, args.turns + 1)}
    bg = 0
    for t in range(1, args.turns + 1):
        for s in range(args.sessions):
            tool = passage(s * 131 + t * 7919, args.turn_words)
            history[s].append({"role": "user", "content": f"Tool result {t}: {tool}\nWhat next?"})
            headers = {"X-Session-Id": f"agent-{run_id}-{s}"} if use_session else {}
            ttft, reply = stream_ttft(url, history[s], headers, args.max_tokens)
            ttfts[t].append(ttft)
            history[s].append({"role": "assistant", "content": reply})
            for _ in range(args.background):
                bg += 1
                other = [{"role": "user", "content": f"One-off {run_id}-{bg}: summarise "
                          f"{passage(bg * 4099 + 17, args.background_words)}"}]
                stream_ttft(url, other, {}, 1)
        print(f"  turn {t}: mean TTFT {statistics.mean(ttfts[t]) * 1000:.0f} ms", flush=True)
    return ttfts


def tern_proc(args, dram_mb: int) -> Proc:
    port = free_port()
    cmd = [os.environ.get("TERN_BIN", str(REPO / "build" / "tern")), "--log-level", "warn",
           "serve", "-m", args.model, "--port", str(port), "-t", str(args.threads),
           "--kv-dram-mb", str(dram_mb), "--kv-flash-mb", str(args.flash_mb),
           "--session-ttl", str(args.session_ttl), *args.tern_arg]
    return Proc("tern", cmd, port)


def peer_proc(args, dram_mb: int) -> Proc:
    exe = PEER_BIN / "llama-server"
    if not exe.exists():
        raise SystemExit(f"{exe} not found: build it with scripts/setup.sh --peer")
    port = free_port()
    cmd = [str(exe), "-m", args.model, "--port", str(port), "-t", str(args.threads), "-np", "4",
           "-c", str(4 * args.peer_ctx), "--cont-batching", "--no-webui",
           "--cache-ram", str(dram_mb), *args.peer_arg]
    return Proc("llama-server", cmd, port, {**os.environ, "LD_LIBRARY_PATH": str(PEER_BIN)})


def bytes_per_token(args) -> float:
    p = tern_proc(args, 64)
    try:
        for line in requests.get(p.url + "/metrics", timeout=30).text.splitlines():
            if line.startswith("tern_kv_bytes_per_token "):
                return float(line.split()[1])
    finally:
        p.stop()
    raise RuntimeError("tern_kv_bytes_per_token missing from /metrics")


def summary(ttfts: dict[int, list[float]]) -> dict:
    later = [x for t, v in ttfts.items() if t >= 2 for x in v]
    return {"per_turn_ms": {t: round(statistics.mean(v) * 1000, 1) for t, v in ttfts.items()},
            "p50_per_turn_ms": {t: round(statistics.median(v) * 1000, 1) for t, v in ttfts.items()},
            "later_mean_ms": round(statistics.mean(later) * 1000, 1) if later else 0.0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", default=str(REPO / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sessions", type=int, default=32)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--context-words", type=int, default=750, help="~1k tokens of starting context")
    ap.add_argument("--turn-words", type=int, default=110, help="~150 tokens of tool result a turn")
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--background", type=int, default=1, help="one-off requests per agent turn")
    ap.add_argument("--background-words", type=int, default=380, help="~512 tokens each")
    ap.add_argument("--final-tokens", type=int, default=2200, help="a session's final context, for sizing")
    ap.add_argument("--dram-fraction", type=float, default=1 / 3)
    ap.add_argument("--flash-mb", type=int, default=4096)
    ap.add_argument("--session-ttl", type=float, default=600)
    ap.add_argument("--peer", action="store_true", help="also run llama-server")
    ap.add_argument("--peer-ctx", type=int, default=4096, help="llama-server context per slot")
    ap.add_argument("--modes", default="session,plain")
    ap.add_argument("--tern-arg", action="append", default=[])
    ap.add_argument("--peer-arg", action="append", default=[])
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()

    bpt = bytes_per_token(args)
    dram_mb = max(8, int(args.sessions * args.final_tokens * bpt * args.dram_fraction / 2**20))
    print(f"# {machine()}")
    print(f"# {args.sessions} sessions x {args.turns} turns, ~{args.final_tokens} final tokens each, "
          f"{args.background} one-off request(s) per agent turn; KV {bpt / 1024:.2f} KiB/token, "
          f"DRAM budget {dram_mb} MiB ({args.dram_fraction:.2f} of the sessions), threads {args.threads}")
    results = {}
    modes = [m for m in args.modes.split(",") if m] + (["llama-server"] if args.peer else [])
    for mode in modes:
        print(f"{mode}:", flush=True)
        proc = peer_proc(args, dram_mb) if mode == "llama-server" else tern_proc(args, dram_mb)
        try:
            t0 = time.perf_counter()
            results[mode] = summary(run(proc.url, args, use_session=(mode == "session")))
            results[mode]["wall_s"] = round(time.perf_counter() - t0, 1)
        finally:
            proc.stop()
    print("\n| mode | " + " | ".join(f"turn {t}" for t in range(1, args.turns + 1)) +
          " | turns 2+ mean | wall s |")
    print("|---|" + "---:|" * (args.turns + 2))
    for mode, r in results.items():
        cells = " | ".join(f"{r['per_turn_ms'][t]:.0f}" for t in range(1, args.turns + 1))
        print(f"| {mode} | {cells} | {r['later_mean_ms']:.0f} | {r['wall_s']:.0f} |")
    base = results.get("session")
    if base and base["later_mean_ms"] > 0:
        for other in ("plain", "llama-server"):
            if other in results:
                print(f"turns 2+ TTFT, {other} / session: "
                      f"{results[other]['later_mean_ms'] / base['later_mean_ms']:.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine(), "dram_mb": dram_mb,
                                               "args": vars(args), "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
