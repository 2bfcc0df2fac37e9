"""The model's own Jinja chat template through the real server and CLI:
--chat-template-file, chat_template_kwargs and reasoning_effort reaching the
template, a template's refusal as a 400, and `tern template`."""
from __future__ import annotations

import json
import subprocess

import openai
import pytest
import requests

from tern_server import REPO, TernServer

TERN = REPO / "build" / "tern"

# ChatML that also prints what the request chose, so the prompt shows it
# (it knows <think>, so enable_thinking defaults to true).
SHOW = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if enable_thinking is false %}<think></think>{% endif %}"
    "{% if reasoning_effort is defined %}[effort={{ reasoning_effort }}]{% endif %}"
    "{% if style is defined %}[style={{ style }}]{% endif %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
STRICT = (
    "{% for m in messages %}{% if (m.role == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant') }}"
    "{% endif %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def prompt_of(server, body) -> str:
    r = requests.post(server.url + "/tokenize", json={**body, "with_pieces": True}, timeout=60)
    assert r.status_code == 200, r.text
    pieces = r.json()["tokens"]
    ids = [p["id"] if isinstance(p, dict) else p for p in pieces]
    d = requests.post(server.url + "/detokenize", json={"tokens": ids}, timeout=60)
    assert d.status_code == 200, d.text
    return d.json()["content"]


@pytest.fixture(scope="module")
def show_server(tmp_path_factory):
    path = tmp_path_factory.mktemp("tmpl") / "show.jinja"
    path.write_text(SHOW)
    with TernServer("--chat-template-file", str(path)) as srv:
        yield srv


def test_template_file_kwargs_and_reasoning_effort_reach_the_template(show_server):
    msgs = [{"role": "user", "content": "Hi"}]
    assert prompt_of(show_server, {"messages": msgs}) == (
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    p = prompt_of(show_server, {"messages": msgs,
                                "chat_template_kwargs": {"enable_thinking": False, "style": "terse"}})
    assert "<think></think>" in p and "[style=terse]" in p, p
    assert "[effort=high]" in prompt_of(show_server, {"messages": msgs, "reasoning_effort": "high"})
    assert "<think></think>" in prompt_of(show_server, {"messages": msgs, "reasoning_effort": "none"})
    # Through the OpenAI SDK: the fields are accepted and the answer comes.
    client = openai.OpenAI(base_url=show_server.url + "/v1", api_key="x", max_retries=0)
    r = client.chat.completions.create(model="m", messages=msgs, max_tokens=4, temperature=0,
                                       reasoning_effort="low",
                                       extra_body={"chat_template_kwargs": {"style": "terse"}})
    assert r.choices[0].finish_reason in ("length", "stop")
    assert "chat template: jinja" in show_server.log()
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=msgs, max_tokens=4,
                                       extra_body={"chat_template_kwargs": ["not", "an", "object"]})
    assert e.value.body["param"] == "chat_template_kwargs"


def test_a_template_refusal_is_a_400_naming_messages(tmp_path):
    path = tmp_path / "strict.jinja"
    path.write_text(STRICT)
    with TernServer("--chat-template-file", str(path)) as srv:
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=0)
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(
                model="m", max_tokens=4,
                messages=[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
        assert e.value.body["param"] == "messages"
        assert "must alternate" in e.value.body["message"]
        # The server still serves.
        r = client.chat.completions.create(model="m", max_tokens=2,
                                           messages=[{"role": "user", "content": "a"}])
        assert r.choices[0].message.content is not None


def test_a_template_file_that_does_not_parse_stops_the_server_with_its_line(tmp_path):
    path = tmp_path / "broken.jinja"
    path.write_text("{% for m in messages %}{{ m.content }}\n{% endfor\n")
    r = subprocess.run([str(TERN), "serve", "--port", "0", "--chat-template-file", str(path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "--chat-template-file" in r.stderr and "line" in r.stderr, r.stderr


def test_tern_template_prints_the_models_prompt(tmp_path):
    r = subprocess.run([str(TERN), "template"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained "
                        "by Hugging Face<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n"
                        "<|im_start|>assistant\n")
    conv = tmp_path / "conv.json"
    conv.write_text(json.dumps({"messages": [{"role": "system", "content": "Be terse."},
                                             {"role": "user", "content": "Hi"}],
                                "add_generation_prompt": False}))
    r = subprocess.run([str(TERN), "template", "--chat-template", "llama3", "--conversation",
                        str(conv)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ("<|start_header_id|>system<|end_header_id|>\n\nBe terse.<|eot_id|>"
                        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>")
    r = subprocess.run([str(TERN), "template", "--conversation", str(conv), "--bench", "50"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "render median" in r.stdout, r.stderr
