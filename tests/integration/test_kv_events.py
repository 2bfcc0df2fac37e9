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


def test_bad_parameters_are_refused_by_name(server, healthy):
    """`since` is an event number no later than the last one (the largest
    uint64 must not wrap round to "everything"), `stream` is true or false;
    each mistake is a 400 naming the parameter, with a code."""
    def get(query):
        return requests.get(server.url + "/v1/kv/events?" + query, timeout=10)

    r = requests.post(server.url + "/v1/completions", timeout=300, json={
        "prompt": f"Run {uuid.uuid4().hex}. " + "Count the waves on the shore. " * 12,
        "max_tokens": 2, "temperature": 0})
    assert r.status_code == 200, r.text
    last = get("stream=false").json()["last_seq"]
    assert last > 0
    for query, param in (("since=18446744073709551615&stream=false", "since"),
                         ("since=9223372036854775807&stream=false", "since"),
                         (f"since={last + 1}&stream=false", "since"),
                         ("since=18446744073709551616&stream=false", "since"),
                         ("since=-1&stream=false", "since"),
                         ("since=1e3&stream=false", "since"),
                         ("since=18446744073709551615", "since"),
                         ("stream=nope", "stream"),
                         ("stream=False", "stream")):
        r = get(query)
        assert r.status_code == 400, (query, r.text)
        err = r.json()["error"]
        assert err["param"] == param and err["code"] == "invalid_value", (query, err)
        assert param in err["message"], err
    # Accepted spellings, and a cursor at the last event: nothing new.
    for query in (f"since={last}&stream=false", f"since={last}&stream=0"):
        b = get(query).json()
        assert b["events"] == [] and b["last_seq"] == last, (query, b)
    b = get(f"since={last - 1}&stream=false").json()
    assert [e["seq"] for e in b["events"]] == [last] and b["last_seq"] == last
