#!/usr/bin/env python3
"""Prefix-cache and multi-turn benchmark against a real `tern serve`.

1. Shared prefix, cold vs warm. For each trial a fresh ~512-token prefix
   (a distinct slice of tests/fixtures/perplexity_text.txt behind a random
   nonce, so no trial hits another's cache) is followed by a short question.
   The cold request computes the whole prompt; the warm request sends the
   same prefix again, either with the identical question (same output
   expected, checked) or with a different one (the realistic case: only the
   tail after the last shared 32-token block is computed). Time to first token
   is measured at the client (request sent -> first content chunk of the SSE
   stream); the server's `timings` give prompt tokens computed and reused.

2. Multi-turn chat: a conversation of N turns; for each turn, prompt tokens,
   tokens reused from the cache, tokens computed, and the new tokens the turn
   added (its user message plus the previous reply and template tokens).

Starts its own server (build/tern, default model, default flags plus any
--serve-arg) unless --url is given. Standard library and `requests` only.

    .venv/bin/python bench/kv_prefix.py --trials 5
    .venv/bin/python bench/kv_prefix.py --url http://127.0.0.1:8080
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[1]
QUESTIONS = ["Question: what is this text about? Answer:", "Question: who is speaking here? Answer:"]


def start_server(binary: str, extra: list[str]) -> tuple[subprocess.Popen, str]:
    log = tempfile.NamedTemporaryFile(prefix="kv-prefix-serve-", suffix=".log", delete=False)
    proc = subprocess.Popen([binary, "serve", "--port", "0", *extra], stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        m = re.search(r"listening on (http://127\.0\.0\.1:\d+)", Path(log.name).read_text(errors="replace"))
        if m:
            return proc, m.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    sys.exit("server did not start:\n" + Path(log.name).read_text(errors="replace"))


def stream_completion(url: str, prompt: str, max_tokens: int) -> dict:
    """Streams one greedy completion; returns ttft (s), text, usage, timings."""
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    ttft = None
    text = ""
    last = {}
    with requests.post(url + "/v1/completions", json=body, stream=True, timeout=600) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            ev = json.loads(line[6:])
            if "error" in ev:
                raise RuntimeError(ev["error"])
            for c in ev.get("choices", []):
                if c.get("text"):
                    if ttft is None:
                        ttft = time.perf_counter() - t0
                    text += c["text"]
            if ev.get("usage"):
                last["usage"] = ev["usage"]
            if ev.get("timings"):
                last["timings"] = ev["timings"]
    return {"ttft": ttft if ttft is not None else time.perf_counter() - t0, "text": text, **last}


def count_tokens(url: str, text: str) -> int:
    """Prompt tokens of text, by a one-token completion (which caches it: so
    callers count a variant behind a throwaway nonce)."""
    r = requests.post(url + "/v1/completions", json={"prompt": text, "max_tokens": 1}, timeout=600)
    r.raise_for_status()
    return r.json()["usage"]["prompt_tokens"]


def nonce() -> str:
    return f"[{uuid.uuid4().hex[:16]}]"


def make_prefix(url: str, corpus: list[str], start: int, target: int) -> str:
    """A fresh nonce, then words of the corpus from `start`, cut to about
    `target` tokens (sized on a variant with another nonce, so the cache never
    holds the returned prefix)."""
    words = corpus[start:] + corpus[:start]
    n = int(target * 0.7)
    while True:
        body = " ".join(words[:n])
        have = count_tokens(url, nonce() + " " + body)
        if have >= target:
            return nonce() + " " + body
        n += max(1, int((target - have) * 0.7))


def prefix_bench(url: str, trials: int, target: int, max_tokens: int) -> list[dict]:
    corpus = (REPO / "tests/fixtures/perplexity_text.txt").read_text().split()
    rows = []
    for i in range(trials):
        prefix = make_prefix(url, corpus, (i * 997) % len(corpus), target)
        cold = stream_completion(url, prefix + " " + QUESTIONS[0], max_tokens)
        same = stream_completion(url, prefix + " " + QUESTIONS[0], max_tokens)
        other = stream_completion(url, prefix + " " + QUESTIONS[1], max_tokens)
        rows.append({"prompt_tokens": cold["usage"]["prompt_tokens"],
                     "cold_ttft_ms": 1000 * cold["ttft"], "cold_computed": cold["timings"]["prompt_n"],
                     "warm_ttft_ms": 1000 * same["ttft"], "warm_reused": same["timings"]["cache_n"],
                     "warm_computed": same["timings"]["prompt_n"], "same_text": same["text"] == cold["text"],
                     "other_ttft_ms": 1000 * other["ttft"], "other_reused": other["timings"]["cache_n"],
                     "other_computed": other["timings"]["prompt_n"]})
        r = rows[-1]
        print(f"trial {i}: {r['prompt_tokens']} prompt tokens; cold {r['cold_ttft_ms']:.1f} ms; "
              f"warm (same) {r['warm_ttft_ms']:.1f} ms, {r['warm_reused']} reused; "
              f"warm (other question) {r['other_ttft_ms']:.1f} ms, {r['other_reused']} reused; "
              f"same text: {r['same_text']}", flush=True)
    return rows


def multi_turn(url: str, turns: int, max_tokens: int) -> list[dict]:
    messages = [{"role": "system", "content": f"Conversation {nonce()}. You are a friendly, brief assistant."}]
    asks = ["Tell me about the moon.", "Why does it have phases?", "How far away is it?",
            "Could people live there?", "What would they eat?", "Thanks! Summarise our chat."]
    rows, prev = [], 0
    for t in range(turns):
        messages.append({"role": "user", "content": asks[t % len(asks)]})
        r = requests.post(url + "/v1/chat/completions", timeout=600,
                          json={"messages": messages, "max_tokens": max_tokens, "temperature": 0})
        r.raise_for_status()
        j = r.json()
        u, tm = j["usage"], j["timings"]
        rows.append({"turn": t + 1, "prompt_tokens": u["prompt_tokens"], "new_tokens": u["prompt_tokens"] - prev,
                     "reused": tm["cache_n"], "computed": tm["prompt_n"], "ttft_ms": tm["ttft_ms"]})
        prev = u["prompt_tokens"]
        messages.append({"role": "assistant", "content": j["choices"][0]["message"]["content"]})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="a running server (default: start build/tern serve)")
    ap.add_argument("--tern", default=str(REPO / "build/tern"))
    ap.add_argument("--serve-arg", action="append", default=[], help="extra flag for tern serve (repeatable)")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--prefix-tokens", type=int, default=512)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()

    proc = None
    url = args.url
    if not url:
        proc, url = start_server(args.tern, args.serve_arg)
    try:
        stream_completion(url, "Warm up.", 4)
        rows = prefix_bench(url, args.trials, args.prefix_tokens, args.max_tokens)
        cold = statistics.median(r["cold_ttft_ms"] for r in rows)
        warm = statistics.median(r["warm_ttft_ms"] for r in rows)
        other = statistics.median(r["other_ttft_ms"] for r in rows)
        print(f"\nshared prefix of ~{args.prefix_tokens} tokens, median over {len(rows)} trials:")
        print(f"  TTFT cold {cold:.1f} ms | warm, same prompt {warm:.1f} ms ({cold / warm:.1f}x) | "
              f"warm, other question {other:.1f} ms ({cold / other:.1f}x)")
        print(f"  same text cold vs warm: {all(r['same_text'] for r in rows)}")
        turns = multi_turn(url, args.turns, args.max_tokens)
        print("\nmulti-turn chat: turn | prompt tokens | new this turn | reused | computed | TTFT ms")
        for t in turns:
            print(f"  {t['turn']:>4} | {t['prompt_tokens']:>13} | {t['new_tokens']:>13} | {t['reused']:>6} | "
                  f"{t['computed']:>8} | {t['ttft_ms']:.1f}")
        if args.json:
            Path(args.json).write_text(json.dumps({"prefix": rows, "multi_turn": turns}, indent=2))
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
