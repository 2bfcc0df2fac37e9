"""examples/agent_tools.py against the real server: its local tools are safe
and confined, and its loop makes a real call (forced on the first turn),
runs the tool, and gets a final answer."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent_tools.py"


@pytest.fixture(scope="module")
def agent():
    spec = importlib.util.spec_from_file_location("agent_tools", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_calculator_is_arithmetic_only(agent):
    assert agent.calculate("12 * (3 + 4)") == 84
    assert agent.calculate("-2 ** 3 + 7 // 2") == -5
    for bad in ["__import__('os').system('true')", "x + 1", "2 ** 1000", "open('f')", "1 +"]:
        with pytest.raises(ValueError):
            agent.calculate(bad)


def test_file_lister_stays_in_its_folder(agent, tmp_path):
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "sub").mkdir()
    assert agent.list_files(tmp_path) == ["a.txt", "sub/"]
    assert agent.list_files(tmp_path, "sub") == []
    for bad in ["..", "../..", "/etc", "sub/../.."]:
        with pytest.raises(ValueError):
            agent.list_files(tmp_path, bad)
    assert "outside" in json.loads(agent.run_tool("list_files", '{"subfolder": "/"}', tmp_path))["error"]


def test_agent_loop_calls_a_real_tool_and_answers(agent, client, tmp_path):
    for name in ("notes.md", "data.csv", "plan.txt"):
        (tmp_path / name).write_text(name)
    out = agent.run_agent(client, "tern", "List the files in the folder '.', please.", tmp_path,
                          max_turns=2, max_tokens=96)
    results = out["tool_results"]
    assert results, out
    first = results[0]
    assert first["name"] in ("calculate", "list_files")
    # The tool really ran: its output is what the local function gives for those arguments.
    assert first["result"] == agent.run_tool(first["name"], first["arguments"], tmp_path)
    tool_msgs = [m for m in out["messages"] if m["role"] == "tool"]
    assert tool_msgs and all(m["tool_call_id"].startswith("call_") for m in tool_msgs)
    assert out["answer"].strip()
