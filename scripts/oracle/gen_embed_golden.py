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

Both engines quantize (weights are the file's; activations int8 in tern, q8
blocks in llama.cpp; tern's KV int8-fp8, llama.cpp's f16), so a cosine between
them carries both errors. --reference adds to every case of the existing
fixture the vector of an fp32 reference: llama-embedding on the same weights
converted to F32 (llama-quantize --allow-requantize FILE OUT F32: every value
the quantized file decodes to, stored exactly), with an F32 KV cache, so
activations, KV and attention are fp32 throughout; and the cosine of
llama.cpp's own quantized vector to it ("llama_vs_reference"), the error the
peer itself makes. The test holds tern's vectors to the reference too.

    python3 scripts/oracle/gen_embed_golden.py --reference [--work DIR]
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


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / (sum(x * x for x in a) * sum(y * y for y in b)) ** 0.5


def add_reference(a):
    path = os.path.join(ROOT, "tests/fixtures/embed_golden.json")
    with open(path) as f:
        doc = json.load(f)
    os.makedirs(a.work, exist_ok=True)
    env = {**os.environ, "LD_LIBRARY_PATH": a.peer}
    f32 = {}
    for model in MODELS:
        out = os.path.join(a.work, os.path.basename(model)[:-5] + ".F32.gguf")
        if not os.path.exists(out):
            subprocess.run([os.path.join(a.peer, "llama-quantize"), "--allow-requantize",
                            os.path.join(ROOT, model), out, "F32", str(a.threads)],
                           check=True, capture_output=True, env=env)
        f32[os.path.basename(model)] = out
    for c in doc["cases"]:
        tokens, ref = run(a.peer, f32[c["model"]], c["pooling"], c["prompt"], a.threads,
                          ctx=("-c", "1024", "-ctk", "f32", "-ctv", "f32"))
        assert tokens == c["tokens"], "the F32 file tokenizes the same"
        c["reference"] = [float(f"{x:.7g}") for x in ref]
        c["llama_vs_reference"] = round(cosine(c["embedding"], ref), 6)
        print(f"{c['model']} {c['pooling']} {len(tokens)} tokens: llama.cpp vs reference "
              f"{c['llama_vs_reference']:.5f}", file=sys.stderr)
    doc["reference_how"] = ("llama-embedding (llama.cpp 11434.0.0, CPU) on the file converted by "
                            "llama-quantize --allow-requantize FILE OUT F32, -ctk f32 -ctv f32, "
                            "--embd-normalize 2 -c 1024; llama_vs_reference = cosine of 'embedding' "
                            "to it; scripts/oracle/gen_embed_golden.py --reference")
    with open(path, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer", default=PEER)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reference", action="store_true",
                    help="add the fp32 reference vectors to the existing fixture")
    ap.add_argument("--work", default="/tmp/tern-embed-reference",
                    help="where the F32 conversions go (about 1.6 GB)")
    a = ap.parse_args()
    if a.reference:
        return add_reference(a)
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
