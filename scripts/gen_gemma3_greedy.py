#!/usr/bin/env python3
"""Produce tests/fixtures/gemma3_greedy.json: llama.cpp's greedy continuations
on the real Gemma 3 270M file (models/gemma-3-270m-it-Q4_K_M.gguf), for
tern's teacher-forced agreement test (tests/unit/engine/gemma3_test.cpp).

Prompt ids come from `llama-tokenize` (BOS added, special tokens parsed);
continuations from scripts/oracle/llama_logits.cpp --greedy (built by
scripts/oracle/build_llama_logits.sh against the native peer of
scripts/setup.sh --peer): argmax of llama.cpp's logits fed back one token at a
time, up to 48 tokens or end of generation, flash attention off, f16 KV, one
thread, with the top-1/top-2 margin at every step.

Usage: .venv/bin/python scripts/gen_gemma3_greedy.py
"""
import json
import os
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEER = os.environ.get("TERN_PEER_DIR",
                      os.path.expanduser("~/.cache/tern-peer/llama.cpp-11434.0.0"))
MODEL = os.path.join(ROOT, "models", "gemma-3-270m-it-Q4_K_M.gguf")
N_NEW = 48


def turn(user):
    return f"<start_of_turn>user\n{user}<end_of_turn>\n<start_of_turn>model\n"


PROMPTS = [
    turn("What is the capital of France?"),
    turn("Write a haiku about the ocean."),
    turn("List three primary colors."),
    turn("Explain photosynthesis in one sentence."),
    "Once upon a time, in a small village by the sea,",
    "def fibonacci(n):\n",
]


def run(cmd):
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(PEER, "build/bin"))
    return subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout


def main():
    harness = run([os.path.join(ROOT, "scripts/oracle/build_llama_logits.sh")]).split()[-1]
    ids = [json.loads(run([os.path.join(PEER, "build/bin/llama-tokenize"), "-m", MODEL, "-p", p,
                           "--ids", "--log-disable"]).strip().splitlines()[-1]) for p in PROMPTS]
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        for p in ids:
            f.write(" ".join(map(str, p)) + "\n")
    lines = run([harness, MODEL, f.name, "--greedy", str(N_NEW)]).splitlines()
    os.unlink(f.name)
    out = {"how": ("scripts/gen_gemma3_greedy.py: llama-tokenize (BOS, special parsed), "
                   "scripts/oracle/llama_logits.cpp --greedy on the native peer "
                   f"({os.path.basename(PEER)}), flash attention off, f16 KV, 1 thread"),
           "model_file": os.path.basename(MODEL), "greedy": []}
    for prompt, pids, i in zip(PROMPTS, ids, range(0, len(lines), 2)):
        out["greedy"].append({"prompt": prompt, "prompt_ids": pids,
                              "tokens": [int(t) for t in lines[i].split()[1:]],
                              "margins": [round(float(m), 4) for m in lines[i + 1].split()[1:]]})
    with open(os.path.join(ROOT, "tests/fixtures/gemma3_greedy.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
