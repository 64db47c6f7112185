#!/usr/bin/env bash
# Builds what users install without a Rust toolchain: the Python wheel (the `inferperf` binary
# on PATH, plus `python -m inferperf`) and the portable tarball (the same binary, shell
# completions, man pages), for x86_64 Linux with glibc 2.17 or newer (manylinux2014: RHEL 7 and
# later, Ubuntu 14.04 and later). The binary is linked by zig (the `ziglang` wheel) through
# maturin, against glibc 2.17's symbols; it is not static, because the C API, MPI and CUDA
# libraries are opened with dlopen at run time.
#
#   bash packaging/wheel.sh
#     target/wheels/inferperf-VERSION-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl
#     target/wheels/inferperf-VERSION-x86_64-linux-gnu.tar.gz
#
# Needs Python 3 with venv and pip, and PyPI once: maturin and ziglang are installed into
# packaging/venv of the target folder (PACKAGING_VENV names another venv that has them). One venv:
# the zig linker that maturin hands to cargo runs from it, and a build from another venv
# rebuilds every crate. The build uses the `dist` profile of Cargo.toml and honours
# CARGO_TARGET_DIR. The script fails if the binary needs a glibc newer than 2.17
# (packaging/glibc_needed.sh). tests/it/packaging.rs runs it, installs the wheel into a fresh
# venv and runs the binary (INFERPERF_PACKAGING_TIER=1).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=x86_64-unknown-linux-gnu
GLIBC=2.17
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
case $TARGET_DIR in /*) ;; *) TARGET_DIR=$ROOT/$TARGET_DIR ;; esac
VENV=${PACKAGING_VENV:-$TARGET_DIR/packaging/venv}
OUT=$TARGET_DIR/wheels
if ! { [ -x "$VENV/bin/maturin" ] && "$VENV/bin/python" -c 'import ziglang' 2>/dev/null; }; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q 'maturin>=1.5,<2' ziglang
fi
rustup target list --installed 2>/dev/null | grep -qx "$TARGET" || rustup target add "$TARGET"
mkdir -p "$OUT"
cd "$ROOT"
PATH=$VENV/bin:$PATH maturin build --zig --compatibility manylinux2014 --target "$TARGET" --out "$OUT"
bin=$TARGET_DIR/$TARGET/dist/inferperf
need=$(bash "$ROOT/packaging/glibc_needed.sh" "$bin")
if [ "$(printf '%s\n%s\n' "$need" "$GLIBC" | sort -t. -k1,1n -k2,2n | tail -1)" != "$GLIBC" ]; then
  echo "the binary needs glibc $need, newer than $GLIBC" >&2
  exit 1
fi
# `inferperf 0.1.0 (perf_analyzer-compatible)`, on stderr as perf_analyzer's version line
version=$("$bin" --version 2>&1 | awk '{print $2}')
name=inferperf-$version-x86_64-linux-gnu
stage=$TARGET_DIR/packaging/$name
rm -rf "$stage" && mkdir -p "$stage/completions" "$stage/man"
cp "$bin" README.md "$stage/"
[ -f LICENSE ] && cp LICENSE "$stage/"
for shell in bash zsh fish; do "$bin" completions "$shell" >"$stage/completions/inferperf.$shell"; done
"$bin" man --out-dir "$stage/man" >/dev/null
tar -C "$TARGET_DIR/packaging" -czf "$OUT/$name.tar.gz" "$name"
ls -l "$OUT"/inferperf-"$version"-*.whl "$OUT/$name.tar.gz"
echo "glibc needed: $need"
