#!/usr/bin/env python3
"""The serving benchmark: tern (and the native llama-server peer) under a
realistic mixed load, over HTTP/SSE and over WebSocket.

Load:
  * closed loop (`--concurrency 1,4,16,64`: that many clients, each sending
    its next request when the previous one ends), or open loop
    (`--rate R`: Poisson arrivals at R requests/s, whatever the server does);
  * a length mix: prompt lengths log-uniform in --prompt-range (default
    64-4096 tokens), output lengths log-uniform in --output-range (16-512),
    drawn from --seed; every request asks for exactly its output length
    (ignore_eos), so tern and the peer do the same work. Prompts are cut from
    tests/fixtures/perplexity_text.txt (repeated) at the drawn token count,
    using the server's own /tokenize and /detokenize, so they are the same
    text for both servers.

Per run: requests/s, output tokens/s, TTFT p50/p99 (send to first content),
ITL p50/p99 (gaps between content chunks at the client: a chunk that carries
several tokens counts as one gap, which is what a reader sees), errors, and
goodput: requests per second that met the SLO (TTFT <= --slo-ttft seconds,
default 1, and that request's own ITL p99 <= --slo-itl-ms, default 100).

Servers: --url uses a running server; --tern starts build/tern serve;
--peer starts llama-server (built by scripts/setup.sh --peer) with
-np = the largest concurrency, --cont-batching, the same threads and the same
context per slot. With both, ratios tern/peer are printed per level. --chart
writes an SVG of throughput and p99 ITL against concurrency.

    python bench/serve.py --tern --peer --concurrency 1,4,16,64 --requests 64 \\
        --json out.json --chart out.svg
    python bench/serve.py --tern --transport ws --concurrency 16
    python bench/serve.py --tern --rate 2 --requests 40
    python bench/serve.py --smoke        # seconds: a tiny run of both transports

Standard library, `requests` and `websockets` only.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[1]
warnings.filterwarnings("ignore", category=DeprecationWarning)  # websockets sync connect
CORPUS = REPO / "tests" / "fixtures" / "perplexity_text.txt"
PEER_BIN = Path(os.environ.get("TERN_PEER_BIN", Path.home() / ".cache" / "tern-peer" /
                               "llama.cpp-11434.0.0" / "build" / "bin"))


# --- servers -----------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proc:
    """A server process on a loopback port, its log in a temp file."""

    def __init__(self, name: str, cmd: list[str], port: int, env: dict | None = None):
        self.name, self.port = name, port
        self.log = tempfile.NamedTemporaryFile(prefix=f"serve-{name}-", suffix=".log",
                                               delete=False)
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env)
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{name} exited:\n{Path(self.log.name).read_text()[-3000:]}")
            try:
                if requests.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"{name} never became healthy")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_tern(args, slots: int) -> Proc:
    port = free_port()
    cmd = [os.environ.get("TERN_BIN", str(REPO / "build" / "tern")), "--log-level",
           os.environ.get("TERN_LOG_LEVEL", "warn"),
           "serve", "-m", args.model,
           "--port", str(port), "-t", str(args.threads), "--max-batch", str(slots),
           "--max-queue", str(max(64, 4 * slots)), "-c", str(args.ctx_per_slot),
           *args.tern_arg]
    return Proc("tern", cmd, port)


def start_peer(args, slots: int) -> Proc:
    exe = PEER_BIN / "llama-server"
    if not exe.exists():
        raise SystemExit(f"{exe} not found: build it with scripts/setup.sh --peer")
    port = free_port()
    cmd = [str(exe), "-m", args.model, "--port", str(port), "-t", str(args.threads),
           "-np", str(slots), "-c", str(slots * args.ctx_per_slot), "--cont-batching",
           "--no-webui", *args.peer_arg]
    env = {**os.environ, "LD_LIBRARY_PATH": str(PEER_BIN)}
    return Proc("llama-server", cmd, port, env)


# --- workload ----------------------------------------------------------------

@dataclass
class Job:
    prompt: str
    prompt_tokens: int
    max_tokens: int


def log_uniform(rng: random.Random, lo: int, hi: int) -> int:
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def make_jobs(url: str, n: int, prompt_range, output_range, seed: int) -> list[Job]:
    rng = random.Random(seed)
    lengths = [(log_uniform(rng, *prompt_range), log_uniform(rng, *output_range))
               for _ in range(n)]
    text = CORPUS.read_text()
    ids = requests.post(url + "/tokenize", json={"content": text, "add_special": False},
                        timeout=120).json()["tokens"]
    need = max(p for p, _ in lengths)
    while len(ids) < need:
        ids = ids + ids
    jobs, cache = [], {}
    for p, o in lengths:
        if p not in cache:
            start = rng.randrange(0, len(ids) - p + 1)
            cache[p] = requests.post(url + "/detokenize", json={"tokens": ids[start:start + p]},
                                     timeout=120).json()["content"]
        jobs.append(Job(cache[p], p, o))
    return jobs


# --- one request -------------------------------------------------------------

@dataclass
class Result:
    ok: bool = False
    error: str = ""
    sent: float = 0.0
    ttft: float = math.nan
    gaps: list[float] = field(default_factory=list)
    out_tokens: int = 0
    end: float = 0.0


def chat_body(job: Job) -> dict:
    return {"messages": [{"role": "user", "content": job.prompt}], "max_tokens": job.max_tokens,
            "temperature": 0, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}}


def run_sse(session: requests.Session, url: str, job: Job, timeout: float) -> Result:
    r = Result(sent=time.perf_counter())
    last = None
    chunks = 0
    try:
        with session.post(url + "/v1/chat/completions", json=chat_body(job), stream=True,
                          timeout=timeout) as resp:
            if resp.status_code != 200:
                r.error = f"HTTP {resp.status_code}: {resp.text[:200]}"
                return r
            for line in resp.iter_lines():
                if not line.startswith(b"data: ") or line == b"data: [DONE]":
                    continue
                msg = json.loads(line[6:])
                if msg.get("usage"):
                    r.out_tokens = msg["usage"]["completion_tokens"]
                for ch in msg.get("choices") or []:
                    if (ch.get("delta") or {}).get("content"):
                        now = time.perf_counter()
                        if last is None:
                            r.ttft = now - r.sent
                        else:
                            r.gaps.append(now - last)
                        last = now
                        chunks += 1
        r.out_tokens = r.out_tokens or chunks
        r.ok = True
    except Exception as e:  # noqa: BLE001 - reported, not raised
        r.error = f"{type(e).__name__}: {e}"
    r.end = time.perf_counter()
    return r


class WsClient:
    """One WebSocket per client: tern's /v1/ws, one generation at a time."""

    def __init__(self, url: str):
        from websockets.sync.client import connect
        self.ws = connect(url.replace("http://", "ws://") + "/v1/ws", max_size=None)
        assert json.loads(self.ws.recv())["type"] == "hello"
        self.n = 0

    def run(self, job: Job, timeout: float) -> Result:
        self.n += 1
        gid = f"g{self.n}"
        body = chat_body(job)
        del body["stream"], body["stream_options"]
        r = Result(sent=time.perf_counter())
        last = None
        try:
            self.ws.send(json.dumps({"type": "generate", "id": gid, **body}))
            while True:
                msg = json.loads(self.ws.recv(timeout=timeout))
                if msg.get("id") != gid:
                    continue
                if msg["type"] == "delta" and msg.get("text"):
                    now = time.perf_counter()
                    if last is None:
                        r.ttft = now - r.sent
                    else:
                        r.gaps.append(now - last)
                    last = now
                elif msg["type"] == "done":
                    r.out_tokens = msg["usage"]["completion_tokens"]
                    r.ok = msg.get("finish_reason") != "error"
                    if not r.ok:
                        r.error = msg.get("error", "error")
                    break
                elif msg["type"] == "error":
                    r.error = msg.get("message", str(msg))
                    break
        except Exception as e:  # noqa: BLE001
            r.error = f"{type(e).__name__}: {e}"
        r.end = time.perf_counter()
        return r

    def close(self):
        try:
            self.ws.close()
        except Exception:  # noqa: BLE001
            pass


# --- a run -------------------------------------------------------------------

def pct(values: list[float], p: float) -> float:
    if not values:
        return math.nan
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def summarize(results: list[Result], wall: float, slo_ttft: float, slo_itl: float) -> dict:
    ok = [r for r in results if r.ok]
    gaps = [g for r in ok for g in r.gaps]
    good = [r for r in ok if r.ttft <= slo_ttft and (not r.gaps or pct(r.gaps, 99) <= slo_itl)]
    out = sum(r.out_tokens for r in ok)
    errors = [r.error for r in results if not r.ok]
    return {
        "requests": len(results), "ok": len(ok), "errors": len(errors),
        "first_errors": errors[:3], "wall_s": wall,
        "req_per_s": len(ok) / wall if wall else 0.0,
        "out_tok_per_s": out / wall if wall else 0.0,
        "ttft_p50_ms": 1000 * pct([r.ttft for r in ok], 50),
        "ttft_p99_ms": 1000 * pct([r.ttft for r in ok], 99),
        "itl_p50_ms": 1000 * pct(gaps, 50), "itl_p99_ms": 1000 * pct(gaps, 99),
        "goodput_req_per_s": len(good) / wall if wall else 0.0,
        "slo_met": len(good),
    }


def run_closed(url: str, jobs: list[Job], concurrency: int, transport: str,
               timeout: float) -> tuple[list[Result], float]:
    results: list[Result] = []
    lock = threading.Lock()
    it = iter(jobs)

    def client():
        ws = WsClient(url) if transport == "ws" else None
        try:
            while True:
                with lock:
                    job = next(it, None)
                if job is None:
                    return
                # A connection per request: llama-server may close a kept-alive
                # one between requests, which a reused session sees as a failure.
                r = ws.run(job, timeout) if ws else run_sse(requests.Session(), url, job, timeout)
                with lock:
                    results.append(r)
        finally:
            if ws:
                ws.close()

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, time.perf_counter() - t0


def run_open(url: str, jobs: list[Job], rate: float, transport: str, timeout: float,
             seed: int) -> tuple[list[Result], float]:
    rng = random.Random(seed + 1)
    results: list[Result] = []
    lock = threading.Lock()

    def one(job: Job):
        if transport == "ws":
            ws = WsClient(url)
            r = ws.run(job, timeout)
            ws.close()
        else:
            r = run_sse(requests.Session(), url, job, timeout)
        with lock:
            results.append(r)

    t0 = time.perf_counter()
    threads = []
    for job in jobs:
        t = threading.Thread(target=one, args=(job,))
        t.start()
        threads.append(t)
        time.sleep(rng.expovariate(rate))
    for t in threads:
        t.join()
    return results, time.perf_counter() - t0


# --- report ------------------------------------------------------------------

COLS = [("req_per_s", "req/s", "{:.2f}"), ("out_tok_per_s", "out tok/s", "{:.1f}"),
        ("ttft_p50_ms", "TTFT p50", "{:.0f}"), ("ttft_p99_ms", "TTFT p99", "{:.0f}"),
        ("itl_p50_ms", "ITL p50", "{:.1f}"), ("itl_p99_ms", "ITL p99", "{:.1f}"),
        ("goodput_req_per_s", "goodput", "{:.2f}"), ("errors", "errors", "{}")]


def print_table(rows: list[dict]):
    head = ["server", "transport", "load"] + [c[1] for c in COLS]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        cells = [r["server"], r["transport"], r["load"]]
        cells += [fmt.format(r[k]) if not (isinstance(r[k], float) and math.isnan(r[k])) else "-"
                  for k, _, fmt in COLS]
        print("| " + " | ".join(cells) + " |")


def print_ratios(rows: list[dict]):
    tern = {(r["transport"], r["load"]): r for r in rows if r["server"] == "tern"}
    peer = {r["load"]: r for r in rows if r["server"] == "llama-server"}
    lines = []
    for (transport, load), t in tern.items():
        p = peer.get(load)
        if not p:
            continue
        def ratio(k, invert=False):
            a, b = (p[k], t[k]) if invert else (t[k], p[k])
            return f"{a / b:.2f}x" if b else "inf"
        lines.append(f"  {transport} {load}: out tok/s {ratio('out_tok_per_s')}, "
                     f"goodput {ratio('goodput_req_per_s')}, "
                     f"TTFT p99 {ratio('ttft_p99_ms', True)} lower, "
                     f"ITL p99 {ratio('itl_p99_ms', True)} lower")
    if lines:
        print("\ntern / llama-server (same jobs, threads and context per slot):")
        print("\n".join(lines))


def write_chart(rows: list[dict], path: str):
    """Two panels, hand-written SVG: output tokens/s and ITL p99 against concurrency."""
    series: dict[str, list[tuple[float, float, float]]] = {}
    for r in rows:
        if not r["load"].startswith("c="):
            continue
        series.setdefault(f'{r["server"]} {r["transport"]}', []).append(
            (float(r["load"][2:]), r["out_tok_per_s"], r["itl_p99_ms"]))
    if not series:
        return
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    xs = sorted({x for s in series.values() for x, _, _ in s})
    W, H, P = 420, 300, 50

    def panel(ox: int, idx: int, title: str) -> str:
        ys = [v[idx] for s in series.values() for v in s if not math.isnan(v[idx])]
        ymax = max(ys) * 1.1 if ys else 1
        lx = lambda x: ox + P + (math.log2(x) - math.log2(xs[0])) / max(
            1e-9, math.log2(xs[-1]) - math.log2(xs[0])) * (W - 2 * P)
        ly = lambda y: H - P - y / ymax * (H - 2 * P)
        out = [f'<text x="{ox + W / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
               f'<line x1="{ox + P}" y1="{H - P}" x2="{ox + W - P}" y2="{H - P}" stroke="black"/>',
               f'<line x1="{ox + P}" y1="{P}" x2="{ox + P}" y2="{H - P}" stroke="black"/>']
        for x in xs:
            out.append(f'<text x="{lx(x)}" y="{H - P + 16}" text-anchor="middle" '
                       f'font-size="11">{int(x)}</text>')
        for k in range(5):
            y = ymax * k / 4
            out.append(f'<text x="{ox + P - 4}" y="{ly(y) + 4}" text-anchor="end" '
                       f'font-size="10">{y:.0f}</text>')
        out.append(f'<text x="{ox + W / 2}" y="{H - 10}" text-anchor="middle" '
                   f'font-size="11">concurrent clients</text>')
        for (name, pts), color in zip(series.items(), colors):
            pts = sorted(p for p in pts if not math.isnan(p[idx]))
            d = " ".join(f"{lx(p[0]):.1f},{ly(p[idx]):.1f}" for p in pts)
            out.append(f'<polyline points="{d}" fill="none" stroke="{color}" stroke-width="2"/>')
        return "\n".join(out)

    legend = "\n".join(
        f'<text x="{2 * W + 10}" y="{60 + 18 * i}" font-size="12" fill="{c}">{name}</text>'
        for i, (name, c) in enumerate(zip(series, colors)))
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * W + 180}" height="{H}">\n'
           f'<rect width="100%" height="100%" fill="white"/>\n'
           f'{panel(0, 1, "output tokens/s")}\n{panel(W, 2, "ITL p99 (ms)")}\n{legend}\n</svg>\n')
    Path(path).write_text(svg)


def machine() -> str:
    cpu = "unknown CPU"
    flags = set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and cpu == "unknown CPU":
                cpu = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    isa = ",".join(f for f in ("avx2", "avx512f", "avx512_vnni", "avx_vnni") if f in flags)
    return f"{cpu} [{isa}], {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}"


# --- main --------------------------------------------------------------------

def parse_range(s: str) -> tuple[int, int]:
    lo, hi = (int(x) for x in s.split("-"))
    if not 0 < lo <= hi:
        raise argparse.ArgumentTypeError(f"bad range {s}")
    return lo, hi


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="a running server to measure (instead of --tern/--peer)")
    ap.add_argument("--tern", action="store_true", help="start build/tern serve")
    ap.add_argument("--peer", action="store_true", help="start llama-server (the native peer)")
    ap.add_argument("-m", "--model", default=os.environ.get(
        "TERN_MODEL", str(REPO / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf")))
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count())
    ap.add_argument("--ctx-per-slot", type=int, default=4800,
                    help="context per concurrent request (prompt + output must fit)")
    ap.add_argument("--concurrency", default="1,4,16",
                    help="closed-loop levels, comma-separated")
    ap.add_argument("--rate", type=float, help="open loop: Poisson arrivals per second")
    ap.add_argument("--requests", type=int, default=32, help="requests per level")
    ap.add_argument("--transport", default="sse", help="sse, ws or sse,ws (tern only for ws)")
    ap.add_argument("--prompt-range", type=parse_range, default=(64, 4096))
    ap.add_argument("--output-range", type=parse_range, default=(16, 512))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--slo-ttft", type=float, default=1.0, help="seconds")
    ap.add_argument("--slo-itl-ms", type=float, default=100.0)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--tern-arg", action="append", default=[], help="extra tern serve flag")
    ap.add_argument("--peer-arg", action="append", default=[], help="extra llama-server flag")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--chart", help="write an SVG chart here")
    ap.add_argument("--smoke", action="store_true",
                    help="a seconds-long run (CI): tern, both transports, tiny lengths")
    args = ap.parse_args()
    if args.smoke:
        args.tern, args.peer, args.url = True, False, None
        args.concurrency, args.requests, args.transport = "1,3", 6, "sse,ws"
        args.prompt_range, args.output_range, args.ctx_per_slot = (16, 96), (4, 12), 512
    if not (args.url or args.tern or args.peer):
        ap.error("give --url, --tern or --peer")
    levels = [int(x) for x in args.concurrency.split(",")] if args.rate is None else [0]
    transports = args.transport.split(",")
    slots = max(levels) if args.rate is None else 64
    print(f"# {machine()}; {args.threads} threads; model {Path(args.model).name}")
    print(f"# prompts {args.prompt_range[0]}-{args.prompt_range[1]} tokens, outputs "
          f"{args.output_range[0]}-{args.output_range[1]} (log-uniform, seed {args.seed}), "
          f"{args.requests} requests per level; SLO: TTFT <= {args.slo_ttft} s and "
          f"ITL p99 <= {args.slo_itl_ms} ms")

    # Each server is started just before its runs and stopped after them, so
    # the other one never sits idle beside it, holding memory and threads.
    starters: list[tuple[str, object]] = []
    if args.url:
        starters.append(("server", None))
    if args.tern:
        starters.append(("tern", lambda: start_tern(args, slots)))
    if args.peer:
        starters.append(("llama-server", lambda: start_peer(args, slots)))
    targets: list[tuple[str, str, Proc | None]] = []
    rows: list[dict] = []
    # Fresh prompts per level (a level must not hit the prefix cache of the one
    # before), the same ones for every server: cut once, with the first
    # server's tokenizer.
    jobs_for: dict[int, list[Job]] = {}
    try:
        for name, start in starters:
            proc = start() if start else None
            url = proc.url if proc else args.url
            targets.append((name, url, proc))
            for i in range(len(levels) * len(transports)):
                if i not in jobs_for:
                    jobs_for[i] = make_jobs(url, args.requests, args.prompt_range,
                                            args.output_range, args.seed + 1000 * i)
            warm = make_jobs(url, 2, (16, 32), (4, 8), args.seed + 999_999)
            run_closed(url, warm, 1, "sse", args.timeout)  # load pages, threads, caches
            run_no = 0
            for transport in transports:
                if transport == "ws" and name == "llama-server":  # no WebSocket API
                    continue
                for c in levels:
                    jobs = jobs_for[run_no]
                    run_no += 1
                    if args.rate is None:
                        results, wall = run_closed(url, jobs, c, transport, args.timeout)
                        load = f"c={c}"
                    else:
                        results, wall = run_open(url, jobs, args.rate, transport, args.timeout,
                                                 args.seed)
                        load = f"rate={args.rate}"
                    row = {"server": name, "transport": transport, "load": load,
                           **summarize(results, wall, args.slo_ttft, args.slo_itl_ms / 1000)}
                    rows.append(row)
                    print(f"{name} {transport} {load}: {row['out_tok_per_s']:.1f} out tok/s, "
                          f"TTFT p99 {row['ttft_p99_ms']:.0f} ms, ITL p99 "
                          f"{row['itl_p99_ms']:.1f} ms, goodput {row['goodput_req_per_s']:.2f}"
                          f" req/s, {row['errors']} errors", flush=True)
            if proc:
                proc.stop()
    finally:
        for _, _, proc in targets:
            if proc:
                proc.stop()
    print()
    print_table(rows)
    print_ratios(rows)
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine(), "args": vars(args),
                                               "rows": rows}, indent=1, default=str))
    if args.chart:
        write_chart(rows, args.chart)
    errors = sum(r["errors"] for r in rows)
    if errors:
        print(f"{errors} requests failed: {[r['first_errors'] for r in rows if r['errors']]}",
              file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
