#!/usr/bin/env bash
# How steady the windows are: inferperf and the real perf_analyzer, alternating run by run, on
# the same real Triton (CPU, python backend), with the same flags. For each service kind and
# concurrency it prints the windows each run needed before the level was stable (`-` where it
# never was), the coefficient of variation of the windows' throughput and latency, and how
# many runs failed to stabilise.
#
#   bash benches/stability.sh        (from the repo root)
#
# Env: TRITON (the folder of `benches/peers/triton.sh setup`, default INFERPERF_PEERS/triton),
# PA (the wrapper benches/peers/perf_analyzer.sh prints, default
# INFERPERF_PEERS/bin/perf_analyzer), INFERPERF (target/release/inferperf), REPS (5 runs per
# tool and kind), KINDS (http grpc capi), MODEL (identity), FLAGS (perf_analyzer's flags for the
# levels: `--concurrency-range 1:2 -p 1000 -s 10 --max-trials 20`), OURS_FLAGS (extra flags
# for inferperf only). Each run is bounded by `timeout 300`; the server is started on free
# loopback ports and stopped at the end.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEERS=${INFERPERF_PEERS:-$HOME/.cache/inferperf-peers}
TRITON=${TRITON:-$PEERS/triton}
PA=${PA:-$PEERS/bin/perf_analyzer}
INFERPERF=${INFERPERF:-$ROOT/target/release/inferperf}
REPS=${REPS:-5}
KINDS=${KINDS:-http grpc capi}
MODEL=${MODEL:-identity}
FLAGS=${FLAGS:---concurrency-range 1:2 -p 1000 -s 10 --max-trials 20}
OURS_FLAGS=${OURS_FLAGS:-}
[ -x "$INFERPERF" ] || { echo "no inferperf at $INFERPERF (cargo build --release)" >&2; exit 1; }
[ -x "$PA" ] || { echo "no perf_analyzer at $PA (run benches/peers/perf_analyzer.sh)" >&2; exit 1; }
# shellcheck disable=SC1091
. "$TRITON/env.sh" || { echo "no $TRITON/env.sh (run benches/peers/triton.sh setup)" >&2; exit 1; }
eval "$(TRITON_RUN_DIR=$TRITON/run-stability bash "$ROOT/benches/peers/triton.sh" start | tail -1)"
trap 'bash "$ROOT/benches/peers/triton.sh" stop "$TRITON_PID"' EXIT
OUT=$(mktemp -d)

run_one() {   # tool kind rep
  local tool=$1 kind=$2 rep=$3 bin=$INFERPERF extra=$OURS_FLAGS target=()
  [ "$tool" = pa ] && { bin=$PA; extra=; }
  case $kind in
    http) target=(-u "127.0.0.1:$TRITON_HTTP_PORT") ;;
    grpc) target=(-i grpc -u "127.0.0.1:$TRITON_GRPC_PORT") ;;
    capi) target=(--service-kind triton_c_api --triton-server-directory "$TRITON_CAPI_DIR"
                  --model-repository "$TRITON_MODELS") ;;
  esac
  # shellcheck disable=SC2086
  LD_LIBRARY_PATH=$TRITON_LIBS timeout 300 "$bin" -m "$MODEL" "${target[@]}" $FLAGS $extra -v \
    >"$OUT/$tool-$kind-$rep.out" 2>&1
}

for kind in $KINDS; do
  for rep in $(seq "$REPS"); do
    for tool in pa ours; do run_one $tool "$kind" "$rep"; done
  done
done

python3 - "$OUT" "$REPS" "$KINDS" <<'EOF'
import re, statistics, sys
out, reps, kinds = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()

def levels(path):
    """[(concurrency, [(throughput, latency)], stable)] from a -v console."""
    res, cur = [], None
    for line in open(path, errors="replace"):
        m = re.match(r"Request concurrency: (\d+)", line)
        if m:
            cur = [int(m.group(1)), [], True]
            res.append(cur)
            continue
        m = re.search(r"Pass \[\d+\] throughput: ([\d.]+) infer/sec\. \S+ latency: (\d+) usec", line)
        if m and cur:
            cur[1].append((float(m.group(1)), int(m.group(2))))
        if "Failed to obtain stable" in line and cur:
            cur[2] = False
    return res

def cv(xs):
    return statistics.pstdev(xs) / statistics.mean(xs) * 100 if len(xs) > 1 and statistics.mean(xs) else 0.0

print("| kind | c | tool | windows per run | unstable runs | throughput cv % | latency cv % |")
print("|---|---|---|---|---|---|---|")
for kind in kinds:
    for tool, name in (("pa", "perf_analyzer"), ("ours", "inferperf")):
        per_c = {}
        for rep in range(1, reps + 1):
            for c, passes, stable in levels(f"{out}/{tool}-{kind}-{rep}.out"):
                per_c.setdefault(c, []).append((passes, stable))
        for c in sorted(per_c):
            runs = per_c[c]
            wins = " ".join(str(len(p)) if s else "-" for p, s in runs)
            bad = sum(1 for _, s in runs if not s)
            tcv = statistics.mean(cv([t for t, _ in p]) for p, _ in runs)
            lcv = statistics.mean(cv([l for _, l in p]) for p, _ in runs)
            print(f"| {kind} | {c} | {name} | {wins} | {bad}/{len(runs)} | {tcv:.1f} | {lcv:.1f} |")
print(f"\nruns kept in {out}")
EOF
