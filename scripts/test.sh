#!/usr/bin/env bash
# Sets up, builds and runs every test: the C++ unit tests (ctest) and the
# integration / browser tests against a real server (pytest); before those,
# every libFuzzer target on a fixed set of inputs (scripts/fuzz.sh with
# FUZZ_RUNS) and the aarch64 leg (scripts/test_arm64.sh: a cross-build run
# under qemu-aarch64 at three CPU models, on x86-64 hosts; TERN_ARM64=0
# skips it), so pytest's summary stays the last line.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# Free disk where the tests write (generated models, spill files): printed
# so that a "No space left on device" in a log below can be read against it.
disk() { df -h "${TMPDIR:-/tmp}" | awk 'NR==2 {print "== disk: " $4 " free in '"${TMPDIR:-/tmp}"' (" $5 " used) =="}'; }
disk
echo "== source checks =="
python3 scripts/check_layers.py
scripts/check_format.sh
echo "== unit tests (ctest) =="
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 900
echo "== fuzzing (scripts/fuzz.sh, a fixed 20000 inputs per target) =="
FUZZ_RUNS=${FUZZ_RUNS:-20000} scripts/fuzz.sh
if [ "${TERN_ARM64:-1}" != 0 ] && [ "$(uname -m)" = x86_64 ]; then
  echo "== aarch64 under emulation (scripts/test_arm64.sh) =="
  scripts/test_arm64.sh
fi
suites=()
for d in tests/cli tests/integration tests/e2e; do
  if ls "$d"/test_*.py >/dev/null 2>&1; then suites+=("$d"); fi
done
if [ ${#suites[@]} -gt 0 ]; then
  disk
  echo "== integration tests (pytest) =="
  .venv/bin/python -m pytest -q "${suites[@]}"
fi
