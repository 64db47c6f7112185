# shellcheck shell=bash
# Shared by cpu_ab.sh and llm_cpu_ab.sh (sourced, not run): the reference server of the after
# build on the last core, the CPU reading of one client run, and the alternation of the two
# builds. The sourcing script sets BEFORE, AFTER, ROUNDS and RUN_TIMEOUT and defines
# `run BINARY CASE`, which prints one figure.

# Starts `AFTER serve` with the arguments given, pinned to the last core; stops it (by PID) and
# removes the scratch folder $tmp on exit. $1: what to name when it does not start.
ab_start_server() {
  local what=$1
  shift
  "$AFTER" serve --pin $(( $(nproc) - 1 )) "$@" >/dev/null 2>&1 &
  serve_pid=$!
  tmp=$(mktemp -d)
  trap 'kill $serve_pid 2>/dev/null; wait $serve_pid 2>/dev/null; rm -rf "$tmp"' EXIT
  sleep 1
  kill -0 $serve_pid 2>/dev/null || { echo "the server did not start ($what in use?)"; exit 1; }
}

# Runs the command in argv[3:] with its output in argv[1] and writes its CPU seconds, user +
# system from getrusage (microseconds, where GNU time prints hundredths), to argv[2]. The
# difference of two readings leaves out what the interpreter's launcher spent before.
CPU_OF='import resource, subprocess, sys
r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(sys.argv[1], "wb") as out:
    rc = subprocess.call(sys.argv[3:], stdout=out, stderr=subprocess.STDOUT)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = r.ru_utime + r.ru_stime - r0.ru_utime - r0.ru_stime
open(sys.argv[2], "w").write("%.6f\n" % cpu)
sys.exit(rc)'

# Client CPU seconds of one command (its output in $tmp/out) into $tmp/cpu, bounded by
# RUN_TIMEOUT, on core 0.
ab_cpu_of() {
  timeout "$RUN_TIMEOUT" python3 -c "$CPU_OF" "$tmp/out" "$tmp/cpu" taskset -c 0 "$@"
}

# "mean min max" of the numbers given.
ab_stats() {
  printf '%s\n' "$@" | awk 'NR == 1 { lo = $1; hi = $1 } { s += $1; lo = $1 < lo ? $1 : lo;
    hi = $1 > hi ? $1 : hi } END { printf "%.3f %.3f %.3f", s / NR, lo, hi }'
}

# The two builds alternately ROUNDS times on case $1: "before-mean min max after-mean min max".
ab_alternate() {
  local bs=() as=() b a
  for _ in $(seq "$ROUNDS"); do
    b=$(run "$BEFORE" "$1") || exit 1
    a=$(run "$AFTER" "$1") || exit 1
    bs+=("$b")
    as+=("$a")
  done
  echo "$(ab_stats "${bs[@]}") $(ab_stats "${as[@]}")"
}
