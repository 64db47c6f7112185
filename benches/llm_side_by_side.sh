#!/usr/bin/env bash
# Client CPU per streamed token: inferperf profile vs a Python aiohttp client
# (benches/llm_aiohttp.py, the way vLLM bench / AIPerf read streams), same server, same load.
#
#   PY=/path/to/python-with-aiohttp bash benches/llm_side_by_side.sh [CONCURRENCY...]
#
# The reference server (`inferperf serve`, TTFT 50 ms, ITL 5 ms, one token per chunk) runs on
# the last core, each client on core 0, one after the other, REQUESTS requests of OSL tokens.
# Prints a markdown table: whole-process CPU (user+sys from /usr/bin/time) per output token
# for both clients, inferperf's load-worker CPU per token as it reports it, the ratio, and
# TTFT p99 as each client measured it. Loopback only; the server stops by itself.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
INFERPERF=${INFERPERF:-$ROOT/target/release/inferperf}
PY=${PY:-python3}
OSL=${OSL:-64}
PORT=${PORT:-18290}
levels=${*:-"16 64 256"}
last=$(( $(nproc) - 1 ))
[ -x "$INFERPERF" ] || (cd "$ROOT" && cargo build --release -q)
"$PY" -c 'import aiohttp' 2>/dev/null || { echo "needs aiohttp: PY=... (python -m venv v && v/bin/pip install aiohttp)"; exit 1; }
"$INFERPERF" serve --port "$PORT" --grpc-port 0 --pin "$last" --duration 1800 \
  --openai-ttft 50ms --openai-itl 5ms >/dev/null &
serve_pid=$!
trap 'kill $serve_pid 2>/dev/null' EXIT
sleep 1
tmp=$(mktemp -d)
echo "| streams | requests | tokens | Python CPU us/token | inferperf CPU us/token (process) | inferperf load-worker us/token | ratio (process) | Python TTFT p99 ms | inferperf TTFT p99 ms |"
echo "|---|---|---|---|---|---|---|---|---|"
for c in $levels; do
  n=${REQUESTS:-$(( c * 8 ))}
  py=$(taskset -c 0 "$PY" "$ROOT/benches/llm_aiohttp.py" "http://127.0.0.1:$PORT/v1/chat/completions" inferperf-llm "$c" "$n" "$OSL")
  py_cpu=$(sed -n 's/.*cpu_us_per_token=\([^ ]*\).*/\1/p' <<<"$py")
  py_ttft=$(sed -n 's/.*ttft_p99_ms=\([^ ]*\).*/\1/p' <<<"$py")
  out=$(taskset -c 0 /usr/bin/time -f "TIME %U %S" "$INFERPERF" profile -m inferperf-llm \
        -u "127.0.0.1:$PORT" --streaming --quiet --max-workers 1 --concurrency "$c" \
        --request-count "$n" --output-tokens-mean "$OSL" --synthetic-input-tokens-mean 64 \
        --tokenizer cl100k_base --artifact-dir "$tmp/art" 2>&1)
  cpu=$(awk '/^TIME/ {print $2 + $3}' <<<"$out")
  tokens=$(( n * OSL ))
  ours=$(awk -v c="$cpu" -v t="$tokens" 'BEGIN {printf "%.2f", c * 1e6 / t}')
  worker=$(sed -n 's/.*(\([0-9.]*\) us per output token.*/\1/p' <<<"$out")
  ttft=$(awk -F'│' '/Time To First Token/ {gsub(/ /, "", $6); print $6}' <<<"$out")
  ratio=$(awk -v a="$py_cpu" -v b="$ours" 'BEGIN {printf "%.1f", a / b}')
  echo "| $c | $n | $tokens | $py_cpu | $ours | $worker | ${ratio}x | $py_ttft | $ttft |"
done
rm -rf "$tmp"
