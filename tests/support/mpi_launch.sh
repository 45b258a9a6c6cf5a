# Sourced by the demos (apps/qmc_walkers/demo.sh, docs/examples/demo.sh): prepares the environment so
# that a plain `mpiexec -n N` starts N ranks on this machine whatever its core count and user, and says
# what it did. Nothing specific to one MPI is passed to another MPI's mpiexec:
#   Open MPI  counts one slot per physical core and refuses more ranks than slots ("not enough slots"),
#             and refuses to run as root: it is told through its environment variables
#             (OMPI_MCA_rmaps_base_oversubscribe, OMPI_ALLOW_RUN_AS_ROOT[_CONFIRM]), never a flag.
#   MPICH and others (Hydra) start any number of ranks as any user: nothing to do.
# Usage: source tests/support/mpi_launch.sh; ckpt_mpi_prepare N
ckpt_mpi_prepare() {
  local n=$1 version cores
  if ! command -v mpiexec >/dev/null 2>&1; then
    echo "mpi: no mpiexec on PATH (run 'bash .ci/setup' first, or install an MPI)" >&2
    return 1
  fi
  version=$(mpiexec --version 2>&1 | head -n 1 || true)
  if [[ $version != *"Open MPI"* && $version != *OpenRTE* ]]; then
    echo "mpi: ${version:-mpiexec}: starting $n ranks with mpiexec -n $n as it is"
    return 0
  fi
  # Open MPI's default slots are physical cores (not hardware threads).
  cores=$(lscpu -p=core,socket 2>/dev/null | grep -v '^#' | sort -u | wc -l)
  [[ $cores -gt 0 ]] || cores=$(nproc)
  if [[ $(id -u) == 0 ]]; then
    echo "mpi: $version as root: allowed by OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  fi
  if (( cores < n )); then
    echo "mpi: $n ranks on $cores cores: oversubscribed (OMPI_MCA_rmaps_base_oversubscribe=1; ranks share cores, times are slower)"
    export OMPI_MCA_rmaps_base_oversubscribe=1
  fi
}
