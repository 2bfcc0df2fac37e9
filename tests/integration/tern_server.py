"""Starts and stops a real `tern serve` for the integration and browser tests.

The server binds an ephemeral loopback port (--port 0) and logs the port it got;
its log goes to a file (never a pipe that nobody reads), which the tests can
inspect; the logs are removed when the test run ends (TERN_KEEP_SERVER_LOGS=1
keeps them). Environment: TERN_BIN (default build/tern), TERN_MODEL (default
models/SmolLM2-135M-Instruct.Q4_1.gguf).
"""
from __future__ import annotations

import atexit
import os
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[2]

# Server logs are kept for the whole test run (tests read them after a server
# stops) and removed when it ends, so that thousands of them do not pile up.
_LOGS: list[Path] = []


@atexit.register
def _remove_logs() -> None:
    if os.environ.get("TERN_KEEP_SERVER_LOGS"):
        return
    for p in _LOGS:
        p.unlink(missing_ok=True)


def tern_bin() -> Path:
    if os.environ.get("TERN_BIN"):
        return Path(os.environ["TERN_BIN"])
    return REPO / "build" / "tern"


def model_path() -> Path:
    if os.environ.get("TERN_MODEL"):
        return Path(os.environ["TERN_MODEL"])
    return REPO / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def missing_reason() -> str | None:
    """Why the real server cannot run here, or None."""
    if not tern_bin().exists():
        return f"{tern_bin()} not built"
    if not model_path().exists():
        return f"model {model_path()} not found"
    return None


class TernServer:
    def __init__(self, *args: str, startup_timeout: float = 120.0, env: dict | None = None,
                 model: Path | str | None = None):
        self.args = list(args)
        self.model = Path(model) if model is not None else model_path()
        self.env = None if env is None else {**os.environ, **env}
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self._log = tempfile.NamedTemporaryFile(prefix="tern-serve-", suffix=".log", delete=False)
        self.log_path = Path(self._log.name)
        _LOGS.append(self.log_path)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/v1/ws"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def start(self) -> "TernServer":
        cmd = [str(tern_bin()), "serve", "-m", str(self.model), "--host", "127.0.0.1",
               "--port", "0", *self.args]
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=self.env)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tern serve exited with {self.proc.returncode}:\n{self.log()}")
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", self.log())
            if m:
                self.port = int(m.group(1))
                break
            time.sleep(0.05)
        else:
            self.stop(signal.SIGKILL)
            raise RuntimeError(f"tern serve did not start:\n{self.log()}")
        while time.monotonic() < deadline:
            try:
                if requests.get(self.url + "/health", timeout=2).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"/health never answered:\n{self.log()}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int | None:
        """Signals the server and waits; returns its exit code (None if it had to be killed)."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None

    def metrics(self, headers: dict | None = None) -> dict[str, float]:
        """GET /metrics parsed into {"name{labels}": value}."""
        text = requests.get(self.url + "/metrics", headers=headers, timeout=10).text
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def wait_metric(self, name: str, pred, timeout: float = 60.0) -> float:
        """Waits until pred(value of metric `name`) holds; returns the value."""
        deadline = time.monotonic() + timeout
        value = None
        while time.monotonic() < deadline:
            value = self.metrics().get(name)
            if value is not None and pred(value):
                return value
            time.sleep(0.1)
        raise AssertionError(f"metric {name} stayed at {value}")

    def __enter__(self) -> "TernServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
