#!/usr/bin/env bash
# Incremental checkpoints (issue 36) in the two applications, checkpointing every step: amr_sedov (a
# blast wave on AMR blocks: early on most of the mesh is at rest, but regrids move blocks between ranks)
# and qmc_walkers (every walker moves every step: nothing to save). Per application and repetition the
# two variants alternate, both with index_format 2 and every checkpoint kept (so that `du` counts what
# each one stored): `full` (incremental off) and `incremental` (on, a full checkpoint every 10; pieces
# of 64 KiB for amr_sedov, whose variables hold 38-128 KiB per rank at max level 6, 256 KiB for
# qmc_walkers --size medium, 16 MiB per rank). Prints per run the application's run time and the bytes on disk (du, holes not
# counted), then the medians and the ratios incremental / full.
#   bash perf/run_incremental_apps.sh [reps] [amr_tmax] [qmc_steps] [ranks]
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
reps=${1:-3} tmax=${2:-0.002} qsteps=${3:-100} ranks=${4:-2}
amr=build/apps/amr_sedov/amr_sedov qmc=build/apps/qmc_walkers/qmc_walkers
tmp=$(mktemp -d /tmp/ckpt-incr-apps.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
results=$tmp/results.txt
: >"$results"
run() {  # app variant rep
  local app=$1 variant=$2 d=$tmp/$1-$2 inc=0 log secs
  [ "$variant" = incremental ] && inc=1
  rm -rf "$d"
  if [ "$app" = amr_sedov ]; then
    log=$(CKPT_INDEX_FORMAT=2 CKPT_INCREMENTAL=$inc CKPT_INCREMENTAL_PIECE_BYTES=64K CKPT_KEEP=1000000 \
            mpiexec -n "$ranks" --oversubscribe "$amr" \
            --tmax "$tmax" --max-level 6 --checkpoint-every 1 --dir "$d" 2>&1)
    secs=$(sed -n 's/^io:.* run \([0-9.]*\) s.*/\1/p' <<<"$log")
  else
    log=$(CKPT_INDEX_FORMAT=2 CKPT_INCREMENTAL=$inc CKPT_KEEP=1000000 mpiexec -n "$ranks" --oversubscribe "$qmc" \
            --steps "$qsteps" --walkers 500 --size medium --checkpoint-every 1 --dir "$d" 2>&1)
    secs=$(sed -n 's/.*run time \([0-9.]*\) s.*/\1/p' <<<"$log" | head -1)
  fi
  if [ -z "$secs" ]; then echo "$app $variant: no run time in its output:"; echo "$log" | tail -20; exit 1; fi
  local kib steps
  kib=$(du -sk "$d" | cut -f1)
  steps=$(find "$d" -maxdepth 1 -name 'ckpt.[0-9]*' | wc -l)
  echo "$app $variant rep $3: run $secs s, $steps checkpoints, $kib KiB on disk"
  echo "$app $variant $secs $kib $steps" >>"$results"
  rm -rf "$d"
}
for r in $(seq 1 "$reps"); do
  for app in amr_sedov qmc_walkers; do
    if [ $((r % 2)) = 1 ]; then run "$app" full "$r"; run "$app" incremental "$r"
    else run "$app" incremental "$r"; run "$app" full "$r"; fi
  done
done
python3 - "$results" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
for app in ("amr_sedov", "qmc_walkers"):
    med = {}
    for v in ("full", "incremental"):
        r = [x for x in rows if x[0] == app and x[1] == v]
        med[v] = (statistics.median(float(x[2]) for x in r), statistics.median(float(x[3]) for x in r), r[0][4])
    f, i = med["full"], med["incremental"]
    print(f"{app}: full run {f[0]:.3f} s, {f[1] / 1024:.1f} MiB ({f[2]} checkpoints); incremental run {i[0]:.3f} s, "
          f"{i[1] / 1024:.1f} MiB; ratio run {i[0] / f[0]:.3f}, bytes {i[1] / f[1]:.3f}")
EOF
