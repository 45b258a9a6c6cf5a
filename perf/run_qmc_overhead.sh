#!/usr/bin/env bash
# Overhead of checkpointing every MC step in apps/qmc_walkers vs the same run with the null transport
# (NO-I/O), per transport and --size, 4 ranks oversubscribed. Prints the app's summary lines and
# writes a markdown table to results/qmc_overhead.md. Other CKPT_* variables apply to both runs (e.g.
# CKPT_ON_BUSY=coalesce; the table names on_busy).
#   bash perf/run_qmc_overhead.sh [steps] [walkers] [transports] [sizes]
#   CKPT_ON_BUSY=coalesce bash perf/run_qmc_overhead.sh 50 500 posix small   (hdf5-sync refuses coalesce)
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
steps=${1:-50} walkers=${2:-500} transports=${3:-posix,mpiio,rbio,hdf5,hdf5-sync} sizes=${4:-small,medium,large}
on_busy=${CKPT_ON_BUSY:-wait}
app=${QMC_APP:-build/apps/qmc_walkers/qmc_walkers}  # QMC_APP: another build (a same-run baseline; not CKPT_*: the Runtime refuses unknown CKPT_ variables)
out=results/qmc_overhead.md
mkdir -p results
tmp=$(mktemp -d /tmp/ckpt-qmc-perf.XXXXXX)
echo "| transport | on_busy | size | run (s) | null run (s) | overhead | blocked (s) |" > "$out"
echo "|---|---|---|---|---|---|---|" >> "$out"
for size in ${sizes//,/ }; do
  for t in ${transports//,/ }; do
    log=$(mpiexec -n 4 --oversubscribe "$app" --steps "$steps" --walkers "$walkers" --checkpoint-every 1 \
            --dir "$tmp/$t-$size" --size "$size" --transport "$t" --compare-null 2>&1 | grep '^summary' || true)
    echo "== $t $size"; echo "$log"
    run=$(sed -n "s/.*run time \([0-9.]*\) s.*/\1/p" <<<"$log" | head -1)
    blk=$(sed -n 's/.*time blocked in checkpoint \([0-9.]*\) s.*/\1/p' <<<"$log" | head -1)
    null=$(sed -n 's/.*null-transport run \([0-9.]*\) s.*/\1/p' <<<"$log")
    ovh=$(sed -n 's/.*overhead \([-0-9.]*\) %.*/\1/p' <<<"$log")
    echo "| $t | $on_busy | $size | $run | $null | $ovh % | $blk |" >> "$out"
    rm -rf "$tmp/$t-$size"
  done
done
rm -rf "$tmp"
cat "$out"
