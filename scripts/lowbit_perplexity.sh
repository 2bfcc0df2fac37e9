#!/usr/bin/env bash
# Issue 32's end-to-end check for the low-bit GGUF types: quantizes the
# default model with the peer's llama-quantize (scripts/build_peer.sh; targets
# llama-quantize and llama-perplexity suffice) to each recipe, then prints
# llama-perplexity's and tern perplexity's estimate on the same file and text
# (ctx 512, batch 512, 2 threads, f16 KV on both sides) and the difference.
# The numbers are recorded in tests/fixtures/lowbit_perplexity.json.
#
#   scripts/lowbit_perplexity.sh [OUT_DIR]      (default /tmp/lowbit)
#
# SmolLM2-135M's rows of 576 are not whole 256-blocks, so llama.cpp's recipes
# put the K / IQ4_XS types only on ffn_down (rows of 1536) and fall back to
# Q4_0 / IQ4_NL elsewhere; the "--pure" files force ffn_down to Q2_K / Q3_K,
# which no recipe does for this model.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/lowbit}
P=${TERN_PEER_DIR:-$HOME/.cache/tern-peer/llama.cpp-11434.0.0}/build/bin
src=models/SmolLM2-135M-Instruct.Q4_1.gguf
txt=tests/fixtures/perplexity_text.txt
mkdir -p "$out"
export LD_LIBRARY_PATH=$P
for spec in Q2_K Q3_K_S Q3_K_M IQ4_NL IQ4_XS Q2_K:pure Q3_K:pure; do
  t=${spec%%:*}
  name=$t; extra=()
  if [ "$spec" != "$t" ]; then name=$t-pure; extra=(--pure); fi
  m=$out/smol-$name.gguf
  [ -f "$m" ] || "$P/llama-quantize" --allow-requantize "${extra[@]}" "$src" "$m" "$t" 2 > "$out/quant-$name.log" 2>&1
  l=$("$P/llama-perplexity" -m "$m" -f "$txt" -c 512 -b 512 -t 2 2>&1 |
    sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p')
  r=$(build/tern perplexity -m "$m" -f "$txt" -c 512 -b 512 -t 2 --kv-type f16 2>/dev/null |
    grep -oE '[0-9]+\.[0-9]+' | tail -1)
  python3 -c "import sys; l,r=float('$l'),float('$r'); print(f'$name llama.cpp {l:.4f} tern {r:.4f} {100*(r-l)/l:+.2f}%')"
done
