"""Every bad input gets OpenAI's error JSON with the right status, and the
server keeps serving after each one."""
from __future__ import annotations

import socket

import openai
import pytest
import requests

GOOD = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}


def post(server, path, body=None, data=None, headers=None):
    return requests.post(server.url + path, json=body, data=data, headers=headers, timeout=300)


def assert_error(r, status, code=None, param=None):
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert isinstance(err["message"], str) and err["message"]
    assert "type" in err and "param" in err and "code" in err
    if code is not None:
        assert err["code"] == code, err
    if param is not None:
        assert err["param"] == param, err


CASES = [
    # (description, kwargs for post, status, code, param)
    ("malformed json", dict(data=b'{"messages": [', headers={"content-type": "application/json"}),
     400, "invalid_json", None),
    ("not an object", dict(body=[1, 2, 3]), 400, "invalid_json", None),
    ("missing messages", dict(body={"max_tokens": 3}), 400, "missing_required_parameter", "messages"),
    ("wrong type", dict(body={**GOOD, "temperature": "warm"}), 400, "invalid_type", "temperature"),
    ("wrong type max_tokens", dict(body={**GOOD, "max_tokens": "3"}), 400, "invalid_type", "max_tokens"),
    ("out of range", dict(body={**GOOD, "top_p": 7}), 400, "invalid_value", "top_p"),
    ("max_tokens zero", dict(body={**GOOD, "max_tokens": 0}), 400, "invalid_value", "max_tokens"),
    ("n too large", dict(body={**GOOD, "n": 17}), 400, "invalid_value", "n"),
    ("logit_bias key", dict(body={**GOOD, "logit_bias": {"x": 1}}), 400, "invalid_value", "logit_bias"),
    ("logit_bias id", dict(body={**GOOD, "logit_bias": {"99999999": 1}}), 400, "invalid_value",
     "logit_bias"),
    ("top_logprobs alone", dict(body={**GOOD, "top_logprobs": 2}), 400, "invalid_value",
     "top_logprobs"),
    ("top_logprobs > 20", dict(body={**GOOD, "logprobs": True, "top_logprobs": 21}), 400,
     "invalid_value", "top_logprobs"),
    ("bad role", dict(body={"messages": [{"role": "robot", "content": "x"}]}), 400, "invalid_value",
     "messages[0].role"),
    ("image part", dict(body={"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "http://x"}}]}]}), 403, "media_forbidden",
     "messages[0].content[0].image_url.url"),  # remote media is off by default (test_media.py)
    ("prompt too long", dict(body={"messages": [{"role": "user", "content": "word " * 5000}]}),
     400, "context_length_exceeded", "messages"),
]


@pytest.mark.parametrize("desc,kwargs,status,code,param", CASES, ids=[c[0] for c in CASES])
def test_bad_chat_requests(server, healthy, desc, kwargs, status, code, param):
    assert_error(post(server, "/v1/chat/completions", **kwargs), status, code, param)


def test_bad_completion_requests(server, healthy):
    assert_error(post(server, "/v1/completions", {"prompt": 5}), 400, "invalid_type", "prompt")
    assert_error(post(server, "/v1/completions", {"prompt": "x", "echo": "yes"}), 400, "invalid_type")
    assert_error(post(server, "/v1/completions", {"prompt": [1, 999999999]}), 400, "invalid_value")
    assert_error(post(server, "/v1/completions", {"prompt": "word " * 5000}), 400,
                 "context_length_exceeded", "prompt")


def test_logit_bias_outside_the_vocabulary_names_the_key(server, healthy):
    for path, body in (("/v1/chat/completions", GOOD), ("/v1/completions", {"prompt": "Hi"})):
        r = post(server, path, {**body, "max_tokens": 2, "logit_bias": {"1000000000": 5}})
        assert_error(r, 400, "invalid_value", "logit_bias")
        assert "'1000000000'" in r.json()["error"]["message"], r.text


def test_sdk_raises_typed_errors(client, healthy):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="tern", messages=[{"role": "user", "content": "x"}],
                                       temperature=5)
    assert e.value.status_code == 400
    assert e.value.body["param"] == "temperature"


def test_unknown_route_and_method(server, healthy):
    assert_error(requests.get(server.url + "/v1/nothing", timeout=10), 404, "not_found")
    assert_error(requests.post(server.url + "/v2/chat", json={}, timeout=10), 404, "not_found")
    r = requests.get(server.url + "/v1/chat/completions", timeout=10)
    assert_error(r, 405, "method_not_allowed")
    assert_error(requests.delete(server.url + "/v1/models", timeout=10), 405)


def test_oversized_body_is_413(server, healthy):
    big = b'{"messages": [{"role": "user", "content": "' + b"a" * (2 << 20) + b'"}]}'
    try:
        r = requests.post(server.url + "/v1/chat/completions", data=big, timeout=60,
                          headers={"content-type": "application/json"})
    except requests.ConnectionError:
        pytest.fail("the server closed the connection without answering 413")
    assert_error(r, 413, "request_too_large")


def test_expect_100_continue(server, healthy):
    body = b'{"prompt": "Hi", "max_tokens": 1}'
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Expect: 100-continue\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n")
        assert s.recv(64).startswith(b"HTTP/1.1 100 Continue")
        s.sendall(body)
        data = s.recv(65536)
        assert data.startswith(b"HTTP/1.1 200"), data


def test_garbage_and_huge_headers(server, healthy):
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        s.sendall(b"THIS IS NOT HTTP\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 400")
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (64 << 10) + b"\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 431")


def test_keep_alive_survives_errors(server, healthy):
    with requests.Session() as s:
        for _ in range(3):
            assert s.post(server.url + "/v1/chat/completions", data=b"{", timeout=30).status_code == 400
            assert s.get(server.url + "/health", timeout=30).status_code == 200
        r = s.post(server.url + "/v1/chat/completions", json=GOOD, timeout=300)
        assert r.status_code == 200
