"""Many tern replicas behind a real nginx (Debian's package) with the shipped
deploy/nginx/tern.conf: session affinity by consistent hashing on
X-Session-Id keeps a conversation's turns on the replica that holds its KV;
when a replica dies, its sessions move to another one on the ring (a cache
miss there, same greedy text) and every other session stays where it was.
The WebSocket upgrade goes through the proxy too.

The X-Tern-Upstream header nginx adds (the template's $upstream_addr) names
the replica that answered.
"""
from __future__ import annotations

import asyncio
import concurrent.futures as cf
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest
import requests
import websockets

from tern_server import REPO, TernServer

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
pytestmark = pytest.mark.skipif(
    not os.access(NGINX, os.X_OK),
    reason="nginx not installed (apt-get install nginx; scripts/setup.sh installs it)")

# Small replicas: short contexts, a small DRAM budget (room for every session
# they hold here), no flash tier, one thread each.
REPLICA_ARGS = ("--ctx", "1024", "--kv-dram-mb", "64", "--kv-flash-mb", "0", "-t", "1",
                "--max-batch", "8")
SESSIONS = 24
MAX_TOKENS = 12


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nginx:
    """nginx in the foreground with deploy/nginx/tern.conf, all files in a temp folder."""

    def __init__(self, replicas: list[TernServer]):
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="tern-nginx-"))
        self.dir.chmod(0o755)  # workers run unprivileged when the test runs as root
        conf = (REPO / "deploy" / "nginx" / "tern.conf").read_text()
        conf = conf.replace("${TERN_LISTEN}", f"127.0.0.1:{self.port}")
        conf = conf.replace("${TERN_REPLICAS}",
                            " ".join(f"server 127.0.0.1:{r.port};" for r in replicas))
        (self.dir / "tern.conf").write_text(conf)
        (self.dir / "nginx.conf").write_text(
            f"worker_processes 1;\npid {self.dir}/nginx.pid;\n"
            f"error_log {self.dir}/error.log warn;\nevents {{ worker_connections 1024; }}\n"
            f"http {{ access_log {self.dir}/access.log; include tern.conf; }}\n")
        self.proc = subprocess.Popen(
            [NGINX, "-p", str(self.dir), "-c", str(self.dir / "nginx.conf"),
             "-e", str(self.dir / "error.log"), "-g", "daemon off;"],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nginx exited: {self.error_log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"nginx did not listen: {self.error_log()}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def error_log(self) -> str:
        p = self.dir / "error.log"
        return p.read_text(errors="replace") if p.exists() else ""

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster():
    replicas = []
    try:
        for _ in range(3):
            replicas.append(TernServer(*REPLICA_ARGS).start())
        proxy = Nginx(replicas)
    except BaseException:
        for r in replicas:
            r.stop()
        raise
    yield proxy, replicas
    proxy.stop()
    for r in replicas:
        r.stop()


def system_prompt(nonce: str) -> str:
    return (f"Conversation {nonce}. You are a concise assistant who answers every question "
            f"in one short sentence, politely, without lists, and stays on topic.")


def ask(url: str, messages: list[dict], session: str | None = None) -> tuple[dict, str]:
    """One greedy chat turn; returns (the response JSON, the replica that answered)."""
    headers = {"X-Session-Id": session} if session else {}
    r = requests.post(url + "/v1/chat/completions", headers=headers, timeout=300,
                      json={"messages": messages, "max_tokens": MAX_TOKENS, "temperature": 0})
    assert r.status_code == 200, r.text
    # After a fail-over nginx lists every replica it tried; the last one answered.
    return r.json(), r.headers.get("X-Tern-Upstream", "").split(", ")[-1]


class Session:
    def __init__(self, i: int):
        self.id = f"session-{i}-{uuid.uuid4().hex[:8]}"
        self.messages = [{"role": "system", "content": system_prompt(self.id)}]
        self.turns: list[tuple[str, int, str]] = []  # (replica, cached tokens, text)

    def turn(self, url: str) -> None:
        k = len(self.turns) + 1
        self.messages.append({"role": "user", "content": f"Turn {k}: name one animal."})
        resp, replica = ask(url, self.messages, self.id)
        text = resp["choices"][0]["message"]["content"]
        self.messages.append({"role": "assistant", "content": text})
        self.turns.append((replica, resp["usage"]["prompt_tokens_details"]["cached_tokens"], text))


def run_turns(url: str, sessions: list[Session], n: int) -> None:
    """n more turns of every session; the sessions run concurrently."""
    def go(s: Session):
        for _ in range(n):
            s.turn(url)

    with cf.ThreadPoolExecutor(8) as pool:
        for f in [pool.submit(go, s) for s in sessions]:
            f.result()


def test_sessions_stick_to_their_replica_and_fail_over(cluster):
    proxy, replicas = cluster
    addr = {f"127.0.0.1:{r.port}": r for r in replicas}
    sessions = [Session(i) for i in range(SESSIONS)]

    # Four turns each: turn 1 computes the prompt, turns 2-4 reuse its KV on
    # the same replica.
    run_turns(proxy.url, sessions, 4)
    home = {}
    for s in sessions:
        replicas_seen = {t[0] for t in s.turns}
        assert len(replicas_seen) == 1 and replicas_seen <= addr.keys(), (s.id, s.turns)
        home[s.id] = s.turns[0][0]
        assert all(t[1] > 0 for t in s.turns[1:]), (s.id, s.turns)
    per_replica = {a: sum(h == a for h in home.values()) for a in addr}
    assert sum(n > 0 for n in per_replica.values()) >= 2, per_replica  # the ring spreads them

    # The busiest replica dies without a word.
    dead = max(per_replica, key=per_replica.get)
    addr[dead].stop(signal.SIGKILL)
    moved = [s for s in sessions if home[s.id] == dead]
    stayed = [s for s in sessions if home[s.id] != dead]
    assert moved and stayed

    # Two more turns: a moved session's first turn is a miss on its new
    # replica, its second a hit there; every other session still hits at home.
    run_turns(proxy.url, sessions, 2)
    for s in stayed:
        assert [t[0] for t in s.turns[4:]] == [home[s.id]] * 2, (s.id, s.turns)
        assert all(t[1] > 0 for t in s.turns[4:]), (s.id, s.turns)
    for s in moved:
        new_home = s.turns[4][0]
        assert new_home != dead and new_home in addr, (s.id, s.turns)
        assert s.turns[5][0] == new_home, (s.id, s.turns)
        assert s.turns[4][1] == 0, f"{s.id}: its new replica cannot hold its KV: {s.turns}"
        assert s.turns[5][1] > 0, (s.id, s.turns)

    # The moved turn's text is the conversation's own greedy answer: the same
    # messages sent alone, straight to a live replica, give the same text.
    alive = next(r for a, r in addr.items() if a != dead)
    for s in moved:
        resp, _ = ask(alive.url, s.messages[:-3])
        assert resp["choices"][0]["message"]["content"] == s.turns[4][2], s.id

    # The gauges routers scrape are there on every live replica.
    for a, r in addr.items():
        if a == dead:
            continue
        # (waited for: a reply reaches its client just before the step that
        # retires its sequence updates the gauges)
        r.wait_metric("tern:num_requests_running", lambda v: v == 0, timeout=10)
        m = r.metrics()
        assert m["tern:num_requests_waiting"] == 0
        assert 0 <= m["tern:kv_cache_usage_perc"] <= 1


def test_websocket_streams_through_the_proxy(cluster):
    proxy, replicas = cluster
    session = "ws-" + uuid.uuid4().hex[:8]
    live = {f"127.0.0.1:{r.port}": r for r in replicas if r.proc.poll() is None}
    # Where an HTTP request of this session lands...
    _, home = ask(proxy.url, [{"role": "user", "content": "Hi"}], session)
    assert home in live

    async def go():
        url = f"ws://127.0.0.1:{proxy.port}/v1/ws?session_id={session}"
        async with websockets.connect(url, max_size=None) as ws:
            hello = json.loads(await asyncio.wait_for(ws.recv(), 60))
            assert hello["type"] == "hello"
            # ...the WebSocket of the same session (query parameter) lands too.
            assert live[home].metrics()["tern_websocket_sessions"] == 1
            await ws.send(json.dumps({
                "type": "generate", "id": "g1", "max_tokens": MAX_TOKENS, "temperature": 0,
                "ignore_eos": True, "messages": [{"role": "user", "content": "Count to ten."}]}))
            text, deltas = "", 0
            while True:
                msg = json.loads(await asyncio.wait_for(ws.recv(), 120))
                assert msg["type"] != "error", msg
                if msg["type"] == "delta":
                    text += msg["text"]
                    deltas += 1
                elif msg["type"] == "done":
                    return text, deltas, msg

    text, deltas, done = asyncio.run(go())
    assert deltas >= 1 and text
    assert done["id"] == "g1" and done["finish_reason"] == "length"
