#!/usr/bin/env python3
"""Could greedy decoding read the output head at 4 bits and stay exact?

An idea for a decode bound by the head's bytes (Gemma 3 270M: a tied 262k x
640 Q8_0 head, 178 MB a token): score every row with an int4 copy of the
head (per-32 d and m, as tern's Int4Asym tiles), bound each row's error,
and recompute from the Q8_0 rows only those whose interval can reach the
best one; the argmax would then equal the full head's. This measures, for
real hidden states (`tern embed --pooling last --no-normalize`: the final-
normed state the head reads), how many rows such a pre-pass leaves, with
two rigorous bounds (Cauchy-Schwarz over the row: one float a row; over
each 32-group: 20 floats a row), against the int8 activations the kernels
use. Numbers and verdict: bench/RESULTS.md.

    python bench/head_bound.py models/gemma-3-270m-it-Q4_K_M.gguf

Reads the GGUF itself (the tensor `token_embd.weight`, Q8_0), numpy only.
"""
import json
import mmap
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
M = sys.argv[1] if len(sys.argv) > 1 else str(REPO / 'models' / 'gemma-3-270m-it-Q4_K_M.gguf')
def read_gguf_tensor(path, want):
    # The whole file mapped, so a header of any size (a big vocabulary) parses.
    with open(path, 'rb') as f:
        b = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    o = 4
    ver, nt, nkv = struct.unpack_from('<IQQ', b, o); o += 20
    def rstr(o):
        n, = struct.unpack_from('<Q', b, o); return b[o+8:o+8+n].decode('utf8', 'replace'), o + 8 + n
    sizes = {0:1,1:1,2:2,3:2,4:4,5:4,6:4,7:1,10:8,11:8,12:8}
    align = 32
    def rval(t, o):
        if t == 8: s, o = rstr(o); return s, o
        if t == 9:
            et, n = struct.unpack_from('<IQ', b, o); o += 12
            v = []
            for _ in range(n):
                x, o = rval(et, o); v.append(x)
            return v, o
        fmt = {0:'<B',1:'<b',2:'<H',3:'<h',4:'<I',5:'<i',6:'<f',7:'<?',10:'<Q',11:'<q',12:'<d'}[t]
        return struct.unpack_from(fmt, b, o)[0], o + sizes[t]
    for _ in range(nkv):
        k, o = rstr(o); t, = struct.unpack_from('<I', b, o); o += 4
        v, o = rval(t, o)
        if k == 'general.alignment': align = v
    infos = {}
    for _ in range(nt):
        name, o = rstr(o); nd, = struct.unpack_from('<I', b, o); o += 4
        dims = struct.unpack_from('<%dQ' % nd, b, o); o += 8 * nd
        t, off = struct.unpack_from('<IQ', b, o); o += 12
        infos[name] = (dims, t, off)
    data0 = (o + align - 1) // align * align
    dims, t, off = infos[want]
    assert t == 8, t  # Q8_0
    n_in, n_out = dims
    nb = n_in // 32
    raw = np.memmap(path, dtype=np.uint8, mode='r', offset=data0 + off, shape=(n_out * nb * 34,))
    blk = raw.reshape(n_out, nb, 34)
    d = blk[:, :, :2].copy().view(np.float16).astype(np.float32)[:, :, 0]
    q = blk[:, :, 2:].copy().view(np.int8).astype(np.float32)
    return d, q  # (n_out, nb), (n_out, nb, 32)

d8, q8 = read_gguf_tensor(M, 'token_embd.weight')
n_out, nb, _ = q8.shape
prompts = ["The capital of France is", "def fibonacci(n):", "Once upon a time, in a small village,",
           "<start_of_turn>user\nWrite a haiku about the sea.<end_of_turn>\n<start_of_turn>model\n",
           "The quick brown fox jumps over the", "import numpy as np\nx = np.", "1, 2, 3, 4, 5,",
           "Translate to German: good morning ->"]
out = subprocess.run([str(REPO / 'build' / 'tern'), 'embed', '-m', M, '--pooling', 'last', '--no-normalize', '-t', '2'] +
                     sum([['-p', p] for p in prompts], []), capture_output=True, text=True).stdout
H = [np.array(e['embedding'], np.float32) for e in json.loads(out)['data']]
W8 = d8[:, :, None] * q8                       # the file's rows (n_out, nb, 32)
# int4 asymmetric per 32 (d, m as fp16), as tern's Int4Asym tiles
lo = W8.min(2, keepdims=True); hi = W8.max(2, keepdims=True)
d4 = ((hi - lo) / 15).astype(np.float16).astype(np.float32); m4 = lo.astype(np.float16).astype(np.float32)
c4 = np.clip(np.round((W8 - m4) / np.where(d4 > 0, d4, 1)), 0, 15)
W4 = d4 * c4 + m4
D = W8 - W4
rownorm = np.sqrt((D * D).sum((1, 2)))          # ||dw_i||  (one float a row)
grpnorm = np.sqrt((D * D).sum(2))               # ||dw_i,g|| (nb floats a row)
print(f"rows {n_out}, groups {nb}; int4 bytes/row {nb*18} vs q8 {nb*34}")
for h in H:
    a = h.reshape(nb, 32)
    da = np.abs(a).max(1, keepdims=True) / 127
    aq = np.round(a / np.where(da > 0, da, 1)) * da   # int8 activations, per 32
    ex = (W8 * aq[None]).sum((1, 2))
    ap = (W4 * aq[None]).sum((1, 2))
    an = np.sqrt((aq * aq).sum(1))                # ||a_g||
    for name, eps in (("row bound", rownorm * np.sqrt((an ** 2).sum())), ("group bound", grpnorm @ an)):
        eps = eps * 1.0001 + 1e-4
        floor = (ap - eps).max()
        cand = np.nonzero(ap + eps >= floor)[0]
        ok = ex.argmax() in cand
        print(f"{name:11}: {len(cand):6d} candidates ({len(cand)/n_out:.3%}), exact argmax kept: {ok}; "
              f"top gap {np.sort(ex)[-1]-np.sort(ex)[-2]:.3f}, eps p50 {np.median(eps):.3f}, true err p99 {np.percentile(np.abs(ex-ap),99):.3f}")
