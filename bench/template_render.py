#!/usr/bin/env python3
"""Chat-template rendering time (issue 33's target: < 1 ms per request).

Renders a 20-message conversation with 10 tools (a system turn, user and
assistant turns, a tool call and its result, reasoning in the history) with
the longest templates of the corpus (tests/fixtures/templates/, llama.cpp's
models/templates/), each through `tern template --bench N` (the whole
ChatTemplate path: messages to values, the reshaping, the render, the
input marks), and prints the median and p90 per template.

Usage: .venv/bin/python bench/template_render.py [--top 8] [--reps 300] [--tern build/tern]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "tests" / "fixtures" / "templates"


def conversation() -> dict:
    tools = []
    for i in range(10):
        tools.append({"type": "function", "function": {
            "name": f"tool_{i}",
            "description": f"Tool number {i}: looks something up and returns a short JSON answer.",
            "parameters": {"type": "object", "properties": {
                "query": {"type": "string", "description": "What to look up"},
                "limit": {"type": "integer", "description": "At most this many results"},
                "mode": {"type": "string", "enum": ["fast", "exact"]}},
                "required": ["query"]}}})
    msgs = [{"role": "system", "content": "You are a careful assistant. Use the tools when they help."}]
    for i in range(8):
        msgs.append({"role": "user", "content": f"Question {i}: what do you know about topic {i}? " * 3})
        msgs.append({"role": "assistant", "content": f"Here is what I know about topic {i}. " * 4,
                     "reasoning_content": f"The user asks about topic {i}; answer briefly."})
    msgs.append({"role": "user", "content": "Look up the weather in Oslo."})
    msgs.append({"role": "assistant", "content": "", "tool_calls": [{
        "id": "call0001", "type": "function",
        "function": {"name": "tool_3", "arguments": "{\"query\": \"weather Oslo\", \"limit\": 1}"}}]})
    msgs.append({"role": "tool", "tool_call_id": "call0001", "content": "{\"temp\": 7, \"sky\": \"clear\"}"})
    assert len(msgs) == 20
    return {"messages": msgs, "tools": tools}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--top", type=int, default=8, help="the N longest templates")
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--tern", default=os.environ.get("TERN_BIN", str(ROOT / "build" / "tern")))
    args = ap.parse_args()
    files = sorted(TEMPLATES.glob("*.jinja"), key=lambda p: p.stat().st_size, reverse=True)[: args.top]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(conversation(), f)
        conv = f.name
    rows, worst = [], 0.0
    try:
        for t in files:
            r = subprocess.run([args.tern, "template", "--chat-template-file", str(t), "--conversation",
                                conv, "--bench", str(args.reps)], capture_output=True, text=True)
            if r.returncode != 0:
                rows.append((t.name, t.stat().st_size, "error: " + r.stderr.strip().splitlines()[-1]))
                continue
            m = re.search(r"(\d+) prompt bytes; render median ([\d.]+) us, p90 ([\d.]+) us", r.stdout)
            med, p90 = float(m.group(2)), float(m.group(3))
            worst = max(worst, p90)
            rows.append((t.name, t.stat().st_size, f"{int(m.group(1))} B prompt, median {med:.0f} us, p90 {p90:.0f} us"))
    finally:
        os.unlink(conv)
    print(f"{'template':58} {'source':>7}  result")
    for name, size, res in rows:
        print(f"{name:58} {size:>7}  {res}")
    print(f"worst p90: {worst:.0f} us (target < 1000 us): {'met' if worst < 1000 else 'missed'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
