"""The MPI programs test_runtime_jobs.py runs as child jobs (`mpiexec -n N python3 -m mpi4py rt_job.py MODE DIR`).

  write DIR         every region kind at N ranks, checkpoints 1 and 2 (step 2's values are expected())
  restart DIR       restarts DIR at this job's rank count (any): the global array in this count's rows, the
                    joined array in its balanced split (joined_rows), uniform scalar and local; checks every
                    value; a per-rank local array restarts only on the writer's rank count (MismatchError
                    otherwise, on every rank). Prints "restart: ok <step> <ranks>".
  raise-in-with DIR rank 1 raises inside `with ckpt.Runtime(...)` while rank 0 goes on to checkpoint: under
                    -m mpi4py the job must end (non-zero) instead of hanging in close().
  exit-open DIR     checkpoints with a slow flush and exits without close(): the Runtime is closed at exit,
                    before MPI_Finalize, and the checkpoint commits.
  finalize-open DIR as exit-open, but the program calls MPI.Finalize() itself first: a warning, no hang.
Exit status 0 when every check held."""
import os
import sys

import numpy as np
from mpi4py import MPI

import ckpt

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
ROWS, COLS = 10, 3  # the global array


def expected(step):
    g = (np.arange(ROWS * COLS, dtype=np.float64).reshape(ROWS, COLS) + 1000.0 * step)
    return {"g": g, "step": np.int64(step), "time": 0.5 * step,
            "table": np.arange(4, dtype=np.int32) + step}


def joined_rows_of(writer_rank, step):
    """Rank r of the writing job held r + 2 rows of [id, step]."""
    first = sum(r + 2 for r in range(writer_rank))
    ids = np.arange(first, first + writer_rank + 2, dtype=np.int64)
    return np.stack([ids, np.full_like(ids, step)], axis=1)


def all_joined(nranks, step):
    return np.concatenate([joined_rows_of(r, step) for r in range(nranks)])


def rows(total):
    return total * rank // size, total * (rank + 1) // size


def write(d):
    with ckpt.Runtime(comm, {"dir": d, "keep": 5}) as rt:
        y0, y1 = rows(ROWS)
        g = rt.protect("g", np.zeros((y1 - y0, COLS)), global_shape=(ROWS, COLS), start=(y0, 0))
        j = rt.protect("j", np.zeros((rank + 2, 2), np.int64), joined=True)
        step = rt.protect("step", np.zeros((), np.int64))
        time = rt.protect("time", np.zeros(()))
        table = rt.protect("table", np.zeros(4, np.int32))  # equal on every rank: uniform
        mine = rt.protect("mine", np.zeros(3, np.int16))  # differs per rank
        for s in (1, 2):
            e = expected(s)
            g[...] = e["g"][y0:y1]
            j[...] = joined_rows_of(rank, s)
            step[()], time[()], table[...] = e["step"], e["time"], e["table"]
            mine[...] = rank * 10 + s
            rt.checkpoint(s)
    print(f"write: ok {size}", flush=True)


def restart(d):
    bad = []
    with ckpt.Runtime(comm, {"dir": d}) as rt:
        latest = rt.latest()
        y0, y1 = rows(ROWS)
        g = rt.protect("g", np.zeros((y1 - y0, COLS)), global_shape=(ROWS, COLS), start=(y0, 0))
        jr = rt.joined_rows("j", latest)
        j = rt.protect("j", np.zeros((jr.end - jr.begin, 2), np.int64), joined=True)
        step = rt.protect("step", np.zeros((), np.int64))
        time = rt.protect("time", np.zeros(()))
        table = rt.protect("table", np.zeros(4, np.int32))
        writers = ckpt.open(d).latest().nranks
        # A per-rank local array restarts only on the rank count that wrote it.
        mine = rt.protect("mine", np.zeros(3, np.int16))
        if writers != size:
            try:
                rt.restart()
                bad.append("a per-rank local array restarted on another rank count")
            except ckpt.Error as e:
                print(f"rank {rank}: per-rank local on {size} ranks (written by {writers}): {type(e).__name__}: {e}",
                      flush=True)
            rt.unprotect("mine")
        got = rt.restart()
        e = expected(got)
        if got != 2 or latest != 2:
            bad.append(f"restarted step {got}, latest {latest}")
        if not np.array_equal(g, e["g"][y0:y1]):
            bad.append("global rows")
        if jr.total != sum(r + 2 for r in range(writers)) or not np.array_equal(j, all_joined(writers, 2)[jr.begin:jr.end]):
            bad.append(f"joined rows {jr}")
        if step != e["step"] or time != e["time"] or not np.array_equal(table, e["table"]):
            bad.append("scalars or uniform local")
        if writers == size and not np.array_equal(mine, np.full(3, rank * 10 + 2, np.int16)):
            bad.append("per-rank local")
    for b in bad:
        print(f"rank {rank}: FAILED: {b}", flush=True)
    failures = comm.allreduce(len(bad))
    if rank == 0:
        print(f"restart: {'ok' if not failures else 'FAILED'} {got} {size}", flush=True)
    return 1 if failures else 0


def raise_in_with(d):
    with ckpt.Runtime(comm, {"dir": d}) as rt:
        rt.protect("x", np.zeros(3))
        if rank == 1:
            raise RuntimeError("rank 1 fails inside the with block")
        rt.checkpoint(1).wait()  # rank 0 waits for rank 1, which is gone: mpi4py's abort must end the job
    return 0


def exit_open(d, finalize):
    os.environ["CKPT_TEST_FLUSH_DELAY_MS"] = "300"  # a test knob, read when the Runtime is made
    rt = ckpt.Runtime(comm, {"dir": d})
    del os.environ["CKPT_TEST_FLUSH_DELAY_MS"]
    x = rt.protect("x", np.arange(5.0) + rank)
    rt.checkpoint(1)
    del x
    if finalize:
        MPI.Finalize()
    return 0


def main():
    mode, d = sys.argv[1], sys.argv[2]
    if mode == "write":
        return write(d)
    if mode == "restart":
        return restart(d)
    if mode == "raise-in-with":
        return raise_in_with(d)
    if mode in ("exit-open", "finalize-open"):
        return exit_open(d, mode == "finalize-open")
    sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    sys.exit(main())
