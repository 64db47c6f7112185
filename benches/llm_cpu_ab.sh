#!/usr/bin/env bash
# Client CPU per streamed token of two inferperf builds, side by side in one run: the "before
# and after" check for a change to the `profile` path, with no peer installed.
#
#   bash benches/llm_cpu_ab.sh BEFORE_BINARY AFTER_BINARY [STREAMS...]   # default: 8 64
#
# The reference server (`inferperf serve` of AFTER, TTFT 5 ms, ITL 1 ms, one token per chunk)
# runs on the last core, each client on core 0. For every stream count the two builds run
# alternately ROUNDS times (default 3), PER_STREAM requests per stream (default 16) of OSL
# tokens (default 256). CPU is user + system of the client process (GNU time), start-up
# included; tokens are requests x OSL. Prints one markdown row per stream count: the mean
# us/token of each build and the change. Loopback only; the server is stopped by PID.
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
last=$(( $(nproc) - 1 ))
for b in "$BEFORE" "$AFTER"; do
  [ -x "$b" ] || { echo "not an executable: $b"; exit 99; }
done
"$AFTER" serve --port "$PORT" --grpc-port 0 --pin "$last" --duration 1800 \
  --openai-ttft 5ms --openai-itl 1ms >/dev/null &
serve_pid=$!
trap 'kill $serve_pid 2>/dev/null' EXIT
sleep 1
tmp=$(mktemp -d)

# us of client CPU per token for one run of binary $1 at $2 streams.
run() {
  local n=$(( $2 * PER_STREAM ))
  /usr/bin/time -f "%U %S" -o "$tmp/time" taskset -c 0 "$1" profile -m inferperf-llm \
    -u "127.0.0.1:$PORT" --streaming --concurrency "$2" --request-count "$n" \
    --output-tokens-mean "$OSL" --output-tokens-mean-deterministic \
    --tokenizer cl100k_base --quiet --no-html-report \
    --artifact-dir "$tmp/run" >/dev/null 2>&1 || { echo "run failed: $1 at $2" >&2; }
  rm -rf "$tmp/run"
  awk -v t=$(( n * OSL )) '{ printf "%.3f", ($1 + $2) * 1e6 / t }' "$tmp/time"
}

echo "| streams | tokens per run | before us/token | after us/token | change |"
echo "|---|---|---|---|---|"
for c in $levels; do
  b_sum=0
  a_sum=0
  for _ in $(seq "$ROUNDS"); do
    b=$(run "$BEFORE" "$c")
    a=$(run "$AFTER" "$c")
    b_sum=$(awk -v s="$b_sum" -v x="$b" 'BEGIN { print s + x }')
    a_sum=$(awk -v s="$a_sum" -v x="$a" 'BEGIN { print s + x }')
  done
  awk -v c="$c" -v t=$(( c * PER_STREAM * OSL )) -v b="$b_sum" -v a="$a_sum" -v r="$ROUNDS" \
    'BEGIN { printf "| %d | %d | %.2f | %.2f | %+.1f %% |\n", c, t, b / r, a / r, (a - b) * 100 / b }'
done
rm -rf "$tmp"
