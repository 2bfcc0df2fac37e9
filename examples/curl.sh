#!/usr/bin/env bash
# tern's HTTP API with nothing but curl. Usage: examples/curl.sh [URL] (default http://127.0.0.1:8080)
# With a server started with --api-key KEY: TERN_API_KEY=KEY examples/curl.sh
set -euo pipefail
URL=${1:-http://127.0.0.1:8080}
AUTH=()
if [ -n "${TERN_API_KEY:-}" ]; then AUTH=(-H "Authorization: Bearer $TERN_API_KEY"); fi

echo "== GET /health"
curl -s "$URL/health"; echo

echo "== GET /v1/models"
curl -s "${AUTH[@]}" "$URL/v1/models"; echo

echo "== POST /v1/chat/completions"
curl -s "${AUTH[@]}" "$URL/v1/chat/completions" -H 'Content-Type: application/json' -d '{
  "messages": [{"role": "user", "content": "Give me one fun fact about octopuses."}],
  "max_tokens": 64, "temperature": 0.7
}'; echo

echo "== POST /v1/chat/completions (streaming, server-sent events)"
curl -sN "${AUTH[@]}" "$URL/v1/chat/completions" -H 'Content-Type: application/json' -d '{
  "messages": [{"role": "user", "content": "Count from one to five."}],
  "max_tokens": 32, "stream": true, "stream_options": {"include_usage": true}
}'

echo "== POST /v1/completions"
curl -s "${AUTH[@]}" "$URL/v1/completions" -H 'Content-Type: application/json' -d '{
  "prompt": "The capital of Italy is", "max_tokens": 8, "temperature": 0
}'; echo

echo "== an error: temperature out of range (HTTP 400, OpenAI error JSON)"
curl -s "${AUTH[@]}" "$URL/v1/chat/completions" -H 'Content-Type: application/json' -d '{
  "messages": [{"role": "user", "content": "hi"}], "temperature": 7
}'; echo

echo "== GET /metrics (Prometheus text; first lines)"
curl -s "${AUTH[@]}" "$URL/metrics" | grep -v '^#' | head -12
