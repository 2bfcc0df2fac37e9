"""Images in chat through the real server (`tern serve --mmproj`): the
SmolVLM-shaped text model (`tern gen-vlm-text` from SmolLM2) with a seeded
tiny idefics3 projector (`tern gen-mmproj`). The same picture sent as a data:
URL and as a path under --media-dir is the same picture (same greedy text,
and the second request reuses the KV around it); the server's answer equals
`tern run --chat --mmproj --image` on the same files; the embedding cache
serves the rows when the text before the image changes; and a different
picture changes the KV key at the image."""
from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest
import requests
from openai import OpenAI

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from test_vision_cli import SMOLLM2, TERN, tern, write_bmp  # noqa: E402

from tern_server import TernServer  # noqa: E402

QUESTION = "Describe the picture."


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("vlm")
    media = d / "media"
    media.mkdir()
    f = {"text": str(d / "smolvlm-text.gguf"), "mmproj": str(d / "i3.gguf"), "media": str(media),
         "a": write_bmp(media / "a.bmp", 64, 48, 5), "b": write_bmp(media / "b.bmp", 40, 70, 11)}
    for args in (["gen-vlm-text", "--from", SMOLLM2, "--out", f["text"]],
                 ["gen-mmproj", "--type", "idefics3", "--seed", "42", "--n-embd", "576",
                  "--out", f["mmproj"]]):
        r = tern(*args)
        assert r.returncode == 0, r.stderr
    return f


@pytest.fixture(scope="module")
def server(pair):
    with TernServer("--mmproj", pair["mmproj"], "--media-dir", pair["media"],
                    model=pair["text"]) as srv:
        yield srv


def data_url(path: str) -> str:
    return "data:image/bmp;base64," + base64.b64encode(Path(path).read_bytes()).decode()


def ask(server, url: str, system: str | None = None, max_tokens: int = 12) -> dict:
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": QUESTION}]})
    r = requests.post(server.url + "/v1/chat/completions", timeout=600,
                      json={"messages": messages, "max_tokens": max_tokens, "temperature": 0})
    assert r.status_code == 200, r.text
    return r.json()


def metric(server, name: str) -> float:
    return server.metrics().get(name, 0.0)


def test_models_say_vision(server):
    models = requests.get(server.url + "/v1/models", timeout=30).json()["data"]
    assert models[0]["capabilities"]["vision"] is True


def test_data_url_and_path_are_the_same_picture_and_match_tern_run(server, pair):
    first = ask(server, data_url(pair["a"]))
    text = first["choices"][0]["message"]["content"]
    t = first["timings"]  # the first time this server sees the picture: encoded
    assert t["image_n"] == 1 and t["image_cache_hits"] == 0 and t["image_encode_ms"] > 0
    n_prompt = first["usage"]["prompt_tokens"]
    plain = requests.post(server.url + "/tokenize", timeout=60, json={
        "messages": [{"role": "user", "content": QUESTION}], "add_generation_prompt": True}).json()
    assert n_prompt > len(plain["tokens"]) + 16  # the image's tiles are in the prompt
    # The same file by path: same text, and the KV up to the question is reused.
    again = ask(server, pair["a"])
    assert again["choices"][0]["message"]["content"] == text
    assert again["usage"]["prompt_tokens"] == n_prompt
    assert again["usage"]["prompt_tokens_details"]["cached_tokens"] == (n_prompt - 1) // 32 * 32
    # tern run on the same files builds the same prompt and gives the same text.
    r = subprocess.run([TERN, "run", "-m", pair["text"], "--mmproj", pair["mmproj"], "--image",
                        pair["a"], "--chat", "-p", "<__media__>" + QUESTION, "-n", "12",
                        "--temp", "0"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == text.strip()


def test_embedding_cache_serves_the_rows_when_the_text_before_changes(server, pair):
    ask(server, data_url(pair["a"]), system="You are terse.")
    hits = metric(server, 'tern_mm_cache_hits_total{tier="dram"}')
    r = ask(server, data_url(pair["a"]), system="You are verbose and friendly.")
    assert metric(server, 'tern_mm_cache_hits_total{tier="dram"}') > hits
    assert r["timings"]["image_n"] == 1 and r["timings"]["image_cache_hits"] == 1
    assert r["choices"][0]["message"]["content"]


def test_a_different_picture_does_not_share_kv_at_the_image(server, pair):
    a = ask(server, data_url(pair["a"]), system="Picture check.")
    b = ask(server, data_url(pair["b"]), system="Picture check.")
    # The image starts inside the first 32-token block, so a different
    # picture shares no block with a; the same picture again shares them all.
    assert b["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    b2 = ask(server, data_url(pair["b"]), system="Picture check.")
    assert b2["usage"]["prompt_tokens_details"]["cached_tokens"] == (b["usage"]["prompt_tokens"] - 1) // 32 * 32
    assert b2["choices"][0]["message"]["content"] == b["choices"][0]["message"]["content"]
    assert a["choices"][0]["message"]["content"] != "" and b["choices"][0]["message"]["content"] != ""


def test_openai_sdk_streams_an_image_chat(server, pair):
    client = OpenAI(base_url=server.url + "/v1", api_key="none")
    stream = client.chat.completions.create(
        model="tern", max_tokens=8, temperature=0, stream=True,
        messages=[{"role": "user", "content": [
            {"type": "text", "text": "Look:"},
            {"type": "image_url", "image_url": {"url": data_url(pair["b"]), "detail": "auto"}}]}])
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text


def test_bad_images_are_400_and_the_server_keeps_serving(server, pair):
    for url, status in [("data:image/png;base64,AAAA", 400), ("/etc/passwd", 403)]:
        r = requests.post(server.url + "/v1/chat/completions", timeout=60, json={
            "max_tokens": 2, "messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": url}}]}]})
        assert r.status_code == status, r.text
    # A literal media marker without an image is refused, not crashed on.
    r = requests.post(server.url + "/v1/chat/completions", timeout=60, json={
        "max_tokens": 2, "messages": [{"role": "user", "content": [
            {"type": "text", "text": "<__media__> and"},
            {"type": "image_url", "image_url": {"url": data_url(pair["a"])}}]}]})
    assert r.status_code == 400, r.text
    assert ask(server, data_url(pair["a"]))["choices"][0]["message"]["content"]


# LLaVA-1.5 style (`mlp`): the plain SmolLM2 (no wrapping tokens needed) with a
# seeded tiny mlp projector of its width, on its own server.
@pytest.fixture(scope="module")
def llava(tmp_path_factory, pair):
    mmproj = str(tmp_path_factory.mktemp("llava") / "mlp.gguf")
    r = tern("gen-mmproj", "--type", "mlp", "--seed", "42", "--n-embd", "576", "--out", mmproj)
    assert r.returncode == 0, r.stderr
    with TernServer("--mmproj", mmproj, "--media-dir", pair["media"], model=SMOLLM2) as srv:
        yield srv, mmproj


def test_llava_pair_serves_an_image_chat_like_tern_run(llava, pair):
    srv, mmproj = llava
    first = ask(srv, data_url(pair["a"]))
    text = first["choices"][0]["message"]["content"]
    assert first["timings"]["image_n"] == 1
    plain = requests.post(srv.url + "/tokenize", timeout=60, json={
        "messages": [{"role": "user", "content": QUESTION}], "add_generation_prompt": True}).json()
    # 16 rows (the tiny projector's 4 x 4 patches), nothing around them, and
    # nothing between the image part and the text part (as llama-server joins them)
    assert first["usage"]["prompt_tokens"] - len(plain["tokens"]) == 16
    r = subprocess.run([TERN, "run", "-m", SMOLLM2, "--mmproj", mmproj, "--image", pair["a"],
                        "--chat", "-p", "<__media__>" + QUESTION, "-n", "12", "--temp", "0"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == text.strip()
    other = ask(srv, data_url(pair["b"]))
    assert other["choices"][0]["message"]["content"] != text, "another image, the same text"
    # bad input: a clear 400 in OpenAI's error shape, and the server keeps serving
    bad = requests.post(srv.url + "/v1/chat/completions", timeout=60, json={
        "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            {"type": "text", "text": QUESTION}]}], "max_tokens": 4})
    assert bad.status_code == 400 and "message" in bad.json()["error"], bad.text
    assert ask(srv, data_url(pair["a"]))["choices"][0]["message"]["content"] == text


ORACLE = Path(__file__).resolve().parents[1] / "fixtures" / "vision" / "content_parts_prompts.json"


def test_llava_text_then_image_has_llama_servers_prompt_length(llava, pair):
    """[text, image] on the default model: the prompt llama-server renders
    (content_parts_prompts.json: "Describe this image.<__media__>", no "\n"
    before the image) has as many tokens as tern's: mtmd tokenizes the text
    on each side of the marker on its own and puts the image's 16 rows
    between them."""
    srv, _ = llava
    case = next(c for c in json.loads(ORACLE.read_text())["cases"]
                if c["name"] == "text_then_image")
    content = [p if p["type"] == "text" else {"type": "image_url",
                                              "image_url": {"url": data_url(pair["a"])}}
               for p in case["content"]]
    r = requests.post(srv.url + "/v1/chat/completions", timeout=600, json={
        "messages": [{"role": "user", "content": content}], "max_tokens": 1, "temperature": 0})
    assert r.status_code == 200, r.text
    before, after = case["expected"].split("<__media__>")

    def count(text: str, bos: bool) -> int:
        t = requests.post(srv.url + "/tokenize", timeout=60,
                          json={"content": text, "add_special": bos, "parse_special": True})
        return t.json()["count"]
    assert r.json()["usage"]["prompt_tokens"] == count(before, True) + 16 + count(after, False)
