#!/usr/bin/env python3
"""The seed paper's multimodal tables (vllm-mlx, Tables 2-6) on this machine,
against `tern serve --mmproj`, and the multi-turn run against
`llama-server --mmproj` on the same files.

Files (made once under --work, reused): the SmolVLM-256M-shaped pair, i.e.
`tern gen-vlm-text` from SmolLM2-135M-Instruct Q4_1 (SmolVLM-256M's text
model is SmolLM2-135M plus 128 special tokens) and a seeded random-weight
real-shape idefics3 projector (`tern gen-mmproj --type idefics3 --shape real`:
SigLIP-B/16 at 512 x 512, 12 layers of 768, pixel shuffle 4 -> 64 rows of
576 per tile; F16). Images are seeded PNG patterns.

Sections (--sections, comma separated):

  multiturn   one image, three turns of one conversation (turn 1 uncached,
              turns 2-3 follow-up questions), on four servers: no cache
              (--no-prefix-cache --mm-cache-mb 0), embeddings only
              (--no-prefix-cache), KV only (--mm-cache-mb 0) and both
              (defaults). Prints per-turn TTFT and latency, the speed-up of
              turns 2-3 over turn 1 (the paper's measure) and over the same
              turn without caches, and checks the greedy text of every
              server is the same turn by turn. This is also the ablation.
  peer        the same conversation against llama-server --mmproj (native
              llama.cpp, scripts/setup.sh --peer), its own cache on (its
              defaults), ratio to tern printed.
  resolution  square images of 224..1024 px on one server (both caches):
              a first request (encode), the same image with a different
              question (KV reuse through the image) and the same image after
              a different system prompt (embedding cache only); embedding
              entry bytes from /metrics and the prompt's image tokens.
  audio       the same measures for sound: bench/mm_audio.py's multiturn,
              peer and itl sections (a 30 s clip on a real-shape Ultravox
              pair; its own --work). Not in the default list.
  video       a clip of 4..64 frames (a `{"type": "video", "frames": [...]}`
              list of PNG paths under --media-dir) asked twice with different
              questions; speed-up of the repeated query. See VIDEO below.

VIDEO: with the real-shape file every frame is upsampled to 2048 px and cut
into 16 tiles + a global one (1,100 tokens a frame), so more than 7 frames
overflow the 8,192-token context; SmolVLM's video processor instead keeps
a frame at 512 px. The video section therefore uses a copy of the projector
whose clip.vision.preproc_image_size is 512 (one tile + the global image:
~135 tokens and 2 encoder passes a frame) and a copy of the text model whose
context_length is 16,384 (64 frames need ~8,700 tokens; positions past 8,192
are beyond what SmolLM2 was trained on: timings are real, the text is not
meaningful, and it is still compared cached vs uncached).

Everything is streamed (SSE) with temperature 0, ignore_eos and max_tokens
fixed, so every turn decodes the same number of tokens; TTFT and latency are
measured at the client. Standard library and `requests` only.

    .venv/bin/python bench/mm_paper.py --threads 2                  # all sections
    .venv/bin/python bench/mm_paper.py --sections multiturn,peer --json out.json
    .venv/bin/python bench/mm_paper.py --quick   # resolutions 224,512,1024; video 4,16,32
    .venv/bin/python bench/mm_paper.py --pair gemma3 --sections multiturn --ablation none,both
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import re
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve import PEER_BIN, REPO, Proc, free_port, machine  # noqa: E402

TERN = os.environ.get("TERN_BIN", str(REPO / "build" / "tern"))
SMOLLM2 = REPO / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA3 = REPO / "models" / "gemma-3-270m-it-Q4_K_M.gguf"
QUESTIONS = ["Describe the picture.", "What colours does it have?", "Is there any text in it?"]
ABLATION = [("none", ["--no-prefix-cache", "--mm-cache-mb", "0"]),
            ("embeddings only", ["--no-prefix-cache"]),
            ("KV only", ["--mm-cache-mb", "0"]),
            ("both", [])]


# --- generated inputs ----------------------------------------------------------

def png(w: int, h: int, seed: int) -> bytes:
    """An RGB PNG of a seeded smooth pattern (compresses like a photo's gradients)."""
    rows = b"".join(b"\x00" + bytes(((x * (seed % 7 + 1) + y * 3 + seed * 41) >> (c + 1)) & 0xFF
                                    for x in range(w) for c in range(3)) for y in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows, 6)) + chunk(b"IEND", b""))


def data_url(b: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(b).decode()


def patch_gguf_u32(src: Path, dst: Path, key_suffix: str, value: int):
    """Copies a GGUF file, setting the u32 metadata value whose key ends with
    key_suffix (in place: same size, so tensor offsets are unchanged)."""
    buf = bytearray(src.read_bytes())
    assert buf[:4] == b"GGUF", src
    off = 8
    _, n_kv = struct.unpack_from("<QQ", buf, off)
    off += 16
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def skip(t: int, o: int) -> int:
        if t == 8:
            return o + 8 + struct.unpack_from("<Q", buf, o)[0]
        if t == 9:
            et, n = struct.unpack_from("<IQ", buf, o)
            o += 12
            if et in sizes:
                return o + n * sizes[et]
            for _ in range(n):
                o = skip(et, o)
            return o
        return o + sizes[t]

    for _ in range(n_kv):
        klen = struct.unpack_from("<Q", buf, off)[0]
        key = buf[off + 8:off + 8 + klen].decode()
        off += 8 + klen
        t = struct.unpack_from("<I", buf, off)[0]
        off += 4
        if key.endswith(key_suffix):
            if t != 4:
                raise SystemExit(f"{src}: {key} is type {t}, not u32")
            struct.pack_into("<I", buf, off, value)
            dst.write_bytes(bytes(buf))
            return
        off = skip(t, off)
    raise SystemExit(f"{src}: no key ending in {key_suffix}")


def make_gemma3_files(work: Path) -> dict:
    """The Gemma-3-shaped pair: Gemma 3 270M and a real-shape gemma3 projector of
    width 640 (SigLIP so400m/14 at 896 x 896 -> 256 rows; F16, 846 MB)."""
    mmproj = work / "mmproj-gemma3-real-640.gguf"
    if not mmproj.exists():
        subprocess.run([TERN, "gen-mmproj", "--type", "gemma3", "--shape", "real", "--seed", "1",
                        "--n-embd", "640", "--out", str(mmproj)], check=True)
    return {"text": str(GEMMA3), "mmproj": str(mmproj)}


def make_files(work: Path) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    f = {"text": work / "smolvlm-256m-text.gguf", "mmproj": work / "mmproj-smolvlm-256m-real.gguf",
         "text16k": work / "smolvlm-256m-text-ctx16k.gguf",
         "mmproj512": work / "mmproj-smolvlm-256m-real-frame512.gguf", "media": work / "media"}
    f["media"].mkdir(exist_ok=True)
    if not f["text"].exists():
        subprocess.run([TERN, "gen-vlm-text", "--from", str(SMOLLM2), "--out", str(f["text"])],
                       check=True)
    if not f["mmproj"].exists():
        subprocess.run([TERN, "gen-mmproj", "--type", "idefics3", "--shape", "real", "--seed", "1",
                        "--out", str(f["mmproj"])], check=True)
    if not f["text16k"].exists():
        patch_gguf_u32(f["text"], f["text16k"], ".context_length", 16384)
    if not f["mmproj512"].exists():
        patch_gguf_u32(f["mmproj"], f["mmproj512"], "clip.vision.preproc_image_size", 512)
    return {k: str(v) for k, v in f.items()}


# --- servers and requests --------------------------------------------------------

def start_tern(model: str, mmproj: str, threads: int, ctx: int, extra: list[str],
               media: str | None = None, max_batch: int = 1) -> Proc:
    port = free_port()
    cmd = [TERN, "--log-level", "warn", "serve", "-m", model, "--mmproj", mmproj, "--port",
           str(port), "-t", str(threads), "-c", str(ctx), "--max-batch", str(max_batch), *extra]
    if media:
        cmd += ["--media-dir", media]
    return Proc("tern", cmd, port)


def start_llama_server(model: str, mmproj: str, threads: int, ctx: int) -> Proc:
    exe = PEER_BIN / "llama-server"
    if not exe.exists():
        raise SystemExit(f"{exe} not found: build it with scripts/setup.sh --peer")
    port = free_port()
    cmd = [str(exe), "-m", model, "--mmproj", mmproj, "--port", str(port), "-t", str(threads),
           "-np", "1", "-c", str(ctx), "--no-webui", "--temp", "0"]
    return Proc("llama-server", cmd, port, {**os.environ, "LD_LIBRARY_PATH": str(PEER_BIN)})


def sse_events(r: requests.Response):
    """The JSON events of a server-sent-events response, up to [DONE]."""
    for line in r.iter_lines():
        if line == b"data: [DONE]":
            return
        if line.startswith(b"data: "):
            yield json.loads(line[6:])


def chat(url: str, messages: list[dict], max_tokens: int, timeout: float = 3600) -> dict:
    """One streamed greedy chat; TTFT (first content byte) and latency at the client."""
    body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "ignore_eos": True, "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    ttft, pieces, timings, usage = None, [], {}, {}
    with requests.post(url + "/v1/chat/completions", json=body, stream=True,
                       timeout=timeout) as r:
        if r.status_code != 200:
            raise RuntimeError(f"HTTP {r.status_code}: {r.text[:500]}")
        for ev in sse_events(r):
            pieces += [(ch.get("delta") or {}).get("content") or "" for ch in ev.get("choices") or []]
            if ttft is None and any(pieces):
                ttft = time.perf_counter() - t0
            timings = ev.get("timings") or timings
            usage = ev.get("usage") or usage
    text = "".join(pieces)
    lat = time.perf_counter() - t0
    return {"ttft": ttft if ttft is not None else lat, "latency": lat, "text": text,
            "timings": timings, "usage": usage}


def metric(url: str, name: str) -> float:
    for line in requests.get(url + "/metrics", timeout=30).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


def conversation(url: str, image_url: str, turns: int, max_tokens: int, log,
                 media: dict | None = None, questions: list[str] = QUESTIONS,
                 kind: str = "image") -> list[dict]:
    """One conversation: the media part (an image_url of image_url unless
    given) in turn 1, a question a turn; timings of `kind` (image / audio) logged."""
    part = media or {"type": "image_url", "image_url": {"url": image_url}}
    messages, out = [], []
    for k in range(turns):
        content = [part] if k == 0 else []
        content.append({"type": "text", "text": questions[k % len(questions)]})
        messages.append({"role": "user", "content": content})
        r = chat(url, messages, max_tokens)
        messages.append({"role": "assistant", "content": r["text"]})
        t = r["timings"]
        log(f"    turn {k + 1}: ttft {r['ttft']:.3f} s, latency {r['latency']:.3f} s, "
            f"prompt_n {t.get('prompt_n')}, cache_n {t.get('cache_n')}, {kind}_n "
            f"{t.get(kind + '_n')}, {kind}_cache_hits {t.get(kind + '_cache_hits')}, "
            f"{kind}_encode_ms {t.get(kind + '_encode_ms')}")
        out.append(r)
    return out


def per_server(f: dict, threads: int, configs, fn, log) -> dict:
    """fn(url) on a fresh tern server for each (name, flags) in configs."""
    runs = {}
    for name, flags in configs:
        log(f"  server: {name} {' '.join(flags)}")
        srv = start_tern(f["text"], f["mmproj"], threads, 8192, flags)
        try:
            runs[name] = fn(srv.url)
        finally:
            srv.stop()
    return runs


# --- sections --------------------------------------------------------------------

def sec_multiturn(a, f, res, log):
    img = data_url(png(a.image_px, a.image_px, seed=7))
    runs = per_server(f, a.threads, [(n, fl) for n, fl in ABLATION if n in a.ablation],
                      lambda url: conversation(url, img, a.turns, a.max_tokens, log), log)
    res["multiturn"] = runs
    base = runs.get("none") or next(iter(runs.values()))
    same = all(runs[n][k]["text"] == base[k]["text"] for n in runs for k in range(a.turns))
    res["multiturn_same_text"] = same
    print(f"\nMulti-turn, one {a.image_px}x{a.image_px} image, {a.max_tokens} tokens a turn "
          "(TTFT / latency in s; x: turn 1 / turn k of the same server, and no-cache / this)")
    print("| caches | " + " | ".join(f"turn {k + 1}" for k in range(a.turns)) +
          " | turn 2 speed-up | turn 3 speed-up | vs no cache, turn 2 / 3 |")
    print("|---" * (a.turns + 4) + "|")
    for name, r in runs.items():
        cells = [f"{t['ttft']:.2f} / {t['latency']:.2f}" for t in r]
        sp = [f"{r[0]['latency'] / r[k]['latency']:.1f}x (TTFT {r[0]['ttft'] / r[k]['ttft']:.1f}x)"
              for k in range(1, min(3, a.turns))]
        vs = [f"{base[k]['latency'] / r[k]['latency']:.1f}x" for k in range(1, min(3, a.turns))]
        print(f"| {name} | " + " | ".join(cells + sp) + " | " + " / ".join(vs) + " |")
    print(f"greedy text identical on all {len(runs)} servers, turn by turn: {same}")


def sec_peer(a, f, res, log):
    img = data_url(png(a.image_px, a.image_px, seed=7))
    log("  server: llama-server --mmproj (its defaults: prompt cache on)")
    srv = start_llama_server(f["text"], f["mmproj"], a.threads, 8192)
    try:
        runs = conversation(srv.url, img, a.turns, a.max_tokens, log)
    finally:
        srv.stop()
    res["peer"] = runs
    print("\nllama-server --mmproj, same conversation (TTFT / latency in s)")
    print("| server | " + " | ".join(f"turn {k + 1}" for k in range(a.turns)) + " |")
    print("|---" * (a.turns + 1) + "|")
    print("| llama-server | " + " | ".join(f"{t['ttft']:.2f} / {t['latency']:.2f}" for t in runs)
          + " |")
    tern_runs = res.get("multiturn", {}).get("both")
    if tern_runs:
        print("| tern (both caches) | " + " | ".join(
            f"{t['ttft']:.2f} / {t['latency']:.2f}" for t in tern_runs) + " |")
        print("| llama-server / tern latency | " + " | ".join(
            f"{p['latency'] / t['latency']:.1f}x" for p, t in zip(runs, tern_runs)) + " |")


def sec_resolution(a, f, res, log):
    srv = start_tern(f["text"], f["mmproj"], a.threads, 8192, [])
    rows = []
    try:
        for px in a.resolutions:
            img = data_url(png(px, px, seed=px))
            bytes0 = metric(srv.url, 'tern_mm_cache_bytes{tier="dram"}')
            user = lambda q: [{"role": "user", "content": [  # noqa: E731
                {"type": "image_url", "image_url": {"url": img}}, {"type": "text", "text": q}]}]
            first = chat(srv.url, user(QUESTIONS[0]), a.max_tokens)
            entry = metric(srv.url, 'tern_mm_cache_bytes{tier="dram"}') - bytes0
            kv = chat(srv.url, user(QUESTIONS[1]), a.max_tokens)
            emb = chat(srv.url, [{"role": "system", "content": f"Resolution {px}."}] +
                       user(QUESTIONS[1]), a.max_tokens)
            row = {"px": px, "first": first, "kv": kv, "emb": emb, "entry_bytes": entry,
                   "prompt_tokens": first["usage"].get("prompt_tokens")}
            log(f"    {px}px: first {first['latency']:.2f} s, KV reuse {kv['latency']:.3f} s, "
                f"embeddings only {emb['latency']:.3f} s, entry {entry / 1e6:.2f} MB, "
                f"image_cache_hits {emb['timings'].get('image_cache_hits')}")
            rows.append(row)
    finally:
        srv.stop()
    res["resolution"] = rows
    print("\nResolution (square PNG; latency in s; speed-up = first / repeated)")
    print("| image | prompt tokens | first (encode) | same image, new question (KV) | speed-up |"
          " new system prompt (embedding cache) | speed-up | cache entry |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['px']}x{r['px']} | {r['prompt_tokens']} | {r['first']['latency']:.2f} | "
              f"{r['kv']['latency']:.3f} | {r['first']['latency'] / r['kv']['latency']:.1f}x | "
              f"{r['emb']['latency']:.3f} | {r['first']['latency'] / r['emb']['latency']:.1f}x | "
              f"{r['entry_bytes'] / 1e6:.2f} MB |")


def sec_video(a, f, res, log):
    media = Path(f["media"])
    srv = start_tern(f["text16k"], f["mmproj512"], a.threads, 16384, [], media=str(media))
    rows = []
    try:
        for n in a.frames:
            clip = media / f"clip{n}"
            clip.mkdir(exist_ok=True)
            names = []
            for k in range(n):
                p = clip / f"{k:04d}.png"
                if not p.exists():
                    p.write_bytes(png(a.frame_px, a.frame_px, seed=1000 * n + k))
                names.append(f"clip{n}/{k:04d}.png")
            user = lambda q: [{"role": "user", "content": [  # noqa: E731
                {"type": "video", "frames": names}, {"type": "text", "text": q}]}]
            first = chat(srv.url, user(QUESTIONS[0]), a.max_tokens)
            again = chat(srv.url, user(QUESTIONS[1]), a.max_tokens)
            log(f"    {n} frames: first {first['latency']:.2f} s (prompt "
                f"{first['usage'].get('prompt_tokens')} tokens), repeated {again['latency']:.3f} s")
            rows.append({"frames": n, "first": first, "again": again,
                         "prompt_tokens": first["usage"].get("prompt_tokens")})
    finally:
        srv.stop()
    res["video"] = rows
    print(f"\nVideo, {a.frame_px}x{a.frame_px} frames, repeated query on the same clip (latency in s)")
    print("| frames | prompt tokens | first query | repeated query | speed-up | TTFT speed-up |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['frames']} | {r['prompt_tokens']} | {r['first']['latency']:.2f} | "
              f"{r['again']['latency']:.3f} | {r['first']['latency'] / r['again']['latency']:.1f}x | "
              f"{r['first']['ttft'] / r['again']['ttft']:.1f}x |")


def sec_audio(a, f, res, log):
    import mm_audio  # imports this module: loaded only when asked for
    ap = argparse.Namespace(type="ultravox", threads=a.threads, turns=a.turns, seconds=30.0,
                            max_tokens=a.max_tokens, streams=8, tokens=100)
    af = mm_audio.make_files(Path("/tmp/tern-mm-audio"), ap.type)
    wav = mm_audio.wav_bytes(ap.seconds, seed=7)
    res["audio"] = {}
    mm_audio.sec_multiturn(ap, af, wav, res["audio"], log)
    mm_audio.sec_peer(ap, af, wav, res["audio"], log)
    mm_audio.sec_itl(ap, af, res["audio"], log)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sections", default="multiturn,peer,resolution,video")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--turns", type=int, default=3)
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument("--image-px", type=int, default=512, help="the multi-turn image's side")
    p.add_argument("--resolutions", default="224,384,512,768,1024")
    p.add_argument("--frames", default="4,8,16,32,64")
    p.add_argument("--frame-px", type=int, default=256)
    p.add_argument("--pair", choices=["smolvlm", "gemma3"], default="smolvlm",
                   help="gemma3: the Gemma-3-shaped pair for multiturn/peer/resolution")
    p.add_argument("--ablation", default="none,embeddings only,KV only,both",
                   help="which multiturn servers to run (comma separated)")
    p.add_argument("--quick", action="store_true",
                   help="resolutions 224,512,1024 and clips of 4,16,32 frames")
    p.add_argument("--work", default="/tmp/tern-mm-paper", help="generated files (kept)")
    p.add_argument("--json", help="write every measurement here")
    a = p.parse_args()
    if a.quick:
        a.resolutions, a.frames = "224,512,1024", "4,16,32"
    a.resolutions = [int(x) for x in a.resolutions.split(",")]
    a.frames = [int(x) for x in a.frames.split(",")]
    a.ablation = a.ablation.split(",")

    def log(s):
        print(s, file=sys.stderr, flush=True)

    print(f"machine: {machine()}; threads {a.threads}")
    f = make_files(Path(a.work))
    if a.pair == "gemma3":
        f.update(make_gemma3_files(Path(a.work)))
    res = {"machine": machine(), "args": {k: v for k, v in vars(a).items()}}
    for s in a.sections.split(","):
        t0 = time.perf_counter()
        log(f"== {s} (load average {os.getloadavg()[0]:.2f})")
        {"multiturn": sec_multiturn, "peer": sec_peer, "resolution": sec_resolution,
         "video": sec_video, "audio": sec_audio}[s](a, f, res, log)
        log(f"== {s} done in {time.perf_counter() - t0:.0f} s "
            f"(load average {os.getloadavg()[0]:.2f})")
        if a.json:
            Path(a.json).write_text(json.dumps(res, indent=1))
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
