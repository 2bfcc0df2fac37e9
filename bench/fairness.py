#!/usr/bin/env python3
"""Fairness under a long prompt: does one client's 4,096-token prompt stall
everyone else's stream?

Scenario (issue 14, section 3), per server:
  1. idle: a short request alone -> its TTFT (the idle TTFT);
  2. baseline: 8 clients stream short replies (--reply-tokens, one after
     another) to short prompts; the gaps
     between their content chunks over a window -> ITL p50/p99 without;
  3. the same 8 streams, and a ninth client sends a --long-prompt-token
     prompt; while it is prefilled (send -> its first token) the 8 streams'
     gaps are collected -> ITL p50/p99 during; a tenth client sends a short
     request shortly after the long one, then more every few seconds while
     it is prefilled -> their median TTFT during (and the worst);
  4. the streams' gaps over a window after the prefill (the same as before
     unless the machine's load changed).
Printed: both ITLs and their ratio (target <= 2x), the short TTFTs and their
ratio (target <= 2x), for tern and for llama-server (-np 10
--cont-batching, same threads and context per slot).

    python bench/fairness.py --tern --peer
    python bench/fairness.py --tern --tern-arg=--step-tokens --tern-arg=128

Uses bench/serve.py's server starters and job maker.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve  # noqa: E402


def stream(url: str, prompt: str, max_tokens: int, gaps: list, stop: threading.Event,
           first: list | None = None, t_send: list | None = None):
    """One streamed chat; appends (time, gap) of each content chunk to gaps."""
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
            "temperature": 0, "ignore_eos": True, "stream": True}
    sent = time.perf_counter()
    if t_send is not None:
        t_send.append(sent)
    last = None
    with requests.post(url + "/v1/chat/completions", json=body, stream=True, timeout=900) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if stop.is_set():
                return
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            msg = json.loads(line[6:])
            for ch in msg.get("choices") or []:
                if (ch.get("delta") or {}).get("content"):
                    now = time.perf_counter()
                    if last is None and first is not None:
                        first.append(now - sent)
                    if last is not None:
                        gaps.append((now, now - last))
                    last = now


def client(url: str, prompt: str, reply_tokens: int, gaps: list, stop: threading.Event):
    """A streaming client: short replies of reply_tokens one after another
    (0: one endless reply) until stop; the gaps within each reply go to gaps."""
    i = 0
    while not stop.is_set():
        stream(url, f"{prompt} (part {i})" if i else prompt, reply_tokens or 100000, gaps, stop)
        i += 1


def short_ttft(url: str, prompt: str) -> float:
    first: list = []
    stream(url, prompt, 4, [], threading.Event(), first=first)
    return first[0]


def measure(name: str, url: str, args) -> dict:
    jobs = serve.make_jobs(url, 1, (args.long_prompt_tokens, args.long_prompt_tokens), (8, 8),
                           args.seed)
    long_prompt = jobs[0].prompt
    short = "Name a colour."
    short_ttft(url, short)  # warm up
    idle = sorted(short_ttft(url, short + f" #{i}") for i in range(3))[1]

    stop = threading.Event()
    gaps: list = []
    streams = [threading.Thread(target=client, daemon=True,
                                args=(url, f"Tell a long story about the number {i}.",
                                      args.reply_tokens, gaps, stop))
               for i in range(args.streams)]
    for t in streams:
        t.start()
    time.sleep(args.settle)
    t0 = time.perf_counter()
    time.sleep(args.window)
    base = [g for (t, g) in gaps if t >= t0]

    long_first: list = []
    long_sent: list = []
    lt = threading.Thread(target=stream, args=(url, long_prompt, 8, [], threading.Event()),
                          kwargs={"first": long_first, "t_send": long_sent})
    lt.start()
    time.sleep(args.short_delay)
    # Short requests during the prefill: the first --short-delay after the long
    # one, then one every --short-every seconds until it has its first token
    # (each arrives at a different depth of the long prompt and phase of a step).
    shorts = [short_ttft(url, short + " (during)")]
    while lt.is_alive() and not long_first and len(shorts) < args.short_max:
        time.sleep(args.short_every)
        if not long_first:
            shorts.append(short_ttft(url, short + f" (during #{len(shorts)})"))
    lt.join()
    during_short = sorted(shorts)[len(shorts) // 2]
    t_start = long_sent[0]
    t_end = t_start + long_first[0]
    during = [g for (t, g) in gaps if t_start <= t <= t_end]
    # The same window after: the machine's load may have changed meanwhile
    # (a shared machine), which this shows.
    time.sleep(args.window)
    after = [g for (t, g) in gaps if t_end + 0.5 <= t]
    stop.set()
    for t in streams:
        t.join(timeout=30)
    b50, b99 = 1000 * serve.pct(base, 50), 1000 * serve.pct(base, 99)
    d50, d99 = 1000 * serve.pct(during, 50), 1000 * serve.pct(during, 99)
    dmax = 1000 * max(during) if during else float("nan")
    a50, a99 = 1000 * serve.pct(after, 50), 1000 * serve.pct(after, 99)
    row = {"server": name, "itl_base_p50_ms": b50, "itl_base_p99_ms": b99,
           "itl_during_p50_ms": d50, "itl_during_p99_ms": d99, "itl_during_max_ms": dmax,
           "itl_p99_ratio": d99 / b99 if b99 else float("nan"),
           "long_prefill_s": long_first[0], "short_ttft_idle_ms": 1000 * idle,
           "short_ttft_during_ms": 1000 * during_short,
           "short_ttft_ratio": during_short / idle if idle else float("nan"),
           "short_ttft_during_all_ms": [1000 * x for x in shorts],
           "short_ttft_max_ratio": max(shorts) / idle if idle else float("nan"),
           "itl_after_p50_ms": a50, "itl_after_p99_ms": a99,
           "gaps_base": len(base), "gaps_during": len(during), "gaps_after": len(after)}
    print(f"{name}: ITL p50/p99 {b50:.0f}/{b99:.0f} ms -> {d50:.0f}/{d99:.0f} ms during the "
          f"{args.long_prompt_tokens}-token prefill ({long_first[0]:.1f} s; max gap {dmax:.0f} ms)"
          f", p99 x{row['itl_p99_ratio']:.2f}; short TTFT {1000 * idle:.0f} -> "
          f"{1000 * during_short:.0f} ms (x{row['short_ttft_ratio']:.2f}; median of "
          f"{len(shorts)}, max x{row['short_ttft_max_ratio']:.2f}); ITL after {a50:.0f}/"
          f"{a99:.0f} ms", flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url")
    ap.add_argument("--tern", action="store_true")
    ap.add_argument("--peer", action="store_true")
    ap.add_argument("-m", "--model", default=os.environ.get(
        "TERN_MODEL", str(serve.REPO / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf")))
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count())
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--reply-tokens", type=int, default=128,
                    help="each stream's replies (short ones, one after another, as in the "
                         "issue); 0: one endless reply, whose context grows all along")
    ap.add_argument("--long-prompt-tokens", type=int, default=4096)
    ap.add_argument("--ctx-per-slot", type=int, default=4608)
    ap.add_argument("--settle", type=float, default=2.0, help="seconds before the baseline window")
    ap.add_argument("--window", type=float, default=4.0, help="baseline window, seconds")
    ap.add_argument("--short-delay", type=float, default=0.3,
                    help="seconds after the long prompt that the short request is sent")
    ap.add_argument("--short-every", type=float, default=4.0,
                    help="seconds between further short requests during the long prefill")
    ap.add_argument("--short-max", type=int, default=9, help="short requests during, at most")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--tern-arg", action="append", default=[])
    ap.add_argument("--peer-arg", action="append", default=[])
    ap.add_argument("--json")
    args = ap.parse_args()
    if not (args.url or args.tern or args.peer):
        ap.error("give --url, --tern or --peer")
    print(f"# {serve.machine()}; {args.threads} threads; {args.streams} streams + one "
          f"{args.long_prompt_tokens}-token prompt + one short request")
    slots = args.streams + 2
    rows = []
    if args.url:
        rows.append(measure("server", args.url, args))
    for name, starter in (("tern", serve.start_tern), ("llama-server", serve.start_peer)):
        if not getattr(args, "tern" if name == "tern" else "peer"):
            continue
        proc = starter(args, slots)
        if os.environ.get("TERN_LOG_LEVEL") and name == "tern":
            print(f"# tern's log: {proc.log.name} (bench/step_trace.py reads it)", flush=True)
        try:
            rows.append(measure(name, proc.url, args))
        finally:
            proc.stop()
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": serve.machine(), "rows": rows},
                                              indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
