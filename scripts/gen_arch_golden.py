#!/usr/bin/env python3
"""Produce tests/fixtures/arch_golden.json: the architecture oracle.

For each case of `tern gen-arch-model` (llama, llama3, qwen2, qwen3, gemma3)
it writes the seeded random-weight GGUF (small shapes, the real tensor names
and metadata, SmolLM2's tokenizer copied in), then records, for several
prompts, at a subset of positions and vocabulary ids:
  * llama.cpp's logits: scripts/oracle/llama_logits.cpp (built by
    scripts/oracle/build_llama_logits.sh against the native peer from
    scripts/setup.sh --peer), flash attention off, f16 KV cache, one thread;
  * exact logits from an fp64 numpy forward pass written to Hugging Face
    transformers' conventions for each architecture (the reference): RMSNorm,
    RoPE (adjacent pairs for llama, whose GGUF weights are stored permuted;
    halves for qwen2/qwen3/gemma3), Llama 3 frequency scaling computed from its
    parameters (not read from the file's rope_freqs), QKV bias, per-head QK
    norm, gemma3's sqrt(d) embedding scale, post-norms, GeGLU, sliding-window
    local layers with their own RoPE base. gguf-py (llama.cpp's Python
    package) dequantizes the weights.
The test (tests/unit/engine/arch_oracle_test.cpp) regenerates each file from
its seed, checks the weights' SHA-256, and holds tern's error against the
fp64 logits to llama.cpp's.

With --lora it also records, for the LORA_CASES, llama.cpp with a LoRA adapter
(llama_adapter_lora_init, as `--lora-scaled FILE 0.75` does) from
`tern gen-lora --rank 16 --seed 7` on q/k/v/o/gate/up/down of every layer, and
the fp64 reference with y = W x + scale * alpha / rank * B (A x) (key "lora").

Usage: PYTHONPATH=$PEER/src/gguf-py .venv/bin/python scripts/gen_arch_golden.py
"""
import argparse
import json
import math
import os
import platform
import struct
import subprocess
import tempfile

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEER = os.environ.get("TERN_PEER_DIR",
                      os.path.expanduser("~/.cache/tern-peer/llama.cpp-11434.0.0"))
CASES = ["llama", "llama3", "qwen2", "qwen3", "gemma3"]
SEED = 1
LORA_CASES = ("llama", "gemma3")  # --lora: adapter oracle on these cases
LORA_SCALE = 0.75
TEXT_PROMPTS = [
    "The capital of France is Paris, and the capital of Italy is",
    "def fibonacci(n):\n    if n < 2:\n        return n\n",
    "<|im_start|>user\nWhat is the boiling point of water?<|im_end|>\n<|im_start|>assistant\n",
]
N_RANDOM = 40      # a fourth prompt: random ids, longer than gemma3's window many times
N_TOP = 8          # per recorded position: the reference's top ids ...
N_SAMPLED = 24     # ... and this many ids drawn at random
POS_STRIDE = 3     # recorded positions: every third, and the last
LLAMA3 = dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
              original_max_position_embeddings=64)  # matches gen_arch.cpp


def tensor_f64(t):
    """A GGUF tensor dequantized to fp64, shaped (rows, row length)."""
    return dequantize(t.data, t.tensor_type).astype(np.float64).reshape(
        [int(x) for x in reversed(t.shape.tolist())])


class Fp64Model:
    """A plain fp64 forward pass of a GGUF in HF transformers' conventions."""

    def __init__(self, path, case):
        r = GGUFReader(path)
        self.t = {t.name: t for t in r.tensors}
        arch = r.fields["general.architecture"].contents()

        def meta(key, default=None):  # <arch>.key
            field = r.fields.get(arch + "." + key)
            return default if field is None else field.contents()

        self.arch = arch
        self.n_layers = int(meta("block_count"))
        self.d = int(meta("embedding_length"))
        self.n_heads, self.n_kv = int(meta("attention.head_count")), int(meta("attention.head_count_kv"))
        self.hd = int(meta("attention.key_length", self.d // self.n_heads))
        self.theta = float(meta("rope.freq_base"))
        self.eps = float(meta("attention.layer_norm_rms_epsilon"))
        self.window = int(meta("attention.sliding_window", 0))
        self.neox = arch in ("qwen2", "qwen3", "gemma3")
        self.gemma = arch == "gemma3"
        self.llama3 = case == "llama3"
        self.cache = {}

    def w(self, name):
        if name not in self.cache:
            self.cache[name] = tensor_f64(self.t[name])
        return self.cache[name]

    def has(self, name):
        return name in self.t

    def rms(self, x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + self.eps) * w

    def inv_freq(self, theta):
        inv = theta ** (-np.arange(0, self.hd, 2, dtype=np.float64) / self.hd)
        if self.llama3:  # transformers' _compute_llama3_parameters
            p = LLAMA3
            low_wl = p["original_max_position_embeddings"] / p["low_freq_factor"]
            high_wl = p["original_max_position_embeddings"] / p["high_freq_factor"]
            wl = 2 * math.pi / inv
            out = np.where(wl > low_wl, inv / p["factor"], inv)
            smooth = (p["original_max_position_embeddings"] / wl - p["low_freq_factor"]) / (
                p["high_freq_factor"] - p["low_freq_factor"])
            smoothed = (1 - smooth) * out / p["factor"] + smooth * out
            mid = (wl >= high_wl) & (wl <= low_wl)
            inv = np.where(mid, smoothed, out)
        return inv

    def rope(self, v, pos, theta):  # v (heads, hd)
        th = pos * self.inv_freq(theta)
        c, s = np.cos(th), np.sin(th)
        out = v.copy()
        h = self.hd // 2
        if self.neox:
            a, b = v[:, :h], v[:, h:]
            out[:, :h], out[:, h:] = a * c - b * s, a * s + b * c
        else:
            a, b = v[:, 0::2], v[:, 1::2]
            out[:, 0::2], out[:, 1::2] = a * c - b * s, a * s + b * c
        return out

    def local(self, l):
        return self.gemma and self.window > 0 and (l + 1) % 6 != 0

    def linear(self, x, name, lora):
        y = x @ self.w(name + ".weight").T
        if lora is not None and name in lora:
            a, b, s = lora[name]
            y = y + s * ((x @ a.T) @ b.T)
        return y

    def logits(self, toks, lora=None):
        """All positions' logits (n, n_vocab) of one prompt from an empty cache."""
        n, hd, g = len(toks), self.hd, self.n_heads // self.n_kv
        x = self.w("token_embd.weight")[toks]
        if self.gemma:
            x = x * math.sqrt(self.d)
        for l in range(self.n_layers):
            b = f"blk.{l}."
            theta = 10000.0 if self.local(l) else self.theta
            xn = self.rms(x, self.w(b + "attn_norm.weight"))
            q, k, v = (self.linear(xn, b + m, lora) for m in ("attn_q", "attn_k", "attn_v"))
            if self.has(b + "attn_q.bias"):
                q, k, v = (q + self.w(b + "attn_q.bias"), k + self.w(b + "attn_k.bias"),
                           v + self.w(b + "attn_v.bias"))
            q, k = q.reshape(n, self.n_heads, hd), k.reshape(n, self.n_kv, hd)
            if self.has(b + "attn_q_norm.weight"):
                q = self.rms(q, self.w(b + "attn_q_norm.weight"))
                k = self.rms(k, self.w(b + "attn_k_norm.weight"))
            Q = np.stack([self.rope(q[t], t, theta) for t in range(n)])
            K = np.stack([self.rope(k[t], t, theta) for t in range(n)])
            V = v.reshape(n, self.n_kv, hd)
            att = np.zeros((n, self.n_heads, hd))
            for t in range(n):
                lo = max(0, t - self.window + 1) if self.local(l) else 0
                for h in range(self.n_heads):
                    sc = K[lo:t + 1, h // g] @ Q[t, h] / math.sqrt(hd)
                    p = np.exp(sc - sc.max())
                    att[t, h] = (p / p.sum()) @ V[lo:t + 1, h // g]
            y = self.linear(att.reshape(n, -1), b + "attn_output", lora)
            if self.gemma:
                y = self.rms(y, self.w(b + "post_attention_norm.weight"))
            x = x + y
            xn = self.rms(x, self.w(b + "ffn_norm.weight"))
            gate, up = self.linear(xn, b + "ffn_gate", lora), self.linear(xn, b + "ffn_up", lora)
            if self.gemma:  # gelu_pytorch_tanh
                act = 0.5 * gate * (1 + np.tanh(math.sqrt(2 / math.pi) * (gate + 0.044715 * gate**3)))
            else:
                act = gate / (1 + np.exp(-gate))
            y = self.linear(act * up, b + "ffn_down", lora)
            if self.gemma:
                y = self.rms(y, self.w(b + "post_ffw_norm.weight"))
            x = x + y
        head = self.w("output.weight") if self.has("output.weight") else self.w("token_embd.weight")
        return self.rms(x, self.w("output_norm.weight")) @ head.T


def read_logits(path):
    with open(path, "rb") as f:
        n_vocab, n_prompts = struct.unpack("<ii", f.read(8))
        out = []
        for _ in range(n_prompts):
            (n,) = struct.unpack("<i", f.read(4))
            out.append(np.frombuffer(f.read(4 * n * n_vocab), dtype="<f4").reshape(n, n_vocab))
    return out


def run(cmd, **kw):
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(PEER, "build/bin"))
    return subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, **kw).stdout


def tokenize(model, text):
    out = run([os.path.join(PEER, "build/bin/llama-tokenize"), "-m", model, "-p", text, "--ids",
               "--log-disable"])
    return json.loads(out.strip().splitlines()[-1])


def record(model, lora_file, scale, prompts, tern, harness, tmp, lora=None):
    """Per prompt: recorded positions with ids, llama.cpp's and fp64 logits."""
    ptxt = os.path.join(tmp, "prompts.txt")
    with open(ptxt, "w") as f:
        for p in prompts:
            f.write(" ".join(map(str, p)) + "\n")
    outb = os.path.join(tmp, "logits.bin")
    run([harness, model, ptxt, outb] + ([lora_file, str(scale)] if lora_file else []))
    llama = read_logits(outb)
    rng = np.random.default_rng(1234)
    recs = []
    for p, ll in zip(prompts, llama):
        exact = tern.logits(p, lora)
        positions = sorted(set(range(0, len(p), POS_STRIDE)) | {len(p) - 1})
        rows = []
        for pos in positions:
            top = np.argsort(-exact[pos])[:N_TOP]
            rest = rng.choice(exact.shape[1], N_SAMPLED, replace=False)
            ids = [int(i) for i in dict.fromkeys(list(top) + list(rest))]
            rows.append({"pos": pos, "ids": ids,
                         "llama": [round(float(ll[pos, i]), 5) for i in ids],
                         "exact": [round(float(exact[pos, i]), 6) for i in ids],
                         "llama_argmax": int(np.argmax(ll[pos])),
                         "exact_argmax": int(np.argmax(exact[pos]))})
        recs.append({"prompt_ids": [int(t) for t in p], "positions": rows})
    return recs


def lora_tensors(path, scale):
    r = GGUFReader(path)
    f = {k: v.contents() for k, v in r.fields.items()}
    t = {x.name: x for x in r.tensors}
    out = {}
    for name in t:
        if not name.endswith(".lora_a"):
            continue
        base = name[:-len(".weight.lora_a")]
        a, b = tensor_f64(t[name]), tensor_f64(t[base + ".weight.lora_b"])
        out[base] = (a, b, scale * float(f["adapter.lora.alpha"]) / a.shape[0])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tern", default=os.path.join(ROOT, "build/tern"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests/fixtures/arch_golden.json"))
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--lora", action="store_true", help="also record the LoRA oracle (LORA_CASES)")
    args = ap.parse_args()
    harness = run([os.path.join(ROOT, "scripts/oracle/build_llama_logits.sh")]).strip().splitlines()[-1]
    peer_info = open(os.path.join(PEER, "build/bin/PEER_INFO")).read().strip() \
        if os.path.exists(os.path.join(PEER, "build/bin/PEER_INFO")) else PEER
    out = {
        "how": ("scripts/gen_arch_golden.py: files from `tern gen-arch-model --arch CASE --seed "
                f"{SEED}`; llama.cpp logits from scripts/oracle/llama_logits.cpp linked against the "
                f"native peer ({os.path.basename(PEER)}), flash attention off, f16 KV, 1 thread; "
                "exact = fp64 numpy forward in HF transformers' conventions over gguf-py's "
                f"dequantized weights; per position the exact top-{N_TOP} ids and {N_SAMPLED} "
                "random ids"),
        "peer": peer_info.splitlines()[0] if peer_info else "",
        "machine": platform.processor() or platform.machine(),
        "cases": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.cases.split(","):
            model = os.path.join(tmp, case + ".gguf")
            line = run([args.tern, "gen-arch-model", "--arch", case, "--seed", str(SEED),
                        "--out", model])
            sha = line.split("weights sha256 ")[1].split()[0]
            prompts = [tokenize(model, t) for t in TEXT_PROMPTS]
            rng = np.random.default_rng(SEED)
            prompts.append([int(x) for x in rng.integers(0, 49152, N_RANDOM)])
            ref = Fp64Model(model, case)
            entry = {"seed": SEED, "weights_sha256": sha,
                     "prompts": record(model, None, 0, prompts, ref, harness, tmp)}
            if args.lora and case in LORA_CASES:
                lf = os.path.join(tmp, "lora.gguf")
                lline = run([args.tern, "gen-lora", "--base", model, "--rank", "16", "--seed", "7",
                             "--out", lf])
                lsha = lline.split("sha256 ")[1].split()[0]
                entry["lora"] = {"rank": 16, "seed": 7, "scale": LORA_SCALE, "sha256": lsha,
                                 "prompts": record(model, lf, LORA_SCALE, prompts, ref, harness,
                                                   tmp, lora_tensors(lf, LORA_SCALE))}
            out["cases"][case] = entry
            print(case, "done", flush=True)
    with open(args.out, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
