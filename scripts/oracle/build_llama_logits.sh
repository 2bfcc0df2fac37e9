#!/usr/bin/env bash
# Builds the architecture / LoRA oracle harness (scripts/oracle/llama_logits.cpp)
# against the libllama of the native llama.cpp peer (scripts/build_peer.sh).
# Not part of tern's CMake build. Prints the binary's path.
set -euo pipefail
peer=${TERN_PEER_DIR:-$HOME/.cache/tern-peer/llama.cpp-11434.0.0}
bin=${OUT_DIR:-/tmp/tern-oracle}/llama_logits
test -f "$peer/src/include/llama.h" || { echo "no peer at $peer (run scripts/build_peer.sh)" >&2; exit 1; }
mkdir -p "$(dirname "$bin")"
c++ -std=c++17 -O2 -o "$bin" "$(dirname "$0")/llama_logits.cpp" -I"$peer/src/include" \
  -I"$peer/src/ggml/include" -L"$peer/build/bin" -lllama -lggml -lggml-base -Wl,-rpath,"$peer/build/bin"
echo "$bin"
