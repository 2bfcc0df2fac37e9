"""Speculative decoding through the real server: prompt lookup and OpenAI's
Predicted Outputs (`prediction`) give the same text as plain decoding, with
the guesses counted in usage.completion_tokens_details and timings."""
from __future__ import annotations

import subprocess

import openai
import pytest
import requests

from tern_server import TernServer, model_path, tern_bin

CODE = """def area(width, height):
    return width * height


def perimeter(width, height):
    return 2 * (width + height)
"""
PROMPT = [{"role": "user", "content": "Repeat this code exactly, renaming nothing:\n\n" + CODE}]


def sdk(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0, timeout=300)


@pytest.fixture(scope="module")
def plain():
    """The same model with speculation off: the reference text."""
    with TernServer("--spec", "off") as srv:
        yield srv


def test_prompt_lookup_keeps_the_text(server, healthy, plain):
    want = sdk(plain).chat.completions.create(model="m", messages=PROMPT, max_tokens=60,
                                              temperature=0)
    body = {"model": "m", "messages": PROMPT, "max_tokens": 60, "temperature": 0}
    got = requests.post(server.url + "/v1/chat/completions", json=body, timeout=300).json()
    assert got["choices"][0]["message"]["content"] == want.choices[0].message.content
    assert got["timings"]["draft_n"] > 0, got["timings"]
    assert "prediction_accepted_n" not in got["timings"]
    details = got["usage"]["completion_tokens_details"]
    assert details == {"accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}


def test_predicted_outputs_through_the_sdk(server, healthy, plain):
    want = sdk(plain).chat.completions.create(model="m", messages=PROMPT, max_tokens=60,
                                              temperature=0).choices[0].message.content
    client = sdk(server)
    # The expected answer as the prediction: the same text, mostly from kept guesses.
    r = client.chat.completions.create(model="m", messages=PROMPT, max_tokens=60, temperature=0,
                                       prediction={"type": "content", "content": want})
    assert r.choices[0].message.content == want
    d = r.usage.completion_tokens_details
    assert d.accepted_prediction_tokens > r.usage.completion_tokens // 2, r.usage
    # A prediction as text parts, partly wrong: the text still does not change.
    wrong = want[: len(want) // 2] + "\nx = 1\n"
    r = client.chat.completions.create(
        model="m", messages=PROMPT, max_tokens=60, temperature=0,
        prediction={"type": "content", "content": [{"type": "text", "text": wrong}]})
    assert r.choices[0].message.content == want
    assert r.usage.completion_tokens_details.accepted_prediction_tokens > 0
    # Streaming with usage: the same counts arrive in the last chunk.
    chunks = list(client.chat.completions.create(
        model="m", messages=PROMPT, max_tokens=60, temperature=0, stream=True,
        stream_options={"include_usage": True}, prediction={"type": "content", "content": want}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == want
    assert chunks[-1].usage.completion_tokens_details.accepted_prediction_tokens > 0


def test_bad_predictions_are_400s_naming_the_field(server, healthy):
    client = sdk(server)
    for prediction, param in [({"type": "text", "content": "x"}, "prediction.type"),
                              ({"type": "content"}, "prediction.content"),
                              ({"type": "content", "content": 5}, "prediction.content"),
                              ({"type": "content", "content": [{"type": "image_url"}]},
                               "prediction.content[0]"),
                              ("just text", "prediction")]:
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model="m", messages=PROMPT, max_tokens=4,
                                           extra_body={"prediction": prediction})
        assert e.value.body["param"] == param, (prediction, e.value.body)


def test_per_request_speculative_controls(server, healthy, plain):
    want = sdk(plain).chat.completions.create(model="m", messages=PROMPT, max_tokens=60,
                                              temperature=0).choices[0].message.content
    body = {"model": "m", "messages": PROMPT, "max_tokens": 60, "temperature": 0}
    off = requests.post(server.url + "/v1/chat/completions", timeout=300,
                        json={**body, "speculative": {"type": "off"}}).json()
    assert off["choices"][0]["message"]["content"] == want
    assert "draft_n" not in off["timings"], off["timings"]
    small = requests.post(server.url + "/v1/chat/completions", timeout=300,
                          json={**body, "speculative": {"type": "ngram", "max_tokens": 2}}).json()
    assert small["choices"][0]["message"]["content"] == want
    t = small["timings"]
    # At most 2 guesses per verify: never more guesses than twice the verifies,
    # which are at most the tokens generated.
    assert 0 < t["draft_n"] <= 2 * t["predicted_n"], t
    # The same through /v1/completions.
    r = requests.post(server.url + "/v1/completions", timeout=300,
                      json={"model": "m", "prompt": CODE + CODE[:40], "max_tokens": 24,
                            "temperature": 0, "speculative": {"type": "off"}}).json()
    assert "draft_n" not in r["timings"]
    for spec, param in [({"type": "eagle"}, "speculative.type"),
                        ({"type": "draft"}, "speculative.type"),
                        ({"max_tokens": 65}, "speculative.max_tokens"),
                        ({"max_tokens": "4"}, "speculative.max_tokens"),
                        ("off", "speculative")]:
        r = requests.post(server.url + "/v1/chat/completions", timeout=60,
                          json={**body, "max_tokens": 2, "speculative": spec})
        assert r.status_code == 400 and r.json()["error"]["param"] == param, (spec, r.text)


@pytest.fixture(scope="module")
def drafted():
    """The model with a draft model guessing for it: the same file, so every
    guess the draft is sure of is the model's own next token."""
    with TernServer("--spec", "draft", "--draft-model", str(model_path())) as srv:
        yield srv


def test_a_draft_model_keeps_the_text_in_every_api(drafted, plain):
    chat = {"model": "m", "messages": [{"role": "user", "content": "Write a haiku about rain."}],
            "max_tokens": 40, "temperature": 0}
    want = requests.post(plain.url + "/v1/chat/completions", json=chat, timeout=300).json()
    got = requests.post(drafted.url + "/v1/chat/completions", json=chat, timeout=300).json()
    assert got["choices"][0]["message"]["content"] == want["choices"][0]["message"]["content"]
    t = got["timings"]
    assert t["draft_n"] > 0, t
    # The draft is the model itself: its guesses are the model's tokens.
    assert t["draft_accepted_n"] >= 0.9 * t["draft_n"], t
    # Anthropic Messages and the completions API go through the same scheduler.
    msg = {"model": "m", "max_tokens": 40, "temperature": 0,
           "messages": [{"role": "user", "content": "Name three rivers."}]}
    a = requests.post(plain.url + "/v1/messages", json=msg, timeout=300).json()
    b = requests.post(drafted.url + "/v1/messages", json=msg, timeout=300).json()
    assert a["content"] == b["content"]
    comp = {"model": "m", "prompt": "Once upon a time", "max_tokens": 32, "temperature": 0}
    a = requests.post(plain.url + "/v1/completions", json=comp, timeout=300).json()
    b = requests.post(drafted.url + "/v1/completions", json=comp, timeout=300).json()
    assert a["choices"][0]["text"] == b["choices"][0]["text"]
    assert b["timings"]["draft_n"] > 0
    # Per request: prompt lookup only, or no speculation.
    r = requests.post(drafted.url + "/v1/chat/completions", timeout=300,
                      json={**chat, "speculative": {"type": "off"}}).json()
    assert r["choices"][0]["message"]["content"] == want["choices"][0]["message"]["content"]
    assert "draft_n" not in r["timings"]


def test_a_draft_model_with_another_vocabulary_is_refused():
    gemma = model_path().parent / "gemma-3-270m-it-Q4_K_M.gguf"
    if not gemma.exists():
        pytest.skip("Gemma 3 270M is not installed (scripts/setup.sh fetches it)")
    out = subprocess.run([str(tern_bin()), "serve", "--port", "0", "-m", str(model_path()),
                          "--draft-model", str(gemma)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode != 0
    assert str(gemma) in out.stderr and str(model_path()) in out.stderr, out.stderr
    assert "vocabularies differ" in out.stderr, out.stderr
    out = subprocess.run([str(tern_bin()), "serve", "--port", "0", "--spec", "draft"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "--draft-model" in out.stderr, out.stderr
