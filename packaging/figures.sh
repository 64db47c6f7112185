#!/usr/bin/env bash
# Prints the figures of the packaged binary that benches/README.md gives: wheel and tarball
# size, binary size, the newest glibc symbol version it needs, its DT_NEEDED libraries and
# RPATH/RUNPATH, and start-up time (`--version`, `demo --help`: RUNS runs each, median and
# mean wall time). Run after packaging/wheel.sh; BINARY defaults to the one the wheel holds.
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
if file "$bin" 2>/dev/null | grep -q 'not stripped'; then echo "  (not stripped)"; fi
echo "glibc needed: $(bash "$ROOT/packaging/glibc_needed.sh" "$bin")"
echo "NEEDED: $(readelf -d "$bin" | awk '/\(NEEDED\)/ {gsub(/[][]/, "", $NF); printf "%s ", $NF}')"
echo "RPATH/RUNPATH: $(readelf -d "$bin" | grep -cE '\((RPATH|RUNPATH)\)' || true)"
# Wall time of one run in microseconds.
once() {
  local t0 t1
  t0=$(date +%s%N)
  "$@" >/dev/null 2>&1
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000))
}
for args in "--version" "demo --help"; do
  # shellcheck disable=SC2086
  once "$bin" $args >/dev/null # warm the page cache
  samples=$(for _ in $(seq "$runs"); do once "$bin" $args; done | sort -n)
  echo "start-up \`inferperf $args\` ($runs runs): $(echo "$samples" | awk '
    { v[NR] = $1; s += $1 }
    END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
          printf "median %.1f ms, mean %.1f ms, min %.1f ms, max %.1f ms", m / 1000, s / NR / 1000, v[1] / 1000, v[NR] / 1000 }')"
done
