#!/usr/bin/env bash
# Checks that every tracked C++ file is formatted by .clang-format (Debian's
# clang-format). Fix with:  git ls-files '*.cpp' '*.h' '*.inl' | xargs clang-format -i
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.inl')
if ! out=$(clang-format --dry-run --Werror "${files[@]}" 2>&1); then
  echo "$out" | grep -E '^[^ ].*(warning|error):' | cut -d: -f1 | sort -u | sed 's/^/not formatted: /'
  echo "run: git ls-files '*.cpp' '*.h' '*.inl' | xargs clang-format -i" >&2
  exit 1
fi
echo "format: ${#files[@]} files follow .clang-format"
