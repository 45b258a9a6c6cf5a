#!/usr/bin/env python3
"""Kill-and-restart check of apps/mini_amr, its jobs run as children under mpiexec.

  1. an uninterrupted run on 4 ranks to step --steps writes the reference listing (each block's id,
     level, coordinates and interior hash, in id order; independent of the rank count);
  2. a run on 4 ranks checkpointing every --every steps (slowed by --delay-ms per step) is killed with
     SIGKILL - mpiexec and every rank, its whole session - a moment (--kill-delay) after a checkpoint of
     step --kill-after or later has committed, so that the steps after it are lost;
  3. a copy of its checkpoint directory is restarted on each of --ranks-after (3, 2 and 4 ranks) to
     step --steps: each must restore the newest committed checkpoint, go through regrids that move
     blocks between ranks, and end with a listing bit for bit the reference's.
The killed job's Open MPI shared-memory segments are removed. Exit status 0 on success; a failure
prints the output of the job that failed.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from mpijob import check, committed_steps, kill_session, run, shm_names, wait_committed  # noqa: E402


def field(out, name):
    m = re.findall(rf"^{name}: (.*)$", out, re.M)
    if not m:
        print(out)
        sys.exit(f"FAIL: no '{name}:' line")
    return m[-1].strip()


SUMMARY = re.compile(r"steps (\d+)\.\.(\d+), (\d+) blocks \((\d+)\.\.(\d+) during the run\), (\d+) regrids, "
                     r"(\d+) blocks moved between ranks, (\d+) ranks")


def summary(out):
    m = SUMMARY.match(field(out, "summary"))
    if not m:
        print(out)
        sys.exit("FAIL: cannot parse the summary line")
    keys = ("first", "last", "blocks", "min_blocks", "max_blocks", "regrids", "moved", "ranks")
    return dict(zip(keys, map(int, m.groups())))


def read(path):
    with open(path, "rb") as f:
        return f.read()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mpiexec", default="mpiexec")
    ap.add_argument("--app", required=True)
    ap.add_argument("--dir", required=True, help="scratch directory (removed first, and after a success)")
    ap.add_argument("--steps", type=int, default=48)
    ap.add_argument("--every", type=int, default=4, help="checkpoint interval of the killed run and the restarts")
    ap.add_argument("--kill-after", type=int, default=8, help="kill once a checkpoint of this step or later committed")
    ap.add_argument("--delay-ms", type=int, default=40, help="sleep per step of the killed run")
    ap.add_argument("--kill-delay", type=float, default=0.1,
                    help="seconds between seeing the commit and the kill (steps after the checkpoint are lost)")
    ap.add_argument("--ranks-after", type=int, nargs="+", default=[3, 2, 4])
    # Everything after "--" goes to mini_amr unchanged (mesh shape: --cells, --max-level, ...).
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    a = ap.parse_args(argv[:cut])
    extra = argv[cut + 1:]
    shutil.rmtree(a.dir, ignore_errors=True)
    os.makedirs(a.dir)

    def mpi(n, name, *args):
        return [a.mpiexec, "-n", str(n), a.app, "--steps", str(a.steps), "--dir", os.path.join(a.dir, name),
                "--output", os.path.join(a.dir, name + ".txt")] + list(args) + extra

    ref = run(mpi(4, "ref"), "uninterrupted, 4 ranks, no checkpoint")
    reference = read(os.path.join(a.dir, "ref.txt"))
    s = summary(ref)
    ok = check(s["min_blocks"] < s["max_blocks"] and s["regrids"] > 0,
               f"the mesh changes: {s['regrids']} regrids, {s['min_blocks']}..{s['max_blocks']} blocks")
    ok &= check(s["moved"] > 0, f"{s['moved']} blocks moved between ranks")

    killed = os.path.join(a.dir, "killed")
    shm_before = shm_names()
    job = subprocess.Popen(mpi(4, "killed", "--checkpoint-every", str(a.every), "--delay-ms", str(a.delay_ms)),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    wait_committed(job, killed, a.kill_after)
    time.sleep(a.kill_delay)
    kill_session(job, shm_before)
    newest = max(committed_steps(killed))
    print(f"killed with SIGKILL; newest committed checkpoint: step {newest}")
    ok &= check(newest < a.steps, f"killed before the end (step {newest} < {a.steps})")
    if os.environ.get("CKPT_INDEX_FORMAT") == "2":  # ctest mini_amr_kill_restart_index2
        ok &= check(os.path.isfile(os.path.join(killed, f"ckpt.{newest}", "catalog")),
                    "written with the two-level index (CKPT_INDEX_FORMAT=2: a catalog beside the root)")

    for n in a.ranks_after:
        name = f"restart{n}"
        shutil.copytree(killed, os.path.join(a.dir, name), symlinks=True)
        out = run(mpi(n, name, "--checkpoint-every", str(a.every), "--restart"), f"--restart, {n} ranks")
        m = re.search(r"^restored: step (\d+), (\d+) blocks, on (\d+) ranks$", out, re.M)
        ok &= check(m is not None and int(m.group(1)) == newest and int(m.group(3)) == n,
                    f"{n} ranks restored step {m.group(1) if m else None} (the newest: {newest})")
        r = summary(out)
        ok &= check(r["regrids"] > 0 and r["moved"] > 0,
                    f"{n} ranks: {r['regrids']} regrids after the restart, {r['moved']} blocks moved between ranks")
        ok &= check(read(os.path.join(a.dir, name + ".txt")) == reference,
                    f"{n} ranks: every block's interior at step {a.steps} is bit for bit the uninterrupted run's "
                    f"({len(reference.splitlines())} blocks)")
        ok &= check(field(out, "state") == field(ref, "state"), f"{n} ranks: state {field(out, 'state')}")
    if ok:
        shutil.rmtree(a.dir, ignore_errors=True)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
