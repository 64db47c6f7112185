#!/usr/bin/env bash
# inferperf against the bare C load generators (wrk for HTTP, h2load for gRPC) and, in the async
# cells, the real perf_analyzer, back to back on the same nginx (benches/peers/nginx.sh, model
# `identity`, FP32[16]). Prints markdown tables for benches/README.md:
#
#   a. Closed loop, client CPU per request: user + sys of the client process (GNU time) divided
#      by the requests it completed, for concurrency 1, 4, 16, 64, sync and async, with the
#      ratio inferperf / peer and both throughputs.
#        HTTP: inferperf -i http --sync|--async --concurrency-range C --request-count N
#              vs wrk -t1 -cC -d WRK_S s -s benches/peers/wrk-post.lua (C keep-alive connections, as
#              inferperf opens one HTTP/1.1 connection per request in flight).
#        gRPC: inferperf -i grpc ... vs h2load -n N -c1 -mC with a gRPC frame of the same size
#              as inferperf's ModelInfer request (153 bytes, generated below). inferperf pinned
#              to one core runs one worker, and that worker carries all C requests as streams
#              of one HTTP/2 connection in sync and async mode alike (up to 100 per connection;
#              checked with strace: one connect to the server besides the setup connection for
#              C = 1, 4, 64), so every gRPC cell compares against h2load -c1 -mC.
#        perf_analyzer (PA=: the wrapper benches/peers/perf_analyzer.sh prints as its last line;
#        default: perf_analyzer on PATH, cells left out without one) runs the async cells with the
#        same flags as inferperf; its sync mode is one thread per request in flight, not a
#        client doing only send/receive, so those cells leave it out.
#   b. Open loop: inferperf --request-rate-range R --request-count R*OPEN_S over HTTP and gRPC at
#      each rate of RATES; `auto` is twice the best gRPC/HTTP throughput measured in part a
#      (or OVERLOAD when part a did not run): an overload that nginx cannot serve. Printed:
#      throughput, send lag p99 and the share sent over 1 ms late as inferperf reports them,
#      failed requests, exit code and peak RSS. For reference h2load's open loop on gRPC:
#      -c4 -m256 --rps R/4 (four connections, each paced at a quarter of the rate).
#
#   bash benches/bare_clients.sh          (from the repository root)
#
# Env: INFERPERF (target/release/inferperf), PA, N (closed-loop requests per cell, 20000),
# CELLS (closed-loop cells, default all: "http:sync:1 ... grpc:async:64"; empty skips part a),
# RATES (open-loop rates, "20000 50000 auto"; empty skips part b), OPEN_S (seconds of requests
# per open-loop run, 2), OVERLOAD (rate for `auto` without part a, 160000), WRK_S (wrk seconds
# per cell, 2), TIMEOUT (seconds per run, 60), PA_TIMEOUT (per perf_analyzer run, 30: its gRPC
# async mode sometimes stalls against nginx and then shows as "rc 124"), LOG_DIR (raw outputs; default a new bare-clients.* folder
# under $TMPDIR).
#
# nginx: used as it is when it already answers on 127.0.0.1:NGINX_PORT/NGINX_GRPC_PORT (18090,
# 18091) and left running; otherwise started on those ports pinned to the last core, in a run
# folder under LOG_DIR, and stopped at the end. Every client runs pinned to
# core 0 and is bounded by `timeout`. Loopback only.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEERS_DIR=$ROOT/benches/peers
INFERPERF=${INFERPERF:-$ROOT/target/release/inferperf}
PA=${PA:-$(command -v perf_analyzer || true)}
N=${N:-20000}
OPEN_S=${OPEN_S:-2}
OVERLOAD=${OVERLOAD:-160000}
WRK_S=${WRK_S:-2}
TIMEOUT=${TIMEOUT:-60}
PA_TIMEOUT=${PA_TIMEOUT:-30}
LOG_DIR=${LOG_DIR:-$(mktemp -d -t bare-clients.XXXXXX)}
ALL_CELLS=""
for proto in http grpc; do for mode in sync async; do for c in 1 4 16 64; do
  ALL_CELLS+="$proto:$mode:$c "
done; done; done
CELLS=${CELLS-$ALL_CELLS}
RATES=${RATES-20000 50000 auto}
HTTP_URL=127.0.0.1:${NGINX_PORT:-18090}
GRPC_URL=127.0.0.1:${NGINX_GRPC_PORT:-18091}
INFER_PATH=/v2/models/identity/infer
GRPC_PATH=/inference.GRPCInferenceService/ModelInfer
mkdir -p "$LOG_DIR" || exit 1
[ -x "$INFERPERF" ] || { echo "no inferperf at $INFERPERF (cargo build --release, or INFERPERF=)" >&2; exit 1; }
for tool in wrk h2load /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "needs $tool (benches/peers/perf_analyzer.sh)" >&2; exit 1; }
done

started_nginx=
nginx_up() {
  curl -sf --max-time 2 "http://$HTTP_URL/v2/health/ready" >/dev/null 2>&1 &&
    (exec 3<>"/dev/tcp/${GRPC_URL%:*}/${GRPC_URL#*:}") 2>/dev/null
}
if ! nginx_up; then
  # In a run folder of its own, so that starting and stopping it never touches a shared one.
  export NGINX_RUN_DIR=$LOG_DIR/nginx NGINX_PORT=${HTTP_URL#*:} NGINX_GRPC_PORT=${GRPC_URL#*:}
  NGINX_TTL=${NGINX_TTL:-1800} taskset -c "$(($(nproc) - 1))" bash "$PEERS_DIR/nginx.sh" start \
    >/dev/null || exit 1
  started_nginx=1
fi
cleanup() { [ -z "$started_nginx" ] || bash "$PEERS_DIR/nginx.sh" stop; }
trap cleanup EXIT

# A gRPC frame (5-byte prefix + ModelInferRequest) with the fields inferperf sends for identity:
# model_name, the triton_enable_empty_final_response parameter, input INPUT0 FP32 [16], output
# OUTPUT0 and 64 bytes of raw input: 153 bytes, as inferperf's DATA frame on the wire.
BODY=$LOG_DIR/model_infer.grpc
python3 - "$BODY" <<'EOF'
import struct, sys
def field(num, payload):
    return bytes([num << 3 | 2, len(payload)]) + payload
param = field(1, b"triton_enable_empty_final_response") + field(2, b"\x08\x01")
inp = field(1, b"INPUT0") + field(2, b"FP32") + field(3, b"\x10")
msg = (field(1, b"identity") + field(4, param) + field(5, inp) + field(6, field(1, b"OUTPUT0"))
       + field(7, struct.pack("<16f", *range(16))))
open(sys.argv[1], "wb").write(b"\x00" + struct.pack(">I", len(msg)) + msg)
EOF

# run TAG CMD...: runs CMD pinned to core 0 under GNU time and `timeout`; output in $LOG_DIR,
# sets OUT (output file), RC, CPU (user+sys seconds) and RSS (MB).
run() {
  local tag=$1; shift
  OUT=$LOG_DIR/$tag.out
  local tfile=$LOG_DIR/$tag.time
  taskset -c 0 /usr/bin/time -o "$tfile" -f '%U %S %M' \
    timeout -k 5 "$TIMEOUT" "$@" >"$OUT" 2>&1
  RC=$?
  local u s m
  read -r u s m < <(tail -1 "$tfile" | awk 'NF == 3')
  CPU=$(awk -v u="${u:-0}" -v s="${s:-0}" 'BEGIN { printf "%.3f", u + s }')
  RSS=$(( ${m:-0} / 1024 ))
}
us_per() { awk -v c="$1" -v n="${2:-0}" 'BEGIN { if (n > 0) printf "%.1f", c * 1e6 / n; else print "na" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "na" }'; }
rc_note() { [ "$1" = 0 ] && echo "" || echo " (rc $1)"; }
# inferperf/perf_analyzer report: "Request count: N" and "Throughput: X infer/sec".
pa_count() { awk '/Request count:/ { v = $3 } END { print v }' "$1"; }
pa_thr() { awk '/Throughput:/ { v = $2 } END { print v }' "$1"; }
best_http=0 best_grpc=0
note_best() { # proto throughput
  local t=${2%.*}
  [ -n "$t" ] && [ "$t" -eq "$t" ] 2>/dev/null || return 0
  if [ "$1" = http ] && [ "$t" -gt "$best_http" ]; then best_http=$t; fi
  if [ "$1" = grpc ] && [ "$t" -gt "$best_grpc" ]; then best_grpc=$t; fi
}

closed_cell() { # proto mode c
  local proto=$1 mode=$2 c=$3 url peer peer_n peer_thr bad
  [ "$proto" = http ] && url=$HTTP_URL || url=$GRPC_URL
  run "$proto-$mode-c$c-inferperf" "$INFERPERF" -m identity -u "$url" -i "$proto" "--$mode" \
    --concurrency-range "$c" --request-count "$N"
  local our_n our_thr our_cpu=$CPU our_rc=$RC
  our_n=$(pa_count "$OUT") our_thr=$(pa_thr "$OUT")
  if [ "$proto" = http ]; then
    peer="wrk -t1 -c$c"
    run "$proto-$mode-c$c-wrk" wrk -t1 -c"$c" -d"${WRK_S}s" -s "$PEERS_DIR/wrk-post.lua" \
      "http://$url$INFER_PATH"
    peer_n=$(awk '/requests in/ { print $1 }' "$OUT")
    peer_thr=$(awk '/Requests\/sec:/ { print $2 }' "$OUT")
    bad=$(awk '/Non-2xx or 3xx responses:/ { print $4 }' "$OUT")
  else
    peer="h2load -c1 -m$c"
    run "$proto-$mode-c$c-h2load" h2load -n "$N" -c1 -m"$c" -d "$BODY" \
      -H 'content-type: application/grpc' -H 'te: trailers' "http://$url$GRPC_PATH"
    peer_n=$(awk '/^requests:/ { print $6 }' "$OUT")
    peer_thr=$(awk '/^finished in/ { print $4 }' "$OUT")
    bad=$(awk '/^requests:/ { n = $6 - $8 } END { if (n > 0) print n }' "$OUT")
  fi
  local peer_cpu=$CPU peer_rc=$RC pa_us=- pa_ratio=- pa_thr_s=-
  if [ "$mode" = async ] && [ -x "$PA" ]; then
    TIMEOUT=$PA_TIMEOUT run "$proto-$mode-c$c-pa" "$PA" -m identity -u "$url" -i "$proto" --async \
      --concurrency-range "$c" --request-count "$N"
    pa_us=$(us_per "$CPU" "$(pa_count "$OUT")")$(rc_note "$RC")
    pa_thr_s=$(pa_thr "$OUT")
  fi
  local ours theirs
  ours=$(us_per "$our_cpu" "$our_n") theirs=$(us_per "$peer_cpu" "$peer_n")
  [ "$pa_us" != - ] && pa_ratio=$(ratio "$ours" "${pa_us%% *}")
  note_best "$proto" "$peer_thr"
  note_best "$proto" "$our_thr"
  [ -n "$bad" ] && theirs+=" ($bad not 2xx)"
  echo "| $proto $mode $c | $ours$(rc_note "$our_rc") | $peer | $theirs$(rc_note "$peer_rc") |" \
    "$(ratio "$ours" "$theirs") | $pa_us | $pa_ratio | ${our_thr:-na} | ${peer_thr:-na} | $pa_thr_s |"
}

if [ -n "$CELLS" ]; then
  echo "Closed loop: client CPU per request (us), $N requests per cell (wrk: ${WRK_S} s)"
  echo
  echo "| cell | inferperf us/req | peer | peer us/req | ratio | perf_analyzer us/req | ratio to PA | inferperf req/s | peer req/s | PA req/s |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  for cell in $CELLS; do
    IFS=: read -r proto mode c <<<"$cell"
    closed_cell "$proto" "$mode" "$c"
  done
  echo
fi

open_rate() { # rate proto -> the rate to offer
  local best
  [ "$2" = http ] && best=$best_http || best=$best_grpc
  if [ "$1" != auto ]; then echo "$1"; elif [ "$best" -gt 0 ]; then echo $((2 * best)); else echo "$OVERLOAD"; fi
}

if [ -n "$RATES" ]; then
  echo "Open loop: inferperf --request-rate-range R --request-count R*$OPEN_S"
  echo
  echo "| proto | offered /s | inferperf req/s | send lag p99 us | sent > 1 ms late | failed | rc | RSS MB |"
  echo "|---|---|---|---|---|---|---|---|"
  h2_rows=()
  for rate in $RATES; do
    for proto in http grpc; do
      r=$(open_rate "$rate" "$proto")
      [ "$proto" = http ] && url=$HTTP_URL || url=$GRPC_URL
      run "$proto-open-r$r-inferperf" "$INFERPERF" -m identity -u "$url" -i "$proto" \
        --request-rate-range "$r" --request-count $((r * OPEN_S))
      lag=$(sed -n 's/.*Send lag:.* p99 \([0-9]*\) usec.*/\1/p' "$OUT" | tail -1)
      late=$(sed -n 's/.*Send lag:.*(\([0-9.]*%\) over 1 ms).*/\1/p' "$OUT" | tail -1)
      failed=$(grep -oE '[0-9]+ of [0-9]+ requests failed|all [0-9]+ requests failed' "$OUT" |
        tail -1 | grep -oE '[0-9]+' | head -1)
      echo "| $proto | $r | $(pa_thr "$OUT") | ${lag:-na} | ${late:-na} | ${failed:-0} | $RC | $RSS |"
    done
    r=$(open_rate "$rate" grpc)
    run "grpc-open-r$r-h2load" h2load -n $((r * OPEN_S)) -c4 -m256 --rps $((r / 4)) -d "$BODY" \
      -H 'content-type: application/grpc' -H 'te: trailers' "http://$GRPC_URL$GRPC_PATH"
    thr=$(awk '/^finished in/ { print $4 }' "$OUT")
    lat=$(awk '/^time for request:/ { print $6 " / " $5; exit }' "$OUT")
    fail=$(awk '/^requests:/ { print $10 + $12 }' "$OUT")
    h2_rows+=("| $r | ${thr:-na} | ${lat:-na} | ${fail:-na} | $RC | $RSS |")
  done
  echo
  echo "h2load open loop (gRPC, -c4 -m256 --rps R/4, -n R*$OPEN_S), for reference"
  echo
  echo "| offered /s | h2load req/s | latency mean / max | failed + errored | rc | RSS MB |"
  echo "|---|---|---|---|---|---|"
  printf '%s\n' "${h2_rows[@]}"
fi
echo
echo "(logs: $LOG_DIR)"
