#!/usr/bin/env bash
# One perf_analyzer-style measurement, one line of figures.
#
#   bash benches/peers/run_pa.sh SERVER PROTO MODE LOAD [more flags...]
#     SERVER  nginx (benches/peers/nginx.sh's ports) or HOST:PORT
#     PROTO   http | grpc        MODE  sync | async        LOAD  cN (concurrency) | rN (rate/s)
#
# PA is the client to run: the real perf_analyzer (default INFERPERF_PEERS/bin/perf_analyzer)
# or target/release/inferperf, given the same flags and read the same way, so the line also
# checks that inferperf prints perf_analyzer's console report.
# METHOD=windows (default): -p P_MS (2000) time windows; METHOD=count: --request-count
# REQ_COUNT (50000), which makes client CPU per request exact. COUNT_URL: a URL whose body
# holds the server's request counter (nginx's stub_status by default for SERVER=nginx; empty:
# none), used for CPU per request in windows mode. MODEL (identity), STAB (-s), TIMEOUT (90 s,
# then the client is killed). The client's output is kept in LOGS (default: run-pa-logs in
# the peers folder).
#
# Output: server= proto= mode= load= method= thr= p50_us= p99_us= reqs= cpu_s= cpu_us_req=
# wall_s= rss_mb= passes= rc= flags= log=. thr, p50 and p99 are the client's final figures;
# without them (an unstable run) thr is `~` and the median of the passes' throughputs. cpu_s is
# the client's user+sys time. flags: ok, or a list of timeout, unstable, not_maintained,
# delayed=P%, error, no_final_result.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
[ $# -ge 4 ] || { sed -n 2,22p "$0" >&2; exit 2; }
server=$1 proto=$2 mode=$3 load=$4
shift 4
PA=${PA:-$PEERS/bin/perf_analyzer}
METHOD=${METHOD:-windows}
LOGS=${LOGS:-$PEERS/run-pa-logs}
mkdir -p "$LOGS"

url=$server count_url=${COUNT_URL-}
if [ "$server" = nginx ]; then
  case $proto in
    http) url=127.0.0.1:${NGINX_PORT:-18090} ;;
    grpc) url=127.0.0.1:${NGINX_GRPC_PORT:-18091} ;;
  esac
  count_url=${COUNT_URL-http://127.0.0.1:${NGINX_PORT:-18090}/nginx_status}
fi

flags=(-m "${MODEL:-identity}" -u "$url" -i "$proto" -v "--$mode")
case $load in
  c[0-9]*) flags+=(--concurrency-range "${load#c}") ;;
  r[0-9]*) flags+=(--request-rate-range "${load#r}") ;;
  *) die "LOAD is cN or rN, not $load" ;;
esac
case $METHOD in
  count) flags+=(--request-count "${REQ_COUNT:-50000}") ;;
  windows) flags+=(-p "${P_MS:-2000}") ;;
  *) die "METHOD is windows or count, not $METHOD" ;;
esac
[ -z "${STAB:-}" ] || flags+=(-s "$STAB")
flags+=("$@")

# The server's request count: stub_status's third line is "accepts handled requests".
served() {
  [ -n "$count_url" ] || return 0
  curl -s --max-time 2 "$count_url" | awk 'NR == 3 { print $3 }'
}

log=$LOGS/${server//[:\/]/_}-$proto-$mode-$load-$METHOD-$(date +%s)-$$
before=$(served)
/usr/bin/time -o "$log.time" -f '%U %S %e %M' timeout -k 5 "${TIMEOUT:-90}" "$PA" "${flags[@]}" \
  >"$log.out" 2>&1
rc=$?
after=$(served)

read -r user sys wall rss_kb < <(awk 'NF == 4' "$log.time" | tail -1)
last() { awk -v key="$1" -v col="$2" 'index($0, key) { v = $col } END { print v }' "$log.out"; }
thr=$(last 'Throughput:' 2)
p50=$(last 'p50 latency:' 3)
p99=$(last 'p99 latency:' 3)
passes=$(grep -c 'Pass \[' "$log.out")
if [ -z "$thr" ]; then
  median=$(grep -oE 'throughput: [0-9.]+' "$log.out" | awk '{ print $2 }' | sort -g |
    awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }')
  [ -z "$median" ] || thr="~$median"
fi

if [ "$METHOD" = count ]; then
  reqs=${REQ_COUNT:-50000}
elif [ -n "$before" ] && [ -n "$after" ]; then
  reqs=$((after - before))
else
  reqs=
fi
cpu=$(awk -v u="${user:-0}" -v s="${sys:-0}" 'BEGIN { printf "%.2f", u + s }')
per_req=$(awk -v c="$cpu" -v n="${reqs:-0}" 'BEGIN { if (n > 0) printf "%.1f", c * 1e6 / n; else print "na" }')

marks=()
{ [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && marks+=(timeout)
grep -q 'Failed to obtain stable measurement' "$log.out" && marks+=(unstable)
grep -q 'Failed to maintain requested inference load' "$log.out" && marks+=(not_maintained)
late=$(grep -oE '[0-9.]+% of the requests were delayed' "$log.out" | tail -1 | cut -d% -f1)
[ -z "$late" ] || marks+=("delayed=$late%")
grep -qiE '^error|cb::Error|had error' "$log.out" && marks+=(error)
case $thr in '' | '~'*) marks+=(no_final_result) ;; esac
marks_text=$(IFS=,; echo "${marks[*]:-ok}")

echo "server=$server proto=$proto mode=$mode load=$load method=$METHOD thr=${thr:-na}" \
  "p50_us=${p50:-na} p99_us=${p99:-na} reqs=${reqs:-na} cpu_s=$cpu cpu_us_req=$per_req" \
  "wall_s=${wall:-na} rss_mb=$(( ${rss_kb:-0} / 1024 )) passes=$passes rc=$rc flags=$marks_text log=$log.out"
