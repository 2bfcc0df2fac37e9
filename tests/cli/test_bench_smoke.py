"""Benchmarks are not timed tests, but they must not rot: each runs here for
seconds, on the real binary and model, and must finish without an error."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TERN = os.path.join(ROOT, "build", "tern")


def test_serve_benchmark_smoke(tmp_path):
    out = tmp_path / "serve.json"
    chart = tmp_path / "serve.svg"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "serve.py"), "--smoke",
                        "--json", str(out), "--chart", str(chart)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = json.loads(out.read_text())["rows"]
    assert {(row["transport"], row["load"]) for row in rows} == {
        ("sse", "c=1"), ("sse", "c=3"), ("ws", "c=1"), ("ws", "c=3")}
    for row in rows:
        assert row["errors"] == 0 and row["ok"] == row["requests"] == 6
        assert row["out_tok_per_s"] > 0 and row["ttft_p50_ms"] > 0
    assert chart.read_text().startswith("<svg")


def test_depth_benchmark_smoke():
    r = subprocess.run([TERN, "bench", "--pp", "64", "--tg", "8", "--depth", "512", "--batch", "1", "-r", "1",
                        "--json"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "depth" in r.stdout


def test_depth_script_smoke(tmp_path):
    # bench/depth.py without the peer: tern's pp at depth and tg from the depth
    out = tmp_path / "depth.json"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "depth.py"), "--no-peer",
                        "--depths", "0,96", "--pp", "32", "--tg", "4", "-t", "2", "--json", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = json.loads(out.read_text())["rows"]
    assert [row["depth"] for row in rows] == [0, 96]
    for row in rows:
        assert row["tern"]["pp"] > 0 and row["tern"]["tg"] > 0


def test_embed_itl_smoke():
    # bench/embed_itl.py: a stream's gaps idle and while an embedding request runs
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "embed_itl.py"), "--items", "8",
                        "--tokens", "24"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "p99 ratio B/A" in r.stdout


def test_bench_decode_with_lora_adapters(tmp_path):
    # `tern bench --lora`: batch rows spread over adapters made by gen-lora
    model = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
    files = []
    for seed in (1, 2):
        f = tmp_path / f"a{seed}.gguf"
        g = subprocess.run([TERN, "gen-lora", "--base", model, "--rank", "8", "--seed", str(seed),
                            "--out", str(f)], capture_output=True, text=True, timeout=600)
        assert g.returncode == 0, g.stderr
        files.append(str(f))
    r = subprocess.run([TERN, "bench", "-m", model, "--pp", "0", "--tg", "4", "--batch", "3", "-r", "1",
                        "--json", "--lora", ",".join(files)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["lora_adapters"] == 2
    assert j["decode"][0]["batch"] == 3 and j["decode"][0]["tokens_per_s"] > 0
    # Refused before the model loads: the depth test takes no adapters.
    r = subprocess.run([TERN, "bench", "-m", model, "--depth", "64", "--tg", "2", "--lora", files[0]],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode != 0 and "--lora applies to the decode test" in r.stderr
