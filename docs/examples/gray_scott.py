#!/usr/bin/env python3
"""Gray-Scott reaction-diffusion in numpy + mpi4py, checkpointed asynchronously with ckpt.Runtime.

    mpiexec -n 4 python3 -m mpi4py docs/examples/gray_scott.py --dir /tmp/gs             # checkpoints every 50 steps
    mpiexec -n 4 python3 -m mpi4py docs/examples/gray_scott.py --dir /tmp/gs --restart   # from the newest one
    mpiexec -n 3 python3 -m mpi4py docs/examples/gray_scott.py --dir /tmp/gs --restart   # on another rank count

Two fields u and v on an n x n periodic grid, split into blocks of rows (rank r owns rows [y0, y1)), each
rank's block with one halo row above and below (exchanged with MPI_Sendrecv every step):
    u' = Du lap(u) - u v^2 + F (1 - u)        v' = Dv lap(v) + u v^2 - (F + k) v
The checkpointed state: this rank's rows of u and v (boxes of two global n x n arrays, so a restart may use
another rank count) and the step (a 0-d array). Every cell's update does the same arithmetic whatever the
decomposition, so a run ends bit for bit where any other run with the same arguments ends: killed and
restarted, or on another rank count. The last line is `state: <sha256 of u and v>`. docs/examples/
gray_scott_demo.sh kills a run and restarts it; docs/api-python.md walks through this file."""
import argparse
import hashlib
import sys
import time

import numpy as np
from mpi4py import MPI

import ckpt

DU, DV, F, K = 0.16, 0.08, 0.035, 0.065  # dt = dx = 1: stable (4 Du < 1)


def initial(n):
    """u = 1, v = 0, and a noisy square of v in the middle (the same on every rank: a fixed seed)."""
    u = np.ones((n, n))
    v = np.zeros((n, n))
    c, r = n // 2, max(1, n // 10)
    noise = np.random.default_rng(2024).random((2 * r, 2 * r))
    u[c - r:c + r, c - r:c + r] = 0.5 + 0.01 * noise
    v[c - r:c + r, c - r:c + r] = 0.25 + 0.01 * noise
    return u, v


def exchange(comm, a):
    """Fills the halo rows a[0] and a[-1] from the neighbours (periodic in y)."""
    up, down = (comm.rank - 1) % comm.size, (comm.rank + 1) % comm.size
    comm.Sendrecv(a[-2], dest=down, recvbuf=a[0], source=up)
    comm.Sendrecv(a[1], dest=up, recvbuf=a[-1], source=down)


def laplacian(a):
    """Of the interior rows of `a` (halo rows included in `a`), periodic in x."""
    mid = a[1:-1]
    return a[:-2] + a[2:] + np.roll(mid, 1, axis=1) + np.roll(mid, -1, axis=1) - 4.0 * mid


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=256, help="grid size (n x n)")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--every", type=int, default=50, help="checkpoint every this many steps")
    p.add_argument("--dir", required=True, help="checkpoint directory")
    p.add_argument("--restart", action="store_true", help="start from the newest complete checkpoint")
    p.add_argument("--transport", default="posix", help="null: checkpoints that write nothing (a reference run)")
    p.add_argument("--compute-ms", type=float, default=0, help="sleep this long per step (a slower application)")
    a = p.parse_args()
    comm = MPI.COMM_WORLD
    n = a.n
    y0, y1 = n * comm.rank // comm.size, n * (comm.rank + 1) // comm.size

    # This rank's rows with a halo row on each side. The protected arrays are the interior rows u[1:-1]:
    # contiguous views into u and v, which the loop below updates in place.
    u = np.empty((y1 - y0 + 2, n))
    v = np.empty((y1 - y0 + 2, n))
    gu, gv = initial(n)
    u[1:-1], v[1:-1] = gu[y0:y1], gv[y0:y1]
    step = np.zeros((), np.int64)

    with ckpt.Runtime(comm, {"dir": a.dir, "transport": a.transport, "keep": 2}) as rt:
        rt.protect("u", u[1:-1], global_shape=(n, n), start=(y0, 0))
        rt.protect("v", v[1:-1], global_shape=(n, n), start=(y0, 0))
        rt.protect("step", step)
        rt.annotate("u", "model", f"gray-scott Du={DU} Dv={DV} F={F} k={K}")
        if a.restart:
            restored = rt.restart()  # newest checkpoint that verifies; u, v and step are filled in place
            if comm.rank == 0:
                print(f"restored: step {restored} (checkpoint verified bit for bit)", flush=True)
        blocked, t0 = [], time.perf_counter()
        while step < a.steps:
            exchange(comm, u)
            exchange(comm, v)
            uvv = u[1:-1] * v[1:-1] ** 2
            du = DU * laplacian(u) - uvv + F * (1.0 - u[1:-1])
            dv = DV * laplacian(v) + uvv - (F + K) * v[1:-1]
            u[1:-1] += du  # in place: the protected views see the new values
            v[1:-1] += dv
            step += 1
            if a.compute_ms:
                time.sleep(a.compute_ms / 1000)
            if step % a.every == 0:
                c0 = time.perf_counter()
                rt.checkpoint(int(step))  # returns once u, v and step are copied; written in the background
                blocked.append(time.perf_counter() - c0)
        # Leaving the block closes the Runtime: it waits for the last checkpoint to commit.
    elapsed = time.perf_counter() - t0
    parts = comm.gather((u[1:-1].copy(), v[1:-1].copy()), root=0)
    if comm.rank == 0:
        h = hashlib.sha256()
        for field in (0, 1):
            h.update(np.concatenate([q[field] for q in parts]).tobytes())
        if blocked:
            print(f"{len(blocked)} checkpoints of {2 * n * n * 8 / 2**20:.1f} MiB, checkpoint() blocked "
                  f"{1e3 * np.median(blocked):.2f} ms (median), {elapsed:.1f} s in all", flush=True)
        print(f"state: {h.hexdigest()} step {int(step)}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
