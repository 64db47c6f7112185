#!/usr/bin/env bash
# 2 MPI ranks (--enable-mpi --mpi-scale-out) against 1 process at the same total load:
# merged throughput and p99 should agree within run-to-run noise; rank 0 prints the
# coordination time per window. Prints a markdown table for benches/README.md.
#
#   bash benches/mpi_scale.sh [CONCURRENCY] [ROUNDS]     (defaults 8 and 3; run from the repo root)
#
# Needs Open MPI (`mpirun`, libmpi.so.40). The reference server is pinned to the last core
# (2 ms of compute per request, executed concurrently, so throughput is set by the server delay,
# not by the client), every client to core 0. Loopback only; the server stops by itself.
set -uo pipefail
C=${1:-8}
ROUNDS=${2:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
INFERPERF=${INFERPERF:-$ROOT/target/release/inferperf}
[ -x "$INFERPERF" ] || (cd "$ROOT" && cargo build --release -q)
command -v mpirun >/dev/null || { echo "mpirun not found: apt-get install openmpi-bin" >&2; exit 1; }
last=$(( $(nproc) - 1 ))
tmp=$(mktemp -d)
"$INFERPERF" serve --port 18290 --grpc-port 18291 --pin "$last" --delay simple=2ms \
  --duration 900 >/dev/null &
serve_pid=$!
sleep 1
flags=(-m simple -u 127.0.0.1:18290 --concurrency-range "$C" -p 2000 -s 10 -f)
# Throughput (infer/s) and p99 latency (us) by their CSV header names.
row() {
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i }
           NR == 2 { printf "%s | %s", $col["Inferences/Second"], $col["p99 latency"] }' "$1"
}
echo "| round | 1 process infer/s | 1 process p99 us | 2 ranks infer/s | 2 ranks p99 us | coordination per window |"
echo "|---|---|---|---|---|---|"
for r in $(seq 1 "$ROUNDS"); do
  taskset -c 0 "$INFERPERF" "${flags[@]}" "$tmp/one.csv" >/dev/null 2>"$tmp/one.err"
  taskset -c 0 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 \
    "$INFERPERF" --enable-mpi --mpi-scale-out "${flags[@]}" "$tmp/two.csv" \
    >/dev/null 2>"$tmp/two.err"
  coord=$(sed -n 's/.*coordination per window: \(avg [0-9]* us, max [0-9]* us\).*/\1/p' "$tmp/two.err")
  echo "| $r | $(row "$tmp/one.csv") | $(row "$tmp/two.csv") | ${coord:-see $tmp/two.err} |"
done
kill "$serve_pid"; wait "$serve_pid" 2>/dev/null
rm -rf "$tmp"
