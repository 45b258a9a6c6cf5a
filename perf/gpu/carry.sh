#!/usr/bin/env bash
# Gathers, on a Debian 12 build machine with network access to its apt mirror, what the GPU machine
# lacks to build and run ckpt (it has nvcc 13, cmake, ninja, python3 and no MPI, yaml-cpp, xxhash,
# GoogleTest, CLI11, nlohmann-json, and no network): the Debian 12 packages below, downloaded with
# `apt-get download` and unpacked with `dpkg -x` into the ignored folder .gpucarry/ at the repository
# root. perf/gpu/run.sh uses it (OPAL_PREFIX relocates Open MPI). The folder travels with the device
# tool's `carry` (64 MiB together with the working tree): this script fails if it is larger than the
# budget below.
#
#   bash perf/gpu/carry.sh            # then: device run with carry [".gpucarry"], bash perf/gpu/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=.gpucarry
budget_mib=${CKPT_CARRY_BUDGET_MIB:-48}  # the working tree travels too (~2 MiB, 64 MiB in all)

# Open MPI 4.1 (mpiexec, the wrappers, headers, libmpi) and the libraries it loads; ckpt's build
# dependencies (yaml-cpp, xxhash, GoogleTest, CLI11, nlohmann-json). glibc, libstdc++, zlib, libssl
# and libudev are in every Ubuntu/Debian image and are not carried.
pkgs=(openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev
      libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7 libpmix2 libfabric1 libucx0 libibverbs1
      librdmacm1 libpsm2-2 libpsm-infinipath1 libnuma1 libnl-3-200 libnl-route-3-200 libmunge2 libltdl7
      libpciaccess0 libxnvctrl0 libgfortran5 libquadmath0
      libyaml-cpp0.7 libyaml-cpp-dev libxxhash0 libxxhash-dev libgtest-dev libcli11-dev nlohmann-json3-dev)

rm -rf "$dest" && mkdir -p "$dest/debs" "$dest/root"
(cd "$dest/debs" && apt-get download "${pkgs[@]}" 2>&1 | grep -v "^W: Download is performed unsandboxed" || true)
n=$(ls "$dest"/debs/*.deb | wc -l)
[ "$n" -eq "${#pkgs[@]}" ] || { echo "carry: got $n of ${#pkgs[@]} packages" >&2; exit 1; }
for d in "$dest"/debs/*.deb; do dpkg -x "$d" "$dest/root"; done
rm -rf "$dest/debs"
# Not needed on the GPU machine: documentation, manual pages, Fortran modules, static archives other
# than GoogleTest's (ckpt links it statically), the UCX/fabric providers' test tools.
rm -rf "$dest"/root/usr/share/{doc,man,lintian,locale}
find "$dest/root" -name '*.a' ! -name 'libgtest*.a' -delete
find "$dest/root" -name '*.mod' -delete
rm -rf "$dest"/root/usr/lib/x86_64-linux-gnu/fortran
# Debian's alternatives are not installed by dpkg -x: point the usual names at Open MPI's tools.
bin="$dest/root/usr/bin"
for t in mpicc mpicxx mpiexec mpirun; do
  case $t in
    mpicc) target=mpicc.openmpi ;;
    mpicxx) target=mpicxx.openmpi ;;
    *) target=$t.openmpi ;;
  esac
  [ -e "$bin/$target" ] && ln -sf "$target" "$bin/$t"
done
# libmpi.so for the linker (the -dev package's symlink points through the alternatives directory).
ompi_lib="$dest/root/usr/lib/x86_64-linux-gnu/openmpi/lib"
[ -e "$ompi_lib/libmpi.so" ] || ln -sf libmpi.so.40 "$ompi_lib/libmpi.so"
cat >"$dest/env.sh" <<'EOF'
# Source on the GPU machine from the repository root: Open MPI and the libraries from .gpucarry.
c="$(pwd)/.gpucarry/root"
export OPAL_PREFIX="$c/usr" PATH="$c/usr/bin:$PATH"
export LD_LIBRARY_PATH="$c/usr/lib/x86_64-linux-gnu/openmpi/lib:$c/usr/lib/x86_64-linux-gnu:$c/usr/lib:${LD_LIBRARY_PATH:-}"
export CMAKE_PREFIX_PATH="$c/usr:${CMAKE_PREFIX_PATH:-}" CPATH="$c/usr/include:${CPATH:-}"
export LIBRARY_PATH="$c/usr/lib/x86_64-linux-gnu:${LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# No network fabric there: shared memory and TCP on loopback only.
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_osc=^ucx OMPI_MCA_mtl=^ofi,psm,psm2
EOF
size_mib=$(du -sm "$dest" | cut -f1)
echo "carry: $dest holds ${#pkgs[@]} packages, ${size_mib} MiB (budget ${budget_mib} MiB)"
[ "$size_mib" -le "$budget_mib" ] || { echo "carry: over budget" >&2; exit 1; }
