"""The unknown-field policy: fields tern does not know are ignored (and logged
once), fields it knows but cannot honour are a 400, and --strict-fields
refuses unknown fields too."""
from __future__ import annotations

import openai
import pytest
import requests

from tern_server import TernServer

MESSAGES = [{"role": "user", "content": "Say hi."}]


def ask(client, **extra):
    return client.chat.completions.create(model="tern", messages=MESSAGES, max_tokens=3,
                                          temperature=0, **extra)


def sdk(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0, timeout=300)


def test_unknown_fields_are_ignored_and_logged_once(server, client, healthy):
    for _ in range(2):
        r = ask(client, metadata={"team": "qa"},
                extra_body={"stream_options": None, "verbosity": "low",
                            "some_future_field": {"a": 1}})
        assert r.choices[0].message.content
    log = server.log()
    assert log.count("unknown request field 'verbosity'") == 1
    assert log.count("unknown request field 'some_future_field'") == 1
    # Nested unknown fields too, streaming.
    chunks = list(ask(client, stream=True,
                      stream_options={"include_usage": True, "include_obfuscation": False}))
    assert chunks[-1].usage.completion_tokens > 0


def test_known_but_unsupported_is_still_400(client, healthy):
    with pytest.raises(openai.BadRequestError) as e:
        ask(client, n=2, extra_body={"best_of": 3})
    assert e.value.body["param"] == "best_of"
    with pytest.raises(openai.BadRequestError) as e:
        ask(client, n=2, tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}])
    assert e.value.body["param"] == "tools"


def test_strict_fields_refuses_unknown_fields():
    with TernServer("--strict-fields") as srv:
        client = sdk(srv)
        with pytest.raises(openai.BadRequestError) as e:
            ask(client, metadata={"team": "qa"}, extra_body={"verbosity": "low"})
        assert e.value.status_code == 400
        assert e.value.body["code"] == "unknown_parameter"
        assert e.value.body["param"] == "verbosity"
        # Known fields (metadata, store, ...) still pass, and the server keeps serving.
        assert ask(client, metadata={"team": "qa"}, store=False).choices[0].message.content
        r = requests.post(srv.url + "/v1/completions", timeout=300,
                          json={"prompt": "Hi", "max_tokens": 2, "bogus": 1})
        assert r.status_code == 400 and r.json()["error"]["param"] == "bogus"
