#!/usr/bin/env bash
# A team on one PostgreSQL server (a throwaway one on a Unix socket):
#  1. 4 daemons (two of them in their own UTS namespace, as if on other hosts) and 2 CLIs tune
#     20 jobs and 2 CLI runs; one daemon of each kind is SIGKILLed while it runs a job. Then every
#     job must be done, each workload must hold exactly its budget of records (none lost, none
#     measured twice) and `tiletune db check` must pass.
#  2. The server is stopped for OUTAGE seconds in the middle of a job: the job must complete
#     when it returns, with every measurement stored.
# Usage: bench/team.sh [OUTAGE_SECONDS]   (run as root for the namespaces; 2 cores: ~10 min)
set -euo pipefail
cd "$(dirname "$0")/.."
outage=${1:-30}
trials=16
dir=$(mktemp -d /tmp/tiletune-team-XXXXXX)
chmod 755 "$dir"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done
  scripts/pg_server.sh remove "$dir/pg" || true
  rm -rf "$dir"
}
trap cleanup EXIT
scripts/pg_server.sh start "$dir/pg" > /dev/null
createdb -h "$dir/pg" -U tiletune team
url="postgresql://tiletune@/team?host=$dir/pg"
sql() { psql -At -h "$dir/pg" -U tiletune -d team -c "$1"; }
common=(--db "$url" --token t --cache "$dir/cache" --min-time 0.002 --timeout 5 --batch 4)

# start_daemon N [HOST]: a daemon whose log is $dir/dN.log; HOST: in a UTS namespace of that name.
start_daemon() {
  local n=$1 host=${2:-}
  local cmd=(build/tiletune serve --listen 127.0.0.1:0 --job-lease 10 "${common[@]}")
  : > "$dir/d$n.log"
  if [ -n "$host" ]; then
    unshare --uts sh -c "hostname $host && exec ${cmd[*]}" > "$dir/d$n.log" 2>&1 &
  else
    "${cmd[@]}" > "$dir/d$n.log" 2>&1 &
  fi
  pids[$n]=$!
  until grep -q "listening on" "$dir/d$n.log"; do sleep 0.2; done
  urls[$n]=$(grep -o 'http://127.0.0.1:[0-9]*' "$dir/d$n.log" | head -1)
}
urls=()
start_daemon 1
start_daemon 2
start_daemon 3 team-host-b
start_daemon 4 team-host-c
echo "4 daemons up: ${urls[*]}"
auth="Authorization: Bearer t"
start=$(date +%s)
for i in $(seq 0 19); do
  n=$((i % 4 + 1))
  m=$((8 + (i % 5) * 4))
  k=$((8 + (i / 5) * 8))
  curl -sf -H "$auth" -d "{\"op\":\"matmul\",\"sizes\":\"M=$m,N=16,K=$k\",\"trials\":$trials,\"strategy\":\"random\"}" \
    "${urls[$n]}/v1/tune" > /dev/null
done
# Two CLIs tune on the same database meanwhile.
build/tiletune tune matmul --sizes M=12,N=12,K=12 --trials $trials --strategy random "${common[@]:0:2}" \
  --cache "$dir/cache" --min-time 0.002 > "$dir/cli1.log" 2>&1 &
cli1=$!
build/tiletune tune matmul --sizes M=20,N=12,K=12 --trials $trials --strategy random "${common[@]:0:2}" \
  --cache "$dir/cache" --min-time 0.002 > "$dir/cli2.log" 2>&1 &
cli2=$!

# kill_when_running N: SIGKILL daemon N once it runs a job with records stored.
kill_when_running() {
  local n=$1 pid=${pids[$1]}
  until [ -n "$(sql "SELECT id FROM jobs WHERE state = 'running' AND done > 0 AND owner LIKE '%:$pid:%'")" ]; do
    sleep 0.2
  done
  local job
  job=$(sql "SELECT id FROM jobs WHERE owner LIKE '%:$pid:%'")
  kill -9 "$pid" 2> /dev/null
  wait "$pid" 2> /dev/null || true
  local killed=$(date +%s.%N)
  until [ -n "$(sql "SELECT id FROM jobs WHERE id = '$job' AND (state <> 'running' OR owner NOT LIKE '%:$pid:%')")" ]; do
    sleep 0.1
  done
  echo "SIGKILLed daemon $n (pid $pid) while it ran job $job; it was queued again or taken over" \
    "$(python3 -c "import time; print(round(time.time() - $killed, 1))") s later"
}
kill_when_running 1
kill_when_running 4
until [ "$(sql "SELECT COUNT(*) FROM jobs WHERE state IN ('queued', 'running')")" = 0 ]; do sleep 1; done
wait $cli1 $cli2
echo "all jobs ended after $(($(date +%s) - start)) s"
echo "jobs by state: $(sql "SELECT string_agg(state || '=' || n, ' ') FROM (SELECT state, COUNT(*) n FROM jobs GROUP BY state) s")"
wrong=$(sql "SELECT COUNT(*) FROM (SELECT workload_key, COUNT(*) n FROM records GROUP BY workload_key) r WHERE n <> $trials")
echo "records: $(sql "SELECT COUNT(*) FROM records") in $(sql "SELECT COUNT(DISTINCT workload_key) FROM records") workloads; workloads without exactly $trials records: $wrong"
doubled=$(sql "SELECT COUNT(*) FROM (SELECT workload_key, config_key FROM records GROUP BY 1, 2 HAVING COUNT(*) > 1) d")
echo "configs measured twice: $doubled"
build/tiletune db check --db "$url"
[ "$wrong" = 0 ] && [ "$doubled" = 0 ] && [ "$(sql "SELECT COUNT(*) FROM jobs WHERE state <> 'done'")" = 0 ]

echo "--- PostgreSQL stopped for $outage s in the middle of a job"
id=$(curl -sf -H "$auth" -d '{"op":"matmul","sizes":"M=32,N=32,K=32","trials":48,"strategy":"random"}' \
  "${urls[2]}/v1/tune" | python3 -c 'import json,sys; print(json.load(sys.stdin)["job"]["id"])')
until [ "$(sql "SELECT done FROM jobs WHERE id = '$id'")" -ge 8 ] 2> /dev/null; do sleep 0.2; done
before=$(sql "SELECT COUNT(*) FROM records WHERE workload_key = (SELECT workload_key FROM jobs WHERE id = '$id')")
scripts/pg_server.sh stop "$dir/pg"
echo "stopped with $before records of the job stored; during the outage GET /v1/jobs/$id answers" \
  "$(curl -s -o /dev/null -w '%{http_code}' -H "$auth" "${urls[2]}/v1/jobs/$id")"
sleep "$outage"
scripts/pg_server.sh start "$dir/pg" > /dev/null
until [ "$(curl -sf -H "$auth" "${urls[2]}/v1/jobs/$id" | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])' 2> /dev/null)" = done ]; do
  sleep 1
done
after=$(sql "SELECT COUNT(*) FROM records WHERE workload_key = (SELECT workload_key FROM jobs WHERE id = '$id')")
echo "the job is done with $after records (48 wanted); the daemons that stayed up: $(for n in 2 3; do kill -0 ${pids[$n]} && echo -n "$n "; done)"
grep -h "database_away\|keeping the batch" "$dir"/d[23].log | head -3 || true
[ "$after" = 48 ]
build/tiletune db check --db "$url"
echo "team.sh: ok"
