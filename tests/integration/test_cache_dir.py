"""`tern serve --cache-dir`: the prefix cache survives a restart.

A 3-turn conversation on a server with --cache-dir; the server is stopped
with SIGTERM (the drain writes the snapshot) and started again on the same
directory; turn 4 then reuses the conversation's prefix from the restored
cache (timings.cache_flash_n > 0: restored blocks live in the flash tier)
and its greedy text equals a cold server's. A second server refuses a locked
directory; a damaged record or a file for another KV layout is dropped with
a warning and the server still answers correctly.
"""
from __future__ import annotations

import re
import subprocess
import uuid
from pathlib import Path

import pytest
import requests

from tern_server import TernServer, model_path, tern_bin

ARGS = ("--ctx", "4096", "--step-tokens", "256")


def system_prompt(nonce: str) -> str:
    rules = " ".join(f"Rule {i}: answer in one short sentence and stay on topic." for i in range(1, 16))
    return f"Session {nonce}. You are a concise assistant. {rules}"


def chat(url: str, messages: list[dict], max_tokens: int = 16) -> dict:
    r = requests.post(url + "/v1/chat/completions", timeout=600,
                      json={"messages": messages, "max_tokens": max_tokens, "temperature": 0})
    assert r.status_code == 200, r.text
    return r.json()


def three_turns(url: str, nonce: str) -> list[dict]:
    messages = [{"role": "system", "content": system_prompt(nonce)}]
    for q in ["Name a colour.", "Name a fruit.", "Name an animal."]:
        messages.append({"role": "user", "content": q})
        r = chat(url, messages)
        messages.append({"role": "assistant", "content": r["choices"][0]["message"]["content"]})
    messages.append({"role": "user", "content": "Name a city."})
    return messages


def server(cache: Path, *extra: str) -> TernServer:
    periodic = () if "--persist-interval" in extra else ("--persist-interval", "0")
    return TernServer(*ARGS, *periodic, "--cache-dir", str(cache), "--kv-flash-dir",
                      str(cache / "spill"), *extra)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A cache dir holding a 3-turn conversation, and turn 4's messages and cold answer."""
    cache = tmp_path_factory.mktemp("cache")
    nonce = uuid.uuid4().hex
    srv = server(cache).start()
    try:
        messages = three_turns(srv.url, nonce)
    finally:
        assert srv.stop() == 0, srv.log()[-3000:]
    log = srv.log()
    m = re.search(r"exit snapshot: saved (\d+) prefix-cache blocks", log)
    assert m and int(m.group(1)) > 0, log[-3000:]
    with TernServer(*ARGS) as cold:
        ref = chat(cold.url, messages)
    return cache, messages, ref


def test_restart_reuses_the_prefix_from_the_cache_dir(saved):
    cache, messages, ref = saved
    with server(cache) as srv:
        assert re.search(r"loaded \d+ prefix-cache blocks", srv.log()), srv.log()[-3000:]
        r = chat(srv.url, messages)
    t = r["timings"]
    assert t["cache_flash_n"] > 0 and t["cache_n"] >= r["usage"]["prompt_tokens"] - 64, t
    assert r["choices"][0]["message"]["content"] == ref["choices"][0]["message"]["content"]


def test_a_second_server_refuses_a_locked_cache_dir(saved):
    cache, _, _ = saved
    with server(cache):
        p = subprocess.run([str(tern_bin()), "serve", "-m", str(model_path()), "--port", "0",
                            "--cache-dir", str(cache)], capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 1
        assert "is in use by another tern process" in p.stderr, p.stderr


def test_damaged_record_is_dropped_and_answers_stay_right(saved, tmp_path):
    cache, messages, ref = saved
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    data = bytearray((cache / "prefix-cache.tkv").read_bytes())
    data[len(data) // 2] ^= 0x5A  # a payload byte of a record in the middle
    (damaged / "prefix-cache.tkv").write_bytes(bytes(data))
    with server(damaged) as srv:
        assert re.search(r"dropped 1 damaged or missing records", srv.log()), srv.log()[-3000:]
        r = chat(srv.url, messages)
    assert r["choices"][0]["message"]["content"] == ref["choices"][0]["message"]["content"]
    # Truncated mid-record (a crash while copying, a full disk): the rest loads.
    (damaged / "prefix-cache.tkv").write_bytes(bytes(data[: len(data) - 1000]))
    with server(damaged) as srv:
        assert "damaged or missing records" in srv.log()
        r = chat(srv.url, messages)
    assert r["choices"][0]["message"]["content"] == ref["choices"][0]["message"]["content"]


def test_another_kv_layout_ignores_the_file(saved, tmp_path):
    cache, messages, _ = saved
    other = tmp_path / "other"
    other.mkdir()
    (other / "prefix-cache.tkv").write_bytes((cache / "prefix-cache.tkv").read_bytes())
    with server(other, "--kv-type", "int4-fp8") as srv:
        assert "written for another KV layout" in srv.log(), srv.log()[-3000:]
        r = chat(srv.url, messages)
    assert r["timings"]["cache_n"] == 0


def test_periodic_snapshot_survives_a_kill(tmp_path):
    """A crash loses at most --persist-interval of cache, never the file."""
    import signal
    import time

    cache = tmp_path / "killed"
    messages = [{"role": "system", "content": system_prompt(uuid.uuid4().hex)},
                {"role": "user", "content": "Name a colour."}]
    srv = server(cache, "--persist-interval", "0.5").start()
    try:
        first = chat(srv.url, messages)
        deadline = time.monotonic() + 30
        while not re.search(r"periodic snapshot: saved [1-9]\d* ", srv.log()):
            assert time.monotonic() < deadline, srv.log()[-3000:]
            time.sleep(0.1)
    finally:
        srv.stop(signal.SIGKILL)
    with server(cache) as again:  # the dead process's lock is gone with it
        r = chat(again.url, messages)
    assert r["timings"]["cache_flash_n"] > 0, r["timings"]
    assert r["choices"][0]["message"]["content"] == first["choices"][0]["message"]["content"]


def test_a_fifo_as_the_snapshot_does_not_block_startup(tmp_path):
    """A FIFO where the snapshot should be is skipped with a warning (it used
    to block start-up forever waiting for a writer); the exit snapshot then
    replaces it with a regular file (issue 25, item 6)."""
    import os
    import stat

    cache = tmp_path / "fifo"
    cache.mkdir()
    os.mkfifo(cache / "prefix-cache.tkv")
    srv = server(cache)
    srv.startup_timeout = 30
    srv.start()
    try:
        assert "is not a regular file; ignoring it" in srv.log(), srv.log()[-3000:]
        chat(srv.url, [{"role": "user", "content": "Name a colour."}], max_tokens=2)
    finally:
        assert srv.stop() == 0, srv.log()[-3000:]
    assert stat.S_ISREG((cache / "prefix-cache.tkv").stat().st_mode)


def test_a_stale_snapshot_temp_file_is_removed_at_startup(tmp_path):
    """SIGKILL during a snapshot leaves prefix-cache.tkv.tmp behind; the next
    server to hold the lock removes it at once rather than at its first save
    (issue 25, item 14). A FIFO there is removed without being opened."""
    import os

    for kind in ("file", "fifo"):
        cache = tmp_path / kind
        cache.mkdir()
        tmp = cache / "prefix-cache.tkv.tmp"
        if kind == "file":
            tmp.write_bytes(b"\0" * (3 << 20))
        else:
            os.mkfifo(tmp)
        with server(cache) as srv:
            assert not os.path.lexists(tmp)
            assert "left by a snapshot that was cut short" in srv.log(), srv.log()[-3000:]
