#!/usr/bin/env bash
# Client CPU per request, the real perf_analyzer vs inferperf, on the same nginx server, with a
# fixed request count. Prints a markdown table for benches/README.md.
#
#   bash benches/side_by_side.sh [http|grpc]       (default http; run from the repo root)
#
# Needs ../shared/bench/setup-peers.sh done once. Starts nginx pinned to the last core and runs
# both clients pinned to core 0 (taskset), one after the other, REQ_COUNT requests each
# (default 100000). Loopback only; every run is bounded by run-pa.sh's TIMEOUT.
set -uo pipefail
PROTO=${1:-http}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=${BENCH:-$ROOT/../shared/bench}
INFERPERF=${INFERPERF:-$ROOT/target/release/inferperf}
export METHOD=count REQ_COUNT=${REQ_COUNT:-100000}
last=$(( $(nproc) - 1 ))
[ -x "$INFERPERF" ] || (cd "$ROOT" && cargo build --release -q)
taskset -c "$last" bash "$BENCH/start-nginx.sh" >/dev/null || exit 1
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }
echo "| cell | perf_analyzer us/req | inferperf us/req | ratio | perf_analyzer infer/s | inferperf infer/s | inferperf RSS MB |"
echo "|---|---|---|---|---|---|---|"
for mode in sync async; do
  for load in c1 c4 c16; do
    pa=$(taskset -c 0 bash "$BENCH/run-pa.sh" nginx "$PROTO" "$mode" "$load")
    ours=$(PA="$INFERPERF" taskset -c 0 bash "$BENCH/run-pa.sh" nginx "$PROTO" "$mode" "$load")
    a=$(field cpu_us_req "$pa"); b=$(field cpu_us_req "$ours")
    ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", b / a; else print "na" }')
    echo "| $PROTO $mode ${load#c} | $a | $b | $ratio | $(field thr "$pa") | $(field thr "$ours") | $(field rss_mb "$ours") |"
  done
done
bash "$BENCH/start-nginx.sh" stop
