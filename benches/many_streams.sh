#!/usr/bin/env bash
# Thousands of concurrent LLM streams against the reference server: TTFT as reported, the
# client's CPU, and the kernel's listen-queue overflows and SYN retransmits during the run.
#
#   bash benches/many_streams.sh 2048 4096 10000
#   OLD=/path/to/older/inferperf bash benches/many_streams.sh 2048    # the same with another build
#
# Server: `inferperf serve` pinned to the last core (TTFT 50 ms, ITL 5 ms, one token per
# chunk); client: `inferperf profile --max-workers 1` pinned to core 0, one request of
# OSL output tokens per stream. The nstat counters are system-wide: other load on the
# machine shows in them too.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
INFERPERF=${INFERPERF:-$ROOT/target/release/inferperf}
BIN=${OLD:-$INFERPERF}
OSL=${OSL:-16}
PORT=${PORT:-18577}
levels=${*:-"2048 4096"}
last=$(( $(nproc) - 1 ))
counters() { nstat -az TcpExtListenOverflows TcpExtTCPSynRetrans | awk '/^TcpExt/ {printf "%s ", $2}'; }
tmp=$(mktemp -d)
echo "| streams | ok requests | TTFT p50 ms | TTFT p99 ms | TTFT max ms | listen overflows | SYN retransmits | client CPU s | connect line |"
echo "|---|---|---|---|---|---|---|---|---|"
for c in $levels; do
  "$BIN" serve --port "$PORT" --grpc-port 0 --pin "$last" --duration 300 \
    --openai-ttft 50ms --openai-itl 5ms >/dev/null 2>"$tmp/serve.err" &
  serve_pid=$!
  sleep 1
  read -r ov0 sr0 <<<"$(counters)"
  out=$(timeout 240 taskset -c 0 /usr/bin/time -f "TIME %U %S" "$BIN" profile -m inferperf-llm \
        -u "127.0.0.1:$PORT" --streaming --max-workers 1 --concurrency "$c" \
        --request-count "$c" --output-tokens-mean "$OSL" --synthetic-input-tokens-mean 16 \
        --tokenizer cl100k_base --artifact-dir "$tmp/art" 2>&1)
  read -r ov1 sr1 <<<"$(counters)"
  kill "$serve_pid" 2>/dev/null; wait "$serve_pid" 2>/dev/null
  stats=$(python3 - "$tmp/art" <<'PY'
import glob, json, sys
f = sorted(glob.glob(sys.argv[1] + "/**/profile_export_genai_perf.json", recursive=True))
if not f:
    print("0 n/a n/a n/a")
    sys.exit()
v = json.load(open(f[-1]))
t = v["time_to_first_token"]
ok = int(v["request_count"]["avg"]) - int(v.get("error_request_count", {}).get("avg", 0))
print(ok, *(f"{t[k]:.2f}" for k in ("p50", "p99", "max")))
PY
)
  read -r ok p50 p99 max <<<"$stats"
  cpu=$(awk '/^TIME/ {print $2 + $3}' <<<"$out")
  conn=$(grep -o 'Connections: .*' <<<"$out" || echo "(none)")
  err=$(grep -m1 -i 'error' <<<"$out")
  echo "| $c | $ok | $p50 | $p99 | $max | $((ov1 - ov0)) | $((sr1 - sr0)) | $cpu | $conn ${err:+($err)} |"
  rm -rf "$tmp/art"
done
rm -rf "$tmp"
