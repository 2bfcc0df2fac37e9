"""examples/openai_image.py, image_conversation.py and video_clip.py against
the real server with the generated tiny pair of test_vision_serve.py (the SmolVLM-shaped text model
from SmolLM2 and a seeded tiny idefics3 projector): each runs as a user runs
it (a subprocess), and its functions' results are checked: the same picture
by base64 and by path gives the same answer and reuses the KV; later turns
of a conversation reuse the KV through the image; a clip (an AVI file and a
frame list) asked twice reuses it too."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from openai import OpenAI

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from test_media import avi, png  # noqa: E402
from test_vision_serve import pair  # noqa: E402,F401  (the generated tiny pair fixture)

from tern_server import TernServer  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def media(pair):
    """test_vision_serve's generated tiny pair; a photo, a clip and frames in its media folder."""
    m = Path(pair["media"])
    (m / "photo.png").write_bytes(png(60, 44, seed=3))
    (m / "clip.avi").write_bytes(avi(6, 32, 24, fps=4))
    for k in range(3):
        (m / f"f{k}.png").write_bytes(png(32, 24, seed=10 + k))
    return m


@pytest.fixture(scope="module")
def server(pair, media):
    with TernServer("--mmproj", pair["mmproj"], "--media-dir", str(media),
                    model=pair["text"]) as srv:
        yield srv


@pytest.fixture(scope="module")
def client(server):
    return OpenAI(base_url=server.url + "/v1", api_key="none")


def run_example(server, name: str, *args: str) -> str:
    r = subprocess.run([sys.executable, str(EXAMPLES / f"{name}.py"), "--url", server.url,
                        "--max-tokens", "8", *args], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_openai_image_base64_and_path_are_one_picture(server, client, media):
    mod = load("openai_image")
    a = mod.ask_image(client, "tern", mod.data_url(str(media / "photo.png")),
                      "What is this?", max_tokens=8)
    b = mod.ask_image(client, "tern", "photo.png", "What is this?", max_tokens=8)
    assert a["text"] and b["text"] == a["text"]
    assert b["prompt_tokens"] == a["prompt_tokens"]
    assert b["cached_tokens"] == (a["prompt_tokens"] - 1) // 32 * 32 > 0
    assert a["timings"]["image_n"] == 1
    out = run_example(server, "openai_image", "--image", str(media / "photo.png"),
                      "--media-path", "photo.png")
    assert "same picture, same answer: True" in out
    assert "from the KV cache" in out


def test_image_conversation_reuses_the_image_on_later_turns(server, client, media):
    mod = load("image_conversation")
    # A picture this server has not seen: turn 1 must encode it.
    (media / "conv.png").write_bytes(png(50, 50, seed=21))
    turns = mod.converse(client, "tern", mod.data_url(str(media / "conv.png")),
                         ["Describe it.", "And the colours?", "Anything else?"], max_tokens=8)
    assert turns[0]["timings"]["image_n"] == 1 and turns[0]["timings"]["image_cache_hits"] == 0
    assert turns[0]["timings"]["image_encode_ms"] > 0
    for k in (1, 2):
        # The image sits inside the reused prefix: no rows fetched, most of the prompt cached.
        assert "image_n" not in turns[k]["timings"]  # left out when no rows were fetched
        assert turns[k]["cached_tokens"] >= turns[0]["prompt_tokens"] // 32 * 32 - 32
        assert turns[k]["prompt_tokens"] > turns[k - 1]["prompt_tokens"]
    out = run_example(server, "image_conversation", "--image", "conv.png", "--as-path",
                      "One?", "Two?")
    assert out.count("turn ") >= 2 and "TTFT" in out


def test_video_clip_file_and_frames(server, client, media):
    mod = load("video_clip")
    part = mod.video_part(str(media / "clip.avi"), None, False, fps=4, max_frames=4)
    first, again = (mod.ask_video(client, "tern", part, q, 8) for q in ("What happens?", "Why?"))
    assert first["timings"]["image_n"] == 4  # four frames sampled from the clip
    assert again["cached_tokens"] > 0 and again["prompt_tokens"] > 4 * 16
    frames = [str(media / f"f{k}.png") for k in range(3)]
    out = run_example(server, "video_clip", "--frames", *frames)
    assert "frames fetched 3" in out
    out = run_example(server, "video_clip", "--clip", "clip.avi", "--as-path", "--fps", "4",
                      "--max-frames", "2", "--questions", "Hm?")
    assert "frames fetched" in out


def test_examples_report_a_clear_error_for_a_bad_image(server, tmp_path):
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not an image at all")
    r = subprocess.run([sys.executable, str(EXAMPLES / "openai_image.py"), "--url", server.url,
                        "--image", str(bad)], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "HTTP 400 invalid_image" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
