#!/usr/bin/env python3
"""Records llama.cpp's own prompts for the chat-template corpus.

For every tests/fixtures/templates/*.jinja, starts the peer's llama-server
(scripts/build_peer.sh) on the default model with `--jinja
--chat-template-file <template>` and asks it, through `POST /apply-template`,
for the prompt of each conversation below: the whole of llama.cpp's chat path
(its message parsing, the template's capability probes and polyfills, the
extra context, BOS/EOS stripping), not just its Jinja engine. Writes
tests/fixtures/templates/llama_cpp/<template>.json:

  {"<conversation>": {"prompt": "..."} or {"error": "..."}, ...}

and tests/fixtures/templates/llama_cpp/conversations.json (the requests, the
model's bos/eos texts, and the day the prompts were rendered on: templates
that print today's date print that day).

tern's test (tests/unit/tokenizer/chat_template_corpus_test.cpp) renders the
same requests through ChatTemplate and compares byte for byte.

Usage: .venv/bin/python scripts/oracle/record_apply_template.py [--server BIN] [--model GGUF]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "tests" / "fixtures" / "templates"
OUT = TEMPLATES / "llama_cpp"
PEER = Path.home() / ".cache" / "tern-peer" / "llama.cpp-11434.0.0" / "build" / "bin" / "llama-server"

sys.path.insert(0, str(ROOT / "scripts"))
# The same tool and texts as the jinja2 corpus (scripts/gen_template_corpus.py).
from gen_template_corpus import ASSISTANT, SYSTEM, TOOLS, USER, USER2  # noqa: E402

# As OpenAI clients send them: arguments as JSON text.
CALL = {"role": "assistant", "content": None, "tool_calls": [{
    "id": "a1b2c3d4e", "type": "function",
    "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\", \"unit\": \"c\"}"}}]}
RESULT = {"role": "tool", "tool_call_id": "a1b2c3d4e", "content": "{\"temp\": 7, \"sky\": \"clear\"}"}
THOUGHT = {"role": "assistant", "content": "4.", "reasoning_content": "Two plus two is four."}

# name -> request body (beside "messages": add_generation_prompt, tools, chat_template_kwargs)
CONVERSATIONS = {
    "user": {"messages": [USER]},
    "system_user": {"messages": [SYSTEM, USER]},
    "multi_turn": {"messages": [SYSTEM, USER, ASSISTANT, USER2]},
    "multi_turn_no_gen": {"messages": [SYSTEM, USER, ASSISTANT, USER2],
                          "add_generation_prompt": False},
    "developer": {"messages": [{"role": "developer", "content": "Be brief."}, USER]},
    "tools": {"messages": [SYSTEM, {"role": "user", "content": "Weather in Oslo?"}, CALL, RESULT],
              "tools": TOOLS},
    "tools_offered": {"messages": [{"role": "user", "content": "Weather in Oslo?"}],
                      "tools": TOOLS},
    "reasoning": {"messages": [USER2, THOUGHT, {"role": "user", "content": "And 3+3?"}]},
    "no_thinking": {"messages": [USER2], "chat_template_kwargs": {"enable_thinking": False}},
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port: int, path: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def get(port: int, path: str) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return json.loads(r.read())


def start(server: Path, model: Path, template: Path, port: int, log) -> subprocess.Popen | None:
    p = subprocess.Popen([str(server), "-m", str(model), "--jinja", "--chat-template-file",
                          str(template), "--port", str(port), "-c", "1024", "-t", "1",
                          "--no-warmup"], stdout=log, stderr=log)
    for _ in range(300):
        if p.poll() is not None:
            return None
        try:
            get(port, "/health")
            return p
        except (urllib.error.URLError, ConnectionError, OSError):
            time.sleep(0.1)
    p.kill()
    return None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", type=Path, default=PEER)
    ap.add_argument("--model", type=Path, default=ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf")
    args = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    env_day = datetime.date.today().isoformat()
    props = None
    n_ok = n_err = 0
    for t in sorted(TEMPLATES.glob("*.jinja")):
        port = free_port()
        with open(f"/tmp/record-apply-{t.stem}.log", "w") as log:
            p = start(args.server, args.model, t, port, log)
        result = {}
        if p is None:
            result = {k: {"error": "llama-server refused the template"} for k in CONVERSATIONS}
        else:
            try:
                if props is None:
                    props = get(port, "/props")
                for name, body in CONVERSATIONS.items():
                    if "tools" in body and "tool" not in t.read_text():
                        continue
                    code, r = post(port, "/apply-template", body)
                    if code == 200:
                        result[name] = {"prompt": r["prompt"]}
                    else:
                        result[name] = {"error": r.get("error", {}).get("message", str(code))}
            finally:
                p.terminate()
                p.wait()
        n_ok += sum("prompt" in v for v in result.values())
        n_err += sum("error" in v for v in result.values())
        (OUT / (t.stem + ".json")).write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n")
        print(f"{t.name}: {sum('prompt' in v for v in result.values())}/{len(result)}", file=sys.stderr)
    (OUT / "conversations.json").write_text(json.dumps({
        "bos_token": props["bos_token"] if props else None,
        "eos_token": props["eos_token"] if props else None,
        "day": env_day,
        "model": args.model.name,
        "conversations": CONVERSATIONS,
    }, ensure_ascii=False, indent=1) + "\n")
    print(f"{n_ok} prompts, {n_err} errors", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
