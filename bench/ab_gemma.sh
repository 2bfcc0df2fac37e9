#!/bin/bash
# Best-of-N, interleaved rounds on Gemma 3 270M: llama-bench (the best of its
# per-repetition samples), a base tern binary, then build/tern, each with the
# best kernels and TERN_KERNELS=avx2. Best-of-N, because on a shared machine
# the least disturbed repetition is the closest to the quiet number.
# usage: bench/ab_gemma.sh BASE_TERN [ROUNDS=2] [REPS=8]
cd "$(dirname "$0")/.."
M=models/gemma-3-270m-it-Q4_K_M.gguf
P=~/.cache/tern-peer/llama.cpp-11434.0.0/build/bin
BASE=${1:?usage: bench/ab_gemma.sh BASE_TERN [ROUNDS] [REPS]}; R=${2:-2}; N=${3:-8}
for r in $(seq $R); do
  echo "== round $r $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  LD_LIBRARY_PATH=$P $P/llama-bench -m $M -t 2 -p 512 -n 128 -r $N -o jsonl 2>/dev/null | python3 -c '
import json,sys
for l in sys.stdin:
    j=json.loads(l); t="pp512" if j["n_prompt"] else "tg128"
    print("llama", t, "best %.1f" % max(j["samples_ts"]), "mean %.1f" % j["avg_ts"])'
  for b in "$BASE" build/tern; do
    for k in best avx2; do
      if [ $k = avx2 ]; then export TERN_KERNELS=avx2; else unset TERN_KERNELS; fi
      $b bench -m $M -t 2 --pp 512 --tg 128 --batch 1 -r $N 2>&1 | grep -E "prefill|decode" | awk -v b=$b -v k=$k '{print b, k, $0}'
    done
  done
  unset TERN_KERNELS
  echo "   end load $(cut -d' ' -f1-3 /proc/loadavg)"
done
