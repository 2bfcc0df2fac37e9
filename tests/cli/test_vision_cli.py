"""`tern run --mmproj --image` and `tern chat` with `/image`, as a user runs
them: the real binary, real text models (Gemma 3 270M; the SmolVLM-shaped
text model `tern gen-vlm-text` makes from SmolLM2) and seeded tiny
projectors of their widths from `tern gen-mmproj`."""
import os
import struct
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TERN = os.path.join(ROOT, "build", "tern")
SMOLLM2 = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
GEMMA3 = os.path.join(ROOT, "models", "gemma-3-270m-it-Q4_K_M.gguf")


def tern(*args, stdin=None, timeout=300):
    return subprocess.run([TERN, *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout)


def write_bmp(path, w, h, seed):
    """A 24-bit BMP of a seeded pattern (rows bottom-up, BGR, padded to 4 bytes)."""
    row = (w * 3 + 3) // 4 * 4
    data = bytearray()
    for y in range(h - 1, -1, -1):
        r = bytearray()
        for x in range(w):
            r += bytes(((x * seed + y * 3) & 255, (y * seed + x) & 255, ((x ^ y) * seed) & 255))
        data += r + b"\0" * (row - w * 3)
    hdr = b"BM" + struct.pack("<IHHI", 54 + len(data), 0, 0, 54) + struct.pack(
        "<IiiHHIIiiII", 40, w, h, 1, 24, 0, len(data), 2835, 2835, 0, 0)
    path.write_bytes(hdr + bytes(data))
    return str(path)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("vision")
    f = {"smolvlm": str(d / "smolvlm-text.gguf"), "i3": str(d / "i3.gguf"),
         "g3": str(d / "g3.gguf"), "mlp": str(d / "mlp.gguf"),
         "a": write_bmp(d / "a.bmp", 64, 48, 5), "b": write_bmp(d / "b.bmp", 40, 70, 11)}
    for args in (["gen-vlm-text", "--from", SMOLLM2, "--out", f["smolvlm"]],
                 ["gen-mmproj", "--type", "idefics3", "--seed", "42", "--n-embd", "576",
                  "--out", f["i3"]],
                 ["gen-mmproj", "--type", "gemma3", "--seed", "42", "--n-embd", "640",
                  "--out", f["g3"]],
                 ["gen-mmproj", "--type", "mlp", "--n-embd", "576", "--out", f["mlp"]]):
        r = tern(*args)
        assert r.returncode == 0, r.stderr
    return f


def run(model, mmproj, images, prompt, *extra):
    args = ["run", "-m", model, "--mmproj", mmproj, "-p", prompt, "-n", "12", "--temp", "0",
            "--stats", *extra]
    for i in images:
        args += ["--image", i]
    return tern(*args)


PAIRS = {"smolvlm": ("smolvlm", "i3"), "gemma3": (GEMMA3, "g3"),
         "llava": (SMOLLM2, "mlp")}  # LLaVA wraps nothing: the plain text model pairs


@pytest.mark.parametrize("pair", ["smolvlm", "gemma3", "llava"])
def test_run_with_an_image_generates_and_the_image_matters(files, pair):
    model, mmproj = PAIRS[pair]
    model, mmproj = files.get(model, model), files[mmproj]
    prompt = "<__media__>\nIt shows"
    a = run(model, mmproj, [files["a"]], prompt)
    assert a.returncode == 0, a.stderr
    assert a.stdout.strip(), a.stderr
    assert "generated 12 tokens" in a.stderr
    again = run(model, mmproj, [files["a"]], prompt)
    assert again.stdout == a.stdout  # greedy: deterministic
    b = run(model, mmproj, [files["b"]], prompt)
    assert b.returncode == 0, b.stderr
    assert b.stdout != a.stdout, "another image, the same text"


def test_two_images_without_markers_go_before_the_text(files):
    r = run(files["smolvlm"], files["i3"], [files["a"], files["b"]], "Compare them:")
    assert r.returncode == 0, r.stderr
    # idefics3 tiny: each image is 5 tiles of 4 rows plus its wrapping tokens.
    prompt_tokens = int(r.stderr.split("prompt: ")[1].split(" ")[0])
    assert prompt_tokens > 2 * 5 * 4


def test_mismatched_pairs_are_clear_errors(files):
    # SmolLM2 itself lacks SmolVLM's special tokens.
    r = run(SMOLLM2, files["i3"], [files["a"]], "hi")
    assert r.returncode != 0
    assert "<fake_token_around_image>" in r.stderr and "vocabulary" in r.stderr
    # A projector of another width.
    r = run(GEMMA3, files["i3"], [files["a"]], "hi")
    assert r.returncode != 0
    assert "576" in r.stderr and "640" in r.stderr
    # An mlp (LLaVA) projector of another width.
    r = run(GEMMA3, files["mlp"], [files["a"]], "hi")
    assert r.returncode != 0
    assert "576" in r.stderr and "640" in r.stderr and "n_embd" in r.stderr


def test_bad_image_input_is_a_clear_error(files, tmp_path):
    r = tern("run", "-m", files["smolvlm"], "--image", files["a"], "-p", "hi", "-n", "2")
    assert r.returncode != 0 and "--mmproj" in r.stderr
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    r = run(files["smolvlm"], files["i3"], [str(bad)], "hi")
    assert r.returncode != 0 and "bad.png" in r.stderr
    r = run(files["smolvlm"], files["i3"], [files["a"]], "<__media__> and <__media__>")
    assert r.returncode != 0 and "marker" in r.stderr


def test_chat_image_command(files):
    script = "\n".join(["/image " + files["a"], "What is in the picture?", "/image /nonexistent.png",
                        "And now?", "/exit"]) + "\n"
    r = tern("chat", "-m", files["smolvlm"], "--mmproj", files["i3"], "-n", "8", "--temp", "0",
             "--stats", stdin=script)
    assert r.returncode == 0, r.stderr
    assert "image " + files["a"] + " added" in r.stderr
    assert "cannot open image /nonexistent.png" in r.stderr
    stats = [l for l in r.stderr.splitlines() if l.startswith("prompt: ")]
    assert len(stats) == 2
    # The second turn reuses the first turn's KV, image included.
    cached = int(stats[1].split("(")[1].split(" ")[0])
    assert cached >= 32, stats
    # Without --mmproj, /image explains itself.
    r = tern("chat", "-m", files["smolvlm"], "-n", "4", stdin="/image " + files["a"] + "\n/exit\n")
    assert r.returncode == 0 and "--mmproj" in r.stderr
