#!/usr/bin/env bash
# The mutation check of the GPU device (issue 32; docs/gpu.md, "The simulated device"): every wait that
# gpu/cuda_device.cu makes - a stream waiting on an event, the host waiting on an event or a stream - must
# be caught by at least one test. In a build with CKPT_ENABLE_SIMGPU=ON each wait passes through the
# simulated device, which leaves out the one named by the environment variable SIMGPU_MUTANT (the
# mutants are listed in gpu/sim/sim_runtime.cpp, mutants()): no rebuild per mutant.
#
#   tests/gpu/mutants.sh BUILD_DIR          for each mutant, the tests of the table below must fail (CI)
#   tests/gpu/mutants.sh BUILD_DIR --full   each mutant against every test of the gpu label's binaries:
#                                           which tests fail (slow: for filling in the table)
#
# A mutant whose wait was never reached fails the check too (a stale table or a renamed variable).
set -uo pipefail
build=$(cd "${1:?usage: mutants.sh BUILD_DIR [--full]}" && pwd)
full=${2:-}
src=$(cd "$(dirname "$0")/../.." && pwd)
bin=$build/tests/gpu
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
mpiexec=$(grep -m1 '^MPIEXEC_EXECUTABLE:' "$build/CMakeCache.txt" | cut -d= -f2)
grep -q 'define CKPT_HAVE_SIMGPU 1' "$build/include/ckpt/config.hpp" ||
  { echo "mutants: $build is not a CKPT_ENABLE_SIMGPU=ON build"; exit 2; }

# mutant | binary ranks | gtest filter of the tests that catch it (each one alone would)
table=(
  "copy_waits_start|gpu_cuda_device 1|Streams/CudaCanary.*/blocking_off_inflight1"
  "d2d_waits_start|gpu_cuda_device 1|DoubleBuffer/CudaCapture.*/1"
  "copy_waits_d2d|gpu_cuda_device 1|Streams/CudaCanary.*/blocking_on_inflight1"
  "d2d_waits_spare_free|gpu_cuda_device 1|Streams/BackToBack.*/blocking_on_inflight4"
  "app_waits_captured|gpu_cuda_device 1|Streams/CudaCanary.*/blocking_off_inflight1"
  "app_waits_captured|gpu_cuda_device 1|Streams/CudaCanary.*/blocking_on_inflight1"
  "copy_waits_restore_after|gpu_cuda_device 1|Streams/BackToBack.*/blocking_off_inflight4"
  "host_waits_fence|gpu_cuda_device 1|Streams/CudaCanary.*/blocking_off_inflight1"
  "restore_end_waits_copy|gpu_cuda_device 1|CudaRuntime.ACheckpointRightAfterARestart*"
  "free_staging_waits_d2d|gpu_cuda_device 1|DoubleBuffer/FailedFence.*/3"
  "free_staging_waits_copy|gpu_cuda_device 1|DoubleBuffer/FailedFence.*/2"
  "drain_waits_d2d|gpu_cuda_device 1|DoubleBuffer/FailedFence.*/1"
  "drain_waits_copy|gpu_cuda_device 1|DoubleBuffer/FailedFence.*/0"
  "teardown_waits_d2d|gpu_cuda_device 1|DoubleBuffer/AbandonedCapture.*/1"
  "teardown_waits_copy|gpu_cuda_device 1|DoubleBuffer/AbandonedCapture.*/0"
)

# Every mutant of the simulated device has a row (and no row names a mutant it does not have).
declared=$(sed -n 's/^ *{"\([a-z_0-9]*\)", "CudaDevice::.*/\1/p' "$src/gpu/sim/sim_runtime.cpp" | sort -u)
listed=$(printf '%s\n' "${table[@]}" | cut -d'|' -f1 | sort -u)
if [ "$declared" != "$listed" ]; then
  echo "mutants: the table does not list the simulated device's mutants:"
  diff <(echo "$declared") <(echo "$listed")
  exit 1
fi

# run MUTANT BINARY RANKS FILTER: runs the tests, prints 'caught' or 'survived' and the failing tests.
run() {
  local mutant=$1 exe=$2 ranks=$3 filter=$4 out rc
  out=$(SIMGPU_MUTANT=$mutant timeout --kill-after=10 180 "$mpiexec" -n "$ranks" "$bin/$exe" \
          --gtest_filter="$filter" --gtest_brief=1 2>&1)
  rc=$?
  local removed=0 failed
  # Said at the first removed wait, and with the count at exit (an aborted test never gets there).
  # Here-strings, not 'echo | grep -q': under pipefail, grep -q's early exit can SIGPIPE the echo of a
  # long output and fail the pipeline although it matched (CI once saw a caught mutant as UNREACHED).
  grep -q "^simgpu: mutant $mutant removed its first wait" <<<"$out" && removed=yes
  local n
  n=$(echo "$out" | sed -n "s/^simgpu: mutant $mutant removed \([0-9]*\) waits/\1/p" | sort -n | tail -1)
  [ -n "$n" ] && [ "$n" -gt 0 ] && removed=$n
  failed=$(echo "$out" | sed 's/\x1b\[[0-9;]*m//g' | sed -n 's/^\[  FAILED  \] \([^ ,]*\).*/\1/p' | sort -u |
           grep -v 'tests\?,\? listed' | tr '\n' ' ')
  # A violation of the simulated device aborts the test binary: the test it ran is the one that caught it.
  if grep -q '^simgpu: VIOLATION' <<<"$out"; then
    failed="$failed$filter (aborted: $(echo "$out" | sed -n 's/^simgpu: VIOLATION: //p' | head -1))"
  fi
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && failed="$failed(timed out)"
  echo "$rc|$removed|$failed"
}

status=0
if [ "$full" = "--full" ]; then
  printf '%-26s %s\n' "mutant" "tests that fail"
  for m in $declared; do
    for b in "gpu_cuda_device 1" "gpu_cuda_ranks_4 4" "gpu_stream_device_fallback 1"; do
      r=$(run "$m" ${b% *} ${b#* } '*')
      printf '%-26s %-28s removed %-5s %s\n' "$m" "${b% *}" "$(echo "$r" | cut -d'|' -f2)" "$(echo "$r" | cut -d'|' -f3)"
    done
  done
  exit 0
fi

# The catching tests pass without a mutant: a failure with one is the mutant's doing.
filters=$(printf '%s\n' "${table[@]}" | cut -d'|' -f3 | sort -u | paste -sd: -)
r=$(run "" gpu_cuda_device 1 "$filters")
if [ "$(echo "$r" | cut -d'|' -f1)" != 0 ]; then
  echo "mutants: the catching tests fail without a mutant: $(echo "$r" | cut -d'|' -f3)"
  exit 1
fi
printf '%-26s %-8s %-8s %s\n' "mutant" "result" "removed" "caught by"
for row in "${table[@]}"; do
  IFS='|' read -r m b f <<<"$row"
  r=$(run "$m" ${b% *} ${b#* } "$f")
  rc=$(echo "$r" | cut -d'|' -f1)
  removed=$(echo "$r" | cut -d'|' -f2)
  if [ "$removed" = 0 ]; then
    printf '%-26s %-8s %-8s %s\n' "$m" "UNREACHED" "0" "$f: the mutant's wait was never made"
    status=1
  elif [ "$rc" -eq 0 ]; then
    printf '%-26s %-8s %-8s %s\n' "$m" "SURVIVED" "$removed" "$f passed without the wait"
    status=1
  else
    printf '%-26s %-8s %-8s %s\n' "$m" "caught" "$removed" "$(echo "$r" | cut -d'|' -f3)"
  fi
done
[ $status -eq 0 ] && echo "mutants: every wait is caught" || echo "mutants: FAILED"
exit $status
