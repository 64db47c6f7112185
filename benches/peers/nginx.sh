#!/usr/bin/env bash
# nginx as a fixed-answer KServe v2 server for model `identity` (FP32[16] in and out).
#
#   bash benches/peers/nginx.sh [start]     # (re)starts it; prints one line with its ports
#   bash benches/peers/nginx.sh stop
#
# HTTP/1.1 on 127.0.0.1:NGINX_PORT (18090): metadata, config, health and POST .../infer, whose
# answer carries the request's "id"; POST /static/infer is the same answer with no Lua, for
# wrk; GET /nginx_status counts the requests served (run_pa.sh reads it).
# gRPC (cleartext HTTP/2) on 127.0.0.1:NGINX_GRPC_PORT (18091): ServerLive, ServerReady,
# ModelReady, ServerMetadata, ModelMetadata, ModelConfig, ModelInfer; anything else gets
# grpc-status 12 (UNIMPLEMENTED).
# NGINX_WORKERS (1) worker processes; it stops by itself after NGINX_TTL seconds (3600).
# Its config, logs and pid live in NGINX_RUN_DIR (INFERPERF_PEERS/run/nginx).
# Needs nginx and libnginx-mod-http-lua (benches/peers/perf_analyzer.sh installs both).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
run=${NGINX_RUN_DIR:-$PEERS/run/nginx}
pid_file=$run/master.pid

stop() {
  [ -f "$pid_file" ] || return 0
  local pid
  pid=$(cat "$pid_file")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$pid_file"
}

case ${1:-start} in
  stop) stop; exit 0 ;;
  start) ;;
  *) die "usage: nginx.sh [start|stop]" ;;
esac
stop
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
if [ ! -x "$nginx_bin" ] || [ ! -e /usr/lib/nginx/modules/ngx_http_lua_module.so ]; then
  die "needs nginx and libnginx-mod-http-lua: run benches/peers/perf_analyzer.sh"
fi
http_port=${NGINX_PORT:-18090}
grpc_port=${NGINX_GRPC_PORT:-18091}
mkdir -p "$run"
"$PY" "$PEERS_SRC/nginx/render.py" "$run" "$http_port" "$grpc_port" "${NGINX_WORKERS:-1}"
"$nginx_bin" -t -q -p "$run" -c "$run/nginx.conf"
setsid timeout "${NGINX_TTL:-3600}" "$nginx_bin" -p "$run" -c "$run/nginx.conf" \
  </dev/null >"$run/stdout.log" 2>&1 &
echo $! >"$pid_file"
if ! wait_http "http://127.0.0.1:$http_port/v2/health/ready" 40; then
  cat "$run/error.log" "$run/stdout.log" >&2 2>/dev/null || true
  stop
  die "nginx did not start"
fi
echo "nginx: http 127.0.0.1:$http_port grpc 127.0.0.1:$grpc_port model identity (pid $(cat "$pid_file"))"
