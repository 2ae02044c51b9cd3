#!/bin/sh
# Starts a daemon on loopback with a tuning job running, then measures GET /v1/best with
# 8 concurrent clients (bench/load_bench.cpp) while 1,000 idle keep-alive and 200 half-open
# connections are held open, and the latency of a new connection's request.
# Usage: bench/load.sh [seconds] [idle] [half-open] [db]   (db: an SQLite file or a postgresql://
# URL of an empty database; a temporary SQLite file by default). TILETUNE_LOAD_SERVE_ARGS adds
# options to the daemon (such as "--threads 1": the tuning job's kernels leave a core to lookups)
set -eu
cd "$(dirname "$0")/.."
secs="${1:-10}"
idle="${2:-1000}"
half_open="${3:-200}"
dir=$(mktemp -d)
db="${4:-$dir/load.db}"
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
build/tiletune serve --db "$db" --listen 127.0.0.1:0 --token bench ${TILETUNE_LOAD_SERVE_ARGS:-} > "$dir/log" 2>&1 &
pid=$!
until grep -q "listening on" "$dir/log"; do sleep 0.2; done
url=$(grep -o 'http://127.0.0.1:[0-9]*' "$dir/log" | head -1)
auth="Authorization: Bearer bench"
# Something to look up, then a job that keeps tuning while the load runs.
curl -sf -H "$auth" -d '{"op":"matmul","sizes":"M=64,N=64,K=64","trials":4}' "$url/v1/tune" > /dev/null
until curl -sf -H "$auth" -d '{"op":"matmul","sizes":"M=64,N=64,K=64"}' "$url/v1/best" > /dev/null; do sleep 0.5; done
curl -sf -H "$auth" -d '{"op":"matmul","sizes":"M=256,N=256,K=256","trials":2000,"strategy":"random"}' "$url/v1/tune" > /dev/null
sleep 2
echo "tuning job: $(curl -sf -H "$auth" "$url/v1/jobs?state=running" | head -c 160)"
build/tiletune-load-bench --url "$url" --token bench --clients 8 --seconds "$secs" --idle "$idle" --half-open "$half_open"
