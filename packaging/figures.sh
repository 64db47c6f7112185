#!/usr/bin/env bash
# Prints the figures of the packaged binary that benches/README.md gives: wheel and tarball
# size, binary size, the newest glibc symbol version it needs, its DT_NEEDED libraries and
# RPATH/RUNPATH, and start-up time (`--version`, `demo --help`: RUNS runs each, CPU per run
# and wall time). Run after packaging/wheel.sh; BINARY defaults to the one the wheel holds.
#
#   bash packaging/figures.sh [BINARY]        RUNS=20 by default
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
case $TARGET_DIR in /*) ;; *) TARGET_DIR=$ROOT/$TARGET_DIR ;; esac
bin=${1:-$TARGET_DIR/x86_64-unknown-linux-gnu/dist/inferperf}
runs=${RUNS:-20}
[ -x "$bin" ] || { echo "no binary at $bin (run packaging/wheel.sh first)" >&2; exit 2; }
for f in "$TARGET_DIR"/wheels/inferperf-*.whl "$TARGET_DIR"/wheels/inferperf-*.tar.gz; do
  [ -f "$f" ] && echo "$(basename "$f"): $(stat -c %s "$f") bytes"
done
echo "binary $bin: $(stat -c %s "$bin") bytes"
readelf -S "$bin" | grep -q "\.symtab" && echo "  (not stripped: it has .symtab)"
echo "glibc needed: $(bash "$ROOT/packaging/glibc_needed.sh" "$bin")"
echo "NEEDED: $(readelf -d "$bin" | awk '/\(NEEDED\)/ {gsub(/[][]/, "", $NF); printf "%s ", $NF}')"
echo "RPATH/RUNPATH: $(readelf -d "$bin" | grep -cE '\((RPATH|RUNPATH)\)' || true)"
# RUNS runs of each command after one warm-up: CPU (user + sys) per run, and wall time.
python3 - "$bin" "$runs" <<'PY'
import resource, subprocess, sys, time

exe, runs = sys.argv[1], int(sys.argv[2])
for args in (["--version"], ["demo", "--help"]):
    subprocess.run([exe] + args, capture_output=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    walls = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([exe] + args, capture_output=True)
        walls.append(time.perf_counter() - t0)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) / runs
    walls.sort()
    print(f"start-up `inferperf {' '.join(args)}` ({runs} runs): CPU {cpu * 1e3:.1f} ms/run, "
          f"wall min {walls[0] * 1e3:.1f} ms, median {walls[runs // 2] * 1e3:.1f} ms")
PY
