"""POST /v1/rerank over plain HTTP, on a generated decoder reranker.

The model is `tern gen-arch-model --arch qwen3-reranker --seed 7` (Qwen3
shapes, random weights, SmolLM2's tokenizer, a yes/no classification head and
the Qwen3-Reranker prompt): the file llama-server --reranking scored for
tests/fixtures/rerank_golden.json, so the scores are checked against those.
The server runs with an API key, which every rerank path needs.
"""
from __future__ import annotations

import json
import os
import subprocess
import threading

import pytest
import requests

from tern_server import TernServer, model_path, tern_bin

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "..", "fixtures", "rerank_golden.json")
KEY = "rerank-secret"
AUTH = {"Authorization": f"Bearer {KEY}"}
TOLERANCE = 0.025  # as tests/unit/engine/rerank_oracle_test.cpp


@pytest.fixture(scope="module")
def golden():
    with open(GOLDEN) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def reranker(tmp_path_factory, golden):
    path = tmp_path_factory.mktemp("rerank") / "qwen3-reranker.gguf"
    line = subprocess.run([str(tern_bin()), "gen-arch-model", "--arch", golden["arch"], "--seed",
                           str(golden["seed"]), "--tokenizer", str(model_path()), "--out",
                           str(path)], capture_output=True, text=True, check=True).stdout
    assert golden["weights_sha256"] in line
    srv = TernServer("--api-key", KEY, "--max-batch", "4", model=path).start()
    yield srv
    assert srv.stop() == 0, srv.log()[-4000:]


def rerank(srv, body, path="/v1/rerank", headers=AUTH):
    return requests.post(srv.url + path, json=body, headers=headers, timeout=300)


def test_cohere_shape_scores_match_llama_server(reranker, golden):
    docs = [c["document"] for c in golden["cases"]]
    r = rerank(reranker, {"model": "rerank-v3.5", "query": golden["query"], "documents": docs})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["model"] == "rerank-v3.5" and body["object"] == "list"
    assert body["usage"] == {"prompt_tokens": golden["usage_prompt_tokens"],
                             "total_tokens": golden["usage_prompt_tokens"]}
    results = body["results"]
    assert sorted(x["index"] for x in results) == list(range(len(docs)))
    scores = [x["relevance_score"] for x in results]
    assert scores == sorted(scores, reverse=True)
    for x in results:
        assert set(x) == {"index", "relevance_score"}
        assert abs(x["relevance_score"] - golden["cases"][x["index"]]["score"]) <= TOLERANCE


def test_top_n_return_documents_and_paths(reranker, golden):
    docs = [c["document"] for c in golden["cases"]]
    full = rerank(reranker, {"query": golden["query"], "documents": docs}).json()["results"]
    for path in ("/rerank", "/v2/rerank", "/v1/reranking", "/reranking"):
        r = rerank(reranker, {"query": golden["query"], "top_n": 2, "return_documents": True,
                              "documents": [{"text": d} for d in docs]}, path=path)
        assert r.status_code == 200, (path, r.text)
        top = r.json()["results"]
        assert [x["index"] for x in top] == [x["index"] for x in full[:2]]
        assert [x["relevance_score"] for x in top] == [x["relevance_score"] for x in full[:2]]
        assert [x["document"]["text"] for x in top] == [docs[x["index"]] for x in top]
    # TEI's shape, as llama.cpp answers {"texts": [...]}.
    tei = rerank(reranker, {"query": golden["query"], "texts": docs[:2], "return_text": True})
    assert tei.status_code == 200 and isinstance(tei.json(), list)
    assert {"index", "score", "text"} == set(tei.json()[0])


def test_api_key_is_needed(reranker, golden):
    for path in ("/v1/rerank", "/rerank", "/v2/rerank"):
        r = rerank(reranker, {"query": "q", "documents": ["d"]}, path=path, headers={})
        assert r.status_code == 401, path


@pytest.mark.parametrize("body,param", [
    ({"documents": ["a"]}, "query"),
    ({"query": "", "documents": ["a"]}, "query"),
    ({"query": "q"}, "documents"),
    ({"query": "q", "documents": []}, "documents"),
    ({"query": "q", "documents": "a"}, "documents"),
    ({"query": "q", "documents": ["a", 7]}, "documents[1]"),
    ({"query": "q", "documents": ["a", {"title": "b"}]}, "documents[1].text"),
    ({"query": "q", "documents": ["a"], "top_n": 0}, "top_n"),
    ({"query": "q", "documents": ["a"] * 1001}, "documents"),
    ({"query": "q", "documents": ["a", "word " * 400]}, "documents[1]"),
])
def test_bad_input_is_a_400_naming_the_field(reranker, body, param):
    r = rerank(reranker, body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param, err
    assert err["type"] == "invalid_request_error"


def test_truncate_cuts_a_long_document(reranker):
    r = rerank(reranker, {"query": "q", "documents": ["a", "word " * 400], "truncate": True})
    assert r.status_code == 200, r.text
    assert len(r.json()["results"]) == 2


def test_embeddings_on_a_reranker_is_a_clear_400(reranker):
    r = requests.post(reranker.url + "/v1/embeddings", json={"input": "x"}, headers=AUTH,
                      timeout=60)
    assert r.status_code == 400 and "/v1/rerank" in r.json()["error"]["message"]
    model = requests.get(reranker.url + "/v1/models", headers=AUTH, timeout=30).json()["data"][0]
    assert model["capabilities"]["rerank"] is True
    assert model["capabilities"]["embeddings"] is False
    assert model["meta"]["pooling"] == "rank"


def test_a_model_without_a_head_refuses(server):
    r = requests.post(server.url + "/v1/rerank", json={"query": "q", "documents": ["d"]},
                      timeout=60)
    assert r.status_code == 400, r.text
    assert "classification head" in r.json()["error"]["message"]


def test_documents_of_a_query_share_its_prefix(reranker, golden):
    """A decoder reranker reads only its prompt's last row, so the prompt up to
    the document comes from the prefix cache after the first time: the same
    scores, bit for bit, with fewer tokens computed."""
    body = {"query": "Which city is the capital of France, in one word?",
            "documents": [c["document"] for c in golden["cases"]]}

    def counts():  # (tokens whose KV came from the prefix cache, tokens computed)
        m = requests.get(reranker.url + "/metrics", headers=AUTH, timeout=30).text
        got = {line.split("source=")[1].split('"')[1]: float(line.split()[-1])
               for line in m.splitlines() if line.startswith("tern_kv_prefix_tokens_total{")}
        return got["dram"] + got["flash"], got["computed"]

    r0, c0 = counts()
    first = {x["index"]: x["relevance_score"] for x in rerank(reranker, body).json()["results"]}
    r1, c1 = counts()
    again = {x["index"]: x["relevance_score"] for x in rerank(reranker, body).json()["results"]}
    r2, c2 = counts()
    assert again == first
    # The second time every prompt (100+ tokens) starts from at least three
    # cached 32-token blocks.
    assert r2 - r1 >= 96 * len(body["documents"])
    assert c2 - c1 < c1 - c0


def test_beside_a_generation_neither_changes(reranker, golden):
    """Rerank sequences share the steps of a running generation: its greedy text
    and their scores are what each gives alone."""
    gen = {"model": "m", "prompt": "The three primary colours are", "max_tokens": 48,
           "temperature": 0}

    def complete():
        r = requests.post(reranker.url + "/v1/completions", json=gen, headers=AUTH, timeout=300)
        assert r.status_code == 200, r.text
        return r.json()["choices"][0]["text"]

    alone = complete()
    docs = [c["document"] + f" #{i}" for i in range(4) for c in golden["cases"]]
    body = {"query": golden["query"], "documents": docs}
    solo = {x["index"]: x["relevance_score"] for x in rerank(reranker, body).json()["results"]}
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("gen", complete()))
    t.start()
    during = rerank(reranker, body)
    t.join()
    assert out["gen"] == alone
    assert during.status_code == 200
    assert {x["index"]: x["relevance_score"] for x in during.json()["results"]} == solo


@pytest.mark.parametrize("fixture", ["rerank_bert_golden.json", "rerank_xlmr_golden.json"])
def test_a_cross_encoder_reranks_as_llama_server(tmp_path, fixture):
    """A BERT cross-encoder (`--arch bert-reranker`: its own WordPiece
    vocabulary, cls + tanh + cls.output on [CLS]) and an XLM-R one
    (`--arch xlmr-reranker`: a unigram vocabulary with its charsmap) served
    end to end: the same usage and scores as llama-server --reranking
    (tests/fixtures/rerank_{bert,xlmr}_golden.json), chat refused."""
    with open(os.path.join(HERE, "..", "fixtures", fixture)) as f:
        g = json.load(f)
    path = tmp_path / (g["arch"] + ".gguf")
    line = subprocess.run([str(tern_bin()), "gen-arch-model", "--arch", g["arch"], "--seed",
                           str(g["seed"]), "--out", str(path)], capture_output=True, text=True,
                          check=True).stdout
    assert g["weights_sha256"] in line
    with TernServer("--max-batch", "4", model=path) as srv:
        docs = [c["document"] for c in g["cases"]]
        r = requests.post(srv.url + "/v1/rerank", timeout=120,
                          json={"query": g["query"], "documents": docs, "top_n": 3})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["usage"]["prompt_tokens"] == g["usage_prompt_tokens"]
        want = sorted(range(len(docs)), key=lambda i: -g["cases"][i]["score"])[:3]
        assert [x["index"] for x in body["results"]] == want
        for x in body["results"]:
            assert abs(x["relevance_score"] - g["cases"][x["index"]]["score"]) <= 0.02
        chat = requests.post(srv.url + "/v1/chat/completions", timeout=60, json={
            "model": "m", "messages": [{"role": "user", "content": "hi"}]})
        assert chat.status_code == 400, chat.text
