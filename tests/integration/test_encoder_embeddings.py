"""A BERT encoder served end to end: `tern gen-arch-model --arch bert` writes a
small seeded model (WordPiece vocabulary, CLS pooling in the file), the real
server embeds through the OpenAI SDK, and every generating API refuses with a
400 naming the model an embedding model. Vectors match llama-embedding's
(tests/fixtures/encoder_golden.json, the same seed) and a batch gives exactly
the vectors of its inputs one by one.
"""
from __future__ import annotations

import json
import math
import os
import subprocess

import openai
import pytest
import requests

from tern_server import TernServer, tern_bin

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "..", "fixtures", "encoder_golden.json")


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


@pytest.fixture(scope="module")
def golden():
    with open(GOLDEN) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def bert_server(tmp_path_factory, golden):
    if not tern_bin().exists():
        pytest.skip(f"{tern_bin()} not built")
    path = tmp_path_factory.mktemp("bert") / "bert.gguf"
    subprocess.run([str(tern_bin()), "gen-arch-model", "--arch", "bert", "--seed",
                    str(golden["seed"]), "--out", str(path)], check=True, capture_output=True)
    srv = TernServer("--max-batch", "4", model=path).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def bert_client(bert_server):
    return openai.OpenAI(base_url=bert_server.url + "/v1", api_key="none")


def test_embeddings_match_llama_embedding(bert_client, golden):
    cases = [c for c in golden["cases"]["bert"]["vectors"] if c["pooling"] == "cls"]
    r = bert_client.embeddings.create(model="bert", input=[c["prompt"] for c in cases],
                                      encoding_format="float")
    assert [d.index for d in r.data] == list(range(len(cases)))
    assert r.usage.prompt_tokens == sum(len(c["tokens"]) for c in cases)
    for d, c in zip(r.data, cases):
        assert len(d.embedding) == len(c["embedding"])
        assert cosine(d.embedding, c["embedding"]) >= 0.999, c["prompt"]


def test_batch_equals_one_by_one(bert_client):
    texts = ["hello world", "the cat sat on the mat.", "Paris, France!", "un re play", "中文"]
    batch = bert_client.embeddings.create(model="m", input=texts, encoding_format="float")
    for i, t in enumerate(texts):
        alone = bert_client.embeddings.create(model="m", input=t, encoding_format="float")
        assert alone.data[0].embedding == batch.data[i].embedding, t


def test_model_lists_cls_pooling(bert_server):
    model = requests.get(bert_server.url + "/v1/models", timeout=30).json()["data"][0]
    assert model["meta"]["pooling"] == "cls"
    assert model["meta"]["arch"] == "bert"
    assert model["capabilities"]["embeddings"] is True
    assert model["capabilities"]["completion"] is False


def test_too_long_input_names_its_index(bert_server):
    long_text = " ".join(["hello"] * 300)  # the file's context is 128 tokens
    r = requests.post(bert_server.url + "/v1/embeddings", timeout=60,
                      json={"model": "m", "input": ["hello", long_text]})
    assert r.status_code == 400
    assert "input[1]" in json.dumps(r.json())


def test_generation_is_refused(bert_server, bert_client):
    with pytest.raises(openai.BadRequestError) as e:
        bert_client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    err = e.value.body if isinstance(e.value.body, dict) else {}
    assert err.get("type") == "invalid_request_error"
    assert "embedding model" in err.get("message", "")
    with pytest.raises(openai.BadRequestError):
        bert_client.completions.create(model="m", prompt="hello")
    r = requests.post(bert_server.url + "/v1/responses", timeout=30,
                      json={"model": "m", "input": "hello"})
    assert r.status_code == 400 and "embedding model" in r.text


def test_embedding_gemma_serves_embeddings_and_refuses_chat(tmp_path, golden):
    """EmbeddingGemma (gemma-embedding: bidirectional Gemma 3 with symmetric
    sliding windows and dense heads) through the real server: the file's mean
    pooling, vectors as llama-embedding's, chat refused."""
    path = tmp_path / "gemma-embedding.gguf"
    subprocess.run([str(tern_bin()), "gen-arch-model", "--arch", "gemma-embedding", "--seed",
                    str(golden["seed"]), "--out", str(path)], check=True, capture_output=True)
    with TernServer("--max-batch", "4", model=path) as srv:
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key="none")
        cases = [c for c in golden["cases"]["gemma-embedding"]["vectors"]
                 if c["pooling"] == "mean"]
        r = client.embeddings.create(model="g", input=[c["prompt"] for c in cases])
        for d, c in zip(r.data, cases):
            assert cosine(d.embedding, c["embedding"]) >= 0.998, c["prompt"]
        chat = requests.post(srv.url + "/v1/chat/completions", timeout=60, json={
            "model": "g", "messages": [{"role": "user", "content": "hi"}]})
        assert chat.status_code == 400 and "embedding model" in chat.text, chat.text
