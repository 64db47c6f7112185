#!/usr/bin/env bash
# Client CPU per completed request of two inferperf builds in perf_analyzer mode, side by side in
# one run: the "before and after" check for a change to the engine, protocols or reports, with no
# peer installed. The `profile` counterpart (CPU per streamed token) is llm_cpu_ab.sh.
#
#   bash benches/cpu_ab.sh BEFORE_BINARY AFTER_BINARY [CASES...]
#   # CASES: http-sync http-async grpc-sync grpc-async (the default: all four)
#
# The reference server (`inferperf serve` of AFTER, HTTP on PORT, gRPC on PORT+1) runs on the
# last core, each client on core 0. For every case the two builds run alternately ROUNDS times
# (default 5): model MODEL (default simple) at --concurrency-range CONCURRENCY (default 4) with
# --request-count REQUESTS (default 10000), over HTTP or gRPC (-i grpc), --sync or --async.
# CPU is user + system of the client process (getrusage), start-up included, divided by the
# client's reported request count. Prints one markdown row per case: the mean us/request of
# each build with its min-max over the rounds, and the change of the means. Loopback only;
# every run is bounded by `timeout`; the server is stopped by PID. Needs python3, taskset.
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 BEFORE_BINARY AFTER_BINARY [CASES...]"; exit 99; }
BEFORE=$1
AFTER=$2
shift 2
cases=${*:-"http-sync http-async grpc-sync grpc-async"}
ROUNDS=${ROUNDS:-5}
CONCURRENCY=${CONCURRENCY:-4}
REQUESTS=${REQUESTS:-10000}
MODEL=${MODEL:-simple}
PORT=${PORT:-18590}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
for b in "$BEFORE" "$AFTER"; do
  [ -x "$b" ] || { echo "not an executable: $b"; exit 99; }
done
for c in $cases; do
  case $c in
    http-sync | http-async | grpc-sync | grpc-async) ;;
    *) echo "unknown case: $c (http-sync, http-async, grpc-sync, grpc-async)"; exit 99 ;;
  esac
done
# shellcheck source=benches/ab_lib.sh
. "$(dirname "$0")/ab_lib.sh"
ab_start_server "ports $PORT and $(( PORT + 1 ))" --port "$PORT" --grpc-port $(( PORT + 1 )) \
  --duration 3600

# us of client CPU per completed request for one run of binary $1 in case $2.
run() {
  local proto=${2%-*} mode=${2#*-} url="127.0.0.1:$PORT" count
  [ "$proto" = grpc ] && url="127.0.0.1:$(( PORT + 1 ))"
  if ! ab_cpu_of "$1" -m "$MODEL" -u "$url" -i "$proto" "--$mode" --concurrency-range "$CONCURRENCY" \
    --request-count "$REQUESTS"; then
    echo "run failed: $1 $2" >&2
    tail -5 "$tmp/out" >&2
    return 1
  fi
  count=$(awk '/Request count:/ { print $3; exit }' "$tmp/out")
  if [ -z "$count" ] || [ "$count" -le 0 ]; then
    echo "no request count: $1 $2" >&2
    return 1
  fi
  awk -v n="$count" 'NR == 1 { printf "%.3f", $1 * 1e6 / n }' "$tmp/cpu"
}

echo "| case | requests per run | before us/request | before min-max | after us/request |" \
  "after min-max | change |"
echo "|---|---|---|---|---|---|---|"
for c in $cases; do
  figures=$(ab_alternate "$c") || exit 1
  read -r bm bl bh am al ah <<<"$figures"
  awk -v c="$c" -v k="$CONCURRENCY" -v n="$REQUESTS" -v bm="$bm" -v bl="$bl" -v bh="$bh" \
    -v am="$am" -v al="$al" -v ah="$ah" 'BEGIN {
      printf "| %s c%s | %d | %.2f | %.2f-%.2f | %.2f | %.2f-%.2f | %+.1f %% |\n",
        c, k, n, bm, bl, bh, am, al, ah, (am - bm) * 100 / bm }'
done
