#!/usr/bin/env python3
"""Checks that module dependencies point down (ARCHITECTURE.md's table).

Every `#include "tern/<module>/..."` in src/<m>/ or include/tern/<m>/ must name
a module below <m> (or <m> itself). Exits 1 listing each upward include.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

# Lower rank = lower layer. Modules of equal rank must not include each other.
RANK = {"core": 0, "gguf": 1, "kernels": 2, "kv": 3, "jinja": 3.5, "tokenizer": 4, "sampling": 4,
        "model": 5, "vision": 5, "engine": 6, "sched": 7, "server": 8, "cli": 9}
INCLUDE = re.compile(r'^\s*#\s*include\s+"tern/([a-z_]+)/')


def main() -> int:
    root = Path(__file__).resolve().parents[1]
    bad = []
    for base in (root / "src", root / "include" / "tern"):
        for f in sorted(base.rglob("*")):
            if f.suffix not in (".h", ".cpp", ".inl") or not f.is_file():
                continue
            module = f.relative_to(base).parts[0]
            if module not in RANK:
                continue
            for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
                m = INCLUDE.match(line)
                if not m or m.group(1) == module:
                    continue
                dep = m.group(1)
                if dep not in RANK or RANK[dep] >= RANK[module]:
                    bad.append(f"{f.relative_to(root)}:{n}: {module} includes {dep}")
    for b in bad:
        print(b)
    if bad:
        print(f"{len(bad)} upward include(s): see ../shared/design/ARCHITECTURE.md")
        return 1
    print("layers: every include points down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
