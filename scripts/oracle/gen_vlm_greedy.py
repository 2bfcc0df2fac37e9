#!/usr/bin/env python3
"""Records llama.cpp's greedy continuations of prompts with images, for
tests/unit/engine/vision_oracle_test.cpp (tests/fixtures/vision/vlm_greedy.json).

Each pair is a real text model with a seeded random projector of its width,
written by `tern gen-mmproj` (tern's test regenerates the same projector
in memory, so CI needs neither llama.cpp nor the file):
  gemma3:   models/gemma-3-270m-it-Q4_K_M.gguf + gemma3 tiny, seed 42, n_embd 640
  idefics3: the SmolVLM-shaped text model `tern gen-vlm-text` makes from
            models/SmolLM2-135M-Instruct.Q4_1.gguf + idefics3 tiny, seed 42,
            n_embd 576 (only when --idefics3-text names that file)
  mlp:      models/SmolLM2-135M-Instruct.Q4_1.gguf as it is (LLaVA wraps
            nothing: the rows replace the marker) + mlp tiny, seed 42, n_embd 576
With --audio, the same for audio clips instead, into
tests/fixtures/audio/audio_greedy.json (tests/unit/engine/audio_oracle_test.cpp):
  ultravox: models/SmolLM2-135M-Instruct.Q4_1.gguf as it is (Ultravox wraps
            nothing) + ultravox tiny, seed 42, n_embd 576;
  qwen2a, voxtral: the same model plus the tokens they wrap a clip in
            (`tern gen-vlm-text --tokens audio`: <|audio_bos|>, <|audio_eos|>,
            [BEGIN_AUDIO]) + qwen2a / voxtral tiny, seed 42, n_embd 576;
  on the clips "tone", "chirp" and "noise" of tests/unit/vision/synthetic_audio.h.
The oracle is scripts/oracle/mtmd_greedy.cpp (libmtmd + libllama of the peer
build, scripts/build_peer.sh), built by scripts/oracle/build_mtmd_embed.sh mtmd_greedy.

  scripts/oracle/gen_vlm_greedy.py [--idefics3-text FILE] [--only TYPE,...] [--audio]

--only re-records just those projector types and keeps the fixture's other cases.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TERN = os.environ.get("TERN_BIN", os.path.join(ROOT, "build", "tern"))
N_PREDICT = 16
IMAGES = ["gradient", "noise", "text"]
CLIPS = ["tone", "chirp", "noise", "long"]
AUDIO_PROMPTS = ["<__media__> The capital of France is", "Here is a recording: <__media__>\nIt says"]
PROMPTS = ["<__media__> The capital of France is", "Here is a picture: <__media__>\nIt shows"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--idefics3-text", default="")
    ap.add_argument("--threads", default="2")
    ap.add_argument("--only", default="", help="comma-separated projector types to re-record")
    ap.add_argument("--audio", action="store_true", help="the audio cases instead")
    args = ap.parse_args()
    oracle = subprocess.run([os.path.join(ROOT, "scripts/oracle/build_mtmd_embed.sh"), "mtmd_greedy"],
                            check=True, capture_output=True, text=True).stdout.strip()
    pairs = [("gemma3", "models/gemma-3-270m-it-Q4_K_M.gguf", 640)]
    if args.idefics3_text:
        pairs.append(("idefics3", args.idefics3_text, 576))
    pairs.append(("mlp", "models/SmolLM2-135M-Instruct.Q4_1.gguf", 576))
    path = os.path.join(ROOT, "tests/fixtures/vision/vlm_greedy.json")
    media, key = IMAGES, "images"
    if args.audio:
        pairs = [("ultravox", "models/SmolLM2-135M-Instruct.Q4_1.gguf", 576)]
        path = os.path.join(ROOT, "tests/fixtures/audio/audio_greedy.json")
        media, key = ["audio:" + c for c in CLIPS], "clips"
    prompts = AUDIO_PROMPTS if args.audio else PROMPTS
    kept = []
    if args.only:
        only = set(args.only.split(","))
        pairs = [p for p in pairs if p[0] in only]
        with open(path) as f:
            kept = [c for c in json.load(f)["cases"] if c["projector"] not in only]
    out = {"how": "scripts/oracle/gen_vlm_greedy.py (llama.cpp b11434 libmtmd + libllama, "
                  "mtmd_helper_eval_chunks with n_batch 2048, greedy)",
           "n_predict": N_PREDICT, "cases": kept}
    with tempfile.TemporaryDirectory() as tmp:
        if args.audio:
            audio_text = os.path.join(tmp, "smollm2-audio-text.gguf")
            subprocess.run([TERN, "gen-vlm-text", "--tokens", "audio", "--from",
                            os.path.join(ROOT, "models/SmolLM2-135M-Instruct.Q4_1.gguf"),
                            "--out", audio_text], check=True, capture_output=True)
            pairs += [("qwen2a", audio_text, 576), ("voxtral", audio_text, 576)]
        for ptype, text_model, n_embd in pairs:
            mmproj = os.path.join(tmp, ptype + ".gguf")
            subprocess.run([TERN, "gen-mmproj", "--type", ptype, "--shape", "tiny", "--seed", "42",
                            "--n-embd", str(n_embd), "--out", mmproj], check=True,
                           capture_output=True)
            for prompt in prompts:
                for medium in media:
                    r = subprocess.run([oracle, text_model, mmproj, args.threads, str(N_PREDICT),
                                        prompt, medium], check=True, capture_output=True,
                                       text=True)
                    rec = json.loads(r.stdout)
                    rec.update({"projector": ptype, "seed": 42, "n_embd": n_embd,
                                "text_model": os.path.basename(text_model), "prompt": prompt,
                                key: [medium.removeprefix("audio:")]})
                    out["cases"].append(rec)
                    print(ptype, medium, repr(prompt), rec["tokens"][:6], file=sys.stderr)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
