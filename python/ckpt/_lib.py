"""libckpt through ctypes: where it is found, the C functions' signatures, and the exceptions that carry
its error codes and messages. Shared by the reader (ckpt/__init__.py) and the runtime (ckpt/runtime.py).

libckpt is found through $CKPT_LIBRARY, else beside this package in an install tree
(<prefix>/lib/python/ckpt -> <prefix>/lib), else where the install tree was when this package was
pip-installed from it (`pip install <prefix>/lib/python`: ckpt/_install.py, written by setup.py), else by
the system's loader."""

import ctypes
import os


class Error(Exception):
    """A failure reported by libckpt, or found by this package before it called libckpt. `code` is its
    ckpt::Code name ("invalid_argument", "corrupt", ...); str() is the message, "<code>: <what>"."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class InvalidArgumentError(Error, ValueError):
    """Bad input from the caller: a name, a shape, an option, an array ckpt cannot take (invalid_argument)."""


class NotFoundError(Error, KeyError):
    """No such checkpoint, step, variable, region or rank (not_found)."""

    def __str__(self):  # KeyError would print the repr of the message
        return Exception.__str__(self)


class MismatchError(Error):
    """What is restarted into differs from what is stored: extents, dtype, kind (mismatch)."""


class CorruptError(Error):
    """Stored data failed validation: checksum, truncated file, damaged index (corrupt)."""


class StorageError(Error, OSError):
    """The operating system refused: open, write, rename, a full disk (io_error)."""


class UnavailableError(Error):
    """A feature this build or this machine lacks: a transport, a GPU device, an MPI thread level (unavailable)."""


class PreconditionError(Error):
    """A call made in the wrong state: a closed Runtime, an array no longer held by the application
    (failed_precondition)."""


class InternalError(Error):
    """A bug in ckpt, or out of memory (internal)."""


class RestartWarning(UserWarning):
    """Runtime.restart() (of the newest step) restarted, but not from the newest step with every array:
    newer steps were skipped (code: the newest skipped step's failure, e.g. "corrupt"), or optional arrays
    were left untouched ("not_found"). str() and .message say which and why (ckpt_restart_warning)."""

    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message



CODES = {0: "ok", 1: "invalid_argument", 2: "not_found", 3: "mismatch", 4: "corrupt", 5: "io_error",
         6: "unavailable", 7: "failed_precondition", 8: "internal", 9: "superseded"}
_ERRORS = {"invalid_argument": InvalidArgumentError, "not_found": NotFoundError, "mismatch": MismatchError,
           "corrupt": CorruptError, "io_error": StorageError, "unavailable": UnavailableError,
           "failed_precondition": PreconditionError, "internal": InternalError}


def error(code, what):
    """The exception for ckpt::Code name `code` with message "<code>: <what>" (a check of this package)."""
    return _ERRORS.get(code, Error)(code, f"{code}: {what}")


def _load_library():
    candidates = []
    if os.environ.get("CKPT_LIBRARY"):
        candidates.append(os.environ["CKPT_LIBRARY"])
    here = os.path.dirname(os.path.abspath(__file__))
    libdirs = [os.path.join(here, "..", "..")]  # <prefix>/lib/python/ckpt -> <prefix>/lib
    try:  # pip-installed from <prefix>/lib/python: the libdir setup.py recorded
        from . import _install
        if _install.LIBDIR:
            libdirs.append(_install.LIBDIR)
    except ImportError:
        pass
    for d in libdirs:
        for name in ("libckpt.so", "libckpt.dylib"):
            candidates.append(os.path.join(d, name))
    candidates += ["libckpt.so.0", "libckpt.so", "libckpt.dylib"]
    errors = []
    for c in candidates:
        if os.path.sep in c and not os.path.exists(c):
            continue
        try:
            return ctypes.CDLL(c)
        except OSError as e:
            errors.append(f"{c}: {e}")
    raise ImportError("ckpt: cannot load libckpt (set CKPT_LIBRARY to its path): " + "; ".join(errors))


lib = _load_library()

P = ctypes.c_void_p
u64p = ctypes.POINTER(ctypes.c_uint64)
i64p = ctypes.POINTER(ctypes.c_int64)
u32p = ctypes.POINTER(ctypes.c_uint32)
strp = ctypes.POINTER(ctypes.c_char_p)
_i64 = ctypes.c_int64
_int = ctypes.c_int


class VarInfo(ctypes.Structure):
    """ckpt_var_info."""
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("kind", ctypes.c_int),
                ("uniform", ctypes.c_int), ("ndims", ctypes.c_int), ("shape", u64p),
                ("has_minmax", ctypes.c_int), ("min", ctypes.c_double), ("max", ctypes.c_double),
                ("nattrs", ctypes.c_size_t), ("attr_keys", strp), ("attr_values", strp),
                ("nblocks", ctypes.c_size_t), ("block_ranks", u32p), ("block_starts", u64p),
                ("block_counts", u64p), ("nranks", ctypes.c_size_t), ("ranks", u32p)]


class CheckpointStatsC(ctypes.Structure):
    """ckpt_checkpoint_stats."""
    _fields_ = [("step", ctypes.c_int64), ("bytes", ctypes.c_uint64), ("bytes_written", ctypes.c_uint64),
                ("blocked_s", ctypes.c_double), ("capture_wait_s", ctypes.c_double), ("flush_s", ctypes.c_double),
                ("durable_s", ctypes.c_double), ("committed_s", ctypes.c_double),
                ("staging_bytes", ctypes.c_uint64), ("redundancy_s", ctypes.c_double),
                ("redundancy_bytes", ctypes.c_uint64), ("staging_pinned_bytes", ctypes.c_uint64),
                ("synced", ctypes.c_int)]


_SIGNATURES = {
    # the reader
    "ckpt_reader_open": [ctypes.c_char_p, ctypes.POINTER(P)],
    "ckpt_reader_open_handle": [P, ctypes.c_size_t, ctypes.c_char_p, ctypes.POINTER(P)],
    "ckpt_reader_free": [P],
    "ckpt_reader_steps": [P, ctypes.POINTER(_i64), ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)],
    "ckpt_reader_open_step": [P, _i64, ctypes.POINTER(P)],
    "ckpt_reader_latest": [P, ctypes.POINTER(P)],
    "ckpt_reader_step_free": [P],
    "ckpt_reader_step_info": [P, ctypes.POINTER(_i64), ctypes.POINTER(_int), ctypes.POINTER(ctypes.c_char_p)],
    "ckpt_reader_step_nvars": [P, ctypes.POINTER(ctypes.c_size_t)],
    "ckpt_reader_step_var": [P, ctypes.c_size_t, ctypes.POINTER(VarInfo)],
    "ckpt_reader_step_box_bytes": [P, ctypes.c_char_p, _int, u64p, u64p, u64p],
    "ckpt_reader_step_rank_bytes": [P, ctypes.c_char_p, ctypes.c_uint32, u64p],
    "ckpt_reader_step_read": [P, ctypes.c_char_p, _int, u64p, u64p, P, ctypes.c_size_t],
    "ckpt_reader_step_read_rank": [P, ctypes.c_char_p, ctypes.c_uint32, P, ctypes.c_size_t],
    "ckpt_reader_step_verify": [P],
    "ckpt_reader_step_load_blocks": [P],
    "ckpt_reader_step_rows_by_key": [P, ctypes.c_char_p, u64p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)],
    # the runtime
    "ckpt_create_handle_options": [P, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(P)],
    "ckpt_free": [P],
    "ckpt_close": [P],
    "ckpt_rank": [P, ctypes.POINTER(_int)],
    "ckpt_size": [P, ctypes.POINTER(_int)],
    "ckpt_device_name": [P, ctypes.POINTER(ctypes.c_char_p)],
    "ckpt_protect": [P, ctypes.c_char_p, P, _int, _int, u64p],
    "ckpt_protect_block": [P, ctypes.c_char_p, P, _int, _int, u64p, u64p, u64p],
    "ckpt_protect_joined": [P, ctypes.c_char_p, P, _int, _int, u64p, _i64],
    "ckpt_update": [P, ctypes.c_char_p, P, _int, u64p],
    "ckpt_update_block": [P, ctypes.c_char_p, P, _int, u64p, u64p, u64p],
    "ckpt_update_joined": [P, ctypes.c_char_p, P, _int, u64p, _i64],
    "ckpt_protect_scattered": [P, ctypes.c_char_p, _int, _int, u64p, ctypes.c_size_t, ctypes.POINTER(P), u64p, u64p,
                               u64p],
    "ckpt_update_scattered": [P, ctypes.c_char_p, _int, u64p, ctypes.c_size_t, ctypes.POINTER(P), u64p, u64p, u64p],
    "ckpt_joined_rows": [P, _i64, ctypes.c_char_p, u64p, u64p, u64p],
    "ckpt_set_optional": [P, ctypes.c_char_p, _int],
    "ckpt_set_memory_selection": [P, ctypes.c_char_p, _int, u64p, u64p],
    "ckpt_set_restart_rows": [P, ctypes.c_char_p, u64p, ctypes.c_size_t],
    "ckpt_set_restart_keys": [P, ctypes.c_char_p, ctypes.c_char_p, i64p, ctypes.c_size_t],
    "ckpt_clear_restart_rows": [P, ctypes.c_char_p],
    "ckpt_unprotect": [P, ctypes.c_char_p],
    "ckpt_annotate": [P, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p],
    "ckpt_checkpoint": [P, _i64, P, ctypes.POINTER(P)],
    "ckpt_ticket_wait": [P],
    "ckpt_ticket_done": [P, ctypes.POINTER(_int)],
    "ckpt_ticket_stats_sized": [P, ctypes.POINTER(CheckpointStatsC), ctypes.c_size_t],
    "ckpt_ticket_free": [P],
    "ckpt_wait_all": [P],
    "ckpt_poll": [P],
    "ckpt_latest": [P, ctypes.POINTER(_i64)],
    "ckpt_restart_stream": [P, P, ctypes.POINTER(_i64)],
    "ckpt_restart_step_stream": [P, _i64, P],
    "ckpt_restart_warning": [P, ctypes.POINTER(_int), ctypes.POINTER(ctypes.c_char_p)],
}
for _name, _args in _SIGNATURES.items():
    _f = getattr(lib, _name)
    _f.argtypes = _args
    _f.restype = None if _name.endswith("_free") else ctypes.c_int
for _name in ("ckpt_last_error", "ckpt_version"):
    getattr(lib, _name).restype = ctypes.c_char_p
    getattr(lib, _name).argtypes = []


def to_str(b):
    """Names, paths and annotations are bytes: as str, bytes that are not UTF-8 become lone surrogates
    (surrogateescape, as os.fsdecode does), so any byte sequence comes through and to_bytes() gives it
    back exactly (docs/cli.md, "Bytes in names and annotations": ckpt ls --json writes the same str)."""
    return b.decode("utf-8", "surrogateescape")


def to_bytes(s):
    """The bytes a str of to_str() (or a path, or a bytes object) stands for."""
    return os.fsencode(s) if not isinstance(s, str) else s.encode("utf-8", "surrogateescape")


def last_error():
    """ckpt_last_error(): "<code>: <message>" of this thread's last failure."""
    return (lib.ckpt_last_error() or b"").decode("utf-8", "backslashreplace")


def exception(rc):
    """The exception of failed return code `rc`, with the library's message (ckpt_last_error)."""
    code = CODES.get(rc, str(rc))
    return _ERRORS.get(code, Error)(code, last_error())


def check(rc):
    """Raises the exception of return code `rc`; nothing for CKPT_OK."""
    if rc != 0:
        raise exception(rc)


def u64_array(values):
    """A ctypes uint64 array of `values` (at least one element, so that it is never NULL)."""
    return (ctypes.c_uint64 * max(1, len(values)))(*values)
