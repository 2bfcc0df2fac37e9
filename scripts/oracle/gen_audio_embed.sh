#!/usr/bin/env bash
# Records tests/fixtures/audio/audio_embed.json: llama.cpp's (peer b11434
# from scripts/build_peer.sh, libmtmd) embeddings of the clips in
# tests/unit/vision/synthetic_audio.h through a tiny seeded audio projector of
# each type, written by tern itself:
#   tern gen-mmproj --type T --shape tiny --weights f32 --seed 7 --out T.gguf
# (F32 linear weights, so ggml's matrix products run in fp32; the conv
# kernels are F16, as llama.cpp's converter writes them).
#   gen_audio_embed.sh [TERN_BINARY]   (default: build/tern)
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(cd ../.. && pwd)
TERN=${1:-$ROOT/build/tern}
PEER=${TERN_PEER_DIR:-$HOME/.cache/tern-peer/llama.cpp-11434.0.0}
SRC=$PEER/src
LIB=$PEER/build/bin
OUT=${OUT_DIR:-/tmp/tern-oracle}
mkdir -p "$OUT" "$ROOT/tests/fixtures/audio"
c++ -std=c++17 -O2 -o "$OUT/mtmd_audio_embed" mtmd_audio_embed.cpp \
  -I../../tests/unit/vision -I"$SRC/tools/mtmd" -I"$SRC/include" -I"$SRC/ggml/include" \
  -L"$LIB" -lmtmd -lllama -lggml -lggml-base -Wl,-rpath,"$LIB"
FIX="$ROOT/tests/fixtures/audio/audio_embed.json"
{
  echo "{"
  sep=""
  for t in ultravox qwen2a voxtral; do
    "$TERN" gen-mmproj --type "$t" --shape tiny --weights f32 --seed 7 --out "$OUT/audio_$t.gguf" >&2
    printf '%s"%s": ' "$sep" "$t"
    "$OUT/mtmd_audio_embed" "$OUT/audio_$t.gguf" 2
    sep=","
  done
  echo "}"
} > "$FIX.tmp"
mv "$FIX.tmp" "$FIX"
echo "wrote $FIX"
