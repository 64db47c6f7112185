# shellcheck shell=bash
# Sourced by the scripts of benches/peers: where peers are installed and small helpers.
#
# INFERPERF_PEERS: the install folder (default ~/.cache/inferperf-peers). Every script puts
# its files under it and nowhere else, except the Debian packages it asks apt-get for
# (PEERS_APT=0: never call apt-get, only warn about what is missing).
# Nothing here runs from the tests or the CI script: installing is always a manual step.

PEERS=${INFERPERF_PEERS:-${HOME:-/tmp}/.cache/inferperf-peers}
PEERS_APT=${PEERS_APT:-1}
PY=${PYTHON:-python3}
# shellcheck disable=SC2034 # used by the scripts that source this file
PEERS_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$PEERS/bin" "$PEERS/downloads"

# first PATH...: prints PATH, the first match of a glob, when it exists; fails when not.
first() { [ -e "$1" ] && printf '%s\n' "$1"; }

say() { printf '[%s] %s\n' "$(basename "$0" .sh)" "$*" >&2; }
die() { say "$*"; exit 1; }

# apt_missing PKG...: installs the Debian packages not yet installed (one apt-get call).
apt_missing() {
  local want=() p
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || want+=("$p"); done
  [ "${#want[@]}" -eq 0 ] && return 0
  if [ "$PEERS_APT" != 1 ]; then say "missing Debian packages (PEERS_APT=0): ${want[*]}"; return 0; fi
  local sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
  say "apt-get install ${want[*]}"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${want[@]}" >&2
}

# wheel_get SPEC PLATFORM: downloads one binary wheel (no dependencies) into downloads/ unless
# it is there, and prints its path.
wheel_get() {
  local spec=$1 platform=$2 name=${1%%==*} version=${1#*==} found
  name=${name//-/_}
  found=$(first "$PEERS/downloads/${name}-${version}-"*.whl || true)
  if [ -z "$found" ]; then
    say "pip download $spec"
    "$PY" -m pip download -q --no-deps --only-binary=:all: --platform "$platform" \
      --python-version 3 -d "$PEERS/downloads" "$spec" >&2
    found=$(first "$PEERS/downloads/${name}-${version}-"*.whl)
  fi
  printf '%s\n' "$found"
}

# unpack_wheel WHEEL DIR: extracts a wheel (a zip) into DIR, replacing it, keeping the
# executable bits the archive records.
unpack_wheel() {
  rm -rf "$2.part" && mkdir -p "$2.part"
  "$PY" - "$1" "$2.part" <<'PYEOF'
import os, sys, zipfile
archive, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(archive) as z:
    for member in z.infolist():
        path = z.extract(member, dest)
        mode = member.external_attr >> 16 & 0o777
        if mode and not member.is_dir():
            os.chmod(path, mode)
PYEOF
  rm -rf "$2" && mv "$2.part" "$2"
}

# venv_with NAME REQUIREMENTS PACKAGE==VERSION: a virtual environment PEERS/NAME holding the
# pinned dependency list and then the package itself without its own dependency resolution
# (the pins leave out what the peers never import, such as torch). Done once per version.
venv_with() {
  local venv=$PEERS/$1 reqs=$2 pkg=$3
  local stamp="$venv/.installed-${pkg/==/-}"
  [ -f "$stamp" ] && return 0
  say "virtual environment $venv: $pkg"
  rm -rf "$venv"
  "$PY" -m venv "$venv"
  "$venv/bin/pip" install -q -r "$reqs" >&2
  "$venv/bin/pip" install -q --no-deps "$pkg" >&2
  touch "$stamp"
}

# free_port: an unused loopback TCP port.
free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_http URL TRIES: polls URL every 0.25 s until it answers 2xx; fails after TRIES polls.
wait_http() {
  local i
  for ((i = 0; i < $2; i++)); do
    curl -sf -o /dev/null "$1" && return 0
    sleep 0.25
  done
  return 1
}
