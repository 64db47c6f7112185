#!/usr/bin/env bash
# Client CPU per streamed token and per request: inferperf profile beside AIPerf, GenAI-Perf
# (which drives perf_analyzer) and a bare Python aiohttp client (benches/llm_aiohttp.py), all
# against GuideLLM's mock OpenAI server, one client after the other, same load.
#
#   bash benches/peers/llm.sh all                # once
#   bash benches/llm_peers.sh [STREAMS...]       # default: 8 64
#
# Environment: INFERPERF_PEERS (the install folder of benches/peers/llm.sh, default
# ~/.cache/inferperf-peers: guidellm-venv, aiperf-venv, genai-cli-venv, genai-tokenizer), PER_STREAM
# (requests per stream, default 16), OSL (256), TTFT_MS (5), ITL_MS (1), TOOLS (default
# "inferperf aiperf genai-perf python"), PORT (18390). The server runs on the last core, every
# client on core 0. CPU is user + system of the client's whole process tree (GNU time counts
# every waited-for child), start-up included; tokens are the ones the server sent (requests x
# OSL). Loopback only; the server is stopped by PID at the end.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
INFERPERF=${INFERPERF:-$ROOT/target/release/inferperf}
PEERS=${INFERPERF_PEERS:-$HOME/.cache/inferperf-peers}
PER_STREAM=${PER_STREAM:-16}
OSL=${OSL:-256}
TTFT_MS=${TTFT_MS:-5}
ITL_MS=${ITL_MS:-1}
PORT=${PORT:-18390}
TOOLS=${TOOLS:-"inferperf aiperf genai-perf python"}
TOK=$PEERS/genai-tokenizer/guidellm-mock
MODEL=mock-llm
levels=${*:-"8 64"}
last=$(( $(nproc) - 1 ))
[ -x "$INFERPERF" ] || (cd "$ROOT" && cargo build --release -q)
[ -d "$TOK" ] || { echo "no tokenizer at $TOK: run benches/peers/llm.sh genai-perf"; exit 1; }

tmp=$(mktemp -d)
taskset -c "$last" "$PEERS/guidellm-venv/bin/guidellm" mock-server --host 127.0.0.1 \
  --port "$PORT" --model "$MODEL" --ttft-ms "$TTFT_MS" --itl-ms "$ITL_MS" \
  --output-tokens "$OSL" >"$tmp/mock.log" 2>&1 &
mock=$!
trap 'kill $mock 2>/dev/null' EXIT
up=
for _ in $(seq 150); do
  curl -s -o /dev/null "http://127.0.0.1:$PORT/v1/models" && { up=1; break; }
  kill -0 $mock 2>/dev/null || break
  sleep 0.2
done
[ -n "$up" ] || { echo "the mock server did not start: $tmp/mock.log"; exit 1; }
URL=127.0.0.1:$PORT

# Runs "$@" on core 0 under GNU time; prints the CPU seconds (user + system).
cpu_of() {
  local log=$1; shift
  taskset -c 0 /usr/bin/time -o "$log.time" -f "%U %S" "$@" >"$log" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || { echo "FAILED rc=$rc: $* (log $log)" >&2; tail -5 "$log" >&2; }
  awk '{print $1 + $2}' "$log.time" | tail -1
}

run_tool() {
  local tool=$1 c=$2 n=$3 log=$tmp/$1-$2
  case $tool in
    inferperf)
      cpu_of "$log" "$INFERPERF" profile -m "$MODEL" -u "$URL" --endpoint-type chat --streaming \
        --concurrency "$c" --request-count "$n" --synthetic-input-tokens-mean 64 \
        --output-tokens-mean "$OSL" --tokenizer "$TOK" --max-workers 1 --quiet \
        --artifact-dir "$tmp/art-inferperf" ;;
    aiperf)
      cpu_of "$log" "$PEERS/aiperf-venv/bin/aiperf" profile --model "$MODEL" --url "$URL" \
        --endpoint-type chat --streaming --concurrency "$c" --request-count "$n" \
        --synthetic-input-tokens-mean 64 --output-tokens-mean "$OSL" --tokenizer "$TOK" \
        --ui-type none --artifact-dir "$tmp/art-aiperf" ;;
    genai-perf)
      PATH=$PEERS/bin:$PATH HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 cpu_of "$log" \
        "$PEERS/genai-cli-venv/bin/genai-perf" profile -m "$MODEL" -u "$URL" \
        --endpoint-type chat --streaming --concurrency "$c" --request-count "$n" \
        --synthetic-input-tokens-mean 64 --output-tokens-mean "$OSL" --tokenizer "$TOK" \
        --artifact-dir "$tmp/art-genai" ;;
    python)
      cpu_of "$log" "$PEERS/aiperf-venv/bin/python" "$ROOT/benches/llm_aiohttp.py" \
        "http://$URL/v1/chat/completions" "$MODEL" "$c" "$n" "$OSL" ;;
  esac
}

echo "| streams | requests | tokens | tool | CPU s | µs/token | µs/request | vs inferperf |"
echo "|---|---|---|---|---|---|---|---|"
for c in $levels; do
  n=$(( c * PER_STREAM ))
  tokens=$(( n * OSL ))
  base=
  for tool in $TOOLS; do
    cpu=$(run_tool "$tool" "$c" "$n")
    [ -n "$cpu" ] || continue
    per_tok=$(awk -v s="$cpu" -v t="$tokens" 'BEGIN {printf "%.2f", s * 1e6 / t}')
    per_req=$(awk -v s="$cpu" -v r="$n" 'BEGIN {printf "%.0f", s * 1e6 / r}')
    [ "$tool" = inferperf ] && base=$cpu
    ratio=$([ -n "$base" ] && awk -v a="$cpu" -v b="$base" 'BEGIN {printf "%.1fx", a / b}')
    echo "| $c | $n | $tokens | $tool | $cpu | $per_tok | $per_req | $ratio |"
  done
done
[ -n "${KEEP:-}" ] && echo "logs: $tmp" || rm -rf "$tmp"
