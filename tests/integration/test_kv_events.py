"""GET /v1/kv/events: the prefix cache's block stored / removed events for
prefix-aware routers, behind the API key: a prompt's full blocks appear as
BlockStored events chained by parent hash, in the batch shape PROTOCOL.md
documents, both as one JSON batch (?stream=false) and as server-sent events.
"""
from __future__ import annotations

import json
import uuid

import requests

from tern_server import TernServer

KEY = "events-key"
AUTH = {"Authorization": f"Bearer {KEY}"}


def test_stored_blocks_are_reported_behind_the_key():
    with TernServer("--api-key", KEY, "--kv-dram-mb", "64") as srv:
        assert requests.get(srv.url + "/v1/kv/events?stream=false", timeout=10).status_code == 401
        prompt = f"Session {uuid.uuid4().hex}. " + "Tell me about the sea and the sky. " * 20
        r = requests.post(srv.url + "/v1/completions", headers=AUTH, timeout=300,
                          json={"prompt": prompt, "max_tokens": 4, "temperature": 0})
        assert r.status_code == 200, r.text
        b = requests.get(srv.url + "/v1/kv/events?stream=false", headers=AUTH, timeout=10).json()
        stored = [e for e in b["events"] if e["type"] == "BlockStored"]
        full_blocks = r.json()["usage"]["prompt_tokens"] // 32
        assert len(stored) >= full_blocks, b
        assert b["last_seq"] == b["events"][-1]["seq"] and b["lost"] == 0
        for prev, e in zip(stored, stored[1:full_blocks]):
            assert e["parent_block_hash"] == prev["block_hashes"][0]
            assert len(e["token_ids"]) == e["block_size"] == 32 and e["medium"] == "dram"
        # Resuming after the last event: nothing new.
        again = requests.get(srv.url + f"/v1/kv/events?stream=false&since={b['last_seq']}",
                             headers=AUTH, timeout=10).json()
        assert again["events"] == []
        # The stream delivers the same events as SSE batches.
        with requests.get(srv.url + "/v1/kv/events", headers=AUTH, stream=True, timeout=10) as s:
            assert s.headers["Content-Type"].startswith("text/event-stream")
            for line in s.iter_lines():
                if line.startswith(b"data: "):
                    first = json.loads(line[6:])
                    break
        assert first["events"][0] == b["events"][0]
        assert requests.get(srv.url + "/v1/kv/events?since=x", headers=AUTH,
                            timeout=10).status_code == 400
