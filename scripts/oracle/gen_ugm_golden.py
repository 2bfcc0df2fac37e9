#!/usr/bin/env python3
"""Records llama.cpp's unigram ("t5", UGM) tokenizations:
tests/fixtures/tokenizer_ugm_golden.json.

It writes the generated XLM-R cross-encoder (`tern gen-arch-model --arch
xlmr-reranker --seed 7`: a unigram vocabulary with scores, one user-defined,
unused and byte token each, and a precompiled charsmap with some of NFKC's
rules in SentencePiece's binary layout), copies its vocabulary into the
fixture (tokens, scores, types, special ids, the charsmap's bytes as hex) and
starts the peer's llama-server on it three times: as the file says
(add_space_prefix and remove_extra_whitespaces true) and with each flag
turned off by --override-kv. For every text it keeps POST /tokenize's ids
with the special tokens added (add_special true, parse_special false) and
with control tokens parsed (add_special false, parse_special true), and POST
/detokenize of the first (each token's piece, control tokens spelled out).
tests/unit/tokenizer/ugm_golden_test.cpp builds the vocabulary from the
fixture alone. Re-record:

    python3 scripts/oracle/gen_ugm_golden.py [--tern build/tern] [--peer DIR]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_rerank_golden import PEER, ROOT, SEED, post, wait_healthy  # noqa: E402

TEXTS = [
    "Hello world",
    "What is the capital of France?",
    "  leading, and   multiple   spaces  ",
    "tabs\tand\nnewlines\r\nend",
    "Ｆｕｌｌ－ｗｉｄｔｈ ＡＢＣ １２３！",
    "ﬁne ﬂow oﬃce ﬀ",
    "cafe\u0301 and café, u\u0308ber and e alone",
    "\u212B versus \u00C5",
    "ｶﾞｶｱ ｶ ﾞ",
    "…and ① ™",
    "emoji 🦊 and 😀😀 unknowns",
    "東京 中文 日本",
    "<usr>inside<usr> text",
    "[PAD7]x",
    "<s> literal control </s> tokens",
    "",
    " ",
    "\u3000ideographic\u3000space\u00a0nbsp\u2003em",
    "playable unplayable reranker",
    "12345 numbers",
]
VARIANTS = [
    {"add_space_prefix": True, "remove_extra_whitespaces": True},
    {"add_space_prefix": False, "remove_extra_whitespaces": False},
    {"add_space_prefix": True, "remove_extra_whitespaces": False},
]


def record(peer, model, port, variant):
    args = [os.path.join(peer, "llama-server"), "-m", model, "--reranking", "--port", str(port),
            "-t", "2", "-c", "128", "-np", "1"]
    for k, v in variant.items():
        args += ["--override-kv", f"tokenizer.ggml.{k}=bool:{'true' if v else 'false'}"]
    server = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_healthy(port)
        cases = []
        for text in TEXTS:
            special = post(port, "/tokenize", {"content": text, "add_special": True,
                                               "parse_special": False})["tokens"]
            parsed = post(port, "/tokenize", {"content": text, "add_special": False,
                                              "parse_special": True})["tokens"]
            pieces = post(port, "/detokenize", {"tokens": special})["content"]
            cases.append({"text": text, "ids": special, "ids_parse_special": parsed,
                          "pieces": pieces})
        return {"flags": variant, "cases": cases}
    finally:
        server.terminate()
        server.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tern", default=os.path.join(ROOT, "build/tern"))
    ap.add_argument("--peer", default=PEER)
    ap.add_argument("--port", type=int, default=18937)
    a = ap.parse_args()
    model = os.path.join(tempfile.mkdtemp(), "xlmr-reranker.gguf")
    subprocess.run([a.tern, "gen-arch-model", "--arch", "xlmr-reranker", "--seed", str(SEED),
                    "--out", model], capture_output=True, check=True)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(a.peer.rstrip("/"))),
                                    "src", "gguf-py"))
    import gguf  # noqa: E402
    fields = gguf.GGUFReader(model).fields

    def scalar(key):
        f = fields[key]
        return f.parts[f.data[0]][0].item()

    def array(key):
        f = fields[key]
        return [f.parts[i] for i in f.data]

    vocab = {
        "tokens": [bytes(p).decode() for p in array("tokenizer.ggml.tokens")],
        "scores": [float(p[0]) for p in array("tokenizer.ggml.scores")],
        "token_types": [int(p[0]) for p in array("tokenizer.ggml.token_type")],
        "precompiled_charsmap_hex": bytes(int(p[0]) & 0xFF for p in
                                          array("tokenizer.ggml.precompiled_charsmap")).hex(),
    }
    for name in ("bos", "eos", "unknown", "seperator", "padding"):
        vocab[name + "_token_id"] = scalar(f"tokenizer.ggml.{name}_token_id")
    for name in ("add_bos_token", "add_eos_token"):
        vocab[name] = bool(scalar("tokenizer.ggml." + name))
    runs = [record(a.peer, model, a.port, v) for v in VARIANTS]
    peer_name = os.path.basename(os.path.dirname(os.path.dirname(a.peer.rstrip("/"))))
    doc = {"how": f"llama-server ({peer_name}, CPU) POST /tokenize and /detokenize on the "
                  f"vocabulary of `tern gen-arch-model --arch xlmr-reranker --seed {SEED}`, "
                  "flags changed by --override-kv; scripts/oracle/gen_ugm_golden.py",
           "vocab": vocab, "runs": runs}
    with open(os.path.join(ROOT, "tests/fixtures/tokenizer_ugm_golden.json"), "w") as f:
        json.dump(doc, f, ensure_ascii=False, indent=None, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
