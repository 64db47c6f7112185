#!/usr/bin/env bash
# Client CPU per request, the real perf_analyzer vs inferperf, on the same server, with a
# fixed request count. Prints a markdown table for benches/README.md.
#
#   bash benches/side_by_side.sh [http|grpc|stream]     (default http; run from the repo root)
#
# http and grpc: nginx (benches/peers/nginx.sh) answers model `identity`, sync and async.
# stream: gRPC --streaming (ModelStreamInfer) to `inferperf serve`, model `simple`, because
# nginx's fixed gRPC answers cannot stream; async only (streaming implies async).
#
# Needs benches/peers/perf_analyzer.sh done once. The server is pinned to the last core, both
# clients to core 0 (taskset), one after the other, REQ_COUNT requests each (default 100000).
# Loopback only; every run is bounded by benches/peers/run_pa.sh's TIMEOUT.
set -uo pipefail
PROTO=${1:-http}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEERS_DIR=$ROOT/benches/peers
INFERPERF=${INFERPERF:-$ROOT/target/release/inferperf}
export METHOD=count REQ_COUNT=${REQ_COUNT:-100000}
last=$(( $(nproc) - 1 ))
[ -x "$INFERPERF" ] || (cd "$ROOT" && cargo build --release -q)
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }

server=nginx extra=() modes="sync async" wire=$PROTO serve_pid=
if [ "$PROTO" = stream ]; then
  # The reference server on fixed loopback ports, stopping by itself after 15 minutes.
  "$INFERPERF" serve --port 18190 --grpc-port 18191 --pin "$last" --duration 900 >/dev/null &
  serve_pid=$!
  sleep 1
  server=127.0.0.1:18191 extra=(--streaming) modes=async wire=grpc
  export MODEL=simple COUNT_URL=
else
  taskset -c "$last" bash "$PEERS_DIR/nginx.sh" start >/dev/null || exit 1
fi
echo "| cell | perf_analyzer us/req | inferperf us/req | ratio | perf_analyzer infer/s | inferperf infer/s | inferperf RSS MB |"
echo "|---|---|---|---|---|---|---|"
for mode in $modes; do
  for load in c1 c4 c16; do
    pa=$(taskset -c 0 bash "$PEERS_DIR/run_pa.sh" "$server" "$wire" "$mode" "$load" "${extra[@]}")
    ours=$(PA="$INFERPERF" taskset -c 0 bash "$PEERS_DIR/run_pa.sh" "$server" "$wire" "$mode" "$load" "${extra[@]}")
    a=$(field cpu_us_req "$pa"); b=$(field cpu_us_req "$ours")
    ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", b / a; else print "na" }')
    echo "| $PROTO $mode ${load#c} | $a | $b | $ratio | $(field thr "$pa") | $(field thr "$ours") | $(field rss_mb "$ours") |"
  done
done
if [ -n "$serve_pid" ]; then kill "$serve_pid"; wait "$serve_pid" 2>/dev/null; else bash "$PEERS_DIR/nginx.sh" stop; fi
