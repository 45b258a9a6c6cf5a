#!/usr/bin/env bash
# Everything of issue 13's GPU run in ONE command on the GPU machine (nvcc 13, cmake, ninja,
# compute-sanitizer; no MPI, HDF5, Kokkos, no network): the build dependencies come from .gpucarry/
# (made on the build machine by perf/gpu/carry.sh and carried by the device tool).
#
#   device run, carry [".gpucarry"]:  bash perf/gpu/run.sh
#   rehearsal here, no GPU:            bash perf/gpu/run.sh --sim
#   its build only (steps 1-2), no GPU: bash perf/gpu/run.sh --sim --build-only
#
# --sim runs the same steps on the simulated device (CKPT_ENABLE_SIMGPU, docs/gpu.md) in build-gpu-sim/:
# the build with the simulated device instead of CUDA, ctest -L gpu (the mutation check included), the
# CPU-side device tests, gpu_bench with 1, 2 and 4 ranks (--quick, 64 MiB: memcpy figures, not a GPU's)
# and finegrain; what needs a real GPU (nvidia-smi, compute-sanitizer, one context per rank) is skipped
# and says why. .gpucarry/ is used when it is there, else this machine's MPI. Budget 1500 s.
#
# Steps, each logged to $OUT/run.log (OUT: the device tool's folder; else perf/gpu/out):
#   1. checks: nvidia-smi, compute-sanitizer, an MPI hello with 4 ranks from the carried Open MPI
#   2. the CUDA build (build-gpu/, sm_90): libckpt, every gpu-labelled test (trace_nvtx_4 included),
#      the CPU-side device tests, gpu_bench
#   3. GPU steps -- only with a GPU; without one the script stops here with exit code 3 and says why:
#      the full ctest -L gpu (trace_nvtx_report only where python3 has matplotlib), the CPU-side device
#      tests; compute-sanitizer memcheck --leak-check full and initcheck on gpu_cuda_device
#      (0 errors wanted); gpu_bench with 1 rank, then 2 and 4 ranks on the GPU (nvidia-smi lists the
#      compute processes meanwhile: one context per rank); CSV + markdown table with the device name.
# The whole run keeps within RUN_BUDGET seconds (default 570, under the tool's 600): a step that would
# not fit is skipped and logged as such. Exit code: 0 all ran and passed, 1 a step failed, 3 no GPU.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
sim=no
build_only=no  # --build-only: stop after step 2 (CI builds beside its test suite, then runs the rest)
for arg in "$@"; do
  case $arg in
    --sim) sim=yes ;;
    --build-only) build_only=yes ;;
    *) echo "usage: bash perf/gpu/run.sh [--sim] [--build-only]"; exit 2 ;;
  esac
done
out=${OUT:-$root/perf/gpu/out$([ $sim = yes ] && echo -sim)}
mkdir -p "$out"
log=$out/run.log
: >"$log"
budget=${RUN_BUDGET:-$([ $sim = yes ] && echo 1500 || echo 570)}
SECONDS=0
failed=0
say() { echo "== [$SECONDS s] $*" | tee -a "$log"; }
left() { echo $((budget - SECONDS)); }
# run NAME MIN_SECONDS MAX_SECONDS CMD...: runs CMD (output appended to the log) if MIN_SECONDS remain.
run() {
  local name=$1 need=$2 max=$3
  shift 3
  if [ "$(left)" -lt "$need" ]; then
    say "$name: SKIPPED ($(left) s left, needs $need s)"
    failed=1
    return 1
  fi
  local lim=$max
  [ "$(left)" -lt "$lim" ] && lim=$(left)
  say "$name (limit $lim s)"
  timeout --signal=TERM --kill-after=10 "$lim" "$@" >>"$log" 2>&1
  local rc=$?
  if [ $rc -eq 0 ]; then say "$name: ok"; else say "$name: FAILED (rc $rc)"; failed=1; fi
  return $rc
}

# ---- 1. checks ----------------------------------------------------------------------------------
gpu=yes
if [ $sim = yes ]; then
  gpu=simulated
  say "simulated device (--sim): no nvidia-smi, no compute-sanitizer, no context count; the rest runs"
elif nvidia-smi >"$out/nvidia-smi.txt" 2>&1; then
  nvidia-smi --query-gpu=name,memory.total,driver_version,pcie.link.gen.max,pcie.link.width.max \
    --format=csv >>"$out/nvidia-smi.txt" 2>&1
  say "nvidia-smi: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -1)"
else
  gpu=no
  say "nvidia-smi: not usable here ($(head -c 200 "$out/nvidia-smi.txt" | tr '\n' ' '))"
fi
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
[ $sim = yes ] && sanitizer=""  # it checks CUDA's memory, not the simulated device's
if [ -n "$sanitizer" ]; then say "compute-sanitizer: $sanitizer"; else say "compute-sanitizer: NOT FOUND"; fi
export PATH="$PATH:/usr/local/cuda/bin"
say "nvcc: $(nvcc --version 2>/dev/null | tail -1)"
if [ -f .gpucarry/env.sh ]; then
  # shellcheck source=/dev/null
  source .gpucarry/env.sh
elif [ $sim = yes ]; then
  say "no .gpucarry/: this machine's MPI ($(command -v mpiexec))"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
else
  say "no .gpucarry/: run perf/gpu/carry.sh on the build machine and carry .gpucarry"
  exit 1
fi
hello=/tmp/ckpt_mpi_hello
run "mpi hello (4 ranks)" 5 60 bash -c "mpicc perf/gpu/mpi_hello.c -o $hello && mpiexec -n 4 $hello" ||
  { say "MPI does not work: stopping"; exit 1; }

# ---- 2. build -----------------------------------------------------------------------------------
targets=(gpu_cuda_device gpu_cuda_ranks_4 gpu_bench unit_gpu_plan device_pipeline trace_nvtx_4 nvtx_record ckpt_cli finegrain)
if [ $sim = yes ]; then
  bdir=$root/build-gpu-sim
  device=(-DCKPT_ENABLE_CUDA=OFF -DCKPT_ENABLE_HIP=OFF -DCKPT_ENABLE_SIMGPU=ON)
  targets+=(gpu_stream_device_fallback)  # the simulated build's own gpu test
  build_limit=${GPU_BUILD_LIMIT:-900}    # 2 shared cores here, not the GPU machine's 16
else
  bdir=$root/build-gpu
  device=(-DCKPT_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90)
  build_limit=${GPU_BUILD_LIMIT:-330}
fi
run "configure" 20 120 cmake -S . -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${device[@]}" \
  -DCKPT_ENABLE_HDF5=OFF -DCKPT_ENABLE_KOKKOS=OFF -DCKPT_BUILD_APPS=OFF -DCKPT_ENABLE_FORTRAN=OFF \
  -DCKPT_BUILD_PERF=ON || { say "configure failed: stopping"; exit 1; }
# The simulated build also builds what CI's GPU variants build (.ci/gpu-targets: the libraries, the tools
# and the directories of every gpu-labelled test), since CI runs this script as its simulated-device step.
[ $sim = yes ] && targets+=($(python3 .ci/gpu-targets "$bdir"))
run "build" 60 "$build_limit" cmake --build "$bdir" -j "$(nproc)" --target "${targets[@]}" ||
  { say "build failed: stopping"; exit 1; }

# ---- 3. GPU steps -------------------------------------------------------------------------------
if [ $build_only = yes ]; then
  say "--build-only: built; stopping before the first GPU step"
  exit "$failed"
fi
if [ "$gpu" = no ]; then
  say "no GPU on this machine: checks and the CUDA build ran; stopping before the first GPU step (ctest -L gpu)"
  exit 3
fi
# The full gpu label: the device tests, trace_nvtx_4 (NVTX ranges of a 4-rank job through the recording
# injection library) and trace_nvtx_report, which draws plots and needs matplotlib.
skip_report=()
if ! python3 -c "import matplotlib" 2>/dev/null; then
  skip_report=(-E trace_nvtx_report)
  say "python3 has no matplotlib here: trace_nvtx_report left out of ctest -L gpu"
fi
# The simulated device's label holds the mutation check too (about a minute alone).
run "ctest -L gpu" 30 "$([ $sim = yes ] && echo 420 || echo 180)" ctest --test-dir "$bdir" --output-on-failure \
  --timeout "$([ $sim = yes ] && echo 300 || echo 120)" -L gpu "${skip_report[@]}"
run "the CPU-side device tests" 10 60 ctest --test-dir "$bdir" --output-on-failure --timeout 60 \
  -R "unit_gpu_plan|device_pipeline"
gtest=$bdir/tests/gpu/gpu_cuda_device
if [ -z "$sanitizer" ]; then
  say "compute-sanitizer memcheck/initcheck: SKIPPED ($([ $sim = yes ] && echo 'simulated device: not CUDA memory' || echo 'not installed here'))"
else
  run "compute-sanitizer memcheck --leak-check full" 30 150 "$sanitizer" --tool memcheck --leak-check full \
    --error-exitcode 1 --log-file "$out/memcheck.log" "$gtest" --gtest_brief=1 || true
  run "compute-sanitizer initcheck" 30 120 "$sanitizer" --tool initcheck --error-exitcode 1 \
    --log-file "$out/initcheck.log" "$gtest" --gtest_brief=1 --gtest_filter='-CudaRuntime.ACheckpointSixteenTimesThePool*' || true
  grep -h "ERROR SUMMARY\|LEAK SUMMARY" "$out"/memcheck.log "$out"/initcheck.log 2>/dev/null | tee -a "$log"
fi
csv=$out/gpu_bench.csv
: >"$csv"
bench=$bdir/perf/gpu/gpu_bench
mkdir -p /tmp/ckpt-gpu-bench
quick=()
[ $sim = yes ] && quick=(--quick)  # memcpy on 2 cores: 64 MiB and 256 MiB, one repetition
sizes=${GPU_BENCH_SIZES:-$([ $sim = yes ] && echo 0.0625 || echo 1,4,16)}
run "gpu_bench, 1 rank" 60 200 mpiexec -n 1 "$bench" --sizes "$sizes" --dir /tmp/ckpt-gpu-bench \
  --csv "$csv" "${quick[@]}" || true
for n in 2 4; do
  smi=""
  if [ $sim = no ]; then
    nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader -lms 200 \
      >"$out/apps-$n.csv" 2>/dev/null &
    smi=$!
  fi
  run "gpu_bench, $n ranks on the GPU" 20 60 mpiexec -n "$n" "$bench" --only shared --dir /tmp/ckpt-gpu-bench \
    --csv "$csv" "${quick[@]}" || true
  if [ -n "$smi" ]; then
    kill "$smi" 2>/dev/null
    wait "$smi" 2>/dev/null
    say "$n ranks: $(cut -d, -f1 "$out/apps-$n.csv" | sort -u | grep -c .) processes held a context (want $n)"
  else
    say "$n ranks: contexts per rank not counted (simulated device: no nvidia-smi)"
  fi
done
cat "$out"/apps-*.csv >"$out/apps.csv" 2>/dev/null && rm -f "$out"/apps-*.csv
python3 perf/gpu/table.py "$csv" >"$out/gpu_bench.md" 2>>"$log" && cat "$out/gpu_bench.md" | tee -a "$log"
# Issue 15 on a machine with cores to spare (last: only with time left): the seed-000 loop, 2 ranks bound
# to their cores, ckpt's threads on the idle ones (thread_cpus auto). No ADIOS2 here.
run "finegrain, 2 ranks of 16 cores" 40 90 mpiexec -n 2 --bind-to core "$bdir/perf/finegrain" --bytes 1M --steps 100 \
  --compute-ms 4 --reps 5 --dir /tmp/ckpt-finegrain --csv "$out/finegrain.csv" \
  --modes none,memcpy,ckpt-coalesce-fsync,ckpt-coalesce-null,series-coalesce-fsync,series-wait-end || true
say "done: $([ $failed -eq 0 ] && echo 'every step passed' || echo 'some steps FAILED, see above')"
exit $failed
