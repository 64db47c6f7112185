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
last=$(( $(nproc) - 1 ))
for b in "$BEFORE" "$AFTER"; do
  [ -x "$b" ] || { echo "not an executable: $b"; exit 99; }
done
for c in $cases; do
  case $c in
    http-sync | http-async | grpc-sync | grpc-async) ;;
    *) echo "unknown case: $c (http-sync, http-async, grpc-sync, grpc-async)"; exit 99 ;;
  esac
done
"$AFTER" serve --port "$PORT" --grpc-port $(( PORT + 1 )) --pin "$last" --duration 3600 \
  >/dev/null 2>&1 &
serve_pid=$!
tmp=$(mktemp -d)
trap 'kill $serve_pid 2>/dev/null; wait $serve_pid 2>/dev/null; rm -rf "$tmp"' EXIT
sleep 1
if ! kill -0 $serve_pid 2>/dev/null; then
  echo "the server did not start (ports $PORT and $(( PORT + 1 )) in use?)"
  exit 1
fi

# Runs the command in argv[3:] with its output in argv[1] and writes its CPU seconds, user +
# system from getrusage (microseconds, where GNU time prints hundredths), to argv[2]. The
# difference of two readings leaves out what the interpreter's launcher spent before.
CPU_OF='import resource, subprocess, sys
r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(sys.argv[1], "wb") as out:
    rc = subprocess.call(sys.argv[3:], stdout=out, stderr=subprocess.STDOUT)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = r.ru_utime + r.ru_stime - r0.ru_utime - r0.ru_stime
open(sys.argv[2], "w").write("%.6f\n" % cpu)
sys.exit(rc)'

# us of client CPU per completed request for one run of binary $1 in case $2.
run() {
  local proto=${2%-*} mode=${2#*-} url="127.0.0.1:$PORT" count
  [ "$proto" = grpc ] && url="127.0.0.1:$(( PORT + 1 ))"
  if ! timeout "$RUN_TIMEOUT" python3 -c "$CPU_OF" "$tmp/out" "$tmp/cpu" taskset -c 0 "$1" \
    -m "$MODEL" -u "$url" -i "$proto" "--$mode" --concurrency-range "$CONCURRENCY" \
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

# "mean min max" of the numbers given.
stats() {
  printf '%s\n' "$@" | awk 'NR == 1 { lo = $1; hi = $1 } { s += $1; lo = $1 < lo ? $1 : lo;
    hi = $1 > hi ? $1 : hi } END { printf "%.3f %.3f %.3f", s / NR, lo, hi }'
}

echo "| case | requests per run | before us/request | before min-max | after us/request |" \
  "after min-max | change |"
echo "|---|---|---|---|---|---|---|"
for c in $cases; do
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
  awk -v c="$c" -v k="$CONCURRENCY" -v n="$REQUESTS" -v bm="$bm" -v bl="$bl" -v bh="$bh" \
    -v am="$am" -v al="$al" -v ah="$ah" 'BEGIN {
      printf "| %s c%s | %d | %.2f | %.2f-%.2f | %.2f | %.2f-%.2f | %+.1f %% |\n",
        c, k, n, bm, bl, bh, am, al, ah, (am - bm) * 100 / bm }'
done
