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
  rows DIR          (4 ranks) blocks that move (AMR): writes a joined array of 18 blocks (rank r: r + 3, stored
                    from a ghosted allocation) and their ids (joined int64 "id", int32 "id32", "dup" with one
                    value held twice), then restarts with Runtime.set_restart_keys / set_restart_rows on the 4
                    ranks and on a sub-communicator of 3, each rank asking for a scrambled, overlapping set;
                    checks every element and that the ghosts stay; clear_restart_rows back to the balanced
                    split; the refusals (unknown key: NotFoundError on every rank; a duplicated key, a row out
                    of range, a wrong count, ranks that disagree; negative rows and non-integers refused before
                    libckpt is called). Rank 0 prints "refused CASE: TYPE on ranks [...]: MESSAGE" for each
                    collective refusal, then "rows: ok 4 3".
  scattered DIR     (4 ranks) scattered regions (Runtime.protect_scattered): rank r writes r + 3 ghosted blocks, each
                    its own allocation (one row per piece), and their ids, steps 1 and 2; restarts step 2 into
                    new allocations on a sub-communicator of 3 by key (each rank the blocks whose id % 3 is its
                    rank, in descending id order) and on the 4 ranks by the balanced split into pieces of up
                    to 2 blocks back to back after an empty piece, then protects the pieces again with other
                    blocks by key; checks every interior and that every ghost cell stays. Prints
                    "scattered: ok 4 3".
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


# ---- rows DIR: blocks that move (set_restart_rows, set_restart_keys, clear_restart_rows) -----------------

NV, NZ, NX = 2, 3, 4  # a block: NV variables of NZ x NX cells (one ghost cell around each NZ x NX plane)
NBLOCKS = sum(r + 3 for r in range(4))  # 18: rank r of the writing job holds r + 3 blocks
IDS = 11 * np.random.default_rng(35).permutation(NBLOCKS).astype(np.int64) - 60  # stored row k: id IDS[k]
DUP = IDS.copy()
DUP[5] = DUP[11]  # in "dup", the value IDS[11] is held by stored rows 5 and 11, and IDS[5] by none
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print(f"rank {rank}: FAILED: {what}", flush=True)


def block_value(block_id, step):
    return 1000.0 * block_id + 0.5 * step + np.arange(NV * NZ * NX, dtype=np.float64).reshape(NV, NZ, NX)


def blocks_of(ids, step):
    return np.stack([block_value(i, step) for i in ids]) if len(ids) else np.zeros((0, NV, NZ, NX))


def ghosted(n):
    """An allocation of n blocks with ghost cells (-7.0) and the view of their interiors."""
    alloc = np.full((n, NV, NZ + 2, NX + 2), -7.0)
    return alloc, alloc[:, :, 1:-1, 1:-1]


def check_blocks(alloc, view, ids, step, what):
    want = blocks_of(ids, step)
    check(view.shape == want.shape, f"{what}: {view.shape} blocks, expected {want.shape}")
    if view.shape == want.shape:
        wrong = int(np.count_nonzero(view != want))  # element by element
        check(wrong == 0, f"{what}: {wrong} of {want.size} elements differ (ids {list(ids)})")
    ghosts = np.ones(alloc.shape, bool)
    ghosts[:, :, 1:-1, 1:-1] = False
    check(bool(np.all(alloc[ghosts] == -7.0)), f"{what}: a ghost cell was written")


def outcome(c, fn):
    """fn()'s exception as (type name, message) on this rank, and every rank's of communicator c."""
    try:
        fn()
        got = (None, "")
    except ckpt.Error as e:
        got = (type(e).__name__, str(e))
    return got, c.allgather(got)


def expect_everywhere(c, fn, exc, needle, what):
    """fn() (collective) raises `exc` on every rank of c, the same message everywhere, with `needle` in it.
    Rank 0 of c prints "refused WHAT: TYPE on ranks [...]: MESSAGE" (one process prints: the lines of
    several would interleave)."""
    got, everyone = outcome(c, fn)
    check(all(g[0] == exc.__name__ for g in everyone), f"{what}: {exc.__name__} on every rank, got {everyone}")
    check(len(set(everyone)) == 1 and needle in got[1], f"{what}: one message with {needle!r}, got {everyone}")
    if c.rank == 0:
        same = [r for r, g in enumerate(everyone) if g == got]
        print(f"refused {what}: {got[0]} on ranks {same}: {got[1]}", flush=True)


def refused_here(fn, exc, needle, what):
    """fn() (this rank's own) raises `exc` with `needle` in the message."""
    try:
        fn()
        check(False, f"{what}: not refused")
    except exc as e:
        check(needle in str(e), f"{what}: {needle!r} not in {e}")


class _Spy:
    """Stands for ckpt.runtime.lib and records which C functions the package looks up."""

    def __init__(self, real):
        self.real, self.calls = real, []

    def __getattr__(self, name):
        self.calls.append(name)
        return getattr(self.real, name)


def rows_write(d):
    n = rank + 3
    first = sum(r + 3 for r in range(rank))
    with ckpt.Runtime(comm, {"dir": d, "keep": 5}) as rt:
        alloc, blocks = ghosted(n)
        rt.protect("blocks", blocks, joined=True)  # stored as the packed interiors
        keys = [rt.protect("id", IDS[first:first + n].copy(), joined=True),  # held: checkpoint() checks that
                rt.protect("id32", IDS[first:first + n].astype(np.int32), joined=True),
                rt.protect("dup", DUP[first:first + n].copy(), joined=True)]
        step = rt.protect("step", np.zeros((), np.int64))
        for s in (1, 2):
            blocks[...] = blocks_of(IDS[first:first + n], s)
            step[()] = s
            rt.checkpoint(s)
        check(bool(np.all(alloc[:, :, 0, :] == -7.0)) and len(keys) == 3, "the ghosts of the written blocks")


def rows_restart_4(d):
    row_of = {int(v): k for k, v in enumerate(IDS)}
    rng = np.random.default_rng(100 + rank)
    with ckpt.Runtime(comm, {"dir": d}) as rt:
        step = rt.protect("step", np.zeros((), np.int64))

        # By key: a scrambled set of ids per rank, one id every rank asks for, and one asked twice here.
        mine = [int(x) for x in rng.choice(IDS, size=4 + rank, replace=False)] + [int(IDS[3])]
        mine.append(mine[0])
        keys = np.array(mine, np.int64) if rank % 2 == 0 else mine  # a numpy array or a list
        alloc, blocks = ghosted(len(mine))
        rt.protect("blocks", blocks, joined=True)
        ids = rt.protect("id", np.zeros(len(mine), np.int64), joined=True)
        rt.set_restart_keys("blocks", "id", keys)
        rt.set_restart_keys("id", "id", keys)  # a key restores itself
        check(rt.restart() == 2, "restart() by key: step 2")
        check_blocks(alloc, blocks, mine, 2, "by key, step 2")
        check(ids.tolist() == mine and step == 2, f"by key: ids {ids.tolist()}, expected {mine}")
        rt.restart(1)
        check_blocks(alloc, blocks, mine, 1, "by key, step 1")

        # By row index, set before the arrays are protected again with their new row counts (the setting
        # is kept through that update). Rank 2 asks for no row; the others overlap, with duplicates.
        rows = [] if rank == 2 else [(7 * rank + 5 * i) % NBLOCKS for i in range(6)] + [17, 0, 17]
        given = {0: np.array(rows, np.uint64), 1: tuple(rows), 2: rows, 3: np.array(rows, np.int32)}[rank]
        rt.set_restart_rows("blocks", given)
        rt.set_restart_rows("id", range(0) if rank == 2 else given)
        alloc, blocks = ghosted(len(rows))
        rt.protect("blocks", blocks, joined=True)
        ids = rt.protect("id", np.zeros(len(rows), np.int64), joined=True)
        rt.restart(2)
        check_blocks(alloc, blocks, IDS[rows], 2, "by row")
        check(ids.tolist() == IDS[rows].tolist(), f"by row: ids {ids.tolist()}")

        # Refused before libckpt is called: negative rows, non-integers, keys beyond int64; the earlier
        # setting stays (a C call with a wrapped value would have made the restart fail).
        import ckpt.runtime as rtmod
        spy = rtmod.lib = _Spy(rtmod.lib)
        try:
            refused_here(lambda: rt.set_restart_rows("blocks", [0, -1]), ckpt.InvalidArgumentError, "rows[1] is -1",
                         "a negative row")
            refused_here(lambda: rt.set_restart_rows("blocks", np.array([3, -2])), ckpt.InvalidArgumentError,
                         "rows[1] is -2", "a negative row in a numpy array")
            refused_here(lambda: rt.set_restart_rows("blocks", [1.0]), ckpt.InvalidArgumentError, "float",
                         "a float row")
            refused_here(lambda: rt.set_restart_rows("blocks", np.arange(3.0)), ckpt.InvalidArgumentError, "float64",
                         "a float64 array")
            refused_here(lambda: rt.set_restart_rows("blocks", np.zeros((2, 2), np.int64)),
                         ckpt.InvalidArgumentError, "one-dimensional", "a 2-d array")
            refused_here(lambda: rt.set_restart_rows("blocks", 3), ckpt.InvalidArgumentError, "sequence",
                         "an int")
            refused_here(lambda: rt.set_restart_keys("blocks", "id", [2 ** 63]), ckpt.InvalidArgumentError, "int64",
                         "a key beyond int64")
            refused_here(lambda: rt.set_restart_keys("blocks", "id", ["7"]), ckpt.InvalidArgumentError, "str",
                         "a str key")
            refused_here(lambda: rt.set_restart_keys("blocks", None, [1]), ckpt.InvalidArgumentError, "key must be",
                         "key None")
        finally:
            rtmod.lib = spy.real
        check(not spy.calls, f"libckpt called by refused calls: {spy.calls}")
        blocks[...] = 0.0
        rt.restart(2)
        check_blocks(alloc, blocks, IDS[rows], 2, "by row, after the refusals")
        # Refused by libckpt, each rank its own: no such region, a region that is not joined, an empty key.
        refused_here(lambda: rt.set_restart_rows("nosuch", [0]), ckpt.NotFoundError, "not protected", "no region")
        refused_here(lambda: rt.set_restart_keys("nosuch", "id", [0]), ckpt.NotFoundError, "not protected",
                     "no region (keys)")
        refused_here(lambda: rt.clear_restart_rows("nosuch"), ckpt.NotFoundError, "not protected",
                     "no region (clear)")
        refused_here(lambda: rt.set_restart_rows("step", [0]), ckpt.InvalidArgumentError, "not a joined array",
                     "a scalar")
        refused_here(lambda: rt.set_restart_keys("blocks", "", [0]), ckpt.InvalidArgumentError, "no key", "key ''")

        # clear_restart_rows: back to the balanced split.
        rt.clear_restart_rows("blocks")
        rt.clear_restart_rows("id")
        jr = rt.joined_rows("blocks", 2)
        check((jr.total, jr.begin, jr.end) == (NBLOCKS, NBLOCKS * rank // size, NBLOCKS * (rank + 1) // size),
              f"joined_rows {jr}")
        alloc, blocks = ghosted(jr.end - jr.begin)
        rt.protect("blocks", blocks, joined=True)
        ids = rt.protect("id", np.zeros(jr.end - jr.begin, np.int64), joined=True)
        rt.restart(2)
        check_blocks(alloc, blocks, IDS[jr.begin:jr.end], 2, "balanced split after clear_restart_rows")
        check(ids.tolist() == IDS[jr.begin:jr.end].tolist(), "balanced ids after clear_restart_rows")

        def keyed(blocks_keys, key="id", id_keys=None):
            """blocks and id restarted by key, arrays of the rows asked for; returns (alloc, blocks, ids)."""
            id_keys = blocks_keys if id_keys is None else id_keys
            a, b = ghosted(len(blocks_keys))
            rt.protect("blocks", b, joined=True)
            i = rt.protect("id", np.zeros(len(id_keys), np.int64), joined=True)
            rt.set_restart_keys("blocks", key, blocks_keys)
            rt.set_restart_keys("id", key, id_keys)
            return a, b, i

        # A key no stored row holds, asked for by rank 1 only: NotFoundError on every rank.
        keyed(mine + [999999] if rank == 1 else mine)
        expect_everywhere(comm, lambda: rt.restart(2), ckpt.NotFoundError, "999999", "unknown key")
        # In "dup" the value IDS[11] is held twice: refused when asked for (by rank 0 only) ...
        keyed([int(IDS[11])] if rank == 0 else [int(IDS[0])], key="dup")
        expect_everywhere(comm, lambda: rt.restart(2), ckpt.InvalidArgumentError, "not unique", "duplicated key")
        # ... and the other values of the same column are found (IDS[5] is in no row of it).
        unique = [int(v) for v in DUP if int(v) != int(IDS[11])][rank::size]
        alloc, blocks, ids = keyed(unique, key="dup")
        rt.restart(2)
        check_blocks(alloc, blocks, unique, 2, "by a key column that holds a value twice")
        check(ids.tolist() == unique, "ids by the key column dup")
        # Keys that are no key: none in the checkpoint; the float blocks.
        keyed(mine, key="nosuch")
        expect_everywhere(comm, lambda: rt.restart(2), ckpt.NotFoundError, "nosuch", "a missing key column")
        keyed(mine, key="blocks")
        expect_everywhere(comm, lambda: rt.restart(2), ckpt.InvalidArgumentError, "one value per row",
                          "a float key column")
        # Rows out of range on rank 3, a wrong count on rank 0: MismatchError on every rank.
        rt.clear_restart_rows("id")
        jr = rt.joined_rows("id", 2)
        rt.protect("id", np.zeros(jr.end - jr.begin, np.int64), joined=True)
        rt.protect("blocks", ghosted(2)[1], joined=True)
        rt.set_restart_rows("blocks", [NBLOCKS, 0] if rank == 3 else [1, 2])
        expect_everywhere(comm, lambda: rt.restart(2), ckpt.MismatchError, "", "a row out of range")
        rt.set_restart_rows("blocks", [1, 2, 3] if rank == 0 else [1, 2])
        expect_everywhere(comm, lambda: rt.restart(2), ckpt.MismatchError, "", "a wrong row count")
        # Ranks that disagree on which regions restart by key: every rank fails, none waits.
        if rank == 0:
            rt.set_restart_keys("blocks", "id", IDS[:2])
        expect_everywhere(comm, lambda: rt.restart(2), ckpt.InvalidArgumentError, "", "ranks that disagree")
        # The Runtime is still usable after the failed restarts.
        rt.set_restart_rows("blocks", [16, 17])
        alloc, blocks = ghosted(2)
        rt.protect("blocks", blocks, joined=True)
        rt.restart(2)
        check_blocks(alloc, blocks, IDS[[16, 17]], 2, "restart after the failures")
    refused_here(lambda: rt.set_restart_rows("blocks", [0]), ckpt.PreconditionError, "closed", "a closed Runtime")


def rows_restart_3(d):
    """On ranks 0..2 (a sub-communicator): the 18 blocks partitioned by id, round robin over the sorted ids,
    each rank's in reverse order plus the next rank's first block (a halo)."""
    sub = comm.Split(0 if rank < 3 else MPI.UNDEFINED, rank)
    if sub == MPI.COMM_NULL:
        return
    by_id = sorted(int(v) for v in IDS)
    owned = by_id[sub.rank::3][::-1] + [by_id[(sub.rank + 1) % 3]]
    with ckpt.Runtime(sub, {"dir": d}) as rt:
        check(rt.size == 3, f"a Runtime of {rt.size} ranks on the sub-communicator")
        # "id" is not protected: the key column is read from the checkpoint. The int32 one here.
        alloc, blocks = ghosted(len(owned))
        rt.protect("blocks", blocks, joined=True)
        step = rt.protect("step", np.zeros((), np.int64))
        rt.set_restart_keys("blocks", "id32", owned)
        check(rt.restart() == 2 and step == 2, "restart() on 3 ranks")
        check_blocks(alloc, blocks, owned, 2, "by key on 3 ranks")
        everything = sub.allgather(owned)
        check(sorted({i for o in everything for i in o}) == by_id, "the 3 ranks own every block")
        # By row on 3: the stored rows of the same blocks, in the same order.
        rows = np.array([list(IDS).index(i) for i in owned], np.uint64)
        alloc, blocks = ghosted(len(rows))
        rt.protect("blocks", blocks, joined=True)
        ids = rt.protect("id", np.zeros(len(rows), np.int64), joined=True)
        rt.set_restart_rows("blocks", rows)
        rt.set_restart_rows("id", rows)
        rt.restart(2)
        check_blocks(alloc, blocks, owned, 2, "by row on 3 ranks")
        check(ids.tolist() == owned, "ids by row on 3 ranks")
        expect_everywhere(sub, lambda: (rt.set_restart_keys("blocks", "id", [-1] * len(owned)), rt.restart(2)),
                          ckpt.NotFoundError, "-1", "unknown key on 3 ranks")
    sub.Free()


# ---- scattered DIR: blocks in allocations of their own (protect_scattered) ---------------------------------

ALLOC = (NV, NZ + 2, NX + 2)  # a block's allocation: one ghost cell around each NZ x NX plane
MEMORY = ((0, 1, 1), ALLOC)


def ghosted_block(block_id=None, step=2, rows=None):
    """A block's allocation (rows=None) or `rows` of them back to back, ghosts -7.0; the interior of block
    `block_id` at `step`, or -7.0 everywhere (None: an allocation to restart into)."""
    b = np.full(ALLOC if rows is None else (rows,) + ALLOC, -7.0)
    if block_id is not None:
        b[:, 1:-1, 1:-1] = block_value(block_id, step)
    return b


def check_block(b, block_id, step, what):
    want = ghosted_block(block_id, step)
    wrong = int(np.count_nonzero(b != want))  # interior and ghosts, element by element
    check(wrong == 0, f"{what}: block {block_id}: {wrong} of {b.size} cells differ")


def scattered_write(d):
    n = rank + 3
    first = sum(r + 3 for r in range(rank))
    mine = IDS[first:first + n]
    with ckpt.Runtime(comm, {"dir": d, "keep": 5}) as rt:
        blocks = [ghosted_block() for _ in range(n)]  # each block its own allocation
        rt.protect_scattered("blocks", blocks, row=(NV, NZ, NX), memory=MEMORY)
        ids = rt.protect("id", mine.copy(), joined=True)
        step = rt.protect("step", np.zeros((), np.int64))
        for s in (1, 2):
            for b, i in zip(blocks, mine):
                b[:, 1:-1, 1:-1] = block_value(i, s)
            step[()] = s
            rt.checkpoint(s)
        check(ids.tolist() == mine.tolist(), "the ids written")


def scattered_restart_3(d):
    sub = comm.Split(0 if rank < 3 else MPI.UNDEFINED, rank)
    if sub == MPI.COMM_NULL:
        return
    owned = sorted((int(v) for v in IDS if int(v) % 3 == sub.rank), reverse=True)
    with ckpt.Runtime(sub, {"dir": d}) as rt:
        blocks = [ghosted_block() for _ in owned]  # new allocations: the restart knows nothing of the old
        rt.protect_scattered("blocks", blocks, row=(NV, NZ, NX), memory=MEMORY)
        ids = rt.protect("id", np.full(len(owned), -1, np.int64), joined=True)
        step = rt.protect("step", np.zeros((), np.int64))
        rt.set_restart_keys("blocks", "id", owned)
        rt.set_restart_keys("id", "id", owned)
        check(rt.restart() == 2 and step == 2, "restart() of scattered blocks on 3 ranks")
        check(ids.tolist() == owned, f"ids by key on 3 ranks: {ids.tolist()}")
        for b, i in zip(blocks, owned):
            check_block(b, i, 2, "by key on 3 ranks")
        check(sum(sub.allgather(len(owned))) == NBLOCKS, "the 3 ranks own every block")
    sub.Free()


def scattered_restart_4(d):
    with ckpt.Runtime(comm, {"dir": d}) as rt:
        jr = rt.joined_rows("blocks", 2)
        count = jr.end - jr.begin
        pieces = [ghosted_block(rows=0)]  # an empty piece: skipped
        for k in range(0, count, 2):  # pieces of 2 blocks back to back (the last maybe 1)
            pieces.append(ghosted_block(rows=min(2, count - k)))
        rt.protect_scattered("blocks", pieces, row=(NV, NZ, NX), memory=MEMORY)
        rt.restart(1)
        got = [b for p in pieces for b in p]
        check(len(got) == count, f"{len(got)} blocks in the pieces, expected {count}")
        for b, i in zip(got, IDS[jr.begin:jr.end]):
            check_block(b, int(i), 1, "balanced into pieces of 2 blocks")
        # Other blocks by key in other allocations: protected again under the same name (the pieces replaced).
        want = [int(IDS[(5 * rank + k) % NBLOCKS]) for k in range(4)]
        blocks = [ghosted_block() for _ in want]
        rt.protect_scattered("blocks", blocks, row=(NV, NZ, NX), memory=MEMORY)
        rt.set_restart_keys("blocks", "id", want)
        rt.restart(2)
        for b, i in zip(blocks, want):
            check_block(b, i, 2, "protected again, by key")
        for p in pieces[1:]:  # the pieces replaced are not written any more
            p[...] = 0.0
        rt.restart(1)
        check(all((p == 0.0).all() for p in pieces[1:]), "the replaced pieces left alone")
        for b, i in zip(blocks, want):
            check_block(b, i, 1, "protected again, by key, step 1")


def scattered_job(d):
    scattered_write(d)
    scattered_restart_3(d)
    scattered_restart_4(d)
    bad = comm.allreduce(failures)
    if rank == 0:
        print(f"scattered: {'ok' if not bad else 'FAILED'} {size} 3", flush=True)
    return 1 if bad else 0


def rows_job(d):
    rows_write(d)
    rows_restart_4(d)
    rows_restart_3(d)
    bad = comm.allreduce(failures)
    if rank == 0:
        print(f"rows: {'ok' if not bad else 'FAILED'} {size} 3", flush=True)
    return 1 if bad else 0


def main():
    mode, d = sys.argv[1], sys.argv[2]
    if mode == "write":
        return write(d)
    if mode == "restart":
        return restart(d)
    if mode == "raise-in-with":
        return raise_in_with(d)
    if mode == "rows":
        return rows_job(d)
    if mode == "scattered":
        return scattered_job(d)
    if mode in ("exit-open", "finalize-open"):
        return exit_open(d, mode == "finalize-open")
    sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    sys.exit(main())
