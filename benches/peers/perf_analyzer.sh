#!/usr/bin/env bash
# The real perf_analyzer and the bare load tools, for side-by-side measurements.
#
#   bash benches/peers/perf_analyzer.sh        # prints the perf_analyzer wrapper's path last
#
# - Debian packages: libb64-0d (perf_analyzer links it), time (/usr/bin/time), nginx with its
#   Lua module (benches/peers/nginx.sh), wrk and nghttp2-client (h2load): the bare clients.
# - perf_analyzer itself from the `tritonclient` wheel on PyPI (TRITONCLIENT, default 2.50.0;
#   the binary sits in the wheel's data/bin). Wheels from 2.55 on need glibc 2.38; Debian 12
#   has 2.36. The binary links libcudart.so.12 even without a GPU: it comes from the
#   `nvidia-cuda-runtime-cu12` wheel.
# - INFERPERF_PEERS/bin/perf_analyzer: a wrapper that sets LD_LIBRARY_PATH and runs it.
#
# Nothing is installed twice; see benches/peers/lib.sh for INFERPERF_PEERS and PEERS_APT.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
TRITONCLIENT=${TRITONCLIENT:-2.50.0}
CUDART=${CUDART:-12.9.79}

apt_missing libb64-0d time nginx libnginx-mod-http-lua wrk nghttp2-client curl

client_dir=$PEERS/tritonclient-$TRITONCLIENT
binary=$client_dir/tritonclient-$TRITONCLIENT.data/data/bin/perf_analyzer
if [ ! -x "$binary" ]; then
  unpack_wheel "$(wheel_get "tritonclient==$TRITONCLIENT" manylinux1_x86_64)" "$client_dir"
  chmod +x "$binary"
fi

cudart_dir=$PEERS/cudart-$CUDART
cudart_lib=$cudart_dir/nvidia/cuda_runtime/lib
if [ ! -e "$cudart_lib/libcudart.so.12" ]; then
  unpack_wheel "$(wheel_get "nvidia-cuda-runtime-cu12==$CUDART" manylinux2014_x86_64)" "$cudart_dir"
fi

wrapper=$PEERS/bin/perf_analyzer
{
  echo '#!/bin/sh'
  echo "# perf_analyzer of tritonclient $TRITONCLIENT (written by benches/peers/perf_analyzer.sh)"
  echo "LD_LIBRARY_PATH=\"$cudart_lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}\" exec \"$binary\" \"\$@\""
} >"$wrapper.new"
chmod +x "$wrapper.new" && mv "$wrapper.new" "$wrapper"

if ! "$wrapper" --version 2>&1 | grep -q 'Perf Analyzer Version'; then
  LD_LIBRARY_PATH=$cudart_lib ldd "$binary" | grep 'not found' >&2 || true
  die "$wrapper does not start (libraries above are missing)"
fi
echo "$wrapper"
