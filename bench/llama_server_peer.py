#!/usr/bin/env python3
"""The same load test (bench/load_server.py) against llama-cpp-python's
OpenAI-compatible server on the same model, for comparison with tern serve.

    .venv/bin/pip install fastapi uvicorn sse-starlette starlette-context pydantic-settings
    .venv/bin/python bench/llama_server_peer.py --levels 1,2,4,8 --max-tokens 64

It starts `python -m llama_cpp.server` on a free loopback port, runs the load
levels, and stops it. Note what is being compared: llama-cpp-python's server
runs one request at a time (requests queue behind a lock; there is no
continuous batching), so its aggregate throughput stays near single-stream
speed while tern's grows with concurrency. It also ignores `ignore_eos`, so its
replies may be shorter than --max-tokens; tokens are counted as they arrive.
"""
from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
import load_server  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", default=os.environ.get(
        "TERN_MODEL", str(REPO / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf")))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--levels", default="1,2,4,8,16,32")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--requests-per-client", type=int, default=2)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()

    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log", delete=False)
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", args.model, "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", str(args.ctx), "--n_threads", str(args.threads),
           "--n_threads_batch", str(args.threads),
           # By default a new request interrupts the running one; queue instead.
           "--interrupt_requests", "False"]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                print(Path(log.name).read_text()[-2000:], file=sys.stderr)
                return 1
            try:
                if requests.get(url + "/v1/models", timeout=2).ok:
                    break
            except requests.RequestException:
                time.sleep(0.2)
        else:
            print("llama_cpp.server did not start", file=sys.stderr)
            return 1
        sys.argv = [sys.argv[0], "--url", url, "--levels", args.levels, "--max-tokens",
                    str(args.max_tokens), "--requests-per-client", str(args.requests_per_client)]
        if args.json:
            sys.argv += ["--json", args.json]
        print("peer: llama-cpp-python server (", " ".join(cmd[1:4]), ")")
        return load_server.main()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    sys.exit(main())
