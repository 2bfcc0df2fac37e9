#!/usr/bin/env python3
"""Time to first token of turn 4 after a server restart, with and without
`--cache-dir` (issue 18's benchmark).

For each conversation size (default 2k and 8k tokens) and trial: a fresh
conversation (a nonce, then a long system text cut from
tests/fixtures/perplexity_text.txt to the size, then three short user turns)
runs turns 1-3 on a server, which is then stopped with SIGTERM (the drain
writes the snapshot when --cache-dir is on) and started again the same way;
turn 4 is streamed and its TTFT measured at the client (request sent -> first
content chunk). Modes:

  cache    both servers run with the same --cache-dir (and its own flash dir)
  cold     no --cache-dir: turn 4 computes its whole prompt
  warm     (reference) turn 4 on the first server, no restart

Also reported: the snapshot's write time at exit and load time at start (from
the server's log), and the file size. Turn 4's greedy text must be the same
in every mode (checked). Standard library and `requests` only.

    python3 bench/cache_dir_ttft.py --trials 3 --threads 2
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[1]
QUESTIONS = ["Summarise the text in one sentence.", "Who is speaking?", "Name one place it mentions.",
             "What happens next?"]


class Server:
    def __init__(self, binary: str, args: list[str]):
        self.log_path = Path(tempfile.mktemp(prefix="cache-dir-bench-", suffix=".log"))
        t0 = time.perf_counter()
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen([binary, "serve", "--port", "0", *args], stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            m = re.search(r"listening on (http://127\.0\.0\.1:\d+)", self.log())
            if m:
                self.url = m.group(1)
                self.start_s = time.perf_counter() - t0
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        self.proc.kill()
        sys.exit("server did not start:\n" + self.log())

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> float:
        t0 = time.perf_counter()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=600)
        return time.perf_counter() - t0


def chat_stream(url: str, messages: list[dict], max_tokens: int = 16) -> dict:
    body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    ttft, text, last = None, "", {}
    with requests.post(url + "/v1/chat/completions", json=body, stream=True, timeout=900) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            ev = json.loads(line[6:])
            for c in ev.get("choices", []):
                if c.get("delta", {}).get("content"):
                    ttft = ttft if ttft is not None else time.perf_counter() - t0
                    text += c["delta"]["content"]
            for k in ("usage", "timings"):
                if ev.get(k):
                    last[k] = ev[k]
    return {"ttft": ttft if ttft is not None else time.perf_counter() - t0, "text": text, **last}


def n_tokens(url: str, text: str) -> int:
    r = requests.post(url + "/tokenize", json={"content": text}, timeout=60)
    r.raise_for_status()
    return len(r.json()["tokens"])


def system_text(url: str, target: int) -> str:
    words = (REPO / "tests/fixtures/perplexity_text.txt").read_text().split()
    words = words * (1 + target // 1500)
    n = int(target * 0.6)
    while n_tokens(url, " ".join(words[:n])) < target - 200:
        n += 200
    return f"Conversation {uuid.uuid4().hex}. Read this text: " + " ".join(words[:n])


def first_three(url: str, system: str) -> list[dict]:
    messages = [{"role": "system", "content": system}]
    for q in QUESTIONS[:3]:
        messages.append({"role": "user", "content": q})
        r = chat_stream(url, messages)
        messages.append({"role": "assistant", "content": r["text"]})
    messages.append({"role": "user", "content": QUESTIONS[3]})
    return messages


def trial(binary: str, base: list[str], mode: str, system: str) -> dict:
    work = Path(tempfile.mkdtemp(prefix="cache-dir-bench-"))
    extra = ["--kv-flash-dir", str(work / "spill")]
    if mode == "cache":
        extra += ["--cache-dir", str(work / "cache"), "--persist-interval", "0"]
    try:
        a = Server(binary, base + extra)
        messages = first_three(a.url, system)
        out = {}
        if mode == "warm":
            out = chat_stream(a.url, messages)
            a.stop()
        else:
            out["stop_s"] = a.stop()
            m = re.search(r"exit snapshot: saved (\d+) prefix-cache blocks \((\d+) MiB\).* in (\d+) ms",
                          a.log())
            if m:
                out["saved_blocks"], out["file_mib"], out["save_ms"] = map(int, m.groups())
            b = Server(binary, base + extra)
            m = re.search(r"loaded (\d+) prefix-cache blocks .* in (\d+) ms", b.log())
            if m:
                out["loaded_blocks"], out["load_ms"] = map(int, m.groups())
            out["start_s"] = b.start_s
            out.update(chat_stream(b.url, messages))
            b.stop()
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tern", default=str(REPO / "build" / "tern"))
    ap.add_argument("--sizes", default="2000,7600", help="conversation sizes in tokens")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--serve-arg", action="append", default=[])
    args = ap.parse_args()
    base = ["-t", str(args.threads), "--ctx", "8192", "--step-tokens", "512", *args.serve_arg]
    print(f"load average before: {os.getloadavg()}", flush=True)
    sizer = Server(args.tern, base + ["--kv-flash-mb", "0"])
    rows = []
    try:
        for size in [int(s) for s in args.sizes.split(",")]:
            res = {m: [] for m in ("cold", "cache", "warm")}
            for t in range(args.trials):
                system = system_text(sizer.url, size)  # one conversation for the three modes
                for mode in res:
                    r = trial(args.tern, base, mode, system)
                    res[mode].append(r)
                    print(f"size {size} trial {t} {mode}: ttft {r['ttft'] * 1000:.0f} ms, "
                          f"prompt {r['usage']['prompt_tokens']}, cache_n {r['timings']['cache_n']}, "
                          f"cache_flash_n {r['timings']['cache_flash_n']}"
                          + (f", saved {r.get('saved_blocks')} blocks / {r.get('file_mib')} MiB in "
                             f"{r.get('save_ms')} ms, loaded in {r.get('load_ms')} ms, restart "
                             f"{r.get('start_s', 0):.2f} s" if mode == "cache" else ""), flush=True)
            rows.append((size, res))
    finally:
        sizer.stop()
    print(f"load average after: {os.getloadavg()}")
    print("\n| conversation | prompt tokens | cold TTFT (ms) | --cache-dir TTFT (ms) | reused (flash) "
          "| speed-up | warm, no restart (ms) | snapshot save / load (ms) | file (MiB) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size, res in rows:
        med = {m: statistics.median(r["ttft"] for r in v) * 1000 for m, v in res.items()}
        c = res["cache"][-1]
        same = all(len({v[t]["text"] for v in res.values()}) == 1 for t in range(args.trials))
        print(f"| {size} | {c['usage']['prompt_tokens']} | {med['cold']:.0f} | {med['cache']:.0f} | "
              f"{c['timings']['cache_n']} ({c['timings']['cache_flash_n']}) | "
              f"{med['cold'] / med['cache']:.1f}x | {med['warm']:.0f} | "
              f"{statistics.median(r.get('save_ms', 0) for r in res['cache']):.0f} / "
              f"{statistics.median(r.get('load_ms', 0) for r in res['cache']):.0f} | "
              f"{c.get('file_mib')} |" + ("" if same else " TEXT DIFFERS between modes"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
