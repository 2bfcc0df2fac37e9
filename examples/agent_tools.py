#!/usr/bin/env python3
"""A small tool-using agent through tern's OpenAI-compatible API.

Two real local tools: a calculator that evaluates arithmetic safely (parsed
with `ast`, only numbers and + - * / // % ** and parentheses), and a file
lister confined to one folder. The first turn forces a call (tool_choice
"required": tern then constrains decoding, so even a tiny model writes a
valid call); later turns let the model decide, and the last turn asks for the
answer with tool_choice "none".

    pip install openai
    python examples/agent_tools.py --url http://127.0.0.1:8080 --folder . \\
        "How many files are in the folder, and what is 12 * (3 + 4)?"
"""
from __future__ import annotations

import argparse
import ast
import json
import operator
from pathlib import Path

from openai import OpenAI

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
        ast.Pow: operator.pow, ast.USub: operator.neg, ast.UAdd: operator.pos}


def calculate(expression: str) -> float | int:
    """Evaluates arithmetic; anything else (names, calls, huge powers) raises ValueError."""
    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > 64:
                raise ValueError("exponent too large")
            return _OPS[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.operand))
        raise ValueError(f"not arithmetic: {ast.dump(node)[:60]}")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as e:
        raise ValueError(f"not an expression: {e.msg}") from None
    return ev(tree)


def list_files(root: Path, subfolder: str = ".") -> list[str]:
    """Names in `subfolder` of `root`; a path that leaves `root` raises ValueError."""
    base = root.resolve()
    target = (base / subfolder).resolve()
    if target != base and base not in target.parents:
        raise ValueError(f"'{subfolder}' is outside the allowed folder")
    if not target.is_dir():
        raise ValueError(f"'{subfolder}' is not a folder")
    return sorted(p.name + ("/" if p.is_dir() else "") for p in target.iterdir())


TOOLS = [
    {"type": "function", "function": {
        "name": "calculate", "description": "Evaluate an arithmetic expression, e.g. 12 * (3 + 4)",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string"}},
                       "required": ["expression"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "list_files", "description": "List the files in a subfolder of the work folder",
        "parameters": {"type": "object", "properties": {"subfolder": {"type": "string"}},
                       "required": ["subfolder"], "additionalProperties": False}}},
]


def run_tool(name: str, arguments: str, root: Path) -> str:
    """A tool's result as the text the model reads; errors are results too."""
    try:
        args = json.loads(arguments)
        if name == "calculate":
            return json.dumps({"result": calculate(str(args["expression"]))})
        if name == "list_files":
            return json.dumps({"files": list_files(root, str(args.get("subfolder", ".")))})
        return json.dumps({"error": f"unknown tool {name}"})
    except (ValueError, KeyError, TypeError, ZeroDivisionError, OverflowError) as e:
        return json.dumps({"error": str(e)})


def run_agent(client: OpenAI, model: str, question: str, root: Path, max_turns: int = 3,
              max_tokens: int = 128) -> dict:
    """Runs the loop; returns {"messages": the whole conversation, "tool_results": [...],
    "answer": the final text}."""
    messages = [{"role": "system", "content": "You are a helpful assistant. Use the tools."},
                {"role": "user", "content": question}]
    results = []
    for turn in range(max_turns):
        choice = "required" if turn == 0 else "auto"
        r = client.chat.completions.create(model=model, messages=messages, tools=TOOLS,
                                           tool_choice=choice, parallel_tool_calls=False,
                                           temperature=0, max_tokens=max_tokens)
        msg = r.choices[0].message
        if not msg.tool_calls:
            return {"messages": messages, "tool_results": results, "answer": msg.content or ""}
        messages.append(msg.model_dump(exclude_none=True))
        for call in msg.tool_calls:
            out = run_tool(call.function.name, call.function.arguments, root)
            results.append({"name": call.function.name, "arguments": call.function.arguments,
                            "result": out})
            messages.append({"role": "tool", "tool_call_id": call.id, "content": out})
    r = client.chat.completions.create(model=model, messages=messages, tools=TOOLS,
                                       tool_choice="none", temperature=0, max_tokens=max_tokens)
    return {"messages": messages, "tool_results": results,
            "answer": r.choices[0].message.content or ""}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("question", nargs="?",
                    default="How many files are in the folder, and what is 12 * (3 + 4)?")
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--api-key", default="none")
    ap.add_argument("--folder", default=".", help="the only folder list_files may read")
    args = ap.parse_args()
    client = OpenAI(base_url=args.url.rstrip("/") + "/v1", api_key=args.api_key)
    model = client.models.list().data[0].id
    out = run_agent(client, model, args.question, Path(args.folder))
    for t in out["tool_results"]:
        print(f"tool {t['name']}({t['arguments']}) -> {t['result']}")
    print("answer:", out["answer"])


if __name__ == "__main__":
    main()
