#!/usr/bin/env python3
"""Checks of the Fortran example docs/examples/heat3d.f90 (checkpointing through the module ckpt), each
run as a child mpiexec job. The reference is an uninterrupted 4-rank run; every check compares the final
field (the raw file heat3d --out writes) byte for byte with it.

  kill   SIGKILL the whole 4-rank job after a checkpoint is committed, restart on 4 ranks.
  nm     stop at a checkpoint on 4 ranks, restart on 3 ranks; `ckpt ls` shows the C-order shape
         [nz, ny, nx] and the attribute array_order = fortran.
  cxx    a C++ program (read_fortran_ckpt) restarts the Fortran-written checkpoint on 3 ranks with
         another decomposition, compares it with heat3d's field, checkpoints it from C++; heat3d
         restarts from that C++-written checkpoint on 4 ranks and finishes.
Exit status 0 on success; every failure prints the output of the job that failed.
"""
import argparse
import filecmp
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from mpijob import check, kill_session, run, shm_names, wait_committed  # noqa: E402

N = ["40", "36", "32"]  # nx ny nz (Fortran order)
STEPS, EVERY, STOP = "120", "10", "60"


def mpi(a, n, prog=None):
    return [a.mpiexec, "-n", str(n), prog or a.app]


def heat(a, ranks, ckpt_dir, out, what, extra=()):
    args = ["--n", *N, "--steps", STEPS, "--every", EVERY, "--out", out, *extra]
    return run(mpi(a, ranks) + args, what, env={"CKPT_DIR": ckpt_dir})


def reference(a, base):
    ref = os.path.join(base, "ref.bin")
    heat(a, 4, os.path.join(base, "ref"), ref, "uninterrupted, 4 ranks")
    return ref


def restored_step(out):
    m = re.search(r"^restored: step (\d+)", out, re.M)
    return int(m.group(1)) if m else -1


def cmd_kill(a, base):
    ref = reference(a, base)
    d = os.path.join(base, "killed")
    shm_before = shm_names()
    cmd = mpi(a, 4) + ["--n", *N, "--steps", STEPS, "--every", EVERY, "--sleep-us", "20000"]
    job = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                           env=dict(os.environ, CKPT_DIR=d))
    newest = wait_committed(job, d, int(STOP))
    kill_session(job, shm_before)
    print(f"killed with SIGKILL after checkpoint {newest} was committed")
    out = os.path.join(base, "killed.bin")
    cont = heat(a, 4, d, out, "--restart, 4 ranks", ["--restart"])
    ok = check(restored_step(cont) >= newest, f"restarted from step {restored_step(cont)}")
    ok &= check(filecmp.cmp(out, ref, shallow=False), "final field equals the uninterrupted run's bit for bit")
    return ok


def cmd_nm(a, base):
    ref = reference(a, base)
    d = os.path.join(base, "run")
    heat(a, 4, d, os.path.join(base, "stop.bin"), f"4 ranks, stop at {STOP}", ["--stop", STOP])
    ls = run([a.ckpt, "ls", os.path.join(d, f"ckpt.{STOP}")], "ckpt ls")
    print(ls)
    shape = f"[{N[2]}, {N[1]}, {N[0]}]"
    ok = check(re.search(rf"^u\s+f64\s+global\s+\[{N[2]}, {N[1]}, {N[0]}\]", ls, re.M) is not None,
                f"ckpt ls shows u(nx, ny, nz) as the C-order global array {shape}")
    ok &= check("array_order = fortran" in ls, "the array order attribute is recorded")
    out = os.path.join(base, "nm.bin")
    cont = heat(a, 3, d, out, "--restart, 3 ranks", ["--restart"])
    ok &= check(restored_step(cont) == int(STOP), f"restarted from step {restored_step(cont)} on 3 ranks")
    ok &= check(filecmp.cmp(out, ref, shallow=False), "final field (4 -> 3 ranks) equals the uninterrupted run's")
    return ok


def cmd_cxx(a, base):
    ref = reference(a, base)
    d = os.path.join(base, "fortran")
    mid = os.path.join(base, "stop.bin")
    heat(a, 4, d, mid, f"4 ranks, stop at {STOP}", ["--stop", STOP])
    back = os.path.join(base, "from_cxx")
    out = run(mpi(a, 3, a.reader) + ["--dir", d, "--step", STOP, "--n", *N, "--expect", mid, "--write", back],
              "C++ restart of the Fortran checkpoint, 3 ranks")
    ok = check("cxx: ok" in out, out.strip())
    final = os.path.join(base, "cxx.bin")
    cont = heat(a, 4, back, final, "heat3d --restart from the C++-written checkpoint, 4 ranks", ["--restart"])
    ok &= check(restored_step(cont) == int(STOP), f"heat3d restarted from the C++ checkpoint at step {STOP}")
    ok &= check(filecmp.cmp(final, ref, shallow=False), "final field equals the uninterrupted run's")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["kill", "nm", "cxx"])
    ap.add_argument("--mpiexec", default="mpiexec")
    ap.add_argument("--app", required=True, help="heat3d")
    ap.add_argument("--ckpt", help="the ckpt command line (nm)")
    ap.add_argument("--reader", help="read_fortran_ckpt (cxx)")
    ap.add_argument("--dir", required=True, help="scratch directory (removed and recreated)")
    a = ap.parse_args()
    shutil.rmtree(a.dir, ignore_errors=True)
    os.makedirs(a.dir)
    ok = {"kill": cmd_kill, "nm": cmd_nm, "cxx": cmd_cxx}[a.what](a, a.dir)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
