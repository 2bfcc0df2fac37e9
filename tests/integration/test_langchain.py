"""LangChain's ChatOpenAI against the real server: tools bound with
bind_tools (tool_choice forcing a call, so the tiny model's calls are
grammar-constrained) and with_structured_output (JSON schema and function
calling), all through the real langchain-openai client."""
from __future__ import annotations

import langchain_openai  # requirements-test.txt (scripts/setup.sh installs it)
import pydantic
import pytest


class GetWeather(pydantic.BaseModel):
    """Current weather in a city."""

    city: str = pydantic.Field(description="City name")
    unit: str = pydantic.Field(description="celsius or fahrenheit")


class Add(pydantic.BaseModel):
    """Add two integers."""

    a: int
    b: int


class Person(pydantic.BaseModel):
    name: str
    age: int


@pytest.fixture(scope="module")
def llm(server):
    return langchain_openai.ChatOpenAI(base_url=server.url + "/v1", api_key="not-needed",
                                       model="tern", temperature=0, max_tokens=120, max_retries=0,
                                       timeout=120)


def test_bind_tools_with_a_named_tool_choice(llm):
    msg = llm.bind_tools([GetWeather, Add], tool_choice="GetWeather").invoke(
        "What is the weather in Paris?")
    assert msg.tool_calls, msg
    call = msg.tool_calls[0]
    assert call["name"] == "GetWeather"
    GetWeather.model_validate(call["args"])
    assert call["id"].startswith("call_")


def test_bind_tools_required_calls_one_of_them(llm):
    msg = llm.bind_tools([GetWeather, Add], tool_choice="any").invoke("What is 2 plus 3?")
    assert msg.tool_calls
    for call in msg.tool_calls:
        assert call["name"] in ("GetWeather", "Add")
        (Add if call["name"] == "Add" else GetWeather).model_validate(call["args"])
    assert msg.response_metadata["finish_reason"] == "tool_calls"


def test_bind_tools_streams_tool_call_chunks(llm):
    bound = llm.bind_tools([Add], tool_choice="Add")
    full = None
    for chunk in bound.stream("What is 2 plus 3?"):
        full = chunk if full is None else full + chunk
    assert full.tool_calls and full.tool_calls[0]["name"] == "Add"
    Add.model_validate(full.tool_calls[0]["args"])


@pytest.mark.parametrize("method", ["json_schema", "function_calling"])
def test_with_structured_output(llm, method):
    out = llm.with_structured_output(Person, method=method).invoke(
        "Alice is 30 years old. Who is she?")
    assert isinstance(out, Person)
