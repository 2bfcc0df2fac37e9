#!/usr/bin/env python3
"""An image through the official OpenAI Python SDK: once as a base64 data URL,
then (with --media-path) the same file by its path under the server's
--media-dir. tern identifies a picture by its decoded pixels, so the second
request finds the first one's work: the KV of the prompt through the image
(cached_tokens) or at least the image's embeddings (image_cache_hits).

    tern serve -m smolvlm-text.gguf --mmproj mmproj.gguf --media-dir ~/pictures
    pip install openai
    python examples/openai_image.py --image ~/pictures/cat.png --media-path cat.png
"""
from __future__ import annotations

import argparse
import base64
import mimetypes
import sys

from openai import APIStatusError, OpenAI


def data_url(path: str) -> str:
    """A file as a data: URL (tern sniffs the format from the bytes; the mime type is a hint)."""
    mime = mimetypes.guess_type(path)[0] or "application/octet-stream"
    with open(path, "rb") as f:
        return f"data:{mime};base64," + base64.b64encode(f.read()).decode()


def run_cli(main):
    """Runs main(); a request the server refused ends the script with its error, plainly."""
    try:
        main()
    except APIStatusError as e:
        sys.exit(f"the server refused the request: HTTP {e.status_code} {e.code}: {e.message}")


def ask_image(client: OpenAI, model: str, url: str, question: str, max_tokens: int = 64) -> dict:
    """One chat turn with an image part and a text part; the answer and tern's timings."""
    r = client.chat.completions.create(
        model=model, max_tokens=max_tokens, temperature=0,
        messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": url}},
            {"type": "text", "text": question}]}])
    details = r.usage.prompt_tokens_details
    return {"text": r.choices[0].message.content,
            "prompt_tokens": r.usage.prompt_tokens,
            "cached_tokens": details.cached_tokens if details else 0,
            # llama.cpp-style timings, tern's image fields included (not in the SDK's types)
            "timings": (r.model_extra or {}).get("timings", {})}


def show(label: str, a: dict):
    t = a["timings"]
    print(f"{label}: {a['text']!r}")
    print(f"  prompt {a['prompt_tokens']} tokens, {a['cached_tokens']} from the KV cache; "
          f"images fetched {t.get('image_n', 0)}, from the embedding cache "
          f"{t.get('image_cache_hits', 0)}, {t.get('image_encode_ms', 0):.0f} ms getting rows; "
          f"first token after {t.get('ttft_ms', 0):.0f} ms")


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--api-key", default="none", help="the server's --api-key, if it has one")
    ap.add_argument("--image", required=True, help="an image file on this machine (PNG, JPEG, ...)")
    ap.add_argument("--media-path",
                    help="the same file as the server sees it: a path relative to its --media-dir")
    ap.add_argument("--question", default="What is in this picture?")
    ap.add_argument("--max-tokens", type=int, default=64)
    args = ap.parse_args(argv)

    client = OpenAI(base_url=args.url.rstrip("/") + "/v1", api_key=args.api_key)
    model = client.models.list().data[0].id
    print(f"model: {model}")
    results = [ask_image(client, model, data_url(args.image), args.question, args.max_tokens)]
    show("base64 data URL", results[0])
    if args.media_path:
        results.append(ask_image(client, model, args.media_path, args.question, args.max_tokens))
        show("path under --media-dir", results[1])
        same = results[1]["text"] == results[0]["text"]
        print(f"same picture, same answer: {same}")
    return results


if __name__ == "__main__":
    run_cli(main)
