"""Images through the real server under one memory budget, and the multimodal
serving cases test_vision_serve.py does not cover: the SmolVLM-shaped text
model (`tern gen-vlm-text` from SmolLM2) with a seeded tiny idefics3
projector (`tern gen-mmproj`), real clients on loopback.

- 200 distinct random PNGs through a server with a small --mem-budget-mb and
  --mm-cache-mb: every answer arrives, the budget's peak stays under it, the
  cache evicts, the process's peak RSS stays under a bound derived from the
  budget, and images re-sent at the end get their first answers again;
- a request whose images can never fit the budget: 503 insufficient_memory
  in OpenAI's error shape, and the server keeps serving;
- the embedding cache's flash tier across a restart (a hit, no encode, the
  same text) and a damaged entry (dropped, re-encoded, the same text);
- turn 2 of a conversation with an image computes only its new tokens;
- four concurrent conversations about four pictures get their solo text;
- the OpenAI SDK with a data: URL, a path and a file:// URL: one picture.
"""
from __future__ import annotations

import base64
import random
import struct
import sys
import threading
import zlib
from pathlib import Path

import pytest
import requests
from openai import OpenAI

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from test_vision_cli import SMOLLM2, tern  # noqa: E402

from tern_server import TernServer  # noqa: E402

MiB = 1 << 20
QUESTION = "What is in this picture?"


def png(w: int, h: int, seed: int) -> bytes:
    """An RGB PNG of seeded random pixels: every seed is a different picture."""
    rnd = random.Random(seed)
    rows = b"".join(b"\x00" + rnd.randbytes(w * 3) for _ in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def data_url(seed: int, w: int = 64, h: int = 64) -> str:
    return "data:image/png;base64," + base64.b64encode(png(w, h, seed)).decode()


def user(urls: list[str], text: str = QUESTION) -> dict:
    return {"role": "user", "content": [
        *({"type": "image_url", "image_url": {"url": u}} for u in urls),
        {"type": "text", "text": text}]}


def chat(srv, messages: list[dict], max_tokens: int = 2) -> requests.Response:
    return requests.post(srv.url + "/v1/chat/completions", timeout=600, json={
        "messages": messages, "max_tokens": max_tokens, "temperature": 0})


def answer(srv, messages: list[dict], max_tokens: int = 2) -> dict:
    r = chat(srv, messages, max_tokens)
    assert r.status_code == 200, r.text
    return r.json()


def text_of(r: dict) -> str:
    return r["choices"][0]["message"]["content"]


def proc_kib(srv, field: str) -> int:
    """VmRSS / VmHWM of the real server process, in KiB."""
    for line in Path(f"/proc/{srv.proc.pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"{field} not in /proc/{srv.proc.pid}/status")


def expect_error(r: requests.Response, status: int, code: str) -> dict:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) >= {"message", "type", "param", "code"}, err
    assert err["code"] == code and err["message"], err
    return err


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("mmbudget")
    media = d / "media"
    media.mkdir()
    f = {"dir": d, "text": str(d / "smolvlm-text.gguf"), "mmproj": str(d / "i3.gguf"),
         "media": str(media)}
    for args in (["gen-vlm-text", "--from", SMOLLM2, "--out", f["text"]],
                 ["gen-mmproj", "--type", "idefics3", "--seed", "42", "--n-embd", "576",
                  "--out", f["mmproj"]]):
        r = tern(*args)
        assert r.returncode == 0, r.stderr
    for i in range(4):
        (media / f"pic{i}.png").write_bytes(png(64, 64, 900 + i))
    return f


@pytest.fixture(scope="module")
def server(pair):
    """The default budget (--kv-dram-mb + --mm-cache-mb), media dir, cache dir."""
    with TernServer("--mmproj", pair["mmproj"], "--media-dir", pair["media"],
                    "--mm-cache-dir", str(pair["dir"] / "shared-mmcache"),
                    model=pair["text"]) as srv:
        yield srv


def test_200_distinct_images_stay_within_a_small_budget(pair):
    budget_mb, cache_mb = 4, 2
    with TernServer("--mmproj", pair["mmproj"], "--mem-budget-mb", str(budget_mb),
                    "--mm-cache-mb", str(cache_mb), "--kv-flash-mb", "0",
                    model=pair["text"]) as srv:
        first = {}
        for i in range(10):  # warm up: the encoder's and the step's buffers exist now
            first[i] = text_of(answer(srv, [user([data_url(i)])]))
        rss_warm = proc_kib(srv, "VmRSS")
        for i in range(10, 200):
            first[i] = text_of(answer(srv, [user([data_url(i)])]))
        m = srv.metrics()
        budget = m["tern_mem_budget_bytes"]
        assert budget == budget_mb * MiB
        mem = requests.get(srv.url + "/v1/models", timeout=30).json()["data"][0]["meta"]["memory"]
        assert mem["budget_bytes"] == budget
        assert set(mem["used_bytes"]) == {"kv", "mm_cache", "mm_requests", "mm_pixels"}
        assert sum(mem["used_bytes"].values()) <= budget
        # Charged bytes never went past the budget, embeddings included.
        assert m['tern_mem_peak_bytes{pool="all"}'] <= budget, m
        assert m['tern_mem_peak_bytes{pool="mm_cache"}'] <= cache_mb * MiB
        assert m['tern_mem_peak_bytes{pool="mm_cache"}'] > 0
        assert m['tern_mem_peak_bytes{pool="mm_requests"}'] > 0
        assert m['tern_mm_cache_evictions_total{tier="dram"}'] > 0
        assert m["tern_mm_cache_misses_total"] == 200
        # Resident memory: the process's peak is bounded by the budget plus
        # the model (mapped file + repacked weights), the projector and a
        # stated slack for code, threads, allocator and HTTP buffers; and
        # after warm-up it grew by less than the budget plus 24 MiB of slack
        # (200 images' rows are 9 MiB; the KV their prompts leave cached, two
        # blocks each, would be 150 MiB without the budget).
        model = Path(pair["text"]).stat().st_size + Path(pair["mmproj"]).stat().st_size
        hwm = proc_kib(srv, "VmHWM") * 1024
        assert hwm <= budget + 2 * model + 128 * MiB, (hwm, model)
        grown = proc_kib(srv, "VmRSS") - rss_warm
        peak, ev = m['tern_mem_peak_bytes{pool="all"}'], m['tern_mm_cache_evictions_total{tier="dram"}']
        print(f"\nRSS warm {rss_warm} KiB, grown {grown} KiB, peak {hwm >> 10} KiB, model "
              f"{model >> 10} KiB; budget peak {peak:.0f} B; dram evictions {ev:.0f}")
        assert grown * 1024 <= budget + 24 * MiB, grown
        # Pictures seen long ago (evicted) come back with the same answers.
        for i in (0, 1, 57, 123, 199):
            again = answer(srv, [user([data_url(i)])])
            assert text_of(again) == first[i], i
            assert again["timings"]["image_n"] == 1


def test_images_that_can_never_fit_are_503_and_the_server_keeps_serving(pair, server):
    # 32 distinct pictures in one request: measure its prompt and its rows on
    # a roomy server, then pick a budget that holds its prompt's KV but not
    # the KV plus the rows.
    urls = [data_url(5000 + i) for i in range(32)]
    big = [user(urls, "Describe them.")]
    ok = answer(server, big, max_tokens=1)
    n_prompt = ok["usage"]["prompt_tokens"]
    rows = 32 * 20 * 576 * 4  # 20 rows of 576 floats per 64x64 picture (5 tiles of 4)
    m = server.metrics()
    assert m['tern_mem_peak_bytes{pool="mm_requests"}'] >= rows  # what admission reserved
    block = m["tern_kv_block_tokens"] * m["tern_kv_bytes_per_token"]
    kv = -(-(n_prompt + 1) // int(m["tern_kv_block_tokens"])) * block
    budget_mb = -(-int(kv) // MiB)
    assert budget_mb * MiB < kv + rows, "the premise: the KV fits, KV + rows do not"
    with TernServer("--mmproj", pair["mmproj"], "--mem-budget-mb", str(budget_mb),
                    "--kv-flash-mb", "0", model=pair["text"]) as srv:
        err = expect_error(chat(srv, big, 1), 503, "insufficient_memory")
        assert "memory budget" in err["message"]
        assert srv.metrics()["tern_mem_refused_total"] == 1
        # Nothing else fails: one picture, and plain text, are served.
        assert text_of(answer(srv, [user([urls[0]])]))
        r = answer(srv, [{"role": "user", "content": "Hello"}])
        assert r["choices"][0]["finish_reason"] in ("stop", "length")
        assert requests.get(srv.url + "/health", timeout=10).status_code == 200


def test_restart_finds_the_image_on_flash_and_drops_a_damaged_entry(pair, tmp_path):
    cache = tmp_path / "mmcache"
    url = data_url(77)
    args = ("--mmproj", pair["mmproj"], "--mm-cache-dir", str(cache))
    with TernServer(*args, model=pair["text"]) as srv:
        first = answer(srv, [user([url])], max_tokens=8)
        assert first["timings"]["image_n"] == 1 and first["timings"]["image_cache_hits"] == 0
    files = list(cache.glob("*.emb"))
    assert len(files) == 1
    with TernServer(*args, model=pair["text"]) as srv:  # a new process: no KV, no DRAM cache
        again = answer(srv, [user([url])], max_tokens=8)
        assert again["timings"]["image_n"] == 1 and again["timings"]["image_cache_hits"] == 1
        m = srv.metrics()
        assert m['tern_mm_cache_hits_total{tier="flash"}'] == 1
        assert m["tern_mm_cache_misses_total"] == 0  # no encode
        assert text_of(again) == text_of(first)
    raw = bytearray(files[0].read_bytes())
    for i in range(200, 240):
        raw[i] ^= 0x5A
    files[0].write_bytes(bytes(raw))
    with TernServer(*args, model=pair["text"]) as srv:
        third = answer(srv, [user([url])], max_tokens=8)
        assert third["timings"]["image_n"] == 1 and third["timings"]["image_cache_hits"] == 0
        m = srv.metrics()
        assert m["tern_mm_cache_flash_dropped_total"] == 1
        assert m["tern_mm_cache_misses_total"] == 1  # encoded again
        assert text_of(third) == text_of(first)
    assert len(list(cache.glob("*.emb"))) == 1  # the re-encoded entry was written again


def test_turn_two_computes_only_its_new_tokens(server):
    turn1 = [user([data_url(31)], "Describe the picture in a few words.")]
    a = answer(server, turn1, max_tokens=6)
    p1 = a["usage"]["prompt_tokens"]
    turn2 = turn1 + [{"role": "assistant", "content": text_of(a)},
                     {"role": "user", "content": "And what colour dominates?"}]
    b = answer(server, turn2, max_tokens=6)
    t, p2 = b["timings"], b["usage"]["prompt_tokens"]
    assert "image_n" not in t  # no image rows were fetched (reported only when > 0), nor encoded
    assert t["cache_n"] == b["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert t["prompt_n"] == p2 - t["cache_n"]
    # Everything of turn 1 (image included) but a partial last block is reused.
    assert t["cache_n"] >= (p1 // 32) * 32
    assert t["prompt_n"] <= (p2 - p1) + 31 + a["usage"]["completion_tokens"]


def test_concurrent_conversations_about_different_images_get_their_solo_text(server, pair):
    convs = [[{"role": "system", "content": f"Conversation {i}."}, user([data_url(400 + i)])]
             for i in range(4)]
    solo = [text_of(answer(server, c, max_tokens=10)) for c in convs]
    assert len(set(solo)) > 1, solo  # the pictures do change the answer
    got: list[str | None] = [None] * 4
    errors: list[BaseException] = []
    # A fresh server, so nothing is cached: the four are encoded and
    # prefilled side by side in the same batches.
    with TernServer("--mmproj", pair["mmproj"], model=pair["text"]) as fresh:
        def run(i: int) -> None:
            try:
                got[i] = text_of(answer(fresh, convs[i], max_tokens=10))
            except BaseException as e:  # noqa: BLE001 -- reported below
                errors.append(e)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert fresh.metrics()["tern_mm_cache_misses_total"] == 4
    assert not errors, errors
    assert got == solo


def test_sdk_data_url_path_and_file_url_are_one_picture(server, pair):
    client = OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=600)
    path = Path(pair["media"]) / "pic3.png"
    forms = [data_url(903), "pic3.png", "file://" + str(path)]
    assert base64.b64decode(forms[0].split(",", 1)[1]) == path.read_bytes()
    texts, timings = [], []
    for i, url in enumerate(forms):
        # Other text before the image each time: the KV is not reused at the
        # image, so its rows come from the embedding cache (by pixel hash).
        r = client.chat.completions.create(
            model="tern", max_tokens=8, temperature=0,
            messages=[{"role": "system", "content": f"Form {i}."},
                      {"role": "user", "content": [
                          {"type": "image_url", "image_url": {"url": url}},
                          {"type": "text", "text": QUESTION}]}])
        texts.append(r.choices[0].message.content)
        timings.append(r.model_dump()["timings"])
    assert timings[0]["image_n"] == 1 and timings[0]["image_cache_hits"] == 0
    for t in timings[1:]:
        assert t["image_n"] == 1 and t["image_cache_hits"] == 1
    # Identical greedy text given the same prompt: the same system text again
    # with each form.
    same = []
    for url in forms:
        r = client.chat.completions.create(
            model="tern", max_tokens=8, temperature=0,
            messages=[{"role": "system", "content": "Same."},
                      {"role": "user", "content": [
                          {"type": "image_url", "image_url": {"url": url}},
                          {"type": "text", "text": QUESTION}]}])
        same.append(r.choices[0].message.content)
    assert same[0] and same[0] == same[1] == same[2]
