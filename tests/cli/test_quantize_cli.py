"""tern quantize and gen-arch-model --weights on small seeded models: what lands
where (fallbacks included), that the files load, and the errors a user sees."""
import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TERN = os.path.join(ROOT, "build", "tern")


def tern(*args, timeout=300):
    return subprocess.run([TERN, *args], capture_output=True, text=True, timeout=timeout)


def gen_model(path, weights="q8_0"):
    r = tern("gen-arch-model", "--arch", "llama", "--seed", "3", "--weights", weights, "--out", str(path))
    assert r.returncode == 0, r.stdout + r.stderr
    return path


def test_gen_arch_model_writes_every_quantizable_type(tmp_path):
    for t in ("iq2_xxs", "IQ1_M", "q4_k", "q6_k", "nvfp4"):
        m = gen_model(tmp_path / f"{t}.gguf", t)
        r = tern("run", "-m", str(m), "-p", "hi", "-n", "2", "--temp", "0")
        assert r.returncode == 0, t + r.stderr
    r = tern("gen-arch-model", "--arch", "llama", "--weights", "q9_9", "--out", str(tmp_path / "x.gguf"))
    assert r.returncode != 0 and "valid:" in r.stderr and "IQ2_XXS" in r.stderr


def test_quantize_pure_recipe_and_fallbacks(tmp_path):
    src = gen_model(tmp_path / "src.gguf")
    out = tmp_path / "iq2.gguf"
    r = tern("quantize", str(src), str(out), "iq2_xxs", "--pure", "-t", "2")
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"IQ2_XXS\s+\d+ tensors", r.stdout) or "fallback IQ2_XXS -> IQ4_NL" in r.stdout, r.stdout
    assert re.search(r"\d+(\.\d+)? MB -> \d+(\.\d+)? MB in", r.stdout)
    assert tern("run", "-m", str(out), "-p", "hi", "-n", "2", "--temp", "0").returncode == 0
    # the same bytes whatever the thread count
    out1 = tmp_path / "iq2-1.gguf"
    assert tern("quantize", str(src), str(out1), "IQ2_XXS", "--pure", "-t", "1").returncode == 0
    assert out.read_bytes() == out1.read_bytes()
    # without --pure the embeddings and the head stay Q8_0; --tensor-type overrides by name
    out2 = tmp_path / "mixed.gguf"
    r = tern("quantize", str(src), str(out2), "q4_0", "--tensor-type", r"ffn_down=q5_0", "-t", "2")
    assert r.returncode == 0, r.stderr
    assert re.search(r"Q8_0\s+\d+ tensors", r.stdout) and re.search(r"Q5_0\s+\d+ tensors", r.stdout), r.stdout


def test_quantize_errors_are_clear(tmp_path):
    src = gen_model(tmp_path / "src.gguf")
    r = tern("quantize", str(src), str(tmp_path / "o.gguf"), "Q3_K_M")
    assert r.returncode == 1 and "unknown quantization type 'Q3_K_M'; valid: F32" in r.stderr
    r = tern("quantize", str(tmp_path / "missing.gguf"), str(tmp_path / "o.gguf"), "q4_0")
    assert r.returncode == 1 and "missing.gguf" in r.stderr
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\xff" * 16)
    r = tern("quantize", str(bad), str(tmp_path / "o.gguf"), "q4_0")
    assert r.returncode == 1 and "bad.gguf" in r.stderr
    r = tern("quantize", str(src), str(tmp_path / "no" / "dir" / "o.gguf"), "q4_0")
    assert r.returncode == 1 and "cannot open for writing" in r.stderr
    r = tern("quantize", str(src), str(tmp_path / "o.gguf"), "q4_0", "--tensor-type", "ffn(=q4_0")
    assert r.returncode == 1 and "not a regular expression" in r.stderr
    if os.path.exists("/dev/full"):  # a full disk: the error, and no file left behind
        os.symlink("/dev/full", tmp_path / "full.gguf.part")
        r = tern("quantize", str(src), str(tmp_path / "full.gguf"), "q4_0")
        assert r.returncode == 1 and "No space left on device" in r.stderr, r.stderr
        assert not (tmp_path / "full.gguf").exists()
