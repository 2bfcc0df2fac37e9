#!/usr/bin/env python3
"""llama.cpp peer benchmark through llama-cpp-python's low-level API (no
Python per-token work beyond filling a batch): prefill, decode, batched decode.

Prints one JSON object: {"prefill": t/s, "decode": [{"batch": B, "tokens_per_s": x}]}.
Same token stream and protocol as `tern bench`: prefill of --pp tokens into a
fresh sequence in one batch; decode of --tg tokens per sequence, one llama_decode
per step for all B sequences (one token each), after one untimed warm-up step.
"""
import argparse
import ctypes
import json
import sys
import time

import llama_cpp as L


def bench_tokens(n, n_vocab):
    # The same pseudo-random walk as tern bench (src/cli/cmd_bench.cpp).
    out, x = [], 12345
    for _ in range(n):
        x = (x * 1664525 + 1013904223) & 0xFFFFFFFF
        out.append(100 + (x >> 8) % (n_vocab - 200))
    return out


class Peer:
    def __init__(self, path, threads, n_ctx, n_seq):
        L.llama_backend_init()
        mp = L.llama_model_default_params()
        self.model = L.llama_model_load_from_file(path.encode(), mp)
        if not self.model:
            sys.exit(f"llama.cpp could not load {path}")
        cp = L.llama_context_default_params()
        cp.n_ctx = n_ctx
        cp.n_batch = 512
        cp.n_ubatch = 512
        cp.n_seq_max = n_seq
        cp.n_threads = threads
        cp.n_threads_batch = threads
        self.ctx = L.llama_init_from_model(self.model, cp)
        self.vocab = L.llama_model_get_vocab(self.model)
        self.n_vocab = L.llama_vocab_n_tokens(self.vocab)
        self.batch = L.llama_batch_init(512, 0, 1)

    def clear(self):
        L.llama_memory_clear(L.llama_get_memory(self.ctx), True)

    def decode(self, items):
        """items: list of (token, pos, seq, want_logits)."""
        b = self.batch
        b.n_tokens = len(items)
        for i, (tok, pos, seq, logits) in enumerate(items):
            b.token[i] = tok
            b.pos[i] = pos
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = seq
            b.logits[i] = 1 if logits else 0
        rc = L.llama_decode(self.ctx, b)
        if rc != 0:
            sys.exit(f"llama_decode failed: {rc}")

    def prefill(self, pp):
        toks = bench_tokens(pp, self.n_vocab)
        self.clear()
        t0 = time.perf_counter()
        for b0 in range(0, pp, 512):
            chunk = toks[b0:b0 + 512]
            self.decode([(t, b0 + i, 0, b0 + i == pp - 1) for i, t in enumerate(chunk)])
        L.llama_synchronize(self.ctx)
        return pp / (time.perf_counter() - t0)

    def decode_batch(self, tg, bs):
        toks = bench_tokens(tg * bs + 1, self.n_vocab)
        self.clear()
        self.decode([(toks[i], 0, i, True) for i in range(bs)])  # warm-up, untimed
        L.llama_synchronize(self.ctx)
        t0 = time.perf_counter()
        for step in range(tg):
            self.decode([(toks[step * bs + i + 1], step + 1, i, True) for i in range(bs)])
        L.llama_synchronize(self.ctx)
        return tg * bs / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--batch", default="1,4,16")
    ap.add_argument("-r", "--reps", type=int, default=3)
    a = ap.parse_args()
    batches = [int(x) for x in a.batch.split(",") if x]
    peer = Peer(a.model, a.threads, n_ctx=max(a.pp, a.tg + 2) * max(batches + [1]) + 64,
                n_seq=max(batches + [1]))
    out = {"engine": "llama.cpp", "system_info": L.llama_print_system_info().decode().strip(),
           "threads": a.threads}
    if a.pp > 0:
        out["prefill"] = {"tokens": a.pp,
                          "tokens_per_s": max(peer.prefill(a.pp) for _ in range(a.reps))}
    out["decode"] = []
    if a.tg > 0:
        for bs in batches:
            out["decode"].append({"batch": bs, "tokens": a.tg,
                                  "tokens_per_s": max(peer.decode_batch(a.tg, bs)
                                                      for _ in range(a.reps))})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
