#!/usr/bin/env python3
"""What the Python layer (ckpt.Runtime, ctypes over the C API) adds to checkpointing, measured against the
same checkpoints taken through the C++ API (perf/py_overhead.cpp) in the same run:

  big    one 64 MiB f64 array per rank (a box of a global array): the time checkpoint() blocks, from Python
         and from C++; the goal is a ratio <= 1.2
  small  100 local f64 arrays of 1 KiB per rank: checkpoint()'s fixed cost, Python minus C++ (goal <= 50 us
         per call), and protect() per region

Every checkpoint is waited for, untimed, before the next. Times are wall-clock around the call on each rank,
the maximum over the ranks, then the median over the checkpoints of every round (the first checkpoint of
each job is dropped: warm-up). Rounds alternate which side runs first; the machine may be shared, so
medians and the spread of the per-round medians are printed, with the ratio of this run. The Python
overhead of a call is measured on the call itself: its wall time minus the time ckpt::Runtime::checkpoint
took inside it (the Ticket's blocked_s), Python's minus C++'s - a difference of two wall-time medians of
captures that vary by hundreds of microseconds under load would drown it.

    python3 perf/py_overhead.py                      # 2 ranks, 3 rounds of 20 checkpoints per side and mode
    python3 perf/py_overhead.py --ranks 4 --rounds 5 --repeats 30 --csv /tmp/py_overhead.csv
    python3 perf/py_overhead.py --before /tmp/old/python    # also ckpt.Runtime of another copy of the package

From the source tree after a build (build/perf/py_overhead, build/runtime/libckpt.so, python/ckpt).
Three sides: cxx (perf/py_overhead.cpp), py (ckpt.Runtime) and ctypes (the same Runtime, its checkpoint()
replaced by a bare ctypes call of ckpt_checkpoint: what ctypes and the C API cost without the package's
code). `--before DIR` adds a fourth side, before: ckpt.Runtime imported from DIR (a copy of python/ made before
a change), so that a change of the package is measured against what it replaces in the same run, alternately.
`--worker SIDE MODE DIR REPEATS` is a Python side, run under mpiexec by the driver."""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def worker(mode, d, repeats, side):
    """side "py" (and "before", another copy of the package): ckpt.Runtime.checkpoint(); "ctypes": the same
    Runtime, but checkpoint() replaced by a bare ctypes call of ckpt_checkpoint (what the C API and ctypes cost
    without the package's own code)."""
    import ctypes

    import numpy as np
    from mpi4py import MPI

    import ckpt
    from ckpt._lib import lib

    comm = MPI.COMM_WORLD
    rank, size = comm.rank, comm.size
    with ckpt.Runtime(comm, {"dir": d, "fsync": False, "keep": 2}) as rt:
        if mode == "big":
            n = (64 << 20) // 8
            arrays = [np.full(n, 1.0 + rank)]
            rt.protect("big", arrays[0], global_shape=(n * size,), start=(n * rank,))
        else:
            arrays = [np.full(128, 1.0 + rank) for _ in range(100)]
            per_call = []  # each protect() on its own: the median is robust to a pool growth
            for i, a in enumerate(arrays):
                t0 = time.perf_counter()
                rt.protect(f"small/{i}", a)
                per_call.append(time.perf_counter() - t0)
            m = comm.allreduce(statistics.median(per_call), op=MPI.MAX)
            if rank == 0:
                print(f"{side} small protect_us_per_call {1e6 * m:.3f}", flush=True)
        for i in range(repeats):
            arrays[0][0] = i
            comm.Barrier()
            if side != "ctypes":
                c0 = time.thread_time()
                t = time.perf_counter()
                tk = rt.checkpoint(i + 1)
                wall, cpu = time.perf_counter() - t, time.thread_time() - c0
            else:
                h = ctypes.c_void_p()
                c0 = time.thread_time()
                t = time.perf_counter()
                rc = lib.ckpt_checkpoint(rt._h, i + 1, None, ctypes.byref(h))
                wall, cpu = time.perf_counter() - t, time.thread_time() - c0
                assert rc == 0, rc
                tk = ckpt.Ticket(h, rt, i + 1)
            tk.wait()
            b = tk.stats().blocked_s
            del tk  # freed here, untimed, as the C++ side's Ticket at the end of its loop body
            w, blocked = comm.allreduce(wall, op=MPI.MAX), comm.allreduce(b, op=MPI.MAX)
            outside, c = comm.allreduce(wall - b, op=MPI.MAX), comm.allreduce(cpu, op=MPI.MAX)
            if rank == 0:
                print(f"{side} {mode} wall_us {1e6 * w:.3f} blocked_us {1e6 * blocked:.3f} outside_us "
                      f"{1e6 * outside:.3f} cpu_us {1e6 * c:.3f}", flush=True)


def job(cmd, env):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=600)
    if p.returncode != 0:
        sys.exit(f"py_overhead: {' '.join(cmd)} failed:\n{p.stdout}")
    return p.stdout


def parse(out, side, mode):
    """{kind: [samples]}: wall, blocked, outside per checkpoint (the first of a job dropped: its warm-up),
    protect per job."""
    rows = re.findall(rf"^{side} {mode} wall_us (\S+) blocked_us (\S+) outside_us (\S+) cpu_us (\S+)$", out, re.M)
    got = {k: [float(r[i]) for r in rows][1:] for i, k in enumerate(("wall", "blocked", "outside", "cpu"))}
    got["protect"] = [float(x) for x in re.findall(rf"^{side} {mode} protect_us_per_call (\S+)", out, re.M)]
    return got


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worker", nargs=4, metavar=("SIDE", "MODE", "DIR", "REPEATS"), help=argparse.SUPPRESS)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeats", type=int, default=20, help="checkpoints per job")
    p.add_argument("--build", default=os.path.join(ROOT, "build"), help="the build tree (perf/py_overhead, libckpt)")
    p.add_argument("--dir", default=None, help="scratch directory (default: a new one in /tmp)")
    p.add_argument("--csv", default=None, help="also write every sample here")
    p.add_argument("--before", default=None, metavar="DIR",
                   help="also measure ckpt.Runtime imported from DIR (PYTHONPATH of another copy of the package)")
    a = p.parse_args()
    if a.worker:
        return worker(a.worker[1], a.worker[2], int(a.worker[3]), a.worker[0])
    env = dict(os.environ)
    env.setdefault("PYTHONPATH", os.path.join(ROOT, "python"))
    env.setdefault("CKPT_LIBRARY", os.path.join(a.build, "runtime", "libckpt.so"))
    if os.getuid() == 0:  # Open MPI as root, more ranks than cores (tests/support/mpi_launch.sh)
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    scratch = a.dir or tempfile.mkdtemp(prefix="ckpt-py-overhead-")
    mpi = ["mpiexec", "-n", str(a.ranks)]
    def python_side(side):
        return lambda mode, d: mpi + [sys.executable, "-m", "mpi4py", os.path.abspath(__file__), "--worker", side,
                                      mode, d, str(a.repeats)]

    sides = {"cxx": lambda mode, d: mpi + [os.path.join(a.build, "perf", "py_overhead"), mode, d, str(a.repeats)],
             "py": python_side("py"), "ctypes": python_side("ctypes")}
    envs = {s: env for s in sides}
    if a.before:
        sides["before"] = python_side("before")
        envs["before"] = dict(env, PYTHONPATH=os.path.abspath(a.before))
    order = tuple(sides)  # cxx, py, ctypes[, before]; every other round reversed
    kinds = ("wall", "blocked", "outside", "cpu", "protect")
    samples = {(s, m, k): [] for s in sides for m in ("big", "small") for k in kinds}
    rounds = {(s, m): [] for s in sides for m in ("big", "small")}
    for r in range(a.rounds):
        for mode in ("big", "small"):
            for side in (order if r % 2 == 0 else order[::-1]):
                d = os.path.join(scratch, f"{side}-{mode}-{r}")
                got = parse(job(sides[side](mode, d), envs[side]), side, mode)
                shutil.rmtree(d, ignore_errors=True)
                for k in kinds:
                    samples[(side, mode, k)] += got[k]
                rounds[(side, mode)].append(statistics.median(got["wall"]))
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr, flush=True)
    med = {k: statistics.median(v) for k, v in samples.items() if v}
    print(f"# perf/py_overhead.py: {a.ranks} ranks, {a.rounds} rounds x {a.repeats} checkpoints per side and mode "
          f"(first of each job dropped); microseconds, max over ranks, median over checkpoints")
    print(f"{'mode':6} {'side':6} {'checkpoint() wall':>18} {'inside (blocked_s)':>19} {'outside':>8} "
          f"{'CPU time':>9}   per-round wall medians")
    for mode in ("big", "small"):
        for side in ("cxx", "ctypes", "py", "before")[:len(order)]:
            spread = ", ".join(f"{x:.1f}" for x in rounds[(side, mode)])
            print(f"{mode:6} {side:6} {med[(side, mode, 'wall')]:18.1f} {med[(side, mode, 'blocked')]:19.1f} "
                  f"{med[(side, mode, 'outside')]:8.1f} {med[(side, mode, 'cpu')]:9.1f}   {spread}")
    ratio = med[("py", "big", "wall")] / med[("cxx", "big", "wall")]
    over = med[("py", "small", "outside")] - med[("cxx", "small", "outside")]
    print(f"big (64 MiB per rank): Python / C++ checkpoint() wall time = {ratio:.3f} (goal <= 1.2)")
    layer = med[("py", "small", "outside")] - med[("ctypes", "small", "outside")]
    cpu_over = med[("py", "small", "cpu")] - med[("cxx", "small", "cpu")]
    cpu_layer = med[("py", "small", "cpu")] - med[("ctypes", "small", "cpu")]
    print(f"small (100 arrays): Python adds {over:.1f} us per checkpoint() call (its time outside "
          f"ckpt::Runtime::checkpoint minus C++'s; goal <= 50 us), of which {layer:.1f} us are the package's own "
          f"code (py minus a bare ctypes call) and the rest ctypes and the C API; the wall medians differ by "
          f"{med[('py', 'small', 'wall')] - med[('cxx', 'small', 'wall')]:.1f} us (noisier: the capture itself varies)")
    print(f"   in CPU time of the calling thread (what other processes take excluded): Python adds {cpu_over:.1f} us, "
          f"the package's own code {cpu_layer:.1f} us")
    if a.before:
        b = {k: med[("before", "small", k)] for k in ("outside", "cpu")}
        print(f"   before ({a.before}): Python added {b['outside'] - med[('cxx', 'small', 'outside')]:.1f} us, the "
              f"package's own code {b['outside'] - med[('ctypes', 'small', 'outside')]:.1f} us; in CPU time Python "
              f"added {b['cpu'] - med[('cxx', 'small', 'cpu')]:.1f} us")
    print(f"protect(): {med[('py', 'small', 'protect')]:.1f} us per call from Python, "
          f"{med[('cxx', 'small', 'protect')]:.1f} us from C++ (medians)")
    print(f"(load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs)")
    if a.csv:
        with open(a.csv, "w") as f:
            f.write("side,mode,kind,value_us\n")
            for (side, mode, kind), v in samples.items():
                for x in v:
                    f.write(f"{side},{mode},{kind},{x}\n")
    if not a.dir:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
