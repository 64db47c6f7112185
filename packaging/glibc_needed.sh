#!/usr/bin/env bash
# Prints the newest glibc symbol version BINARY needs (from `objdump -T`), e.g. `2.17`.
#
#   bash packaging/glibc_needed.sh target/x86_64-unknown-linux-gnu/dist/inferperf
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: glibc_needed.sh BINARY" >&2; exit 2; }
objdump -T "$1" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -t. -k1,1n -k2,2n -k3,3n | tail -1
