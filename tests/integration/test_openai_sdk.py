"""The OpenAI Python SDK against a real server: chat, streaming, completions, models."""
from __future__ import annotations

import requests

MESSAGES = [{"role": "user", "content": "Name three colours."}]


def test_models(client, server):
    models = client.models.list()
    ids = [m.id for m in models.data]
    assert len(ids) == 1
    assert ids[0] == "SmolLM2-135M-Instruct.Q4_1"


def test_chat_non_streaming(client):
    r = client.chat.completions.create(model="tern", messages=MESSAGES, max_tokens=8,
                                       temperature=0)
    assert r.object == "chat.completion"
    assert r.id.startswith("chatcmpl-")
    assert len(r.choices) == 1
    choice = r.choices[0]
    assert choice.message.role == "assistant"
    assert isinstance(choice.message.content, str) and choice.message.content
    assert choice.finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens > 0
    assert 0 < r.usage.completion_tokens <= 8
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    # llama.cpp-style timings ride along for tools built for it.
    timings = r.model_extra["timings"]
    assert timings["prompt_n"] == r.usage.prompt_tokens
    assert timings["predicted_n"] == r.usage.completion_tokens
    assert timings["prompt_ms"] > 0


def test_chat_streaming_shape(client):
    stream = client.chat.completions.create(model="tern", messages=MESSAGES, max_tokens=8,
                                            temperature=0, stream=True,
                                            stream_options={"include_usage": True})
    chunks = list(stream)
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    # Role first, then content deltas, then the finish, then usage (choices: []).
    assert chunks[0].choices[0].delta.role == "assistant"
    usage_chunk = chunks[-1]
    assert usage_chunk.choices == []
    assert usage_chunk.usage.completion_tokens > 0
    finish = chunks[-2]
    assert finish.choices[0].finish_reason in ("stop", "length")
    content = [c.choices[0].delta.content for c in chunks[1:-2]]
    assert content and all(isinstance(t, str) and t for t in content)
    assert all(c.usage is None for c in chunks[:-1])
    # Streaming and non-streaming agree (greedy).
    whole = client.chat.completions.create(model="tern", messages=MESSAGES, max_tokens=8,
                                           temperature=0)
    assert "".join(content) == whole.choices[0].message.content
    assert usage_chunk.usage.completion_tokens == whole.usage.completion_tokens


def test_raw_sse_framing(server):
    r = requests.post(server.url + "/v1/chat/completions", stream=True, timeout=300,
                      json={"messages": MESSAGES, "max_tokens": 4, "temperature": 0,
                            "stream": True})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    lines = [line for line in r.iter_lines(decode_unicode=True) if line]
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == "data: [DONE]"


def test_content_parts_and_system(client):
    r = client.chat.completions.create(
        model="tern", max_tokens=4, temperature=0,
        messages=[{"role": "system", "content": "You are terse."},
                  {"role": "user", "content": [{"type": "text", "text": "Say hi."}]}])
    assert r.choices[0].message.content


def test_completions(client):
    r = client.completions.create(model="tern", prompt="The capital of France is",
                                  max_tokens=6, temperature=0)
    assert r.object == "text_completion"
    assert r.choices[0].text
    assert r.usage.completion_tokens <= 6
    parts = list(client.completions.create(model="tern", prompt="The capital of France is",
                                           max_tokens=6, temperature=0, stream=True))
    text = "".join(p.choices[0].text for p in parts if p.choices)
    assert text == r.choices[0].text
    assert parts[-1].choices[0].finish_reason in ("stop", "length")


def test_completion_echo_and_token_prompt(server):
    r = requests.post(server.url + "/v1/completions", timeout=300,
                      json={"prompt": "Hello there", "max_tokens": 3, "temperature": 0,
                            "echo": True}).json()
    assert r["choices"][0]["text"].startswith("Hello there")
    r2 = requests.post(server.url + "/v1/completions", timeout=300,
                       json={"prompt": [1, 2, 3], "max_tokens": 2, "temperature": 0}).json()
    assert r2["usage"]["prompt_tokens"] == 3


def test_seeded_sampling_is_reproducible(client):
    kw = dict(model="tern", messages=MESSAGES, max_tokens=10, temperature=1.0, seed=1234)
    a = client.chat.completions.create(**kw).choices[0].message.content
    b = client.chat.completions.create(**kw).choices[0].message.content
    assert a == b


def test_stop_string_never_leaks(client):
    base = client.completions.create(model="tern", prompt="1, 2, 3, 4, 5,", max_tokens=12,
                                     temperature=0).choices[0].text
    stop = base[len(base) // 2:len(base) // 2 + 2]
    assert len(stop) == 2
    expected = base[:base.index(stop)]
    parts = list(client.completions.create(model="tern", prompt="1, 2, 3, 4, 5,", max_tokens=12,
                                           temperature=0, stop=[stop], stream=True))
    text = "".join(p.choices[0].text for p in parts if p.choices)
    assert text == expected
    assert parts[-1].choices[0].finish_reason == "stop"
    whole = client.completions.create(model="tern", prompt="1, 2, 3, 4, 5,", max_tokens=12,
                                      temperature=0, stop=stop)
    assert whole.choices[0].text == expected


def test_streamed_text_is_valid_utf8(server):
    """Multi-byte characters split across tokens are held back until complete."""
    prompt = "日本語の文章：東京は日本の首都です。富士山は"
    r = requests.post(server.url + "/v1/completions", stream=True, timeout=300,
                      json={"prompt": prompt, "max_tokens": 24, "temperature": 0,
                            "stream": True})
    raw = b"".join(r.iter_content(chunk_size=None))
    text = raw.decode("utf-8")  # raises if any byte sequence is broken
    import json

    pieces = [json.loads(line[6:])["choices"][0]["text"]
              for line in text.split("\n\n") if line.startswith("data: {")]
    joined = "".join(pieces)
    # Only the very end may hold U+FFFD: max_tokens can stop generation in the
    # middle of a character, whose incomplete bytes are then flushed as one.
    assert "\ufffd" not in joined.rstrip("\ufffd")
    whole = requests.post(server.url + "/v1/completions", timeout=300,
                          json={"prompt": prompt, "max_tokens": 24, "temperature": 0}).json()
    assert joined == whole["choices"][0]["text"]
    assert any(ord(ch) > 0x7F for ch in joined), joined  # the model did write non-ASCII


def test_health_and_metrics(server):
    assert requests.get(server.url + "/health", timeout=10).json() == {"status": "ok"}
    m = server.metrics()
    for name in ("tern_generated_tokens_total", "tern_prompt_tokens_total", "tern_queue_depth",
                 "tern_running_sequences", "tern_kv_usage_ratio",
                 'tern_time_to_first_token_seconds_bucket{le="+Inf"}',
                 "tern_inter_token_latency_seconds_count", 'tern_requests_total{outcome="finished"}'):
        assert name in m, name


def test_demo_page_is_served(server):
    r = requests.get(server.url + "/", timeout=10)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    assert "app.js" in r.text
    assert requests.get(server.url + "/app.js", timeout=10).status_code == 200
    assert requests.get(server.url + "/../CMakeLists.txt", timeout=10).status_code == 404
