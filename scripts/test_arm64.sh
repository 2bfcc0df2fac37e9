#!/usr/bin/env bash
# The aarch64 leg of the test command: cross-builds tern for Linux aarch64 on
# this x86-64 machine (scripts/setup_arm64.sh, preset linux-arm64-cross) and
# runs it under qemu-aarch64 at three CPU models, as an ARM user's machine
# would run it:
#   cortex-a72   Armv8.0 NEON, no dotprod, no i8mm (Raspberry Pi 4)  -> neon
#   neoverse-n1  NEON + dotprod (Raspberry Pi 5 / Graviton 2 class)  -> neon-dotprod
#   max          NEON + dotprod + i8mm + SVE2 (Graviton 3/4, M2 on)  -> neon-i8mm
# At each: `tern info` must report the expected kernels; the kernel, KV, core
# and model unit tests pass (TERN_EXPECT_ISA makes one of them assert the
# selection); asking for i8mm kernels on a CPU without i8mm falls back, never
# SIGILL. One `tern run` and one `tern serve` chat on the real default model
# at max (the scheduler, server and engine together); the run's greedy text
# must equal the x86 build's. The kernel tests also run at cortex-a53,
# cortex-a76 and a64fx (SVE, no dotprod).
# Emulated NEON is slow (qemu runs each vector instruction through a helper):
# the test set is chosen to fit CI. The scheduler's own unit tests are not in
# it: they hold no ISA-specific code (their model passes are the kv and model
# tests' kernels), and under qemu they are by far the leg's longest run (at
# cortex-a72 on a 2-vCPU EPYC, more than 25 minutes with the other vCPU busy).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
export ARM64_SYSROOT=${ARM64_SYSROOT:-$ROOT/.cache/sysroot-arm64}
S=$ARM64_SYSROOT
B=build-arm64
log() { echo "[arm64] $*" >&2; }
t_start=$(date +%s)

scripts/setup_arm64.sh
if [ ! -f $B/build.ninja ]; then
  cmake --preset linux-arm64-cross > /dev/null
fi
TARGETS=(tern tern_core_tests tern_kernels_tests tern_kv_tests tern_model_tests)
log "cross-building ${TARGETS[*]}"
if ! cmake --build $B -j"$(nproc)" --target "${TARGETS[@]}" > $B/last-build.log 2>&1; then
  tail -60 $B/last-build.log >&2
  echo "[arm64] cross-build failed (full log: $B/last-build.log)" >&2
  exit 1
fi
log "built in $(($(date +%s) - t_start)) s"

run() {  # run CPU PROG ARGS...: one program under emulation at a CPU model
  local cpu=$1
  shift
  QEMU_CPU=$cpu QEMU_LD_PREFIX=$S qemu-aarch64 "$@"
}

MODELS=(cortex-a72:neon neoverse-n1:neon-dotprod max:neon-i8mm)
for m in "${MODELS[@]}"; do
  cpu=${m%%:*}
  want=${m#*:}
  t0=$(date +%s)
  got=$(run "$cpu" $B/tern info --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["kernels"])')
  if [ "$got" != "$want" ]; then
    echo "[arm64] -cpu $cpu: tern info reports kernels '$got', expected '$want'" >&2
    run "$cpu" $B/tern info >&2 || true
    exit 1
  fi
  log "-cpu $cpu: $(run "$cpu" $B/tern info | sed -n 's/^kernels: *//p')"
  for t in core kernels kv model; do
    if ! TERN_EXPECT_ISA=$want TERN_SOURCE_DIR=$ROOT run "$cpu" $B/tern_${t}_tests \
      --gtest_brief=1 > $B/qemu-$cpu-$t.log 2>&1; then
      tail -40 $B/qemu-$cpu-$t.log >&2
      echo "[arm64] -cpu $cpu: tern_${t}_tests failed (log: $B/qemu-$cpu-$t.log)" >&2
      exit 1
    fi
    log "-cpu $cpu: tern_${t}_tests $(grep -o 'PASSED.*' $B/qemu-$cpu-$t.log | tail -1)"
  done
  log "-cpu $cpu: done in $(($(date +%s) - t0)) s"
done

# More cores users run, kernel tests only: Cortex-A53 (Armv8.0 little core),
# Cortex-A76 (Raspberry Pi 5 itself) and A64FX (SVE without dotprod: the NEON
# table, never one that needs SDOT).
for m in cortex-a53:neon cortex-a76:neon-dotprod a64fx:neon; do
  cpu=${m%%:*}
  want=${m#*:}
  if ! TERN_EXPECT_ISA=$want run "$cpu" $B/tern_kernels_tests --gtest_brief=1 > $B/qemu-$cpu-kernels.log 2>&1; then
    tail -40 $B/qemu-$cpu-kernels.log >&2
    echo "[arm64] -cpu $cpu: tern_kernels_tests failed (log: $B/qemu-$cpu-kernels.log)" >&2
    exit 1
  fi
  log "-cpu $cpu: $want, tern_kernels_tests $(grep -o 'PASSED.*' $B/qemu-$cpu-kernels.log | tail -1)"
done

# Tables built with +i8mm or +dotprod must never be called on a CPU without
# the extension: asked for by name there, dispatch refuses them.
out=$(TERN_KERNELS=neon-i8mm run cortex-a72 $B/tern info 2>&1)
echo "$out" | grep -q "^kernels: *scalar (TERN_KERNELS=neon-i8mm cannot run here" ||
  { echo "[arm64] TERN_KERNELS=neon-i8mm on cortex-a72: $out" >&2; exit 1; }
log "TERN_KERNELS=neon-i8mm on cortex-a72: falls back to scalar, no SIGILL"

# One generation on the real default model, greedy: the same text as x86.
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
PROMPT="The capital of France is"
x86=$(build/tern run -m $MODEL -p "$PROMPT" -n 12 --temp 0 2>/dev/null)
arm=$(run max $B/tern run -m $MODEL -t 2 -p "$PROMPT" -n 12 --temp 0 2>/dev/null)
if [ "$arm" != "$x86" ]; then
  printf '[arm64] tern run: aarch64 greedy text differs from x86:\n  x86:   %q\n  arm64: %q\n' "$x86" "$arm" >&2
  exit 1
fi
log "tern run (-cpu max): same greedy text as x86: $(printf %q "$arm")"

# One chat through the API of `tern serve` under emulation.
logf=$B/qemu-serve.log
# (qemu-aarch64 itself in the background, not a function's subshell: the
# SIGTERM below must reach it, and qemu hands it on to tern.)
QEMU_CPU=max QEMU_LD_PREFIX=$S qemu-aarch64 $B/tern serve -m $MODEL -t 2 --port 0 > $logf 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
port=""
for _ in $(seq 1 600); do
  port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' $logf | head -1)
  [ -n "$port" ] && break
  kill -0 $pid 2>/dev/null || { cat $logf >&2; echo "[arm64] tern serve exited" >&2; exit 1; }
  sleep 0.5
done
[ -n "$port" ] || { cat $logf >&2; echo "[arm64] tern serve did not start" >&2; exit 1; }
reply=$(curl -fsS --max-time 300 http://127.0.0.1:$port/v1/chat/completions \
  -H 'Content-Type: application/json' \
  -d '{"messages":[{"role":"user","content":"Say hello."}],"max_tokens":8,"temperature":0}')
text=$(echo "$reply" | python3 -c 'import json, sys; r = json.load(sys.stdin); print(r["choices"][0]["message"]["content"])')
kernels=$(curl -fsS http://127.0.0.1:$port/v1/models | python3 -c 'import json, sys; print(json.load(sys.stdin)["data"][0]["meta"]["kernels"])')
kill -TERM $pid
wait $pid || { echo "[arm64] tern serve did not exit cleanly on SIGTERM" >&2; exit 1; }
trap - EXIT
[ -n "$text" ] && [ "$kernels" = neon-i8mm ] ||
  { echo "[arm64] tern serve chat: '$reply' (kernels $kernels)" >&2; exit 1; }
log "tern serve (-cpu max, $kernels): chat answered $(printf %q "$text")"
log "passed in $(($(date +%s) - t_start)) s"
