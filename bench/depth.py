#!/usr/bin/env python3
"""Prefill and decode at context depth: tern vs native llama.cpp (llama-bench
with flash attention), same file, same threads, one run, ratios printed.

For each depth D:
  llama-bench -m MODEL -t T -fa 1 -p PP -n TG -d D -r R   (its pp and tg rows)
  tern bench  -m MODEL -t T --pp PP --tg 1 --depth D --batch 1 -r R     (its pp)
  tern bench  -m MODEL -t T --tg TG --depth D --batch 1 -r R            (its tg)
tern runs with the best kernels for this CPU and, with --avx2, also with
TERN_KERNELS=avx2 (the kernels every x86-64-v3 CPU has). The KV types differ
by design: llama.cpp's default f16 cache against tern's default int8-fp8;
--kv-f16 also runs tern with an f16 cache to compare like with like.

    python bench/depth.py --depths 0,2048,4096,8192 [--avx2] [--kv-f16] [--json out.json]

Needs the peer: scripts/setup.sh --peer.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve  # noqa: E402


def llama_bench(args, depth: int) -> dict:
    exe = serve.PEER_BIN / "llama-bench"
    if not exe.exists():
        raise SystemExit(f"{exe} not found: build it with scripts/setup.sh --peer")
    cmd = [str(exe), "-m", args.model, "-t", str(args.threads), "-fa", "1", "-p", str(args.pp),
           "-n", str(args.tg), "-d", str(depth), "-r", str(args.reps), "-o", "json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True,
                         env={**os.environ, "LD_LIBRARY_PATH": str(serve.PEER_BIN)}).stdout
    rows = json.loads(out)
    got = {}
    for r in rows:
        kind = "pp" if r["n_prompt"] > 0 else "tg"
        got[kind] = r["avg_ts"]
    return got


def tern_bench(args, depth: int, env_extra: dict, extra: list[str]) -> dict:
    tern = os.environ.get("TERN_BIN", str(serve.REPO / "build" / "tern"))
    if depth == 0:
        cmd = [tern, "bench", "-m", args.model, "-t", str(args.threads), "--pp", str(args.pp),
               "--tg", str(args.tg), "--batch", "1", "-r", str(args.reps), "--json", *extra]
        j = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True,
                                      env={**os.environ, **env_extra}).stdout.splitlines()[-1])
        return {"pp": j["prefill"]["tokens_per_s"], "tg": j["decode"][0]["tokens_per_s"]}
    # Two runs, as llama-bench does: pp PP timed on top of D context tokens,
    # and tg TG decoded from exactly D context tokens. (One run with --pp
    # would decode from D + PP, a deeper context than llama-bench's tg.)
    def run(cmd):
        out = subprocess.run(cmd, capture_output=True, text=True, check=True,
                             env={**os.environ, **env_extra}).stdout
        return json.loads(out.splitlines()[-1])["depth"][0]
    base = [tern, "bench", "-m", args.model, "-t", str(args.threads), "--depth", str(depth),
            "--batch", "1", "-r", str(args.reps), "--json", *extra]
    pp = run(base + ["--pp", str(args.pp), "--tg", "1"])
    tg = run(base + ["--tg", str(args.tg)])
    return {"pp": pp["pp_tokens_per_s"], "tg": tg["tokens_per_s"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", default=os.environ.get(
        "TERN_MODEL", str(serve.REPO / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf")))
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count())
    ap.add_argument("--depths", default="0,2048,4096,8192")
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=64)
    ap.add_argument("-r", "--reps", type=int, default=1)
    ap.add_argument("--avx2", action="store_true", help="also tern with TERN_KERNELS=avx2")
    ap.add_argument("--kv-f16", action="store_true", help="also tern with --kv-type f16")
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    depths = [int(d) for d in args.depths.split(",")]
    variants = [("tern", {}, [])]
    if args.avx2:
        variants.append(("tern avx2", {"TERN_KERNELS": "avx2"}, []))
    if args.kv_f16:
        variants.append(("tern kv f16", {}, ["--kv-type", "f16"]))
    print(f"# {serve.machine()}; {args.threads} threads; model {Path(args.model).name}; "
          f"pp{args.pp} / tg{args.tg} at each depth; llama-bench -fa 1 (f16 KV)", flush=True)
    rows = []
    for d in depths:
        row = {"depth": d}
        if not args.no_peer:
            row["llama"] = llama_bench(args, d)
        for name, env, extra in variants:
            row[name] = tern_bench(args, d, env, extra)
        rows.append(row)
        parts = [f"d{d}:"]
        for name, _, _ in variants:
            t = row[name]
            if "llama" in row:
                l = row["llama"]
                parts.append(f"{name} pp {t['pp']:.1f} ({t['pp'] / l['pp']:.2f}x) tg {t['tg']:.1f}"
                             f" ({t['tg'] / l['tg']:.2f}x);")
            else:
                parts.append(f"{name} pp {t['pp']:.1f} tg {t['tg']:.1f};")
        if "llama" in row:
            parts.append(f"llama.cpp pp {row['llama']['pp']:.1f} tg {row['llama']['tg']:.1f}")
        print(" ".join(parts), flush=True)
    print(f"# load average after: {os.getloadavg()[0]:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": serve.machine(), "rows": rows},
                                              indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
