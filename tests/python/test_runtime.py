"""ckpt.Runtime under `mpiexec -n N python3 -m mpi4py -m pytest` (ctest runs it at 2 and 4 processes): every
process runs every test, in the same order, and the collective calls line up. A check that one process
fails is gathered (agree()) so that every process fails the test together instead of one leaving the
others waiting in a collective call.

What is covered: the round trip of every dtype ckpt has and of those the package maps onto them (bool,
complex, float16, big-endian, datetime, records), as local, global, joined and scalar regions, read back by
restart() and by the reader (ckpt.open); tickets (wait, done, stats with every field of ckpt::CheckpointStats,
superseded); incremental checkpoints (bytes written, restart, the reader); the RestartWarning of a restart that falls back past a damaged step; options from a dict, a
YAML file and CKPT_* variables, and their errors; errors as ckpt.Error subclasses with the library's
message; lifetimes (the references the Runtime holds and lets go, arrays rebound without protect - also one
array under several names or with a protected view of it - numpy's resize refused, DLPack capsules
released); strided views that are a box of a larger array (ghost cells, padded rows: restored into the box
only, stored as the packed box); the arrays refused (strides that are no
such box, read-only, scalars, objects, bad geometry, changed kind or dtype); device arrays through fake
DLPack and CUDA-Array-Interface producers (device id, device types, strided views, stream handles passed to
the C API, memory the host cannot read); processes that disagree (steps, one process's bad protect); the
context manager; joined rows restarted by key and by index (set_restart_keys, set_restart_rows,
clear_restart_rows) and their refusals; scattered regions (protect_scattered: ghosted blocks, each its own
allocation, restored into new allocations by key; packed tiles of a mapped dtype by the balanced split; the
references held and let go, a replaced piece refused, the refusals before libckpt is called).

Environment: CKPTTEST_TMP (scratch root; default /tmp), PYTHONPATH / CKPT_LIBRARY (set by ctest, or the
pip-installed package: tests/install)."""
import ctypes
import gc
import os
import shutil
import sys
import tempfile
import weakref

import numpy as np
import pytest
from mpi4py import MPI

import ckpt

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fake_device import (KDL_BFLOAT, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED, KDL_METAL, KDL_OPENCL,  # noqa: E402
                         KDL_ROCM, FakeCudaArray, FakeDLPackArray, Stream, Unreadable)

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size


def agree(cond, what):
    """Asserts `cond` on every process: each one fails when any one does, naming the processes."""
    bad = [r for r, ok in enumerate(comm.allgather(bool(cond))) if not ok]
    assert not bad, f"{what}: failed on rank(s) {bad}"


def outcome(fn):
    """fn()'s result or exception as (type name, message), checked to be the same on every process."""
    try:
        fn()
        got = (None, "")
    except Exception as e:  # noqa: BLE001 - compared, whatever it is
        got = (type(e).__name__, str(e))
    everyone = comm.allgather(got)
    agree(all(g[0] == got[0] for g in everyone), f"same outcome everywhere: {everyone}")
    return got


@pytest.fixture
def scratch(request):
    """A directory shared by the processes (rank 0 makes it and removes it afterwards)."""
    root = os.environ.get("CKPTTEST_TMP") or tempfile.gettempdir()
    path = None
    if rank == 0:
        os.makedirs(root, exist_ok=True)
        path = tempfile.mkdtemp(prefix=f"{request.node.name[:40]}-", dir=root)
    path = comm.bcast(path, root=0)
    yield path
    comm.Barrier()
    if rank == 0:
        shutil.rmtree(path, ignore_errors=True)


def runtime(d, **extra):
    opts = {"dir": os.path.join(d, "ckpt"), "fsync": False, "keep": 100}
    opts.update(extra)
    return ckpt.Runtime(comm, opts)


def same_bytes(a, b):
    """Bit for bit (NaN payloads and -0.0 included), dtype and shape too."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


# Every dtype: ckpt's own ten, and the ones the package stores through them (ckpt/_arrays.py).
NATIVE = ["u1", "i1", "u2", "i2", "u4", "i4", "u8", "i8", "f4", "f8"]
MAPPED = ["?", "c8", "c16", "f2", ">f8", ">i4", "M8[s]", "m8[ms]", "S5", [("x", "<f8"), ("n", "<u2"), ("tag", "S3")]]
ALL = NATIVE + MAPPED


def values(dt, shape, salt):
    """Deterministic values of dtype `dt`, with the extremes of its type (NaN, inf, -0.0, min, max)."""
    dt = np.dtype(dt)
    n = int(np.prod(shape, dtype=np.int64))
    raw = np.random.default_rng(1000 + salt).integers(0, 256, size=n * dt.itemsize, dtype=np.uint8)
    out = raw.view(dt).reshape(shape).copy() if dt.fields is None else np.frombuffer(raw.tobytes(), dt).reshape(shape)
    flat = out.reshape(-1)
    if dt.kind == "f" and n >= 4:
        flat[:4] = [np.nan, np.inf, -0.0, np.finfo(dt).max]
    elif dt.kind in "iu" and n >= 2:
        flat[:2] = [np.iinfo(dt).min, np.iinfo(dt).max]
    elif dt.kind == "b":
        out = (raw[:n] & 1).astype(bool).reshape(shape)
    return np.ascontiguousarray(out)


def _key(dt):
    return str(np.dtype(dt)) if not isinstance(dt, list) else "record"


@pytest.mark.parametrize("dt", ALL, ids=[_key(d) for d in ALL])
def test_round_trip_every_dtype_and_kind(scratch, dt):
    dt = np.dtype(dt)
    rows, cols = 3, 4
    g_want = values(dt, (rows * size, cols), 1)  # the global array, rows split by rank
    j_rows = rank + 1  # rank r holds r + 1 rows of the joined array
    j_first = sum(range(1, rank + 1))
    j_want = values(dt, (sum(range(1, size + 1)), 2), 2)
    l_want = values(dt, (5 + rank,), 3 + rank)
    s_want = values(dt, (), 7)  # a scalar equal on every rank
    with runtime(scratch) as rt:
        g = rt.protect("g", g_want[rank * rows:(rank + 1) * rows].copy(), global_shape=g_want.shape,
                       start=(rank * rows, 0))
        j = rt.protect("j", j_want[j_first:j_first + j_rows].copy(), joined=True, first_row=j_first)
        loc = rt.protect("l", l_want.copy())
        s = rt.protect("s", s_want.copy())
        agree(rt.checkpoint(1).wait(), "checkpoint 1 committed")
        for a in (g, j, loc, s):
            a[...] = values(dt, a.shape, 99)  # clobber, then restore
        agree(rt.restart() == 1, "restart() returns the newest step")
        agree(same_bytes(g, g_want[rank * rows:(rank + 1) * rows]), f"{dt}: global box restored bit for bit")
        agree(same_bytes(j, j_want[j_first:j_first + j_rows]), f"{dt}: joined rows restored")
        agree(same_bytes(loc, l_want), f"{dt}: local array restored")
        agree(same_bytes(s, s_want), f"{dt}: scalar restored")
    # The reader gives the same arrays back, in their own dtype.
    c = ckpt.open(os.path.join(scratch, "ckpt")).latest()
    agree(same_bytes(c["g"].read(), g_want), f"{dt}: reader, whole global array")
    agree(same_bytes(c["g"][1:-1, 1:3], g_want[1:-1, 1:3]), f"{dt}: reader, a box")
    agree(same_bytes(c["j"].read(), j_want), f"{dt}: reader, joined array")
    agree(same_bytes(c["l"].read(rank=rank), l_want), f"{dt}: reader, this rank's local array")
    agree(same_bytes(c["s"].read(), s_want), f"{dt}: reader, scalar")
    mapped = dt.str[1:] not in NATIVE or not dt.isnative
    agree((c["g"].dtype, c["g"].shape) == (dt, g_want.shape), "reader dtype and shape")
    agree(("python.dtype" in c["g"].attrs) == mapped, "python.dtype attribute only for a mapped dtype")
    agree(c["s"].kind == ("scalar" if c["s"].stored_shape == () else "local"), "a mapped 0-d array is a local")
    c.verify()


def test_checkpoints_restart_steps_and_tickets(scratch):
    u = np.zeros((4, 6))
    step = np.zeros((), np.int64)
    with runtime(scratch) as rt:
        agree(rt.latest() is None, "latest() is None before any checkpoint")
        kind, msg = outcome(rt.restart)
        agree(kind == "NotFoundError" and msg.startswith("not_found: "), f"restart() with none: {kind} {msg}")
        agree(rt.device == "host" and (rt.rank, rt.size) == (rank, size), "rank, size, device")
        rt.protect("u", u, global_shape=(4 * size, 6), start=(4 * rank, 0))
        rt.protect("step", step)
        tickets = []
        for s in range(1, 4):
            u[...] = 100 * s + rank
            step[()] = s
            t = rt.checkpoint(s)
            u[...] = -1  # captured: overwriting at once is allowed
            tickets.append(t)
        for s, t in enumerate(tickets, 1):
            agree(t.wait() is True and t.done() and t.step == s, f"ticket {s} committed")
            st = t.stats()
            # committed_s is not bounded by blocked_s: a small checkpoint's commit may be visible before
            # checkpoint() returns (its thread preempted after handing over the last chunk).
            agree(st.step == s and st.bytes == u.nbytes + step.nbytes and st.committed_s >= st.durable_s > 0
                  and st.blocked_s > 0,
                  f"stats of {s}: {st}")
        agree(rt.latest() == 3, "latest() == 3")
        agree(rt.restart(2) == 2 and (u == 200 + rank).all() and step == 2, "restart(2)")
        agree(rt.restart() == 3 and (u == 300 + rank).all() and step == 3, "restart() newest")
        kind, msg = outcome(lambda: rt.restart(9))
        agree(kind == "NotFoundError", f"restart(9): {kind}")
        with pytest.raises(KeyError):  # NotFoundError is a KeyError too
            rt.restart(9)
        rt.wait_all()
        rt.poll()
        agree(rt.regions == ["u", "step"] and "step" in rt and "x" not in rt, "regions")
    agree(rt.closed, "closed by the with block")


def test_coalesce_supersedes(scratch):
    # A slow flush (the test knob CKPT_TEST_FLUSH_DELAY_MS): while one checkpoint is flushed, the next waits in the slot and the
    # one after replaces it. Which of 1 and 2 is replaced depends on when the flush of 1 starts; the last
    # one is never replaced, and every process agrees on each outcome.
    a = np.arange(64, dtype=np.float64)
    os.environ["CKPT_TEST_FLUSH_DELAY_MS"] = "400"  # read when the Runtime is made
    try:
        rt = runtime(scratch, on_busy="coalesce", max_in_flight=1)
    finally:
        del os.environ["CKPT_TEST_FLUSH_DELAY_MS"]
    with rt:
        rt.protect("a", a)
        tickets = []
        for s in (1, 2, 3):
            a[0] = s
            tickets.append(rt.checkpoint(s))
        got = tuple(t.wait() for t in tickets)
        agree(got[2] is True and False in got[:2], f"wait() outcomes {got}: the last committed, one superseded")
        agree(len(set(comm.allgather(got))) == 1, "the same outcomes on every process")
    kept = ckpt.open(os.path.join(scratch, "ckpt")).steps
    agree(kept == [s for s, ok in zip((1, 2, 3), got) if ok], f"on disk: {kept}, outcomes {got}")


def test_incremental_checkpoints(scratch):
    # Option incremental (issue 36): a step that changes one 64 KiB piece of 8 writes about one piece; every
    # step restarts exactly, and the reader resolves the references too.
    a = np.arange(8 * 8192, dtype=np.float64) + 1e6 * rank
    opts = dict(index_format=2, incremental=True, incremental_piece_bytes="64K", keep=10)
    want = {}
    with runtime(scratch, **opts) as rt:
        rt.protect("a", a)
        written = []
        for s in range(1, 5):
            a[(s % 8) * 8192] = s  # one piece changes
            want[s] = a.copy()
            t = rt.checkpoint(s)
            agree(t.wait() is True, f"checkpoint {s}")
            written.append(t.stats().bytes_written)
        agree(written[0] >= a.nbytes and all(w < 2 * 65536 for w in written[1:]), f"bytes written {written}")
        for s in range(1, 5):
            a[...] = -1
            agree(rt.restart(s) == s and (a == want[s]).all(), f"restart({s})")
    c = ckpt.open(os.path.join(scratch, "ckpt"))[4]
    agree((c["a"].read(rank=rank) == want[4]).all() and c.verify() is None, "the reader resolves the references")


def test_options_dict_file_environment(scratch):
    yaml_path = os.path.join(scratch, "opts.yaml")
    if rank == 0:
        with open(yaml_path, "w") as f:
            f.write(f"dir: {scratch}/from_file\nkeep: 5\nfsync: false\n")
    comm.Barrier()

    def steps_kept(d):
        return sorted(int(x[5:]) for x in os.listdir(d) if x.startswith("ckpt.") and x[5:].isdigit())

    def run(options=None, config=None, n=3):
        with ckpt.Runtime(comm, options, config=config) as rt:
            x = rt.protect("x", np.ones(3))
            for s in range(1, n + 1):
                x[0] = s
                rt.checkpoint(s).wait()

    run(yaml_path)  # a path as options: the YAML file
    agree(steps_kept(f"{scratch}/from_file") == [1, 2, 3], "the file's dir and keep: 5")
    run({"dir": f"{scratch}/from_dict", "keep": 1}, config=yaml_path)  # the dict over the file
    agree(steps_kept(f"{scratch}/from_dict") == [3], "the dict's dir and keep over the file's")
    os.environ["CKPT_KEEP"] = "2"
    try:
        run({"dir": f"{scratch}/from_env", "keep": 1}, config=yaml_path)
    finally:
        del os.environ["CKPT_KEEP"]
    agree(steps_kept(f"{scratch}/from_env") == [2, 3], "CKPT_KEEP over the dict")
    # Nested values (groups, mpiio_hints as a dict), paths and numpy numbers as values.
    import pathlib
    run({"dir": pathlib.Path(scratch) / "nested", "keep": np.int64(1), "mpiio_hints": {"cb_nodes": 1},
         "groups": [{"name": "xs", "match": ["x*"], "transport": "posix"}]}, n=1)
    agree(steps_kept(f"{scratch}/nested") == [1], "nested options")
    # Errors: the same on every process, the library's message naming the option.
    for bad, words in [({"kepp": 3}, ["options", "kepp"]), ({"keep": 0}, ["keep"]), ({"transport": "nope"}, ["nope"]),
                       ({"dir": None}, ["dir"])]:
        kind, msg = outcome(lambda: ckpt.Runtime(comm, bad))
        agree(kind == "InvalidArgumentError" and all(w in msg for w in words), f"{bad}: {kind}: {msg}")
    kind, msg = outcome(lambda: ckpt.Runtime(comm, {"dir": object()}))
    agree(kind == "InvalidArgumentError" and "object" in msg, f"an object as a value: {msg}")
    kind, msg = outcome(lambda: ckpt.Runtime(comm, f"{scratch}/missing.yaml"))
    agree(kind == "NotFoundError" and "missing.yaml" in msg, f"missing file: {kind} {msg}")
    kind, _ = outcome(lambda: ckpt.Runtime(comm, yaml_path, config=yaml_path))
    agree(kind == "InvalidArgumentError", "a path twice")
    kind, _ = outcome(lambda: ckpt.Runtime(comm, [("dir", "x")]))
    agree(kind == "InvalidArgumentError", "options of the wrong type")
    for bad_comm in (MPI.COMM_NULL, "world"):
        with pytest.raises(ckpt.InvalidArgumentError, match="communicator"):
            ckpt.Runtime(bad_comm, {"dir": f"{scratch}/x"})
    # A sub-communicator: one Runtime per half, each its own directory.
    half = comm.Split(rank % 2, rank)
    with ckpt.Runtime(half, {"dir": f"{scratch}/half{rank % 2}", "fsync": False}) as rt:
        agree(rt.size == half.size and rt.rank == half.rank, "a Runtime on a split communicator")
        x = rt.protect("x", np.full(2, rank % 2, np.int32))
        rt.checkpoint(1).wait()
        agree(x[0] == rank % 2, "unchanged")
    half.Free()


def test_errors_carry_the_library_message(scratch):
    a = np.zeros(8)
    rt = runtime(scratch)
    with pytest.raises(ckpt.InvalidArgumentError) as e:
        rt.protect("../escape", a)
    assert e.value.code == "invalid_argument" and str(e.value).startswith("invalid_argument: ")
    assert isinstance(e.value, ckpt.Error) and isinstance(e.value, ValueError)
    with pytest.raises(ckpt.NotFoundError):
        rt.unprotect("never")
    with pytest.raises(ckpt.NotFoundError):
        rt.annotate("never", "k", "v")
    rt.protect("a", a)
    rt.annotate("a", "units", "m/s")
    kind, msg = outcome(lambda: rt.checkpoint(-1))
    agree(kind == "InvalidArgumentError" and "-1" in msg, f"negative step: {msg}")
    with pytest.raises(TypeError):
        rt.checkpoint(1.5)
    rt.checkpoint(1).wait()
    # The stored extents differ: a MismatchError naming the region, on every process.
    rt.protect("a", np.zeros(9))
    kind, msg = outcome(lambda: rt.restart(1))
    agree(kind == "MismatchError" and "'a'" in msg, f"restart into other extents: {kind}: {msg}")
    rt.protect("a", a)
    # A flipped byte in rank 0's block: CorruptError from restart(step), on every process.
    comm.Barrier()
    if rank == 0:
        d = os.path.join(scratch, "ckpt", "ckpt.1")
        f = os.path.join(d, "data.0")
        with open(f, "r+b") as fh:
            fh.seek(-1, 2)  # the stream's last byte: the end of the last block
            b = fh.read(1)
            fh.seek(-1, 2)
            fh.write(bytes([b[0] ^ 0xFF]))
    comm.Barrier()
    kind, msg = outcome(lambda: rt.restart(1))
    agree(kind == "CorruptError", f"restart of a damaged checkpoint: {kind}: {msg}")
    rt.close()
    rt.close()  # idempotent
    for call in (lambda: rt.checkpoint(2), lambda: rt.protect("b", a), rt.restart, rt.latest, rt.wait_all):
        with pytest.raises(ckpt.PreconditionError, match="closed"):
            call()
    assert ckpt.StorageError.__mro__[1:3] == (ckpt.Error, OSError)


def test_restart_warning_and_stats(scratch):
    """restart() of the newest step that falls back past a damaged step issues a ckpt.RestartWarning (code
    "corrupt", naming the skipped step) and keeps it in last_restart_warning; restart(step) resets it.
    Ticket.stats() has every field of ckpt::CheckpointStats: synced with fsync and durable_every_ms 0, not
    without fsync; redundancy with local_dir and redundancy partner (ranks_per_node 1: every process a
    node); staging_pinned_bytes 0 on the host device."""
    u = np.arange(1000, dtype=np.float64) + rank
    with runtime(scratch, fsync=True, durable_every_ms=0) as rt:
        rt.protect("u", u)
        for s in (1, 2):
            u[0] = s
            t = rt.checkpoint(s)
            agree(t.wait() is True, f"checkpoint {s}")
            st = t.stats()
            agree(st._fields == ckpt.CheckpointStats._fields and len(st._fields) == 13, f"fields: {st._fields}")
            agree(st.step == s and st.bytes == u.nbytes and st.synced is True, f"synced with fsync: {st}")
            agree(st.redundancy_s == 0 and st.redundancy_bytes == 0, f"no redundancy: {st}")
            agree(st.staging_pinned_bytes == 0 and st.staging_bytes > 0, f"the host device pins nothing: {st}")
        rt.restart()
        agree(rt.last_restart_warning is None, "the newest step restores: no warning")
    comm.Barrier()
    if rank == 0:  # step 2's data file of rank 0, emptied: that step is damaged
        open(os.path.join(scratch, "ckpt", "ckpt.2", "data.0"), "wb").close()
    comm.Barrier()
    with runtime(scratch) as rt:
        rt.protect("u", u)
        with pytest.warns(ckpt.RestartWarning) as caught:
            step = rt.restart()
        w = rt.last_restart_warning
        agree(step == 1 and u[0] == 1, f"fell back to step 1: {step}")
        agree(len(caught) == 1 and caught[0].message is w, "one warning, the one kept")
        agree(isinstance(w, UserWarning) and w.code == "corrupt" and "step 2" in w.message and
              "after skipping newer ones" in w.message and str(w).startswith("corrupt: "), f"the warning: {w!r}")
        agree(rt.restart(1) == 1 and rt.last_restart_warning is None, "restart(step) has no fall-back: none")
        t = rt.checkpoint(3)
        t.wait()
        agree(t.stats().synced is False, "fsync off: not synced")
    with runtime(scratch, local_dir=os.path.join(scratch, "local"), ranks_per_node=1, redundancy="partner") as rt:
        rt.protect("u", u)
        t = rt.checkpoint(4)
        t.wait()
        st = t.stats()
        if size > 1:
            agree(st.redundancy_bytes >= u.nbytes and 0 < st.redundancy_s <= st.committed_s,
                  f"the copy to the partner node: {st}")


def test_lifetimes(scratch):
    rt = runtime(scratch)
    # The Runtime holds what it protects: an array the caller dropped stays alive until it lets go.
    tmp = np.arange(10.0)
    alive = weakref.ref(tmp)
    rt.protect("held", tmp)
    del tmp
    gc.collect()
    assert alive() is not None, "the Runtime holds a reference"
    # ... but a checkpoint of an array nothing else holds is refused: it would store stale data.
    kind, msg = outcome(lambda: rt.checkpoint(1))
    agree(kind == "PreconditionError" and "'held'" in msg and "rebound" in msg, f"orphan refused: {msg}")
    rt.unprotect("held")
    gc.collect()
    assert alive() is None, "unprotect() lets go of the array"
    # The usual mistake: the name rebound to a new array (u = u + 1) instead of an update in place.
    u = rt.protect("u", np.zeros(5))
    u += 1  # in place: fine
    rt.checkpoint(1).wait()
    old = weakref.ref(u)
    u = u + 1
    kind, msg = outcome(lambda: rt.checkpoint(2))
    agree(kind == "PreconditionError" and "'u'" in msg, f"rebound array refused: {msg}")
    rt.protect("u", u)  # re-protected: the new array is what is stored, the old one is let go
    gc.collect()
    assert old() is None
    rt.checkpoint(2).wait()
    u[...] = 0
    rt.restart(2)
    agree((u == 2).all(), "the re-protected array was stored and restored")
    # Re-protecting the same array (twice, with new extents after a reallocation) keeps one reference.
    rt.protect("u", u)
    rt.protect("u", u)
    rt.checkpoint(3).wait()
    v = np.full(7, 3.0)
    rt.protect("u", v)  # other extents: fine for a local array
    del u
    rt.checkpoint(4).wait()
    # numpy refuses to reallocate a protected array in place (the Runtime's reference).
    with pytest.raises(ValueError, match="resize"):
        v.resize(100)
    # A view of a larger array is no false alarm: the application holds the base.
    big = np.zeros((3, 4))
    rt.protect("row", big[1])
    big[1] = 5
    rt.checkpoint(5).wait()
    # Kind and dtype cannot change under a name.
    with pytest.raises(ckpt.InvalidArgumentError, match="local array of float64"):
        rt.protect("u", np.zeros(7, np.float32))
    with pytest.raises(ckpt.InvalidArgumentError, match="joined"):
        rt.protect("u", v, joined=True)
    rt.checkpoint(6).wait()  # still usable after the refusals
    # Arrays of other producers are not checked (their views carry no mark to trust): no false alarm.
    rt.protect("unchecked", FakeDLPackArray(np.zeros(3)))
    rt.checkpoint(7).wait()
    rt.unprotect("unchecked")
    # A DLPack capsule is kept, unconsumed, while protected and released with the array.
    f = FakeDLPackArray(np.zeros(4))
    rt.protect("dev", f)
    agree(f.live_exports() == 1, "the capsule is held")
    rt.checkpoint(8).wait()
    rt.protect("dev", f)  # replaced by a new export of the same array
    gc.collect()
    agree(f.live_exports() == 1 and len(f.exports) == 2, "the old capsule was released")
    g = FakeDLPackArray(np.zeros(4))
    rt.protect("dev2", g)
    rt.checkpoint(9).wait()
    rt.close()
    gc.collect()
    agree(f.live_exports() == 0 and g.live_exports() == 0, "close() releases every capsule")
    agree(rt.regions == [] and "u" not in rt, "close() forgets the regions")


def test_rebound_array_found_among_many(scratch):
    """checkpoint() keeps the reference counts of its last holding check that passed, and compares the next
    ones with them as a list (docs/performance.md): an array rebound after checkpoints that passed is still
    refused, whichever of 100 it is, while other references come and go, and again on the next call."""
    rt = runtime(scratch)
    arrays = [rt.protect(f"a/{i}", np.full(16, float(i))) for i in range(100)]
    step = 1
    rt.checkpoint(step).wait()
    step += 1
    rt.checkpoint(step).wait()  # the counts that passed: passes again
    extra = arrays[::3]  # more references: other counts, checked again
    step += 1
    rt.checkpoint(step).wait()
    del extra
    for i in (57, 0, 99):
        gone = weakref.ref(arrays[i])
        arrays[i] = arrays[i] + 1  # rebound: only the Runtime holds the protected array now
        for _ in range(2):  # a refusal is not remembered as a check that passed
            kind, msg = outcome(lambda: rt.checkpoint(step + 1))
            agree(kind == "PreconditionError" and f"'a/{i}'" in msg and "rebound" in msg, f"a/{i} refused: {msg}")
        rt.protect(f"a/{i}", arrays[i])  # re-protected: checked with the new array's counts
        gc.collect()
        agree(gone() is None, "the rebound array was let go")
        step += 1
        rt.checkpoint(step).wait()
    # Dropped while held elsewhere too: refused once that other reference goes, with the counts of before.
    other = arrays[42]
    arrays[42] = None
    step += 1
    rt.checkpoint(step).wait()
    del other
    kind, msg = outcome(lambda: rt.checkpoint(step + 1))
    agree(kind == "PreconditionError" and "'a/42'" in msg, f"a/42 refused: {msg}")
    rt.unprotect("a/42")
    step += 1
    rt.checkpoint(step).wait()
    # protect() and unprotect() only mark what checkpoint() checks for a rebuild (protecting N arrays is
    # O(N)): rebound between a protect of other names, a re-protect of the same array and an unprotect,
    # the array is still refused by the next checkpoint(), and the others pass.
    more = [rt.protect(f"b/{i}", np.zeros(4)) for i in range(3)]
    arrays[7] = arrays[7] * 2
    rt.protect("a/8", arrays[8])
    rt.unprotect("b/1")
    kind, msg = outcome(lambda: rt.checkpoint(step + 1))
    agree(kind == "PreconditionError" and "'a/7'" in msg, f"a/7 refused after other protects: {msg}")
    rt.protect("a/7", arrays[7])
    step += 1
    rt.checkpoint(step).wait()
    del more
    kind, msg = outcome(lambda: rt.checkpoint(step + 1))
    agree(kind == "PreconditionError" and "'b/0'" in msg, f"b/0 refused once dropped: {msg}")
    rt.close()



def test_reprotected_from_a_view_to_its_base(scratch):
    """A name protected as a temporary view (X[2:], held by the Runtime only) and then as its base X: the
    view's reference to X (.base) goes with the old registration, after the Runtime counted what the new
    one holds, so X rebound later is still refused (the count came out one too low, and accepted it)."""
    rt = runtime(scratch)
    x = np.arange(8.0)
    rt.protect("a", x[2:])
    rt.protect("a", x)
    rt.checkpoint(1).wait()
    x = x + 1  # rebound: only the Runtime holds the protected array
    kind, msg = outcome(lambda: rt.checkpoint(2))
    agree(kind == "PreconditionError" and "'a'" in msg, f"rebound base refused: {msg}")
    rt.protect("a", x)  # the new array: accepted
    rt.checkpoint(2).wait()
    rt.close()


class Checkpoints:
    """A test's checkpoints, numbered: accepted(what) takes the next step and requires it to commit;
    refused(what, *names) requires the next one, twice (a refusal is not remembered as a check that passed),
    to be refused with PreconditionError naming every region in `names`."""

    def __init__(self, rt):
        self.rt, self.step = rt, 0

    def accepted(self, what):
        self.step += 1
        kind, msg = outcome(lambda: self.rt.checkpoint(self.step).wait())
        agree(kind is None, f"{what}: accepted ({kind}: {msg})")

    def refused(self, what, *names):
        for _ in range(2):
            kind, msg = outcome(lambda: self.rt.checkpoint(self.step + 1))
            agree(kind == "PreconditionError" and all(f"'{n}'" in msg for n in names) and "no longer held" in msg,
                  f"{what}: refused naming {names} ({kind}: {msg})")


def test_reprotect_after_a_checkpoint_patches_the_check(scratch):
    """A re-protect after a checkpoint() updates the holding check in place when the old and the new array
    stand alone (one name each, no protected view of either): what the next checkpoint() checks is what a
    rebuild would check - the new array refused once rebound or dropped, the same array re-protected still
    checked - and where they do not stand alone (another name, a protected view) the check is rebuilt."""
    rt = runtime(scratch)
    c = Checkpoints(rt)
    others = [rt.protect(f"o/{i}", np.zeros(4)) for i in range(5)]
    u = rt.protect("u", np.zeros(5))
    c.accepted("first")
    u = u + 1
    rt.protect("u", u)  # patched
    c.accepted("re-protected")
    u = u + 1  # rebound again, not re-protected
    c.refused("rebound after a patched re-protect", "u")
    rt.protect("u", u)
    rt.protect("u", u)  # the same array again
    c.accepted("the same array re-protected")
    u = None
    c.refused("dropped after the same array was re-protected", "u")
    u = rt.protect("u", np.ones(3))
    c.accepted("again")
    # The new array also protected under another name: rebuilt, held twice.
    w = np.full(4, 2.0)
    rt.protect("w", w)
    c.accepted("w")
    rt.protect("u", w)
    c.accepted("u and w one array")
    rt.unprotect("w")
    w = None
    c.refused("u's array dropped once w is gone", "u")
    # A protected view of the new array: the view that the program holds keeps it accepted.
    base = np.arange(10.0)
    view = rt.protect("v", base[2:])
    rt.protect("u", base)
    c.accepted("u's array has a protected view")
    base = None
    c.accepted("the program holds the view, and through it the array")
    view = None
    c.refused("neither held", "u")
    rt.unprotect("v")
    # The old array had a protected view: rebuilt; the view's name keeps its checks.
    a = rt.protect("u", np.arange(6.0))
    av = rt.protect("v", a[1:])
    c.accepted("u with a view")
    rt.protect("u", np.zeros(2) + 7)  # a temporary: nothing else holds it
    c.refused("the new array is held by the Runtime only", "u")
    del others, av
    rt.close()


def test_array_under_several_names_or_with_its_views(scratch):
    """The Runtime holds an array once per name it is protected under, and through every protected view of
    it (the view's .base): checkpoint() refuses it once the application holds none of them - dropped,
    rebound, `del` then gc.collect(), also after checkpoints that passed and with a checkpoint in flight -
    and accepts it while the application holds the array, another name's alias of it, or one of its
    protected views. Each refusal names every region the array is protected under."""
    rt = runtime(scratch)
    c = Checkpoints(rt)
    # One array under two names: held while any reference of the application's remains.
    a = np.full(8, 1.0)
    rt.protect("a", a)
    rt.protect("b", a)
    c.accepted("two names, held")
    c.accepted("two names, held (the counts of a check that passed)")
    alias = a
    del a
    c.accepted("two names, held through an alias")
    gone = weakref.ref(alias)
    del alias
    gc.collect()
    c.refused("two names, dropped", "a", "b")
    a = rt.protect("a", np.full(8, 2.0))  # replaced under one name: the other still holds the orphan
    c.refused("one name replaced, the other still the dropped array", "b")
    rt.protect("b", a)
    gc.collect()
    agree(gone() is None, "the dropped array was let go once both names were replaced")
    c.accepted("both names replaced")
    a = a + 1  # rebound: the application holds only the new array
    c.refused("two names, rebound", "a", "b")
    rt.protect("a", a)
    rt.protect("b", a)
    c.accepted("both names re-protected")
    rt.unprotect("a")
    c.accepted("one name left, held")
    del a
    c.refused("one name left, dropped", "b")
    rt.unprotect("b")

    # Three names, the dropped array found after checkpoints that passed.
    x = np.arange(5.0)
    for n in ("x/1", "x/2", "x/3"):
        rt.protect(n, x)
    c.accepted("three names")
    c.accepted("three names again")
    x = None
    c.refused("three names, dropped", "x/1", "x/2", "x/3")
    for n in ("x/1", "x/2", "x/3"):
        rt.unprotect(n)
    c.accepted("unprotected")

    # An array and a view of it, both protected: the view the Runtime holds does not hold the array for
    # the application; one the application holds does.
    u = np.zeros((6, 4))
    rt.protect("u", u)
    inner = rt.protect("inner", u[1:-1])
    u[...] = 3.0
    c.accepted("array and view, both held")
    del u
    c.accepted("the array held through its protected view")
    inner += 1.0
    c.step += 1
    in_flight, t = c.step, rt.checkpoint(c.step)  # in flight while the application lets go
    del inner
    gc.collect()
    c.refused("array and view, both dropped", "u")
    agree(t.wait() is True, "the checkpoint in flight commits")
    # The view protected first, then its base; the application holds an unprotected view, then nothing.
    w = np.zeros((6, 4))
    rt.protect("inner", w[1:-1])
    rt.protect("u", w)
    keep = w[2:]
    del w
    c.accepted("held through an unprotected view")
    del keep
    c.refused("view first, then base, both dropped", "u")
    w = rt.protect("u", np.zeros((6, 4)))
    rt.protect("inner", w[1:-1])
    w[...] = 7.0
    c.accepted("re-protected")
    w[...] = 0.0
    rt.restart(in_flight)  # the checkpoint in flight at the drop: the values from before it
    agree((w[0] == 3.0).all() and (w[-1] == 3.0).all() and (w[1:-1] == 4.0).all(),
          f"the checkpoint taken before the drop restored: {w}")
    rt.unprotect("inner")
    rt.unprotect("u")

    # A piece of a scattered region that is also a protected joined array (and twice a piece).
    p = np.zeros((2, 3))
    rt.protect("p", p, joined=True)
    rt.protect_scattered("s", [p, p])
    c.accepted("piece and joined array, held")
    del p
    c.refused("piece and joined array, dropped", "p", "s")
    rt.close()


def test_refusals(scratch):
    rt = runtime(scratch)
    a = np.zeros((4, 6))
    cases = [
        (lambda: rt.protect("x", a[:, ::2]), ckpt.InvalidArgumentError, "not C-contiguous"),
        (lambda: rt.protect("x", a.T), ckpt.InvalidArgumentError, "not C-contiguous"),
        (lambda: rt.protect("x", np.asfortranarray(a)), ckpt.InvalidArgumentError, "not C-contiguous"),
        (lambda: rt.protect("x", np.broadcast_to(np.zeros(6), (4, 6))), ckpt.InvalidArgumentError, "contiguous"),
        (lambda: rt.protect("x", np.zeros(3)[::-1]), ckpt.InvalidArgumentError, "not C-contiguous"),
        (lambda: rt.protect("x", 1.5), ckpt.InvalidArgumentError, "0-d array"),
        (lambda: rt.protect("x", np.float64(1.5)), ckpt.InvalidArgumentError, "0-d array"),
        (lambda: rt.protect("x", [1.0, 2.0]), ckpt.InvalidArgumentError, "list"),
        (lambda: rt.protect("x", np.empty(3, object)), ckpt.InvalidArgumentError, "objects"),
        (lambda: rt.protect("x", np.ma.zeros(3)), ckpt.InvalidArgumentError, "masked"),
        (lambda: rt.protect("x", a, global_shape=(8, 6)), ckpt.InvalidArgumentError, "start"),
        (lambda: rt.protect("x", a, start=(0, 0)), ckpt.InvalidArgumentError, "global_shape"),
        (lambda: rt.protect("x", a, global_shape=(8,), start=(0,)), ckpt.InvalidArgumentError, "one value per"),
        (lambda: rt.protect("x", a, global_shape=(8, 6), start=(-1, 0)), ckpt.InvalidArgumentError, "negative"),
        (lambda: rt.protect("x", a, global_shape=(8, 6), start=(6, 0)), ckpt.InvalidArgumentError, "x"),
        (lambda: rt.protect("x", a, global_shape=(8, 6), start=(0.5, 0)), ckpt.InvalidArgumentError, "integers"),
        (lambda: rt.protect("x", a, global_shape=(8, 6), start=(0, 0), joined=True), ckpt.InvalidArgumentError,
         "joined"),
        (lambda: rt.protect("x", np.zeros(()), joined=True), ckpt.InvalidArgumentError, "rows"),
        (lambda: rt.protect("x", a, first_row=0), ckpt.InvalidArgumentError, "first_row"),
        (lambda: rt.protect(3, a), ckpt.InvalidArgumentError, "str"),
        (lambda: rt.protect("x y", a), ckpt.InvalidArgumentError, "x y"),
    ]
    ro = np.zeros(3)
    ro.flags.writeable = False
    cases.append((lambda: rt.protect("x", ro), ckpt.InvalidArgumentError, "read-only"))
    for call, exc, words in cases:
        with pytest.raises(exc, match=words):
            call()
    assert rt.regions == [], "no refusal leaves a region behind"
    # Zero-size arrays: the library refuses a local array with no element (it could not be restored; its
    # message says what to use), takes an empty box of a global array and a joined array with no row here.
    with pytest.raises(ckpt.InvalidArgumentError, match="'empty': zero-size dimension.*Block"):
        rt.protect("empty", np.zeros((0, 3)))
    box = rt.protect("box", np.zeros((0 if rank % 2 else 2, 3)), global_shape=(2 * ((size + 1) // 2), 3),
                     start=(2 * (rank // 2), 0))
    rows = rt.protect("rows", np.full((0 if rank % 2 else 2, 3), rank + 1.0), joined=True)
    agree(rt.checkpoint(1).wait(), "empty boxes and rows checkpointed")
    # Restart reads the balanced split of the stored rows, whichever process wrote them.
    total = 2 * ((size + 1) // 2)
    jr = rt.joined_rows("rows")
    agree(jr == (total, total * rank // size, total * (rank + 1) // size), f"joined_rows {jr}")
    rows = rt.protect("rows", np.zeros((jr.end - jr.begin, 3)), joined=True)
    agree(rt.restart(1) == 1 and box.size == (0 if rank % 2 else 6), "restored")
    writer = [r for r in range(0, size, 2) for _ in range(2)]  # the rank that wrote each stored row
    agree((rows == np.array(writer[jr.begin:jr.end], float)[:, None] + 1).all(), f"rows {rows.tolist()}")
    rt.close()


def test_restart_rows_and_keys(scratch, monkeypatch):
    """set_restart_keys / set_restart_rows at this job's process count: every process asks for every stored
    row (they overlap), in its own scrambled order, by id and by index; clear_restart_rows goes back to the
    balanced split; bad rows are refused before libckpt is called (tests/python/rt_job.py `rows` has the
    4 -> 4 and 4 -> 3 job with the collective refusals)."""
    rt = runtime(scratch)
    n = rank + 1  # rank r writes r + 1 rows [id, id * 10]
    first = sum(range(1, rank + 1))
    total = sum(range(1, size + 1))
    ids_all = 5 * np.arange(total, dtype=np.int64)[::-1] - 3  # stored row k holds id ids_all[k]
    ids = rt.protect("id", ids_all[first:first + n].copy(), joined=True)
    rows = rt.protect("rows", np.stack([ids, ids * 10], axis=1).astype(np.float32), joined=True)
    agree(rt.checkpoint(1).wait(), "checkpointed")
    want = np.random.default_rng(rank).permutation(total)  # stored rows, scrambled per process
    ids = rt.protect("id", np.zeros(total, np.int64), joined=True)
    rows = rt.protect("rows", np.zeros((total, 2), np.float32), joined=True)
    rt.set_restart_keys("rows", "id", ids_all[want].tolist())
    rt.set_restart_keys("id", "id", ids_all[want])
    agree(rt.restart(1) == 1 and ids.tolist() == ids_all[want].tolist(), f"ids by key {ids.tolist()}")
    agree(np.array_equal(rows, np.stack([ids_all[want], ids_all[want] * 10], axis=1)), "rows by key")
    rt.set_restart_rows("rows", want[::-1])
    rt.set_restart_rows("id", [int(k) for k in want[::-1]])
    rt.restart(1)
    agree(ids.tolist() == ids_all[want[::-1]].tolist(), f"ids by row {ids.tolist()}")
    agree(np.array_equal(rows[:, 1], ids_all[want[::-1]] * 10.0), "rows by row")
    # Refused in Python, libckpt not called: the setting by row stays.
    called = []
    for f in ("ckpt_set_restart_rows", "ckpt_set_restart_keys"):
        monkeypatch.setattr(ckpt.runtime.lib, f, lambda *a, f=f: called.append(f) or 0)
    for call, words in [(lambda: rt.set_restart_rows("rows", [0, -1]), r"rows\[1\] is -1"),
                        (lambda: rt.set_restart_rows("rows", np.array([-3])), r"rows\[0\] is -3"),
                        (lambda: rt.set_restart_rows("rows", [0.0]), "float"),
                        (lambda: rt.set_restart_rows("rows", np.zeros(2)), "float64"),
                        (lambda: rt.set_restart_rows("rows", np.array([True])), "bool"),
                        (lambda: rt.set_restart_rows("rows", b"\x01"), "bytes"),
                        (lambda: rt.set_restart_rows("rows", 2), "sequence"),
                        (lambda: rt.set_restart_keys("rows", "id", [2 ** 63]), "int64"),
                        (lambda: rt.set_restart_keys("rows", 5, [1]), "key must be a str")]:
        with pytest.raises(ckpt.InvalidArgumentError, match=words):
            call()
    monkeypatch.undo()
    agree(called == [], f"libckpt called: {called}")
    rows[...] = 0
    rt.restart(1)
    agree(np.array_equal(rows[:, 1], ids_all[want[::-1]] * 10.0), "rows by row after the refusals")
    local = rt.protect("local", np.zeros(3))
    with pytest.raises(ckpt.InvalidArgumentError, match="'local' is a local region, not a joined array"):
        rt.set_restart_rows("local", [])
    rt.unprotect("local")
    del local
    with pytest.raises(ckpt.NotFoundError, match="not protected"):
        rt.clear_restart_rows("nosuch")
    rt.clear_restart_rows("rows")
    rt.clear_restart_rows("id")
    jr = rt.joined_rows("rows", 1)
    ids = rt.protect("id", np.zeros(jr.end - jr.begin, np.int64), joined=True)
    rows = rt.protect("rows", np.zeros((jr.end - jr.begin, 2), np.float32), joined=True)
    rt.restart(1)
    agree(ids.tolist() == ids_all[jr.begin:jr.end].tolist() and np.array_equal(rows[:, 0], ids),
          "the balanced split after clear_restart_rows")
    rt.close()
    with pytest.raises(ckpt.PreconditionError, match="closed"):
        rt.set_restart_keys("rows", "id", [])


SENTINEL = -7.25  # in the ghost cells and padding: what restart() must leave alone

# A block of a scattered region: NV x NZ x NX cells with one ghost cell around each NZ x NX plane.
NV, NZ, NX = 2, 3, 4
ROW, BLOCK_MEMORY = (NV, NZ, NX), ((0, 1, 1), (NV, NZ + 2, NX + 2))


def ghosted_block(block_id=None):
    """A block's allocation: SENTINEL in the ghosts, block `block_id`'s cells inside (None: SENTINEL only)."""
    b = np.full(BLOCK_MEMORY[1], SENTINEL)
    if block_id is not None:
        b[:, 1:-1, 1:-1] = 1000.0 * block_id + np.arange(NV * NZ * NX).reshape(ROW)
    return b


def test_scattered_blocks(scratch, monkeypatch):
    """protect_scattered: this process's ghosted blocks, each its own allocation, stored as one joined array
    of their interiors; restored into new allocations (a piece of 2 blocks, single blocks, an empty piece) by
    key, every process asking for every block in its own order, interiors equal and ghosts untouched; tiles of
    a mapped dtype (complex64), packed, restored by the balanced split; a process with no piece; the
    references the Runtime holds and lets go; a replaced piece refused by checkpoint(); the refusals before
    libckpt is called, and the library's."""
    from ckpt import runtime as rtmod

    total = sum(r + 2 for r in range(size))
    first, n = sum(r + 2 for r in range(rank)), rank + 2
    ids_all = 7 * np.arange(total, dtype=np.int64)[::-1] + 11  # stored row k: block ids_all[k]
    blocks = [ghosted_block(i) for i in ids_all[first:first + n]]
    refs = [sys.getrefcount(b) for b in blocks]
    tiles_all = values("c8", (sum(3 * r for r in range(size)), 2), 90)  # rank r: 3 r rows of 2
    t0 = sum(3 * r for r in range(rank))
    tiles = [tiles_all[t0:t0 + rank].copy(), np.zeros((0, 2), np.complex64), tiles_all[t0 + rank:t0 + 3 * rank].copy()]
    with runtime(scratch) as rt:
        got = rt.protect_scattered("blocks", blocks, row=ROW, memory=BLOCK_MEMORY)
        agree(got == blocks and all(g is b for g, b in zip(got, blocks)), "returns the pieces")
        del got
        now = [sys.getrefcount(b) for b in blocks]
        agree(all(x > k for x, k in zip(now, refs)), f"the Runtime holds every piece: {now} {refs}")
        ids = rt.protect("block_id", ids_all[first:first + n].copy(), joined=True)
        if rank == 0:  # no piece: dtype and row given
            rt.protect_scattered("tiles", [], row=(2,), dtype=np.complex64)
        else:  # the row from the pieces; complex64 stored as f32 with a trailing dimension of 2
            rt.protect_scattered("tiles", tiles)
        t = rt.checkpoint(1)
        for blk in blocks:
            blk[...] = 0.0  # captured when checkpoint() returned
        del blk  # the loop's reference: the counts below are of the list's and the Runtime's
        agree(t.wait(), "checkpoint of scattered regions committed")
        agree(t.stats().bytes == n * (NV * NZ * NX * 8 + 8) + (0 if rank == 0 else 3 * rank * 2 * 8),
              f"the interiors' bytes only: {t.stats().bytes}")

        # By key into new allocations: one piece of 2 blocks back to back, single blocks, an empty piece.
        want = ids_all[np.random.default_rng(rank).permutation(total)]
        slab = np.stack([ghosted_block(), ghosted_block()])
        singles = [ghosted_block() for _ in range(total - 2)]
        pieces = [np.zeros((0,) + BLOCK_MEMORY[1]), slab] + singles
        rt.protect_scattered("blocks", pieces, row=ROW, memory=BLOCK_MEMORY)  # again: the pieces replaced
        now = [sys.getrefcount(b) for b in blocks]
        agree(now == refs, f"the replaced pieces let go: {now} {refs}")
        ids = rt.protect("block_id", np.zeros(total, np.int64), joined=True)
        rt.set_restart_keys("blocks", "block_id", want)
        rt.set_restart_keys("block_id", "block_id", want)
        jr = rt.joined_rows("tiles", 1)
        tiles_back = [np.zeros((jr.end - jr.begin - 1, 2), np.complex64), np.zeros((1, 2), np.complex64)]
        tb_refs = [sys.getrefcount(p) for p in tiles_back]
        rt.protect_scattered("tiles", tiles_back)
        agree(rt.restart(1) == 1 and ids.tolist() == want.tolist(), f"ids by key {ids.tolist()}")
        restored = [slab[0], slab[1]] + singles
        agree(all(same_bytes(b, ghosted_block(i)) for b, i in zip(restored, want)),
              "the blocks by key: interiors equal, ghosts untouched")
        agree(same_bytes(np.concatenate(tiles_back), tiles_all[jr.begin:jr.end]), "the tiles, balanced")

        # A piece the application replaced in its list is held by the Runtime only: checkpoint() refuses it.
        del restored
        singles[1] = pieces[3] = singles[1] + 1.0
        kind, msg = outcome(lambda: rt.checkpoint(2))
        agree(kind == "PreconditionError" and "piece 3 of the scattered region 'blocks'" in msg, f"refused: {msg}")
        rt.protect_scattered("blocks", [slab] + singles, row=ROW, memory=BLOCK_MEMORY)
        agree(rt.checkpoint(2).wait(), "checkpoint with the pieces protected again")

        # Refused before libckpt is called.
        called = []
        for f in ("ckpt_protect_scattered", "ckpt_update_scattered"):
            monkeypatch.setattr(rtmod.lib, f, lambda *a, f=f: called.append(f) or 0)
        b = ghosted_block(1)
        read_only = ghosted_block(2)
        read_only.flags.writeable = False
        for call, words in [
                (lambda: rt.protect_scattered("x", [b, None], row=ROW, memory=BLOCK_MEMORY), "piece 1: a NoneType"),
                (lambda: rt.protect_scattered("x", [b], row=ROW, memory=((0, 1), (5, 6))),
                 r"memory start \(0, 1\) and alloc \(5, 6\) need one entry per entry of row \(2, 3, 4\)"),
                (lambda: rt.protect_scattered("x", [b], memory=BLOCK_MEMORY), "memory needs row="),
                (lambda: rt.protect_scattered("x", [b], row=ROW, memory=((0, 3, 1), BLOCK_MEMORY[1])),
                 "exceeds the allocation"),
                (lambda: rt.protect_scattered("x", [b], row=ROW, memory=(0, 1, 1)), "memory must be a pair"),
                (lambda: rt.protect_scattered("x", [b, b.astype(np.float32)], row=ROW, memory=BLOCK_MEMORY),
                 "piece 1 is float32, the region float64: one dtype"),
                (lambda: rt.protect_scattered("x", [b], row=ROW, memory=BLOCK_MEMORY, dtype=np.float32),
                 "piece 0 is float64"),
                (lambda: rt.protect_scattered("x", [b[:, 1:-1, 1:-1]], row=ROW), "piece 0 is a strided view"),
                (lambda: rt.protect_scattered("x", [np.zeros((1,) + ROW)], row=ROW, memory=BLOCK_MEMORY),
                 r"piece 0 has shape \(1, 2, 3, 4\)"),
                (lambda: rt.protect_scattered("x", [read_only], row=ROW, memory=BLOCK_MEMORY), "read-only"),
                (lambda: rt.protect_scattered("x", []), "no piece"),
                (lambda: rt.protect_scattered("x", [], dtype=np.float64), "no piece: give row="),
                (lambda: rt.protect_scattered("x", np.zeros((2, 3))), "must be a list of arrays"),
                (lambda: rt.protect_scattered("x", [b], row=(2, -3, 4)), "row .* has a negative value"),
                (lambda: rt.protect_scattered("block_id", [np.zeros(3, np.int64)]), "cannot become a scattered"),
                (lambda: rt.protect("blocks", np.zeros((1,) + ROW), joined=True), "cannot become a joined")]:
            with pytest.raises(ckpt.InvalidArgumentError, match=words):
                call()
        monkeypatch.undo()
        agree(called == [] and "x" not in rt, f"libckpt called: {called}")
        # Refused by libckpt: other row extents (the row is fixed), a region protected again with them.
        with pytest.raises(ckpt.InvalidArgumentError, match="cannot change"):
            rt.protect_scattered("blocks", [np.zeros((NV, NZ + 2, NX + 1))], row=(NV, NZ, NX - 1),
                                 memory=((0, 1, 1), (NV, NZ + 2, NX + 1)))
        rt.unprotect("tiles")
        agree([sys.getrefcount(p) for p in tiles_back] == tb_refs, "unprotect lets go of the pieces")
    # Stored as one joined array of the interiors, in rank order, without the ghosts.
    c = ckpt.open(os.path.join(scratch, "ckpt"))[1]
    expect = np.stack([ghosted_block(i)[:, 1:-1, 1:-1] for i in ids_all])
    agree(c["blocks"].kind == "joined" and same_bytes(c["blocks"].read(), expect), "reader: the interiors")
    agree(same_bytes(c["tiles"].read(), tiles_all), "reader: the tiles as complex64")
    c.verify()




def ghosted(shape, ghost, salt):
    """(allocation, interior view): an array with `ghost` cells on every side holding SENTINEL, and the view
    of its interior of `shape` filled with values(salt)."""
    full = np.full(tuple(n + 2 * ghost for n in shape), SENTINEL)
    inner = full[(slice(ghost, -ghost),) * len(shape)]
    inner[...] = values("f8", shape, salt)
    return full, inner


def test_strided_views_stored_without_packing(scratch):
    """A strided view that is a row-major box of a larger array (the interior of a ghosted grid, rows with
    a padding column) is protected as it is: stored exactly as the packed box (the reader and the bytes
    counted say so), restored into the box only (ghosts and padding untouched)."""
    ny, nx = 3, 5
    u, ui = ghosted((ny, nx), 2, 10 + rank)  # 2D, ghost width 2: a box of a global array
    w, wi = ghosted((4, 5, 6), 1, 20 + rank)  # 3D, ghost width 1: a local array
    rows = rank + 2  # joined rows of 3 values in an (n, 4) array: the 4th column is padding
    j_first = sum(r + 2 for r in range(rank))
    j_all = values("i4", (sum(r + 2 for r in range(size)), 3), 30)
    a = np.full((rows, 4), -1, np.int32)
    a[:, :3] = j_all[j_first:j_first + rows]
    ci_full = np.zeros((5, 6), np.complex128)  # a mapped type (f8 plus a trailing dimension of 2)
    ci = ci_full[1:-1, 1:-1]
    ci[...] = values("c16", ci.shape, 40 + rank)
    want = {n: np.ascontiguousarray(v) for n, v in (("u", ui), ("w", wi), ("j", a[:, :3]), ("c", ci))}
    with runtime(scratch) as rt:
        got = rt.protect("u", ui, global_shape=(ny * size, nx), start=(ny * rank, 0))
        agree(got is ui and not ui.flags.c_contiguous, "the view itself is protected, no copy")
        rt.protect("w", wi)
        rt.protect("j", a[:, :3], joined=True, first_row=j_first)
        rt.protect("c", ci)
        t = rt.checkpoint(1)
        agree(t.wait(), "checkpoint of strided views committed")
        packed = sum(v.nbytes for v in want.values())
        agree(t.stats().bytes == packed, f"the boxes' bytes only: {t.stats().bytes} != {packed}")
        for arr in (u, w, a, ci_full):  # everything, interiors and ghosts
            arr[...] = 3
        agree(rt.restart() == 1, "restarted")
        agree(same_bytes(ui, want["u"]) and same_bytes(wi, want["w"]) and same_bytes(a[:, :3], want["j"]) and
              same_bytes(ci, want["c"]), "the interiors are restored")
        for name, arr, inner in (("u", u, (slice(2, -2),) * 2), ("w", w, (slice(1, -1),) * 3),
                                 ("c", ci_full, (slice(1, -1),) * 2)):
            ghosts = np.ones(arr.shape, bool)
            ghosts[inner] = False
            agree((arr[ghosts] == 3).all(), f"{name}: the ghost cells are untouched by restart()")
        agree((a[:, 3] == 3).all(), "the padding column is untouched by restart()")
    # Stored exactly as the packed interiors.
    c = ckpt.open(os.path.join(scratch, "ckpt")).latest()
    u_all = np.concatenate([values("f8", (ny, nx), 10 + r) for r in range(size)])
    agree(same_bytes(c["u"].read(), u_all), "reader: the global array of the interiors")
    agree(same_bytes(c["u"][ny * rank:ny * (rank + 1)], want["u"]), "reader: this rank's box")
    agree(same_bytes(c["w"].read(rank=rank), want["w"]) and c["w"].shape == (4, 5, 6), "reader: 3D interior")
    agree(same_bytes(c["j"].read(), j_all), "reader: the joined rows without their padding")
    agree(same_bytes(c["c"].read(rank=rank), want["c"]), "reader: a mapped dtype's interior")
    c.verify()


def test_strided_views_updated_and_refused(scratch, monkeypatch):
    """Protecting a name again moves between packed and strided memory (the selection cleared or set anew,
    whatever the new extents); views that are no box of a row-major array are refused and say why; a
    protect whose memory selection fails leaves nothing registered, an update the old array."""
    from ckpt import runtime as rtmod

    with runtime(scratch) as rt:
        w, wi = ghosted((2, 3, 4), 1, 50)
        rt.protect("w", wi)
        big = values("f8", (6, 7, 8), 51)
        rt.protect("w", big)  # contiguous, larger than the old allocation (4, 5, 6): its selection is cleared
        agree(rt.checkpoint(1).wait(), "contiguous after strided")
        v, vi = ghosted((5, 6, 7), 2, 52)
        rt.protect("w", vi)  # strided again, in another allocation
        agree(rt.checkpoint(2).wait(), "strided after contiguous")
        v[...] = SENTINEL
        agree(rt.restart(2) == 2 and same_bytes(vi, values("f8", (5, 6, 7), 52)), "the strided view restored")
        agree((v[ghosted_mask(v.shape, 2)] == SENTINEL).all(), "its ghosts untouched")
        with pytest.raises(ckpt.MismatchError):
            rt.restart(1)  # step 1 has extents (6, 7, 8)
        rt.protect("w", big)
        big[...] = 0
        agree(rt.restart(1) == 1 and same_bytes(big, values("f8", (6, 7, 8), 51)), "packed again: restored")

        a = np.zeros((4, 6))
        b = np.zeros(8)
        refused = [
            (b[::2], "innermost dimension steps 16 bytes, not the item size 8"),
            (a.T, "innermost dimension steps 48 bytes"),
            (np.asfortranarray(a), "innermost dimension steps 32 bytes"),
            (np.broadcast_to(np.zeros(6), (4, 6)), "dimension 0 has stride 0 \\(a broadcast view"),
            (b[::-1], "dimension 0 has a negative stride"),
            (np.lib.stride_tricks.as_strided(b, (3, 4), (8, 8)),
             "the stride of dimension 0 .8 bytes. is less than the 4 elements of dimension 1.*rows overlap"),
            (np.zeros((3, 2), "f8,u2")["f0"], "innermost dimension steps 10 bytes, not the item size 8"),
            (FakeDLPackArray(a[:, ::2]), "innermost dimension steps 16 bytes"),
            (FakeCudaArray(a, strides=(8, 32)), "innermost dimension steps 32 bytes"),
        ]
        for arr, why in refused:
            with pytest.raises(ckpt.InvalidArgumentError, match="not C-contiguous .* and not a row-major box of a "
                                                                 "larger array: (the )?" + why):
                rt.protect("x", arr)
            with pytest.raises(ckpt.InvalidArgumentError, match="u\\[2:-2, 2:-2\\]"):
                rt.protect("x", arr)
        agree("x" not in rt, "no refused view registered")

        # ckpt_set_memory_selection fails (here: told an allocation too small): the protect is undone.
        real = rtmod.lib.ckpt_set_memory_selection

        def too_small(h, name, ndims, start, alloc):
            if ndims:
                alloc = rtmod.u64_array([1] * ndims)
            return real(h, name, ndims, start, alloc)

        monkeypatch.setattr(rtmod.lib, "ckpt_set_memory_selection", too_small)
        g, gi = ghosted((3, 4), 1, 60)
        with pytest.raises(ckpt.InvalidArgumentError, match="memory selection .* exceed the allocation"):
            rt.protect("g", gi)
        agree("g" not in rt, "nothing registered in Python")
        # ... nor in the library: the name is free (a region left behind would be "already protected").
        keep = rt.protect("g", values("f8", (3, 4), 61))
        with pytest.raises(ckpt.InvalidArgumentError, match="exceed the allocation"):
            rt.protect("g", gi)  # an update: the old array stays registered
        monkeypatch.setattr(rtmod.lib, "ckpt_set_memory_selection", real)
        agree(rt.checkpoint(3).wait(), "checkpoint after the failed protects")
        keep[...] = 0
        rt.restart(3)
        agree(same_bytes(keep, values("f8", (3, 4), 61)), "the old array was stored and restored")


def ghosted_mask(shape, ghost):
    m = np.ones(shape, bool)
    m[(slice(ghost, -ghost),) * len(shape)] = False
    return m


def test_strided_device_views_through_fake_producers(scratch):
    """The same strides through DLPack (strides in elements) and __cuda_array_interface__ (in bytes)."""
    with runtime(scratch) as rt:
        u, ui = ghosted((3, 4), 1, 70 + rank)
        w, wi = ghosted((2, 3, 4), 2, 80 + rank)
        dl = FakeDLPackArray(ui)
        cai = FakeCudaArray(wi, strides=wi.strides)
        rt.protect("dl", dl, global_shape=(3 * size, 4), start=(3 * rank, 0))
        rt.protect("cai", cai)
        want = {"dl": ui.copy(), "cai": wi.copy()}
        agree(rt.checkpoint(1).wait(), "committed")
        u[...], w[...] = 5, 5
        rt.restart(1)
        agree(same_bytes(ui, want["dl"]) and same_bytes(wi, want["cai"]), "device views restored")
        agree((u[ghosted_mask(u.shape, 1)] == 5).all() and (w[ghosted_mask(w.shape, 2)] == 5).all(),
              "their ghosts untouched")
    c = ckpt.open(os.path.join(scratch, "ckpt")).latest()
    agree(same_bytes(c["dl"][3 * rank:3 * rank + 3], want["dl"]), "reader: the DLPack view's box")
    agree(same_bytes(c["cai"].read(rank=rank), want["cai"]), "reader: the CUDA Array Interface view")


def test_device_arrays_through_fake_producers(scratch):
    rt = runtime(scratch)
    assert rt.device == "host", "the tests below treat fake device memory as host memory (a CPU build)"
    host = np.arange(12, dtype=np.float64).reshape(3, 4) + 100 * rank
    dl = FakeDLPackArray(host.copy(), device_id=0)
    legacy = FakeDLPackArray(np.arange(5, dtype=np.int32) + rank, legacy=True)
    managed = FakeDLPackArray(np.arange(6, dtype=np.uint16), device_type=KDL_CUDA_MANAGED)
    pinned = FakeDLPackArray(np.arange(6, dtype=np.int8), device_type=KDL_CUDA_HOST)
    cai = FakeCudaArray(np.arange(8, dtype=np.float32) * (rank + 1))
    bf16 = FakeDLPackArray(np.arange(6, dtype=np.uint16) + 7, dl_dtype=(KDL_BFLOAT, 16))
    fakes = {"dl": dl, "legacy": legacy, "managed": managed, "pinned": pinned, "cai": cai, "bf16": bf16}
    for n, f in fakes.items():
        if n == "dl":
            rt.protect(n, f, global_shape=(3 * size, 4), start=(3 * rank, 0))
        else:
            rt.protect(n, f)
    agree(dl.dlpack_calls[0] == {"stream": None, "max_version": (1, 0)}, f"__dlpack__ asked for DLPack 1.0: "
                                                                        f"{dl.dlpack_calls}")
    agree(len(legacy.dlpack_calls) == 2 and legacy.dlpack_calls[1]["max_version"] is None, "pre-1.0 fallback")
    want = {n: f.host.copy() for n, f in fakes.items()}
    rt.checkpoint(1).wait()
    for f in fakes.values():
        f.host[...] = 0
    rt.restart(1)
    for n, f in fakes.items():
        agree(same_bytes(f.host, want[n]), f"device array {n!r} restored")
    c = ckpt.open(os.path.join(scratch, "ckpt")).latest()
    agree(c["bf16"].attrs["python.dtype"] == "bfloat16" and c["bf16"].read(rank=rank).shape == (6, 2),
          "bfloat16 (no numpy type): stored as its bytes, the attribute naming it")
    agree(same_bytes(c["dl"][3 * rank:3 * rank + 3], host), "the reader reads the device array's checkpoint")

    # Refused: other device types, another device id, read-only exports, strides, memory the host cannot read.
    refusals = [
        (FakeDLPackArray(np.zeros(3), device_type=KDL_OPENCL), ckpt.UnavailableError, "OpenCL"),
        (FakeDLPackArray(np.zeros(3), device_type=KDL_METAL), ckpt.UnavailableError, "Metal"),
        (FakeDLPackArray(np.zeros(3), device_type=99), ckpt.UnavailableError, "device type 99"),
        (FakeDLPackArray(np.zeros(3), device_id=1), ckpt.InvalidArgumentError, "cuda:1.*cuda:0"),
        (FakeDLPackArray(np.zeros((4, 4))[:, ::2]), ckpt.InvalidArgumentError, "not C-contiguous"),
        (FakeDLPackArray(np.zeros(3), dl_dtype=(2, 8)), ckpt.InvalidArgumentError, "not supported"),
        (FakeCudaArray(np.zeros((4, 4)), strides=(8, 16)), ckpt.InvalidArgumentError, "not C-contiguous"),
        (FakeCudaArray(np.zeros(3), read_only=True), ckpt.InvalidArgumentError, "read-only"),
    ]
    ro = np.zeros(3)
    ro.flags.writeable = False
    refusals.append((FakeDLPackArray(ro), ckpt.InvalidArgumentError, "read-only"))
    page = Unreadable()
    refusals.append((FakeDLPackArray(np.zeros(4), data_ptr=page.address), ckpt.UnavailableError,
                     "host cannot read.*no GPU device"))
    refusals.append((FakeCudaArray(np.zeros(4), data_ptr=page.address), ckpt.UnavailableError, "host cannot read"))
    for fake, exc, words in refusals:
        with pytest.raises(exc, match=words):
            rt.protect("refused", fake)
    page.close()
    assert "refused" not in rt
    # A ROCm array in a Runtime without a GPU device: host-readable, so taken like the CUDA fakes.
    rt.protect("rocm", FakeDLPackArray(np.zeros(2), device_type=KDL_ROCM))
    # Device id: the same device again is fine, after unprotecting the others another one is too.
    rt.protect("dl_again", FakeDLPackArray(np.zeros(2), device_id=0))
    for n in ("dl", "legacy", "managed", "bf16", "rocm", "dl_again"):
        rt.unprotect(n)
    rt.protect("other", FakeDLPackArray(np.zeros(2), device_id=3))
    rt.close()


def test_streams_handed_to_the_c_api(scratch, monkeypatch):
    """checkpoint(stream=...) and restart(stream=...) hand the stream's handle to the C API; the host device
    ignores it (only a GPU shows the ordering)."""
    from ckpt import runtime as rtmod

    seen = []
    real = {n: getattr(rtmod.lib, n) for n in ("ckpt_checkpoint", "ckpt_restart_stream", "ckpt_restart_step_stream")}

    def recorder(name, stream_at):
        def call(*args):
            s = args[stream_at]
            seen.append((name, s.value if isinstance(s, ctypes.c_void_p) else s))
            return real[name](*args)
        return call

    monkeypatch.setattr(rtmod.lib, "ckpt_checkpoint", recorder("ckpt_checkpoint", 2))
    monkeypatch.setattr(rtmod.lib, "ckpt_restart_stream", recorder("ckpt_restart_stream", 1))
    monkeypatch.setattr(rtmod.lib, "ckpt_restart_step_stream", recorder("ckpt_restart_step_stream", 2))
    rt = runtime(scratch)
    dev = FakeDLPackArray(np.arange(4.0) + rank)
    rt.protect("dev", dev)
    streams = [(None, None), (0, None), (0x1000, 0x1000), (Stream("cupy", 0x2000), 0x2000),
               (Stream("torch", 0x3000), 0x3000), (Stream("numba", 0x4000), 0x4000),
               (Stream("protocol", 0x5000), 0x5000), (ctypes.c_void_p(0x6000), 0x6000), (np.uint64(0x7000), 0x7000),
               (Stream("cupy", 0), None)]
    for step, (stream, handle) in enumerate(streams, 1):
        seen.clear()
        rt.checkpoint(step, stream=stream).wait()
        rt.restart(step, stream=stream)
        rt.restart(stream=stream)
        want = [("ckpt_checkpoint", handle), ("ckpt_restart_step_stream", handle), ("ckpt_restart_stream", handle)]
        agree(seen == want, f"stream {stream!r}: {seen} != {want}")
    for bad in ("stream", 1.5, True, -1, object(), 1 << 64):
        with pytest.raises(ckpt.InvalidArgumentError, match="stream"):
            rt.checkpoint(99, stream=bad)
        with pytest.raises(ckpt.InvalidArgumentError, match="stream"):
            rt.restart(1, stream=bad)
    agree(rt.latest() == len(streams), "the refused streams started no checkpoint")
    rt.close()


def test_processes_that_disagree(scratch):
    a = np.full(4, float(rank))
    with runtime(scratch) as rt:
        rt.protect("a", a)
        # Different steps: every process's ticket fails alike, nothing is committed.
        if size > 1:
            t = rt.checkpoint(10 + (rank == size - 1))
            kind, msg = outcome(t.wait)
            agree(kind == "InvalidArgumentError", f"steps that differ: {kind}: {msg}")
            agree(rt.latest() is None, "nothing committed")
        # One process's protect fails (a local call): it raises there only; fixed, the job goes on.
        if rank == 1 % size:
            with pytest.raises(ckpt.InvalidArgumentError):
                rt.protect("b", np.zeros((4, 4))[:, ::2])
        b = rt.protect("b", np.full(2, 1.0))
        agree(rt.checkpoint(11).wait(), "a checkpoint after one process's refused protect")
        # Boxes that do not tile the global array (two processes claim the same rows): refused alike.
        g = rt.protect("g", np.zeros((2, 3)), global_shape=(2 * size, 3), start=(0, 0))
        kind, msg = outcome(lambda: rt.checkpoint(12).wait())
        agree(size == 1 or kind is not None, f"overlapping boxes: {kind}: {msg}")
        rt.unprotect("g")
        agree(rt.checkpoint(13).wait() and b[0] == 1.0 and g.shape == (2, 3), "usable afterwards")


@pytest.mark.parametrize("differs", ["kind", "dtype", "global_shape"])
def test_processes_that_register_a_name_differently(scratch, differs):
    if size == 1:
        pytest.skip("needs two processes to disagree")
    rt = runtime(scratch)
    first = rank == 0
    if differs == "kind":  # a box of a global array on rank 0, a local array elsewhere
        x = rt.protect("x", np.zeros(4), global_shape=(4 * size,), start=(4 * rank,)) if first else \
            rt.protect("x", np.zeros(4))
    elif differs == "dtype":
        x = rt.protect("x", np.zeros(4, np.float64 if first else np.float32), global_shape=(4 * size,),
                       start=(4 * rank,))
    else:
        x = rt.protect("x", np.zeros(4), global_shape=(4 * size + first,), start=(4 * rank,))
    kind, msg = outcome(lambda: rt.checkpoint(1).wait())
    agree(kind == "InvalidArgumentError" and "'x' is registered differently" in msg, f"{differs}: {kind}: {msg}")
    agree(rt.latest() is None and x.size == 4, "nothing committed")
    # close() reports the Runtime's first failure again, as ckpt_close does, and closes anyway.
    kind, msg = outcome(rt.close)
    agree(kind == "InvalidArgumentError" and rt.closed, f"close(): {kind}: {msg}")


def test_context_manager_and_exceptions(scratch):
    with runtime(scratch) as rt:
        rt.protect("x", np.zeros(2))
    agree(rt.closed, "closed at the end of the block")
    # An exception leaves the Runtime open (close() is collective; the other processes may not come):
    # here every process raised, so every process closes it by hand.
    with pytest.raises(RuntimeError):
        with runtime(scratch) as rt2:
            raise RuntimeError("boom")
    agree(not rt2.closed, "an exception does not close")
    rt2.close()
    agree(rt2.closed and repr(rt2).endswith("closed)"), repr(rt2))
