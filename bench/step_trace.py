#!/usr/bin/env python3
"""Reads a `tern --log-level trace serve` log and shows how the scheduler
composed its steps while a long prompt was prefilled beside decoding
streams: per depth band of the prompt, the chunk sizes, the step times, and
each step's time over the decode-only steps (probes) around it, which
cancels the machine's load (what the itl-slack budget holds to <= slack).
With --split, where a whole run's time went instead (any load, e.g. the
heavy mix of bench/serve.py): prompt steps (at least --big prompt tokens),
the mixed steps of streams with a few prompt tokens, decode-only steps, and
the pauses of passes that yield. Entries marked "v" in the log are a
decoding sequence's verify entry (its token and guesses), not a prompt.

    TERN_LOG_LEVEL=trace python bench/fairness.py --tern   # prints the log's path
    python bench/step_trace.py /tmp/serve-tern-XXXX.log [--min-prompt 1000]
    python bench/step_trace.py /tmp/serve-tern-XXXX.log --split
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys

PAUSE = re.compile(r"yield: decode=(\d+) prompts=(\d+) tokens=(\d+) ms=([\d.]+)")
STEP = re.compile(r"step decode=(\d+) ctx=(\d+) prefill=\[(.*)\] ms=([\d.]+) gap=([\d.]+)"
                  r"(?: model: decode=([\d.]+) a=([\d.]+) b=([\d.]+) c=([\d.]+))?")


def parse(path: str, pauses: list | None = None) -> list[dict]:
    steps = []
    for line in open(path, errors="replace"):
        if pauses is not None and (p := PAUSE.search(line)):
            pauses.append(float(p[4]))
            continue
        m = STEP.search(line)
        if not m:
            continue
        entries = m[3].split()
        chunks = [tuple(map(int, p.split("@"))) for p in entries if not p.startswith("v")]
        verify = [tuple(map(int, p[1:].split("@"))) for p in entries if p.startswith("v")]
        steps.append({"decodes": int(m[1]), "chunks": chunks, "verify": verify,
                      "ms": float(m[4]),
                      "gap": float(m[5]), "model_decode": float(m[6] or 0),
                      "theta": tuple(float(x) for x in m.group(7, 8, 9)) if m[7] else None})
    return steps


def pct(v: list[float], p: float) -> float:
    v = sorted(v)
    return v[min(len(v) - 1, int(p / 100 * len(v)))] if v else float("nan")


def split(steps: list[dict], pauses: list[float], big: int) -> None:
    rows = {"prompt steps": [0, 0.0, 0, 0], "mixed steps": [0, 0.0, 0, 0],
            "decode-only steps": [0, 0.0, 0, 0]}
    for s in steps:
        prompt = sum(n for n, _ in s["chunks"])
        guessed = sum(n for n, _ in s["verify"])
        key = ("prompt steps" if prompt >= big else
               "mixed steps" if prompt or guessed else "decode-only steps")
        r = rows[key]
        r[0] += 1
        r[1] += s["ms"]
        r[2] += prompt
        r[3] += s["decodes"] + guessed
    total = sum(r[1] for r in rows.values()) + sum(pauses)
    print(f"{'':18} {'steps':>6} {'s':>7} {'share':>6} {'prompt tok':>10} {'ms/prompt tok':>13} "
          f"{'decode+verify tok':>17}")
    for k, (n, ms, prompt, dec) in rows.items():
        per = f"{ms / prompt:13.2f}" if prompt else f"{'-':>13}"
        print(f"{k:18} {n:6d} {ms / 1000:7.2f} {ms / total:6.1%} {prompt:10d} {per} {dec:17d}")
    print(f"{'pauses':18} {len(pauses):6d} {sum(pauses) / 1000:7.2f} {sum(pauses) / total:6.1%}")
    print(f"{'all':18} {'':6} {total / 1000:7.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log")
    ap.add_argument("--min-prompt", type=int, default=1000,
                    help="a chunk this deep (depth + n) belongs to the long prompt")
    ap.add_argument("--band", type=int, default=512)
    ap.add_argument("--split", action="store_true", help="the whole run's time by kind of step")
    ap.add_argument("--big", type=int, default=100,
                    help="--split: a step with this many prompt tokens is a prompt step")
    args = ap.parse_args()
    if args.split:
        pauses: list[float] = []
        steps = parse(args.log, pauses)
        if not steps:
            print("no steps in this log (run tern with TERN_LOG_LEVEL=trace)")
            return 1
        split(steps, pauses, args.big)
        return 0
    steps = parse(args.log)
    deep = [i for i, s in enumerate(steps)
            if s["decodes"] and any(n + d >= args.min_prompt for n, d in s["chunks"])]
    if not deep:
        print("no long prefill beside decodes in this log")
        return 1
    phase = steps[deep[0] - 1:deep[-1] + 1]
    probes = [i for i, s in enumerate(phase) if s["decodes"] and not s["chunks"]]
    print(f"{len(phase)} steps while the long prompt was prefilled, {len(probes)} decode-only")

    def around(i: int) -> float:  # median of the decode-only steps within 16 of step i
        near = [phase[j]["ms"] for j in probes if abs(j - i) <= 16]
        return statistics.median(near) if near else float("nan")

    bands: dict[int, list] = {}
    for i, s in enumerate(phase):
        long = [(n, d) for n, d in s["chunks"] if n + d >= args.min_prompt or d > 0]
        if not s["decodes"] or not long:
            continue
        n, d = max(long, key=lambda c: c[1])
        bands.setdefault(d // args.band * args.band, []).append((n, s["ms"], s["ms"] / around(i)))
    print(f"{'depth':>6} {'steps':>5} {'chunk p50':>9} {'ms p50':>7} {'ms p99':>7} "
          f"{'x decode p50':>12} {'p90':>5} {'p99':>5}")
    for lo in sorted(bands):
        v = bands[lo]
        r = [x[2] for x in v if x[2] == x[2]]
        print(f"{lo:6d} {len(v):5d} {statistics.median(x[0] for x in v):9.0f} "
              f"{statistics.median(x[1] for x in v):7.1f} {pct([x[1] for x in v], 99):7.1f} "
              f"{pct(r, 50):12.2f} {pct(r, 90):5.2f} {pct(r, 99):5.2f}")
    gaps = [s["gap"] for s in phase]
    print(f"engine thread between steps: p50 {pct(gaps, 50):.2f} ms, p99 {pct(gaps, 99):.2f} ms, "
          f"max {max(gaps):.2f} ms")
    last = next((s["theta"] for s in reversed(phase) if s["theta"]), None)
    if last:
        print("last fit (ms): a=%.3f/token b=%.3f/token/1024 deep c=%.3f/chunk/1024 deep" % last)
    return 0


if __name__ == "__main__":
    sys.exit(main())
