#!/usr/bin/env bash
# README's main job: qmc_walkers (DMC, 4 ranks, oversubscribed) checkpoints asynchronously every MC
# step, is killed with SIGKILL part way, restarts from the newest complete checkpoint, and must end
# bit for bit where an uninterrupted run ends (same `energy:` and `state:` lines).
# Run from anywhere after `bash .ci/setup`.
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
dir=$(mktemp -d /tmp/ckpt-qmc-demo.XXXXXX)
python3 tests/apps/qmc_check.py --mpiexec mpiexec --app build/apps/qmc_walkers/qmc_walkers \
  kill --steps 300 --stop 100 --walkers 400 --dir "$dir" -- --size small
rm -rf "$dir"
