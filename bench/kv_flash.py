#!/usr/bin/env python3
"""Decode speed with most of the KV cache on flash, on the real engine and model.

    .venv/bin/python bench/kv_flash.py [--tern build/tern] [-m MODEL] [--depth 4096]
                                       [--tg 128] [--rounds 3] [--dram-fraction 0.25]
                                       [--flash-dir DIR] [--alt-dir /dev/shm/tern-kv]
                                       [--drop-cache] [--json-out FILE] [--md-out FILE]

Every configuration runs `tern bench --depth D --tg T --batch 1 -r 1 --json` in
its own process: prefill D tokens, one untimed greedy step, then T timed greedy
steps (the argmax is fed back, so outputs can be compared). Configurations:

  all in DRAM       the default 1 GiB KV budget, flash tier off
  all in DRAM, d256 the same at a shallow depth: how much of a step is attention
  flash p0/p1/p2    a DRAM arena holding ~25% of the context's blocks, the rest
                    spilled to the flash folder, read 0/1/2 layers ahead
  alt dir p1        the same with the spill file on --alt-dir (another filesystem)
  cold p1           (--drop-cache) the spill file dropped from the page cache
                    before every decode step, so reads go to the device

Budget arithmetic: a block is 32 tokens of every layer; the DRAM budget
(--kv-dram-mb) is split into the flash staging buffers and the block arena.
Staging holds (prefetch + 1) layer slices of every block streamed from flash,
and so bounds how many blocks may live on flash. With PagedKv's default (a
16th of the budget) that is 2/(prefetch + 1) times the arena's blocks for a
30-layer model: the arena must hold at least 1/3, 1/2, 3/5 of the context at
prefetch 0, 1, 2. A 25% arena therefore needs an explicit staging budget
(--kv-staging-mb). The script sizes staging for the largest
prefetch tried and picks the DRAM budget whose arena is closest to the
wanted fraction of the context's blocks; all flash rows use the same budget.

Rounds run every configuration once, in order, so a noisy stretch of a shared
machine hits all of them. The table reports best and median tokens/s (over
all timed steps), tokens/s from each run's median step (robust to bursts of
load from other processes), and the median over rounds of the ratio to the
all-DRAM run of the same round, both ways.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 1 << 20


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run_bench(a, extra, depth=None, tg=None):
    """One `tern bench --depth` process; returns (JSON or None, error text)."""
    cmd = [a.tern, "bench", "--depth", str(depth or a.depth), "--tg", str(tg or a.tg), "--batch", "1",
           "-r", "1", "--json", "--chunk", str(a.chunk)] + (["-m", a.model] if a.model else []) + \
          (["-t", str(a.threads)] if a.threads else []) + extra
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode != 0 or not lines:
        err = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        return None, err, cmd
    j = json.loads(lines[-1])
    j["wall_s"] = time.time() - t0
    return j, "", cmd


def staging_eff(staging_bytes, sets, slice_bytes):
    """Staging bytes and stream capacity as PagedKv sizes them (kv/paged_kv.cpp)."""
    cap = max(1, staging_bytes // (sets * slice_bytes))
    return cap * sets * slice_bytes, cap


def plan_budget(a, kv):
    """DRAM and staging MiB for an arena of ~dram_fraction of the context's blocks."""
    bt, block, slc = kv["block_tokens"], kv["block_bytes"], kv["slice_bytes"]
    ctx_tokens = a.depth + 1 + a.tg
    blocks = math.ceil(ctx_tokens / bt)
    want = max(1, round(blocks * a.dram_fraction))
    sets_max = max(a.prefetch) + 1
    # Staging must stream every block that is not in the arena, for the largest prefetch.
    stream = blocks - want + 2
    staging_mb = math.ceil(stream * sets_max * slc / MIB)
    best = None
    for dram_mb in range(staging_mb + 1, staging_mb + 1 + math.ceil(blocks * block / MIB)):
        frames = min((dram_mb * MIB - staging_eff(staging_mb * MIB, s, slc)[0]) // block for s in
                     (p + 1 for p in a.prefetch))
        if best is None or abs(frames - want) < abs(best[1] - want):
            best = (dram_mb, frames)
    dram_mb, frames = best
    caps = {p: staging_eff(staging_mb * MIB, p + 1, slc)[1] for p in a.prefetch}
    # PagedKv's default staging (dram/16) at this budget: what it could stream.
    default_caps = {p: staging_eff(dram_mb * MIB // 16, p + 1, slc)[1] for p in a.prefetch}
    # A prefill chunk's new blocks must all sit in the arena at once (they are
    # being written), next to the partial block before them.
    chunk = min(512, max(bt, (frames // 2) * bt))
    return {"chunk": chunk, "context_tokens": ctx_tokens, "context_blocks": blocks, "kv_mib": ctx_tokens * kv["bytes_per_token"] / MIB,
            "want_frames": want, "dram_mb": dram_mb, "staging_mb": staging_mb, "frames": frames,
            "stream_caps": caps, "default_staging_caps": default_caps, "block_bytes": block, "slice_bytes": slc}


def explain(plan, a):
    p = plan
    lines = [
        f"context: depth {a.depth} + 1 warm-up + {a.tg} timed tokens = {p['context_tokens']} tokens = "
        f"{p['context_blocks']} blocks of {p['block_bytes']} B ({p['kv_mib']:.1f} MiB of KV)",
        f"wanted arena: {a.dram_fraction:.0%} of {p['context_blocks']} blocks = {p['want_frames']} blocks; "
        f"a streamed block needs (prefetch + 1) x {p['slice_bytes']} B of staging (one layer slice per set)",
        f"budget: --kv-dram-mb {p['dram_mb']} --kv-staging-mb {p['staging_mb']}: arena "
        f"{p['frames']} blocks ({p['frames'] * p['block_bytes'] / MIB:.1f} MiB), staging streams up to "
        + ", ".join(f"{c} blocks at prefetch {k}" for k, c in p["stream_caps"].items()),
        f"prefill chunk: {p['chunk']} tokens (a chunk's new blocks must fit in the arena together)",
        f"DRAM in all (arena + staging): {p['dram_mb']} MiB = {p['dram_mb'] / p['kv_mib']:.0%} of the context's KV",
        "with PagedKv's default staging (dram/16) the same budget could stream only "
        + ", ".join(f"{c} blocks at prefetch {k}" for k, c in p["default_staging_caps"].items())
        + f" of the {p['context_blocks'] - p['frames']} needed: KvFullError",
    ]
    return lines


def summarize(name, runs, base_runs):
    ok = [r for r in runs if r is not None]
    if not ok:
        return None
    d = [r["depth"][0] for r in ok]
    tps = [x["tokens_per_s"] for x in d]
    med = [1000 / x["step_ms_median"] for x in d]
    pairs = [(r["depth"][0], b["depth"][0]) for r, b in zip(runs, base_runs) if r is not None and b is not None]
    ratios = [x["tokens_per_s"] / y["tokens_per_s"] for x, y in pairs]
    ratios_med = [y["step_ms_median"] / x["step_ms_median"] for x, y in pairs]
    n = d[0]["tokens"]
    kv = [x["kv"] for x in d]
    return {
        "name": name, "n": len(ok), "best": max(tps), "median": statistics.median(tps), "all": tps,
        "median_step_tps": statistics.median(med), "all_median_step_tps": med,
        "ratio_median": statistics.median(ratios) if ratios else None,
        "ratio_median_step": statistics.median(ratios_med) if ratios_med else None,
        "ratios": ratios, "ratios_median_step": ratios_med,
        "ms_step_best": 1000 / max(tps),
        "stalls_per_step": statistics.median(k["decode_prefetch_stalls"] / n for k in kv),
        "stall_ms_per_step": statistics.median(k["decode_prefetch_stall_ms"] / n for k in kv),
        "read_mib_per_step": statistics.median(k["decode_bytes_prefetched"] / n / MIB for k in kv),
        "dram_blocks": kv[-1]["dram_used_blocks"], "flash_blocks": kv[-1]["flash_live_blocks"],
        "spilled_decode": kv[-1]["decode_blocks_spilled"],
        "greedy": sorted({x["greedy_fnv1a"] for x in d}),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tern", default=os.path.join(ROOT, "build", "tern"))
    ap.add_argument("-m", "--model", default=None)
    ap.add_argument("-t", "--threads", type=int, default=0)
    ap.add_argument("--depth", type=int, default=4096)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dram-fraction", type=float, default=0.25)
    ap.add_argument("--prefetch", type=lambda s: [int(x) for x in s.split(",")], default=[0, 1, 2])
    ap.add_argument("--flash-dir", default=None, help="spill folder (default: tern's, /tmp/tern-kv)")
    ap.add_argument("--alt-dir", default="/dev/shm/tern-kv",
                    help="a spill folder on another filesystem, run at prefetch 1 ('' to skip)")
    ap.add_argument("--drop-cache", action="store_true",
                    help="add a prefetch-1 row that drops the spill file's page cache before every step")
    ap.add_argument("--no-default-staging", action="store_true",
                    help="skip the run showing PagedKv's default staging cannot hold the spilled blocks")
    ap.add_argument("--json-out")
    ap.add_argument("--md-out", help="append the results table (markdown) to this file")
    a = ap.parse_args()
    if not os.path.exists(a.tern):
        sys.exit(f"no tern binary at {a.tern} (build it or pass --tern)")

    base_args = ["--kv-flash-mb", "0"]
    flash_dir = ["--kv-flash-dir", a.flash_dir] if a.flash_dir else []
    log(f"load {loadavg()}: probing the KV layout ...")
    a.started = time.strftime("%Y-%m-%d %H:%M:%S")
    a.chunk = 512
    probe, err, _ = run_bench(a, base_args, depth=64, tg=1)
    if probe is None:
        sys.exit(f"tern bench failed: {err}")
    plan = plan_budget(a, probe["kv"])
    a.chunk = plan["chunk"]
    for line in explain(plan, a):
        log("  " + line)
    budget = ["--kv-dram-mb", str(plan["dram_mb"]), "--kv-staging-mb", str(plan["staging_mb"])]
    configs = [("all in DRAM", base_args, None), (f"all in DRAM, depth 256", base_args, 256)]
    for p in a.prefetch:
        configs.append((f"{a.dram_fraction:.0%} DRAM, prefetch {p}", budget + flash_dir + ["--kv-prefetch-layers", str(p)], None))
    if a.alt_dir:
        configs.append((f"{a.dram_fraction:.0%} DRAM, prefetch 1, {a.alt_dir}",
                        budget + ["--kv-flash-dir", a.alt_dir, "--kv-prefetch-layers", "1"], None))
    if a.drop_cache:
        configs.append((f"{a.dram_fraction:.0%} DRAM, prefetch 1, page cache dropped",
                        budget + flash_dir + ["--kv-prefetch-layers", "1", "--drop-cache"], None))

    results = {name: [] for name, _, _ in configs}
    commands = {}
    loads = []
    for rnd in range(a.rounds):
        for name, extra, depth in configs:
            before = loadavg()
            j, err, cmd = run_bench(a, extra, depth=depth)
            commands[name] = " ".join(cmd)
            loads.append((rnd, name, before, loadavg()))
            if j is None:
                log(f"round {rnd + 1} {name}: FAILED: {err}")
            else:
                d = j["depth"][0]
                log(f"round {rnd + 1} {name:<40} {d['tokens_per_s']:7.1f} t/s  stalls {d['kv']['decode_prefetch_stalls']:5d}"
                    f"  greedy {d['greedy_fnv1a']}  load {before} -> {loadavg()}")
            results[name].append(j)

    default_staging = None
    if not a.no_default_staging:
        extra = ["--kv-dram-mb", str(plan["dram_mb"])] + flash_dir + ["--kv-prefetch-layers", "1"]
        j, err, cmd = run_bench(a, extra, tg=1)
        default_staging = {"command": " ".join(cmd), "ok": j is not None, "error": err}
        log(f"default staging, prefetch 1: {'ran' if j else 'FAILED: ' + err}")

    base = results["all in DRAM"]
    rows = [summarize(name, results[name], base) for name, _, _ in configs]
    ref_hash = rows[0]["greedy"] if rows[0] else None
    out = []
    out.append("| configuration | t/s best | t/s median | vs all-DRAM | median-step t/s | vs all-DRAM "
               "(median step) | stalls/step | stall ms/step | MiB read/step | blocks DRAM / flash | greedy same |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for (name, _, depth), r in zip(configs, rows):
        if r is None:
            out.append(f"| {name} | failed | | | | | | | | | |")
            continue
        same = "-" if depth else ("yes" if r["greedy"] == ref_hash else f"NO {r['greedy']}")
        compared = name != "all in DRAM" and not depth
        ratio = f"{r['ratio_median']:.2f}" if compared else "-"
        ratio_med = f"{r['ratio_median_step']:.2f}" if compared else "-"
        out.append(f"| {name} | {r['best']:.1f} | {r['median']:.1f} | {ratio} | {r['median_step_tps']:.1f} "
                   f"| {ratio_med} | {r['stalls_per_step']:.1f} | {r['stall_ms_per_step']:.2f} "
                   f"| {r['read_mib_per_step']:.1f} | {r['dram_blocks']} / {r['flash_blocks']} | {same} |")
    base_r, shallow = rows[0], rows[1]
    notes = []
    if base_r and shallow:
        share = 1 - (1000 / shallow["median"]) / (1000 / base_r["median"])
        notes.append(f"At depth {a.depth} a decode step takes {1000 / base_r['median']:.1f} ms (median) against "
                     f"{1000 / shallow['median']:.1f} ms at depth 256: about {share:.0%} of the step grows with "
                     "the context (mostly attention), so " +
                     ("the flash comparison is not trivial." if share >= 0.3 else
                      "attention is a small part of the step and the comparison says little: use a larger --depth."))
    for r in rows[2:]:
        if r and base_r:
            notes.append(f"{r['name']}: per-round ratios " + ", ".join(f"{x:.2f}" for x in r["ratios"]) +
                         " (median step: " + ", ".join(f"{x:.2f}" for x in r["ratios_median_step"]) +
                         "); t/s " + ", ".join(f"{x:.1f}" for x in r["all"]))
    notes.append("all in DRAM t/s by round: " + ", ".join(f"{x:.1f}" for x in base_r["all"]) if base_r else "")
    table = "\n".join(out)
    print(table)
    print()
    for n in notes:
        print("- " + n)
    if default_staging:
        print(f"- PagedKv's default staging (dram/16) at --kv-dram-mb {plan['dram_mb']}, prefetch 1: "
              + ("ran" if default_staging["ok"] else f"fails: `{default_staging['error']}`"))
    if a.md_out:
        with open(a.md_out, "a") as f:
            f.write(table + "\n\n" + "\n".join("- " + n for n in notes) + "\n")
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"plan": plan, "explain": explain(plan, a), "commands": commands, "loads": loads,
                       "results": results, "summary": rows, "default_staging": default_staging}, f, indent=1)


if __name__ == "__main__":
    main()
