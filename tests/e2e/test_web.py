"""Runs tests/e2e/web_test.mjs (headless Chromium via playwright-core) against
a real tern server."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tern_server import REPO, TernServer, missing_reason

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


def why_skip() -> str | None:
    reason = missing_reason()
    if reason:
        return reason
    if not shutil.which("node"):
        return "node not installed"
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} not installed"
    if not (REPO / "node_modules" / "playwright-core").exists():
        return "playwright-core not installed (run `npm install` at the repo root)"
    return None


@pytest.mark.skipif(why_skip() is not None, reason=why_skip() or "")
def test_demo_page_streams_and_stops():
    with TernServer("--ctx", "4096", "--max-batch", "8") as srv:
        env = {**os.environ, "TERN_URL": srv.url}
        r = subprocess.run(["node", str(REPO / "tests" / "e2e" / "web_test.mjs")], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=600)
        print(r.stdout)
        assert r.returncode == 0, f"{r.stdout}\n{r.stderr}\n--- server log ---\n{srv.log()[-3000:]}"
        assert srv.stop() == 0
