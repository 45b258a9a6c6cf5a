#!/usr/bin/env bash
# Installs the build tree into a scratch prefix, then builds and runs what real downstream codes build
# against it, each on 2 ranks, with NO environment variable pointing at the prefix when they run
# (no LD_LIBRARY_PATH, no CKPT_LIBRARY): the installed libraries and the consumers' RUNPATHs must do.
#   - find_package(ckpt): C++ consumer/, C c_consumer/ and (with Fortran) the Fortran-only
#     fortran_consumer/, each as written (cmake_minimum_required 3.25) and rewritten to say 3.0 and 3.5
#     (LULESH-era projects: the package config must work under their old policies);
#   - pkg-config: C++ with mpicxx and --variable=cxxflags, the C consumer compiled by clang (a C
#     compiler given -std=c++17 refuses), a Fortran program linked by hand with -lckpt_fortran -lckpt and
#     with --as-needed (libckpt then reaches it only through libckpt_fortran's own RUNPATH);
#   - the C++ consumer run with CKPT_FOO=bar set: one warning line, and it works;
#   - the Python package: `pip install <prefix>/lib/python` into a scratch target, its version, and
#     the reader test suite (tests/python/test_reader.py, when CKPTTEST_PYDATA is set) against the
#     installed copy, plus a read of the C++ consumer's checkpoint, and ckpt.Runtime's suite
#     (tests/python/test_runtime.py) at 2 processes against the installed copy.
# The prefix is moved after the install (relocatable package); a shared libckpt must export the C API
# and nothing of ckpt::detail.
# Usage: run_install_test.sh BUILD SRC WORK [HAVE_FORTRAN]
set -euo pipefail
build=$1 src=$2 work=$3 fortran=${4:-0}
unset LD_LIBRARY_PATH CKPT_LIBRARY
rm -rf "$work" && mkdir -p "$work"
# Installed into one prefix, then moved: the package (CMake config and ckpt.pc) must be relocatable.
cmake --install "$build" --prefix "$work/installed" >/dev/null
mv "$work/installed" "$work/prefix"
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig:$work/prefix/lib/x86_64-linux-gnu/pkgconfig"
pkg-config --cflags --libs ckpt
libdir=$(pkg-config --variable=libdir ckpt)
[[ "$(cd "$libdir" && pwd -P)" == "$(cd "$work/prefix" && pwd -P)"/* ]] ||
  { echo "ckpt.pc: libdir $libdir is not inside the moved prefix"; exit 1; }
[[ " $(pkg-config --cflags ckpt) " != *" -std="* ]] || { echo "ckpt.pc: Cflags name a language standard"; exit 1; }
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
  # Every installed shared library and program finds its libraries with no environment set.
  for f in "$libdir"/lib*.so "$work/prefix/bin/"*; do
    [ -f "$f" ] && [ "$(head -c 4 "$f" | tail -c 3)" = ELF ] || continue  # not a script
    missing=$(ldd "$f" | grep "not found" || true)
    [ -z "$missing" ] || { echo "$f: $missing"; exit 1; }
  done
fi
runs() {  # NAME CKPTDIR COMMAND...: runs a consumer on 2 ranks, with no variable pointing at the prefix
  local name=$1 d=$2
  shift 2
  echo "-- $name"
  CKPT_DIR="$d" mpiexec -n 2 "$@" "$d"
}
static_flag=$([ "$static" = 1 ] && echo --static || true)
# shellcheck disable=SC2086
{
  # A plain Makefile-style C++ consumer: the MPI compiler wrapper and ckpt.pc (--static for a static libckpt).
  mpicxx $(pkg-config --variable=cxxflags ckpt) "$src/consumer/main.cpp" -o "$work/pc_consumer" \
    $(pkg-config --cflags --libs $static_flag ckpt)
  runs "pkg-config C++ (mpicxx)" "$work/ckpt-pc" "$work/pc_consumer"
  # The C consumer compiled by clang with only ckpt.pc's and MPI's own pkg-config flags (-std=c++17 in
  # Cflags made clang refuse a C file). A static libckpt is C++: its link needs the C++ runtime.
  mpi_c=$(pkg-config --cflags --libs ompi-c 2>/dev/null || pkg-config --cflags --libs mpich)
  if command -v clang >/dev/null; then
    clang -std=c99 -Wall -Wextra -pedantic -Werror "$src/c_consumer/main.c" -o "$work/pc_c_consumer" \
      $(pkg-config --cflags --libs $static_flag ckpt) $mpi_c $([ "$static" = 1 ] && echo -lstdc++ -lm)
    runs "pkg-config C (clang)" "$work/ckpt-pc-c" "$work/pc_c_consumer"
  else
    echo "clang not found: .ci/setup installs it" >&2; exit 1
  fi
  if [ "$fortran" = 1 ]; then
    # Fortran by hand: the module directory from ckpt.pc, the libraries named on the command line.
    fflags=(-I"$(pkg-config --variable=fmoddir ckpt)" "$src/fortran_consumer/main.f90")
    if [ "$static" = 0 ]; then
      mpif90 "${fflags[@]}" -o "$work/hand_fortran" -L"$libdir" -Wl,-rpath,"$libdir" -lckpt_fortran -lckpt
      runs "Fortran by hand (-lckpt_fortran -lckpt)" "$work/ckpt-hand-f" "$work/hand_fortran"
      mpif90 "${fflags[@]}" -o "$work/hand_fortran_as_needed" -Wl,--as-needed -L"$libdir" -Wl,-rpath,"$libdir" \
        -lckpt_fortran -lckpt
      if readelf -d "$work/hand_fortran_as_needed" | grep 'NEEDED.*libckpt\.so' >/dev/null; then
        echo "(--as-needed kept libckpt: the program calls it directly)"
      fi
      runs "Fortran by hand (--as-needed: libckpt through libckpt_fortran's RUNPATH)" "$work/ckpt-hand-f2" \
        "$work/hand_fortran_as_needed"
    else
      mpif90 "${fflags[@]}" -o "$work/hand_fortran" -lckpt_fortran $(pkg-config --libs --static ckpt) -lstdc++
      runs "Fortran by hand (static)" "$work/ckpt-hand-f" "$work/hand_fortran"
    fi
  fi
}
consumers=(consumer c_consumer)
[ "$fortran" = 1 ] && consumers+=(fortran_consumer)
for c in "${consumers[@]}"; do
  for v in as-written 3.0 3.5; do
    s="$src/$c"
    if [ "$v" != as-written ]; then  # the same project, declaring an old CMake: the caller's old policies
      s="$work/src-$c-$v"
      cp -r "$src/$c" "$s"
      sed -i "s/^cmake_minimum_required(VERSION [0-9.]*)/cmake_minimum_required(VERSION $v)/" "$s/CMakeLists.txt"
      grep -q "VERSION $v)" "$s/CMakeLists.txt"
    fi
    cmake -S "$s" -B "$work/build-$c-$v" -G Ninja -Wno-dev -Wno-deprecated -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
    cmake --build "$work/build-$c-$v" >/dev/null
    runs "find_package: $c (cmake_minimum_required $v)" "$work/ckpt-$c-$v" "$work/build-$c-$v/$c"
  done
done
# An unknown CKPT_* variable (a site module's CKPT_ROOT, a user's CKPT_FOO) is a warning, never fatal.
out=$(CKPT_FOO=bar CKPT_DIR="$work/ckpt-env" mpiexec -n 2 "$work/build-c_consumer-as-written/c_consumer" "$work/ckpt-env" 2>&1) ||
  { echo "$out"; echo "C consumer with CKPT_FOO=bar failed"; exit 1; }
[ "$(grep -c 'warning: unknown environment variable CKPT_FOO ignored' <<<"$out")" = 1 ] ||
  { echo "$out"; echo "consumer with CKPT_FOO=bar: expected one warning line"; exit 1; }
echo "-- CKPT_FOO=bar: one warning line, and the consumer ran"
# The Python package: loaded with ctypes, so not with a static libckpt.
[ "$static" = 1 ] && { echo "python: skipped (static libckpt: the package needs libckpt.so)"; exit 0; }
# pip-installed from the install tree (no build isolation: no download; setuptools and wheel from .ci/setup).
python3 -m pip install -q --no-deps --no-build-isolation --target "$work/site" "$work/prefix/lib/python"
version=$(cd / && PYTHONPATH="$work/site" python3 -c "import ckpt; print(ckpt.__version__)")
want=$(sed -n 's/^Version: //p' "$libdir/pkgconfig/ckpt.pc")
[ "$version" = "$want" ] || { echo "python: ckpt.__version__ $version, the project is $want"; exit 1; }
echo "-- python: pip install <prefix>/lib/python: ckpt $version"
for where in "$work/site" "$work/prefix/lib/python"; do
  (cd / && PYTHONPATH="$where" python3 - "$work/ckpt-consumer-as-written" "$where" <<'PY'
import os, sys
import ckpt
assert os.path.realpath(ckpt.__file__).startswith(os.path.realpath(sys.argv[2])), ckpt.__file__
s = ckpt.open(sys.argv[1])
assert s.steps == [1], s.steps
c = s.latest()
c.verify()
print("python (%s): ckpt.open(%s): steps %s, variables %s" % (sys.argv[2], sys.argv[1], s.steps, c.variables))
PY
  )
done
if [ -n "${CKPTTEST_PYDATA:-}" ]; then
  # The package's own test suite against the pip-installed copy (the source tree is not on the path).
  (cd "$work" && PYTHONPATH="$work/site" python3 -m pytest -q -p no:cacheprovider "$src/../python/test_reader.py")
fi
# ckpt.Runtime's suite (checkpoint and restart from Python) against the pip-installed copy, at 2 processes.
if python3 -c "import mpi4py" 2>/dev/null; then
  (cd "$work" && PYTHONPATH="$work/site" python3 -c \
    'import ckpt, os, sys; assert os.path.realpath(ckpt.__file__).startswith(os.path.realpath(sys.argv[1]))' \
    "$work/site")
  (cd "$work" && PYTHONPATH="$work/site" CKPTTEST_TMP="$work/py-runtime" \
    mpiexec -n 2 python3 -m mpi4py -m pytest -q -p no:cacheprovider "$src/../python/test_runtime.py")
else
  echo "python: mpi4py not found, ckpt.Runtime's suite not run against the installed package (.ci/setup installs it)"
fi
