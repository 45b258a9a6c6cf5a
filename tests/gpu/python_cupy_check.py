#!/usr/bin/env python3
"""ckpt.Runtime with real CuPy arrays on a GPU: what the fake producers of tests/python cannot show. For the
GPU machine (an optional step of the GPU run, issue 32), with a CUDA build of libckpt:

    CKPT_LIBRARY=build-gpu/runtime/libckpt.so PYTHONPATH=python mpiexec -n 2 python3 -m mpi4py \\
        tests/gpu/python_cupy_check.py /tmp/cupy-ckpt

Each rank uses GPU (rank % GPUs). Checks, on a non-blocking stream s:
  1. capture is ordered on s: a slow kernel writes 1 into x on s, checkpoint(1, stream=s), then 2 is written
     on s at once - the checkpoint holds 1 everywhere (not the 0 before, not the 2 after);
  2. restart is ordered on s both ways: a slow kernel writes 3 on s, restart(1, stream=s) - x is 1, then
     x += 10 enqueued on s after restart() returns gives 11;
  3. the device id: the Runtime's device is "cuda"; an array of another GPU (when there are two) is refused;
  4. a PyTorch CUDA tensor round-trips too, when torch is installed.
Exit status 0 when every check held, 77 when there is nothing to check here (no CuPy, no GPU, or a libckpt
without a GPU device), 1 otherwise. Never run yet: written without a GPU (docs/api-python.md)."""
import os
import sys

from mpi4py import MPI

import ckpt

comm = MPI.COMM_WORLD
rank = comm.rank
failures = 0


def check(cond, what):
    global failures
    print(f"rank {rank}: {'ok  ' if cond else 'FAIL'} {what}", flush=True)
    failures += 0 if cond else 1


def skip(why):
    if rank == 0:
        print(f"python_cupy_check: skipped: {why}", flush=True)
    sys.exit(77)


try:
    import cupy as cp
except ImportError:
    skip("CuPy is not installed")
try:
    ngpu = cp.cuda.runtime.getDeviceCount()
except cp.cuda.runtime.CUDARuntimeError as e:
    skip(f"no GPU: {e}")
cp.cuda.Device(rank % ngpu).use()  # before the Runtime: its device is the current one

# A kernel that spins ~`spin` iterations per element before writing `value`: work still running on the
# stream when checkpoint()/restart() are called, so that an unordered copy would see the old values.
slow_fill = cp.ElementwiseKernel(
    "float64 value, int64 spin", "float64 x",
    "double acc = 0; for (long long k = 0; k < spin; ++k) acc += 1e-30 * k; x = value + (acc > 1e300 ? 1 : 0);",
    "slow_fill")

d = sys.argv[1] if len(sys.argv) > 1 else "/tmp/ckpt-cupy-check"
rt = ckpt.Runtime(comm, {"dir": d, "keep": 5})
if rt.device != "cuda":
    rt.close()
    skip(f"this libckpt copies with the {rt.device} device (a CUDA build is needed)")
with rt:
    n = 1 << 22  # 32 MiB of float64 per rank
    x = cp.zeros(n, dtype=cp.float64)
    rt.protect("x", x, global_shape=(n * comm.size,), start=(n * rank,))
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        slow_fill(1.0, 5000, x)
    rt.checkpoint(1, stream=s).wait()
    with s:
        x.fill(2.0)
    s.synchronize()
    stored = ckpt.open(d)[1]["x"][n * rank:n * (rank + 1)]
    check((stored == 1.0).all(), "1. the checkpoint holds what the stream wrote before checkpoint(), not after")
    with s:
        slow_fill(3.0, 5000, x)
    rt.restart(1, stream=s)
    with s:
        x += 10.0
    s.synchronize()
    check(bool((x == 11.0).all()), "2. restart() ordered after the work before it and before the work after it")
    if ngpu > 1:
        with cp.cuda.Device((rank + 1) % ngpu):
            other = cp.zeros(4)
        try:
            rt.protect("other", other)
            check(False, "3. an array of another GPU was refused")
        except ckpt.Error as e:
            check(True, f"3. an array of another GPU was refused: {type(e).__name__}: {e}")
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_available():
        t = torch.arange(1000, dtype=torch.float32, device=f"cuda:{rank % ngpu}") + rank
        rt.protect("t", t)
        rt.checkpoint(2, stream=torch.cuda.current_stream()).wait()
        want = t.clone()
        t.zero_()
        rt.restart(2, stream=torch.cuda.current_stream())
        torch.cuda.synchronize()
        check(bool(torch.equal(t, want)), "4. a PyTorch CUDA tensor round-trips")
total = comm.allreduce(failures)
if rank == 0:
    print(f"python_cupy_check: {'ok' if total == 0 else f'FAILED ({total} checks)'}", flush=True)
sys.exit(1 if total else 0)
