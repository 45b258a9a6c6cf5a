#!/usr/bin/env bash
# Installs the build tree into a scratch prefix, builds the downstream projects in tests/install against
# it with find_package(ckpt) (C++ consumer/, C c_consumer/, and, when ckpt was built with Fortran,
# the Fortran-only fortran_consumer/) and with mpicxx + ckpt.pc, runs each consumer on 2 ranks, and
# reads the C++ consumer's checkpoint through the installed Python package.
# The prefix is moved after the install (relocatable package); a shared libckpt must export the C API
# and nothing of ckpt::detail.
# Usage: run_install_test.sh BUILD SRC WORK [HAVE_FORTRAN]
set -euo pipefail
build=$1 src=$2 work=$3 fortran=${4:-0}
rm -rf "$work" && mkdir -p "$work"
# Installed into one prefix, then moved: the package (CMake config and ckpt.pc) must be relocatable.
cmake --install "$build" --prefix "$work/installed" >/dev/null
mv "$work/installed" "$work/prefix"
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig:$work/prefix/lib/x86_64-linux-gnu/pkgconfig"
pkg-config --cflags --libs ckpt
libdir=$(pkg-config --variable=libdir ckpt)
[[ "$(cd "$libdir" && pwd -P)" == "$(cd "$work/prefix" && pwd -P)"/* ]] ||
  { echo "ckpt.pc: libdir $libdir is not inside the moved prefix"; exit 1; }
ls "$libdir"/libckpt.* >/dev/null
static=0
[ -e "$libdir/libckpt.so" ] || static=1
if [ "$static" = 0 ]; then
  # libckpt exports the public API only (CKPT_API), nothing of ckpt::detail but the device factory's
  # test seam (gpu/device_factory.cpp) ...
  internal=$(nm -DC --defined-only "$libdir/libckpt.so" | grep 'ckpt::detail::' |
             grep -v -e 'ckpt::detail::set_device_factory(' -e 'ckpt::detail::make_runtime_device(' || true)
  if [ -n "$internal" ]; then
    echo "libckpt.so exports internal symbols:"; head <<<"$internal"
    exit 1
  fi
  # ... and every function of the C API (ckpt/ckpt.h), which the Fortran module calls.
  exported=$(nm -D --defined-only "$libdir/libckpt.so" | awk '{print $3}')
  for f in $(grep -o 'CKPT_API [^(]*(' "$work/prefix/include/ckpt/ckpt.h" | grep -o 'ckpt_[a-z0-9_]*($' | tr -d '('); do
    grep -qx "$f" <<<"$exported" || { echo "libckpt.so does not export $f (ckpt/ckpt.h)"; exit 1; }
  done
fi
export LD_LIBRARY_PATH="$work/prefix/lib:$work/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
# A plain Makefile-style consumer: the MPI compiler wrapper and ckpt.pc (--static for a static libckpt).
pc_flags=$(pkg-config --cflags --libs $([ "$static" = 1 ] && echo --static) ckpt)
# shellcheck disable=SC2086
mpicxx "$src/consumer/main.cpp" -o "$work/pc_consumer" $pc_flags
CKPT_DIR="$work/ckpt-pc" mpiexec -n 2 "$work/pc_consumer" "$work/ckpt-pc"
consumers=(consumer c_consumer)
[ "$fortran" = 1 ] && consumers+=(fortran_consumer)
for c in "${consumers[@]}"; do
  cmake -S "$src/$c" -B "$work/build-$c" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
  cmake --build "$work/build-$c" >/dev/null
  CKPT_DIR="$work/ckpt-$c" mpiexec -n 2 "$work/build-$c/$c" "$work/ckpt-$c"
done
# The Python package from the install tree finds libckpt by itself (no LD_LIBRARY_PATH, no CKPT_LIBRARY)
# and reads what the C++ consumer wrote. It loads libckpt.so with ctypes: not with a static libckpt.
[ "$static" = 1 ] && { echo "python: skipped (static libckpt: the package needs libckpt.so)"; exit 0; }
env -u LD_LIBRARY_PATH -u CKPT_LIBRARY PYTHONPATH="$work/prefix/lib/python" python3 - "$work/ckpt-consumer" <<'PY'
import sys
import ckpt
s = ckpt.open(sys.argv[1])
assert s.steps == [1], s.steps
c = s.latest()
c.verify()
print("python: ckpt.open(%s): steps %s, variables %s" % (sys.argv[1], s.steps, c.variables))
PY
