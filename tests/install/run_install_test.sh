#!/usr/bin/env bash
# Installs the build tree into a scratch prefix, builds the downstream projects in tests/install against
# it with find_package(ckpt) (C++ consumer/, C c_consumer/, and, when ckpt was built with Fortran,
# the Fortran-only fortran_consumer/), checks the pkg-config file, and runs each consumer on 2 ranks.
# Usage: run_install_test.sh BUILD SRC WORK [HAVE_FORTRAN]
set -euo pipefail
build=$1 src=$2 work=$3 fortran=${4:-0}
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig:$work/prefix/lib/x86_64-linux-gnu/pkgconfig"
pkg-config --cflags --libs ckpt
# ckpt.pc is relocatable: its libdir is the installed one, wherever the prefix is.
libdir=$(pkg-config --variable=libdir ckpt)
ls "$libdir"/libckpt.* >/dev/null
# libckpt exports the public API only (CKPT_API), nothing of ckpt::detail.
if [ -e "$libdir/libckpt.so" ] && nm -DC --defined-only "$libdir/libckpt.so" | grep -q 'ckpt::detail::'; then
  echo "libckpt.so exports internal symbols:"; nm -DC --defined-only "$libdir/libckpt.so" | grep 'ckpt::detail::' | head
  exit 1
fi
export LD_LIBRARY_PATH="$work/prefix/lib:$work/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
consumers=(consumer c_consumer)
[ "$fortran" = 1 ] && consumers+=(fortran_consumer)
for c in "${consumers[@]}"; do
  cmake -S "$src/$c" -B "$work/build-$c" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
  cmake --build "$work/build-$c" >/dev/null
  CKPT_DIR="$work/ckpt-$c" mpiexec -n 2 "$work/build-$c/$c" "$work/ckpt-$c"
done
