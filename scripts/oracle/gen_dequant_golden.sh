#!/usr/bin/env bash
# Regenerates tests/fixtures/dequant_golden.json: builds
# scripts/oracle/dequant_golden.cpp against the ggml-base of the native
# llama.cpp peer (scripts/build_peer.sh; only its ggml-base target is needed)
# and runs it. Not part of tern's CMake build.
set -euo pipefail
cd "$(dirname "$0")/../.."
peer=${TERN_PEER_DIR:-$HOME/.cache/tern-peer/llama.cpp-11434.0.0}
test -f "$peer/src/ggml/include/ggml.h" || { echo "no peer at $peer (run scripts/build_peer.sh)" >&2; exit 1; }
test -f "$peer/build/bin/libggml-base.so" || cmake --build "$peer/build" -j2 --target ggml-base
bin=${OUT_DIR:-/tmp/tern-oracle}/dequant_golden
mkdir -p "$(dirname "$bin")"
c++ -std=c++17 -O2 -o "$bin" scripts/oracle/dequant_golden.cpp -I"$peer/src/ggml/include" \
  -L"$peer/build/bin" -lggml-base -Wl,-rpath,"$peer/build/bin"
"$bin" tests/fixtures/dequant_golden.json
echo "wrote tests/fixtures/dequant_golden.json"
