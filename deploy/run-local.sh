#!/usr/bin/env bash
# Tries the multi-replica setup on one machine: N tern replicas on loopback
# ports and nginx (Debian's package) in front of them with deploy/nginx/tern.conf,
# everything under one temp folder (no root paths, nothing installed).
# Ctrl-C stops it all.
#
#   deploy/run-local.sh [N] [-- extra `tern serve` options]
#
# Environment: PORT (nginx, default 8080), REPLICA_PORT (first replica,
# default 8081; the others follow), TERN_BIN (default build/tern), TERN_MODEL
# (default: tern's default model), KV_DRAM_MB (per replica, default 256),
# KV_FLASH_MB (per replica, default 1024), THREADS (per replica, default
# cores / N).
#
# Then, e.g.:
#   curl -N localhost:8080/v1/chat/completions -H 'X-Session-Id: alice' \
#     -H 'Content-Type: application/json' \
#     -d '{"messages":[{"role":"user","content":"Hi"}],"stream":true}'
# The X-Tern-Upstream response header names the replica that answered.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
n="${1:-3}"
[[ $# -gt 0 ]] && shift
[[ "${1:-}" == "--" ]] && shift
[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [N] [-- tern serve options]" >&2; exit 2; }

port="${PORT:-8080}"
replica_port="${REPLICA_PORT:-8081}"
tern="${TERN_BIN:-$repo/build/tern}"
threads="${THREADS:-$(( $(nproc) / n > 0 ? $(nproc) / n : 1 ))}"
nginx="$(command -v nginx || echo /usr/sbin/nginx)"
[[ -x "$tern" ]] || { echo "no tern binary at $tern (build it, or set TERN_BIN)" >&2; exit 1; }
[[ -x "$nginx" ]] || { echo "nginx not found: apt-get install nginx" >&2; exit 1; }

work="$(mktemp -d -t tern-replicas.XXXXXX)"
chmod 755 "$work"  # nginx workers (an unprivileged user when started as root) read under it
pids=()
cleanup() {
  trap - INT TERM EXIT
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup INT TERM EXIT

model_args=()
[[ -n "${TERN_MODEL:-}" ]] && model_args=(-m "$TERN_MODEL")
servers=""
for ((i = 0; i < n; i++)); do
  p=$((replica_port + i))
  mkdir -p "$work/replica-$i/kv"
  "$tern" serve "${model_args[@]}" --host 127.0.0.1 --port "$p" -t "$threads" \
    --kv-dram-mb "${KV_DRAM_MB:-256}" --kv-flash-mb "${KV_FLASH_MB:-1024}" \
    --kv-flash-dir "$work/replica-$i/kv" "$@" >"$work/replica-$i/log" 2>&1 &
  pids+=($!)
  servers+="server 127.0.0.1:$p; "
  echo "replica $i: http://127.0.0.1:$p  (log: $work/replica-$i/log)"
done
for ((i = 0; i < n; i++)); do
  p=$((replica_port + i))
  until curl -sf "http://127.0.0.1:$p/health" >/dev/null; do
    kill -0 "${pids[$i]}" 2>/dev/null || { echo "replica $i failed:" >&2; cat "$work/replica-$i/log" >&2; exit 1; }
    sleep 0.2
  done
done

# The shipped template with its two placeholders filled in, inside a minimal
# main configuration whose pid, logs and temp files all live in $work.
TERN_LISTEN="127.0.0.1:$port" TERN_REPLICAS="$servers" \
  envsubst '${TERN_LISTEN} ${TERN_REPLICAS}' <"$here/nginx/tern.conf" >"$work/tern.conf"
cat >"$work/nginx.conf" <<CONF
worker_processes 1;
pid $work/nginx.pid;
error_log $work/nginx-error.log warn;
events { worker_connections 1024; }
http {
    access_log $work/nginx-access.log;
    include tern.conf;
}
CONF
echo "nginx: http://127.0.0.1:$port  (Ctrl-C stops everything)"
"$nginx" -p "$work" -c "$work/nginx.conf" -e "$work/nginx-error.log" -g 'daemon off;' &
pids+=($!)
wait -n
