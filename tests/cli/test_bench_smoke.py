"""Benchmarks are not timed tests, but they must not rot: each runs here for
seconds, on the real binary and model, and must finish without an error."""
import json
import os
import re
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


def test_fairness_and_step_trace_smoke(tmp_path):
    # bench/fairness.py (issue 31 section 2): streams' ITL and a short
    # request's TTFT while a long prompt prefills; its trace log read by
    # bench/step_trace.py, both per depth band and split by kind of step.
    out = tmp_path / "fair.json"
    env = dict(os.environ, TERN_LOG_LEVEL="trace", TMPDIR=str(tmp_path))
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "fairness.py"), "--tern", "-t", "2",
                        "--streams", "2", "--reply-tokens", "16", "--long-prompt-tokens", "600",
                        "--ctx-per-slot", "1024", "--settle", "0.5", "--window", "1",
                        "--short-every", "1", "--short-max", "2", "--json", str(out)],
                       capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    (row,) = json.loads(out.read_text())["rows"]
    assert row["server"] == "tern" and row["long_prefill_s"] > 0
    assert row["itl_base_p99_ms"] > 0 and row["itl_during_p99_ms"] > 0 and row["gaps_during"] > 0
    assert row["short_ttft_idle_ms"] > 0 and len(row["short_ttft_during_all_ms"]) >= 1
    m = re.search(r"tern's log: (\S+)", r.stdout + r.stderr)
    assert m, r.stdout + r.stderr
    t = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "step_trace.py"), m.group(1),
                        "--min-prompt", "500"], capture_output=True, text=True, timeout=120)
    assert t.returncode == 0, t.stdout + t.stderr
    assert re.search(r"^\d+ steps while the long prompt was prefilled", t.stdout, re.M), t.stdout
    s = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "step_trace.py"), m.group(1),
                        "--split"], capture_output=True, text=True, timeout=120)
    assert s.returncode == 0, s.stdout + s.stderr
    mixed = re.search(r"^mixed steps\s+(\d+)\s+([\d.]+)", s.stdout, re.M)
    assert mixed and int(mixed.group(1)) > 0, s.stdout


def test_lora_benchmark_smoke():
    # bench/lora.py (issue 31 section 4): throughput over 0, 1 and 2 adapters
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "lora.py"), "-t", "2", "--rank", "4",
                        "-n", "2", "--max-tokens", "4", "--adapters", "1,2"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = re.findall(r"^\s+(\d+)\s+([\d.]+)\s+([\d.]+)x", r.stdout, re.M)
    assert [int(n) for n, _, _ in rows] == [0, 1, 2], r.stdout
    assert all(float(tok) > 0 for _, tok, _ in rows), r.stdout
