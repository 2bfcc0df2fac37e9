#!/usr/bin/env python3
"""A multi-turn conversation about one image, streamed through the OpenAI
Python SDK, printing what tern's caches did on each turn. Turn 1 encodes the
image; on later turns the whole earlier conversation, image included, is a
prefix whose KV tern kept, so only the new question is computed (cached_tokens
jumps, images fetched drops to 0) and the first token comes much sooner.

    tern serve -m smolvlm-text.gguf --mmproj mmproj.gguf
    python examples/image_conversation.py --image photo.png \\
        "Describe the picture." "What colours does it have?" "Is there any text in it?"
"""
from __future__ import annotations

import argparse
import time

from openai import OpenAI

from openai_image import data_url, run_cli


def stream_turn(client: OpenAI, model: str, messages: list, max_tokens: int) -> dict:
    """Streams one reply; returns its text, client-side TTFT, usage and tern's timings."""
    t0 = time.perf_counter()
    ttft, text, usage, timings = None, "", None, {}
    stream = client.chat.completions.create(model=model, messages=messages, max_tokens=max_tokens,
                                            temperature=0, stream=True,
                                            stream_options={"include_usage": True})
    for chunk in stream:
        for c in chunk.choices:
            if c.delta.content:
                if ttft is None:
                    ttft = time.perf_counter() - t0
                text += c.delta.content
        usage = chunk.usage or usage
        timings = (chunk.model_extra or {}).get("timings") or timings
    details = usage.prompt_tokens_details if usage else None
    return {"text": text, "ttft_s": ttft if ttft is not None else time.perf_counter() - t0,
            "prompt_tokens": usage.prompt_tokens if usage else 0,
            "cached_tokens": details.cached_tokens if details else 0, "timings": timings}


def converse(client: OpenAI, model: str, image_url: str, questions: list[str],
             max_tokens: int = 48) -> list[dict]:
    """Asks the questions in one conversation, the image attached to the first."""
    messages, turns = [], []
    for k, q in enumerate(questions):
        content = [{"type": "image_url", "image_url": {"url": image_url}}] if k == 0 else []
        content.append({"type": "text", "text": q})
        messages.append({"role": "user", "content": content})
        r = stream_turn(client, model, messages, max_tokens)
        messages.append({"role": "assistant", "content": r["text"]})
        t = r["timings"]
        print(f"turn {k + 1}: {q}\n  {r['text']!r}\n"
              f"  TTFT {r['ttft_s'] * 1000:.0f} ms; prompt {r['prompt_tokens']} tokens, "
              f"{r['cached_tokens']} from the KV cache; images fetched {t.get('image_n', 0)} "
              f"(embedding cache hits {t.get('image_cache_hits', 0)}, "
              f"{t.get('image_encode_ms', 0):.0f} ms)")
        turns.append(r)
    return turns


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--api-key", default="none")
    ap.add_argument("--image", required=True,
                    help="a local image file (sent as base64), or with --as-path a path under "
                         "the server's --media-dir")
    ap.add_argument("--as-path", action="store_true", help="send --image as a path, not base64")
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("questions", nargs="*",
                    default=["Describe the picture.", "What colours does it have?",
                             "Is there any text in it?"])
    args = ap.parse_args(argv)
    client = OpenAI(base_url=args.url.rstrip("/") + "/v1", api_key=args.api_key)
    model = client.models.list().data[0].id
    url = args.image if args.as_path else data_url(args.image)
    turns = converse(client, model, url, args.questions, args.max_tokens)
    if len(turns) > 1:
        print(f"turn 1 TTFT / last turn TTFT: {turns[0]['ttft_s'] / turns[-1]['ttft_s']:.1f}x")
    return turns


if __name__ == "__main__":
    run_cli(main)
