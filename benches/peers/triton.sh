#!/usr/bin/env bash
# A real Triton Inference Server 2.51 on the CPU, with libtritonserver.so for the C API path.
#
#   bash benches/peers/triton.sh setup        # once; prints the path of its env.sh last
#   eval "$(bash benches/peers/triton.sh start | tail -1)"   # TRITON_PID and *_PORT
#   bash benches/peers/triton.sh stop [PID]
#
# Everything lives in TRITON (default INFERPERF_PEERS/triton). `setup` takes tritonserver,
# libtritonserver.so and the python backend from the `nvidia-pytriton` wheel (PYTRITON,
# default 0.7.0, which bundles Triton 2.51; no GPU needed, NVML warnings in the log are
# harmless), picks the python backend stub built for the system python (whose libpython and
# numpy come from Debian: libpython3.X, python3-numpy), copies the model repository of
# benches/peers/triton/models and writes TRITON/env.sh:
#   TRITONSERVER, TRITON_BACKENDS, TRITON_MODELS, TRITON_LIBS (LD_LIBRARY_PATH for
#   --service-kind triton_c_api) and TRITON_CAPI_DIR (--triton-server-directory: lib/ and
#   backends/).
# Models: identity (FP32[16]), identity_b, ensemble_identity (identity then identity_b),
# simple (INT32[16] x2 -> sum and difference, batch 8), identity_bytes (BYTES[1]),
# repeat_int32 (decoupled: one response per input element), accumulate (sequence batcher,
# 8 slots, running sum per sequence).
#
# `start` runs tritonserver in the background on free loopback ports (or TRITON_HTTP_PORT,
# TRITON_GRPC_PORT, TRITON_METRICS_PORT), waits until it is ready and prints
#   TRITON_PID=... TRITON_HTTP_PORT=... TRITON_GRPC_PORT=... TRITON_METRICS_PORT=...
# The pid is that of `timeout`, which ends the server after TRITON_TTL seconds (3600).
# TRITON_MODELS overrides the model repository, TRITON_ARGS adds tritonserver flags, and the
# log goes to TRITON_RUN_DIR (TRITON/run).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
TRITON=${TRITON:-$PEERS/triton}
PYTRITON=${PYTRITON:-0.7.0}
SYSTEM_PYTHON=${SYSTEM_PYTHON:-/usr/bin/python3}
run_dir=${TRITON_RUN_DIR:-$TRITON/run}

setup() {
  [ -x "$SYSTEM_PYTHON" ] || die "no $SYSTEM_PYTHON: the python backend embeds the system python"
  local pyver wheel_dir server stub lib
  pyver=$("$SYSTEM_PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  apt_missing "libpython$pyver" python3-numpy
  wheel_dir=$TRITON/pytriton-$PYTRITON
  server=$wheel_dir/pytriton/tritonserver
  if [ ! -x "$server/bin/tritonserver" ]; then
    unpack_wheel "$(wheel_get "nvidia-pytriton==$PYTRITON" manylinux_2_35_x86_64)" "$wheel_dir"
  fi
  chmod +x "$server/bin/tritonserver" "$server"/python_backend_stubs/*/triton_python_backend_stub
  stub=$server/python_backend_stubs/$pyver/triton_python_backend_stub
  [ -x "$stub" ] || die "nvidia-pytriton $PYTRITON has no python backend stub for Python $pyver"
  cp "$stub" "$server/backends/python/triton_python_backend_stub"
  lib=$(first "$wheel_dir"/nvidia_pytriton.libs/libtritonserver-*.so)

  mkdir -p "$TRITON/capi/lib"
  ln -sfn "$lib" "$TRITON/capi/lib/libtritonserver.so"
  ln -sfn "$server/backends" "$TRITON/capi/backends"
  rm -rf "$TRITON/models"
  cp -r "$PEERS_SRC/triton/models" "$TRITON/models"

  cat >"$TRITON/env.sh" <<ENV
# Triton $PYTRITON of nvidia-pytriton, written by benches/peers/triton.sh setup
export TRITON="$TRITON"
export TRITONSERVER="$server/bin/tritonserver"
export TRITON_BACKENDS="$server/backends"
export TRITON_MODELS="$TRITON/models"
export TRITON_LIBS="$wheel_dir/nvidia_pytriton.libs"
export TRITON_CAPI_DIR="$TRITON/capi"
ENV
  local missing
  missing=$(ldd "$server/bin/tritonserver" "$server/backends/python/triton_python_backend_stub" |
    grep 'not found' || true)
  [ -z "$missing" ] || die "libraries not found: $missing"
  echo "$TRITON/env.sh"
}

stop() {
  local pid=${1:-}
  [ -n "$pid" ] || { [ -f "$run_dir/pid" ] && pid=$(cat "$run_dir/pid"); } || return 0
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 -- "-$pid" 2>/dev/null || kill -9 "$pid" 2>/dev/null || true
  if [ -f "$run_dir/pid" ] && [ "$(cat "$run_dir/pid")" = "$pid" ]; then rm -f "$run_dir/pid"; fi
}

start() {
  [ -f "$TRITON/env.sh" ] || setup >&2
  local models=${TRITON_MODELS:-}
  # shellcheck disable=SC1091
  . "$TRITON/env.sh"
  models=${models:-$TRITON_MODELS}
  local http=${TRITON_HTTP_PORT:-$(free_port)} grpc=${TRITON_GRPC_PORT:-$(free_port)}
  local metrics=${TRITON_METRICS_PORT:-$(free_port)}
  mkdir -p "$run_dir"
  local log=$run_dir/tritonserver-$http.log
  # shellcheck disable=SC2086 # TRITON_ARGS is a list of flags
  setsid timeout "${TRITON_TTL:-3600}" "$TRITONSERVER" --model-repository="$models" \
    --backend-directory="$TRITON_BACKENDS" --http-port "$http" --grpc-port "$grpc" \
    --metrics-port "$metrics" --exit-timeout-secs 5 ${TRITON_ARGS:-} </dev/null >"$log" 2>&1 &
  local pid=$!
  echo "$pid" >"$run_dir/pid"
  if ! wait_http "http://127.0.0.1:$http/v2/health/ready" 480; then
    grep -E '^E|error|UNAVAILABLE' "$log" | tail -20 >&2 || tail -30 "$log" >&2
    stop "$pid"
    die "tritonserver did not become ready (log $log)"
  fi
  say "ready: http $http, grpc $grpc, metrics $metrics, log $log"
  echo "TRITON_PID=$pid TRITON_HTTP_PORT=$http TRITON_GRPC_PORT=$grpc TRITON_METRICS_PORT=$metrics"
}

case ${1:-} in
  setup) setup ;;
  start) start ;;
  stop) stop "${2:-}" ;;
  *) die "usage: triton.sh setup | start | stop [PID]" ;;
esac
