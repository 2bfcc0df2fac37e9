#!/usr/bin/env python3
"""A video through the OpenAI Python SDK, asked about twice. Either a clip
file (MP4/MOV, AVI, Matroska/WebM; tern samples it at --fps up to
--max-frames with FFmpeg's libraries) or a list of frame images. Each frame
is an image of its own: the second question about the same clip reuses the
KV of the prompt through the clip, and any frame seen before comes from the
embedding cache.

    tern serve -m smolvlm-text.gguf --mmproj mmproj.gguf --media-dir ~/clips
    python examples/video_clip.py --clip ~/clips/walk.mp4 --fps 1 --max-frames 8
    python examples/video_clip.py --clip walk.mp4 --as-path          # by path under --media-dir
    python examples/video_clip.py --frames f1.png f2.png f3.png f4.png
"""
from __future__ import annotations

import argparse

from openai import OpenAI

from openai_image import data_url, run_cli


def video_part(clip: str | None, frames: list[str] | None, as_path: bool, fps: float,
               max_frames: int) -> dict:
    """The content part: {"type": "video_url"} for a clip, {"type": "video"} for frames."""
    if clip:
        return {"type": "video_url", "video_url": {
            "url": clip if as_path else data_url(clip), "fps": fps, "max_frames": max_frames}}
    return {"type": "video", "frames": [f if as_path else data_url(f) for f in frames]}


def ask_video(client: OpenAI, model: str, part: dict, question: str, max_tokens: int) -> dict:
    r = client.chat.completions.create(
        model=model, max_tokens=max_tokens, temperature=0,
        messages=[{"role": "user", "content": [part, {"type": "text", "text": question}]}])
    details = r.usage.prompt_tokens_details
    t = (r.model_extra or {}).get("timings", {})
    out = {"text": r.choices[0].message.content, "prompt_tokens": r.usage.prompt_tokens,
           "cached_tokens": details.cached_tokens if details else 0, "timings": t}
    print(f"{question}\n  {out['text']!r}\n  prompt {out['prompt_tokens']} tokens, "
          f"{out['cached_tokens']} from the KV cache; frames fetched {t.get('image_n', 0)} "
          f"(embedding cache hits {t.get('image_cache_hits', 0)}, "
          f"{t.get('image_encode_ms', 0):.0f} ms); first token after {t.get('ttft_ms', 0):.0f} ms")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--api-key", default="none")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--clip", help="a video file")
    src.add_argument("--frames", nargs="+", help="frame images, in order")
    ap.add_argument("--as-path", action="store_true",
                    help="send paths (under the server's --media-dir), not base64")
    ap.add_argument("--fps", type=float, default=1.0, help="frames sampled per second of clip")
    ap.add_argument("--max-frames", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--questions", nargs="+",
                    default=["What happens in this clip?", "What changes between the frames?"])
    args = ap.parse_args(argv)
    client = OpenAI(base_url=args.url.rstrip("/") + "/v1", api_key=args.api_key)
    model = client.models.list().data[0].id
    part = video_part(args.clip, args.frames, args.as_path, args.fps, args.max_frames)
    return [ask_video(client, model, part, q, args.max_tokens) for q in args.questions]


if __name__ == "__main__":
    run_cli(main)
