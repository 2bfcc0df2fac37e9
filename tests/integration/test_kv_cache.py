"""The KV memory hierarchy through the real server: automatic prefix caching
(across requests, chat turns and concurrent sessions, reported in `usage` and
`timings`), isolation between conversations, spilling to flash under a small
DRAM budget, and disk faults that fail requests but never the server.

Every comparison is greedy text against a reference server that starts cold
with room to spare, with the same KV type (int8-fp8, the default), so equal
text means the cached, preempted or spilled KV was exactly the KV that the
request's own prefix produces.
"""
from __future__ import annotations

import concurrent.futures as cf
import os
import tempfile
import uuid

import pytest
import requests

from tern_server import TernServer

WORDS = ["amber", "basalt", "cobalt", "dune", "ember", "fjord", "garnet", "harbor"]


# Small steps interleave the eight prompts' prefills, so their blocks are
# spilled while others still need them and read back from flash: the paths
# these tests exist for (with whole 512-token steps each prompt is prefilled
# in one go and the flash tier may never be read).
INTERLEAVED = ("--step-tokens", "64")

def system_prompt(nonce: str) -> str:
    rules = " ".join(
        f"Rule {i}: answer in one short sentence, be kind, and never reveal anything said "
        f"in another conversation." for i in range(1, 13))
    return f"Session {nonce}. You are a concise assistant. {rules}"


def chat(url: str, messages: list[dict], max_tokens: int = 24) -> dict:
    r = requests.post(url + "/v1/chat/completions", timeout=600,
                      json={"messages": messages, "max_tokens": max_tokens, "temperature": 0})
    assert r.status_code == 200, r.text
    return r.json()


def secret_messages(nonce: str, word: str) -> list[dict]:
    return [{"role": "system", "content": system_prompt(nonce)},
            {"role": "user", "content": f"My secret word is {word}. Repeat my secret word."}]


def test_shared_prefix_is_reused_across_requests(server, healthy):
    nonce = uuid.uuid4().hex
    first = chat(server.url, secret_messages(nonce, "amber"))
    assert first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert first["timings"]["cache_n"] == 0
    second = chat(server.url, secret_messages(nonce, "basalt"))
    shared = second["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert shared >= 192, second["usage"]  # the system prompt is ~230 tokens
    t = second["timings"]
    assert t["cache_n"] == shared and t["cache_dram_n"] == shared and t["cache_flash_n"] == 0
    assert t["prompt_n"] + t["cache_n"] == second["usage"]["prompt_tokens"]
    # The same request again reuses all but its last partial block, same text.
    again = chat(server.url, secret_messages(nonce, "amber"))
    assert again["choices"][0]["message"]["content"] == first["choices"][0]["message"]["content"]
    assert again["usage"]["prompt_tokens_details"]["cached_tokens"] >= again["usage"]["prompt_tokens"] - 32
    m = server.metrics()
    assert m['tern_kv_prefix_hits_total{tier="dram"}'] > 0
    assert m['tern_kv_prefix_tokens_total{source="dram"}'] >= shared


def test_multi_turn_prefill_covers_only_new_tokens(server, healthy):
    nonce = uuid.uuid4().hex
    messages = [{"role": "system", "content": system_prompt(nonce)},
                {"role": "user", "content": "Name a colour."}]
    prev_prompt = 0
    for turn, question in enumerate(["Name a fruit.", "Name an animal.", "Name a city."]):
        r = chat(server.url, messages, max_tokens=16)
        u, t = r["usage"], r["timings"]
        if turn > 0:
            # Everything up to the previous turn's prompt (and most of its
            # reply) comes from the cache; only the new tail is computed.
            assert t["cache_n"] >= prev_prompt - 32, (turn, u, t)
            assert t["prompt_n"] <= u["prompt_tokens"] - prev_prompt + 32, (turn, u, t)
        prev_prompt = u["prompt_tokens"]
        messages += [{"role": "assistant", "content": r["choices"][0]["message"]["content"]},
                     {"role": "user", "content": question}]


def run_conversations(url: str, nonce: str) -> list[str]:
    with cf.ThreadPoolExecutor(len(WORDS)) as pool:
        futs = [pool.submit(chat, url, secret_messages(nonce, w)) for w in WORDS]
        return [f.result()["choices"][0]["message"]["content"] for f in futs]


def test_concurrent_conversations_never_leak_under_pressure(server):
    """Eight conversations with different secrets, sharing a system prompt,
    run at once on a server whose 8 MiB of DRAM KV cannot hold them all, so
    blocks are shared, preempted and spilled to flash. Each answer must equal
    the one a roomy reference server gives when the conversation runs alone."""
    nonce = uuid.uuid4().hex
    reference = []
    for w in WORDS:  # alone, one at a time, on the shared roomy server
        reference.append(chat(server.url, secret_messages(nonce, w))["choices"][0]["message"]["content"])
    with tempfile.TemporaryDirectory(prefix="tern-kv-test-") as d:
        with TernServer("--kv-dram-mb", "8", "--kv-flash-mb", "256", "--kv-flash-dir", d,
                        "--max-batch", "8", *INTERLEAVED) as tight:
            got = run_conversations(tight.url, nonce)
            m = tight.metrics()
            assert tight.stop() == 0
        assert not [f for f in os.listdir(d) if f.endswith(".blocks")], "spill file left behind"
    for w, want, text in zip(WORDS, reference, got):
        assert text == want, f"conversation {w!r} changed under sharing/spilling"
        for other in WORDS:
            if other != w and other not in want:
                assert other not in text, f"conversation {w!r} mentions {other!r}: {text!r}"
    assert m['tern_kv_prefix_hits_total{tier="dram"}'] + m['tern_kv_prefix_hits_total{tier="flash"}'] > 0
    moved = (m['tern_kv_flash_blocks_total{kind="spilled"}'] + m['tern_kv_flash_blocks_total{kind="evicted"}']
             + m["tern_preemptions_total"])
    assert moved > 0, "the DRAM budget never ran out: the test exercised nothing"


@pytest.mark.parametrize("fault", ["write,28,1000000", "read,5,1000000"])
def test_disk_faults_fail_requests_not_the_server(fault):
    """Every flash write fails with ENOSPC (disk full), or every read with EIO.
    Requests that need the flash tier fail with a clear error or are
    recomputed; the server keeps serving and reports the errors."""
    nonce = uuid.uuid4().hex
    with tempfile.TemporaryDirectory(prefix="tern-kv-fault-") as d:
        with TernServer("--kv-dram-mb", "8", "--kv-flash-mb", "256", "--kv-flash-dir", d,
                        "--max-batch", "8", *INTERLEAVED, env={"TERN_KV_FAULT": fault}) as srv:
            def one(w):
                return requests.post(srv.url + "/v1/chat/completions", timeout=600, json={
                    "messages": secret_messages(nonce, w), "max_tokens": 24, "temperature": 0})
            with cf.ThreadPoolExecutor(len(WORDS)) as pool:
                rs = list(pool.map(one, WORDS))
            for r in rs:
                if r.status_code != 200:
                    assert r.status_code == 500, r.text
                    assert "KV" in r.json()["error"]["message"], r.text
            assert requests.get(srv.url + "/health", timeout=10).status_code == 200
            ok = chat(srv.url, [{"role": "user", "content": "Say hi."}], max_tokens=4)
            assert ok["choices"][0]["message"]["content"]
            m = srv.metrics()
            kind = "write" if fault.startswith("write") else "read"
            assert m[f'tern_kv_flash_errors_total{{op="{kind}"}}'] > 0, "no fault was hit"
            assert srv.stop() == 0


def test_unusable_flash_folder_leaves_a_dram_only_server(tmp_path):
    """A flash folder that cannot be created (here: below a regular file, which
    fails even for root) costs the spill tier, not the server."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    with TernServer("--kv-flash-dir", str(blocker / "kv")) as srv:
        ok = chat(srv.url, [{"role": "user", "content": "Say hi."}], max_tokens=4)
        assert ok["choices"][0]["message"]["content"]
        assert "without a flash tier" in srv.log()
        assert srv.metrics()['tern_kv_blocks{tier="flash",state="capacity"}'] == 0
