#!/usr/bin/env bash
# Sets up, builds and runs every test: the C++ unit tests (ctest) and the
# integration / browser tests against a real server (pytest); before those,
# every libFuzzer target on a fixed set of inputs (scripts/fuzz.sh with
# FUZZ_RUNS), so pytest's summary stays the last line.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
echo "== source checks =="
python3 scripts/check_layers.py
scripts/check_format.sh
echo "== unit tests (ctest) =="
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 900
echo "== fuzzing (scripts/fuzz.sh, a fixed 20000 inputs per target) =="
FUZZ_RUNS=${FUZZ_RUNS:-20000} scripts/fuzz.sh
suites=()
for d in tests/cli tests/integration tests/e2e; do
  if ls "$d"/test_*.py >/dev/null 2>&1; then suites+=("$d"); fi
done
if [ ${#suites[@]} -gt 0 ]; then
  echo "== integration tests (pytest) =="
  .venv/bin/python -m pytest -q "${suites[@]}"
fi
