#!/usr/bin/env python3
"""Greedy outputs of two tern binaries, byte for byte, across every API shape.

A refactor of the server must not change what a client receives. This starts
each binary in turn on the same model and sends the same greedy requests
through OpenAI chat and completions, Anthropic Messages, the Responses API
and the WebSocket, streaming and not, with and without tools; then it
compares the texts (and tool calls) each shape returned. Ids and timings
differ by nature and are not compared.

    python bench/ab_greedy.py OLD_BINARY NEW_BINARY [-m MODEL]

Exit status 0 when every answer is identical.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

import requests
import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve import REPO, Proc, free_port  # noqa: E402

PROMPTS = [
    "Write a haiku about the sea.",
    "List three prime numbers and explain why they are prime.",
    "What is the capital of France? Answer in one sentence.",
    "Translate 'good morning' into Spanish, French and German.",
    "What is the weather like in Paris right now? Use the tool.",
]
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]


def sse_events(resp):
    for line in resp.iter_lines(decode_unicode=True):
        if line and line.startswith("data: ") and line != "data: [DONE]":
            yield json.loads(line[6:])


def chat(url, prompt, stream, tools=None):
    body = {"messages": [{"role": "user", "content": prompt}], "temperature": 0,
            "max_tokens": 48, "stream": stream}
    if tools:  # a forced call: the answer is a call whatever the model would say
        body["tools"], body["tool_choice"] = tools, "required"
    r = requests.post(url + "/v1/chat/completions", json=body, stream=stream, timeout=120)
    if not stream:
        m = r.json()["choices"][0]["message"]
        return {"content": m.get("content"), "tool_calls": [
            (c["function"]["name"], c["function"]["arguments"]) for c in m.get("tool_calls") or []]}
    content, calls = "", {}
    for e in sse_events(r):
        for ch in e.get("choices", []):
            d = ch.get("delta", {})
            content += d.get("content") or ""
            for tc in d.get("tool_calls") or []:
                c = calls.setdefault(tc["index"], ["", ""])
                c[0] += tc.get("function", {}).get("name") or ""
                c[1] += tc.get("function", {}).get("arguments") or ""
    return {"content": content, "tool_calls": [tuple(c) for _, c in sorted(calls.items())]}


def completion(url, prompt, stream):
    body = {"prompt": prompt, "temperature": 0, "max_tokens": 48, "stream": stream}
    r = requests.post(url + "/v1/completions", json=body, stream=stream, timeout=120)
    if not stream:
        return r.json()["choices"][0]["text"]
    return "".join(e["choices"][0]["text"] for e in sse_events(r) if e.get("choices"))


def messages(url, prompt, stream):
    body = {"messages": [{"role": "user", "content": prompt}], "temperature": 0,
            "max_tokens": 48, "stream": stream}
    r = requests.post(url + "/v1/messages", json=body, stream=stream, timeout=120)
    if not stream:
        return "".join(b.get("text", "") for b in r.json()["content"])
    return "".join(e["delta"].get("text", "") for e in sse_events(r)
                   if e.get("type") == "content_block_delta")


def responses(url, prompt, stream):
    body = {"input": prompt, "temperature": 0, "max_output_tokens": 48, "stream": stream}
    r = requests.post(url + "/v1/responses", json=body, stream=stream, timeout=120)
    if not stream:
        return "".join(c["text"] for o in r.json()["output"] if o["type"] == "message"
                       for c in o["content"])
    return "".join(e["delta"] for e in sse_events(r) if e.get("type") == "response.output_text.delta")


async def websocket(url, prompt):
    async with websockets.connect(url.replace("http", "ws") + "/v1/ws") as ws:
        await ws.recv()  # hello
        await ws.send(json.dumps({"type": "generate", "id": "a", "temperature": 0,
                                  "max_tokens": 48,
                                  "messages": [{"role": "user", "content": prompt}]}))
        text = ""
        while True:
            m = json.loads(await ws.recv())
            if m["type"] == "delta":
                text += m["text"]
            if m["type"] == "done":
                return text, m["finish_reason"], m["usage"]["completion_tokens"]


def answers(binary: str, model: str) -> dict:
    port = free_port()
    srv = Proc("tern", [binary, "--log-level", "warn", "serve", "-m", model,
                        "--port", str(port), "-t", "2"], port)
    try:
        out = {}
        for i, p in enumerate(PROMPTS):
            for stream in (False, True):
                out[f"chat {i} stream={stream}"] = chat(srv.url, p, stream)
                out[f"chat+tools {i} stream={stream}"] = chat(srv.url, p, stream, TOOLS)
                out[f"completion {i} stream={stream}"] = completion(srv.url, p, stream)
                out[f"messages {i} stream={stream}"] = messages(srv.url, p, stream)
                out[f"responses {i} stream={stream}"] = responses(srv.url, p, stream)
            out[f"websocket {i}"] = asyncio.run(websocket(srv.url, p))
        return out
    finally:
        srv.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("-m", "--model",
                    default=str(REPO / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    args = ap.parse_args()
    a, b = answers(args.old, args.model), answers(args.new, args.model)
    differ = [k for k in a if json.dumps(a[k]) != json.dumps(b[k])]
    for k in differ:
        print(f"DIFFERS {k}:\n  old {json.dumps(a[k])[:300]}\n  new {json.dumps(b[k])[:300]}")
    calls = sum(1 for k, v in b.items() if isinstance(v, dict) and v["tool_calls"])
    print(f"{len(a) - len(differ)} of {len(a)} answers identical ({calls} with tool calls)")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
