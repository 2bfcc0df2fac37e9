#!/usr/bin/env python3
"""Load generator for a running OpenAI-compatible server (tern serve, or a peer
such as llama.cpp's llama-server for comparison).

For each concurrency level (default 1,2,4,8,16,32) it keeps that many
streaming chat requests in flight (closed loop: a client sends its next
request as soon as the previous one ends) and reports:

  * aggregate output tokens/s and requests/s over the level's wall time,
  * time to first token (TTFT) p50 / p99, measured at the client from sending
    the request to the first non-empty content chunk,
  * inter-token latency (ITL) p50 / p99: gaps between content chunks at the
    client (a chunk normally carries one token; a server that coalesces for a
    slow reader may put several in one, which this counts as one gap).

Every request asks for exactly --max-tokens tokens (ignore_eos), so levels are
comparable. Output tokens come from the usage chunk (stream_options.include_usage),
or are counted as content chunks for a server that sends none.

    python bench/load_server.py --url http://127.0.0.1:8080 --max-tokens 64
    python bench/load_server.py --levels 1,4,16 --requests-per-client 3 --json out.json

Only the standard library and `requests` are needed.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field

import requests

PROMPTS = [
    "Write a short story about a robot who learns to paint.",
    "Explain how a bicycle stays upright.",
    "Describe the water cycle to a ten year old.",
    "List some good habits for learning a new language.",
    "What makes a good cup of tea?",
    "Tell me about the history of the printing press.",
    "Write a poem about autumn leaves.",
    "How do bees communicate with each other?",
]


@dataclass
class Result:
    ok: bool
    ttft: float = 0.0                 # seconds
    gaps: list[float] = field(default_factory=list)  # seconds between content chunks
    tokens: int = 0
    error: str = ""


def one_request(session: requests.Session, url: str, headers: dict, prompt: str,
                max_tokens: int, timeout: float) -> Result:
    body = {
        "model": "bench",
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0.7,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    t0 = time.perf_counter()
    try:
        r = session.post(url + "/v1/chat/completions", json=body, headers=headers, stream=True,
                         timeout=timeout)
        if r.status_code != 200:
            return Result(False, error=f"HTTP {r.status_code}: {r.text[:200]}")
        first = None
        last = None
        gaps = []
        tokens = 0
        chunks = 0  # content chunks: the token count when a server sends no usage
        for line in r.iter_lines():
            if not line.startswith(b"data: "):
                continue
            data = line[6:]
            if data == b"[DONE]":
                break
            chunk = json.loads(data)
            if chunk.get("error"):
                return Result(False, error=f"stream error: {chunk['error']}"[:200])
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            for choice in chunk.get("choices", []):
                if (choice.get("delta") or {}).get("content"):
                    chunks += 1
                    now = time.perf_counter()
                    if first is None:
                        first = now
                    else:
                        gaps.append(now - last)
                    last = now
        if first is None:
            return Result(False, error=f"no content (HTTP {r.status_code})")
        return Result(True, ttft=first - t0, gaps=gaps, tokens=tokens or chunks)
    except requests.RequestException as e:
        return Result(False, error=str(e))


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    k = (len(values) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def run_level(args, concurrency: int) -> dict:
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    results: list[Result] = []
    lock = threading.Lock()

    def client(idx: int):
        with requests.Session() as s:
            for k in range(args.requests_per_client):
                prompt = PROMPTS[(idx + k) % len(PROMPTS)]
                res = one_request(s, args.url, headers, prompt, args.max_tokens, args.timeout)
                with lock:
                    results.append(res)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(concurrency)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    good = [r for r in results if r.ok]
    ttfts = [r.ttft for r in good]
    gaps = [g for r in good for g in r.gaps]
    tokens = sum(r.tokens for r in good)
    return {
        "concurrency": concurrency,
        "requests": len(results),
        "failed": len(results) - len(good),
        "errors": sorted({r.error for r in results if not r.ok})[:3],
        "wall_s": wall,
        "output_tokens": tokens,
        "output_tokens_per_s": tokens / wall if wall > 0 else 0.0,
        "requests_per_s": len(good) / wall if wall > 0 else 0.0,
        "ttft_p50_ms": 1000 * percentile(ttfts, 50),
        "ttft_p99_ms": 1000 * percentile(ttfts, 99),
        "itl_p50_ms": 1000 * percentile(gaps, 50),
        "itl_p99_ms": 1000 * percentile(gaps, 99),
        "itl_mean_ms": 1000 * statistics.fmean(gaps) if gaps else float("nan"),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--api-key", default="")
    ap.add_argument("--levels", default="1,2,4,8,16,32", help="comma-separated concurrencies")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--requests-per-client", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()
    args.url = args.url.rstrip("/")

    try:
        model = requests.get(args.url + "/v1/models", timeout=10,
                             headers={"Authorization": f"Bearer {args.api_key}"} if args.api_key else {})
        model_id = model.json()["data"][0]["id"]
    except (requests.RequestException, KeyError, ValueError, IndexError) as e:
        print(f"cannot reach {args.url}: {e}", file=sys.stderr)
        return 1
    print(f"server {args.url}, model {model_id}, {args.max_tokens} tokens per request, "
          f"{args.requests_per_client} requests per client")
    # Warm-up: one short request so the first level does not pay for page faults.
    one_request(requests.Session(), args.url,
                {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {},
                PROMPTS[0], 4, args.timeout)

    header = (f"{'conc':>4} {'reqs':>5} {'fail':>4} {'out tok/s':>10} {'req/s':>7} "
              f"{'TTFT p50':>9} {'TTFT p99':>9} {'ITL p50':>8} {'ITL p99':>8}")
    print(header)
    print("-" * len(header))
    rows = []
    for level in [int(x) for x in args.levels.split(",") if x.strip()]:
        row = run_level(args, level)
        rows.append(row)
        print(f"{row['concurrency']:>4} {row['requests']:>5} {row['failed']:>4} "
              f"{row['output_tokens_per_s']:>10.1f} {row['requests_per_s']:>7.2f} "
              f"{row['ttft_p50_ms']:>7.0f}ms {row['ttft_p99_ms']:>7.0f}ms "
              f"{row['itl_p50_ms']:>6.1f}ms {row['itl_p99_ms']:>6.1f}ms", flush=True)
        for e in row["errors"]:
            print(f"     error: {e}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"url": args.url, "model": model_id, "max_tokens": args.max_tokens,
                       "requests_per_client": args.requests_per_client, "levels": rows}, f, indent=2)
    return 0 if all(r["failed"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
