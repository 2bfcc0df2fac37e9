"""Runs tests/e2e/web_test.mjs (headless Chromium via playwright-core) against
a real tern server."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tern_server import REPO, TernServer, missing_reason, model_path, tern_bin
from test_media import png

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


def why_skip() -> str | None:
    reason = missing_reason()
    if reason:
        return reason
    if not shutil.which("node"):
        return "node not installed"
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} not installed"
    if not (REPO / "node_modules" / "playwright-core").exists():
        return "playwright-core not installed (run `npm install` at the repo root)"
    return None


@pytest.mark.skipif(why_skip() is not None, reason=why_skip() or "")
def test_demo_page_streams_and_stops():
    with TernServer("--ctx", "4096", "--max-batch", "8") as srv:
        env = {**os.environ, "TERN_URL": srv.url}
        r = subprocess.run(["node", str(REPO / "tests" / "e2e" / "web_test.mjs")], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=600)
        print(r.stdout)
        assert r.returncode == 0, f"{r.stdout}\n{r.stderr}\n--- server log ---\n{srv.log()[-3000:]}"
        assert srv.stop() == 0


@pytest.mark.skipif(why_skip() is not None, reason=why_skip() or "")
def test_demo_page_sends_an_image_and_marks_the_cached_one(tmp_path):
    """web_image_test.mjs against a server with a generated tiny pair (the
    SmolVLM-shaped text model from SmolLM2, a seeded tiny idefics3 projector)."""
    text, mmproj, image = tmp_path / "smolvlm-text.gguf", tmp_path / "i3.gguf", tmp_path / "photo.png"
    image.write_bytes(png(48, 40, seed=9))
    for args in (["gen-vlm-text", "--from", str(model_path()), "--out", str(text)],
                 ["gen-mmproj", "--type", "idefics3", "--seed", "42", "--n-embd", "576",
                  "--out", str(mmproj)]):
        r = subprocess.run([str(tern_bin()), *args], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
    with TernServer("--mmproj", str(mmproj), model=text) as srv:
        env = {**os.environ, "TERN_URL": srv.url, "TERN_IMAGE": str(image)}
        r = subprocess.run(["node", str(REPO / "tests" / "e2e" / "web_image_test.mjs")], cwd=REPO,
                           env=env, capture_output=True, text=True, timeout=600)
        print(r.stdout)
        assert r.returncode == 0, f"{r.stdout}\n{r.stderr}\n--- server log ---\n{srv.log()[-3000:]}"
        assert srv.stop() == 0


@pytest.mark.skipif(why_skip() is not None, reason=why_skip() or "")
def test_demo_page_sends_audio_and_records_the_microphone(tmp_path):
    """web_audio_test.mjs against SmolLM2 with a seeded tiny Ultravox audio
    projector of its width (tern gen-mmproj --type ultravox)."""
    from audio_clips import tone, wav_bytes

    mmproj, clip = tmp_path / "ultravox.gguf", tmp_path / "tone.wav"
    clip.write_bytes(wav_bytes(tone(1.0)))
    r = subprocess.run([str(tern_bin()), "gen-mmproj", "--type", "ultravox", "--shape", "tiny",
                        "--seed", "3", "--n-embd", "576", "--out", str(mmproj)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    with TernServer("--mmproj", str(mmproj)) as srv:
        env = {**os.environ, "TERN_URL": srv.url, "TERN_AUDIO": str(clip)}
        r = subprocess.run(["node", str(REPO / "tests" / "e2e" / "web_audio_test.mjs")], cwd=REPO,
                           env=env, capture_output=True, text=True, timeout=600)
        print(r.stdout)
        assert r.returncode == 0, f"{r.stdout}\n{r.stderr}\n--- server log ---\n{srv.log()[-3000:]}"
        assert srv.stop() == 0
