#!/usr/bin/env bash
# Builds the libFuzzer targets (the `fuzz` CMake preset: clang, ASan, UBSan)
# into build-fuzz/ and runs each for a while, one process per target.
#
#   scripts/fuzz.sh                  every target, FUZZ_SECONDS (default 15) each
#   scripts/fuzz.sh 300              every target, 5 minutes each
#   scripts/fuzz.sh 600 image video  just those targets
#
# Each target starts from a seed corpus written by code (fuzz_seeds,
# fuzz_gguf_seeds) plus what earlier runs found (build-fuzz/corpus/<target>,
# kept between runs), with its dictionary when fuzz/<target>.dict exists.
# Any crash, sanitizer report, leak, timeout (FUZZ_TIMEOUT s per input) or
# out-of-memory (FUZZ_RSS_MB) fails the script; the input is saved as
# build-fuzz/crashes/<target>-crash-<sha1> (replay: build-fuzz/fuzz/fuzz_<target> FILE).
# Inputs under fuzz/crashes/<target>/ (reproducers of fixed bugs) are replayed
# first. Prints executions and coverage per target.
#
# FUZZ_RUNS=N (what scripts/test.sh and so CI use) runs each target for N
# inputs from a fixed seed instead of for a time: the same inputs every run,
# so CI passes or fails on the code, never on a lucky mutation; exploring is
# what the timed runs by hand are for (their findings go to fuzz/crashes/).
set -euo pipefail
cd "$(dirname "$0")/.."

ALL=(gguf mmproj lora image video audio json_schema chat_template jinja ugm kv_snapshot embedding_cache)
SECONDS_EACH=${FUZZ_SECONDS:-15}
if [ $# -gt 0 ] && [[ "$1" =~ ^[0-9]+$ ]]; then
  SECONDS_EACH=$1
  shift
fi
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=("${ALL[@]}")
BUILD=build-fuzz
TIMEOUT=${FUZZ_TIMEOUT:-10}
RSS_MB=${FUZZ_RSS_MB:-2048}

log() { echo "[fuzz] $*" >&2; }

if [ ! -f "$BUILD/build.ninja" ]; then
  log "configuring $BUILD (clang)"
  cmake --preset fuzz > /dev/null
fi
log "building the fuzz targets"
t0=$(date +%s)
if ! cmake --build "$BUILD" --target fuzz_all > "$BUILD/last-build.log" 2>&1; then
  tail -40 "$BUILD/last-build.log" >&2
  log "build failed (full log: $BUILD/last-build.log)"
  exit 1
fi
log "built in $(( $(date +%s) - t0 )) s"

mkdir -p "$BUILD/crashes" "$BUILD/logs"
failed=()
printf '%-16s %10s %8s %8s %7s\n' target execs exec/s cov corpus > "$BUILD/logs/summary.txt"
for t in "${TARGETS[@]}"; do
  bin="$BUILD/fuzz/fuzz_$t"
  [ -x "$bin" ] || { log "unknown target $t (targets: ${ALL[*]})"; exit 2; }
  seeds="$BUILD/seeds/$t"
  corpus="$BUILD/corpus/$t"
  rm -rf "$seeds"
  mkdir -p "$seeds" "$corpus"
  if [ "$t" = gguf ]; then
    "$BUILD/fuzz/fuzz_gguf_seeds" "$seeds" > /dev/null
  else
    "$BUILD/fuzz/fuzz_seeds" "$t" "$seeds" > /dev/null
  fi
  opts=(-timeout="$TIMEOUT" -rss_limit_mb="$RSS_MB" -malloc_limit_mb="$RSS_MB"
    -artifact_prefix="$BUILD/crashes/$t-" -print_final_stats=1)
  [ -f "fuzz/$t.dict" ] && opts+=(-dict="fuzz/$t.dict")
  if [ -d "fuzz/crashes/$t" ]; then  # fixed bugs stay fixed
    if ! "$bin" "${opts[@]}" fuzz/crashes/"$t"/* > "$BUILD/logs/$t.replay.log" 2>&1; then
      tail -30 "$BUILD/logs/$t.replay.log" >&2
      log "$t: a reproducer under fuzz/crashes/$t fails again"
      failed+=("$t")
      continue
    fi
  fi
  if [ -n "${FUZZ_RUNS:-}" ]; then  # deterministic: fixed seed and count, a fresh corpus
    log "$t: ${FUZZ_RUNS} inputs from seed 1"
    rm -rf "$corpus" && mkdir -p "$corpus"
    run=(-seed=1 -runs="$FUZZ_RUNS" -max_total_time=300)
  else
    log "$t: ${SECONDS_EACH} s"
    run=(-max_total_time="$SECONDS_EACH")
  fi
  rc=0
  "$bin" "${opts[@]}" "${run[@]}" "$corpus" "$seeds" > "$BUILD/logs/$t.log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$BUILD/logs/$t.log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$BUILD/logs/$t.log" | tail -1)
  last=$(grep -E '^#[0-9]+' "$BUILD/logs/$t.log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<< "$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<< "$last")
  printf '%-16s %10s %8s %8s %7s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${corp:-?}" \
    >> "$BUILD/logs/summary.txt"
  if [ "$rc" -ne 0 ]; then
    grep -E 'ERROR|SUMMARY|Test unit written|==[0-9]+==' "$BUILD/logs/$t.log" | head -20 >&2 || true
    log "$t FAILED (exit $rc; log: $BUILD/logs/$t.log)"
    failed+=("$t")
  fi
done
cat "$BUILD/logs/summary.txt"
if [ ${#failed[@]} -gt 0 ]; then
  log "failed: ${failed[*]}"
  exit 1
fi
log "every target ran clean"
