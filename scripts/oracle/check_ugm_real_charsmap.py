#!/usr/bin/env python3
"""Checks tern's unigram tokenizer on a real precompiled charsmap against
llama.cpp: a spot check, not a test (it needs the `sentencepiece` package,
`pip install sentencepiece` into .venv, and the peer's llama-server).

SentencePiece itself trains a tiny unigram model with its default
normalisation rule (nmt_nfkc), whose normalizer_spec carries the
precompiled charsmap every XLM-R / T5 file is converted with (the darts-clone
double array SentencePiece builds, not tern's Charsmap::build). That blob
replaces the charsmap of `tern gen-arch-model --arch xlmr-reranker`; tern
serve and llama-server then tokenize the same texts (POST /tokenize, special
tokens added) and the ids are compared. Run:

    .venv/bin/python scripts/oracle/check_ugm_real_charsmap.py
"""
import os
import subprocess
import sys
import tempfile

import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_rerank_golden import PEER, ROOT, wait_healthy  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from tern_server import TernServer  # noqa: E402

TEXTS = [
    "Ｆｕｌｌ－ｗｉｄｔｈ ＡＢＣ １２３！ and ｶﾞｷﾞ ﾊﾟ",
    "ﬁne ﬂow oﬃce ﬀ ﬆ Ǆ ǅ ǆ",
    "cafe\u0301 u\u0308ber A\u030A \u212B \u2126 \u00C5",
    "①②③ ⑴ ⒈ ㈱ ㍻ ㎏ ™ ℃ ½ ¼ ¾ x² H₂O",
    "\u3000ideographic\u00a0nbsp\u2003em\u2009thin\u200bzero-width\ufeffbom",
    "tabs\tand\nnewlines\r\nand\x0bvertical\x0cfeed",
    "control \x01\x02\x7f chars and soft\u00adhyphen",
    "…‥ “quotes” ‘single’ — – −",
    "한국어 텍스트 ﾟ ｰ",
    "Ⅻ ⅻ ℌ ℍ 𝐀𝐁𝐂 𝟏𝟐𝟑",
    "emoji 🦊 😀 and CJK 東京 中文 日本",
    "What is the capital of France?",
    "  leading, and   multiple   spaces  ",
]


def proto_fields(buf):
    """(field number, bytes) of each length-delimited field of a protobuf message."""
    i, out = 0, []

    def varint():
        nonlocal i
        v, shift = 0, 0
        while True:
            b = buf[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return v

    while i < len(buf):
        key = varint()
        wire = key & 7
        if wire == 0:
            varint()
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            n = varint()
            out.append((key >> 3, buf[i:i + n]))
            i += n
        else:
            raise ValueError(f"wire type {wire}")
    return out


def real_charsmap(tmp):
    import sentencepiece as spm

    corpus = os.path.join(tmp, "corpus.txt")
    with open(corpus, "w") as f:
        for i in range(400):
            f.write(f"the quick brown fox {i} jumps over the lazy dog café über naïve 東京\n")
    prefix = os.path.join(tmp, "spm")
    spm.SentencePieceTrainer.train(input=corpus, model_prefix=prefix, model_type="unigram",
                                   vocab_size=60, normalization_rule_name="nmt_nfkc",
                                   minloglevel=2)
    with open(prefix + ".model", "rb") as f:
        model = f.read()
    # ModelProto.normalizer_spec (3) . precompiled_charsmap (2)
    spec = next(v for k, v in proto_fields(model) if k == 3)
    return next(v for k, v in proto_fields(spec) if k == 2)


def with_charsmap(src, dst, blob):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(PEER.rstrip("/"))),
                                    "src", "gguf-py"))
    import gguf

    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, arch=r.fields["general.architecture"].contents())
    for name, field in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if name == "tokenizer.ggml.precompiled_charsmap":
            w.add_key_value(name, list(blob), gguf.GGUFValueType.ARRAY,
                            sub_type=gguf.GGUFValueType.UINT8)
            continue
        vt = field.types[0]
        sub = field.types[-1] if vt == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(name, field.contents(), vt, sub_type=sub)
    for t in r.tensors:
        w.add_tensor(t.name, t.data, raw_shape=t.data.shape,
                     raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    tmp = tempfile.mkdtemp()
    blob = real_charsmap(tmp)
    print(f"nmt_nfkc charsmap: {len(blob)} bytes", file=sys.stderr)
    base = os.path.join(tmp, "base.gguf")
    model = os.path.join(tmp, "real-charsmap.gguf")
    tern = os.path.join(ROOT, "build", "tern")
    subprocess.run([tern, "gen-arch-model", "--arch", "xlmr-reranker", "--seed", "7", "--out",
                    base], check=True, capture_output=True)
    with_charsmap(base, model, blob)
    port = 18941
    peer = subprocess.Popen([os.path.join(PEER, "llama-server"), "-m", model, "--reranking",
                             "--port", str(port), "-t", "2", "-c", "128", "-np", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    same = 0
    try:
        wait_healthy(port)
        with TernServer(model=model) as srv:
            for text in TEXTS:
                body = {"content": text, "add_special": True}
                want = requests.post(f"http://127.0.0.1:{port}/tokenize", json=body).json()
                got = requests.post(srv.url + "/tokenize", json=body).json()
                ok = want["tokens"] == got["tokens"]
                same += ok
                print(("same " if ok else "DIFF ") + repr(text), file=sys.stderr)
                if not ok:
                    print(f"  llama.cpp {want['tokens']}\n  tern      {got['tokens']}",
                          file=sys.stderr)
    finally:
        peer.terminate()
        peer.wait()
    print(f"{same}/{len(TEXTS)} texts tokenized alike on the real nmt_nfkc charsmap")
    return 0 if same == len(TEXTS) else 1


if __name__ == "__main__":
    sys.exit(main())
