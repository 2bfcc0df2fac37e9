#!/usr/bin/env python3
"""Records the peer's rerank scores: tests/fixtures/rerank_golden.json (the
decoder reranker) and, with --arch bert-reranker, rerank_bert_golden.json
(a BERT cross-encoder: no template; each document's prompt length is
recorded from a one-document request's usage instead of its token ids), or
with --arch xlmr-reranker, rerank_xlmr_golden.json (an XLM-R cross-encoder,
its unigram vocabulary: the same, plus the query's and each document's token
ids from POST /tokenize without special tokens, as format_prompt_rerank
tokenizes them).

It writes the seeded decoder reranker (`tern gen-arch-model --arch
qwen3-reranker`: Qwen3 shapes, SmolLM2's tokenizer copied in, a random
cls.output head, pooling_type rank and the Qwen3-Reranker rerank template),
starts llama.cpp's llama-server --reranking on it, and for one query and a few
documents keeps each document's relevance_score (POST /v1/rerank) and its
prompt's token ids (the rerank template filled in as llama.cpp fills it,
tokenized by POST /tokenize without BOS, special tokens parsed, as its
format_prompt_rerank does). tests/unit/engine/rerank_oracle_test.cpp
regenerates the file from the seed (the weights' SHA-256 must match) and
checks tern's scores of those token ids. Re-record:

    python3 scripts/oracle/gen_rerank_golden.py [--tern build/tern] [--peer DIR]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PEER = os.path.expanduser("~/.cache/tern-peer/llama.cpp-11434.0.0/build/bin")
SEED = 7
QUERY = "What is the capital of France?"
DOCUMENTS = [
    "Paris is the capital and largest city of France.",
    "The quick brown fox jumps over the lazy dog.",
    "Berlin is the capital of Germany; France borders it to the west.",
    "Rerankers score a query against each document: a cross-encoder reads both at once.",
    "Ünïcödé, emoji 🦊 and numbers 12345 in one line.",
]


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def wait_healthy(port):
    for _ in range(120):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
            return
        except OSError:
            time.sleep(0.5)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tern", default=os.path.join(ROOT, "build/tern"))
    ap.add_argument("--peer", default=PEER)
    ap.add_argument("--port", type=int, default=18931)
    ap.add_argument("--arch", default="qwen3-reranker", choices=["qwen3-reranker", "bert-reranker", "xlmr-reranker"])
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    model = os.path.join(tmp, a.arch + ".gguf")
    line = subprocess.run([a.tern, "gen-arch-model", "--arch", a.arch, "--seed",
                           str(SEED), "--out", model], capture_output=True, text=True,
                          check=True).stdout
    sha = line.split("weights sha256 ")[1].split()[0]
    server = subprocess.Popen([os.path.join(a.peer, "llama-server"), "-m", model, "--reranking",
                               "--port", str(a.port), "-t", "2", "-c", "2048" if a.arch ==
                               "qwen3-reranker" else "128", "-np", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_healthy(a.port)
        res = post(a.port, "/v1/rerank", {"query": QUERY, "documents": DOCUMENTS})
        scores = {r["index"]: r["relevance_score"] for r in res["results"]}
        # The template as the file carries it (gguf-py from the peer's sources).
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(a.peer.rstrip("/"))),
                                        "src", "gguf-py"))
        import gguf  # noqa: E402
        field = gguf.GGUFReader(model).fields.get("tokenizer.chat_template.rerank")
        template = bytes(field.parts[field.data[0]]).decode() if field else None
        cases = []
        plain = {"add_special": False, "parse_special": False}
        query_ids = post(a.port, "/tokenize", {"content": QUERY, **plain})["tokens"]
        for i, doc in enumerate(DOCUMENTS):
            if template:
                prompt = template.replace("{query}", QUERY).replace("{document}", doc)
                ids = post(a.port, "/tokenize", {"content": prompt, "add_special": False,
                                                 "parse_special": True})["tokens"]
                cases.append({"document": doc, "tokens": ids, "score": scores[i]})
                n = len(ids)
            else:  # [BOS] query [EOS] [SEP] doc [EOS]: its length, from the usage
                n = post(a.port, "/v1/rerank", {"query": QUERY, "documents": [doc]})[
                    "usage"]["prompt_tokens"]
                cases.append({"document": doc, "prompt_tokens": n, "score": scores[i]})
                if a.arch == "xlmr-reranker":
                    cases[-1]["document_tokens"] = post(a.port, "/tokenize",
                                                        {"content": doc, **plain})["tokens"]
            print(f"document {i}: {n} tokens, score {scores[i]:.6f}", file=sys.stderr)
    finally:
        server.terminate()
        server.wait()
    peer_name = os.path.basename(os.path.dirname(os.path.dirname(a.peer.rstrip("/"))))
    doc = {"how": f"llama-server ({peer_name}, CPU)"
                  f" --reranking -np 1 on `tern gen-arch-model --arch {a.arch} "
                  f"--seed {SEED}`; scores from POST /v1/rerank; "
                  + ("token ids from POST /tokenize (add_special false, parse_special true) of "
                     "the filled rerank template (SmolLM2 tokenizer)" if template else
                     "each prompt's length from a one-document request's usage")
                  + f"; scripts/oracle/gen_rerank_golden.py --arch {a.arch}",
           "arch": a.arch, "seed": SEED, "weights_sha256": sha, "query": QUERY,
           "usage_prompt_tokens": res["usage"]["prompt_tokens"], "cases": cases}
    if a.arch == "xlmr-reranker":
        doc["query_tokens"] = query_ids
    name = {"qwen3-reranker": "rerank_golden.json", "bert-reranker": "rerank_bert_golden.json",
            "xlmr-reranker": "rerank_xlmr_golden.json"}[a.arch]
    with open(os.path.join(ROOT, "tests/fixtures", name), "w") as f:
        json.dump(doc, f, separators=(",", ":"), ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
