#!/usr/bin/env bash
# README's main job: qmc_walkers (DMC, 4 ranks) checkpoints asynchronously every MC step, is killed with
# SIGKILL part way, restarts from the newest complete checkpoint, and must end bit for bit where an
# uninterrupted run ends (same `energy:` and `state:` lines). Works on any core count and in a clean
# environment: tests/support/mpi_launch.sh prepares mpiexec for 4 ranks (oversubscribed on fewer cores).
# Run from anywhere after `bash .ci/setup`.
set -euo pipefail
cd "$(dirname "$0")/../.."
app=build/apps/qmc_walkers/qmc_walkers
[[ -x $app ]] || { echo "demo: $app is not built; run 'bash .ci/setup' first" >&2; exit 1; }
source tests/support/mpi_launch.sh
ckpt_mpi_prepare 4
dir=$(mktemp -d /tmp/ckpt-qmc-demo.XXXXXX)
trap 'rm -rf "$dir"' EXIT
python3 tests/apps/qmc_check.py --mpiexec mpiexec --app "$app" \
  kill --steps 300 --stop 100 --walkers 400 --dir "$dir" -- --size small
