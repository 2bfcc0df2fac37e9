"""POST /v1/embeddings through the OpenAI Python SDK and plain HTTP, on the shared server.

The shared server runs SmolLM2 (no pooling_type in the file), so it pools by
the default, mean; its vectors are checked against llama-embedding's
(tests/fixtures/embed_golden.json) as well as against themselves: a batched
request gives exactly the vectors of the same inputs one by one.
"""
from __future__ import annotations

import json
import math
import os

import openai
import pytest
import requests

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "..", "fixtures", "embed_golden.json")
N_EMBD = 576  # SmolLM2-135M's width

TEXTS = [
    "Retrieval needs vectors.",
    "The quick brown fox jumps over the lazy dog.",
    "Paris is the capital of France.",
    "def add(a, b): return a + b",
    "Ünïcödé and emoji 🦊 too.",
]


def norm(v):
    return math.sqrt(sum(x * x for x in v))


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b)) / (norm(a) * norm(b))


def f32(v):
    """The floats as float32 values: JSON carries each as its shortest decimal."""
    import struct

    return list(struct.unpack(f"<{len(v)}f", struct.pack(f"<{len(v)}f", *v)))


def post(server, body):
    return requests.post(server.url + "/v1/embeddings", json=body, timeout=300)


def test_one_string_float(client, server):
    r = client.embeddings.create(model="my-embedder", input="Hello world", encoding_format="float")
    assert r.object == "list"
    assert r.model == "my-embedder"  # echoed
    assert len(r.data) == 1 and r.data[0].index == 0 and r.data[0].object == "embedding"
    v = r.data[0].embedding
    assert len(v) == N_EMBD
    assert abs(norm(v) - 1.0) < 1e-5
    ids = requests.post(server.url + "/tokenize", timeout=30,
                        json={"content": "Hello world", "add_special": True}).json()["tokens"]
    assert r.usage.prompt_tokens == len(ids) == r.usage.total_tokens
    model = requests.get(server.url + "/v1/models", timeout=30).json()["data"][0]
    assert model["capabilities"]["embeddings"] is True
    assert model["meta"]["pooling"] == "mean"  # SmolLM2's file names none


def test_batch_equals_one_by_one(client):
    # More inputs than --max-batch (16): they enter the scheduler in waves.
    texts = [f"{t} (variant {i})" for i in range(8) for t in TEXTS][:37]
    batch = client.embeddings.create(model="m", input=texts, encoding_format="float")
    assert [d.index for d in batch.data] == list(range(len(texts)))
    for i in (0, 1, 16, 17, 36):
        alone = client.embeddings.create(model="m", input=texts[i], encoding_format="float")
        assert alone.data[0].embedding == batch.data[i].embedding, f"input {i}"
    assert batch.usage.prompt_tokens > len(texts)


def test_base64_is_the_same_floats(client, server):
    floats = client.embeddings.create(model="m", input=TEXTS, encoding_format="float")
    # Without encoding_format the SDK asks for base64 and decodes it itself.
    decoded = client.embeddings.create(model="m", input=TEXTS)
    for f, d in zip(floats.data, decoded.data):
        assert f32(d.embedding) == f32(f.embedding)
    raw = client.embeddings.create(model="m", input=TEXTS[0], encoding_format="base64")
    assert isinstance(raw.data[0].embedding, str)
    import base64
    import struct

    b = base64.b64decode(raw.data[0].embedding)
    assert len(b) == 4 * N_EMBD
    assert list(struct.unpack(f"<{N_EMBD}f", b)) == f32(floats.data[0].embedding)


def test_dimensions_truncate_and_renormalise(client):
    full = client.embeddings.create(model="m", input=TEXTS[2], encoding_format="float")
    cut = client.embeddings.create(model="m", input=TEXTS[2], dimensions=64,
                                   encoding_format="float")
    v, w = full.data[0].embedding, cut.data[0].embedding
    assert len(w) == 64
    assert abs(norm(w) - 1.0) < 1e-5
    n = norm(v[:64])
    assert all(abs(a / n - b) < 1e-6 for a, b in zip(v[:64], w))


def test_token_ids_equal_text(client, server):
    ids = requests.post(server.url + "/tokenize", timeout=30,
                        json={"content": TEXTS[1], "add_special": True}).json()["tokens"]
    by_text = client.embeddings.create(model="m", input=TEXTS[1], encoding_format="float")
    by_ids = client.embeddings.create(model="m", input=ids, encoding_format="float")
    by_lists = client.embeddings.create(model="m", input=[ids, ids[:3]], encoding_format="float")
    assert by_ids.data[0].embedding == by_text.data[0].embedding
    assert by_lists.data[0].embedding == by_text.data[0].embedding
    assert by_lists.usage.prompt_tokens == len(ids) + 3


def test_agrees_with_llama_embedding(client):
    with open(GOLDEN) as f:
        cases = [c for c in json.load(f)["cases"]
                 if c["model"].startswith("SmolLM2") and c["pooling"] == "mean"]
    assert cases
    r = client.embeddings.create(model="m", input=[c["prompt"] for c in cases],
                                 encoding_format="float")
    for c, d in zip(cases, r.data):
        assert cosine(d.embedding, c["embedding"]) >= 0.998, c["prompt"]


@pytest.mark.parametrize("body,param", [
    ({"input": []}, "input"),
    ({"input": ""}, "input"),
    ({"input": ["ok", ""]}, "input[1]"),
    ({"input": ["ok", 3]}, "input[1]"),
    ({"input": {"text": "x"}}, "input"),
    ({"input": [[1, 2], "x"]}, "input[1]"),
    ({"input": [[1, 2], [10 ** 9]]}, "input[1]"),
    ({"input": ["ok"] * 2049}, "input"),
    ({"input": "ok", "dimensions": 0}, "dimensions"),
    ({"input": "ok", "dimensions": N_EMBD + 1}, "dimensions"),
    ({"input": "ok", "encoding_format": "hex"}, "encoding_format"),
    ({"model": "m"}, "input"),
])
def test_bad_input_is_a_400_naming_the_field(server, healthy, body, param):
    r = post(server, body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error"
    assert err["param"] == param, err
    assert err["message"]


def test_an_input_longer_than_the_context(client, server, healthy):
    long_text = "word " * 10000  # ~10k tokens, past the 4096-token context
    r = post(server, {"input": ["short", long_text]})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == "input[1]" and err["code"] == "context_length_exceeded"
    assert "4096" in err["message"]
    with pytest.raises(openai.BadRequestError):
        client.embeddings.create(model="m", input=["short", long_text])


def golden_cases(model_prefix, pooling):
    with open(GOLDEN) as f:
        return [c for c in json.load(f)["cases"]
                if c["model"].startswith(model_prefix) and c["pooling"] == pooling]


@pytest.mark.parametrize("pooling", ["last", "cls"])
def test_serve_pooling_flag(pooling):
    """tern serve --pooling picks the pooling: each agrees with llama-embedding's."""
    from tern_server import TernServer

    srv = TernServer("--pooling", pooling, "--max-batch", "4").start()
    try:
        cases = golden_cases("SmolLM2", pooling)
        r = requests.post(srv.url + "/v1/embeddings", timeout=300,
                          json={"input": [c["prompt"] for c in cases]})
        assert r.status_code == 200, r.text
        data = r.json()["data"]
        for c, d in zip(cases, data):
            assert cosine(d["embedding"], c["embedding"]) >= 0.998, c["prompt"]
        # The other pooling gives other vectors.
        other = golden_cases("SmolLM2", "mean" if pooling != "mean" else "last")
        assert cosine(data[1]["embedding"], other[1]["embedding"]) < 0.99
    finally:
        assert srv.stop() == 0, srv.log()[-4000:]


def test_beside_a_generation_neither_changes(client, server):
    """Embeddings share the steps of a running generation: its greedy text and
    their vectors are what each gives alone."""
    import threading

    prompt = "The three primary colours are"
    alone = client.completions.create(model="m", prompt=prompt, max_tokens=48, temperature=0)
    texts = [f"{t} #{i}" for i in range(12) for t in TEXTS]
    solo = [client.embeddings.create(model="m", input=t, encoding_format="float").data[0].embedding
            for t in texts[:3]]
    out = {}

    def generate():
        out["gen"] = client.completions.create(model="m", prompt=prompt, max_tokens=48,
                                               temperature=0)

    t = threading.Thread(target=generate)
    t.start()
    batch = client.embeddings.create(model="m", input=texts, encoding_format="float")
    t.join()
    assert out["gen"].choices[0].text == alone.choices[0].text
    for i in range(3):
        assert batch.data[i].embedding == solo[i]


def test_langchain_openai_embeddings(server, client):
    """LangChain's OpenAIEmbeddings against tern. It tokenizes with tiktoken
    by default (OpenAI's vocabulary, not the served model's), so a local
    server is used with check_embedding_ctx_length=False: the texts go as text."""
    import langchain_openai

    emb = langchain_openai.OpenAIEmbeddings(model="m", base_url=server.url + "/v1",
                                            api_key="not-needed",
                                            check_embedding_ctx_length=False)
    docs = emb.embed_documents(TEXTS[:3])
    query = emb.embed_query(TEXTS[0])
    assert len(docs) == 3 and all(len(d) == N_EMBD for d in docs)
    want = client.embeddings.create(model="m", input=TEXTS[0], encoding_format="float")
    assert f32(query) == f32(want.data[0].embedding)
    assert f32(docs[0]) == f32(query)
