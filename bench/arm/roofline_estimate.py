#!/usr/bin/env python3
"""Decode speed on ARM boards, PREDICTED (not measured): single-stream decode
reads every repacked weight once per token, plus the sequence's KV, so

    tokens/s <= DRAM bandwidth / (weight bytes + KV bytes per token x context)

The byte counts are tern's own (`tern bench --json`: the packed weights, in the
layout every ISA shares, and the KV cache's bytes per token at the default
int8-keys / fp8-values type); the bandwidths are the memory systems' published
peaks. Real decode reaches some fraction of the peak: the AVX2 machine here
streams the GEMV at ~85-95 % of its measured read bandwidth (bench/RESULTS.md),
and measured STREAM-like read bandwidth is itself typically 60-80 % of the
published peak; the table prints the bound at the peak and at 70 % of it.

    bench/arm/roofline_estimate.py [--tern build/tern] [--ctx 0,2048] [MODEL...]
"""
import argparse
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Published peak DRAM bandwidths (GB/s) of the memory each machine ships with.
MACHINES = [
    ("Raspberry Pi 5 (Cortex-A76, LPDDR4X-4267, 32-bit)", 17.1),
    ("Jetson Orin Nano 8GB (Cortex-A78AE, LPDDR5, 128-bit)", 68.0),
    ("Apple M1 (LPDDR4X-4266, 128-bit)", 68.3),
    ("Apple M2 (LPDDR5-6400, 128-bit)", 100.0),
    ("AWS Graviton 3 (DDR5-4800, 8 channels, whole socket)", 307.2),
]
EFFICIENCY = 0.7


def tern_bytes(tern, model):
    out = subprocess.run([tern, "bench", "-m", model, "--depth", "32", "--tg", "1", "--pp", "0", "-r", "1",
                          "--json"], capture_output=True, text=True, check=True).stdout
    j = json.loads([l for l in out.splitlines() if l.startswith("{")][-1])
    return j["weight_bytes"], j["kv"]["bytes_per_token"], j["model"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tern", default=os.path.join(ROOT, "build", "tern"))
    ap.add_argument("--ctx", default="0,2048")
    ap.add_argument("models", nargs="*", default=[os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"),
                                                  os.path.join(ROOT, "models", "gemma-3-270m-it-Q4_K_M.gguf")])
    a = ap.parse_args()
    ctxs = [int(c) for c in a.ctx.split(",")]
    print(f"PREDICTED single-stream decode tokens/s (bound at the published peak / at {EFFICIENCY:.0%} of it)")
    for m in a.models:
        if not os.path.exists(m):
            continue
        wb, kvb, name = tern_bytes(a.tern, m)
        print(f"\n{os.path.basename(m)}: {wb / 2**20:.1f} MiB of packed weights, KV {kvb} bytes/token")
        hdr = f"{'machine':<56}{'GB/s':>7}" + "".join(f"{'ctx ' + str(c):>16}" for c in ctxs)
        print(hdr)
        for label, bw in MACHINES:
            cells = []
            for c in ctxs:
                per_token = wb + kvb * c
                cells.append(f"{bw * 1e9 / per_token:>8.0f} / {EFFICIENCY * bw * 1e9 / per_token:<5.0f}")
            print(f"{label:<56}{bw:>7.1f}" + "".join(f"{x:>16}" for x in cells))


if __name__ == "__main__":
    main()
