#!/usr/bin/env python3
"""Cuts the micro-kernel loop bodies marked LLVM-MCA-BEGIN/END (gemm_neon.inl
built with -DTERN_MCA_MARKERS) out of a GCC aarch64 assembly file: one file per
kernel instance, named kernel_Dot_Format_N.s (N: rows of a GEMM tile_kernel,
tiles of a GEMV gemv_kernel). Prints one line per instance:
  file  vector-spills  kernel  dot  format  n
(vector-spills: q/d/s/v register loads and stores on the stack in the loop;
0 in a healthy build)."""
import os
import re
import subprocess
import sys

src, outdir = sys.argv[1], sys.argv[2]
os.makedirs(outdir, exist_ok=True)
func, body, region = None, [], None
for line in open(src):
    m = re.match(r'^([_A-Za-z0-9.$]+):', line)
    if m and not m.group(1).startswith('.L'):
        func = m.group(1)
    if 'LLVM-MCA-BEGIN' in line:
        region, body = line.split('LLVM-MCA-BEGIN')[1].strip(), []
        continue
    if 'LLVM-MCA-END' in line and region is not None:
        name = subprocess.run(['c++filt', func], capture_output=True, text=True).stdout
        t = re.search(r'(tile_kernel|gemv_kernel)<[^<>]*?(\w+Dot), [^<>]*?(\w+Fmt), (\d+)>', name)
        kernel, dot, fmt, n = t.groups() if t else (region, 'Dot', 'Fmt', '0')
        path = os.path.join(outdir, f'{kernel}_{dot}_{fmt}_{n}.s')
        with open(path, 'w') as f:
            f.write(''.join(body))
        spills = sum(1 for b in body if re.search(r'\[sp\b', b) and re.search(r'\b[qdsv]\d', b))
        print(f'{path}\t{spills}\t{kernel}\t{dot}\t{fmt}\t{n}')
        region = None
        continue
    if region is not None:
        s = line.strip()
        # instructions only: no directives, comments, labels or #APP/#NO_APP
        if s and not s.startswith(('.', '#', '//')) and not s.endswith(':'):
            body.append('\t' + s + '\n')
