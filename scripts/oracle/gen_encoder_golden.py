#!/usr/bin/env python3
"""Records the peer's embeddings from the generated encoders: tests/fixtures/encoder_golden.json.

For each encoder case of `tern gen-arch-model` (bert, nomic-bert: seeded
weights, a WordPiece vocabulary of a few hundred tokens; xlmr: XLM-R as
arch bert with a unigram vocabulary and its charsmap) it writes the file,
then runs llama.cpp's llama-embedding on it for each (pooling, prompt) with
--embd-normalize 2 and --verbose-prompt, and keeps the prompt's token ids
(WordPiece as llama.cpp runs it: [CLS] ... [SEP]) and the vector.
tests/unit/engine/encoder_oracle_test.cpp regenerates the same files in
memory (the weights' SHA-256 is recorded to prove it) and checks tern's token
ids (equal) and vectors (cosine >= 0.999 each). Re-record:

    ninja -C build tern && python3 scripts/oracle/gen_encoder_golden.py [--peer DIR]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_embed_golden import PEER, ROOT, run  # noqa: E402

SEED = 7
CASES = {"bert": ["cls", "mean"], "nomic-bert": ["mean", "cls"], "gemma-embedding": ["mean", "last"],
         "xlmr": ["cls", "mean"]}
PROMPTS = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "Paris is the capital of France; the river runs through the city, day and night!",
    "CAFÉ naïve Über-tokenizers re-embedding 12,345 things (really?) 中文字 🦊 [MASK] here",
    "We read the first page of the old book, and they walked over to the big house by the "
    "tree. What is a vector? Which model learns language? " * 2,
]
SHA_LINE = re.compile(r"weights sha256 ([0-9a-f]{64})")
CTX = ("-c", "0", "-b", "256", "-ub", "256")  # the file's context, every token in one batch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer", default=PEER)
    ap.add_argument("--tern", default=os.path.join(ROOT, "build/tern"))
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    doc = {"how": "tern gen-arch-model --arch CASE --seed 7, then llama-embedding (llama.cpp "
                  "11434.0.0, CPU) --pooling P --embd-normalize 2 --embd-output-format json "
                  "--verbose-prompt -c 0 (the file's context) -b 256 -ub 256 -t 2; "
                  "scripts/oracle/gen_encoder_golden.py",
           "seed": SEED, "cases": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for case, poolings in CASES.items():
            path = os.path.join(tmp, case + ".gguf")
            line = subprocess.run([a.tern, "gen-arch-model", "--arch", case, "--seed", str(SEED),
                                   "--out", path], capture_output=True, check=True, text=True).stdout
            entry = {"weights_sha256": SHA_LINE.search(line).group(1), "vectors": []}
            for pooling in poolings:
                for prompt in PROMPTS:
                    tokens, vec = run(a.peer, path, pooling, prompt, a.threads, CTX)
                    entry["vectors"].append({"pooling": pooling, "prompt": prompt,
                                             "tokens": tokens, "embedding": vec})
                    print(f"{case} {pooling}: {len(tokens)} tokens", file=sys.stderr)
            doc["cases"][case] = entry
    with open(os.path.join(ROOT, "tests/fixtures/encoder_golden.json"), "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
