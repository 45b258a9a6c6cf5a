#!/usr/bin/env bash
# apps/qmc_walkers checkpointing every MC step (issue 15): the null transport, posix with on_busy wait and
# coalesce, and layout series with wait and coalesce, interleaved round by round (null, wait, coalesce,
# series-wait, series-coalesce, null, ...) in one run, 4 ranks oversubscribed. Each mode is a separate
# mpiexec (the app's --compare-null cannot be used with CKPT_LAYOUT=series: its null run keeps the layout,
# and series needs the posix transport). Prints per mode the run times, their median, the median over the
# null runs' median, the median time blocked in checkpoint() (max rank) and whether every run ended in the
# null run's final state; writes the table to results/qmc_series.md. Other CKPT_* variables apply to all.
#   bash perf/run_qmc_series.sh [steps] [walkers] [rounds] [size]
#   bash perf/run_qmc_series.sh 50 500 5 small
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
steps=${1:-50} walkers=${2:-500} rounds=${3:-5} size=${4:-small}
app=build/apps/qmc_walkers/qmc_walkers
out=results/qmc_series.md
modes="null wait coalesce series-wait series-coalesce"
mkdir -p results
tmp=$(mktemp -d /tmp/ckpt-qmc-series.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
declare -A runs blocked states
for ((r = 0; r < rounds; ++r)); do
  for m in $modes; do
    case $m in
      null) env=(CKPT_ON_BUSY=wait CKPT_LAYOUT=directory) t=null ;;
      wait | coalesce) env=(CKPT_ON_BUSY=$m CKPT_LAYOUT=directory) t=posix ;;
      series-*) env=(CKPT_ON_BUSY=${m#series-} CKPT_LAYOUT=series) t=posix ;;
    esac
    log=$(env "${env[@]}" mpiexec -n 4 --oversubscribe "$app" --steps "$steps" --walkers "$walkers" \
            --checkpoint-every 1 --dir "$tmp/$m" --size "$size" --transport "$t" 2>&1 | grep '^summary\|^state' || true)
    run=$(sed -n 's/.*run time \([0-9.]*\) s.*/\1/p' <<<"$log" | head -1)
    blk=$(sed -n 's/.*time blocked in checkpoint \([0-9.]*\) s.*/\1/p' <<<"$log" | head -1)
    st=$(sed -n 's/^state: //p' <<<"$log" | head -1)
    [[ -n $run ]] || { echo "run_qmc_series: $m failed in round $r:"; echo "$log"; exit 1; }
    echo "round $r $m: run $run s, blocked $blk s"
    runs[$m]+="$run " blocked[$m]+="$blk " states[$m]+="$st|"
    rm -rf "${tmp:?}/$m"
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print v[int(NR/2)+1]}'; }
null_med=$(median <<<"${runs[null]}")
{
  echo "| mode | run s, $rounds rounds | median run s | x null (median) | blocked s (median, max rank) | final state |"
  echo "|---|---|---|---|---|---|"
  for m in $modes; do
    med=$(median <<<"${runs[$m]}")
    same="same as null"
    [[ "${states[$m]}" == "${states[null]}" ]] || same="DIFFERENT"
    echo "| $m | ${runs[$m]% } | $med | $(awk -v a="$med" -v b="$null_med" 'BEGIN {printf "%.2f", a / b}') |" \
         "$(median <<<"${blocked[$m]}") | $same |"
  done
} > "$out"
cat "$out"
