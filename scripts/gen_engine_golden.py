#!/usr/bin/env python3
"""Produce tests/fixtures/engine_golden.json: llama.cpp's own answers for the
default model, which tern's engine tests compare against.

It runs llama.cpp through llama-cpp-python (the PyPI package, built for this
CPU by scripts/setup.sh --peer) on the same GGUF file tern loads, with
flash attention off and an f16 KV cache (llama.cpp's defaults), and records:
  * greedy: for each prompt, llama.cpp's prompt token ids and its greedy
    continuation (argmax of the logits, up to 64 tokens or end-of-generation),
    with the top-1/top-2 logit margin at every step;
  * top5: the five largest logits at the last prompt position;
  * perplexity: llama-perplexity's method (chunks of CTX tokens from an empty
    cache, second half of each chunk scored) on tests/fixtures/perplexity_text.txt;
  * oracle: for the top-5 prompts, exact logits from an fp64 numpy forward pass
    over the dequantized weights (gguf-py, llama.cpp's own Python package, does
    the dequantization), at the top-32 ids, next to llama.cpp's logits there.
    Both engines quantize activations to int8, so neither matches the oracle
    exactly; the test checks that tern's error is no larger than llama.cpp's.

Usage: .venv/bin/python scripts/gen_engine_golden.py [--model PATH] [--out PATH]
"""
import argparse
import hashlib
import json
import math
import os
import platform

import llama_cpp
import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def chatml(user):
    return (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n"
            "<|im_start|>assistant\n")


GREEDY_PROMPTS = [
    ("The capital of France is", False),
    ("Once upon a time, in a small village by the sea,", False),
    ("def fibonacci(n):\n", False),
    ("The three primary colors are", False),
    ("Photosynthesis is the process by which", False),
    (chatml("What is the boiling point of water?"), True),
    (chatml("Write a haiku about the ocean."), True),
]
TOP5_PROMPTS = ["The capital of France is", "1, 2, 3, 4,", "The quick brown fox"]
N_GREEDY = 64
PPL_CTX = 512


class Fp64Llama:
    """A plain fp64 forward pass of a llama-architecture GGUF: the oracle."""

    def __init__(self, path):
        r = GGUFReader(path)
        self.t = {t.name: t for t in r.tensors}
        f = {k: v.contents() for k, v in r.fields.items() if not k.startswith("tokenizer.")}
        a = f["general.architecture"]
        self.n_layers = int(f[a + ".block_count"])
        self.n_heads = int(f[a + ".attention.head_count"])
        self.n_kv = int(f[a + ".attention.head_count_kv"])
        self.d = int(f[a + ".embedding_length"])
        self.hd = self.d // self.n_heads
        self.theta = float(f[a + ".rope.freq_base"])
        self.eps = float(f[a + ".attention.layer_norm_rms_epsilon"])
        self.cache = {}

    def w(self, name):
        if name not in self.cache:
            t = self.t[name]
            a = dequantize(t.data, t.tensor_type).astype(np.float64)
            self.cache[name] = a.reshape([int(x) for x in reversed(t.shape.tolist())])
        return self.cache[name]

    def rms(self, x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + self.eps) * w

    def rope(self, v, pos):  # v (heads, hd); llama rotates adjacent pairs
        i = np.arange(self.hd // 2)
        th = pos * self.theta ** (-2.0 * i / self.hd)
        c, s = np.cos(th), np.sin(th)
        a, b = v[:, 0::2].copy(), v[:, 1::2].copy()
        out = v.copy()
        out[:, 0::2], out[:, 1::2] = a * c - b * s, a * s + b * c
        return out

    def logits(self, toks):
        n, hd, g = len(toks), self.hd, self.n_heads // self.n_kv
        x = self.w("token_embd.weight")[toks]
        for l in range(self.n_layers):
            b = f"blk.{l}."
            xn = self.rms(x, self.w(b + "attn_norm.weight"))
            q, k, v = (xn @ self.w(b + m + ".weight").T for m in ("attn_q", "attn_k", "attn_v"))
            Q = np.stack([self.rope(q[t].reshape(self.n_heads, hd), t) for t in range(n)])
            K = np.stack([self.rope(k[t].reshape(self.n_kv, hd), t) for t in range(n)])
            V = v.reshape(n, self.n_kv, hd)
            att = np.zeros((n, self.n_heads, hd))
            for t in range(n):
                for h in range(self.n_heads):
                    sc = K[:t + 1, h // g] @ Q[t, h] / math.sqrt(hd)
                    p = np.exp(sc - sc.max())
                    att[t, h] = (p / p.sum()) @ V[:t + 1, h // g]
            x = x + att.reshape(n, -1) @ self.w(b + "attn_output.weight").T
            xn = self.rms(x, self.w(b + "ffn_norm.weight"))
            gate, up = xn @ self.w(b + "ffn_gate.weight").T, xn @ self.w(b + "ffn_up.weight").T
            x = x + (gate / (1 + np.exp(-gate)) * up) @ self.w(b + "ffn_down.weight").T
        head = self.w("output.weight") if "output.weight" in self.t else self.w("token_embd.weight")
        return self.rms(x[-1], self.w("output_norm.weight")) @ head.T


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests/fixtures/engine_golden.json"))
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    llm = llama_cpp.Llama(model_path=args.model, n_ctx=2048, n_batch=512, n_threads=args.threads,
                          logits_all=True, flash_attn=False, verbose=False)
    eog = {llm.token_eos()}
    for name in ("<|im_end|>", "<|endoftext|>"):
        ids = llm.tokenize(name.encode(), add_bos=False, special=True)
        if len(ids) == 1:
            eog.add(ids[0])

    out = {
        "how": ("scripts/gen_engine_golden.py: llama.cpp via llama-cpp-python "
                f"{llama_cpp.__version__}, flash_attn=False, KV f16, n_threads={args.threads}; "
                "greedy = argmax of llama.cpp's logits fed back one token at a time"),
        "model_file": os.path.basename(args.model),
        "model_sha256": sha256(args.model),
        "machine": platform.processor() or platform.machine(),
        "greedy": [],
        "top5": [],
    }

    for text, special in GREEDY_PROMPTS:
        prompt = llm.tokenize(text.encode(), add_bos=False, special=special)
        llm.reset()
        llm.eval(prompt)
        toks, margins = [], []
        for _ in range(N_GREEDY):
            logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
            order = np.argsort(-logits, kind="stable")
            tok = int(order[0])
            margins.append(round(float(logits[order[0]] - logits[order[1]]), 5))
            if tok in eog:
                toks.append(tok)
                break
            toks.append(tok)
            llm.eval([tok])
        out["greedy"].append({"prompt": text, "parse_special": special, "prompt_ids": prompt,
                              "tokens": toks, "margins": margins,
                              "text": llm.detokenize([t for t in toks if t not in eog]).decode(
                                  "utf-8", errors="replace")})

    oracle = Fp64Llama(args.model)
    for text in TOP5_PROMPTS:
        prompt = llm.tokenize(text.encode(), add_bos=False, special=False)
        llm.reset()
        llm.eval(prompt)
        logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
        order = np.argsort(-logits, kind="stable")[:5]
        exact = oracle.logits(prompt)
        top32 = np.argsort(-exact, kind="stable")[:32]
        out["top5"].append({"prompt": text, "prompt_ids": prompt,
                            "ids": [int(i) for i in order],
                            "logits": [round(float(logits[i]), 5) for i in order],
                            "oracle_ids": [int(i) for i in top32],
                            "oracle_logits": [round(float(exact[i]), 5) for i in top32],
                            "llama_logits_at_oracle_ids": [round(float(logits[i]), 5) for i in top32]})

    # Perplexity, llama-perplexity's method.
    ctx_llm = llama_cpp.Llama(model_path=args.model, n_ctx=PPL_CTX, n_batch=PPL_CTX,
                              n_threads=args.threads, logits_all=True, flash_attn=False,
                              verbose=False)
    text = open(os.path.join(ROOT, "tests/fixtures/perplexity_text.txt"), encoding="utf-8").read()
    ids = ctx_llm.tokenize(text.encode(), add_bos=False, special=False)
    n_chunks = len(ids) // PPL_CTX
    nll, count = 0.0, 0
    first = PPL_CTX // 2
    for c in range(n_chunks):
        chunk = ids[c * PPL_CTX:(c + 1) * PPL_CTX]
        ctx_llm.reset()
        ctx_llm.eval(chunk)
        scores = np.array(ctx_llm.scores[:PPL_CTX], dtype=np.float64)
        for j in range(first, PPL_CTX - 1):
            row = scores[j]
            m = row.max()
            lse = m + math.log(np.exp(row - m).sum())
            nll += lse - row[chunk[j + 1]]
            count += 1
    out["perplexity"] = {"file": "tests/fixtures/perplexity_text.txt", "ctx": PPL_CTX,
                         "tokens": len(ids), "chunks": n_chunks,
                         "value": round(math.exp(nll / count), 5)}

    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {args.out}: ppl {out['perplexity']['value']}")
    for g in out["greedy"]:
        print(repr(g["text"][:80]), "min margin", min(g["margins"]))


if __name__ == "__main__":
    main()
