"""logprobs, n > 1, logit_bias and seed through the real OpenAI SDK against the real server."""
from __future__ import annotations

import math
import re
import uuid

import requests

MESSAGES = [{"role": "user", "content": "Write a short sentence about the sea."}]


def chat(client, **kw):
    kw.setdefault("max_tokens", 12)
    return client.chat.completions.create(model="tern", messages=kw.pop("messages", MESSAGES), **kw)


def test_chat_logprobs_greedy(client, healthy):
    r = chat(client, temperature=0, logprobs=True, top_logprobs=5)
    choice = r.choices[0]
    content = choice.logprobs.content
    assert len(content) == r.usage.completion_tokens or (
        choice.finish_reason == "stop" and len(content) == r.usage.completion_tokens - 1)
    for t in content:
        assert t.logprob <= 0
        tops = [a.logprob for a in t.top_logprobs]
        assert len(tops) == 5
        assert tops == sorted(tops, reverse=True)
        # Greedy: the sampled token is the most likely one of the raw distribution.
        assert t.top_logprobs[0].token == t.token
        assert math.isclose(t.top_logprobs[0].logprob, t.logprob, abs_tol=1e-6)
        assert sum(math.exp(a) for a in tops) <= 1.0 + 1e-4
    # The token bytes put together are the text.
    text = b"".join(bytes(t.bytes) for t in content).decode("utf-8", "replace")
    assert text == choice.message.content


def test_chat_logprobs_streamed_match_non_streamed(client, healthy):
    whole = chat(client, temperature=0, logprobs=True, top_logprobs=2)
    chunks = list(chat(client, temperature=0, logprobs=True, top_logprobs=2, stream=True))
    streamed = [t for c in chunks if c.choices and c.choices[0].logprobs
                for t in c.choices[0].logprobs.content]
    assert [t.token for t in streamed] == [t.token for t in whole.choices[0].logprobs.content]
    for a, b in zip(streamed, whole.choices[0].logprobs.content):
        assert math.isclose(a.logprob, b.logprob, abs_tol=1e-5)


def test_no_logprobs_when_not_asked(client, healthy):
    r = chat(client, temperature=0)
    assert r.choices[0].logprobs is None


def test_completions_logprobs_shape(client, healthy):
    r = client.completions.create(model="tern", prompt="The capital of France is", max_tokens=6,
                                  temperature=0, logprobs=3)
    lp = r.choices[0].logprobs
    n = len(lp.tokens)
    assert n > 0 and len(lp.token_logprobs) == n and len(lp.top_logprobs) == n
    assert lp.text_offset[0] == 0
    assert all(b - a == len(t.encode()) for a, b, t in zip(lp.text_offset, lp.text_offset[1:],
                                                          lp.tokens))
    for tok, l, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert l <= 0
        assert tok in top and math.isclose(top[tok], l, abs_tol=1e-6)
        assert max(top.values()) == l  # greedy
    assert "".join(lp.tokens) == r.choices[0].text


def test_sampled_logprobs_are_bounded_and_reproducible(client, healthy):
    """Sampled with temperature: every chosen logprob is at most the top one, the top-20 list
    holds the chosen token when it ranks, and the same seed gives the same logprob sum."""
    r = chat(client, temperature=1.0, seed=5, logprobs=True, top_logprobs=20, max_tokens=10)
    for t in r.choices[0].logprobs.content:
        assert t.logprob <= t.top_logprobs[0].logprob + 1e-6
        # The top-20 list holds the sampled token whenever its logprob reaches the 20th.
        if t.logprob >= t.top_logprobs[-1].logprob + 1e-6:
            assert t.token in [a.token for a in t.top_logprobs]
    again = chat(client, temperature=1.0, seed=5, logprobs=True, top_logprobs=20, max_tokens=10)
    total = sum(t.logprob for t in r.choices[0].logprobs.content)
    assert total < 0
    assert math.isclose(total, sum(t.logprob for t in again.choices[0].logprobs.content),
                        abs_tol=1e-4)


def test_n3_with_temperature_is_reproducible_with_a_seed(client, healthy):
    kw = dict(temperature=1.2, seed=1234, n=3, max_tokens=16)
    a = chat(client, **kw)
    b = chat(client, **kw)
    assert [c.index for c in a.choices] == [0, 1, 2]
    assert [c.message.content for c in a.choices] == [c.message.content for c in b.choices]
    # Each choice samples with its own seed (seed, seed + 1, ...): they differ.
    assert len({c.message.content for c in a.choices}) > 1
    assert a.usage.completion_tokens == b.usage.completion_tokens
    # Choice i is the single-choice request with seed + i.
    one = chat(client, temperature=1.2, seed=1235, max_tokens=16)
    assert one.choices[0].message.content == a.choices[1].message.content


def test_greedy_n2_gives_identical_choices_and_summed_usage(client, healthy):
    r = chat(client, temperature=0, n=2)
    assert len(r.choices) == 2
    assert r.choices[0].message.content == r.choices[1].message.content
    single = chat(client, temperature=0)
    assert r.usage.prompt_tokens == single.usage.prompt_tokens
    assert r.usage.completion_tokens == 2 * single.usage.completion_tokens


def test_n_streamed_chunks_carry_index(client, healthy):
    chunks = list(chat(client, temperature=0.9, seed=3, n=3, stream=True,
                       stream_options={"include_usage": True}))
    texts = {0: "", 1: "", 2: ""}
    finishes = {}
    for c in chunks:
        for ch in c.choices:
            texts[ch.index] += ch.delta.content or ""
            if ch.finish_reason:
                finishes[ch.index] = ch.finish_reason
    assert sorted(finishes) == [0, 1, 2]
    assert chunks[-1].choices == []
    whole = chat(client, temperature=0.9, seed=3, n=3)
    assert [texts[i] for i in range(3)] == [c.message.content for c in whole.choices]
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens


def test_n_completions_with_stop_array(client, healthy):
    r = client.completions.create(model="tern", prompt="1, 2, 3, 4,", max_tokens=20,
                                  temperature=0.7, seed=9, n=2, stop=["7", "\n"])
    assert [c.index for c in r.choices] == [0, 1]
    for c in r.choices:
        assert "7" not in c.text and "\n" not in c.text


def metric(server, name):
    text = requests.get(server.url + "/metrics", timeout=30).text
    m = re.search(r"^" + re.escape(name) + r" ([0-9.e+]+)$", text, re.M)
    return float(m.group(1))


def test_n_prefills_the_prompt_once(client, server, healthy):
    # A fresh prompt (nothing cached) of a few hundred tokens.
    nonce = uuid.uuid4().hex
    words = " ".join(f"{nonce[i % 32]}{i}" for i in range(150))
    msgs = [{"role": "user", "content": f"{nonce} {words}"}]
    key = 'tern_kv_prefix_tokens_total{source="computed"}'
    before = metric(server, key)
    r = chat(client, messages=msgs, temperature=0.8, seed=1, n=4, max_tokens=4)
    computed = metric(server, key) - before
    p = r.usage.prompt_tokens
    assert p > 200
    # One prefill, then each sibling computes at most its last partial block (32 tokens)
    # plus the generated tokens; four prefills would be >= 4p.
    assert computed < p + 3 * 33 + r.usage.completion_tokens + 8, (computed, p)


def test_logit_bias_bans_and_favours_a_token(client, server, healthy):
    base = chat(client, temperature=0, logprobs=True, max_tokens=6)
    first = base.choices[0].logprobs.content[0]
    ids = requests.post(server.url + "/tokenize",
                        json={"content": first.token, "add_special": False}, timeout=30).json()
    assert len(ids["tokens"]) == 1, ids
    tok = ids["tokens"][0]
    tok = tok if isinstance(tok, int) else tok["id"]
    banned = chat(client, temperature=0, logprobs=True, max_tokens=6,
                  logit_bias={str(tok): -100})
    got = banned.choices[0].logprobs.content[0]
    assert got.token != first.token
    # The logprobs stay the model's raw ones: the banned token still ranks above the pick.
    assert got.logprob < first.logprob
    favoured = chat(client, temperature=0, max_tokens=3, logit_bias={str(tok): 100},
                    messages=[{"role": "user", "content": "Say hello."}])
    assert favoured.choices[0].message.content.startswith(first.token)
