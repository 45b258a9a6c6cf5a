"""ckpt.open(path, comm=...) on an mpi4py communicator, run by every process of `mpiexec -n 4`:
rank 0 lists the root and reads each index, every process reads its own rows; errors are rank 0's,
the same code and message everywhere; a split communicator works the same. Exit status 0 when every
check held on every process.

    mpiexec -n 4 python3 collective.py DATA_SET     (a gen_checkpoints variant-0 set, steps 10 and 20)
Environment: PYTHONPATH (python/), CKPT_LIBRARY."""
import os
import sys

import numpy as np
from mpi4py import MPI

import ckpt

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_reader import expected  # noqa: E402 - what gen_checkpoints stores

world = MPI.COMM_WORLD
rank, size = world.rank, world.size
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print(f"rank {rank}: FAILED: {what}", flush=True)


def agreed(fn, comm=world):
    """Runs fn(); returns (exception type name or None, message), checking every process of comm got
    the same as rank 0."""
    try:
        fn()
        got = (None, "")
    except Exception as e:  # noqa: BLE001 - the outcome is compared, whatever it is
        got = (type(e).__name__, str(e))
    root = comm.bcast(got, root=0)
    check(got == root, f"outcome {got} == rank 0's {root}")
    return got


path = sys.argv[1]
want = expected(20)

# Collective open: the listing and the index come from rank 0.
s = ckpt.open(path, comm=world)
check(s.steps == [10, 20], f"steps {s.steps}")
c = s.latest()
check((c.step, c.variables[:3]) == (20, ["grid/temp", "grid/dens", "particles/id"]), "latest() describes step 20")
# Each process reads its own rows of grid/temp [16, 12] (4 rows each at 4 processes) and a box across two.
rows = np.array_split(np.arange(16), size)[rank]
mine = c["grid/temp"][rows[0]:rows[-1] + 1, :]
check(np.array_equal(mine, want["grid/temp"][rows[0]:rows[-1] + 1, :]), "own rows of grid/temp")
lo = (4 * rank + 3) % 15
check(np.array_equal(c["grid/temp"][lo:lo + 2, 2:5], want["grid/temp"][lo:lo + 2, 2:5]), "box across two blocks")
check(c["rank_info"].read(rank=(rank + 1) % c.nranks).tolist()[0] == (rank + 1) % c.nranks, "another rank's local")
c.verify()
check(s[10]["step"].read() == 10, "s[10] (collective)")

# Only rank 0 looks at the file system for the listing and the index: the other processes pass a path
# that does not exist (a misuse, on purpose) and still get rank 0's steps and description.
s2 = ckpt.open(path if rank == 0 else path + "/not-there", comm=world)
check(s2.steps == [10, 20], f"steps from rank 0's listing {s2.steps}")
check(s2.latest().variables == c.variables, "description from rank 0's index")
if rank > 0:
    try:
        ckpt.open(path + "/not-there")
        check(False, "a serial open of the missing path fails")
    except ckpt.NotFoundError:
        pass

# Errors are rank 0's, everywhere: a missing root, a missing step.
got = agreed(lambda: ckpt.open(path + "/missing", comm=world))
check(got[0] == "NotFoundError", f"missing root: {got}")
got = agreed(lambda: s[15])
check(got[0] == "KeyError", f"missing step: {got}")

# A communicator other than COMM_WORLD: the even and the odd processes, each group on its own.
half = world.Split(rank % 2, rank)
sh = ckpt.open(path, comm=half)
ch = sh[20]
check(np.array_equal(ch["grid/dens"].read(), want["grid/dens"]), "whole grid/dens on a split communicator")
got = agreed(lambda: ckpt.open(path + "/missing", comm=half), half)
check(got[0] == "NotFoundError", f"missing root on the split communicator: {got}")
del ch, sh
half.Free()

# Not a communicator: a ValueError/TypeError on every process, no collective call made.
got = agreed(lambda: ckpt.open(path, comm=object()))
check(got[0] is not None, f"comm=object() fails: {got}")

bad = world.allreduce(failures, op=MPI.SUM)
if rank == 0:
    print("python collective:", "ok" if bad == 0 else f"{bad} FAILED checks")
sys.exit(1 if bad else 0)
