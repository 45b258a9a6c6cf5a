#!/usr/bin/env python3
"""What a Python program pays when it rebinds one protected array and protects it again before every
checkpoint (`u = u + du; rt.protect("u", u)`), against checkpoints with no protect between them: the
median time of protect() and of checkpoint() outside the C++ call (its wall time minus the Ticket's
blocked_s), 100 local arrays of 1 KiB, modes alternated twice, the first 5 checkpoints of each dropped.

    PYTHONPATH=python CKPT_LIBRARY=build/runtime/libckpt.so mpiexec -n 1 python3 perf/py_reprotect.py
    PYTHONPATH=/tmp/old/python ... (the same with another copy of the package, to compare)"""
import statistics
import sys
import tempfile
import time

import numpy as np
from mpi4py import MPI

import ckpt


def main(arrays=100, steps=60):
    comm = MPI.COMM_WORLD
    with ckpt.Runtime(comm, {"dir": tempfile.mkdtemp(prefix="ckpt-reprotect-"), "fsync": False, "keep": 2}) as rt:
        a = [rt.protect(f"s/{i}", np.full(128, 1.0)) for i in range(arrays)]
        res, step = {}, 0
        for mode in ("steady", "reprotect", "steady", "reprotect"):
            got = []
            for _ in range(steps):
                tp = 0.0
                if mode == "reprotect":
                    a[7] = a[7] + 1
                    t0 = time.perf_counter()
                    rt.protect("s/7", a[7])
                    tp = time.perf_counter() - t0
                step += 1
                t0 = time.perf_counter()
                tk = rt.checkpoint(step)
                wall = time.perf_counter() - t0
                tk.wait()
                got.append((comm.allreduce(tp, op=MPI.MAX), comm.allreduce(wall - tk.stats().blocked_s, op=MPI.MAX)))
            res.setdefault(mode, []).extend(got[5:])
        if comm.rank == 0:
            for mode, got in res.items():
                p, c = (1e6 * statistics.median(x[k] for x in got) for k in (0, 1))
                print(f"{mode:10} protect() {p:8.1f} us   checkpoint() outside the C++ call {c:8.1f} us  "
                      f"({len(got)} checkpoints, {arrays} arrays, {comm.size} rank(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
