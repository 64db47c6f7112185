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
last=$(( $(nproc) - 1 ))
for b in "$BEFORE" "$AFTER"; do
  [ -x "$b" ] || { echo "not an executable: $b"; exit 99; }
done
"$AFTER" serve --port "$PORT" --grpc-port 0 --pin "$last" --duration 1800 \
  --openai-ttft 5ms --openai-itl 1ms >/dev/null &
serve_pid=$!
tmp=$(mktemp -d)
trap 'kill $serve_pid 2>/dev/null; wait $serve_pid 2>/dev/null; rm -rf "$tmp"' EXIT
sleep 1
kill -0 $serve_pid 2>/dev/null || { echo "the server did not start (port $PORT in use?)"; exit 1; }

# Runs the command in argv[2:] and writes its CPU seconds, user + system from getrusage
# (microseconds, where GNU time prints hundredths), to argv[1]. The difference of two readings
# leaves out what the interpreter's launcher spent before.
CPU_OF='import resource, subprocess, sys
r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
rc = subprocess.call(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = r.ru_utime + r.ru_stime - r0.ru_utime - r0.ru_stime
open(sys.argv[1], "w").write("%.6f\n" % cpu)
sys.exit(rc)'

# us of client CPU per token for one run of binary $1 at $2 streams.
run() {
  local n=$(( $2 * PER_STREAM ))
  if ! timeout "$RUN_TIMEOUT" python3 -c "$CPU_OF" "$tmp/cpu" taskset -c 0 "$1" profile \
    -m inferperf-llm -u "127.0.0.1:$PORT" --streaming --concurrency "$2" --request-count "$n" \
    --output-tokens-mean "$OSL" --output-tokens-mean-deterministic \
    --tokenizer cl100k_base --quiet --no-html-report --artifact-dir "$tmp/run"; then
    echo "run failed: $1 at $2" >&2
    return 1
  fi
  rm -rf "$tmp/run"
  awk -v t=$(( n * OSL )) 'NR == 1 { printf "%.3f", $1 * 1e6 / t }' "$tmp/cpu"
}

# "mean min max" of the numbers given.
stats() {
  printf '%s\n' "$@" | awk 'NR == 1 { lo = $1; hi = $1 } { s += $1; lo = $1 < lo ? $1 : lo;
    hi = $1 > hi ? $1 : hi } END { printf "%.3f %.3f %.3f", s / NR, lo, hi }'
}

echo "| streams | tokens per run | before us/token | before min-max | after us/token |" \
  "after min-max | change |"
echo "|---|---|---|---|---|---|---|"
for c in $levels; do
  bs=()
  as=()
  for _ in $(seq "$ROUNDS"); do
    b=$(run "$BEFORE" "$c") || exit 1
    a=$(run "$AFTER" "$c") || exit 1
    bs+=("$b")
    as+=("$a")
  done
  read -r bm bl bh <<<"$(stats "${bs[@]}")"
  read -r am al ah <<<"$(stats "${as[@]}")"
  awk -v c="$c" -v t=$(( c * PER_STREAM * OSL )) -v bm="$bm" -v bl="$bl" -v bh="$bh" \
    -v am="$am" -v al="$al" -v ah="$ah" 'BEGIN {
      printf "| %d | %d | %.2f | %.2f-%.2f | %.2f | %.2f-%.2f | %+.1f %% |\n",
        c, t, bm, bl, bh, am, al, ah, (am - bm) * 100 / bm }'
done
