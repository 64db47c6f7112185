#!/usr/bin/env bash
# Client CPU per streamed token of two inferperf builds, side by side in one run: the "before
# and after" check for a change to the `profile` path, with no peer installed. The
# perf_analyzer-mode counterpart (CPU per request) is cpu_ab.sh.
#
#   bash benches/llm_cpu_ab.sh BEFORE_BINARY AFTER_BINARY [STREAMS...]   # default: 8 64
#
# The reference server (`inferperf serve` of AFTER, TTFT 5 ms, ITL 1 ms, one token per chunk)
# runs on the last core, each client on core 0. For every stream count the two builds run
# alternately ROUNDS times (default 3), PER_STREAM requests per stream (default 16) of OSL
# tokens (default 256). CPU is user + system of the client process (getrusage), start-up
# included; tokens are requests x OSL. Prints one markdown row per stream count: the mean
# us/token of each build with its min-max over the rounds, and the change of the means.
# Loopback only; every run is bounded by `timeout`; the server is stopped by PID. Needs python3
# and taskset.
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 BEFORE_BINARY AFTER_BINARY [STREAMS...]"; exit 99; }
BEFORE=$1
AFTER=$2
shift 2
levels=${*:-"8 64"}
ROUNDS=${ROUNDS:-3}
PER_STREAM=${PER_STREAM:-16}
OSL=${OSL:-256}
PORT=${PORT:-18490}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
for b in "$BEFORE" "$AFTER"; do
  [ -x "$b" ] || { echo "not an executable: $b"; exit 99; }
done
# shellcheck source=benches/ab_lib.sh
. "$(dirname "$0")/ab_lib.sh"
ab_start_server "port $PORT" --port "$PORT" --grpc-port 0 --duration 1800 \
  --openai-ttft 5ms --openai-itl 1ms

# us of client CPU per token for one run of binary $1 at $2 streams.
run() {
  local n=$(( $2 * PER_STREAM ))
  if ! ab_cpu_of "$1" profile \
    -m inferperf-llm -u "127.0.0.1:$PORT" --streaming --concurrency "$2" --request-count "$n" \
    --output-tokens-mean "$OSL" --output-tokens-mean-deterministic \
    --tokenizer cl100k_base --quiet --no-html-report --artifact-dir "$tmp/run"; then
    echo "run failed: $1 at $2" >&2
    return 1
  fi
  rm -rf "$tmp/run"
  awk -v t=$(( n * OSL )) 'NR == 1 { printf "%.3f", $1 * 1e6 / t }' "$tmp/cpu"
}

echo "| streams | tokens per run | before us/token | before min-max | after us/token |" \
  "after min-max | change |"
echo "|---|---|---|---|---|---|---|"
for c in $levels; do
  figures=$(ab_alternate "$c") || exit 1
  read -r bm bl bh am al ah <<<"$figures"
  awk -v c="$c" -v t=$(( c * PER_STREAM * OSL )) -v bm="$bm" -v bl="$bl" -v bh="$bh" \
    -v am="$am" -v al="$al" -v ah="$ah" 'BEGIN {
      printf "| %d | %d | %.2f | %.2f-%.2f | %.2f | %.2f-%.2f | %+.1f %% |\n",
        c, t, bm, bl, bh, am, al, ah, (am - bm) * 100 / bm }'
done
