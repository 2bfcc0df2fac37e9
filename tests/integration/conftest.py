"""Fixtures: one shared real server for most tests, plus helpers.

Tests that need a server with special flags (API key, tiny queue, shutdown)
start their own with TernServer.
"""
from __future__ import annotations

import pytest

from tern_server import TernServer, missing_reason

# Generations that must still be running when a test acts on them ask for
# the whole context (ignore_eos, no max_tokens): 4096 tokens outlast any test step.
SHARED_ARGS = ("--max-batch", "16", "--max-queue", "64", "--ctx", "4096", "--step-tokens", "256")


def pytest_collection_modifyitems(config, items):
    reason = missing_reason()
    if reason:
        for item in items:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def server():
    srv = TernServer(*SHARED_ARGS).start()
    yield srv
    code = srv.stop()
    assert code == 0, f"tern serve did not exit cleanly ({code}):\n{srv.log()[-4000:]}"


@pytest.fixture(scope="session")
def client(server):
    import openai

    return openai.OpenAI(base_url=server.url + "/v1", api_key="not-needed", max_retries=0,
                         timeout=600)


@pytest.fixture
def healthy(server):
    """After the test, the shared server must still answer a real request."""
    yield server
    import requests

    assert requests.get(server.url + "/health", timeout=10).status_code == 200
    r = requests.post(server.url + "/v1/completions", timeout=300,
                      json={"prompt": "Hello", "max_tokens": 2, "temperature": 0})
    assert r.status_code == 200, r.text
