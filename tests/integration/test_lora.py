"""LoRA adapters through the real server and CLI, on the default model with
adapters made by `tern gen-lora` (random rank-16 / rank-8 A and B on every
linear layer): picked by model id or the `lora` field, over HTTP and
WebSocket; rows of different adapters batched together give each request the
text it gets alone; KV is never shared between adapters; bad adapters are
refused at start-up naming the tensor while the others load; hot load and
unload behind the API key, with a request in flight finishing on its adapter.
"""
from __future__ import annotations

import asyncio
import concurrent.futures as cf
import json
import os
import subprocess
import threading
import time
import uuid

import pytest
import requests
import websockets

from tern_server import TernServer, model_path, tern_bin

KEY = "lora-test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
PROMPT = "The three most important inventions in history are"


def gen_lora(out, rank: int, seed: int, base=None) -> str:
    cmd = [str(tern_bin()), "gen-lora", "--rank", str(rank), "--seed", str(seed), "--out", str(out)]
    if base:
        cmd += ["--base", str(base)]
    subprocess.run(cmd, check=True, capture_output=True)
    return str(out)


@pytest.fixture(scope="module")
def adapters(tmp_path_factory):
    d = tmp_path_factory.mktemp("lora")
    a = gen_lora(d / "a.gguf", 16, 1)
    b = gen_lora(d / "b.gguf", 8, 2)
    c = gen_lora(d / "c.gguf", 16, 3)
    cut = d / "cut.gguf"
    cut.write_bytes(open(a, "rb").read()[: 4 << 20])
    gemma = model_path().parent / "gemma-3-270m-it-Q4_K_M.gguf"
    other = gen_lora(d / "gemma.gguf", 8, 1, gemma) if gemma.exists() else None
    return {"a": a, "b": b, "c": c, "cut": str(cut), "gemma": other, "dir": str(d)}


@pytest.fixture(scope="module")
def srv(adapters):
    args = ["--max-batch", "8", "--ctx", "2048", "--api-key", KEY, "--lora-dir", adapters["dir"],
            "--lora", f"a={adapters['a']}", "--lora", f"b={adapters['b']}",
            "--lora", f"cut={adapters['cut']}", "--lora", "noequals"]
    if adapters["gemma"]:
        args += ["--lora", f"gemma={adapters['gemma']}"]
    s = TernServer(*args).start()
    yield s
    assert s.stop() == 0


def base_id(srv) -> str:
    return requests.get(srv.url + "/v1/models", headers=AUTH, timeout=10).json()["data"][0]["id"]


def complete(srv, prompt=PROMPT, max_tokens=24, **extra) -> dict:
    r = requests.post(srv.url + "/v1/completions", headers=AUTH, timeout=300,
                      json={"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, **extra})
    assert r.status_code == 200, r.text
    return r.json()


def text(resp: dict) -> str:
    return resp["choices"][0]["text"]


def test_bad_adapters_are_refused_and_the_rest_load(srv, adapters):
    log = srv.log()
    assert "--lora cut=" in log and "refused" in log
    assert "--lora noequals refused: expected NAME=FILE" in log
    if adapters["gemma"]:
        assert "adapter is for architecture 'gemma3', the model is 'llama'" in log
    ids = [m["id"] for m in requests.get(srv.url + "/v1/models", headers=AUTH, timeout=10).json()["data"]]
    base = ids[0]
    assert ids[1:] == [f"{base}:a", f"{base}:b"]
    m = requests.get(f"{srv.url}/v1/models/{base}:b", headers=AUTH, timeout=10).json()
    assert m["meta"]["lora"]["max_rank"] == 8 and m["meta"]["lora"]["matrices"] == 30 * 7


def test_adapter_by_model_id_or_field_and_cli_agree(srv, adapters):
    base = base_id(srv)
    plain = text(complete(srv))
    by_id = complete(srv, model=f"{base}:a")
    assert by_id["model"] == f"{base}:a"
    by_field = text(complete(srv, lora="a"))
    by_obj = text(complete(srv, lora={"name": "a", "scale": 1.0}))
    assert text(by_id) == by_field == by_obj != plain
    assert text(complete(srv, lora={"name": "a", "scale": 0})) == plain
    assert text(complete(srv, lora="b")) not in (plain, by_field)
    # tern run goes through the same scheduler path: the same greedy text.
    out = subprocess.run([str(tern_bin()), "run", "-m", str(model_path()), "-p", PROMPT,
                          "--temp", "0", "-n", "24", "--lora", adapters["a"]],
                         check=True, capture_output=True, text=True).stdout
    assert out.rstrip("\n") == by_field


def test_mixed_adapters_in_one_batch_match_each_alone(srv):
    prompts = [f"Write one sentence about the number {i}." for i in range(3)]
    picks = [None, "a", "b"]
    alone = {(p, l): text(complete(srv, p, 32, **({"lora": l} if l else {})))
             for p in prompts for l in picks}
    jobs = [(p, l) for p in prompts for l in picks] * 2
    with cf.ThreadPoolExecutor(len(jobs)) as ex:
        got = list(ex.map(lambda j: text(complete(srv, j[0], 32, **({"lora": j[1]} if j[1] else {}))),
                          jobs))
    for j, t in zip(jobs, got):
        assert t == alone[j], j
    assert len({alone[(prompts[0], l)] for l in picks}) == 3


def test_kv_is_never_shared_across_adapters(srv):
    nonce = uuid.uuid4().hex
    long_prompt = f"Session {nonce}. " + " ".join(
        f"Fact {i}: the sea is deep and the sky is wide." for i in range(30))

    def cached(**extra):
        return complete(srv, long_prompt, 4, **extra)["usage"]["prompt_tokens_details"]["cached_tokens"]

    assert cached(lora="a") == 0
    assert cached(lora="b") == 0          # same tokens, other adapter: nothing reused
    assert cached() == 0                  # nor by the base model
    assert cached(lora={"name": "a", "scale": 0.5}) == 0  # another scale is another KV
    assert cached(lora="a") >= 256        # the same adapter's prefix is shared as usual
    assert cached() >= 256


def test_unknown_adapters_get_openai_errors(srv):
    base = base_id(srv)
    r = requests.post(srv.url + "/v1/chat/completions", headers=AUTH, timeout=30,
                      json={"model": f"{base}:nope", "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "model_not_found" and r.json()["error"]["param"] == "model"
    r = requests.post(srv.url + "/v1/completions", headers=AUTH, timeout=30,
                      json={"prompt": "hi", "lora": "nope"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "lora"
    r = requests.post(srv.url + "/v1/completions", headers=AUTH, timeout=30,
                      json={"prompt": "hi", "lora": {"name": "a", "scale": "big"}})
    assert r.status_code == 400 and set(r.json()["error"]) >= {"message", "type", "param", "code"}
    r = requests.post(srv.url + "/v1/completions", headers=AUTH, timeout=30,
                      json={"prompt": "hi", "model": f"{base}:a", "lora": "b"})
    assert r.status_code == 400
    complete(srv, "Hello", 2)  # still serving


def test_websocket_picks_adapters_the_same_way(srv):
    base = base_id(srv)
    msgs = [{"role": "user", "content": "Name a color."}]
    http = {l: requests.post(srv.url + "/v1/chat/completions", headers=AUTH, timeout=300,
                             json={"messages": msgs, "max_tokens": 16, "temperature": 0,
                                   **({"lora": l} if l else {})}).json()["choices"][0]["message"]["content"]
            for l in (None, "a")}

    async def go():
        ws = await websockets.connect(srv.ws_url + f"?api_key={KEY}", max_size=None)
        json.loads(await ws.recv())  # hello
        await ws.send(json.dumps({"type": "generate", "id": "x", "model": f"{base}:a",
                                  "messages": msgs, "max_tokens": 16, "temperature": 0}))
        await ws.send(json.dumps({"type": "generate", "id": "y", "messages": msgs,
                                  "max_tokens": 16, "temperature": 0}))
        await ws.send(json.dumps({"type": "generate", "id": "z", "lora": "nope", "messages": msgs}))
        out, err = {"x": "", "y": ""}, None
        done = set()
        while len(done) < 2 or err is None:
            m = json.loads(await asyncio.wait_for(ws.recv(), 120))
            if m["type"] == "delta":
                out[m["id"]] += m["text"]
            elif m["type"] == "done":
                done.add(m["id"])
            elif m["type"] == "error":
                err = m
        await ws.close()
        return out, err

    out, err = asyncio.run(go())
    assert out["x"] == http["a"] and out["y"] == http[None]
    assert err["id"] == "z" and "nope" in json.dumps(err)


def test_hot_load_and_unload_with_a_request_in_flight(srv, adapters):
    base = base_id(srv)
    body = {"name": "c", "path": adapters["c"]}
    assert requests.post(srv.url + "/v1/adapters", json=body, timeout=60).status_code == 401
    r = requests.post(srv.url + "/v1/adapters", json=body, headers=AUTH, timeout=60)
    assert r.status_code == 201, r.text
    assert r.json()["model"] == f"{base}:c"
    assert requests.post(srv.url + "/v1/adapters", json=body, headers=AUTH, timeout=60).status_code == 400
    bad = requests.post(srv.url + "/v1/adapters", json={"name": "d", "path": adapters["cut"]},
                        headers=AUTH, timeout=60)
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_adapter"
    want = text(complete(srv, max_tokens=96, lora="c", ignore_eos=True))
    # Stream the same request, unload c after its first tokens: it finishes on c.
    got = ""
    with requests.post(srv.url + "/v1/completions", headers=AUTH, stream=True, timeout=300,
                       json={"prompt": PROMPT, "max_tokens": 96, "temperature": 0,
                             "ignore_eos": True, "lora": "c", "stream": True}) as s:
        deleted = False
        for line in s.iter_lines():
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            got += json.loads(line[6:])["choices"][0]["text"]
            if not deleted and got:
                d = requests.delete(srv.url + "/v1/adapters/c", headers=AUTH, timeout=30)
                assert d.status_code == 200 and d.json()["deleted"] is True
                deleted = True
    assert deleted and got == want
    assert "c" not in [a["id"] for a in
                       requests.get(srv.url + "/v1/adapters", headers=AUTH, timeout=10).json()["data"]]
    r = requests.post(srv.url + "/v1/completions", headers=AUTH, timeout=30,
                      json={"prompt": "hi", "model": f"{base}:c"})
    assert r.status_code == 404
    assert requests.delete(srv.url + "/v1/adapters/c", headers=AUTH, timeout=30).status_code == 404


def post_adapter(srv, name, path, timeout=10):
    return requests.post(srv.url + "/v1/adapters", json={"name": name, "path": path},
                         headers=AUTH, timeout=timeout)


def test_hot_loading_is_off_without_lora_dir(adapters):
    with TernServer("--ctx", "512") as s:
        r = requests.post(s.url + "/v1/adapters", json={"name": "c", "path": adapters["c"]},
                          timeout=30)
        assert r.status_code == 403, r.text
        err = r.json()["error"]
        assert err["code"] == "adapter_loading_disabled" and "--lora-dir" in err["message"]


def test_adapter_paths_are_confined_to_the_lora_dir(srv, adapters, tmp_path):
    d = adapters["dir"]
    for path in ["/etc/passwd", "../../../../etc/passwd", os.path.join(d, "..", "x.gguf")]:
        r = post_adapter(srv, "x", path)
        assert r.status_code == 403, (path, r.text)
        assert r.json()["error"]["code"] == "adapter_path_forbidden"
        assert "root:" not in r.text
    secret = tmp_path / "secret.txt"
    secret.write_text("root:hunter2\n")
    link = os.path.join(d, f"link-{uuid.uuid4().hex}.gguf")
    os.symlink(secret, link)
    r = post_adapter(srv, "x", link)
    assert r.status_code == 403 and "symlink" in r.json()["error"]["message"]
    # A file inside that is not an adapter: refused without echoing its bytes.
    inside = os.path.join(d, "notes.txt")
    with open(inside, "w") as f:
        f.write("root:hunter2\n" * 4)
    r = post_adapter(srv, "x", inside)
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_adapter"
    assert "root:" not in r.text and "hunter2" not in r.text
    # A NUL inside the path is refused, not cut (a.gguf would load).
    r = post_adapter(srv, "x", adapters["a"] + "\u0000.txt")
    assert r.status_code == 400 and "NUL" in r.json()["error"]["message"]
    names = [a["id"] for a in requests.get(srv.url + "/v1/adapters", headers=AUTH, timeout=10).json()["data"]]
    assert "x" not in names


def test_a_fifo_or_huge_file_never_stalls_the_server(srv, adapters):
    fifo = os.path.join(adapters["dir"], f"fifo-{uuid.uuid4().hex}.gguf")
    os.mkfifo(fifo)
    done = {}
    t = threading.Thread(target=lambda: done.setdefault("r", post_adapter(srv, "f", fifo, 30)))
    t.start()
    t0 = time.monotonic()
    assert requests.get(srv.url + "/health", timeout=5).status_code == 200
    t.join(10)
    assert time.monotonic() - t0 < 5 and done["r"].status_code == 400, done
    # A sparse file larger than any adapter for this model: refused by its size.
    big = os.path.join(adapters["dir"], "huge.gguf")
    with open(big, "wb") as f:
        f.truncate(64 << 30)
    r = post_adapter(srv, "h", big)
    assert r.status_code == 400 and "larger than any LoRA adapter" in r.json()["error"]["message"]


def test_adapter_names_with_a_nul_get_whole_messages(srv, adapters):
    r = post_adapter(srv, "x\u0000y", adapters["c"])
    assert r.status_code == 400 and r.json()["error"]["param"] == "name"
    assert "1..64 letters" in r.json()["error"]["message"]
    r = requests.post(srv.url + "/v1/completions", headers=AUTH, timeout=30,
                      json={"prompt": "hi", "lora": "a\u0000b"})
    assert r.status_code == 400
    assert r.json()["error"]["message"].endswith("is loaded."), r.json()
    assert "\\x00" in r.json()["error"]["message"]
    r = requests.post(srv.url + "/v1/completions", headers=AUTH, timeout=30,
                      json={"prompt": "hi", "model": f"{base_id(srv)}:a\u0000b"})
    assert r.status_code == 404 and r.json()["error"]["message"].endswith("does not exist.")
