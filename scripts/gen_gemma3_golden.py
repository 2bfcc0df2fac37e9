#!/usr/bin/env python3
"""Golden values for Gemma 3 270M Q4_K_M, from native llama.cpp.

Writes tests/fixtures/gemma3_golden.json, which tests/unit/engine/gemma3_test.cpp
checks tern against in CI (CI has no llama.cpp):
  * token ids of every text of the tokenizer suite (tests/fixtures/tokenizer_golden.json,
    add_bos false, special tokens not parsed), from `llama-tokenize --ids --no-bos
    --no-parse-special -bf FILE`;
  * perplexity of tests/fixtures/perplexity_text.txt at contexts 512 and 1024
    (the running value after each chunk and the final one), from
    `llama-perplexity -c CTX -b CTX` (f16 KV cache, llama.cpp's default).
    At 1024 the 512-token sliding window of Gemma's local layers is exercised.

Needs the peer built by scripts/setup.sh --peer (or LLAMA_BIN pointing at its
build/bin) and the model fetched by scripts/setup.sh.
"""
import glob
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "models", "gemma-3-270m-it-Q4_K_M.gguf")


def llama_bin() -> str:
    if os.environ.get("LLAMA_BIN"):
        return os.environ["LLAMA_BIN"]
    found = sorted(glob.glob(os.path.expanduser("~/.cache/tern-peer/llama.cpp-*/build/bin")))
    if not found:
        sys.exit("llama.cpp peer not found: run scripts/setup.sh --peer or set LLAMA_BIN")
    return found[-1]



def run_all(bin_dir: str, args: list[str]) -> str:
    env = dict(os.environ, LD_LIBRARY_PATH=bin_dir)
    p = subprocess.run([os.path.join(bin_dir, args[0])] + args[1:], env=env, check=True,
                       capture_output=True, text=True)
    return p.stdout + p.stderr


def case_bytes(c: dict) -> bytes:
    return bytes.fromhex(c["text_hex"]) if "text_hex" in c else c["text"].encode()


def main() -> None:
    bin_dir = llama_bin()
    with open(os.path.join(ROOT, "tests/fixtures/tokenizer_golden.json")) as f:
        suite = json.load(f)["cases"]
    seen, cases = set(), []
    for c in suite:
        data = case_bytes(c)
        if data in seen or not data:
            continue
        seen.add(data)
        with tempfile.NamedTemporaryFile(delete=False) as tf:
            tf.write(data)
        try:
            out = run_all(bin_dir, ["llama-tokenize", "-m", MODEL, "-bf", tf.name, "--ids", "--no-bos",
                                "--no-parse-special", "--no-escape", "--log-disable"])
        finally:
            os.unlink(tf.name)
        ids = json.loads(re.findall(r"^\[[-0-9, ]*\]$", out, re.M)[-1])
        case = {"name": c["name"], "ids": ids}
        if "text_hex" in c:
            case["text_hex"] = c["text_hex"]
        else:
            case["text"] = c["text"]
        cases.append(case)
        print(f"{len(cases)}: {c['name']} -> {len(ids)} ids", file=sys.stderr)

    ppl = {}
    text = os.path.join(ROOT, "tests/fixtures/perplexity_text.txt")
    for ctx in (512, 1024):
        out = run_all(bin_dir, ["llama-perplexity", "-m", MODEL, "-f", text, "-c", str(ctx), "-b",
                                str(ctx), "-t", "2"])
        chunks = [float(x) for x in re.findall(r"\[\d+\]([0-9.]+)", out)]
        final = float(re.search(r"Final estimate: PPL = ([0-9.]+)", out).group(1))
        ppl[str(ctx)] = {"chunks": chunks, "final": final}
        print(f"ctx {ctx}: {chunks} final {final}", file=sys.stderr)

    with open(MODEL, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    golden = {
        "generator": {
            "script": "scripts/gen_gemma3_golden.py",
            "llama_cpp": os.path.basename(os.path.dirname(os.path.dirname(bin_dir))),
            "model_file": os.path.basename(MODEL),
            "model_sha256": sha,
            "tokenize_call": "llama-tokenize -m MODEL -bf FILE --ids --no-bos --no-parse-special --no-escape",
            "perplexity_call": "llama-perplexity -m MODEL -f tests/fixtures/perplexity_text.txt "
                               "-c CTX -b CTX -t 2 (f16 KV cache)",
        },
        "tokenize": cases,
        "perplexity": ppl,
    }
    with open(os.path.join(ROOT, "tests/fixtures/gemma3_golden.json"), "w") as f:
        json.dump(golden, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
