"""Anthropic's Messages API (POST /v1/messages) through the anthropic SDK."""
from __future__ import annotations

import anthropic
import pytest
import requests

from tern_server import TernServer

MESSAGES = [{"role": "user", "content": "Name three animals."}]


@pytest.fixture(scope="module")
def claude(server):
    return anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0, timeout=300)


def test_create(claude, healthy):
    # This SDK version has no sampling keywords: they travel in extra_body.
    m = claude.messages.create(model="tern", max_tokens=8, extra_body={"temperature": 0},
                               system="You are terse.", messages=MESSAGES)
    assert m.type == "message" and m.role == "assistant" and m.id.startswith("msg_")
    assert len(m.content) == 1 and m.content[0].type == "text" and m.content[0].text
    assert m.stop_reason in ("end_turn", "max_tokens")
    assert m.usage.input_tokens > 0 and 0 < m.usage.output_tokens <= 8


def test_stream_matches_create(claude, healthy):
    kwargs = dict(model="tern", max_tokens=8, extra_body={"temperature": 0, "top_k": 1}, messages=[
        {"role": "user", "content": [{"type": "text", "text": "Name three animals."}]}],
        system=[{"type": "text", "text": "You are terse."}])
    with claude.messages.stream(**kwargs) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    assert pieces and "".join(pieces) == final.content[0].text
    assert final.stop_reason in ("end_turn", "max_tokens")
    assert final.usage.output_tokens > 0
    whole = claude.messages.create(**kwargs)
    assert whole.content[0].text == final.content[0].text
    assert whole.usage.output_tokens == final.usage.output_tokens


def test_raw_event_sequence(server, healthy):
    r = requests.post(server.url + "/v1/messages", stream=True, timeout=300, json={
        "model": "tern", "max_tokens": 4, "messages": MESSAGES, "stream": True})
    assert r.status_code == 200
    events = [line[len("event: "):] for line in r.iter_lines(decode_unicode=True)
              if line.startswith("event: ")]
    assert events[:2] == ["message_start", "content_block_start"]
    assert set(events[2:-3]) == {"content_block_delta"}
    assert events[-3:] == ["content_block_stop", "message_delta", "message_stop"]


def test_stop_sequences_and_max_tokens(claude, healthy):
    m = claude.messages.create(model="tern", max_tokens=2, messages=MESSAGES)
    assert m.stop_reason == "max_tokens" and m.usage.output_tokens == 2
    m = claude.messages.create(model="tern", max_tokens=64, extra_body={"temperature": 0},
                               messages=MESSAGES, stop_sequences=[","])
    assert "," not in m.content[0].text
    # A reply of 64 tokens has a space in it: the stop sequence ends it and is named.
    m = claude.messages.create(model="tern", max_tokens=64, extra_body={"temperature": 0},
                               messages=MESSAGES, stop_sequences=[" ", "\n"])
    assert m.stop_reason == "stop_sequence", m
    assert m.stop_sequence in (" ", "\n")
    with claude.messages.stream(model="tern", max_tokens=64, messages=MESSAGES,
                                extra_body={"temperature": 0},
                                stop_sequences=[" ", "\n"]) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "stop_sequence" and final.stop_sequence == m.stop_sequence


def test_errors_in_anthropic_shape(server, claude, healthy):
    r = requests.post(server.url + "/v1/messages", timeout=60,
                      json={"model": "tern", "messages": MESSAGES})
    assert r.status_code == 400
    body = r.json()
    assert body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert "max_tokens" in body["error"]["message"]
    with pytest.raises(anthropic.BadRequestError) as e:
        claude.messages.create(model="tern", max_tokens=4, extra_body={"temperature": 3},
                               messages=MESSAGES)
    assert e.value.status_code == 400 and "temperature" in e.value.message
    with pytest.raises(anthropic.BadRequestError):
        claude.messages.create(model="tern", max_tokens=4, output_config={"format": {
            "type": "json_schema", "schema": {"type": "object"}}}, messages=MESSAGES)
    with pytest.raises(anthropic.BadRequestError):
        claude.messages.create(model="tern", max_tokens=4, messages=[
            {"role": "user", "content": [{"type": "image", "source": {
                "type": "base64", "media_type": "image/png", "data": "AAAA"}}]}])
    # Unknown fields are ignored like everywhere else.
    m = claude.messages.create(model="tern", max_tokens=2, messages=MESSAGES,
                               extra_body={"container": None, "future_field": 1})
    assert m.content[0].text


def test_x_api_key():
    with TernServer("--api-key", "sekret") as srv:
        bad = anthropic.Anthropic(base_url=srv.url, api_key="wrong", max_retries=0)
        with pytest.raises(anthropic.AuthenticationError) as e:
            bad.messages.create(model="tern", max_tokens=2, messages=MESSAGES)
        assert e.value.body["error"]["type"] == "authentication_error"
        good = anthropic.Anthropic(base_url=srv.url, api_key="sekret", max_retries=0)
        assert good.messages.create(model="tern", max_tokens=2, messages=MESSAGES).content
        # x-api-key is accepted on /v1/messages only.
        r = requests.post(srv.url + "/v1/chat/completions", headers={"x-api-key": "sekret"},
                          json={"messages": MESSAGES, "max_tokens": 2}, timeout=60)
        assert r.status_code == 401
