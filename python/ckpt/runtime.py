"""Checkpoint and restart from Python: ckpt.Runtime over the C API of libckpt (ckpt_create_handle_options,
ckpt_protect*, ckpt_checkpoint, ckpt_restart_stream, ...), through ctypes. docs/api-python.md is the guide.

    from mpi4py import MPI
    import ckpt
    with ckpt.Runtime(MPI.COMM_WORLD, {"dir": "/scratch/run/ckpt", "keep": 3}) as rt:
        rt.protect("u", u, global_shape=(ny, nx), start=(y0, 0))   # this rank's rows of a global array
        rt.protect("particles", p, joined=True)                    # this rank's rows of a joined array
        rt.protect("t", t)                                          # a 0-d array: a scalar
        try:
            step = rt.restart()                                     # newest checkpoint that verifies
        except ckpt.NotFoundError:
            step = 0
        ...
        t = rt.checkpoint(step)        # returns once the data is captured; t.wait(), t.done(), t.stats()

Lifetimes: the Runtime holds a reference to every protected array (and keeps a DLPack capsule unconsumed,
the producer's guarantee that the memory stays valid) until the array is replaced under its name,
unprotected, or the Runtime is closed. An array the application no longer holds (rebound: `u = u + du`
creates a new array) is refused by checkpoint(): it would store data nothing updates any more.
"""

import atexit
import ctypes
import json
import operator
import os
import sys
import warnings
from collections import namedtuple

import numpy as np

from . import _arrays
from ._lib import (CODES, CheckpointStatsC, PreconditionError, RestartWarning, check, error, exception, i64p, lib,
                   to_bytes, u64_array, u64p)

_P = ctypes.c_void_p
_KIND_SCALAR, _KIND_LOCAL, _KIND_GLOBAL, _KIND_JOINED = "scalar", "local", "global", "joined"
_KIND_SCATTERED = "scattered"  # a joined array whose rows lie in separate arrays (protect_scattered)

CheckpointStats = namedtuple("CheckpointStats", "step bytes bytes_written blocked_s capture_wait_s flush_s "
                                                "durable_s committed_s staging_bytes redundancy_s redundancy_bytes "
                                                "staging_pinned_bytes synced")
CheckpointStats.__doc__ = """This rank's figures of one checkpoint (ckpt_checkpoint_stats, ckpt::CheckpointStats field
for field; seconds of wall-clock time). step; bytes (payload of this rank's regions); bytes_written; blocked_s (time
inside checkpoint(), in C); capture_wait_s (part of it waiting for staging memory); flush_s; durable_s and
committed_s (from entering checkpoint() to this rank's data durable, to the commit visible); staging_bytes (the
staging pool); redundancy_s and redundancy_bytes (with redundancy partner or xor: seconds of the copy to the
partner node or of the parity, part of committed_s, and the bytes this rank sent); staging_pinned_bytes (the part
of staging_bytes the GPU can DMA to; 0 on the host device); synced (bool: fsynced before the ticket completed;
False with fsync off, and with durable_every_ms > 0 until the next periodic sync)."""

JoinedRows = namedtuple("JoinedRows", "total begin end")
JoinedRows.__doc__ = """The rows of a joined array in a checkpoint: total, and this rank's share [begin, end) of their
balanced split (what to allocate before restart(step) on another rank count)."""


class Ticket:
    """One checkpoint in flight, returned by Runtime.checkpoint(). Cheap; freeing it does not stop the
    checkpoint."""

    __slots__ = ("_h", "_rt", "step")

    def __init__(self, handle, runtime, step):
        self._h = handle
        self._rt = runtime  # the C runtime outlives its tickets
        self.step = step

    def wait(self):
        """Blocks until the checkpoint is committed (durable, index written, `latest` updated): True; or
        False when on_busy=coalesce replaced it by a newer one (superseded, not a failure). Raises the
        ckpt.Error of a failure, the same on every rank. Releases the GIL while it waits."""
        rc = lib.ckpt_ticket_wait(self._h)
        if rc == 9:  # CKPT_SUPERSEDED
            return False
        check(rc)
        return True

    def done(self):
        """True once wait() would not block (whatever the outcome)."""
        d = ctypes.c_int()
        check(lib.ckpt_ticket_done(self._h, ctypes.byref(d)))
        return bool(d.value)

    def stats(self):
        """This rank's CheckpointStats (complete once done())."""
        s = CheckpointStatsC()
        check(lib.ckpt_ticket_stats_sized(self._h, ctypes.byref(s), ctypes.sizeof(s)))
        return CheckpointStats(*(bool(s.synced) if f == "synced" else getattr(s, f) for f in CheckpointStats._fields))

    def __del__(self):
        if self._h:
            lib.ckpt_ticket_free(self._h)
            self._h = None

    def __repr__(self):
        return f"ckpt.Ticket(step={self.step})"


class _Region:
    """A protected array: the object (a reference held: the array, or the tuple of a scattered region's
    pieces), what the C API was told (mem: the array's Memory, a scattered region's first piece's or its
    dtype's; pieces: a scattered region's Memory of each piece, None otherwise), and the objects whose
    holding by the application checkpoint() checks (held: _Held entries)."""

    __slots__ = ("obj", "kind", "mem", "dims", "pieces", "held")


class _Held:
    """An object of region `name` (piece `piece` of a scattered region; None: the region's array) whose
    holding by the application checkpoint() checks, and how many references to it this region holds (its
    slot in Runtime._watch_objs not included: Runtime._rebuild_watch() adds it). An object protected under
    several names has one entry per name: the Runtime holds the sum (see Runtime._rebuild_watch())."""

    __slots__ = ("obj", "name", "piece", "our_refs")

    def __init__(self, obj, name, piece):
        self.obj, self.name, self.piece, self.our_refs = obj, name, piece, 0


_getrefcount = getattr(sys, "getrefcount", None)  # CPython; elsewhere checkpoint() checks nothing


def _map_refs():
    """What `map(_getrefcount, objs)` counts for each object beyond the references held elsewhere (the
    iteration's own: 1 in CPython up to 3.13), measured on the same expression."""
    objs = [object()]  # held by the list only
    return next(map(_getrefcount, objs)) - 1


_MAP_REFS = _map_refs() if _getrefcount else 0


def _owns_memory(obj):
    """Whether `obj` is known not to be a view of other memory: then nothing but it reaches its memory, and
    no reference to it outside the Runtime means the application cannot update it. Known for numpy and
    CuPy arrays (.base is None). Not for other producers: numba's slices and PyTorch's detach() share
    memory with no reliable mark, and a false alarm would refuse a valid checkpoint, so they are not
    checked."""
    if isinstance(obj, np.ndarray):
        return obj.base is None
    if type(obj).__module__.partition(".")[0] == "cupy":
        return getattr(obj, "base", None) is None
    return False


def _counted(obj):
    """Whether checkpoint() counts the references to `obj`: a numpy or CuPy array, its memory's owner (checked
    itself, _owns_memory()) or a view (not checked itself; it vouches for its base when the base is
    protected too, see Runtime._rebuild_watch())."""
    return isinstance(obj, np.ndarray) or type(obj).__module__.partition(".")[0] == "cupy"


def _ints(values, what, name):
    try:
        out = tuple(operator.index(v) for v in values)
    except TypeError:
        raise error("invalid_argument", f"{what}: {name} must be a sequence of integers, got {values!r}") from None
    if any(v < 0 for v in out):
        raise error("invalid_argument", f"{what}: {name} {out} has a negative value")
    return out


def _name_bytes(name, what, arg):
    """A region or key name (str, or bytes as the reader gives them) as the bytes the C API takes."""
    if not isinstance(name, (str, bytes)):
        raise error("invalid_argument", f"{what}: {arg} must be a str, not {type(name).__name__}")
    return to_bytes(name)


def _integer_array(values, what, name, dtype):
    """`values` - a sequence of integers (anything operator.index takes: int, numpy integers) or a 1-d
    numpy array of an integer dtype - as a C-contiguous numpy array of `dtype` (np.uint64: stored rows,
    >= 0; np.int64: key values) for the C API; InvalidArgumentError for anything else, for a value out of
    the range of `dtype` (a negative row), and for bool, float, str or bytes (bytes would iterate as
    integers). A numpy array of the right type is passed on without a copy."""
    info = np.iinfo(dtype)
    kind = "integers >= 0 (of uint64)" if info.min == 0 else "integers of int64"
    if isinstance(values, (str, bytes, bytearray, memoryview)):
        raise error("invalid_argument", f"{what}: {name} must be a sequence of {kind}, got {type(values).__name__}")
    if isinstance(values, np.ndarray) and values.dtype != object:
        if values.ndim != 1:
            raise error("invalid_argument", f"{what}: {name} must be one-dimensional, got an array of shape "
                                            f"{values.shape}")
        if values.dtype.kind not in "iu":
            raise error("invalid_argument", f"{what}: {name} must be {kind}, got an array of {values.dtype}")
        bad = np.flatnonzero(values < 0) if info.min == 0 else (
            np.flatnonzero(values > info.max) if values.dtype.kind == "u" and values.dtype.itemsize == 8 else ())
        if len(bad):
            i = int(bad[0])
            raise error("invalid_argument", f"{what}: {name}[{i}] is {values[i]}; {name} must be {kind}")
        return np.ascontiguousarray(values, dtype=dtype)
    try:
        items = iter(values)
    except TypeError:
        raise error("invalid_argument", f"{what}: {name} must be a sequence of {kind}, not "
                                        f"{type(values).__name__}") from None
    out = []
    for i, v in enumerate(items):
        try:
            n = operator.index(v)
        except TypeError:
            raise error("invalid_argument", f"{what}: {name}[{i}] is {v!r} ({type(v).__name__}); {name} must be "
                                            f"{kind}") from None
        if not info.min <= n <= info.max:
            raise error("invalid_argument", f"{what}: {name}[{i}] is {n}; {name} must be {kind}")
        out.append(n)
    return np.array(out, dtype=dtype)


_open_runtimes = []  # Runtimes not closed yet, in creation order: closed at exit (see _close_at_exit)
_atexit_registered = False


def _json_value(v):
    """Option values json cannot write itself: paths and numpy numbers."""
    if isinstance(v, os.PathLike):
        return os.fspath(v)
    if hasattr(v, "item") and callable(v.item):  # a numpy scalar
        return v.item()
    raise TypeError(f"{v!r} ({type(v).__name__}) is not a value of an option")


class Runtime:
    """The checkpoint runtime of one mpi4py communicator (ckpt_runtime). Collective calls (the constructor,
    checkpoint, restart, latest, joined_rows, wait_all, poll, close) are made by every process of the
    communicator in the same order; protect/protect_scattered/unprotect/annotate and set_restart_rows/
    set_restart_keys/clear_restart_rows are each process's own. One thread at a time. See docs/api-python.md."""

    def __init__(self, comm=None, options=None, config=None):
        """Collective. comm: an mpi4py communicator (None: MPI.COMM_WORLD); mpi4py must use the MPI library
        libckpt was built with. options: a dict of options (the keys of docs/options.md, values as in YAML:
        numbers, strings, booleans, lists and dicts for `groups` and `mpiio_hints`), or the path of a YAML
        file. config: the path of a YAML file, when options is a dict. Precedence: defaults < config file <
        dict < CKPT_* environment variables. A bad option fails on every rank with the same
        InvalidArgumentError."""
        from mpi4py import MPI

        self._h = None
        if comm is None:
            comm = MPI.COMM_WORLD
        if not isinstance(comm, MPI.Comm) or comm == MPI.COMM_NULL:
            raise error("invalid_argument", f"Runtime: comm must be an mpi4py communicator, not {comm!r}")
        if isinstance(options, (str, bytes, os.PathLike)):
            if config is not None:
                raise error("invalid_argument", "Runtime: options is a path and config is given too; pass the "
                                                "dict of options as options= and the YAML file as config=")
            options, config = None, options
        if options is not None and not isinstance(options, dict):
            raise error("invalid_argument", f"Runtime: options must be a dict or a path, not {type(options).__name__}")
        try:
            text = json.dumps(options, default=_json_value, ensure_ascii=False) if options else None
        except (TypeError, ValueError) as e:
            raise error("invalid_argument", f"Runtime: options: {e}") from None
        cfg = os.fsencode(config) if config is not None else None
        self.comm = comm  # the C runtime keeps a duplicate; this one stays valid for the caller's use
        h = _P()
        check(lib.ckpt_create_handle_options(_P(MPI._addressof(comm)), MPI._sizeof(comm), cfg,
                                             text.encode() if text else None, ctypes.byref(h)))
        self._h = h
        self._regions = {}  # name -> _Region, in protect() order
        # The regions whose holding checkpoint() checks; for speed (one pass in C over them), their
        # objects and the reference count at or below which nothing but this Runtime holds each one.
        self._watched, self._watch_objs, self._watch_limits, self._watch_via = [], [], [], []
        self._watch_count, self._watch_bases = {}, set()  # see _rebuild_watch()
        self._watch_passed = None  # the reference counts of the last check that passed (checkpoint())
        self._abandoned = False
        self.last_restart_warning = None  # the RestartWarning of the last restart(), or None
        r, n, dev = ctypes.c_int(), ctypes.c_int(), ctypes.c_char_p()
        check(lib.ckpt_rank(h, ctypes.byref(r)))
        check(lib.ckpt_size(h, ctypes.byref(n)))
        check(lib.ckpt_device_name(h, ctypes.byref(dev)))
        self.rank, self.size = r.value, n.value
        #: The device that copies the regions: "host" (no GPU device: built without one, or no GPU seen),
        #: "cuda" or "hip".
        self.device = dev.value.decode()
        global _atexit_registered
        if not _atexit_registered:  # after mpi4py's own: runs before MPI_Finalize
            atexit.register(_close_at_exit)
            _atexit_registered = True
        _open_runtimes.append(self)

    # ---- state ----------------------------------------------------------------------------------------

    @property
    def closed(self):
        return self._h is None

    def _handle(self, what):
        if self._h is None:
            raise error("failed_precondition", f"{what}: the Runtime is closed")
        return self._h

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            # close() is collective: with an exception on some processes only, the others may never come
            # to it, and closing here would hang this process instead of letting the job end. Committed
            # checkpoints stay; those in flight are lost. close() may still be called by hand.
            self._abandoned = True

    def __repr__(self):
        state = "closed" if self._h is None else f"{len(self._regions)} regions"
        return f"ckpt.Runtime(rank={getattr(self, 'rank', '?')}, size={getattr(self, 'size', '?')}, {state})"

    # ---- regions --------------------------------------------------------------------------------------

    def protect(self, name, array, *, global_shape=None, start=None, joined=False, first_row=None, optional=None):
        """Registers `array` under `name` and returns it. Each process its own; names [A-Za-z0-9_./-].

        array: a C-contiguous, writable numpy array or device array (DLPack or __cuda_array_interface__:
        CuPy, PyTorch, numba, JAX...), or a strided view that is a row-major box of one (u[2:-2, 2:-2]: the
        interior without its ghost cells; a[:, :3]: rows with padding), stored as the packed box without a
        copy being made (restart() writes the box only). The Runtime keeps a reference to it; update it in
        place.
        - global_shape + start: this process's box [start, start + array.shape) of a global C-order array of
          extents global_shape (restartable on any process count);
        - joined=True: this process's rows (array.shape[0], may be 0) of a joined array (every process's rows
          concatenated in rank order; restartable on any count). first_row: restart only, the first stored
          row it reads (None: this process's share of the balanced split, see joined_rows());
        - otherwise a local array (this process's only), or a scalar for a 0-d array.
        optional: True/False marks the region optional (a restart from a checkpoint without it leaves it
        as it is) or not; None leaves that as it was.

        Protecting a name again replaces the array (same kind and dtype, any extents): the new one is what
        later checkpoints read and restarts fill, and the old one is released. Raises InvalidArgumentError
        (strides that are no box of a row-major array: reversed, transposed, broadcast, a step in the innermost
        dimension; read-only, a Python scalar, bad geometry, a changed kind or dtype) or
        UnavailableError (memory ckpt cannot read: another kind of device, or device memory when the
        Runtime has no GPU device)."""
        what = f"protect({name!r})"
        h = self._handle(what)
        if not isinstance(name, str):
            raise error("invalid_argument", f"protect: the name must be a str, not {type(name).__name__}")
        old = self._regions.get(name)
        objs = [array]  # alive until _count_held(): its reference is in both counts
        slot = self._patchable(old, array)  # the common re-protect: the check's lists patched, not rebuilt
        before = self._refs_before(objs, keep_lists=slot is not None)
        mem = _arrays.describe(array, what)
        self._check_device(name, mem, what)
        kind, dims = self._geometry(mem, global_shape, start, joined, first_row, what)
        bname = to_bytes(name)
        ptr = _P(mem.ptr or None)
        if old is not None:
            if old.kind != kind or old.mem.code != mem.code or old.mem.attr != mem.attr:
                raise error("invalid_argument",
                            f"{what}: registered as a {old.kind} array of {_dtype_name(old.mem)}; it cannot become "
                            f"a {kind} array of {_dtype_name(mem)} (unprotect it first)")
            self._replace(h, bname, old, ptr, mem, kind, dims)
        else:
            check(self._protect(h, bname, ptr, mem.code, kind, dims))
            try:
                if mem.attr is not None:
                    check(lib.ckpt_annotate(h, bname, _arrays.DTYPE_ATTR.encode(), mem.attr.encode()))
                if mem.alloc is not None:
                    check(_select(h, bname, mem))
            except BaseException:
                lib.ckpt_unprotect(h, bname)  # the first error is raised; nothing stays registered
                raise
        if optional is not None:
            check(lib.ckpt_set_optional(h, bname, 1 if optional else 0))
        r = _Region()
        r.obj, r.kind, r.mem, r.dims, r.pieces = array, kind, mem, dims, None
        r.held = [_Held(array, name, None)] if _getrefcount is not None and _counted(array) else []
        self._regions[name] = r  # replaces `old`, alive (the local) until counted
        self._count_held(r, before)
        if slot is not None:
            self._patch_watch(slot, r.held[0])
        del old, mem  # its references (and DLPack capsule) go now
        return array

    def _refs_before(self, objs, keep_lists=False):
        """{id: references} of each of `objs` now, with the earlier registration of the same name still alive:
        _count_held() counts again after the new one is stored, the old one still alive (the caller keeps it
        until then), and the difference is what the new registration holds (see checkpoint()). What the old one
        held - directly, or through a view's `.base` - goes when the caller lets it go, after the count.
        `objs` must stay alive until _count_held(). Drops what checkpoint() checks first (_forget_watch()),
        unless `keep_lists` (_patchable()): its lists hold objects and must not change between the two counts."""
        if not keep_lists:
            self._forget_watch()
        if _getrefcount is None:
            return {}
        return {id(o): _getrefcount(o) for o in objs}  # `o`: one reference, as below

    @staticmethod
    def _count_held(r, before):
        """After region `r` was stored (the registration it replaces still alive): how many references to each of
        its objects it holds, the count now less `before` (_refs_before())."""
        for h in r.held:
            o = h.obj  # one reference, as the loop variable of _refs_before had
            h.our_refs = _getrefcount(o) - before[id(o)]
        o = None

    def _patchable(self, old, array):
        """The index in what checkpoint() checks of `old`'s one entry when `array` can take its place there
        without a rebuild (_patch_watch()), else None. So when the lists are built, `old` holds one array that
        owns its memory, is protected under no other name and has no protected view, and `array` owns its
        memory and is in the lists neither under another name nor as a protected view's base: then the
        entry's limit depends on the new registration alone. One pass in C (the entry's index), no rebuild."""
        if self._watch_objs is None or old is None or len(old.held) != 1 or _getrefcount is None:
            return None
        if not (_counted(array) and _owns_memory(array)):
            return None
        gone = old.held[0]
        try:
            at = self._watched.index(gone)  # _Held has no __eq__: by identity
        except ValueError:
            return None
        if self._watch_via[at] != ():  # None: a view; a non-empty tuple: protected views of it
            return None
        counts = self._watch_count
        if counts.get(id(gone.obj)) != 1 or id(array) in self._watch_bases:
            return None
        if array is not gone.obj and id(array) in counts:
            return None
        return at

    def _patch_watch(self, at, held):
        """Puts `held` (the new registration's one entry, counted by _count_held()) in place of entry `at`
        (_patchable()): its slot in _watch_objs, and its limit as _rebuild_watch() would compute it."""
        counts = self._watch_count
        del counts[id(self._watch_objs[at])]  # one entry (_patchable())
        counts[id(held.obj)] = 1
        self._watched[at] = held
        self._watch_objs[at] = held.obj
        self._watch_limits[at] = held.our_refs + 1 + _MAP_REFS  # + 1: its slot in _watch_objs
        self._watch_via[at] = ()
        self._watch_passed = None

    def _forget_watch(self):
        """Drops what checkpoint() checks, after the regions changed; the next checkpoint() rebuilds it
        (_rebuild_watch()), so that protecting N arrays costs O(N), not O(N^2). Dropped, not kept stale: a
        replaced or unprotected array is let go at once."""
        self._watched = self._watch_objs = self._watch_limits = self._watch_via = None
        self._watch_count = self._watch_bases = None
        self._watch_passed = None  # other objects or limits: no check has passed yet

    def _rebuild_watch(self):
        """What checkpoint() checks, from the regions' held objects: the objects (one slot each entry in
        _watch_objs), and the limit of each - the count at or below which only this Runtime reaches it: the
        references of all its entries (an array protected under two names is held twice by the Runtime) and
        their slots in _watch_objs, plus, for an array that owns its memory, one per protected view of it (a
        view's `.base`, a reference the Runtime keeps through the view). Such an array at its limit is still
        held when the application holds one of those views (a view above its own limit): _watch_via lists
        them."""
        watched = [h for x in self._regions.values() for h in x.held]
        ours = {}  # id -> references this Runtime holds, over every name the object is protected under
        entries = {}  # id -> its entries (for _patchable())
        for h in watched:
            ours[id(h.obj)] = ours.get(id(h.obj), 0) + h.our_refs + 1  # + 1: its slot in _watch_objs
            entries[id(h.obj)] = entries.get(id(h.obj), 0) + 1
        owners = {id(h.obj) for h in watched if _owns_memory(h.obj)}
        views = {}  # id of an owner -> {id of a protected view of it: [its entries' indices in watched]}
        bases = set()  # ids of the bases of protected views (for _patchable())
        for i, h in enumerate(watched):
            if id(h.obj) not in owners:
                base = getattr(h.obj, "base", None)  # numpy and CuPy: the owner, also for a view of a view
                if base is not None:
                    bases.add(id(base))
                    if id(base) in owners:
                        views.setdefault(id(base), {}).setdefault(id(h.obj), []).append(i)
                base = None
        self._watched = watched
        self._watch_objs = [h.obj for h in watched]
        self._watch_count, self._watch_bases = entries, bases
        self._watch_limits = [ours[id(h.obj)] + len(views.get(id(h.obj), ())) + _MAP_REFS for h in watched]
        # None: not checked itself (a view); else the entries of the protected views that may hold it.
        self._watch_via = [tuple(i for v in views.get(id(h.obj), {}).values() for i in v)
                           if id(h.obj) in owners else None for h in watched]
        self._watch_passed = None

    def _replace(self, h, bname, old, ptr, mem, kind, dims):
        """ckpt_update* of a registered region to `mem`, with its memory selection: the old one is cleared
        first (the library keeps a selection through updates and refuses new extents that do not fit it),
        the new one set afterwards for a strided view. A failure puts the old registration back and raises."""
        if old.mem.alloc is not None:
            check(_select(h, bname, None))
        try:
            check(self._update(h, bname, ptr, kind, dims))
        except BaseException:
            if old.mem.alloc is not None:
                _select(h, bname, old.mem)
            raise
        if mem.alloc is None:
            return
        try:
            check(_select(h, bname, mem))
        except BaseException:  # back to the old array, as it was registered
            back = self._update(h, bname, _P(old.mem.ptr or None), old.kind, old.dims)
            if back == 0 and old.mem.alloc is not None:
                _select(h, bname, old.mem)
            raise

    def _check_device(self, name, mem, what):
        if mem.device in ("cpu", "cuda_host", "rocm_host"):
            return
        gpu = {"cuda": "cuda", "cuda_managed": "cuda", "rocm": "hip"}[mem.device]
        if self.device == "host":
            # No GPU device: ckpt reads every pointer as host memory. Device memory would crash the copy;
            # memory the host can read (managed, a device array over host memory) is taken.
            if not _arrays.host_readable(mem.ptr, _span(mem)):
                raise error("unavailable",
                            f"{what}: {mem.device}:{mem.device_id} memory that the host cannot read, and this "
                            "Runtime has no GPU device (libckpt built without CUDA/HIP, or no GPU visible to it)")
        elif self.device != gpu:
            raise error("unavailable", f"{what}: {mem.device} memory; this Runtime's device is {self.device}")
        if mem.device_id >= 0:
            for other, r in self._regions.items():
                if other != name and r.mem.device not in ("cpu", "cuda_host", "rocm_host") \
                        and r.mem.device_id >= 0 and r.mem.device_id != mem.device_id:
                    raise error("invalid_argument",
                                f"{what}: on {mem.device}:{mem.device_id}, but {other!r} is on "
                                f"{r.mem.device}:{r.mem.device_id}; a Runtime copies with one device (the current "
                                "device when it was made): one Runtime per GPU")

    @staticmethod
    def _geometry(mem, global_shape, start, joined, first_row, what):
        shape, trailing = tuple(mem.shape), tuple(mem.trailing)
        if global_shape is not None or start is not None:
            if joined:
                raise error("invalid_argument", f"{what}: a joined array has no global_shape/start")
            if global_shape is None or start is None:
                raise error("invalid_argument", f"{what}: a box of a global array needs both global_shape and start")
            g, s = _ints(global_shape, what, "global_shape"), _ints(start, what, "start")
            if not (len(g) == len(s) == len(shape)) or not shape:
                raise error("invalid_argument", f"{what}: global_shape {g} and start {s} need one value per "
                                                f"dimension of the array (shape {shape})")
            z = (0,) * len(trailing)
            return _KIND_GLOBAL, (g + trailing, s + z, shape + trailing)
        if first_row is not None and not joined:
            raise error("invalid_argument", f"{what}: first_row is for joined arrays (joined=True)")
        if joined:
            if not shape:
                raise error("invalid_argument", f"{what}: a joined array needs at least one dimension (its rows)")
            fr = -1 if first_row is None else _ints([first_row], what, "first_row")[0]
            return _KIND_JOINED, (shape + trailing, fr)
        return (_KIND_SCALAR if not shape and not trailing else _KIND_LOCAL), (shape + trailing,)

    @staticmethod
    def _protect(h, bname, ptr, code, kind, dims):
        if kind == _KIND_GLOBAL:
            g, s, c = dims
            return lib.ckpt_protect_block(h, bname, ptr, code, len(g), u64_array(g), u64_array(s), u64_array(c))
        if kind == _KIND_JOINED:
            return lib.ckpt_protect_joined(h, bname, ptr, code, len(dims[0]), u64_array(dims[0]), dims[1])
        return lib.ckpt_protect(h, bname, ptr, code, len(dims[0]), u64_array(dims[0]))

    @staticmethod
    def _update(h, bname, ptr, kind, dims):
        if kind == _KIND_GLOBAL:
            g, s, c = dims
            return lib.ckpt_update_block(h, bname, ptr, len(g), u64_array(g), u64_array(s), u64_array(c))
        if kind == _KIND_JOINED:
            return lib.ckpt_update_joined(h, bname, ptr, len(dims[0]), u64_array(dims[0]), dims[1])
        return lib.ckpt_update(h, bname, ptr, len(dims[0]), u64_array(dims[0]))

    def protect_scattered(self, name, pieces, *, row=None, memory=None, dtype=None, optional=None):
        """Registers under `name` this process's rows of a joined array that lie in separate arrays - AMR
        blocks with ghost cells, each its own allocation; particle tiles - and returns `pieces` (a list). This
        process's rows are the pieces' rows, in order; checkpoint() copies each piece's rows straight into
        ckpt's staging memory (no packing), and restart() writes the stored rows back into the pieces
        protected then. Stored as one joined array (as protect(..., joined=True) stores one): readers, tools
        and restarts on any process count see one array of rows. Each process its own (not collective).

        pieces: a list (any iterable) of C-contiguous, writable arrays (numpy or device arrays, as for
        protect()), all of one dtype. Each piece holds k rows as an array of shape (k, *X), 0 allowed, or one
        row as an array of shape X, where X is `row` (the rows packed) or the allocation extents of a row
        (with `memory`).
        row: the extents of one row, the same on every process; default: pieces[0].shape[1:] (needed when
        there is no piece, or with `memory`).
        memory: (start, alloc), one row's memory selection: each row is the box [start, start + row) of an
        allocation of extents alloc (one entry per entry of row), e.g. a block of NV x NZ x NX cells with one
        ghost cell around each plane is row=(NV, NZ, NX), memory=((0, 1, 1), (NV, NZ + 2, NX + 2)), and its
        piece an array of shape (NV, NZ + 2, NX + 2). Only the boxes are stored and restored (the ghosts are
        left as they are).
        dtype: the element type (a numpy dtype or its name), needed when there is no piece (then `row` too);
        otherwise every piece must have it.
        optional: as for protect().

        With set_restart_keys() / set_restart_rows() (one key or row per row, in the pieces' order) the
        rows move between processes at restart (blocks on another process count, into new allocations).
        Protecting the name again replaces the pieces (blocks refined, coarsened, moved): the pieces, their
        rows and `memory` may change, the dtype and `row` not (InvalidArgumentError), nor the kind. The
        Runtime keeps a reference to every piece until they are replaced, unprotected or the Runtime is
        closed; checkpoint() refuses a piece only the Runtime still holds (PreconditionError naming it).
        Raises InvalidArgumentError, before libckpt is called, for pieces that are not such arrays (None, a
        strided view, another dtype, a shape that is neither (k, *X) nor X), a `memory` that is not one
        (start, alloc) pair of one entry per entry of `row` with the box inside the allocation, a `memory`
        without `row`, and no piece without `dtype` and `row`; UnavailableError as protect()."""
        what = f"protect_scattered({name!r})"
        h = self._handle(what)
        if not isinstance(name, str):
            raise error("invalid_argument", f"protect_scattered: the name must be a str, not {type(name).__name__}")
        if isinstance(pieces, (str, bytes, bytearray, memoryview, np.ndarray)) or not hasattr(pieces, "__iter__"):
            raise error("invalid_argument", f"{what}: pieces must be a list of arrays, not {type(pieces).__name__} "
                                            "(one array of all the rows: protect(name, array, joined=True))")
        pieces = list(pieces)
        if row is not None:
            row = _ints(row, what, "row")
        start = alloc = None
        if memory is not None:
            try:
                start, alloc = memory
            except (TypeError, ValueError):
                raise error("invalid_argument",
                            f"{what}: memory must be a pair (start, alloc), got {memory!r}") from None
            start, alloc = _ints(start, what, "memory start"), _ints(alloc, what, "memory alloc")
            if row is None:
                raise error("invalid_argument", f"{what}: memory needs row= (the extents of the box of a row; the "
                                                "pieces have those of its allocation)")
            if not row or len(start) != len(row) or len(alloc) != len(row):
                raise error("invalid_argument", f"{what}: memory start {start} and alloc {alloc} need one entry per "
                                                f"entry of row {row}" + (" (rows of one element have no selection)"
                                                                         if not row else ""))
            for d, (s0, n, a) in enumerate(zip(start, row, alloc)):
                if s0 + n > a:
                    raise error("invalid_argument", f"{what}: the box of a row, start {start} + row {row}, exceeds "
                                                    f"the allocation {alloc} in dimension {d}")
        old = self._regions.get(name)
        before = self._refs_before(pieces)
        mems = [_arrays.describe(p, f"{what}: piece {i}") for i, p in enumerate(pieces)]
        want = None
        if dtype is not None:
            try:
                dt = np.dtype(dtype)
            except TypeError as e:
                raise error("invalid_argument", f"{what}: dtype {dtype!r}: {e}") from None
            want = _arrays.storage(dt, what) + (dt,)
        elif not mems:
            raise error("invalid_argument", f"{what}: no piece: give dtype= and row= (every process registers the "
                                            "region, also one without rows)")
        if mems:
            if want is None:
                want = (mems[0].code, tuple(mems[0].trailing), mems[0].attr, mems[0].dtype)
            if row is None:
                if not mems[0].shape:
                    raise error("invalid_argument", f"{what}: piece 0 is a 0-d array: give row= (a piece holds "
                                                    "rows: shape (rows, *row))")
                row = tuple(int(n) for n in mems[0].shape[1:])
        elif row is None:
            raise error("invalid_argument", f"{what}: no piece: give row= and dtype=")
        code, trailing, attr, dt = want
        shape_x = alloc if memory is not None else row
        rows = []
        for i, m in enumerate(mems):
            if (m.code, tuple(m.trailing), m.attr) != (code, trailing, attr):
                raise error("invalid_argument", f"{what}: piece {i} is {_dtype_name(m)}, the region {dt}: one dtype "
                                                "per region")
            if m.alloc is not None:
                raise error("invalid_argument", f"{what}: piece {i} is a strided view (shape {tuple(m.shape)}); a "
                                                "piece is a whole C-contiguous array, the box of each row given by "
                                                "memory=(start, alloc)")
            shape = tuple(int(n) for n in m.shape)
            if shape == shape_x:
                rows.append(1)
            elif len(shape) == len(shape_x) + 1 and shape[1:] == shape_x:
                rows.append(shape[0])
            else:
                raise error("invalid_argument", f"{what}: piece {i} has shape {shape}; a piece is (rows, *{shape_x}) "
                                                f"or {shape_x} (one row), {'alloc of memory' if memory else 'row'} "
                                                f"{shape_x}")
            self._check_device(name, m, f"{what}: piece {i}")
            if m.device_id >= 0 and mems[0].device_id >= 0 and (m.device, m.device_id) != (mems[0].device,
                                                                                          mems[0].device_id):
                raise error("invalid_argument", f"{what}: piece {i} is on {m.device}:{m.device_id}, piece 0 on "
                                                f"{mems[0].device}:{mems[0].device_id}: a Runtime copies with one "
                                                "device")
        if old is not None and (old.kind != _KIND_SCATTERED or (old.mem.code, old.mem.attr) != (code, attr)):
            raise error("invalid_argument",
                        f"{what}: registered as a {old.kind} array of {_dtype_name(old.mem)}; it cannot become a "
                        f"scattered array of {dt} (unprotect it first)")
        # The C API's view: each row is row + trailing (a complex element is two reals); one row's selection.
        c_row = row + trailing
        c_start = c_alloc = None
        if memory is not None:
            c_start, c_alloc = u64_array(start + (0,) * len(trailing)), u64_array(alloc + trailing)
        n = len(mems)
        ptrs = (_P * max(1, n))(*(m.ptr or None for m in mems))
        counts = (ctypes.c_uint64 * max(1, n))(*rows)
        bname = to_bytes(name)
        if old is not None:
            check(lib.ckpt_update_scattered(h, bname, len(c_row), u64_array(c_row), n, ptrs, counts, c_start, c_alloc))
        else:
            check(lib.ckpt_protect_scattered(h, bname, code, len(c_row), u64_array(c_row), n, ptrs, counts, c_start,
                                             c_alloc))
            try:
                if attr is not None:
                    check(lib.ckpt_annotate(h, bname, _arrays.DTYPE_ATTR.encode(), attr.encode()))
            except BaseException:
                lib.ckpt_unprotect(h, bname)  # the first error is raised; nothing stays registered
                raise
        if optional is not None:
            check(lib.ckpt_set_optional(h, bname, 1 if optional else 0))
        r = _Region()
        # A tuple of its own: the list returned may be changed by the caller, the pieces must stay alive.
        r.kind, r.dims, r.obj = _KIND_SCATTERED, (row, memory), tuple(pieces)
        r.mem = mems[0] if mems else _arrays.Memory(0, (), code, trailing, attr, dt, "cpu", 0, None, None)
        r.pieces = mems
        first_at = {}  # each object once, by the first piece it is (no loop variable left holding a piece)
        for i in range(len(pieces) if _getrefcount is not None else 0):
            if id(pieces[i]) not in first_at and _counted(pieces[i]):
                first_at[id(pieces[i])] = i
        r.held = [_Held(pieces[i], name, i) for i in first_at.values()]
        self._regions[name] = r  # replaces `old`, alive (the local) until counted
        self._count_held(r, before)
        del old, mems  # its references (and DLPack capsules) go now
        return pieces

    def unprotect(self, name):
        """Forgets region `name` and releases its array. NotFoundError when it is not protected."""
        h = self._handle(f"unprotect({name!r})")
        check(lib.ckpt_unprotect(h, to_bytes(name)))
        r = self._regions.pop(name, None)
        if r is not None and r.held:
            self._forget_watch()

    def set_optional(self, name, optional=True):
        """Marks region `name` optional (or not): a restart from a checkpoint without it leaves it as it is."""
        check(lib.ckpt_set_optional(self._handle(f"set_optional({name!r})"), to_bytes(name), 1 if optional else 0))

    def set_restart_rows(self, name, rows):
        """Restart of joined array `name` fills this process's rows with the stored rows `rows`, in this
        order: row i of the protected array gets stored row rows[i] (0-based, an index into the whole stored
        array, whoever wrote it). rows: a sequence of integers >= 0 or a 1-d numpy integer array, one entry
        per row protected under `name` when restart() runs (protect len(rows) rows; 0 allowed). Any order,
        any subset; a row may be asked for by several processes, or twice by one. Only the stored blocks
        that hold them are read. The N -> M restart of blocks that moved (AMR), by index; by id, see
        set_restart_keys(). Each process its own (not collective).

        Replaces first_row and the balanced split (and an earlier set_restart_rows/keys) until
        clear_restart_rows(); kept when `name` is protected again (not after unprotect). restart() raises
        MismatchError on every process for a row beyond the stored rows, or for len(rows) other than the
        rows protected. Raises InvalidArgumentError for rows that are not integers >= 0 (before libckpt is
        called: the earlier setting stays) or for a region that is not a joined array, NotFoundError when
        `name` is not protected (ckpt_set_restart_rows)."""
        what = f"set_restart_rows({name!r})"
        h = self._handle(what)
        bname = _name_bytes(name, what, "name")
        a = _integer_array(rows, what, "rows", np.uint64)
        check(lib.ckpt_set_restart_rows(h, bname, a.ctypes.data_as(u64p), a.size))

    def set_restart_keys(self, name, key, keys):
        """As set_restart_rows(), the rows named by their values in `key`: row i of this process's array
        `name` gets the stored row whose value in `key` is keys[i]. key: the name of a joined integer array of
        the checkpoint (any of ckpt's integer types) with one value per row of `name` - a block id; it need
        not be protected at restart, and `name` itself may be the key (set_restart_keys("id", "id", keys)
        restores the ids). keys: a sequence of integers or a 1-d numpy integer array (int64 values, negative
        allowed), one per row protected under `name`; any order, overlapping across processes, twice on one.

        Resolved by restart() (collective: each process reads its share of the key column and the
        processes route the requests to one another, O(rows / processes) each; every process must restart
        the same arrays by key). restart() raises, on every process: NotFoundError for a key value that no
        stored row holds (naming it and the process that asked) or a key array the checkpoint lacks,
        InvalidArgumentError for a value two stored rows hold or a key that is no joined integer array of
        one value per row, MismatchError for len(keys) other than the rows protected or a key of another
        row count. Raises InvalidArgumentError here for keys that are not integers of int64 (before
        libckpt is called: the earlier setting stays), an empty key or a region that is not a joined
        array, NotFoundError when `name` is not protected (ckpt_set_restart_keys)."""
        what = f"set_restart_keys({name!r})"
        h = self._handle(what)
        bname, bkey = _name_bytes(name, what, "name"), _name_bytes(key, what, "key")
        a = _integer_array(keys, what, "keys", np.int64)
        check(lib.ckpt_set_restart_keys(h, bname, bkey, a.ctypes.data_as(i64p), a.size))

    def clear_restart_rows(self, name):
        """Back to first_row or the balanced split (joined_rows()) for joined array `name`, after
        set_restart_rows() or set_restart_keys(). InvalidArgumentError for a region that is not a joined
        array, NotFoundError when `name` is not protected (ckpt_clear_restart_rows)."""
        what = f"clear_restart_rows({name!r})"
        h = self._handle(what)
        check(lib.ckpt_clear_restart_rows(h, _name_bytes(name, what, "name")))

    def annotate(self, name, key, value):
        """Attaches the string attribute key=value to region `name`, stored in every later checkpoint (the
        reader's Variable.attrs). The key "python.dtype" is this package's."""
        check(lib.ckpt_annotate(self._handle(f"annotate({name!r})"), to_bytes(name), str(key).encode(),
                                str(value).encode()))

    def __contains__(self, name):
        return name in self._regions

    @property
    def regions(self):
        """Names of the protected regions, in protect() order."""
        return list(self._regions)

    # ---- checkpoint and restart -----------------------------------------------------------------------

    def checkpoint(self, step, stream=None):
        """Collective: every process passes the same step (>= 0). Captures every region and returns a
        Ticket once the data is copied (host memory: the arrays may be overwritten at once) or its copies are
        ordered on `stream` (device memory; the work enqueued on `stream` afterwards runs after them).
        stream: None (the default stream), a CUDA stream object (CuPy, PyTorch, numba, __cuda_stream__) or
        its integer handle. Writing and committing go on in the background; a failure of the capture is
        raised here, one of the writing by the Ticket's wait(). Raises PreconditionError, before anything
        is captured, for a region whose array the application no longer holds."""
        # What this call adds from Python is on the critical path of every checkpoint (goal: <= 50 us for
        # 100 arrays, docs/performance.md). The holding check is one pass of map in C over the reference
        # counts, then one comparison, as lists, with the counts of the last check that passed.
        h = self._h
        if h is None:
            self._handle(f"checkpoint({step})")
        if type(step) is not int:
            step = operator.index(step)
        if self._watch_objs is None:  # regions changed since the last checkpoint(): O(regions), once
            self._rebuild_watch()
        if self._watch_objs:
            counts = [*map(_getrefcount, self._watch_objs)]
            if counts != self._watch_passed:  # the same counts as a check that passed pass again
                limits = self._watch_limits
                for held, n, limit, via in zip(self._watched, counts, limits, self._watch_via):
                    # Nothing but this Runtime holds it, nor a view of it that the application holds.
                    if n <= limit and via is not None and not any(counts[i] > limits[i] for i in via):
                        raise _stale(held, step, [h.name for h in self._watched if h.obj is held.obj])
                self._watch_passed = counts
        s = _arrays.stream_handle(stream, f"checkpoint({step})") if stream is not None else None
        # The Ticket is made before the call: after it, the capture has evicted what Python would touch. Its
        # handle is the c_void_p libckpt writes (ctypes passes it by reference for the POINTER argument).
        t = Ticket(_P(), self, step)
        rc = lib.ckpt_checkpoint(h, step, s, t._h)
        if rc != 0:
            if t._h:
                lib.ckpt_ticket_free(t._h)
            t._h = None
            check(rc)
        return t

    def wait_all(self):
        """Collective. Blocks until every checkpoint in flight is done; raises the first failure."""
        check(lib.ckpt_wait_all(self._handle("wait_all()")))

    def poll(self):
        """Collective. With mpi_threads funneled: commits the checkpoints every process has written."""
        check(lib.ckpt_poll(self._handle("poll()")))

    def latest(self):
        """Collective. The newest checkpoint whose index validates, or None."""
        s = ctypes.c_int64()
        check(lib.ckpt_latest(self._handle("latest()"), ctypes.byref(s)))
        return None if s.value < 0 else s.value

    def joined_rows(self, name, step=None):
        """Collective. JoinedRows(total, begin, end) of joined array `name` in checkpoint `step` (None: the
        newest): allocate end - begin rows, protect them under `name` (joined=True), then restart(step)."""
        h = self._handle(f"joined_rows({name!r})")
        if step is None:
            step = self.latest()
            if step is None:
                raise error("not_found", f"joined_rows({name!r}): no checkpoint in this Runtime's directory")
        total, begin, end = ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_uint64()
        check(lib.ckpt_joined_rows(h, step, to_bytes(name), ctypes.byref(total), ctypes.byref(begin),
                                   ctypes.byref(end)))
        return JoinedRows(total.value, begin.value, end.value)

    def restart(self, step=None, stream=None):
        """Collective. Fills every protected array from checkpoint `step`, or (None) from the newest one that
        loads and verifies, falling back to older ones; returns the step. Every block is verified. Device
        arrays are filled on their device, the copies ordered after the work enqueued so far on `stream`
        (as in checkpoint()) and the work enqueued on it afterwards after them; the data is in place when
        it returns. NotFoundError when there is no checkpoint (or no step `step`); MismatchError when an
        array's extents or dtype differ from what is stored; CorruptError for damaged data.

        restart() of the newest step that succeeds but skipped newer steps (damaged, not matching) or left
        optional arrays untouched issues a ckpt.RestartWarning through the warnings module (its .code is
        the newest skipped step's failure, e.g. "corrupt"; "not_found" when only optional arrays were
        skipped) and keeps it in last_restart_warning (None after a restart without one, or of a step)."""
        h = self._handle("restart()")
        s = _arrays.stream_handle(stream, "restart()") if stream is not None else None
        self.last_restart_warning = None
        if step is None:
            out = ctypes.c_int64(-1)
            check(lib.ckpt_restart_stream(h, s, ctypes.byref(out)))
            code, msg = ctypes.c_int(), ctypes.c_char_p()
            check(lib.ckpt_restart_warning(h, ctypes.byref(code), ctypes.byref(msg)))
            if code.value != 0:
                self.last_restart_warning = RestartWarning(CODES.get(code.value, str(code.value)),
                                                           (msg.value or b"").decode("utf-8", "backslashreplace"))
                warnings.warn(self.last_restart_warning, stacklevel=2)
            return out.value
        step = operator.index(step)
        check(lib.ckpt_restart_step_stream(h, step, s))
        return step

    def close(self):
        """Collective. Waits for the checkpoints in flight, stops the background threads, frees the staging
        memory and releases every array; raises the first failure (the Runtime is closed either way).
        Idempotent. Leaving a `with` block normally calls it; see docs/api-python.md for exceptions."""
        if self._h is None:
            return
        h, self._h = self._h, None
        try:
            rc = lib.ckpt_close(h)
            failure = exception(rc) if rc != 0 else None
        finally:
            lib.ckpt_free(h)  # no collective left: ckpt_close ran
            self._regions, self._watched, self._watch_objs, self._watch_limits, self._watch_via = {}, [], [], [], []
            self._watch_count, self._watch_bases = {}, set()
            self._watch_passed = None
            if self in _open_runtimes:
                _open_runtimes.remove(self)
        if failure is not None:
            raise failure


def _nbytes(mem):
    n = _arrays.ITEMSIZE[mem.code]
    for d in tuple(mem.shape) + tuple(mem.trailing):
        n *= d
    return n


def _span(mem):
    """Bytes from the first element of `mem` to the end of its last one: _nbytes(mem), or more for a strided
    view (its rows are apart)."""
    if mem.alloc is None or _nbytes(mem) == 0:
        return _nbytes(mem)
    item = _nbytes(mem._replace(shape=()))  # one element, trailing dimension included
    last, step = 0, item
    for n, a in zip(reversed(tuple(mem.shape)), reversed(tuple(mem.alloc))):
        last += (n - 1) * step
        step *= a
    return last + item


def _select(h, bname, mem):
    """ckpt_set_memory_selection of the strided view `mem` (start zeros, mem.alloc plus the trailing
    dimension of the stored type), or of no selection (mem None: the region is packed again)."""
    if mem is None:
        return lib.ckpt_set_memory_selection(h, bname, 0, u64_array(()), u64_array(()))
    alloc = tuple(mem.alloc) + tuple(mem.trailing)
    return lib.ckpt_set_memory_selection(h, bname, len(alloc), u64_array((0,) * len(alloc)), u64_array(alloc))


def _dtype_name(mem):
    return str(mem.dtype)


def _stale(h, step, names=()):
    """The PreconditionError of held object `h`; names: every region it is protected under (said when more
    than one)."""
    name = h.name
    others = [n for n in dict.fromkeys(names) if n != name]
    also = f" (also protected as {', '.join(map(repr, others))})" if others else ""
    if h.piece is not None:
        return PreconditionError(
            "failed_precondition",
            f"failed_precondition: checkpoint({step}): piece {h.piece} of the scattered region {name!r}{also} is "
            "no longer held by the application (was the array replaced in its list, e.g. `blocks[i] = blocks[i] + "
            "du`?): it would store data nothing updates. Protect the new pieces under the same name "
            f"(rt.protect_scattered({name!r}, pieces, ...)), or update the arrays in place")
    return PreconditionError(
        "failed_precondition",
        f"failed_precondition: checkpoint({step}): the array protected as {name!r}{also} is no longer held by "
        "the application (was its name rebound to a new array, e.g. `u = u + du`?): it would store data nothing "
        f"updates. Protect the new array under the same name (rt.protect({name!r}, u)), or update the array in "
        "place (u += du, u[...] = ...)")


def _close_at_exit():
    """Closes, in creation order, the Runtimes a program left open (close() is collective: every process
    exits the same way). Not after an uncaught exception (the other processes may never come to close()),
    for a Runtime abandoned by a `with` block's exception, or once MPI is finalized."""
    if getattr(sys, "last_exc", None) is not None or getattr(sys, "last_value", None) is not None:
        return
    try:
        from mpi4py import MPI
        if MPI.Is_finalized():
            if _open_runtimes:
                print(f"ckpt: {len(_open_runtimes)} Runtime(s) not closed before MPI_Finalize; checkpoints in "
                      "flight are lost", file=sys.stderr)
            return
    except ImportError:
        return
    for rt in list(_open_runtimes):
        if rt._abandoned:
            continue
        try:
            rt.close()
        except Exception as e:  # noqa: BLE001 - at exit, say it and go on
            print(f"ckpt: closing a Runtime at exit: {e}", file=sys.stderr)
