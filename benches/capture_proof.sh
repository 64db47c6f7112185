#!/usr/bin/env bash
# How far each client's latencies are from the wire: a loopback packet capture (tcpdump,
# nanosecond stamps) runs around every measurement and benches/capture_proof.py compares the
# client's export with it, request by request or chunk by chunk.
#
#   bash benches/capture_proof.sh requests    # perf_analyzer mode against nginx: the table
#   bash benches/capture_proof.sh llm         # profile --streaming against inferperf serve
#   bash benches/capture_proof.sh all
#
# requests: `-m identity --sync --concurrency-range C --request-count N` against
# benches/peers/nginx.sh (pinned to the last core) over PROTOS ("http grpc"), C in 1 and 16
# (N: C1_COUNT 3000, C16_COUNT 16000), HOGS ("0 1 4") busy loops pinned to the client's core
# 0, and three clients pinned to core 0: inferperf (kernel receive stamps on), inferperf
# --no-kernel-rx-stamps (the clock read after the read: "before") and the real perf_analyzer
# (PA, default INFERPERF_PEERS/bin/perf_analyzer; TOOLS picks among "ours before pa").
# llm: `inferperf profile --streaming --concurrency S --request-count S` for S in STREAMS
# ("1024 10000") against `inferperf serve` (pinned to the last core; LLM_TTFT_MS 50,
# LLM_ITL_MS 200, LLM_OSL 8 output tokens, one token per chunk), with LLM_HOGS (4) busy loops
# on core 0; every chunk's export time minus the capture time of the segment that holds its
# last byte.
#
# INFERPERF: the binary (target/release/inferperf). tcpdump runs on the last core with a
# BUF_KIB (262144) KiB buffer; a run whose capture dropped packets is reported as refused, not
# compared. Error = client latency - wire latency (µs). The busy loops stop after HOG_S (300) s
# at the latest and are stopped by PID after each run. Needs root (or CAP_NET_RAW) for tcpdump.
# KEEP=DIR keeps every capture, export and client output there. The requests table also splits
# each error into its send part (first wire byte - request time) and receive part (response
# time - last wire byte).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEERS=${INFERPERF_PEERS:-${HOME:-/tmp}/.cache/inferperf-peers}
INFERPERF=${INFERPERF:-$ROOT/target/release/inferperf}
PA=${PA:-$PEERS/bin/perf_analyzer}
ANALYSE=$ROOT/benches/capture_proof.py
PROTOS=${PROTOS:-"http grpc"}
HOGS=${HOGS:-"0 1 4"}
TOOLS=${TOOLS:-"ours before pa"}
C1_COUNT=${C1_COUNT:-3000}
C16_COUNT=${C16_COUNT:-16000}
STREAMS=${STREAMS:-"1024 10000"}
LLM_HOGS=${LLM_HOGS:-4}
LLM_TTFT_MS=${LLM_TTFT_MS:-50}
LLM_ITL_MS=${LLM_ITL_MS:-200}
LLM_OSL=${LLM_OSL:-8}
BUF_KIB=${BUF_KIB:-262144}
# nginx's worker user must read the gRPC answer files of its run folder, which a folder under
# a private home (root's) does not allow.
export NGINX_RUN_DIR=${NGINX_RUN_DIR:-${TMPDIR:-/tmp}/inferperf-capture-nginx}
HOG_S=${HOG_S:-300}
last=$(( $(nproc) - 1 ))
tmp=$(mktemp -d)
hog_pids=() cap_pid=
cleanup() {
  stop_hogs
  [ -z "$cap_pid" ] || kill "$cap_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

command -v tcpdump >/dev/null || { echo "capture_proof: tcpdump is not on PATH" >&2; exit 1; }
[ -x "$INFERPERF" ] || { echo "capture_proof: no binary at $INFERPERF (INFERPERF=...)" >&2; exit 1; }

start_hogs() {
  local i
  for ((i = 0; i < $1; i++)); do
    taskset -c 0 timeout "$HOG_S" bash -c 'while :; do :; done' &
    hog_pids+=($!)
  done
}
stop_hogs() {
  local p
  for p in "${hog_pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  hog_pids=()
}

# start_capture PORT FILE: tcpdump on lo for PORT, ready when it says it is listening.
start_capture() {
  taskset -c "$last" tcpdump -i lo --time-stamp-precision=nano -B "$BUF_KIB" -n -w "$2" \
    "tcp port $1" 2>"$2.err" &
  cap_pid=$!
  local _
  for _ in $(seq 100); do grep -q 'listening on' "$2.err" 2>/dev/null && return 0; sleep 0.05; done
  echo "capture_proof: tcpdump did not start: $(cat "$2.err")" >&2
  return 1
}
# stop_capture FILE: stops tcpdump by its PID and prints the packets it dropped. It waits
# 1.5 s first: tcpdump reads the kernel's capture ring a block at a time, a block is handed
# over when full or after 1 s, and tcpdump leaves the block it has not been handed on SIGINT.
stop_capture() {
  sleep 1.5
  kill -INT "$cap_pid" 2>/dev/null
  wait "$cap_pid" 2>/dev/null
  cap_pid=
  awk '/dropped by/ { n += $1 } END { print n + 0 }' "$1.err"
}

# keep PATH...: moves the run's files into KEEP (when set, with the client's output from stdin)
# or removes them.
keep() {
  if [ -n "${KEEP:-}" ]; then
    mkdir -p "$KEEP" && mv "$@" "$KEEP/" && cat >"$KEEP/$(basename "$1").out"
  else
    rm -rf "$@"
  fi
}

# row LABEL JSON DROPS: one table row from the analyser's JSON.
row() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
label, doc, drops = sys.argv[1], sys.argv[2], int(sys.argv[3])
if drops:
    print(f"| {label} | refused: tcpdump dropped {drops} packets | | | | | | |")
    sys.exit()
try:
    v = json.loads(doc)
except ValueError:
    print(f"| {label} | analysis failed: {doc.strip()[:120]} | | | | | | |")
    sys.exit()
f = lambda k: f"{v[k]:.1f}" if v.get(k) is not None else "n/a"
n = f"{v['matched']}/{v.get('export_answered', v['export_requests'])}"
print(f"| {label} | {n} | {f('wire_p50_us')} | {f('p50_us')} | {f('p99_us')} | {f('max_us')} |"
      f" {f('send_p99_us')} | {f('recv_p99_us')} |")
PY
}

requests_table() {
  local port proto c n hog tool pcap exp_file out drops json label
  echo "Client-side latency error against the wire (µs; client latency - capture latency):"
  echo
  echo "| cell | matched | wire p50 | error p50 | error p99 | error max | send part p99 | receive part p99 |"
  echo "|---|---|---|---|---|---|---|---|"
  taskset -c "$last" bash "$ROOT/benches/peers/nginx.sh" start >/dev/null || exit 1
  for proto in $PROTOS; do
    port=${NGINX_PORT:-18090}
    [ "$proto" = grpc ] && port=${NGINX_GRPC_PORT:-18091}
    for c in 1 16; do
      n=$C1_COUNT
      [ "$c" = 16 ] && n=$C16_COUNT
      for hog in $HOGS; do
        for tool in $TOOLS; do
          pcap=$tmp/$proto-$c-$hog-$tool.pcap exp_file=$tmp/$proto-$c-$hog-$tool.json
          local cmd=("$INFERPERF")
          case $tool in
            before) cmd+=(--no-kernel-rx-stamps) ;;
            pa) cmd=("$PA") ;;
          esac
          start_capture "$port" "$pcap" || exit 1
          start_hogs "$hog"
          out=$(timeout 300 taskset -c 0 "${cmd[@]}" -m identity -u "127.0.0.1:$port" -i "$proto" \
            --sync --concurrency-range "$c" --request-count "$n" --profile-export-file "$exp_file" 2>&1)
          stop_hogs
          drops=$(stop_capture "$pcap")
          json=$(python3 "$ANALYSE" requests --pcap "$pcap" --port "$port" --proto "$proto" \
            --export "$exp_file" --json 2>&1)
          label="$proto c$c hog $hog $tool"
          [ -s "$exp_file" ] || json="no export: $(tail -2 <<<"$out" | tr '\n' ' ')"
          row "$label" "$json" "$drops"
          echo "$label $json drops=$drops" >>"$tmp/detail"
          keep "$pcap" "$exp_file" <<<"$out"
        done
      done
    done
  done
  bash "$ROOT/benches/peers/nginx.sh" stop
  echo
  echo "Details (analyser output per cell):"
  sed 's/^/    /' "$tmp/detail"
}

llm_table() {
  local port=${PORT:-18577} s pcap art exp_file drops json serve_pid out
  echo "profile --streaming (TTFT ${LLM_TTFT_MS} ms, ITL ${LLM_ITL_MS} ms, $LLM_OSL tokens): chunk time in the export - capture time of its last byte (µs), $LLM_HOGS busy loops on the client's core:"
  echo
  echo "| streams | requests matched | chunks matched | error p50 | error p99 | error max | first-chunk p99 |"
  echo "|---|---|---|---|---|---|---|"
  ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
  for s in $STREAMS; do
    taskset -c "$last" "$INFERPERF" serve --port "$port" --grpc-port 0 --duration 300 \
      --openai-ttft "${LLM_TTFT_MS}ms" --openai-itl "${LLM_ITL_MS}ms" >/dev/null 2>"$tmp/serve.err" &
    serve_pid=$!
    sleep 1
    pcap=$tmp/llm-$s.pcap art=$tmp/art-$s
    start_capture "$port" "$pcap" || exit 1
    start_hogs "$LLM_HOGS"
    out=$(timeout 280 taskset -c 0 "$INFERPERF" profile -m inferperf-llm -u "127.0.0.1:$port" \
      --streaming --max-workers 1 --concurrency "$s" --request-count "$s" \
      --output-tokens-mean "$LLM_OSL" --synthetic-input-tokens-mean 16 --tokenizer cl100k_base \
      --artifact-dir "$art" 2>&1)
    stop_hogs
    drops=$(stop_capture "$pcap")
    kill "$serve_pid" 2>/dev/null; wait "$serve_pid" 2>/dev/null
    exp_file=$(find "$art" -name profile_export.json | head -1)
    if [ "$drops" != 0 ]; then
      echo "| $s | refused: tcpdump dropped $drops packets | | | | | |"
    elif [ -z "$exp_file" ]; then
      echo "| $s | no export: $(tail -2 <<<"$out" | tr '\n' ' ') | | | | | |"
    else
      json=$(python3 "$ANALYSE" chunks --pcap "$pcap" --port "$port" --export "$exp_file" --json 2>&1)
      python3 - "$s" "$json" <<'PY'
import json, sys
s, doc = sys.argv[1], sys.argv[2]
try:
    v = json.loads(doc)
except ValueError:
    print(f"| {s} | analysis failed: {doc.strip()[:120]} | | | | | |")
    sys.exit()
f = lambda k: f"{v[k]:.1f}" if v.get(k) is not None else "n/a"
print(f"| {s} | {v['matched']}/{v['export_requests']} | {v['chunks'] - v['unmatched_chunks']}/{v['chunks']}"
      f" | {f('p50_us')} | {f('p99_us')} | {f('max_us')} | {f('first_p99_us')} |")
PY
      echo "llm $s $json drops=$drops $(grep -o 'Chunks timed by a shared read: [0-9]*' <<<"$out")" >>"$tmp/llm-detail"
    fi
    keep "$pcap" "$art" <<<"$out"
  done
  echo
  echo "Details:"
  sed 's/^/    /' "$tmp/llm-detail" 2>/dev/null
}

case ${1:-all} in
  requests) requests_table ;;
  llm) llm_table ;;
  all) requests_table; echo; llm_table ;;
  *) sed -n 2,29p "$0" >&2; exit 2 ;;
esac
