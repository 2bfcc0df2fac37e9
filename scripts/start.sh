#!/usr/bin/env bash
# Sets up, builds and starts tern on the default model: the server when it is
# built in, otherwise an interactive chat. Extra arguments go to tern.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if ./build/tern serve --help >/dev/null 2>&1; then
  exec ./build/tern serve "$@"
fi
exec ./build/tern chat "$@"
