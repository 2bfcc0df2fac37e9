"""`tern gen-mmproj --type ultravox|qwen2a|voxtral` and `tern encode-audio`,
as a user runs them: seeded tiny audio projectors (one at SmolLM2's width,
576, the pair the tests serve), a WAV file and a synthetic clip, the
embeddings written and their shape checked; bad requests refused with a
message."""
import math
import os
import struct
import subprocess
import wave

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TERN = os.path.join(ROOT, "build", "tern")


def tern(*args, timeout=300):
    return subprocess.run([TERN, *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("audio")
    f = {t: str(d / f"{t}.gguf") for t in ("ultravox", "qwen2a", "voxtral")}
    for t, path in f.items():
        r = tern("gen-mmproj", "--type", t, "--seed", "3", "--n-embd", "576", "--out", path)
        assert r.returncode == 0, r.stderr
        assert f"{t} audio" in r.stdout and "of 576 per 30 s" in r.stdout, r.stdout
    wav = d / "tone.wav"
    with wave.open(str(wav), "wb") as w:  # 2.5 s of 440 Hz, 16-bit mono at 22.05 kHz
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(22050)
        w.writeframes(b"".join(struct.pack("<h", int(12000 * math.sin(2 * math.pi * 440 * i / 22050)))
                               for i in range(int(22050 * 2.5))))
    f["wav"] = str(wav)
    f["dir"] = d
    return f


@pytest.mark.parametrize("kind,tokens", [("ultravox", 375), ("qwen2a", 750), ("voxtral", 375)])
def test_encode_audio_writes_one_chunk_of_rows(files, kind, tokens):
    out = files["dir"] / f"{kind}.f32"
    r = tern("encode-audio", "--mmproj", files[kind], "--audio", files["wav"], "-t", "2", "-r", "1",
             "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert f"1 chunk(s) of {tokens} tokens ({kind})" in r.stdout, r.stdout
    data = out.read_bytes()
    assert len(data) == tokens * 576 * 4
    values = struct.unpack(f"<{tokens * 576}f", data)
    assert all(math.isfinite(v) for v in values)
    assert any(v != 0 for v in values)


def test_a_31_second_clip_is_two_chunks(files):
    r = tern("encode-audio", "--mmproj", files["ultravox"], "--seconds", "31", "-t", "2", "-r", "1")
    assert r.returncode == 0, r.stderr
    assert "2 chunk(s) of 375 tokens" in r.stdout, r.stdout


def test_refusals_name_the_problem(files):
    r = tern("gen-mmproj", "--type", "whisper", "--out", str(files["dir"] / "x.gguf"))
    assert r.returncode != 0 and "whisper" in (r.stderr + r.stdout)
    # An image projector has no audio encoder.
    img = str(files["dir"] / "img.gguf")
    assert tern("gen-mmproj", "--type", "idefics3", "--out", img).returncode == 0
    r = tern("encode-audio", "--mmproj", img, "--seconds", "1")
    assert r.returncode != 0 and "no audio encoder" in r.stderr, r.stderr
    # An audio projector is not an image one.
    r = tern("encode-image", "--mmproj", files["qwen2a"], "--size", "32")
    assert r.returncode != 0 and "audio encoder only" in r.stderr, r.stderr
    # Not audio at all.
    r = tern("encode-audio", "--mmproj", files["ultravox"], "--audio", img)
    assert r.returncode != 0 and r.stderr.strip(), r.stderr
