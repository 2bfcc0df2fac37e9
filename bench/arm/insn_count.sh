#!/usr/bin/env bash
# Whole-program work on aarch64, without ARM hardware: guest instructions
# retired per prompt token and per generated token, tern vs llama.cpp, both
# cross-built for aarch64 and run under qemu-aarch64 with an instruction-
# counting plugin (bench/arm/qemu_insn_count.c), on the same GGUF file, one
# thread. An ESTIMATE of relative work, not of speed: instruction counts
# ignore cache misses, memory bandwidth, issue width and latencies.
#
#   bench/arm/insn_count.sh [-m MODEL] [--cpu max] [--pp 512] [--tg 64]
#
# Each figure is a difference of two runs, so loading, warm-up and start-up
# cancel: prefill = (I(pp) - I(pp/2)) / (pp/2), decode = (I(tg) - I(tg/2)) / (tg/2).
#   tern:      tern bench -t 1 -r 1 --pp N --tg 0  /  --pp 0 --tg N   (one warm-up token, as llama-bench)
#   llama.cpp: llama-bench -t 1 -r 1 --no-warmup -p N -n 0  /  -p 0 -n N
# Needs build-arm64/tern (scripts/test_arm64.sh or cmake --preset linux-arm64-cross) and
# llama-bench for aarch64 (scripts/build_peer.sh --arm64, armv8.2-a+dotprod+i8mm by default:
# llama.cpp fixes its ARM kernels at compile time, so run it at a CPU model with i8mm).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
CPU=max
PP=512
TG=64
while [ $# -gt 0 ]; do
  case "$1" in
    -m) MODEL=$2; shift 2 ;;
    --cpu) CPU=$2; shift 2 ;;
    --pp) PP=$2; shift 2 ;;
    --tg) TG=$2; shift 2 ;;
    *) echo "usage: bench/arm/insn_count.sh [-m MODEL] [--cpu max] [--pp 512] [--tg 64]" >&2; exit 2 ;;
  esac
done
S=${ARM64_SYSROOT:-$ROOT/.cache/sysroot-arm64}
TERN=build-arm64/tern
LLAMA=$(scripts/build_peer.sh --arm64 | tail -1)/llama-bench
PLUGIN=build-arm64/qemu_insn_count.so
[ -x "$TERN" ] || { echo "no $TERN: run scripts/test_arm64.sh first" >&2; exit 1; }
if [ ! -f "$PLUGIN" ] || [ "$PLUGIN" -ot bench/arm/qemu_insn_count.c ]; then
  cc -O2 -shared -fPIC -o "$PLUGIN" bench/arm/qemu_insn_count.c
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

count() {  # count ARGS...: guest instructions of one run
  QEMU_CPU=$CPU QEMU_LD_PREFIX=$S qemu-aarch64 -plugin "$PLUGIN,out=$tmp/n" "$@" > "$tmp/out" 2> "$tmp/err" ||
    { tail -20 "$tmp/err" >&2; echo "failed: $*" >&2; exit 1; }
  awk '/^total/ {print $2}' "$tmp/n"
}

kernels=$(QEMU_CPU=$CPU QEMU_LD_PREFIX=$S qemu-aarch64 $TERN info --json |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["kernels"])')
h=$((PP / 2))
g=$((TG / 2))
echo "qemu-aarch64 -cpu $CPU, 1 thread, $(basename "$MODEL"); tern kernels: $kernels; llama.cpp: $(grep -o "GGML_CPU_ARM_ARCH=[^ ]*" "$(dirname "$LLAMA")/../PEER_INFO" 2>/dev/null || echo "?")"
t_pp=$(count $TERN bench -m "$MODEL" -t 1 -r 1 --pp $PP --tg 0 --batch 1 --json)
t_ph=$(count $TERN bench -m "$MODEL" -t 1 -r 1 --pp $h --tg 0 --batch 1 --json)
t_tg=$(count $TERN bench -m "$MODEL" -t 1 -r 1 --pp 0 --tg $TG --batch 1 --json)
t_th=$(count $TERN bench -m "$MODEL" -t 1 -r 1 --pp 0 --tg $g --batch 1 --json)
l_pp=$(count "$LLAMA" -m "$MODEL" -t 1 -r 1 --no-warmup -p $PP -n 0)
l_ph=$(count "$LLAMA" -m "$MODEL" -t 1 -r 1 --no-warmup -p $h -n 0)
l_tg=$(count "$LLAMA" -m "$MODEL" -t 1 -r 1 --no-warmup -p 0 -n $TG)
l_th=$(count "$LLAMA" -m "$MODEL" -t 1 -r 1 --no-warmup -p 0 -n $g)
python3 - "$t_pp" "$t_ph" "$t_tg" "$t_th" "$l_pp" "$l_ph" "$l_tg" "$l_th" "$h" "$g" <<'PY'
import sys
t_pp, t_ph, t_tg, t_th, l_pp, l_ph, l_tg, l_th, h, g = map(int, sys.argv[1:])
tp, tt = (t_pp - t_ph) / h, (t_tg - t_th) / g
lp, lt = (l_pp - l_ph) / h, (l_tg - l_th) / g
print(f"{'':<28}{'tern':>14}{'llama.cpp':>14}{'tern/llama':>12}")
print(f"{'instructions / prompt token':<28}{tp / 1e6:>13.2f}M{lp / 1e6:>13.2f}M{tp / lp:>11.2f}x")
print(f"{'instructions / decode token':<28}{tt / 1e6:>13.2f}M{lt / 1e6:>13.2f}M{tt / lt:>11.2f}x")
PY
