#!/usr/bin/env bash
# The main job: a 4-rank run that checkpoints asynchronously every 5 steps, is killed with SIGKILL
# part way, restarts from the newest complete checkpoint, and must end bit for bit where an
# uninterrupted run ends. Run from the repository root after `bash .ci/setup`.
set -euo pipefail
cd "$(dirname "$0")/../.."
app=build/docs/examples/heat_restart
[[ -x $app ]] || { echo "demo: $app is not built; run 'bash .ci/setup' first" >&2; exit 1; }
source tests/support/mpi_launch.sh  # mpiexec -n 4 on any core count, as any user
ckpt_mpi_prepare 4
dir=$(mktemp -d /tmp/ckpt-demo.XXXXXX)
args=(--cells 2000000 --steps 400 --every 5)
mpi=(mpiexec -n 4)

echo "== 1. uninterrupted reference run (null transport: no I/O)"
ref=$("${mpi[@]}" "$app" "${args[@]}" --dir "$dir/ref" --transport null | tee /dev/stderr | sed -n 's/^state: //p')

echo "== 2. run with asynchronous checkpoints to $dir/run, killed with SIGKILL after 3 s"
setsid "${mpi[@]}" "$app" "${args[@]}" --dir "$dir/run" --compute-ms 5 > "$dir/killed.log" 2>&1 &
pid=$!
sleep 3
# Open MPI puts each rank in a process group of its own: kill the whole session, ranks included.
pkill -KILL -s "$pid" || true
wait "$pid" 2>/dev/null || true
while pgrep -s "$pid" >/dev/null; do sleep 0.1; done
tail -n 2 "$dir/killed.log" || true
echo "checkpoint directory after the kill:"; ls "$dir/run"

echo "== 3. restart from the newest complete checkpoint and finish"
out=$("${mpi[@]}" "$app" "${args[@]}" --dir "$dir/run" --restart | tee /dev/stderr)
got=$(sed -n 's/^state: //p' <<<"$out")
grep -q "verified bit for bit" <<<"$out" || { echo "demo: the restart did not load a verified checkpoint"; exit 1; }
if [ "$got" = "$ref" ]; then
  echo "demo: OK - the restarted run ends bit for bit where the uninterrupted run ends (state $got)"
  rm -rf "$dir"
else
  echo "demo: FAILED - state $got differs from the uninterrupted run's $ref (files kept in $dir)"
  exit 1
fi
