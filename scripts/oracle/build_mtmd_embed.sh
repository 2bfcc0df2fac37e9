#!/usr/bin/env bash
# Builds the vision oracle harness (scripts/oracle/mtmd_embed.cpp) against the
# native llama.cpp peer that scripts/build_peer.sh built (its source tree for
# the internal mtmd headers, its libmtmd/libggml for the code). Not part of
# tern's CMake build. Prints the binary's path.
#   build_mtmd_embed.sh [HARNESS]   HARNESS: mtmd_embed (default) or mtmd_greedy
#                                   (the image-prompt oracle, scripts/oracle/mtmd_greedy.cpp)
set -euo pipefail
cd "$(dirname "$0")"
PEER=${TERN_PEER_DIR:-$HOME/.cache/tern-peer/llama.cpp-11434.0.0}
SRC=$PEER/src
LIB=$PEER/build/bin
[ -f "$SRC/tools/mtmd/clip.h" ] || { echo "no peer source tree at $SRC (run scripts/build_peer.sh)" >&2; exit 1; }
NAME=${1:-mtmd_embed}
OUT=${OUT_DIR:-/tmp/tern-oracle}
mkdir -p "$OUT"
c++ -std=c++17 -O2 -o "$OUT/$NAME" "$NAME.cpp" \
  -I../../tests/unit/vision -I"$SRC/tools/mtmd" -I"$SRC/include" -I"$SRC/ggml/include" \
  -L"$LIB" -lmtmd -lllama -lggml -lggml-base -Wl,-rpath,"$LIB"
echo "$OUT/$NAME"
