"""Issue 32's quantization matrix: the default model requantized by
`tern quantize` into every type tern writes (tests/fixtures/quant_matrix.json,
recorded by scripts/oracle/gen_quant_matrix.py with llama.cpp's perplexity of
each file). Per row: the file's SHA-256 must be the recorded one (the same
bytes llama.cpp was measured on), and tern's perplexity on it within the row's
bound_pct of llama.cpp's. x86-64 only: the hashes were recorded there."""
import hashlib
import json
import os
import platform
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TERN = os.path.join(ROOT, "build", "tern")
FIXTURE = json.load(open(os.path.join(ROOT, "tests", "fixtures", "quant_matrix.json")))
SRC = os.path.join(ROOT, FIXTURE["source"])
TEXT = os.path.join(ROOT, "tests", "fixtures", "perplexity_text.txt")

pytestmark = [
    pytest.mark.skipif(platform.machine() != "x86_64", reason="hashes recorded on x86-64"),
    pytest.mark.skipif(not os.path.exists(SRC), reason="default model not downloaded"),
]


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


@pytest.mark.parametrize("row", FIXTURE["rows"], ids=[r["name"] for r in FIXTURE["rows"]])
def test_quant_matrix_row(row, tmp_path):
    out = tmp_path / f"{row['name']}.gguf"
    q = subprocess.run([TERN, "quantize", SRC, str(out), *row["quantize_args"], "-t", "2"],
                       capture_output=True, text=True, timeout=300)
    assert q.returncode == 0, q.stdout + q.stderr
    got = sha256(out)
    assert got == row["sha256"], (
        f"{row['name']}: tern quantize wrote other bytes than recorded ({got}, fixture "
        f"{row['sha256']}): a quantizer or the writer changed. If that was meant, re-record "
        f"llama.cpp's perplexity of the new file: scripts/oracle/gen_quant_matrix.py --rows "
        f"{row['name']} (needs the peer, scripts/build_peer.sh)")
    p = subprocess.run([TERN, "perplexity", "-m", str(out), "-f", TEXT, "-c", "512", "-b", "512",
                        "-t", "2", "--kv-type", "f16", *row.get("tern_args", [])],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    ppl = float(re.findall(r"perplexity: ([0-9.]+)", p.stdout)[-1])
    want = row["llama_cpp"]
    delta = 100 * (ppl - want) / want
    assert abs(delta) <= row["bound_pct"], (
        f"{row['name']}: tern {ppl:.4f} vs llama.cpp {want:.4f} ({delta:+.2f} %, bound "
        f"{row['bound_pct']} %; recorded tern {row['tern']})")
