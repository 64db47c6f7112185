#!/usr/bin/env bash
# Clients against `inferperf serve --fault MODE`: one markdown table row per mode and protocol,
# as in docs/faults.md ("Results"), the commands being those of its "Commands" section.
#
#   INFERPERF=target/release/inferperf bash benches/faults_side_by_side.sh
#   INFERPERF=... PA=$(bash benches/peers/perf_analyzer.sh) bash benches/faults_side_by_side.sh
#   INFERPERF=... PA=... MODES="refuse stall-head dims-big" bash benches/faults_side_by_side.sh
#
# INFERPERF (required): the inferperf binary, both the fault server and the client measured.
# PA (optional): perf_analyzer; when set, its column is measured too (else it reads "not run").
# MODES (optional): space-separated fault modes to run (default: every mode of the table).
#
# Each client run gets its own fresh server (`serve --fault MODE --port 0 --fault-ttl 45`,
# 127.0.0.1, ports read from its first stdout line) and its own temp dir, running from a/b/out
# with `-f r.csv`, under `timeout -k 5 30` and `/usr/bin/time -f %M`; inferperf also under
# `ulimit -d 4194304` and with `--request-timeout 1000`. A cell gives the exit code (or the
# signal, or "hung" when timeout killed it), wall seconds, peak RSS (**memory** above 512 MiB),
# any file written outside a/b/out or /abs/x_v1.r.csv, and the first error line (for exit 0,
# the throughput line) with control characters shown as `cat -v` shows them. The server is
# then killed by its PID. Progress goes to stderr; the table to stdout.
#
# The OpenAI modes (protocol "openai") run `inferperf profile --streaming` (its first `error:`
# line is the key) and perf_analyzer `--service-kind openai --endpoint v1/chat/completions
# --async` with one streamed chat payload as --input-data.
set -euo pipefail

: "${INFERPERF:?set INFERPERF to the inferperf binary}"
PA=${PA:-}
[ -x "$INFERPERF" ] || { echo "INFERPERF=$INFERPERF is not executable" >&2; exit 2; }
[ -z "$PA" ] || [ -x "$PA" ] || { echo "PA=$PA is not executable" >&2; exit 2; }

# HTTP: every mode but the HTTP/2-only ones (settings-flood, ping-flood, wrong-content-type,
# compressed-no-encoding) and not-protobuf (the same reply as not-json there). gRPC: every mode
# but the HTTP/1.1-only ones (interim-flood, chunk-extension-flood, huge-number, tiny-chunks)
# and not-json (the same reply as not-protobuf there).
HTTP_MODES="none refuse reset close-mid-body stall-head stall-body stall-forever drip
  wrong-content-length garbage status-500 every-nth-fails every-nth-resets not-json interim-flood
  chunk-extension-flood endless-header huge-content-length huge-headers dims-huge dims-big
  name-dotdot name-abs escape-text payload-too-large huge-number tiny-chunks"
GRPC_MODES="none refuse reset close-mid-body stall-head stall-body stall-forever drip
  wrong-content-length garbage status-500 every-nth-fails every-nth-resets not-protobuf endless-header
  huge-content-length settings-flood ping-flood huge-headers dims-huge dims-big name-dotdot
  name-abs escape-text payload-too-large wrong-content-type compressed-no-encoding"
OPENAI_MODES="sse-error-event sse-openai-error sse-vllm-error sse-not-json"
MODES=${MODES:-}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/faults.XXXXXX")
SERVER_PID=
cleanup() {
  stop_server
  rm -rf "$WORK"
}
stop_server() {
  [ -n "$SERVER_PID" ] || return 0
  kill "$SERVER_PID" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ -e /abs/x_v1.r.csv ]; then echo "/abs/x_v1.r.csv exists already; remove it first" >&2; exit 2; fi

# start_server MODE: sets SERVER_PID, HTTP_PORT, GRPC_PORT.
start_server() {
  local out=$WORK/server.out
  : >"$out"
  "$INFERPERF" serve --fault "$1" --port 0 --fault-ttl 45 >"$out" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 100); do
    if [ "$(wc -l <"$out")" -ge 1 ]; then break; fi
    sleep 0.1
  done
  HTTP_PORT=$(sed -n '1s|.* on http://127\.0\.0\.1:\([0-9]*\) .*|\1|p' "$out")
  GRPC_PORT=$(sed -n '1s|.* gRPC 127\.0\.0\.1:\([0-9]*\) .*|\1|p' "$out")
  if [ -z "$HTTP_PORT" ] || [ -z "$GRPC_PORT" ]; then
    echo "fault server ($1) did not name its ports: $(head -c 300 "$out")" >&2
    exit 1
  fi
}

human_rss() {  # KiB -> "8 MiB" / "2.0 GiB"
  awk -v k="$1" 'BEGIN { if (k >= 1048576) printf "%.1f GiB", k / 1048576;
                         else printf "%d MiB", (k + 512) / 1024 }'
}

# run_client inferperf|pa MODE http|grpc: sets CELL.
run_client() {
  local who=$1 mode=$2 proto=$3 dir log tf rc start end wall rss cell key stray url
  dir=$(mktemp -d "$WORK/run.XXXXXX")
  mkdir -p "$dir/a/b/out"
  log=$WORK/client.log tf=$WORK/time.out
  : >"$log"; : >"$tf"
  start_server "$mode"
  local args=(-m identity --request-count 20 -f r.csv)
  if [ "$proto" = http ]; then url=127.0.0.1:$HTTP_PORT; else url=127.0.0.1:$GRPC_PORT; args+=(-i grpc); fi
  if [ "$proto" = openai ]; then
    url=127.0.0.1:$HTTP_PORT
    args=(-m m --request-count 20)
  fi
  start=$(date +%s.%N)
  set +e
  if [ "$who" = inferperf ] && [ "$proto" = openai ]; then
    ( cd "$dir/a/b/out" && ulimit -d 4194304 &&
      exec /usr/bin/time -f %M -o "$tf" timeout -k 5 30 \
        "$INFERPERF" profile -u "$url" "${args[@]}" --streaming --quiet \
        --request-timeout-seconds 1 --artifact-dir art ) </dev/null >"$log" 2>&1
  elif [ "$proto" = openai ]; then
    ( cd "$dir/a/b/out" &&
      exec /usr/bin/time -f %M -o "$tf" timeout -k 5 30 \
        "$PA" -u "$url" "${args[@]}" -i http --service-kind openai \
        --endpoint v1/chat/completions --async --input-data "$WORK/chat.json" ) </dev/null >"$log" 2>&1
  elif [ "$who" = inferperf ]; then
    ( cd "$dir/a/b/out" && ulimit -d 4194304 &&
      exec /usr/bin/time -f %M -o "$tf" timeout -k 5 30 \
        "$INFERPERF" -u "$url" "${args[@]}" --request-timeout 1000 ) </dev/null >"$log" 2>&1
  else
    ( cd "$dir/a/b/out" &&
      exec /usr/bin/time -f %M -o "$tf" timeout -k 5 30 \
        "$PA" -u "$url" "${args[@]}" ) </dev/null >"$log" 2>&1
  fi
  rc=$?
  set -e
  end=$(date +%s.%N)
  stop_server
  wall=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  rss=$(tail -n 1 "$tf" | tr -dc 0-9)
  rss=${rss:-0}

  local hung=
  if [ "$rc" = 124 ] || { [ "$rc" = 137 ] && awk -v w="$wall" 'BEGIN { exit !(w >= 30) }'; }; then
    hung=1
  fi
  # The key line: for exit 0 the throughput line, else the first line that reads as an error
  # (failing that, the first line, unless timeout killed it).
  if [ "$rc" = 0 ]; then
    key=$(grep -a -m 1 'throughput' "$log" || true)
  elif [ "$proto" = openai ] && grep -a -q '^error:' "$log"; then
    key=$(grep -a -m 1 '^error:' "$log")
  else
    key=$(grep -a -i -m 1 -E 'error|fail|terminate|warning|panick|abort|out of memory' "$log" || true)
  fi
  if [ -z "$key" ] && [ -z "$hung" ]; then key=$(grep -a -m 1 . "$log" || true); fi
  key=$(printf '%s' "$key" | cat -v | cut -c 1-240 | sed 's/`/'"'"'/g; s/|/\\|/g')

  stray=$( (cd "$dir" && find . -mindepth 1 -type f ! -path './a/b/out/*' | sort | tr '\n' ' ') )
  if [ -e /abs/x_v1.r.csv ]; then stray="$stray/abs/x_v1.r.csv "; fi
  rm -rf "$dir"

  local size mem=
  size=$(human_rss "$rss")
  if [ "$rss" -gt 524288 ]; then mem=' **memory**'; fi
  if [ -n "$hung" ]; then
    cell="**hung**: killed by \`timeout 30\` ($size)$mem"
  elif [ "$rc" -gt 128 ]; then
    cell="**crashed** (terminated by signal $((rc - 128)), $wall s, $size)$mem"
  else
    cell="exit $rc ($wall s, $size)$mem"
  fi
  if [ -n "$stray" ]; then
    local f list=
    for f in $stray; do list="$list${list:+, }\`$f\`"; done
    cell="$cell; **wrote $list outside the output directory**"
  fi
  if [ -n "$key" ]; then cell="$cell: \`$key\`"; fi
  CELL=$cell
}

wanted() { [ -z "$MODES" ] || [[ " $(echo $MODES) " == *" $1 "* ]]; }

cat >"$WORK/chat.json" <<'EOF'
{"data": [{"payload": [{"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": true, "max_tokens": 8}]}]}
EOF

echo "| mode | protocol | inferperf, --request-timeout 1000 | perf_analyzer |"
echo "|---|---|---|---|"
for proto in http grpc openai; do
  case $proto in
    http) list=$HTTP_MODES ;;
    grpc) list=$GRPC_MODES ;;
    *) list=$OPENAI_MODES ;;
  esac
  for mode in $list; do
    wanted "$mode" || continue
    echo "[$(date -u +%T)] $mode $proto: inferperf" >&2
    run_client inferperf "$mode" "$proto"
    ours=$CELL
    theirs="not run (PA unset)"
    if [ -n "$PA" ]; then
      echo "[$(date -u +%T)] $mode $proto: perf_analyzer" >&2
      run_client pa "$mode" "$proto"
      theirs=$CELL
    fi
    echo "| $mode | $proto | $ours | $theirs |"
  done
done
