#!/usr/bin/env python3
"""tern through the official OpenAI Python SDK: a chat completion, the same
question streamed token by token, and a raw text completion.

    pip install openai
    python examples/openai_chat.py --url http://127.0.0.1:8080 [--api-key KEY]
"""
import argparse
import time

from openai import OpenAI


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--api-key", default="none", help="the server's --api-key, if it has one")
    ap.add_argument("--prompt", default="Explain in two sentences why the sky is blue.")
    args = ap.parse_args()

    client = OpenAI(base_url=args.url.rstrip("/") + "/v1", api_key=args.api_key)
    model = client.models.list().data[0].id
    print(f"model: {model}\n")
    messages = [{"role": "system", "content": "You are a concise assistant."},
                {"role": "user", "content": args.prompt}]

    # 1. Non-streaming: the whole answer at once, with usage.
    r = client.chat.completions.create(model=model, messages=messages, max_tokens=96,
                                       temperature=0.7)
    print("non-streaming:", r.choices[0].message.content)
    print(f"  finish_reason={r.choices[0].finish_reason} usage={r.usage.model_dump()}")
    # tern also returns llama.cpp-style timings (not part of the SDK's types).
    timings = (r.model_extra or {}).get("timings", {})
    print(f"  prefill {timings.get('prompt_per_second', 0):.0f} tok/s, "
          f"generation {timings.get('predicted_per_second', 0):.1f} tok/s\n")

    # 2. Streaming: print tokens as they arrive; usage comes in a last chunk.
    print("streaming: ", end="", flush=True)
    t0 = time.perf_counter()
    first = None
    stream = client.chat.completions.create(model=model, messages=messages, max_tokens=96,
                                            temperature=0.7, stream=True,
                                            stream_options={"include_usage": True})
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            if first is None:
                first = time.perf_counter()
            print(chunk.choices[0].delta.content, end="", flush=True)
        if chunk.usage:
            print(f"\n  {chunk.usage.completion_tokens} tokens, "
                  f"time to first token {1000 * (first - t0):.0f} ms\n")

    # 3. A plain text completion.
    c = client.completions.create(model=model, prompt="The three primary colours are",
                                  max_tokens=24, temperature=0)
    print("completion: The three primary colours are" + c.choices[0].text)


if __name__ == "__main__":
    main()
