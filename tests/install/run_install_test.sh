#!/usr/bin/env bash
# Installs the build tree into a scratch prefix, builds tests/install/consumer against it with
# find_package(ckpt), checks the pkg-config file, and runs the consumer on 2 ranks.
set -euo pipefail
build=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src/consumer" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig:$work/prefix/lib/x86_64-linux-gnu/pkgconfig" pkg-config --cflags --libs ckpt
LD_LIBRARY_PATH="$work/prefix/lib:$work/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}" \
  mpiexec -n 2 --oversubscribe "$work/build/consumer" "$work/ckpt"
