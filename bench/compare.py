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

    .venv/bin/python bench/compare.py --types [SPEC,...] [-r 2]

instead measures every GGUF type (issue 32): the model requantized by the
peer's llama-quantize into each recipe (a SPEC is a llama-quantize type name,
":pure" for --pure; the lattice, ternary and fp4 types with an importance
matrix from llama-imatrix over tests/fixtures/perplexity_text.txt; files cached
in models/types/), then per file: the tensor types it holds, its tensor bytes
against tern's packed weight bytes, and prefill / batch-1 decode of tern (base
and best kernels) against llama-bench, with the issue's targets (>= 2x prefill,
>= 1.3x decode on every 4- and 3-bit type; packed bytes within 5 % of the
file's).

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


GGML_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 9: "Q8_1",
              10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K", 16: "IQ2_XXS",
              17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL", 21: "IQ3_S", 22: "IQ2_S",
              23: "IQ4_XS", 24: "I8", 25: "I16", 26: "I32", 27: "I64", 28: "F64", 29: "IQ1_M",
              30: "BF16", 34: "TQ1_0", 35: "TQ2_0", 39: "MXFP4", 40: "NVFP4", 41: "Q1_0", 42: "Q2_0"}

# Recipes of --types by default: every 4- and 3-bit type a user downloads, the
# 2- and 1-bit ones, the 5-8-bit ones and the unquantized originals. This
# model's rows of 576 are not whole 256-blocks, so the 256-block types land on
# ffn_down only in llama.cpp's recipes (":pure" forces them there; the other
# tensors fall back to a 32-block type).
TYPE_SPECS = ("Q8_0,Q6_K,Q5_K_M,Q4_K_M,Q4_K_S,Q4_0,IQ4_NL,IQ4_XS,MXFP4_MOE:pure,Q3_K_L,Q3_K_M,"
              "Q3_K_S,Q3_K:pure,IQ3_M,IQ3_S,IQ3_XXS,Q2_K,Q2_K:pure,IQ2_M,IQ2_S,IQ2_XS,IQ2_XXS,"
              "IQ1_M,IQ1_S,TQ2_0,TQ1_0,F16,BF16")
FOUR_AND_THREE_BIT = ("Q4_", "IQ4", "MXFP4", "Q3_", "IQ3")
NEEDS_IMATRIX = ("IQ3_XXS", "IQ3_S", "IQ3_M", "IQ2_", "IQ1_", "TQ", "MXFP4")


def gguf_tensors(path):
    """(data bytes, {ggml type name: tensor count}) of a GGUF file, from its header."""
    import struct
    with open(path, "rb") as f:
        def rd(fmt):
            return struct.unpack("<" + fmt, f.read(struct.calcsize("<" + fmt)))[0]

        def rstr():
            return f.read(rd("Q")).decode("utf-8", "replace")
        sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
        fmts = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

        def skip(t):
            if t == 8:
                rstr()
            elif t == 9:
                et, n = rd("I"), rd("Q")
                if et == 8:
                    for _ in range(n):
                        rstr()
                else:
                    f.seek(sizes[et] * n, 1)
            else:
                f.seek(sizes[t], 1)
        assert f.read(4) == b"GGUF", f"{path}: not a GGUF file"
        rd("I")
        n_tensors, n_kv = rd("Q"), rd("Q")
        align = 32
        for _ in range(n_kv):
            key, t = rstr(), rd("I")
            if key == "general.alignment" and t in fmts:
                align = rd(fmts[t])
            else:
                skip(t)
        counts = {}
        for _ in range(n_tensors):
            rstr()
            f.seek(8 * rd("I"), 1)
            t = rd("I")
            rd("Q")
            name = GGML_TYPES.get(t, f"type {t}")
            counts[name] = counts.get(name, 0) + 1
        start = (f.tell() + align - 1) // align * align
    return os.path.getsize(path) - start, counts


def type_model(src, spec, out_dir):
    """src requantized to SPEC by llama-quantize (cached in out_dir)."""
    t, _, mode = spec.partition(":")
    name = t + ("-pure" if mode == "pure" else "")
    dst = os.path.join(out_dir, f"{os.path.basename(src)[:-5]}-{name}.gguf")
    if os.path.exists(dst):
        return dst
    os.makedirs(out_dir, exist_ok=True)
    extra = ["--pure"] if mode == "pure" else []
    if t.startswith(NEEDS_IMATRIX):
        imatrix = os.path.join(out_dir, os.path.basename(src)[:-5] + "-imatrix.gguf")
        if not os.path.exists(imatrix):
            log("making the importance matrix with llama-imatrix ...")
            subprocess.run([peer("llama-imatrix"), "-m", src, "-f",
                            os.path.join(ROOT, "tests", "fixtures", "perplexity_text.txt"),
                            "-c", "512", "-b", "512", "-t", "2", "-o", imatrix],
                           check=True, capture_output=True, env=peer_env())
        extra += ["--imatrix", imatrix]
    log(f"making {dst} with llama-quantize ...")
    p = subprocess.run([peer("llama-quantize"), "--allow-requantize", *extra, src, dst, t, "2"],
                       capture_output=True, text=True, env=peer_env())
    if p.returncode != 0:
        sys.exit(f"llama-quantize {spec} failed: {p.stderr[-1500:]}")
    return dst


def types_main(a):
    specs = [s for s in (a.types or TYPE_SPECS).split(",") if s]
    out_dir = os.path.join(os.path.dirname(os.path.abspath(a.model)), "types")
    res = {"load_before": loadavg(), "types": []}
    with open("/proc/cpuinfo") as f:
        cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")
    log(f"load average before: {res['load_before']}")
    a.batch = "1"
    for spec in specs:
        path = type_model(a.model, spec, out_dir)
        data_bytes, counts = gguf_tensors(path)
        log(f"{spec}: tern ({BASE_ISA}) ...")
        t2 = tern_bench(a, path, BASE_ISA)
        log(f"{spec}: tern (best) ...")
        tb = tern_bench(a, path, None)
        log(f"{spec}: llama-bench ...")
        ll = llama_bench(a, path)
        res["types"].append({"spec": spec, "file_tensor_bytes": data_bytes, "tensor_types": counts,
                             "tern_base": t2, "tern_best": tb, "llama": ll})
    res["load_after"] = loadavg()

    print(f"\n{cpu}, {a.threads} threads; {os.path.basename(a.model)} requantized by llama-quantize; "
          f"pp{a.pp} / tg{a.tg}, best of {a.reps}; kernels {BASE_ISA} and "
          f"{res['types'][0]['tern_best']['kernels'] if res['types'] else '?'}")
    hdr = (f"{'recipe':<16}{'file MiB':>9}{'packed':>8}{'pp ' + BASE_ISA:>9}{'pp best':>9}{'pp llama':>9}"
           f"{'x ' + BASE_ISA:>8}{'x best':>8}{'tg ' + BASE_ISA:>9}{'tg best':>9}{'tg llama':>9}"
           f"{'x ' + BASE_ISA:>8}{'x best':>8}  targets")
    print("\n" + hdr + "\n" + "-" * len(hdr))
    for r in res["types"]:
        t2, tb, ll = r["tern_base"], r["tern_best"], r["llama"]
        pp = [x["prefill"]["tokens_per_s"] for x in (t2, tb, ll)]
        tg = [decode_tps(x, 1) for x in (t2, tb, ll)]
        packed = t2["weight_bytes"] / r["file_tensor_bytes"]
        verdict = ""
        if r["spec"].startswith(FOUR_AND_THREE_BIT):
            miss = [n for n, ok in (("pp", pp[0] / pp[2] >= 2.0), ("tg", tg[0] / tg[2] >= 1.3),
                                    ("bytes", packed <= 1.05)) if not ok]
            verdict = "met" if not miss else "missed: " + ", ".join(miss)
        print(f"{r['spec']:<16}{r['file_tensor_bytes'] / 2**20:>9.1f}{packed:>7.2f}x{pp[0]:>9.0f}{pp[1]:>9.0f}"
              f"{pp[2]:>9.0f}{pp[0] / pp[2]:>7.2f}x{pp[1] / pp[2]:>7.2f}x{tg[0]:>9.1f}{tg[1]:>9.1f}{tg[2]:>9.1f}"
              f"{tg[0] / tg[2]:>7.2f}x{tg[1] / tg[2]:>7.2f}x  {verdict}")
    print("\ntensor types per file:")
    for r in res["types"]:
        print(f"  {r['spec']:<16}" + ", ".join(f"{n} {c}" for n, c in sorted(r["tensor_types"].items())))
    print(f"\n'packed' = tern's repacked weight bytes / the file's tensor bytes (norms and other "
          f"1-D tensors included in the file's). load average before {res['load_before']}, "
          f"after {res['load_after']}")
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(res, f, indent=1)


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
    ap.add_argument("--types", nargs="?", const="", default=None,
                    help="measure each GGUF type instead (comma-separated llama-quantize recipes; "
                         "default: every type)")
    a = ap.parse_args()
    if a.types is not None:
        if a.reps == 3 and "-r" not in sys.argv and "--reps" not in sys.argv:
            a.reps = 2
        return types_main(a)
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
