#!/usr/bin/env python3
"""Crash consistency (issue 9): SIGKILL a checkpointing 4-rank job at random moments, then restart.

Each trial starts `crash_app` (a checkpoint every step; CKPT_FLUSH_DELAY_MS and small chunks stretch
the flush so kills land in every phase), waits until a first checkpoint is committed, sleeps a random
time, and kills the whole session with SIGKILL (Open MPI gives each rank its own process group, so
`pkill -KILL -s`), waiting until no process of it is left. The phase the kill hit is read from the
directory the job left (the last in-flight checkpoint: no temporary directory = capture/compute,
partial data = flush, all data but no index = fsync/agreement, an index in ckpt.N.tmp = commit before
the rename, ckpt.N.old / latest.tmp / a stale `latest` = rename and link). Then `crash_app --check`
(4 or 3 ranks) must find a complete checkpoint with latest(), restart() must load that very step,
and the restored data must equal what was captured for it bit for bit.

  crash_harness.py --mpiexec mpiexec --app build/tests/reliability/crash_app --transport posix \
                   --dir /tmp/crash --trials 100          # the nightly size

With --levels none|partner|xor (issue 19) the job has a node-local level (4 ranks as 4 simulated nodes,
<trial>/local/node<k>, drain_every 2, that redundancy), so kills land in the local commit, the partner
copy or parity exchange and the drain. The check then runs twice on 4 ranks (a local restart needs the
same layout): as left, and after deleting node 2's directory (a lost node: rebuilt from the partner
copy or the parity, or the drained level), each time bit for bit.
Prints the trials, kills by phase and failures; exit status 1 if any trial failed.
"""
import argparse
import collections
import glob
import os
import random
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from mpijob import kill_session, shm_names  # noqa: E402


def phase_of(d):
    """Phase of the newest in-flight checkpoint, from what the killed job left in `d`."""
    names = os.listdir(d) if os.path.isdir(d) else []
    done = sorted(int(n[5:]) for n in names if re.fullmatch(r"ckpt\.\d+", n))
    tmp = sorted(int(n[5:-4]) for n in names if re.fullmatch(r"ckpt\.\d+\.tmp", n))
    if any(n.endswith(".old") for n in names) or "latest.tmp" in names:
        return "rename/link"
    link = os.path.join(d, "latest")
    if done and os.path.islink(link) and os.readlink(link) != f"ckpt.{done[-1]}":
        return "rename/link"  # renamed in, `latest` not yet replaced
    if not tmp or (done and tmp[-1] < done[-1]):
        return "capture/compute"
    t = os.path.join(d, f"ckpt.{tmp[-1]}.tmp")
    files = os.listdir(t)
    if "index" in files:
        return "commit (index written)"
    if "partner" in files or any(f.startswith("xor.") for f in files):
        return "partner copy / parity"  # the node level's redundancy data (issue 19)
    data = [f for f in files if f != "index"]
    if not data:
        return "capture/open"
    # Compare with the newest complete checkpoint: same layout every step.
    if done:
        ref = os.path.join(d, f"ckpt.{done[-1]}")
        full = all(os.path.exists(os.path.join(ref, f)) and
                   os.path.getsize(os.path.join(t, f)) >= os.path.getsize(os.path.join(ref, f)) for f in data)
        ref_files = [f for f in os.listdir(ref) if f != "index"]
        if full and len(data) == len(ref_files):
            return "fsync/agreement"
    return "flush"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--app", required=True)
    ap.add_argument("--transport", default="posix")
    ap.add_argument("--dir", required=True)
    ap.add_argument("--trials", type=int, default=int(os.environ.get("RELTEST_CRASH_TRIALS", "10")))
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--cells", type=int, default=300000)
    ap.add_argument("--max-delay", type=float, default=0.4, help="seconds after the first commit")
    ap.add_argument("--levels", choices=["none", "partner", "xor"], default=None,
                    help="node-local level with this redundancy (4 simulated nodes)")
    a = ap.parse_args()
    shm_at_start = shm_names()  # Open MPI segments that are not ours: never touched
    if "RELTEST_CRASH_TRIALS" in os.environ:
        a.trials = int(os.environ["RELTEST_CRASH_TRIALS"])
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    mpi = lambda n: [a.mpiexec, "-n", str(n)]
    shutil.rmtree(a.dir, ignore_errors=True)
    os.makedirs(a.dir)
    env = dict(os.environ, CKPT_FLUSH_DELAY_MS="2", CKPT_CHUNK_BYTES="256K")
    phases = collections.Counter()
    failures = 0
    t0 = time.time()
    for t in range(a.trials):
        d = os.path.join(a.dir, f"trial{t}")
        levels = {}
        if a.levels:
            levels = dict(CKPT_LOCAL_DIR=os.path.join(d, "local"), CKPT_RANKS_PER_NODE="1", CKPT_DRAIN_EVERY="2",
                          CKPT_REDUNDANCY=a.levels)
        job = subprocess.Popen(mpi(4) + [a.app, "--dir", d, "--transport", a.transport, "--cells", str(a.cells)],
                               env=dict(env, **levels), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               start_new_session=True)
        deadline = time.time() + 60
        armed = False
        while time.time() < deadline and job.poll() is None:
            if glob.glob(os.path.join(d, "ckpt.[0-9]*[0-9]")):
                armed = True
                break
            time.sleep(0.002)
        time.sleep(rng.uniform(0, a.max_delay))
        alive = job.poll() is None
        kill_session(job, shm_at_start)
        if not armed or not alive:
            out = job.stdout.read().decode(errors="replace") if job.stdout else ""
            print(f"trial {t}: FAIL: the job {'never committed a checkpoint' if not armed else 'ended before the kill'}\n{out}")
            failures += 1
            continue
        phase = phase_of(d)
        if a.levels:
            phase = f"{phase_of(os.path.join(d, 'local', 'node0'))} locally, {phase} in dir"
        phases[phase] += 1
        nranks = 4 if t % 2 == 0 or a.levels else 3
        ok = True
        for lose in ([None, 2] if a.levels else [None]):
            if lose is not None:
                shutil.rmtree(os.path.join(d, "local", f"node{lose}"), ignore_errors=True)
            p = subprocess.run(mpi(nranks) + [a.app, "--dir", d, "--check", "--cells", str(a.cells)],
                               env=dict(os.environ, **levels), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, timeout=120)
            m = re.search(r"check: ok step (\d+)", p.stdout)
            this = p.returncode == 0 and m is not None
            what = f"check on {nranks} ranks" + (f" without node {lose}" if lose is not None else "")
            print(f"trial {t}: killed in {phase}; {what}: {'ok, step ' + m.group(1) if this else 'FAIL'}")
            if not this:
                print(p.stdout)
                ok = False
                break
        if not ok:
            failures += 1
        else:
            shutil.rmtree(d, ignore_errors=True)
    print(f"[crash {a.transport}{' levels ' + a.levels if a.levels else ''}] seed {seed}: trials {a.trials}, kills by phase: "
          + ", ".join(f"{k} {v}" for k, v in sorted(phases.items())) + f"; failures {failures}; {time.time() - t0:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
