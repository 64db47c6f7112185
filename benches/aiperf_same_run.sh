#!/usr/bin/env bash
# Every metric of `profile_export_aiperf.json`, inferperf against AIPerf 0.13, on the same
# command line against the same server, one after the other.
#
#   bash benches/peers/llm.sh aiperf && bash benches/peers/llm.sh genai-perf   # once
#   bash benches/aiperf_same_run.sh [EXTRA AIPERF FLAGS...]
#
# The reference server (`inferperf serve`, TTFT 20 ms, ITL 2 ms) runs on the last core; each
# client runs on core 0 with the command line below plus EXTRA, unchanged but for the program
# name: streaming chat, concurrency 4, 200 requests, 128 input and 64 output tokens, the BERT
# tokenizer that benches/peers/llm.sh unpacks. Prints a markdown table (benches/aiperf_compare.py)
# of every key either export holds: AIPerf's value, ours, and the difference. Loopback only;
# the server stops by itself. Below the table: the inter-token latency the server itself
# logged writing each client's chunks (GET /v1/inferperf/token-log), the truth both clients'
# ITL is measured against.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEERS=${INFERPERF_PEERS:-${HOME:-/tmp}/.cache/inferperf-peers}
INFERPERF=${INFERPERF:-$ROOT/target/perf/inferperf}
AIPERF=${AIPERF:-$PEERS/aiperf-venv/bin/aiperf}
TOKENIZER=${TOKENIZER:-$PEERS/genai-tokenizer/minilm-bert}
PORT=${PORT:-18391}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
last=$(( $(nproc) - 1 ))
[ -x "$AIPERF" ] || { echo "AIPerf is not installed: bash benches/peers/llm.sh aiperf"; exit 1; }
[ -f "$TOKENIZER/tokenizer.json" ] || { echo "no tokenizer: bash benches/peers/llm.sh genai-perf"; exit 1; }
[ -x "$INFERPERF" ] || (cd "$ROOT" && cargo build --profile perf -q)
# serve: a fresh reference server for one client, so its token log holds that client's requests.
serve() {
  taskset -c "$last" "$INFERPERF" serve --port "$PORT" --grpc-port 0 --duration 900 \
    --openai-ttft "${TTFT:-20ms}" --openai-itl "${ITL:-2ms}" >/dev/null &
  serve_pid=$!
  sleep 1
}
# token_log NAME: keeps the server's own write times of every chunk, then stops the server.
token_log() {
  curl -s "http://127.0.0.1:$PORT/v1/inferperf/token-log" >"$OUT/$1.token-log.json"
  kill "$serve_pid" 2>/dev/null; wait "$serve_pid" 2>/dev/null || true
}
trap 'kill $serve_pid 2>/dev/null' EXIT
args=(profile --model inferperf-llm --url "127.0.0.1:$PORT" --endpoint-type chat --streaming
      --concurrency "${CONCURRENCY:-4}" --request-count "${REQUESTS:-200}"
      --synthetic-input-tokens-mean 128 --synthetic-input-tokens-stddev 0
      --output-tokens-mean 64 --output-tokens-stddev 0 --extra-inputs ignore_eos:true
      --tokenizer "$TOKENIZER" --random-seed 7 "$@")
# AIPerf loads a tokenizer path only with the offline switches unset; no GPU, no server metrics.
serve
env -u HF_HUB_OFFLINE -u TRANSFORMERS_OFFLINE taskset -c 0 "$AIPERF" "${args[@]}" \
  --ui-type none --no-server-metrics --artifact-dir "$OUT/aiperf" >"$OUT/aiperf.log" 2>&1 \
  || { tail -20 "$OUT/aiperf.log"; exit 1; }
token_log aiperf
serve
taskset -c 0 "$INFERPERF" "${args[@]}" --ui-type none --no-server-metrics \
  --artifact-dir "$OUT/inferperf" >"$OUT/inferperf.log" 2>&1 \
  || { tail -20 "$OUT/inferperf.log"; exit 1; }
token_log inferperf
echo "command: aiperf ${args[*]} --ui-type none --no-server-metrics --artifact-dir DIR"
echo "outputs: $OUT"
python3 "$ROOT/benches/aiperf_compare.py" "$OUT/aiperf/profile_export_aiperf.json" \
  "$OUT/inferperf/profile_export_aiperf.json" avg "$OUT/aiperf.token-log.json" \
  "$OUT/inferperf.token-log.json"
