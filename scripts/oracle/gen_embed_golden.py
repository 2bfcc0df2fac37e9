#!/usr/bin/env python3
"""Records the peer's embeddings of a few prompts: tests/fixtures/embed_golden.json.

For each (model, pooling, prompt) it runs llama.cpp's llama-embedding (built by
scripts/build_peer.sh; `cmake --build <peer>/build --target llama-embedding`
when the build lacks it) with --embd-normalize 2 (L2, tern's default) and
--verbose-prompt, and keeps the prompt's token ids (so the test can check
tern tokenizes the same: no BOS is added unless the vocabulary asks) and the
vector. tests/unit/engine/embed_oracle_test.cpp checks tern's vectors against
them (cosine >= 0.999 each). Re-record:

    python3 scripts/oracle/gen_embed_golden.py [--peer DIR] [--threads N]
"""
import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PEER = os.path.expanduser("~/.cache/tern-peer/llama.cpp-11434.0.0/build/bin")
MODELS = ["models/SmolLM2-135M-Instruct.Q4_1.gguf", "models/gemma-3-270m-it-Q4_K_M.gguf"]
POOLINGS = ["mean", "last", "cls"]
PROMPTS = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "Embeddings turn text into vectors: similar meanings land close together, "
    "so a retriever can find the passages that answer a question by comparing "
    "the question's vector with every passage's vector. " * 2,
    "Ünïcödé, emoji 🦊 and numbers 12345 in one line.",
]
TOKEN_LINE = re.compile(r"^\s*(\d+) -> '")


def run(peer, model, pooling, prompt, threads, ctx=("-c", "1024")):
    """llama-embedding's token ids and vector for one prompt; ctx: its context flags."""
    cmd = [os.path.join(peer, "llama-embedding"), "-m", model, "--pooling", pooling,
           "--embd-normalize", "2", "--embd-output-format", "json", "--verbose-prompt",
           "-t", str(threads), *ctx, "-p", prompt]
    for _ in range(50):
        out = subprocess.run(cmd, cwd=ROOT, capture_output=True, check=True).stdout.decode("utf-8", "replace")
        # Its asynchronous log sometimes loses the end of stdout at exit
        # (exit code 0, the JSON cut short or missing): run it again.
        if "\n{" in out and out.rstrip().endswith("}"):
            break
    else:
        raise RuntimeError(f"llama-embedding printed no vector: {' '.join(cmd)}")
    start = out.index("\n{") + 1  # the token list comes first, then the JSON
    tokens = [int(m.group(1)) for m in map(TOKEN_LINE.match, out[:start].splitlines()) if m]
    data = json.loads(out[start:])["data"]
    assert len(data) == 1, "one prompt, one vector"
    return tokens, data[0]["embedding"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer", default=PEER)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    cases = []
    for model in MODELS:
        for pooling in POOLINGS:
            for prompt in PROMPTS:
                tokens, vec = run(a.peer, model, pooling, prompt, a.threads)
                cases.append({"model": os.path.basename(model), "pooling": pooling,
                              "prompt": prompt, "tokens": tokens, "embedding": vec})
                print(f"{os.path.basename(model)} {pooling}: {len(tokens)} tokens", file=sys.stderr)
    doc = {"how": "llama-embedding (llama.cpp 11434.0.0, CPU) --embd-normalize 2 "
                  "--embd-output-format json -c 1024; scripts/oracle/gen_embed_golden.py",
           "cases": cases}
    with open(os.path.join(ROOT, "tests/fixtures/embed_golden.json"), "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
