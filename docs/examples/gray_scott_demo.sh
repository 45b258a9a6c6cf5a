#!/usr/bin/env bash
# The Python example (docs/examples/gray_scott.py, numpy + mpi4py + ckpt.Runtime) as docs/examples/demo.sh
# runs the C++ one: a 4-rank run that checkpoints asynchronously every 50 steps is killed with SIGKILL part
# way, restarts from the newest complete checkpoint on 4 ranks, and must end bit for bit where an
# uninterrupted run ends; then the same checkpoint restarts on 3 ranks, and `ckpt ls` lists it. Run from the
# repository root after `bash .ci/setup` (it uses build/runtime/libckpt.so and python/ckpt). ~30 s.
set -euo pipefail
cd "$(dirname "$0")/../.."
lib=build/runtime/libckpt.so cli=build/tools/ckpt
[[ -e $lib ]] || { echo "demo: $lib is not built; run 'bash .ci/setup' first" >&2; exit 1; }
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH} CKPT_LIBRARY=$PWD/$lib
source tests/support/mpi_launch.sh  # mpiexec -n 4 on any core count, as any user
ckpt_mpi_prepare 4
dir=$(mktemp -d /tmp/ckpt-gray-scott.XXXXXX)
app=(python3 -m mpi4py docs/examples/gray_scott.py --n 256 --steps 1500 --every 50)
state() { sed -n 's/^state: //p' <<<"$1"; }

echo "== 1. uninterrupted reference run (null transport: no I/O)"
ref=$(mpiexec -n 4 "${app[@]}" --dir "$dir/ref" --transport null | tee /dev/stderr)

echo "== 2. run with asynchronous checkpoints to $dir/run, killed with SIGKILL once step 500 is committed"
shm() { python3 -c 'import sys; sys.path.insert(0, "tests/support"); import mpijob; '"$1"; }
shm_before=$(shm 'print(repr(mpijob.shm_names()))')
setsid mpiexec -n 4 "${app[@]}" --dir "$dir/run" --compute-ms 5 > "$dir/killed.log" 2>&1 &
pid=$!
until [[ -d $dir/run/ckpt.500 || -d $dir/run/ckpt.550 ]]; do
  kill -0 "$pid" 2>/dev/null || { cat "$dir/killed.log"; echo "demo: the run ended before it was killed"; exit 1; }
  sleep 0.05
done
# Open MPI puts each rank in a process group of its own: kill the whole session, ranks included.
pkill -KILL -s "$pid" || true
wait "$pid" 2>/dev/null || true
while pgrep -s "$pid" >/dev/null; do sleep 0.1; done
shm "mpijob.remove_stale_shm($shm_before)"  # the shared-memory files a killed Open MPI job leaves in /dev/shm
echo "checkpoint directory after the kill:"; ls "$dir/run"
cp -r "$dir/run" "$dir/run3"  # for step 4

echo "== 3. restart on 4 ranks from the newest complete checkpoint and finish"
out=$(mpiexec -n 4 "${app[@]}" --dir "$dir/run" --restart | tee /dev/stderr)
grep -q "verified bit for bit" <<<"$out" || { echo "demo: the restart did not load a verified checkpoint"; exit 1; }

echo "== 4. the checkpoints the killed run left, restarted on 3 ranks (another decomposition of the rows)"
out3=$(mpiexec -n 3 "${app[@]}" --dir "$dir/run3" --restart | tee /dev/stderr)
if [[ -x $cli ]]; then "$cli" ls "$dir/run"; fi

if [[ "$(state "$out")" == "$(state "$ref")" && "$(state "$out3")" == "$(state "$ref")" ]]; then
  echo "demo: OK - killed and restarted on 4 ranks, and restarted on 3, the runs end bit for bit where the" \
       "uninterrupted run ends ($(state "$ref"))"
  rm -rf "$dir"
else
  echo "demo: FAILED - states $(state "$out") (4 ranks) and $(state "$out3") (3 ranks) differ from the" \
       "uninterrupted run's $(state "$ref") (files kept in $dir)"
  exit 1
fi
