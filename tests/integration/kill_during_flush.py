#!/usr/bin/env python3
"""SIGKILL a checkpointing MPI job while a checkpoint is being flushed, then restart it.

Each trial starts `heat_restart` on 4 ranks with a slowed flush (CKPT_TEST_FLUSH_DELAY_MS), waits until a
checkpoint has been committed and the next one is in flight (a ckpt.<n>.tmp directory with data
files), kills the whole job with SIGKILL, then restarts (on 4 or 3 ranks). The restart must load a
complete checkpoint, verify the restored state bit for bit against a recomputation, and finish with
the same `state:` digest as an uninterrupted run, from a checkpoint at least as new as the newest one
complete on disk when the kill was sent. --env KEY=VALUE adds options (e.g. CKPT_ON_BUSY=coalesce).
"""
import argparse
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


def run(cmd, env=None):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=240)
    return p.returncode, p.stdout


def state_of(out):
    m = re.findall(r"^state: (\w+)$", out, re.M)
    return m[-1] if m else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--app", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for the killed runs")
    a = ap.parse_args()
    shm_at_start = shm_names()  # Open MPI segments that are not ours: never touched
    rng = random.Random(a.seed)
    steps = "300"
    common = ["--cells", "400000", "--steps", steps, "--every", "2"]
    mpi = lambda n: [a.mpiexec, "-n", str(n)]

    shutil.rmtree(a.dir, ignore_errors=True)
    os.makedirs(a.dir)
    rc, out = run(mpi(4) + [a.app] + common + ["--dir", os.path.join(a.dir, "ref"), "--transport", "null"])
    ref = state_of(out)
    if rc != 0 or ref is None:
        print(out)
        print("FAIL: reference run failed")
        return 1

    env = dict(os.environ, CKPT_TEST_FLUSH_DELAY_MS="15", CKPT_CHUNK_BYTES="256K")
    env.update(kv.split("=", 1) for kv in a.env)
    failures, in_flight_kills = 0, 0
    for t in range(a.trials):
        d = os.path.join(a.dir, f"trial{t}")
        job = subprocess.Popen(mpi(4) + [a.app] + common + ["--dir", d, "--compute-ms", "3"], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.time() + 120
        armed = False
        while time.time() < deadline and job.poll() is None:
            tmp = [x for x in glob.glob(os.path.join(d, "ckpt.*.tmp")) if glob.glob(os.path.join(x, "data.*"))]
            if os.path.islink(os.path.join(d, "latest")) and tmp:
                armed = True
                break
            time.sleep(0.005)
        time.sleep(rng.uniform(0, 0.03))
        flushing = bool(glob.glob(os.path.join(d, "ckpt.*.tmp")))
        complete = [int(m.group(1)) for x in os.listdir(d) if (m := re.fullmatch(r"ckpt\.(\d+)", x))]
        # Open MPI gives each rank a process group of its own: kill the whole session, ranks included,
        # and wait until none is left (an orphaned rank would keep writing).
        kill_session(job, shm_at_start)
        if not armed:
            print(f"trial {t}: FAIL: the job never had a committed and an in-flight checkpoint")
            failures += 1
            continue
        in_flight_kills += flushing
        nranks = 4 if t % 2 == 0 else 3
        rc, out = run(mpi(nranks) + [a.app] + common + ["--dir", d, "--restart"])
        loaded = re.search(r"loaded checkpoint (\d+)", out)
        newest = max(complete, default=-1)
        ok = rc == 0 and loaded and "verified bit for bit" in out and state_of(out) == ref
        ok = ok and int(loaded.group(1)) >= newest
        print(f"trial {t}: killed with a flush in flight: {flushing}; newest complete then: {newest}; restart on "
              f"{nranks} ranks from {loaded.group(1) if loaded else 'nothing'}: {'ok' if ok else 'FAIL'}")
        if not ok:
            print(out)
            failures += 1
    print(f"trials: {a.trials}, kills during a flush: {in_flight_kills}, failures: {failures}")
    if in_flight_kills == 0:
        print("FAIL: no kill landed during a flush")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
