#!/usr/bin/env python3
"""tern vs llama.cpp on the same GGUF and thread count, in one run, with the
machine's limits (bench/roofline.cpp) and each phase's fraction of its bound.

    .venv/bin/python bench/compare.py [-m MODEL] [-t 2] [--tern build/tern]
                                      [--pp 512] [--tg 128] [--batch 1,4,16] [-r 3]

Runs, in order: the roofline probe; `tern bench --json` with TERN_KERNELS=avx2
(the baseline every x86-64-v3 CPU has; on aarch64 the Armv8.0 "neon" table)
and with the best kernels this CPU supports; native llama.cpp (built by scripts/setup.sh --peer: llama-bench for
prefill and decode, llama-batched-bench for batched decode) on the same file;
then the same on a Q4_0 requantization of the model made with llama.cpp's own
llama-quantize (created next to the model on first use). Prints a table and the
target checks; --json-out FILE also saves everything measured.

Benchmarks on a shared machine are noisy: the script prints the load average
before and after, and -r takes the best of several repetitions.
"""
import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MODEL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
TARGETS = {"decode": 1.3, "prefill": 3.0, "batch16_tps": 1000.0}
ARM = platform.machine() in ("aarch64", "arm64")
BASE_ISA = "neon" if ARM else "avx2"  # the table every CPU of the architecture runs


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run_json(cmd, env=None):
    """Runs cmd under /usr/bin/time -v; returns (last JSON line of stdout, max RSS MiB)."""
    full = ["/usr/bin/time", "-v"] + cmd if os.path.exists("/usr/bin/time") else cmd
    p = subprocess.run(full, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-3000:]}")
    line = [l for l in p.stdout.splitlines() if l.startswith("{")][-1]
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    return json.loads(line), (int(m.group(1)) / 1024 if m else None)


def roofline(threads, quick):
    exe = os.path.join(ROOT, "build-bench", "roofline")
    src = os.path.join(ROOT, "bench", "roofline.cpp")
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
        os.makedirs(os.path.dirname(exe), exist_ok=True)
        flags = [] if ARM else ["-mavx2", "-mfma"]
        probe = subprocess.run(["g++", "-mavxvnni", "-x", "c++", "-c", "-o", "/dev/null", "-"],
                               input="int x;", capture_output=True, text=True)
        if probe.returncode == 0 and not ARM:
            flags.append("-mavxvnni")
        probe = subprocess.run(["g++", "-mavx512f", "-mavx512vnni", "-x", "c++", "-c", "-o", "/dev/null", "-"],
                               input="int x;", capture_output=True, text=True)
        if probe.returncode == 0 and not ARM:
            flags += ["-mavx512f", "-mavx512vnni"]
        subprocess.run(["g++", "-O2", "-std=c++20", *flags, "-pthread", src, "-o", exe], check=True)
    out, _ = run_json([exe, str(threads)] + (["--quick"] if quick else []))
    return out


PEER_BIN = os.environ.get("TERN_PEER_BIN", os.path.join(
    os.path.expanduser("~"), ".cache", "tern-peer", "llama.cpp-11434.0.0", "build", "bin"))


def peer(tool):
    exe = os.path.join(PEER_BIN, tool)
    if not os.path.exists(exe):
        sys.exit(f"{exe} not found: build the native peer with scripts/setup.sh --peer")
    return exe


def peer_env():
    return {**os.environ, "LD_LIBRARY_PATH": PEER_BIN}


def q4_0_model(src):
    """A Q4_0 requantization of src made by llama.cpp's llama-quantize (cached beside it)."""
    dst = re.sub(r"\.Q4_1\.gguf$", ".Q4_0.gguf", src)
    if dst == src:
        dst = src[:-5] + ".Q4_0.gguf"
    if not os.path.exists(dst):
        log(f"making {dst} with llama-quantize ...")
        subprocess.run([peer("llama-quantize"), "--allow-requantize", src, dst, "q4_0", "2"],
                       check=True, capture_output=True, env=peer_env())
    return dst


def tern_bench(a, model, isa):
    env = dict(os.environ)
    if isa:
        env["TERN_KERNELS"] = isa
    cmd = [a.tern, "bench", "-m", model, "-t", str(a.threads), "--pp", str(a.pp), "--tg", str(a.tg),
           "--batch", a.batch, "-r", str(a.reps), "--json"]
    out, rss = run_json(cmd, env)
    out["max_rss_mib"] = rss
    return out


def llama_bench(a, model):
    """Native llama.cpp: llama-bench for prefill (pp) and batch-1 decode (tg),
    llama-batched-bench for the larger batches (32-token prompts, --tg tokens
    per sequence, its S_TG: generated tokens / decode time)."""
    cmd = [peer("llama-bench"), "-m", model, "-t", str(a.threads), "-p", str(a.pp),
           "-n", str(a.tg), "-r", str(a.reps), "-o", "json"]
    full = ["/usr/bin/time", "-v"] + cmd if os.path.exists("/usr/bin/time") else cmd
    p = subprocess.run(full, capture_output=True, text=True, env=peer_env())
    if p.returncode != 0:
        sys.exit(f"llama-bench failed: {p.stderr[-2000:]}")
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    rows = json.loads(p.stdout)
    out = {"prefill": {"tokens_per_s": next(r["avg_ts"] for r in rows if r["n_prompt"] > 0)},
           "decode": [{"batch": 1,
                       "tokens_per_s": next(r["avg_ts"] for r in rows if r["n_gen"] > 0)}],
           "max_rss_mib": int(m.group(1)) / 1024 if m else None}
    batches = [int(x) for x in a.batch.split(",") if x and int(x) > 1]
    if batches:
        ctx = max(batches) * (32 + a.tg) + 64
        cmd = [peer("llama-batched-bench"), "-m", model, "-t", str(a.threads), "-c", str(ctx),
               "-b", "2048", "-ub", "512", "-npp", "32", "-ntg", str(a.tg),
               "-npl", ",".join(map(str, batches)), "--output-format", "jsonl"]
        p = subprocess.run(cmd, capture_output=True, text=True, env=peer_env())
        if p.returncode != 0:
            sys.exit(f"llama-batched-bench failed: {p.stderr[-2000:]}")
        for line in p.stdout.splitlines():
            if line.startswith("{"):
                r = json.loads(line)
                out["decode"].append({"batch": r["pl"], "tokens_per_s": r["speed_tg"]})
    return out


def decode_tps(r, b):
    for d in r.get("decode", []):
        if d["batch"] == b:
            return d["tokens_per_s"]
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", default=DEFAULT_MODEL)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--tern", default=os.path.join(ROOT, "build", "tern"))
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--batch", default="1,4,16")
    ap.add_argument("-r", "--reps", type=int, default=3)
    ap.add_argument("--no-q4_0", action="store_true", help="skip the Q4_0 comparison")
    ap.add_argument("--quick-roofline", action="store_true")
    ap.add_argument("--json-out")
    a = ap.parse_args()
    batches = [int(x) for x in a.batch.split(",") if x]

    res = {"machine": {}, "load_before": loadavg()}
    with open("/proc/cpuinfo") as f:
        res["machine"]["cpu"] = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")
    res["machine"]["cores"] = os.cpu_count()
    log(f"load average before: {res['load_before']}")
    log("roofline ...")
    roof = res["roofline"] = roofline(a.threads, a.quick_roofline)
    runs = {}
    log(f"tern ({BASE_ISA}) ...")
    runs["tern_avx2"] = tern_bench(a, a.model, BASE_ISA)
    log("tern (best kernels) ...")
    runs["tern_best"] = tern_bench(a, a.model, None)
    log("llama.cpp ...")
    runs["llama"] = llama_bench(a, a.model)
    if not a.no_q4_0:
        q40 = q4_0_model(a.model)
        log(f"tern on Q4_0 ({BASE_ISA}) ...")
        runs["tern_avx2_q4_0"] = tern_bench(a, q40, BASE_ISA)
        log("llama.cpp on Q4_0 ...")
        runs["llama_q4_0"] = llama_bench(a, q40)
    res["runs"] = runs
    res["load_after"] = loadavg()

    t2, tb, ll = runs["tern_avx2"], runs["tern_best"], runs["llama"]
    best_isa = tb["kernels"]
    bw_dram, bw_ws = roof["dram_read_gbs"] * 1e9, roof["ws96mib_read_gbs"] * 1e9
    if ARM:
        peak = {"neon": roof["int8_smull_gmacs"] * 1e9, "neon-dotprod": roof["int8_sdot_gmacs"] * 1e9,
                "neon-i8mm": roof["int8_smmla_gmacs"] * 1e9}
    else:
        peak = {"avx2": roof["int8_madd_gmacs"] * 1e9, "avxvnni": roof["int8_vnni_gmacs"] * 1e9,
                "avx512vnni": roof.get("int8_vnni512_gmacs", 0) * 1e9 or roof["int8_vnni_gmacs"] * 1e9}
    wbytes, lmacs, hmacs = t2["weight_bytes"], t2["layer_macs_per_token"], t2["head_macs_per_token"]

    print(f"\n{res['machine']['cpu']}, {a.threads} threads; model {os.path.basename(a.model)}")
    if ARM:
        macs = (f"{roof['int8_smull_gmacs']:.0f} G/s (smull+sadalp), {roof['int8_sdot_gmacs']:.0f} G/s "
                f"(sdot), {roof['int8_smmla_gmacs']:.0f} G/s (smmla)")
    else:
        macs = (f"{roof['int8_madd_gmacs']:.0f} G/s (vpmaddubsw+vpmaddwd), {roof['int8_i16_gmacs']:.0f} G/s "
                f"(vpmaddubsw+vpaddw), {roof['int8_vnni_gmacs']:.0f} G/s (vpdpbusd ymm), "
                f"{roof.get('int8_vnni512_gmacs', 0):.0f} G/s (vpdpbusd zmm)")
    print(f"roofline ({a.threads} threads): DRAM read {roof['dram_read_gbs']:.1f} GB/s, "
          f"96 MiB working set {roof['ws96mib_read_gbs']:.1f} GB/s; int8 MAC peak {macs}; fp32 FMA "
          f"{roof['fp32_fma_gmacs']:.0f} GMAC/s")
    print(f"tern: {wbytes / 2**20:.1f} MiB of repacked weights read per decode step; "
          f"{lmacs / 1e6:.1f} M layer MACs per token (+{hmacs / 1e6:.1f} M head)")
    hdr = (f"{'phase':<22}{'tern ' + BASE_ISA:>11}{'tern ' + best_isa:>15}{'llama.cpp':>11}"
           f"{BASE_ISA + '/llama':>12}{'best/llama':>12}")
    print("\n" + hdr + "\n" + "-" * len(hdr))
    rows = [("prefill pp%d" % a.pp, t2["prefill"]["tokens_per_s"], tb["prefill"]["tokens_per_s"],
             ll["prefill"]["tokens_per_s"])]
    for b in batches:
        rows.append((f"decode tg{a.tg} batch {b}", decode_tps(t2, b), decode_tps(tb, b), decode_tps(ll, b)))
    for name, x, y, z in rows:
        print(f"{name:<22}{x:>11.1f}{y:>15.1f}{z:>11.1f}{x / z:>11.2f}x{y / z:>11.2f}x")
    if "tern_avx2_q4_0" in runs:
        tq, lq = runs["tern_avx2_q4_0"], runs["llama_q4_0"]
        print(f"\nQ4_0 requantization (llama.cpp's quantizer), tern {BASE_ISA} vs llama.cpp:")
        print(f"{'prefill pp%d' % a.pp:<22}{tq['prefill']['tokens_per_s']:>11.1f}{'':>15}"
              f"{lq['prefill']['tokens_per_s']:>11.1f}{tq['prefill']['tokens_per_s'] / lq['prefill']['tokens_per_s']:>11.2f}x")
        for b in batches:
            x, z = decode_tps(tq, b), decode_tps(lq, b)
            print(f"{'decode batch %d' % b:<22}{x:>11.1f}{'':>15}{z:>11.1f}{x / z:>11.2f}x")

    print("\nfractions of the bounds:")
    for label, r, isa in ((BASE_ISA, t2, BASE_ISA), (best_isa, tb, best_isa)):
        d1 = decode_tps(r, 1)
        pf = r["prefill"]["tokens_per_s"]
        pk = peak.get(isa, peak[BASE_ISA]) or peak[BASE_ISA]
        print(f"  {label:<8} decode b1: {d1 * wbytes / bw_dram:5.0%} of DRAM bound "
              f"({bw_dram / wbytes:.0f} t/s), {d1 * wbytes / bw_ws:5.0%} of 96 MiB-working-set bound "
              f"({bw_ws / wbytes:.0f} t/s); prefill: {pf * lmacs / pk:5.0%} of int8 peak "
              f"({pk / lmacs:.0f} t/s, head excluded)")
    lw = os.path.getsize(a.model)
    print(f"  llama.cpp decode b1: {decode_tps(ll, 1) * lw / bw_dram:5.0%} of DRAM bound "
          f"({lw / 2**20:.0f} MiB file read per token)")

    mem = t2.get("memory", {})
    print(f"\nmemory (tern bench, {BASE_ISA}): max RSS {t2['max_rss_mib']:.0f} MiB (llama.cpp process "
          f"{ll['max_rss_mib']:.0f} MiB); anonymous {mem.get('rss_anon_mib', 0):.0f} MiB, "
          f"model file mapping resident {mem.get('model_mapping_resident_mib', 0):.0f} of "
          f"{mem.get('model_mapping_mib', 0):.0f} MiB; load {t2['load_s']:.2f} s; pool "
          f"dispatch-and-join {t2['dispatch_us']:.2f} us")

    print("\ntargets:")
    checks = [
        (f"decode b1 >= 1.3x llama.cpp ({BASE_ISA})", decode_tps(t2, 1) / decode_tps(ll, 1), TARGETS["decode"]),
        (f"prefill >= 3x llama.cpp ({BASE_ISA})", t2["prefill"]["tokens_per_s"] / ll["prefill"]["tokens_per_s"],
         TARGETS["prefill"]),
    ]
    if 16 in batches:
        checks.append((f"batch 16 >= 1000 t/s ({BASE_ISA})", decode_tps(t2, 16), TARGETS["batch16_tps"]))
    for name, v, want in checks:
        print(f"  {'PASS' if v >= want else 'MISS'}  {name}: {v:.2f}")
    print(f"\nload average before {res['load_before']}, after {res['load_after']}")
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
