"""A long prompt among streams, through the public API (issue 14, section 3):
the streams keep getting tokens while it is prefilled in chunks beside their
decodes (--itl-slack), and a short request sent during that prefill is
answered before it. Order and progress are checked, never wall-clock time."""
from __future__ import annotations

import json
import threading
import time

import requests

from tern_server import TernServer

LONG_WORDS = 500  # about 1,500 tokens: many steps' worth of chunks


def stream(url: str, prompt: str, max_tokens: int, events: list, stop: threading.Event | None = None,
           out: dict | None = None) -> None:
    """Streams a chat; appends (perf_counter, text) per content chunk."""
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
            "temperature": 0, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}}
    with requests.post(url + "/v1/chat/completions", json=body, stream=True, timeout=600) as r:
        assert r.status_code == 200, r.text
        for line in r.iter_lines():
            if stop is not None and stop.is_set():
                return
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            msg = json.loads(line[6:])
            if msg.get("usage") and out is not None:
                out["usage"] = msg["usage"]
            for ch in msg.get("choices") or []:
                if (ch.get("delta") or {}).get("content"):
                    events.append((time.perf_counter(), ch["delta"]["content"]))
                if ch.get("finish_reason") and out is not None:
                    out["finish"] = ch["finish_reason"]


def test_streams_progress_and_a_short_request_goes_first_during_a_long_prefill():
    with TernServer("--max-batch", "8", "--ctx", "2048", "--step-tokens", "64",
                    "--itl-slack", "2.0") as srv:
        stop = threading.Event()
        streams = [[] for _ in range(3)]
        threads = [threading.Thread(target=stream, daemon=True,
                                    args=(srv.url, f"Tell a story about the number {i}.", 1800,
                                          streams[i], stop)) for i in range(3)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 120
        while min(len(s) for s in streams) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert min(len(s) for s in streams) >= 5, "the streams never started"

        long_events: list = []
        long_out: dict = {}
        long_prompt = "Summarise this. " + " ".join(f"w{i % 97}" for i in range(LONG_WORDS))
        sent = time.perf_counter()
        lt = threading.Thread(target=stream, args=(srv.url, long_prompt, 2, long_events),
                              kwargs={"out": long_out})
        lt.start()
        time.sleep(0.3)
        short_events: list = []
        short_out: dict = {}
        stream(srv.url, "Name a colour.", 2, short_events, out=short_out)
        lt.join(timeout=600)
        stop.set()

        assert long_out.get("finish") == "length", long_out
        assert long_out["usage"]["prompt_tokens"] > 1000, long_out["usage"]
        assert short_out.get("finish") == "length" and short_events, short_out
        first_long = long_events[0][0]
        # The short request was answered while the long prompt was still prefilled.
        assert short_events[0][0] < first_long
        # Every stream kept decoding through the prefill (chunks interleaved with
        # its decode steps, not one long stall).
        for i, s in enumerate(streams):
            during = [t for t, _ in s if sent <= t <= first_long]
            assert len(during) >= 10, (i, len(during))
        m = srv.metrics()
        assert m["tern_prompt_tokens_total"] >= long_out["usage"]["prompt_tokens"]
        for t in threads:
            t.join(timeout=60)
        assert requests.get(srv.url + "/health", timeout=10).status_code == 200


def test_a_long_pass_yields_to_a_short_request_that_arrives_during_it():
    """Issue 31, section 2: one long prompt in one forward pass (--step-tokens
    covers it, nothing else runs); a short request sent while that pass runs
    is admitted in a pause between two layers, answered first, and the long
    answer is the same as the one the prompt gets alone."""
    # No prefix cache: the long prompt's second run below recomputes it.
    with TernServer("--max-batch", "4", "--ctx", "4096", "--step-tokens", "4096",
                    "--no-prefix-cache") as srv:
        long_prompt = "Summarise this. " + " ".join(f"w{i % 97}" for i in range(900))
        long_events: list = []
        long_out: dict = {}
        lt = threading.Thread(target=stream, args=(srv.url, long_prompt, 4, long_events),
                              kwargs={"out": long_out})
        lt.start()
        # Once the long prompt runs (its pass takes seconds), the short one arrives.
        deadline = time.monotonic() + 60
        while srv.metrics().get("tern_running_sequences", 0) < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        short_events: list = []
        short_out: dict = {}
        stream(srv.url, "Name a colour.", 2, short_events, out=short_out)
        lt.join(timeout=600)

        assert long_out.get("finish") == "length", long_out
        assert long_out["usage"]["prompt_tokens"] > 2000, long_out["usage"]
        assert short_out.get("finish") == "length" and short_events, short_out
        assert short_events[0][0] < long_events[0][0], "the short request waited for the long pass"
        m = srv.metrics()
        assert m["tern_step_yields_total"] >= 1
        assert m["tern_yield_prompts_total"] >= 1
        # The paused and resumed pass computed what an uninterrupted one does
        # (the same prompt again, alone, from scratch).
        alone: list = []
        stream(srv.url, long_prompt, 4, alone)
        assert "".join(t for _, t in alone) == "".join(t for _, t in long_events)
