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
    cache, second half of each chunk scored) on tests/fixtures/perplexity_text.txt.

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

    for text in TOP5_PROMPTS:
        prompt = llm.tokenize(text.encode(), add_bos=False, special=False)
        llm.reset()
        llm.eval(prompt)
        logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
        order = np.argsort(-logits, kind="stable")[:5]
        out["top5"].append({"prompt": text, "prompt_ids": prompt,
                            "ids": [int(i) for i in order],
                            "logits": [round(float(logits[i]), 5) for i in order]})

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
