#!/usr/bin/env bash
# Tuned OpenCL matmul (PoCL on this CPU, or the first OpenCL GPU) against two untuned kernels,
# all timed by the same measuring worker in one run: tiletune's reference schedule (one output
# per work-group of one work-item) and the textbook kernel (16x16 work-groups, one output per
# work-item). Usage: bench/opencl_matmul.sh [TRIALS] [SIZES...]   (default: 64 trials, 256 512 1024)
set -euo pipefail
cd "$(dirname "$0")/.."
trials=${1:-64}
shift || true
sizes=("${@:-256 512 1024}")
db=$(mktemp -d)/opencl-bench.db
for n in ${sizes[@]}; do
  s="M=$n,N=$n,K=$n"
  echo "== matmul $n^3, $trials trials"
  start=$(date +%s)
  build/tiletune tune matmul --sizes "$s" --backend opencl --trials "$trials" --db "$db" | head -n 2
  echo "   tuning took $(( $(date +%s) - start )) s"
  textbook='{"version":1,"stages":[{"stage":"C","tile":{"m":[16,1],"n":[16,1],"k":['$n']},"order":["m.0","n.0","k.0","m.1","n.1"]}]}'
  echo "   textbook kernel:"
  build/tiletune measure matmul --sizes "$s" --backend opencl --db "$db" --config "$textbook" | cut -c1-40
done
echo "database: $db"
