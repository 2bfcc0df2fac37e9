#!/usr/bin/env bash
# Records tests/fixtures/audio/whisper_mel.json: llama.cpp's Whisper log-mel
# (libmtmd's mtmd_audio_preprocessor_whisper, peer b11434 from
# scripts/build_peer.sh) of the clips in tests/unit/vision/synthetic_audio.h,
# 128 mel bins, at the frames kept_frames() lists.
set -euo pipefail
cd "$(dirname "$0")"
PEER=${TERN_PEER_DIR:-$HOME/.cache/tern-peer/llama.cpp-11434.0.0}
SRC=$PEER/src
LIB=$PEER/build/bin
OUT=${OUT_DIR:-/tmp/tern-oracle}
mkdir -p "$OUT" ../../tests/fixtures/audio
c++ -std=c++17 -O2 -o "$OUT/whisper_mel" whisper_mel.cpp \
  -I../../tests/unit/vision -I"$SRC/tools/mtmd" -I"$SRC/include" -I"$SRC/ggml/include" \
  -L"$LIB" -lmtmd -lllama -lggml -lggml-base -Wl,-rpath,"$LIB"
"$OUT/whisper_mel" 128 > ../../tests/fixtures/audio/whisper_mel.json
echo "wrote tests/fixtures/audio/whisper_mel.json"
