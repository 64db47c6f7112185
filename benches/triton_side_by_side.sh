#!/usr/bin/env bash
# inferperf and the real perf_analyzer, side by side on a real Triton (CPU, python backend),
# for each model of benches/peers/triton.sh and each service kind (HTTP, gRPC, C API).
# Prints a markdown table: throughput, p50/p99 latency, windows to stability, the median idle
# gap (a request's last response to the same connection's next send, from the profile
# export), export requests and responses, CSV header equality, how each run ended, and the
# export fields that only one of the two tools writes (benches/export_shape.py).
#
#   bash benches/triton_side_by_side.sh [MODEL ...]   (from the repo root)
#
# Env: TRITON (the folder of `benches/peers/triton.sh setup`, default INFERPERF_PEERS/triton),
# PA (the wrapper benches/peers/perf_analyzer.sh prints, default
# INFERPERF_PEERS/bin/perf_analyzer), CONC (1: the concurrency), FLAGS (-p 2000 -s 10
# --max-trials 10), KINDS (http grpc capi). The server is started on free loopback ports and
# stopped at the end; each run is bounded by `timeout 300`.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEERS=${INFERPERF_PEERS:-$HOME/.cache/inferperf-peers}
TRITON=${TRITON:-$PEERS/triton}
PA=${PA:-$PEERS/bin/perf_analyzer}
INFERPERF=${INFERPERF:-$ROOT/target/release/inferperf}
CONC=${CONC:-1}
FLAGS=${FLAGS:--p 2000 -s 10 --max-trials 10}
KINDS=${KINDS:-http grpc capi}
MODELS=("$@")
[ ${#MODELS[@]} -gt 0 ] || MODELS=(identity simple identity_bytes repeat_int32 accumulate ensemble_identity)
[ -x "$INFERPERF" ] || (cd "$ROOT" && cargo build --release -q)
[ -x "$PA" ] || { echo "no perf_analyzer at $PA (run benches/peers/perf_analyzer.sh)" >&2; exit 1; }
# shellcheck disable=SC1091
. "$TRITON/env.sh" || { echo "no $TRITON/env.sh (run benches/peers/triton.sh setup)" >&2; exit 1; }
eval "$(TRITON_RUN_DIR=$TRITON/run-bench bash "$ROOT/benches/peers/triton.sh" start | tail -1)"
trap 'bash "$ROOT/benches/peers/triton.sh" stop "$TRITON_PID"' EXIT
OUT=$(mktemp -d)

model_flags() {   # the flags each model needs, per kind
  case "$1:$2" in
    repeat_int32:http) echo "SKIP" ;;  # decoupled: gRPC streaming or the C API only
    repeat_int32:*) echo "--shape IN:5 --async --streaming" ;;
    accumulate:*) echo "--sequence-length 6" ;;
    simple:*) echo "-b 4" ;;
    *) echo "" ;;
  esac
}

# One run: tool model kind -> a result line "thr p50 p99 windows exit".
run_one() {
  local tool=$1 model=$2 kind=$3 bin=$INFERPERF
  [ "$tool" = pa ] && bin=$PA
  local tag="$OUT/$tool-$model-$kind" target=()
  case $kind in
    http) target=(-u "127.0.0.1:$TRITON_HTTP_PORT") ;;
    grpc) target=(-i grpc -u "127.0.0.1:$TRITON_GRPC_PORT") ;;
    capi) target=(--service-kind triton_c_api --triton-server-directory "$TRITON_CAPI_DIR"
                  --model-repository "$TRITON_MODELS") ;;
  esac
  # shellcheck disable=SC2086
  LD_LIBRARY_PATH=$TRITON_LIBS timeout 300 "$bin" -m "$model" "${target[@]}" $FLAGS \
    --concurrency-range "$CONC" $(model_flags "$model" "$kind") -v \
    -f "$tag.csv" --profile-export-file "$tag.json" >"$tag.out" 2>&1
  echo $? >"$tag.rc"
}

# Reads one run's console, CSV and export: thr p50 p99 windows gap requests responses.
summarise() {
  python3 - "$1" <<'EOF'
import json, re, sys, statistics
tag = sys.argv[1]
out = open(tag + ".out", errors="replace").read()
def num(pat):
    m = re.findall(pat, out)
    return m[-1] if m else "-"
thr = num(r"Throughput: ([\d.]+) infer/sec")
p50 = num(r"p50 latency: (\d+) usec")
p99 = num(r"p99 latency: (\d+) usec")
windows = len(re.findall(r"Pass \[\d+\]", out)) or "-"
gap = reqs = resps = "-"
try:
    exp = json.load(open(tag + ".json"))["experiments"]
    rs = [r for e in exp for r in e["requests"]]
    reqs = len(rs)
    resps = sum(len(r["response_timestamps"]) for r in rs)
    rs.sort(key=lambda r: r["timestamp"])
    ends = sorted(max(r["response_timestamps"]) for r in rs if r["response_timestamps"])
    # At concurrency 1 each send follows the previous request's last response.
    gaps = [b["timestamp"] - a_end for a_end, b in zip(ends, rs[1:]) if b["timestamp"] >= a_end]
    if gaps:
        gap = "%.1f" % (statistics.median(gaps) / 1000)
except Exception:
    pass
print(thr, p50, p99, windows, gap, reqs, resps)
EOF
}

echo "| model | kind | tool | infer/s | p50 us | p99 us | windows | idle gap us | export reqs/resps | CSV header = PA | exit |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for model in "${MODELS[@]}"; do
  for kind in $KINDS; do
    [ "$(model_flags "$model" "$kind")" = SKIP ] && continue
    for tool in pa ours; do
      run_one $tool "$model" "$kind"
    done
    same=no
    if [ -s "$OUT/pa-$model-$kind.csv" ] && [ -s "$OUT/ours-$model-$kind.csv" ] &&
       [ "$(head -1 "$OUT/pa-$model-$kind.csv")" = "$(head -1 "$OUT/ours-$model-$kind.csv")" ]; then
      same=yes
    fi
    for tool in pa ours; do
      tag="$OUT/$tool-$model-$kind"
      read -r thr p50 p99 win gap reqs resps < <(summarise "$tag")
      rc=$(cat "$tag.rc")
      [ "$rc" -ge 128 ] && rc="$rc (signal $((rc - 128)))"
      name=perf_analyzer; [ $tool = ours ] && name=inferperf
      echo "| $model | $kind | $name | $thr | $p50 | $p99 | $win | $gap | $reqs/$resps | $same | $rc |"
    done
  done
done
echo
echo "Export fields only perf_analyzer writes (-) or only inferperf writes (+), per model and kind:"
echo
for f in "$OUT"/pa-*.json; do
  [ -e "$f" ] || continue
  cell=${f#"$OUT"/pa-}; cell=${cell%.json}
  [ -s "$OUT/ours-$cell.json" ] || { echo "- $cell: no inferperf export"; continue; }
  echo "- $cell: $(python3 "$ROOT/benches/export_shape.py" "$f" "$OUT/ours-$cell.json")"
done
echo
echo "runs kept in $OUT"
