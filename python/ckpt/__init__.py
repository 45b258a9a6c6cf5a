"""ckpt from Python: checkpoint and restart the numpy and device arrays of an mpi4py program
(ckpt.Runtime, docs/api-python.md), and read checkpoints as numpy arrays without restarting (ckpt.open,
docs/api-reader.md).

    rt = ckpt.Runtime(MPI.COMM_WORLD, {"dir": "/scratch/run/ckpt"})   # collective; also a YAML path, CKPT_*
    rt.protect("u", u, global_shape=(ny, nx), start=(y0, 0))           # numpy, CuPy, PyTorch, numba arrays
    t = rt.checkpoint(step)                 # returns once captured: t.wait(), t.done(), t.stats()
    rt.restart()                            # newest checkpoint that verifies, into the protected arrays
    rt.close()                              # or `with ckpt.Runtime(...) as rt:`

    s = ckpt.open("/scratch/run/ckpt")      # the `dir` of a run (or one ckpt.<step> directory)
    s = ckpt.open(path, comm=MPI.COMM_WORLD)  # collective, on an mpi4py communicator
    s.steps                                 # complete steps, oldest first
    c = s.latest()                          # or s[20]; KeyError when absent
    c.step, c.nranks, c.transport, c.variables
    v = c["rho"]                            # v.kind, v.dtype, v.shape, v.min, v.max, v.attrs
    v.read()                                # the whole global array (scalar: numpy scalar; local: v.read(rank=3))
    v[10:20, :, 5]                          # reads only the blocks the box touches
    c.verify()                              # raises ckpt.CorruptError naming variable, block and file

A thin layer over the C API of libckpt (ckpt/ckpt.h) through ctypes: the format is written and read, and
every block's checksum verified, by the library itself. Reading needs no MPI; ckpt.Runtime needs mpi4py
on the MPI library libckpt was built with. How libckpt is found: ckpt/_lib.py. Errors are ckpt.Error
subclasses carrying the library's message (ckpt/_lib.py).
"""

import ctypes
import os

import numpy as np

from ._lib import (CorruptError, Error, InternalError, InvalidArgumentError, MismatchError, NotFoundError,
                   PreconditionError, RestartWarning, StorageError, UnavailableError, VarInfo as _VarInfo,
                   check as _check, lib as _lib, to_bytes as _bytes, to_str as _str, u64_array as _u64_array)
from . import _arrays
from .runtime import CheckpointStats, JoinedRows, Runtime, Ticket

# The project's version (CMakeLists.txt's project(VERSION); CMake refuses to configure when they differ).
__version__ = "0.1.0"

__all__ = ["__version__", "open", "Series", "Checkpoint", "Variable", "Runtime", "Ticket", "CheckpointStats",
           "JoinedRows", "Error", "InvalidArgumentError", "NotFoundError", "MismatchError", "CorruptError",
           "StorageError", "UnavailableError", "PreconditionError", "InternalError", "RestartWarning"]

for _cls in (Error, InvalidArgumentError, NotFoundError, MismatchError, CorruptError, StorageError, UnavailableError,
             PreconditionError, InternalError, RestartWarning, Runtime, Ticket):
    _cls.__module__ = "ckpt"  # tracebacks say ckpt.NotFoundError, where the user meets it

_DTYPES = {1: np.uint8, 2: np.int8, 3: np.uint16, 4: np.int16, 5: np.uint32, 6: np.int32, 7: np.uint64,
           8: np.int64, 9: np.float32, 10: np.float64, 11: np.uint8}
_KINDS = {0: "local", 1: "global", 2: "scalar", 3: "joined"}
_P = ctypes.c_void_p


def open(path, comm=None):  # noqa: A001 - the name the interface promises (ckpt.open)
    """Opens a checkpoint root (the `dir` of a run) or one checkpoint directory.

    comm: an mpi4py communicator to open on collectively (ckpt_reader_open_comm): every process of it
    calls open() with the same path; rank 0 lists the root, and then indexing the Series (s[step],
    s.latest(), iteration) is collective too: rank 0 reads each index once and every process gets it,
    or rank 0's error. Reads (v.read(), slicing, verify) stay each process's own. mpi4py is imported
    only when comm is given; it must use the MPI library libckpt was built with."""
    return Series(path, comm)


class Series:
    """The complete checkpoints under a root, as of when it was opened."""

    def __init__(self, path, comm=None):
        self.path = os.fspath(path)
        self.comm = comm  # kept alive: collective step opens use it
        h = _P()
        if comm is None:
            _check(_lib.ckpt_reader_open(_bytes(self.path), ctypes.byref(h)))
        else:
            from mpi4py import MPI  # the handle's address and size, as ckpt_reader_open_comm passes them

            _check(_lib.ckpt_reader_open_handle(ctypes.c_void_p(MPI._addressof(comm)), MPI._sizeof(comm),
                                                _bytes(self.path), ctypes.byref(h)))
        self._h = h
        n = ctypes.c_size_t(0)
        _check(_lib.ckpt_reader_steps(self._h, None, 0, ctypes.byref(n)))
        buf = (ctypes.c_int64 * max(1, n.value))()
        _check(_lib.ckpt_reader_steps(self._h, buf, n.value, ctypes.byref(n)))
        self.steps = [int(buf[i]) for i in range(n.value)]

    def __del__(self):
        if getattr(self, "_h", None):
            _lib.ckpt_reader_free(self._h)
            self._h = None

    def __getitem__(self, step):
        if step not in self.steps:
            raise KeyError(step)
        h = _P()
        _check(_lib.ckpt_reader_open_step(self._h, int(step), ctypes.byref(h)))
        return Checkpoint(h)

    def __contains__(self, step):
        return step in self.steps

    def __len__(self):
        return len(self.steps)

    def __iter__(self):
        """Checkpoints, oldest first."""
        for s in self.steps:
            yield self[s]

    def latest(self):
        """The newest complete checkpoint; KeyError when there is none."""
        if not self.steps:
            raise NotFoundError("not_found", f"no complete checkpoint in {self.path}")
        return self[self.steps[-1]]

    def __repr__(self):
        return f"ckpt.Series({self.path!r}, steps={self.steps})"


class Checkpoint:
    """One complete checkpoint; its index is loaded once."""

    def __init__(self, handle):
        self._h = handle
        step, nranks, transport = ctypes.c_int64(), ctypes.c_int(), ctypes.c_char_p()
        _check(_lib.ckpt_reader_step_info(self._h, ctypes.byref(step), ctypes.byref(nranks), ctypes.byref(transport)))
        self.step, self.nranks, self.transport = step.value, nranks.value, _str(transport.value)
        n = ctypes.c_size_t()
        _check(_lib.ckpt_reader_step_nvars(self._h, ctypes.byref(n)))
        self._vars = {}
        self._listed = False
        for i in range(n.value):
            info = _VarInfo()
            _check(_lib.ckpt_reader_step_var(self._h, i, ctypes.byref(info)))
            v = Variable(self, info)
            self._vars[v.name] = v
        self.variables = list(self._vars)

    def __del__(self):
        if getattr(self, "_h", None):
            _lib.ckpt_reader_step_free(self._h)
            self._h = None

    def __getitem__(self, name):
        try:
            return self._vars[name]
        except KeyError:
            raise KeyError(f"variable {name!r} is not in checkpoint {self.step}") from None

    def __contains__(self, name):
        return name in self._vars

    def verify(self):
        """Reads every block and checks its checksum and min/max; CorruptError lists the bad ones."""
        _check(_lib.ckpt_reader_step_verify(self._h))

    def load_blocks(self):
        """Lists every variable's blocks and writer ranks. Opened on a communicator, a checkpoint with a
        two-level index (index_format 2) reads only its root index and the block records a read needs; the
        first use of Variable.blocks or .ranks reads the whole index (every sub-index) through this. Nothing
        when they are listed already."""
        if self._listed:
            return
        _check(_lib.ckpt_reader_step_load_blocks(self._h))
        for i, v in enumerate(self._vars.values()):
            info = _VarInfo()
            _check(_lib.ckpt_reader_step_var(self._h, i, ctypes.byref(info)))
            v._set_blocks(info)
        self._listed = True

    def rows_by_key(self, key):
        """The stored rows of joined integer variable `key` (a block or particle id, one value per row)
        ordered by its values, as a numpy uint64 array: `v.read()[c.rows_by_key(key)]` puts the rows of a
        joined array `v` registered with the key in key order, whatever rank count wrote them (see
        Variable.read(order_by=...)). InvalidArgumentError naming why when `key` is not joined, not an
        integer, has more than one value per row, or holds a value in more than one row."""
        n = ctypes.c_size_t()
        _check(_lib.ckpt_reader_step_rows_by_key(self._h, _bytes(key), None, 0, ctypes.byref(n)))
        out = np.empty(n.value, dtype=np.uint64)
        rows = out.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64))
        _check(_lib.ckpt_reader_step_rows_by_key(self._h, _bytes(key), rows, out.size, ctypes.byref(n)))
        return out

    def __repr__(self):
        return f"ckpt.Checkpoint(step={self.step}, nranks={self.nranks}, transport={self.transport!r})"


class Variable:
    """A stored variable: description from the index; read() and slicing read data."""

    def __init__(self, ckpt, info):
        self._ckpt = ckpt
        self.name = _str(info.name)
        self.kind = _KINDS[info.kind]
        self.dtype = np.dtype(_DTYPES[info.dtype])
        self.uniform = bool(info.uniform)
        self.shape = tuple(int(info.shape[d]) for d in range(info.ndims))
        self.min = float(info.min) if info.has_minmax else None
        self.max = float(info.max) if info.has_minmax else None
        self.attrs = {_str(info.attr_keys[i]): _str(info.attr_values[i]) for i in range(info.nattrs)}
        self._set_blocks(info)
        # An array written by ckpt.Runtime in a type ckpt lacks (bool, complex, float16, structured...):
        # stored as a type ckpt has, with a trailing dimension where needed (ckpt/_arrays.py); read back in
        # its own type. stored_dtype / stored_shape are what the file holds; min/max are of those values.
        self.stored_dtype, self.stored_shape = self.dtype, self.shape
        self._trail = None
        want = _arrays.stored_dtype(self.attrs.get(_arrays.DTYPE_ATTR, ""))
        if want is not None:
            if info.dtype == _arrays.BYTES:
                trail = want.itemsize
            else:
                trail = want.itemsize // self.dtype.itemsize if want.itemsize != self.dtype.itemsize else 0
            if want.itemsize == max(trail, 1) * self.dtype.itemsize and \
                    (trail == 0 or (self.shape and self.shape[-1] == trail)):
                self._trail = trail
                self.dtype = want
                self.shape = self.shape[:-1] if trail else self.shape

    def _set_blocks(self, info):
        nd = info.ndims
        self._blocks = [{"rank": int(info.block_ranks[b]),
                         "start": tuple(int(info.block_starts[b * nd + d]) for d in range(nd)),
                         "count": tuple(int(info.block_counts[b * nd + d]) for d in range(nd))}
                        for b in range(info.nblocks)]
        self._ranks = [int(info.ranks[i]) for i in range(info.nranks)]

    @property
    def blocks(self):
        """The stored blocks: dicts of rank, start and count (a two-level index opened on a communicator
        lists them on first use: Checkpoint.load_blocks())."""
        self._ckpt.load_blocks()
        return self._blocks

    @property
    def ranks(self):
        """The writer ranks that stored a block, ascending (listed on first use, as blocks)."""
        self._ckpt.load_blocks()
        return self._ranks

    def _as_stored(self, start, count):
        """A box of the logical array as a box of the stored one (the trailing dimension added)."""
        if self._trail:
            return tuple(start) + (0,), tuple(count) + (self._trail,)
        return tuple(start), tuple(count)

    def _logical(self, out):
        """Stored values `out` in the variable's own type."""
        if self._trail is None:
            return out
        v = out.view(self.dtype)
        return v.reshape(out.shape[:-1]) if self._trail else v

    @property
    def ndim(self):
        return len(self.shape)

    def __repr__(self):
        return f"ckpt.Variable({self.name!r}, kind={self.kind!r}, dtype={self.dtype}, shape={self.shape})"

    def _row_layout(self):
        """(first row, rows) of each block of a joined array, ascending."""
        return sorted((b["start"][0], b["count"][0]) for b in self.blocks if b["count"])

    def read(self, rank=None, order_by=None):
        """Global or joined: the whole array. Local or scalar: the block of writer rank `rank` (a
        uniform variable may omit it); a scalar comes back as a numpy scalar.
        order_by (joined arrays): the name of a joined integer key variable registered with this one
        (the same rows on every writer rank, e.g. "blocks/id"): the rows come back ordered by the key's
        values, so the same state written by different rank counts reads the same (Checkpoint.rows_by_key)."""
        if order_by is not None:
            if self.kind != "joined":
                raise ValueError(f"{self.name!r} is a {self.kind} variable: order_by needs a joined array")
            key = self._ckpt[order_by]
            if key.kind == "joined" and key._row_layout() != self._row_layout():
                raise ValueError(f"{self.name!r}: its rows are not those of key {order_by!r} "
                                 f"(other rows per writer rank), so the key does not order them")
            return self.read()[self._ckpt.rows_by_key(order_by)]
        if self.kind in ("global", "joined"):
            if rank is not None:
                raise ValueError(f"{self.name!r} is a {self.kind} array: read() takes no rank")
            return self._box((0,) * self.ndim, self.shape)
        if rank is None:
            if not self.uniform:
                raise ValueError(f"{self.name!r} differs per rank: read(rank=...) one of {self.ranks}")
            rank = self.ranks[0]
        count = next((b["count"] for b in self.blocks if b["rank"] == rank), None)
        if count is None:
            raise NotFoundError("not_found", f"variable {self.name!r}: rank {rank} wrote no block of it")
        # Allocated once the reader checked the block against its file (an index may claim more).
        n = ctypes.c_uint64()
        _check(_lib.ckpt_reader_step_rank_bytes(self._ckpt._h, _bytes(self.name), int(rank), ctypes.byref(n)))
        out = np.empty(count, dtype=self.stored_dtype)
        _check(_lib.ckpt_reader_step_read_rank(self._ckpt._h, _bytes(self.name), int(rank),
                                               out.ctypes.data_as(_P), out.nbytes))
        out = self._logical(out)
        return out[()] if self.kind == "scalar" or (self._trail and out.ndim == 0) else out

    def _box(self, start, count):
        start, count = self._as_stored(start, count)
        # Allocated once the reader checked the blocks of the box against their files (an index may
        # claim more than they hold) and that they cover it.
        n = ctypes.c_uint64()
        _check(_lib.ckpt_reader_step_box_bytes(self._ckpt._h, _bytes(self.name), len(count), _u64_array(start),
                                               _u64_array(count), ctypes.byref(n)))
        out = np.empty(count, dtype=self.stored_dtype)
        _check(_lib.ckpt_reader_step_read(self._ckpt._h, _bytes(self.name), len(count), _u64_array(start),
                                          _u64_array(count), out.ctypes.data_as(_P), out.nbytes))
        return self._logical(out)

    def __getitem__(self, key):
        """numpy basic indexing (integers, slices with steps, Ellipsis) of a global array; reads the
        bounding box of the selection, so only the blocks that intersect it."""
        if self.kind not in ("global", "joined"):
            return self.read()[key]
        if not isinstance(key, tuple):
            key = (key,)
        if sum(k is Ellipsis for k in key) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        if Ellipsis in key:
            i = key.index(Ellipsis)
            key = key[:i] + (slice(None),) * (self.ndim - len(key) + 1) + key[i + 1:]
        if len(key) > self.ndim:
            raise IndexError(f"too many indices for {self.name!r}: {self.ndim} dimensions, {len(key)} indices")
        key = key + (slice(None),) * (self.ndim - len(key))
        start, count, local = [], [], []
        for d, (k, n) in enumerate(zip(key, self.shape)):
            if isinstance(k, slice):
                r = range(*k.indices(n))
                if len(r) == 0:
                    return np.empty(tuple(len(range(*kk.indices(nn))) for kk, nn in zip(key, self.shape)
                                          if isinstance(kk, slice)), dtype=self.dtype)
                lo, hi = min(r[0], r[-1]), max(r[0], r[-1]) + 1
                start.append(lo)
                count.append(hi - lo)
                stop = r[-1] - lo + (1 if r.step > 0 else -1)
                local.append(slice(r[0] - lo, stop if stop >= 0 else None, r.step))
            elif isinstance(k, (int, np.integer)) and not isinstance(k, bool):
                i = int(k) + (n if k < 0 else 0)
                if not 0 <= i < n:
                    raise IndexError(f"index {int(k)} is out of bounds for axis {d} of {self.name!r} with size {n}")
                start.append(i)
                count.append(1)
                local.append(0)
            else:
                raise TypeError(f"{self.name!r}: only integers, slices and '...' are supported, not {k!r}")
        return self._box(start, count)[tuple(local)]
