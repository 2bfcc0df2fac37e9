"""Continuous batching through the public API: 16 concurrent streams all
complete, and each greedy output is identical to the same request run alone."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

PROMPTS = [
    "Write one sentence about the sea.",
    "What is 2 + 2?",
    "Name a fruit.",
    "Say hello in French.",
    "What colour is the sky?",
    "Give me a dog's name.",
    "What is the opposite of hot?",
    "Count to five.",
    "Name a planet.",
    "What do bees make?",
    "Say something kind.",
    "What is ice made of?",
    "Name a musical instrument.",
    "What day comes after Monday?",
    "Name a country in Europe.",
    "What is the largest ocean?",
]
MAX_TOKENS = 16


def stream_chat(client, prompt: str) -> tuple[str, str, int]:
    stream = client.chat.completions.create(
        model="tern", messages=[{"role": "user", "content": prompt}], max_tokens=MAX_TOKENS,
        temperature=0, stream=True, stream_options={"include_usage": True})
    text, finish, tokens = [], None, 0
    for chunk in stream:
        if chunk.usage:
            tokens = chunk.usage.completion_tokens
        for choice in chunk.choices:
            if choice.delta.content:
                text.append(choice.delta.content)
            if choice.finish_reason:
                finish = choice.finish_reason
    return "".join(text), finish, tokens


def test_sixteen_concurrent_streams_match_solo_runs(client, server, healthy):
    solo = [stream_chat(client, p) for p in PROMPTS]
    steps_before = server.metrics()["tern_steps_total"]
    with ThreadPoolExecutor(max_workers=len(PROMPTS)) as pool:
        together = list(pool.map(lambda p: stream_chat(client, p), PROMPTS))
    steps = server.metrics()["tern_steps_total"] - steps_before
    for prompt, alone, batched in zip(PROMPTS, solo, together):
        assert batched[1] in ("stop", "length"), prompt
        assert batched[0] == alone[0], f"{prompt!r}: batched output differs from solo run"
        assert batched[2] == alone[2], prompt
    # They really ran together: far fewer forward passes than tokens generated.
    generated = sum(t for _, _, t in together)
    assert steps < generated / 2, (steps, generated)
    assert server.metrics()["tern_running_sequences"] == 0
