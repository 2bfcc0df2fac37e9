#!/usr/bin/env python3
"""Soak: tern under an hour of mixed, partly hostile traffic.

One server (`build/tern serve` on a generated vision-language pair: the
default model's text weights under a SmolVLM-style template plus a tiny
idefics3 projector, `tern gen-vlm-text` / `tern gen-mmproj`), a fixed set of
client threads, each looping over a weighted mix until --duration ends:

  text        chat completion, streamed or not
  image       chat with a data-URL picture (a few recurring, some new)
  tools       chat with `tools`
  schema      chat with `response_format: json_schema`
  responses   Responses API with store, a follow-up by previous_response_id,
              then GET and DELETE of the stored response
  ws          a WebSocket with two generations, one of them cancelled
  stall       a streamed request whose client stops reading for a while,
              then hangs up
  cancel      a streamed request closed after its first chunk
  bad         malformed JSON, a wrong type, a deep schema, an oversized body
              (each must get its 4xx)

Every few seconds the server's RSS is sampled from /proc. At the end the
server gets SIGTERM while requests are still running; the time it takes to
exit and its exit code are reported. The report: requests and outcomes per
kind, unexpected outcomes (anything but 200 and the intended 4xx/429/503),
RSS over time (after warm-up it should be flat), and the shutdown.

    .venv/bin/python bench/soak.py --duration 3600 --json soak.json
    .venv/bin/python bench/soak.py --duration 60     # a quick look

Standard library, `requests` and `websockets` only. Not run in CI.
"""
from __future__ import annotations

import argparse
import base64
import json
import random
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections import Counter, defaultdict
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))
from tern_server import TernServer, model_path, tern_bin  # noqa: E402

EXPECTED_REFUSALS = {400, 413, 429, 503}


def png(width: int, height: int, seed: int) -> bytes:
    """A real PNG of pseudo-random colour blocks."""
    rnd = random.Random(seed)
    rows = []
    for y in range(height):
        row = bytearray([0])
        for x in range(width):
            r = rnd.randrange(256) if (x // 8 + y // 8) % 2 else 40
            row += bytes((r, (r * 7) & 255, (x * 3 + y) & 255))
        rows.append(bytes(row))
    raw = zlib.compress(b"".join(rows))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")


def data_url(img: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(img).decode()


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.outcomes: dict[str, Counter] = defaultdict(Counter)
        self.unexpected: list[str] = []
        self.draining = False  # set with the SIGTERM: later outcomes are the drain's

    def record(self, kind: str, outcome: str, ok: bool, detail: str = "") -> None:
        with self.lock:
            if self.draining:
                kind, ok = "during-shutdown", True
            self.outcomes[kind][outcome] += 1
            if not ok and len(self.unexpected) < 200:
                self.unexpected.append(f"{kind}: {outcome} {detail[:200]}")


class Mix:
    """The request kinds; each returns (outcome, ok, detail)."""

    def __init__(self, url: str, ws_url: str, images: list[str], rnd: random.Random) -> None:
        self.url, self.ws_url, self.images, self.rnd = url, ws_url, images, rnd

    def post(self, path: str, body, expect=(200,), timeout=120, raw: bytes | None = None):
        r = requests.post(self.url + path, timeout=timeout,
                          data=raw if raw is not None else json.dumps(body),
                          headers={"Content-Type": "application/json"})
        return r, r.status_code in expect or r.status_code in (429, 503)

    def chat(self, messages, **extra):
        body = {"messages": messages, "max_tokens": self.rnd.randint(4, 24), "temperature": 0.7,
                "seed": self.rnd.randrange(1000), **extra}
        r, ok = self.post("/v1/chat/completions", body)
        return str(r.status_code), ok, r.text

    def text(self):
        return self.chat([{"role": "user", "content": f"Say something about {self.rnd.random()}."}],
                         stream=self.rnd.random() < 0.5)

    def image(self):
        pick = self.rnd.choice(self.images) if self.rnd.random() < 0.7 else \
            data_url(png(self.rnd.randint(16, 96), self.rnd.randint(16, 96), self.rnd.randrange(10**6)))
        return self.chat([{"role": "user", "content": [
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image_url", "image_url": {"url": pick}}]}])

    def tools(self):
        tool = {"type": "function", "function": {
            "name": "get_weather", "description": "Weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                           "required": ["city"]}}}
        return self.chat([{"role": "user", "content": "Weather in Paris?"}], tools=[tool])

    def schema(self):
        schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                                   "age": {"type": "integer"}},
                  "required": ["name", "age"]}
        return self.chat([{"role": "user", "content": "Invent a person."}],
                         response_format={"type": "json_schema",
                                          "json_schema": {"name": "p", "schema": schema}})

    def responses(self):
        r, ok = self.post("/v1/responses", {"input": "Name a colour.", "store": True,
                                            "max_output_tokens": 6})
        if r.status_code != 200:
            return str(r.status_code), ok, r.text
        rid = r.json()["id"]
        r2, ok2 = self.post("/v1/responses", {"input": "Another.", "previous_response_id": rid,
                                              "max_output_tokens": 6})
        g = requests.get(self.url + "/v1/responses/" + rid, timeout=30)
        d = requests.delete(self.url + "/v1/responses/" + rid, timeout=30)
        ok = ok2 and g.status_code == 200 and d.status_code == 200
        return f"{r2.status_code}/{g.status_code}/{d.status_code}", ok, r2.text

    def ws(self):
        from websockets.sync.client import connect
        with connect(self.ws_url, open_timeout=30, close_timeout=5) as ws:
            json.loads(ws.recv(timeout=30))  # hello
            msgs = [{"role": "user", "content": "Count to ten."}]
            ws.send(json.dumps({"type": "generate", "id": "a", "max_tokens": 12, "messages": msgs}))
            ws.send(json.dumps({"type": "generate", "id": "b", "max_tokens": 64,
                                "ignore_eos": True, "messages": msgs}))
            ws.send(json.dumps({"type": "cancel", "id": "b"}))
            done: dict[str, dict] = {}
            deadline = time.monotonic() + 120
            while len(done) < 2 and time.monotonic() < deadline:
                m = json.loads(ws.recv(timeout=120))
                if m.get("type") in ("done", "error"):
                    done[m.get("id", "?")] = m
            ok = done.get("a", {}).get("type") == "done" and "b" in done
            return "done" if ok else "incomplete", ok, json.dumps(done)[:200]

    def stream_then(self, stop_reading_s: float):
        body = {"messages": [{"role": "user", "content": "Write a long story."}], "stream": True,
                "max_tokens": 200, "ignore_eos": True}
        with requests.post(self.url + "/v1/chat/completions", json=body, stream=True,
                           timeout=120) as r:
            if r.status_code != 200:
                return str(r.status_code), r.status_code in (429, 503), r.text
            it = r.iter_content(chunk_size=64)
            next(it)
            time.sleep(stop_reading_s)  # the client stops reading, then hangs up
        return "hung up", True, ""

    def stall(self):
        return self.stream_then(self.rnd.uniform(2, 8))

    def cancel(self):
        return self.stream_then(0)

    def bad(self):
        which = self.rnd.randrange(4)
        if which == 0:
            r, _ = self.post("/v1/chat/completions", None, raw=b'{"messages": [')
        elif which == 1:
            r, _ = self.post("/v1/chat/completions", {"messages": "hi"})
        elif which == 2:  # 5,000 levels: written as text (json.dumps would recurse)
            n = 5000
            deep = '{"type":"array","items":' * n + '{"type":"string"}' + "}" * n
            raw = ('{"messages":[{"role":"user","content":"x"}],"response_format":'
                   '{"type":"json_schema","json_schema":{"name":"d","schema":' + deep + "}}}")
            r, _ = self.post("/v1/chat/completions", None, raw=raw.encode())
        else:  # over the 1 MiB --body-limit: 413
            r, _ = self.post("/v1/chat/completions", None, raw=b'{"x": "' + b"a" * (2 << 20) + b'"}')
        return str(r.status_code), 400 <= r.status_code < 500, r.text


WEIGHTS = {"text": 30, "image": 15, "tools": 8, "schema": 8, "responses": 8, "ws": 8,
           "stall": 4, "cancel": 6, "bad": 6}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def client_loop(mix: Mix, stats: Stats, until: float) -> None:
    kinds, weights = list(WEIGHTS), list(WEIGHTS.values())
    while time.monotonic() < until:
        kind = mix.rnd.choices(kinds, weights)[0]
        try:
            outcome, ok, detail = getattr(mix, kind)()
        except Exception as e:  # a dropped connection, a timeout: unexpected
            outcome, ok, detail = type(e).__name__, False, str(e)
        stats.record(kind, outcome, ok, detail)


def generate_pair(d: Path) -> tuple[Path, Path, Path]:
    text, mmproj, media = d / "vlm-text.gguf", d / "mmproj.gguf", d / "media"
    media.mkdir()
    for args in (["gen-vlm-text", "--from", str(model_path()), "--out", str(text)],
                 ["gen-mmproj", "--type", "idefics3", "--seed", "42", "--n-embd", "576",
                  "--out", str(mmproj)]):
        subprocess.run([str(tern_bin()), *args], check=True, capture_output=True)
    return text, mmproj, media


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=3600, help="seconds of traffic")
    ap.add_argument("--clients", type=int, default=12)
    ap.add_argument("--sample-s", type=float, default=15, help="RSS sampling period")
    ap.add_argument("--drain-s", type=int, default=30, help="tern's --shutdown-grace")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--server-args", default="--kv-dram-mb 256 --mm-cache-mb 64",
                    help="more `tern serve` flags (default: budgets small enough that the caches "
                         "fill within minutes, so RSS must go flat early)")
    ap.add_argument("--json", help="write the report here too")
    a = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="tern-soak-") as tmp:
        text, mmproj, media = generate_pair(Path(tmp))
        images = [data_url(png(64 + 8 * i, 48 + 4 * i, i)) for i in range(6)]
        srv = TernServer("--mmproj", str(mmproj), "--media-dir", str(media),
                         "--shutdown-grace", str(a.drain_s), *a.server_args.split(),
                         model=text).start()
        pid = srv.proc.pid
        stats = Stats()
        t0 = time.monotonic()
        until = t0 + a.duration
        threads = [threading.Thread(target=client_loop, daemon=True,
                                    args=(Mix(srv.url, srv.ws_url, images,
                                              random.Random(a.seed * 1000 + i)), stats, until))
                   for i in range(a.clients)]
        for t in threads:
            t.start()
        rss: list[tuple[float, float]] = []
        while time.monotonic() < until:
            rss.append((round(time.monotonic() - t0), round(rss_mb(pid), 1)))
            print(f"[soak] t={rss[-1][0]:>5.0f}s rss={rss[-1][1]:.0f} MiB "
                  f"requests={sum(sum(c.values()) for c in stats.outcomes.values())} "
                  f"unexpected={len(stats.unexpected)}", flush=True)
            time.sleep(min(a.sample_s, max(0.0, until - time.monotonic())))
        # SIGTERM while the last requests still run: it must drain and exit.
        ts = time.monotonic()
        stats.draining = True
        srv.proc.send_signal(signal.SIGTERM)
        try:
            code = srv.proc.wait(timeout=a.drain_s + 30)
        except subprocess.TimeoutExpired:
            code = None
            srv.proc.kill()
        exit_s = time.monotonic() - ts
        for t in threads:
            t.join(timeout=60)
        log_tail = srv.log()[-2000:]

    warm = [m for t, m in rss if t >= min(300, a.duration / 4)]
    report = {
        "duration_s": a.duration, "clients": a.clients,
        "requests": {k: dict(c) for k, c in stats.outcomes.items()},
        "total": sum(sum(c.values()) for c in stats.outcomes.values()),
        "unexpected": stats.unexpected,
        "rss_mb": rss,
        "rss_after_warmup_mb": {"min": min(warm, default=0), "max": max(warm, default=0),
                                "first": warm[0] if warm else 0, "last": warm[-1] if warm else 0},
        "sigterm_exit_code": code, "sigterm_exit_s": round(exit_s, 2),
    }
    print(json.dumps({k: v for k, v in report.items() if k != "rss_mb"}, indent=1))
    if code != 0:
        print(log_tail)
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=1))
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
