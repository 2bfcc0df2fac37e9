#!/usr/bin/env bash
# Issue 32's end-to-end check for the low-bit GGUF types: quantizes the
# default model with the peer's llama-quantize (scripts/build_peer.sh; targets
# llama-quantize and llama-perplexity suffice) to each recipe, then prints
# llama-perplexity's and tern perplexity's estimate on the same file and text
# (ctx 512, batch 512, 2 threads, f16 KV on both sides) and the difference.
# The numbers are recorded in tests/fixtures/lowbit_perplexity.json.
#
#   scripts/lowbit_perplexity.sh [OUT_DIR [SPEC...]]   (default /tmp/lowbit, all specs)
#
# A SPEC is a llama-quantize type name, with ":pure" for --pure, or
# "Q8_0:tq" (Q8_0 with blk.28.ffn_down in TQ2_0 and blk.29.ffn_down in
# TQ1_0: ternarizing every ffn_down of a model not trained ternary, as the
# TQ1_0 / TQ2_0 recipes do, leaves a perplexity near 10^6), or "Q8_0:q12"
# (the same with Q2_0 and Q1_0: the Q1_0 recipe cannot write this model at
# all, its rows of 576 are not whole 128-blocks and Q1_0 has no fallback;
# the Q2_0 recipe, every linear weight at 2 bits, destroys it too). The lattice,
# ternary and fp4 types (IQ3_XXS ... MXFP4_MOE) are quantized with an
# importance matrix, made once by the peer's llama-imatrix from the Q4_1
# source over the same text (ctx 512); llama-quantize requires one for the
# IQ2_XXS / IQ2_XS / IQ1 types and uses it for all of them.
#
# SmolLM2-135M's rows of 576 are not whole 256-blocks, so llama.cpp's recipes
# put the K / IQ4_XS types only on ffn_down (rows of 1536) and fall back to
# Q4_0 / IQ4_NL elsewhere; the "--pure" files force ffn_down to Q2_K / Q3_K,
# which no recipe does for this model.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/lowbit}
shift || true
specs=("$@")
[ ${#specs[@]} -gt 0 ] || specs=(Q2_K Q3_K_S Q3_K_M IQ4_NL IQ4_XS Q2_K:pure Q3_K:pure
  IQ3_XXS IQ3_S IQ2_XXS IQ2_XS IQ2_S IQ2_M IQ1_S IQ1_M TQ1_0 TQ2_0 MXFP4_MOE
  IQ2_XXS:pure IQ2_XS:pure IQ2_M:pure IQ1_S:pure IQ1_M:pure MXFP4_MOE:pure Q8_0:tq Q2_0 Q8_0:q12
  Q5_K_S Q5_K_M Q3_K_L Q5_1)
P=${TERN_PEER_DIR:-$HOME/.cache/tern-peer/llama.cpp-11434.0.0}/build/bin
src=models/SmolLM2-135M-Instruct.Q4_1.gguf
txt=tests/fixtures/perplexity_text.txt
mkdir -p "$out"
export LD_LIBRARY_PATH=$P
imatrix=$out/imatrix.gguf
for spec in "${specs[@]}"; do
  t=${spec%%:*}
  name=$t; extra=()
  if [ "$spec" = Q8_0:tq ]; then
    name=Q8_0-tq
    extra=(--tensor-type 'blk\.28\.ffn_down=tq2_0' --tensor-type 'blk\.29\.ffn_down=tq1_0')
  elif [ "$spec" = Q8_0:q12 ]; then
    name=Q8_0-q12
    extra=(--tensor-type 'blk\.28\.ffn_down=q2_0' --tensor-type 'blk\.29\.ffn_down=q1_0')
  elif [ "$spec" != "$t" ]; then
    name=$t-pure; extra=(--pure)
  fi
  case $t in
    IQ3_XXS | IQ3_S | IQ2_* | IQ1_* | TQ* | MXFP4*)
      [ -f "$imatrix" ] || "$P/llama-imatrix" -m "$src" -f "$txt" -c 512 -b 512 -t 1 -o "$imatrix" \
        > "$out/imatrix.log" 2>&1
      extra+=(--imatrix "$imatrix") ;;
  esac
  m=$out/smol-$name.gguf
  [ -f "$m" ] || "$P/llama-quantize" --allow-requantize "${extra[@]}" "$src" "$m" "$t" 2 > "$out/quant-$name.log" 2>&1
  l=$("$P/llama-perplexity" -m "$m" -f "$txt" -c 512 -b 512 -t 2 2>&1 |
    sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p')
  r=$(build/tern perplexity -m "$m" -f "$txt" -c 512 -b 512 -t 2 --kv-type f16 2>/dev/null |
    grep -oE '[0-9]+\.[0-9]+' | tail -1)
  python3 -c "import sys; l,r=float('$l'),float('$r'); print(f'$name llama.cpp {l:.4f} tern {r:.4f} {100*(r-l)/l:+.2f}%')"
done
