"""Audio through the real server (`tern serve --mmproj` with a seeded tiny
Ultravox audio projector from `tern gen-mmproj`, d_out 576, beside SmolLM2,
which needs no audio special tokens): the OpenAI SDK with input_audio; a
second turn about the same clip encodes nothing (its KV is reused); the same
sound as WAV and as FLAC is one embedding-cache entry; a restarted server
finds it in --mm-cache-dir; damaged, truncated and over-long clips are 400s
naming the part while the server keeps serving; WebSocket `generate` and
Responses `input_audio` carry audio too; Anthropic Messages refuses an audio
block; a server without an audio encoder says so."""
from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest
import requests
import websockets
from openai import OpenAI

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audio_clips import flac_bytes, tone, wav_bytes  # noqa: E402
from tern_server import TernServer, model_path, tern_bin  # noqa: E402

SAMPLES = tone(1.5)
WAV = wav_bytes(SAMPLES)
FLAC = flac_bytes(SAMPLES)
# A long question after the clip keeps it well inside the first turn's
# reusable KV blocks.
QUESTION = ("Listen to the recording above carefully and then describe in a few plain words what "
            "kind of sound it is, how high it is, and whether it changes over time.")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def audio_part(data: bytes, fmt: str = "wav") -> dict:
    return {"type": "input_audio", "input_audio": {"data": b64(data), "format": fmt}}


def user(data: bytes, fmt: str = "wav", text: str = QUESTION) -> dict:
    return {"role": "user", "content": [audio_part(data, fmt), {"type": "text", "text": text}]}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("audio")
    media = d / "media"
    media.mkdir()
    (media / "tone.wav").write_bytes(WAV)
    f = {"mmproj": str(d / "ultravox.gguf"), "media": str(media), "cache": str(d / "mmcache")}
    r = subprocess.run([str(tern_bin()), "gen-mmproj", "--type", "ultravox", "--shape", "tiny",
                        "--seed", "7", "--n-embd", "576", "--out", f["mmproj"]],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return f


def serve(files) -> TernServer:
    return TernServer("--mmproj", files["mmproj"], "--media-dir", files["media"],
                      "--mm-cache-dir", files["cache"], "--max-audio-seconds", "5")


@pytest.fixture(scope="module")
def srv(files):
    with serve(files) as s:
        yield s


def chat(srv, messages, max_tokens: int = 6) -> requests.Response:
    return requests.post(srv.url + "/v1/chat/completions", timeout=600, json={
        "messages": messages, "max_tokens": max_tokens, "temperature": 0})


def ok(r: requests.Response) -> dict:
    assert r.status_code == 200, r.text
    return r.json()


def still_serving(srv):
    ok(chat(srv, [{"role": "user", "content": "Hi"}], max_tokens=2))


def test_models_say_audio(srv):
    caps = requests.get(srv.url + "/v1/models", timeout=30).json()["data"][0]["capabilities"]
    assert caps["audio"] is True and caps["vision"] is False, caps


def test_openai_sdk_input_audio(srv):
    client = OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=0, timeout=600)
    r = client.chat.completions.create(model="tern", max_tokens=6, temperature=0, messages=[
        {"role": "system", "content": "You describe sounds (sdk)."}, user(WAV)])
    assert r.choices[0].message.content
    t = r.model_extra["timings"]
    assert t["audio_n"] == 1 and t["audio_encode_ms"] > 0, t
    assert "image_n" not in t


def test_second_turn_about_the_clip_encodes_nothing(srv):
    first = [{"role": "system", "content": "You describe sounds (two turns)."}, user(WAV)]
    a = ok(chat(srv, first))
    assert a["timings"]["audio_n"] == 1
    second = first + [{"role": "assistant", "content": a["choices"][0]["message"]["content"]},
                      {"role": "user", "content": "And is it loud?"}]
    b = ok(chat(srv, second))
    t = b["timings"]
    assert t.get("audio_n", 0) == 0, t  # the clip's KV came from the prefix cache
    assert t["cache_n"] > 0, t


def test_wav_and_flac_are_one_cache_entry(srv):
    entries = lambda: srv.metrics().get('tern_mm_cache_entries{tier="dram"}', 0)  # noqa: E731
    a = ok(chat(srv, [{"role": "system", "content": "One sound, two files (wav)."}, user(WAV)]))
    n = entries()
    b = ok(chat(srv, [{"role": "system", "content": "Same sound as FLAC here."},
                      user(FLAC, "flac")]))
    assert b["timings"]["audio_n"] == 1 and b["timings"]["audio_cache_hits"] == 1, b["timings"]
    assert entries() == n
    assert a["usage"]["prompt_tokens"] > 0


def test_audio_url_under_the_media_dir(srv, files):
    part = {"type": "audio_url", "audio_url": {"url": files["media"] + "/tone.wav"}}
    r = ok(chat(srv, [{"role": "system", "content": "A file under the media dir."},
                      {"role": "user", "content": [part, {"type": "text", "text": "What?"}]}]))
    assert r["timings"]["audio_n"] == 1 and r["timings"]["audio_cache_hits"] == 1
    bad = {"type": "audio_url", "audio_url": {"url": "/etc/passwd"}}
    r = chat(srv, [{"role": "user", "content": [bad]}])
    assert r.status_code == 403, r.text
    assert r.json()["error"]["param"] == "messages[0].content[0].audio_url.url"


@pytest.mark.parametrize("data, fmt, code", [
    (b"RIFF\x00\x00\x00\x00WAVEjunkjunkjunk" * 4, "wav", "invalid_audio"),  # damaged
    (WAV[:30], "wav", "invalid_audio"),                                       # truncated header
    (FLAC[:20], "flac", "invalid_audio"),                                     # truncated
    (wav_bytes(tone(0.01) * 600), "wav", "media_too_large"),  # 6 s > 5 s
])
def test_bad_clips_are_refused_and_the_server_keeps_serving(srv, data, fmt, code):
    r = chat(srv, [{"role": "user", "content": [audio_part(data, fmt)]}])
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == "messages[0].content[0].input_audio.data", err
    assert err["code"] == code, err
    still_serving(srv)


def test_part_shapes_name_the_param(srv):
    for part, param in (
            ({"type": "input_audio", "input_audio": {"data": b64(WAV), "format": "aiff"}},
             "messages[0].content[0].input_audio.format"),
            ({"type": "input_audio", "input_audio": {"format": "wav"}},
             "messages[0].content[0].input_audio.data"),
            ({"type": "input_audio", "input_audio": {"data": "%%%", "format": "wav"}},
             "messages[0].content[0].input_audio.data")):
        r = chat(srv, [{"role": "user", "content": [part]}])
        assert r.status_code == 400, r.text
        assert r.json()["error"]["param"] == param, r.text
    still_serving(srv)


def test_responses_input_audio(srv):
    client = OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=0, timeout=600)
    r = client.responses.create(model="tern", max_output_tokens=4, temperature=0, input=[
        {"role": "user", "content": [audio_part(WAV), {"type": "input_text", "text": "What?"}]}])
    assert r.output_text is not None
    # A continuation shows the clip again (decoded from its stored source).
    r2 = client.responses.create(model="tern", max_output_tokens=4, temperature=0,
                                 previous_response_id=r.id, input="And then?")
    assert r2.output_text is not None


def test_websocket_generate_with_audio(srv):
    async def go():
        ws = await websockets.connect(srv.ws_url, max_size=None)
        assert json.loads(await ws.recv())["type"] == "hello"
        await ws.send(json.dumps({"type": "generate", "id": "a", "max_tokens": 3,
                                  "messages": [{"role": "system", "content": "ws audio"},
                                               user(WAV)]}))
        while True:
            m = json.loads(await asyncio.wait_for(ws.recv(), 300))
            if m["type"] in ("done", "error"):
                break
        await ws.close()
        return m

    m = asyncio.run(go())
    assert m["type"] == "done", m
    assert m["timings"]["audio_n"] == 1, m


def test_anthropic_has_no_audio_block(srv):
    r = requests.post(srv.url + "/v1/messages", timeout=60, json={
        "model": "tern", "max_tokens": 4, "messages": [{"role": "user", "content": [
            {"type": "input_audio", "input_audio": {"data": b64(WAV), "format": "wav"}}]}]})
    assert r.status_code == 400, r.text
    assert "audio" in r.text and "messages[0].content[0]" in r.text, r.text
    still_serving(srv)


def test_restart_finds_the_clip_in_the_cache_dir(srv, files):
    ok(chat(srv, [{"role": "system", "content": "before the restart"}, user(WAV)]))
    with serve(files) as again:
        r = ok(chat(again, [{"role": "system", "content": "after the restart"}, user(FLAC, "flac")]))
        t = r["timings"]
        assert t["audio_n"] == 1 and t["audio_cache_hits"] == 1, t


def test_server_equals_tern_run_audio(srv, files):
    """The same clip and question, greedy: the server's chat equals `tern run
    --chat --mmproj --audio` with the clip at <__audio__> in the user turn."""
    r = ok(chat(srv, [user(WAV, text="Name the sound.")], max_tokens=8))
    run = subprocess.run([str(tern_bin()), "run", "--mmproj", files["mmproj"], "--audio",
                          files["media"] + "/tone.wav", "--chat", "-p", "<__audio__>Name the sound.",
                          "-n", "8", "--temp", "0"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == r["choices"][0]["message"]["content"].strip()


def test_a_text_only_server_refuses_audio(server):
    r = chat(server, [{"role": "user", "content": [audio_part(WAV)]}])
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "model_not_multimodal" and "audio" in err["message"], err
    caps = requests.get(server.url + "/v1/models", timeout=30).json()["data"][0]["capabilities"]
    assert caps["audio"] is False


def test_a_half_minute_clip_fits_the_default_body_limit(files):
    """With --mmproj the default --body-limit is 8 MiB (base64 media ride in
    the body): 29 s of 16 kHz WAV (1.24 MB of base64, over the 1 MiB of a
    text-only server) is answered; a body over 8 MiB is still a 413."""
    clip = wav_bytes(tone(29.0, freq=330.0))
    assert len(b64(clip)) > 1 << 20
    with TernServer("--mmproj", files["mmproj"]) as s:
        body = ok(chat(s, [user(clip, text="What is it?")], max_tokens=2))
        assert body["timings"]["audio_n"] == 1
        big = {"messages": [{"role": "user", "content": "x" * (8 << 20)}], "max_tokens": 1}
        r = requests.post(s.url + "/v1/chat/completions", json=big, timeout=600)
        assert r.status_code == 413, r.text
        assert r.json()["error"]["code"] == "request_too_large"
        still_serving(s)


@pytest.mark.parametrize("kind, rows, wrap", [("qwen2a", 750, 2), ("voxtral", 375, 1)])
def test_wrapping_projectors_serve_and_run(files, tmp_path, kind, rows, wrap):
    """qwen2a (<|audio_bos|> rows <|audio_eos|>) and voxtral ([BEGIN_AUDIO]
    rows) beside SmolLM2 with those tokens added (`tern gen-vlm-text --tokens
    audio`): a clip costs its rows plus the wrapping tokens in the prompt, and
    the server's greedy answer equals `tern run --audio`'s."""
    text, mmproj = tmp_path / "smollm2-audio.gguf", tmp_path / f"{kind}.gguf"
    for args in (["gen-vlm-text", "--tokens", "audio", "--from", str(model_path()),
                  "--out", str(text)],
                 ["gen-mmproj", "--type", kind, "--seed", "5", "--n-embd", "576",
                  "--out", str(mmproj)]):
        r = subprocess.run([str(tern_bin()), *args], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
    with TernServer("--mmproj", str(mmproj), model=text) as s:
        assert requests.get(s.url + "/v1/models", timeout=30).json()["data"][0][
            "capabilities"]["audio"] is True
        with_clip = ok(chat(s, [user(WAV, text="Name the sound.")], max_tokens=8))
        without = ok(chat(s, [{"role": "user", "content": "Name the sound."}], max_tokens=1))
        assert with_clip["timings"]["audio_n"] == 1
        assert (with_clip["usage"]["prompt_tokens"] - without["usage"]["prompt_tokens"]
                == rows + wrap)
        run = subprocess.run([str(tern_bin()), "run", "-m", str(text), "--mmproj", str(mmproj),
                              "--audio", files["media"] + "/tone.wav", "--chat", "-p",
                              "<__audio__>Name the sound.", "-n", "8", "--temp", "0"],
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip() == with_clip["choices"][0]["message"]["content"].strip()
