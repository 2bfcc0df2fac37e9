"""OpenAI's Responses API (POST /v1/responses) through the OpenAI SDK."""
from __future__ import annotations

import openai
import pytest
import requests

QUESTION = "Write one sentence about the moon."


def test_create_plain(client, healthy):
    r = client.responses.create(model="tern", input=QUESTION, max_output_tokens=8,
                                temperature=0)
    assert r.object == "response" and r.id.startswith("resp_")
    assert r.status in ("completed", "incomplete")
    assert r.output_text
    assert r.output[0].type == "message" and r.output[0].role == "assistant"
    assert r.usage.input_tokens > 0 and 0 < r.usage.output_tokens <= 8
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    assert r.model_extra["timings"]["predicted_n"] == r.usage.output_tokens


def test_create_with_items_and_instructions(client, healthy):
    r = client.responses.create(model="tern", instructions="Answer in one word.", input=[
        {"role": "developer", "content": "Be terse."},
        {"role": "user", "content": [{"type": "input_text", "text": "Colour of the sky?"}]},
    ], max_output_tokens=4, temperature=0)
    assert r.output_text and r.instructions == "Answer in one word."


def test_streamed_matches_plain(client, healthy):
    kwargs = dict(model="tern", input=QUESTION, max_output_tokens=8, temperature=0)
    events = list(client.responses.create(stream=True, **kwargs))
    types = [e.type for e in events]
    assert types[:4] == ["response.created", "response.in_progress",
                         "response.output_item.added", "response.content_part.added"]
    assert types[-4:-1] == ["response.output_text.done", "response.content_part.done",
                            "response.output_item.done"]
    assert types[-1] in ("response.completed", "response.incomplete")
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    final = events[-1].response
    assert deltas == final.output_text and final.usage.output_tokens > 0
    assert deltas == client.responses.create(**kwargs).output_text
    # The SDK's own stream helper accumulates the same text.
    with client.responses.stream(model="tern", input=QUESTION, max_output_tokens=64,
                                 temperature=0) as stream:
        text = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
        done = stream.get_final_response()
    assert done.output_text == text and done.status == "completed"


def test_two_turns_with_previous_response_id(client, healthy):
    # Instructions belong to one turn (as with OpenAI): a client repeats them.
    instructions = "You are a helpful assistant who answers briefly."
    first = client.responses.create(
        model="tern", instructions=instructions,
        input="My name is Ada and I like astronomy. Remember that.", max_output_tokens=16,
        temperature=0)
    second = client.responses.create(model="tern", instructions=instructions,
                                     previous_response_id=first.id,
                                     input="What is my name?", max_output_tokens=16,
                                     temperature=0)
    assert second.previous_response_id == first.id
    assert second.output_text
    # Turn 2's prompt starts with turn 1's history: a prefix-cache hit.
    assert second.usage.input_tokens > first.usage.input_tokens
    assert second.usage.input_tokens_details.cached_tokens > 0
    assert second.model_extra["timings"]["cache_n"] == \
        second.usage.input_tokens_details.cached_tokens


def test_store_false_and_unknown_previous_id(client, healthy):
    r = client.responses.create(model="tern", input="Hi", max_output_tokens=2, store=False)
    with pytest.raises(openai.NotFoundError) as e:
        client.responses.create(model="tern", input="Hi", previous_response_id=r.id,
                                max_output_tokens=2)
    assert e.value.body["param"] == "previous_response_id"
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="tern", input="Hi", previous_response_id="resp_nope")


def test_unsupported_fields_are_400(client, server, healthy):
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="tern", input="Hi", tools=[{"type": "web_search"}])
    assert e.value.body["param"] == "tools[0].type"
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="tern", input="Hi", text={"format": {
            "type": "json_schema", "name": "x", "schema": {"type": "object"}}})
    assert e.value.body["param"] == "text.format"
    r = requests.post(server.url + "/v1/responses", json={"model": "tern"}, timeout=60)
    assert r.status_code == 400 and r.json()["error"]["param"] == "input"


def test_responses_over_websocket(server, client, healthy):
    """The `responses` op on /v1/ws: deltas as for `generate`, then a `done`
    carrying the response object; its id continues the conversation over
    HTTP or the socket alike."""
    import asyncio
    import json

    import websockets

    async def run():
        async with websockets.connect(server.ws_url) as ws:
            assert json.loads(await ws.recv())["type"] == "hello"

            async def ask(rid, **fields):
                await ws.send(json.dumps({"type": "responses", "id": rid, **fields}))
                text, msgs = "", []
                while True:
                    m = json.loads(await ws.recv())
                    msgs.append(m)
                    if m["type"] == "delta":
                        text += m["text"]
                    if m["type"] in ("done", "error"):
                        return text, m, msgs

            text, done, msgs = await ask("t1", input="Name a colour.", max_output_tokens=6,
                                         temperature=0)
            assert msgs[0]["type"] == "start"
            resp = done["response"]
            assert resp["object"] == "response" and resp["id"].startswith("resp_")
            assert resp["output"][0]["content"][0]["text"] == text and text
            text2, done2, _ = await ask("t2", input="And another?", max_output_tokens=6,
                                        temperature=0, previous_response_id=resp["id"])
            assert done2["response"]["previous_response_id"] == resp["id"]
            assert done2["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
            _, err, _ = await ask("t3", input="x", previous_response_id="resp_nope")
            assert err["type"] == "error" and err["error"]["status"] == 404
            return resp["id"], text2

    first_id, _ = asyncio.run(run())
    # The socket's response is in the same store the HTTP route reads.
    r = client.responses.create(model="tern", input="One more.", max_output_tokens=4,
                                temperature=0, previous_response_id=first_id)
    assert r.previous_response_id == first_id


def test_retrieve_and_delete_a_stored_response(client, server, healthy):
    r = client.responses.create(model="tern", input=QUESTION, max_output_tokens=6, temperature=0)
    got = client.responses.retrieve(r.id)
    assert got.id == r.id and got.output_text == r.output_text and got.status == r.status
    assert got.usage.output_tokens == r.usage.output_tokens
    # A streamed response is stored too, as its final object (this one ends
    # with response.incomplete: the SDK's get_final_response wants completed).
    with client.responses.stream(model="tern", input=QUESTION, max_output_tokens=6,
                                 temperature=0) as stream:
        final = [e for e in stream][-1].response
    assert final.status == "incomplete"
    assert client.responses.retrieve(final.id).output_text == final.output_text
    # Wrong method on the item: 405 naming the allowed ones.
    bad = requests.post(f"{server.url}/v1/responses/{r.id}", json={}, timeout=10)
    assert bad.status_code == 405 and "GET" in bad.headers["allow"]
    client.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError) as e:
        client.responses.retrieve(r.id)
    assert e.value.body["code"] == "response_not_found"
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(r.id)
    # store: false keeps nothing to retrieve.
    unstored = client.responses.create(model="tern", input=QUESTION, max_output_tokens=2,
                                       temperature=0, store=False)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(unstored.id)


def test_stored_ids_are_unguessable(client, healthy):
    """A stored response is read and deleted by its id alone: ids are 128
    random bits (32 hex digits), unrelated to the request counter, so no one
    can enumerate the stored conversations (issue 25, item 9)."""
    import re
    ids = [client.responses.create(model="tern", input="Hi", max_output_tokens=1,
                                   temperature=0).id for _ in range(3)]
    for i in ids:
        assert re.fullmatch(r"resp_[0-9a-f]{32}", i), i
    assert len(set(ids)) == 3
    # Neighbouring ids share no counter: their hex halves differ widely.
    a, b = (int(i[5:], 16) for i in ids[:2])
    assert abs(a - b) > 2**64
