"""What an array handed to Runtime.protect() is, in the terms of the C API: its address, extents, element
type and device, found through the numpy array itself, DLPack (__dlpack__, __dlpack_device__: CuPy,
PyTorch, JAX, numba, numpy) or the CUDA Array Interface (__cuda_array_interface__: CuPy, PyTorch, numba).

Element types ckpt has (u8 ... f64) are stored as they are. The others are stored as a type ckpt has plus,
where needed, one trailing dimension, with the attribute "python.dtype" naming the real type (numpy's
.npy header spelling); the reader (ckpt.Variable) gives them back in that type:
    bool                     -> u8                              (same extents)
    complex64 / complex128   -> f32 / f64, trailing dimension 2 (real, imaginary)
    anything else of fixed size (float16, bfloat16, datetime64, big-endian, structured records)
                             -> bytes, trailing dimension of the item size
Objects (Python references) are refused.

Memory: a C-contiguous array, or a strided view that is a row-major box of a larger array (u[2:-2, 2:-2] of
a C-contiguous u: ghost cells; a[:, :3] of an (n, 4) array: rows with padding). Such a view is registered
with its own extents and its first element as the pointer, plus a memory selection (the C API's
ckpt_set_memory_selection): start all zeros, and allocation extents alloc[d] = stride[d-1] / stride[d]
(d >= 1; extents of 1 are passed over, their alloc is 1), alloc[0] = shape[0]. ckpt stores the box
exactly as the packed array, and restart() writes only the box: the memory between its rows (the ghosts,
the padding) is neither read nor written. A view qualifies when its innermost stride is the item size and
each outer stride a positive multiple of the next inner one, at least that many elements times its extent
(extents of 1 may have any stride). Anything else (negative strides, Fortran order or a transpose,
broadcast or overlapping views, steps in the innermost dimension such as a[::2]) is refused: ckpt copies
rows of contiguous elements."""

import ctypes
import os
import sys
from collections import namedtuple

import numpy as np

from ._lib import error

DTYPE_ATTR = "python.dtype"

# ckpt's element types (ckpt.h CKPT_U8 ... CKPT_F64, CKPT_BYTES) by numpy kind and item size.
_CODES = {("u", 1): 1, ("i", 1): 2, ("u", 2): 3, ("i", 2): 4, ("u", 4): 5, ("i", 4): 6, ("u", 8): 7, ("i", 8): 8,
          ("f", 4): 9, ("f", 8): 10}
BYTES = 11
ITEMSIZE = {1: 1, 2: 1, 3: 2, 4: 2, 5: 4, 6: 4, 7: 8, 8: 8, 9: 4, 10: 8, 11: 1}

# DLPack: device types (DLDeviceType) and element type codes (DLDataTypeCode).
_DL_HOST = {1: "cpu", 3: "cuda_host", 11: "rocm_host"}  # host memory, read in place
_DL_GPU = {2: "cuda", 13: "cuda_managed", 10: "rocm"}
_DL_NAMES = {4: "OpenCL", 7: "Vulkan", 8: "Metal", 9: "VPI", 12: "ExtDev", 14: "OneAPI", 15: "WebGPU",
             16: "Hexagon", 17: "MAIA"}
_DL_INT, _DL_UINT, _DL_FLOAT, _DL_BFLOAT, _DL_COMPLEX, _DL_BOOL = 0, 1, 2, 4, 5, 6
_DL_READ_ONLY = 1  # DLPACK_FLAG_BITMASK_READ_ONLY of DLManagedTensorVersioned.flags

# Where and what an array is. ptr: its first element; shape: its extents; code: the ckpt dtype it is
# stored as; trailing: () or (n,), the extra dimension of that storage; attr: the "python.dtype" value
# (None for a type ckpt has); dtype: the numpy dtype, or "bfloat16"; device: "cpu", "cuda_host", "cuda",
# "cuda_managed", "rocm", ...; device_id: the DLPack device id (-1 when not known: the CUDA Array
# Interface has none); keep: what must stay alive while ckpt reads the memory (a DLPack capsule), or None;
# alloc: None for C-contiguous memory, else the extents (one per dimension of shape, in elements of dtype)
# of the row-major allocation whose box [0, shape) the strided view is (see the module's docstring).
Memory = namedtuple("Memory", "ptr shape code trailing attr dtype device device_id keep interface alloc",
                    defaults=(None,))


def storage(dt, what):
    """(code, trailing, attr) of numpy dtype `dt` (see the module's docstring)."""
    if dt.hasobject:
        raise error("invalid_argument", f"{what}: dtype {dt} holds Python objects; ckpt stores memory, not objects")
    if dt.itemsize == 0:
        raise error("invalid_argument", f"{what}: dtype {dt} has no size")
    if dt.isnative and dt.fields is None and dt.subdtype is None:
        code = _CODES.get((dt.kind, dt.itemsize))
        if code is not None:
            return code, (), None
        if dt.kind == "b":
            return 1, (), np.lib.format.dtype_to_descr(dt)
        if dt.kind == "c" and dt.itemsize in (8, 16):
            return (9 if dt.itemsize == 8 else 10), (2,), np.lib.format.dtype_to_descr(dt)
    descr = np.lib.format.dtype_to_descr(dt)
    return BYTES, (dt.itemsize,), descr if isinstance(descr, str) else repr(descr)


def stored_dtype(attr):
    """The numpy dtype a "python.dtype" attribute names, or None (e.g. bfloat16, which numpy lacks)."""
    import ast
    if not attr or attr == "bfloat16":
        return None
    try:
        descr = ast.literal_eval(attr) if attr.startswith("[") else attr
        return np.lib.format.descr_to_dtype(descr)
    except (ValueError, TypeError, SyntaxError):
        return None


def _contiguous(shape, strides, itemsize):
    """Whether `strides` (bytes) are those of a C-contiguous array of `shape` (extents of 1 may have any)."""
    if 0 in shape:
        return True
    expect = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expect:
            return False
        expect *= n
    return True


def _box_of(shape, strides, itemsize):
    """(alloc, why) of a view of `shape` with `strides` (bytes): alloc is None for C-contiguous memory (and
    zero-size views), else the extents of the row-major allocation whose box [0, shape) the view is (see
    the module's docstring); why is None, or says why the view is neither. Dimensions of extent 1 (any
    stride: their index is always 0) get allocation extent 1; each other dimension's stride is checked
    against that of the next inner dimension of more than one element."""
    shape, strides = tuple(int(n) for n in shape), tuple(int(s) for s in strides)
    if _contiguous(shape, strides, itemsize):
        return None, None
    alloc = [1] * len(shape)
    # The stride and index of the last dimension of extent > 1 seen; at first the innermost dimension, whose
    # elements (of extent 1 or not) are items.
    inner, prev = itemsize, len(shape) - 1
    for d in range(len(shape) - 1, -1, -1):
        n, s = shape[d], strides[d]
        if n == 1:
            continue
        if s < 0:
            return None, f"dimension {d} has a negative stride ({s} bytes: a reversed view)"
        if s == 0:
            return None, f"dimension {d} has stride 0 (a broadcast view: its {n} elements are the same memory)"
        if d == len(shape) - 1:
            if s != itemsize:
                return None, (f"the innermost dimension steps {s} bytes, not the item size {itemsize} (a step such "
                              "as a[::2], a transpose or a Fortran-order array)")
        elif s % inner:
            return None, (f"the stride of dimension {d} ({s} bytes) is not a multiple of that of dimension {prev} "
                          f"({inner} bytes; a transpose, a Fortran-order array or a view of a record field?)")
        elif s // inner < shape[prev]:
            return None, (f"the stride of dimension {d} ({s} bytes) is less than the {shape[prev]} elements of "
                          f"dimension {prev} ({inner} bytes each): its rows overlap or are transposed")
        else:
            alloc[prev] = s // inner
        inner, prev = s, d
    alloc[prev] = shape[prev]  # the outermost dimension of extent > 1: as many as the view has
    return tuple(alloc), None


def _refuse_strides(what, shape, strides, unit, why):
    return error("invalid_argument",
                 f"{what}: not C-contiguous (shape {tuple(shape)}, strides {tuple(strides)}{unit}) and not a "
                 f"row-major box of a larger array: {why}. ckpt takes C-contiguous arrays and strided views of a "
                 "box of one (u[2:-2, 2:-2] of a C-contiguous u, a[:, :3]): protect the array your code updates "
                 "(a copy made with np.ascontiguousarray is a different array)")


def _numpy(a, what):
    ma = sys.modules.get("numpy.ma")  # not imported: no masked array exists (importing it costs 0.1 s)
    if ma is not None and isinstance(a, ma.MaskedArray):
        raise error("invalid_argument", f"{what}: a masked array; protect its .data and .mask as two arrays")
    alloc = None
    if not a.flags.c_contiguous:
        alloc, why = _box_of(a.shape, a.strides, a.dtype.itemsize)
        if why is not None:
            raise _refuse_strides(what, a.shape, a.strides, "", why)
    if not a.flags.writeable:
        raise error("invalid_argument", f"{what}: the array is read-only; restart() writes into it")
    code, trailing, attr = storage(a.dtype, what)
    return Memory(a.__array_interface__["data"][0], a.shape, code, trailing, attr, a.dtype, "cpu", 0, None, "numpy",
                  alloc)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_valid.restype = ctypes.c_int
_capsule_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _dl_dtype(t, what):
    code, bits, lanes = t.code, t.bits, t.lanes
    name = f"DLPack type (code {code}, {bits} bits, {lanes} lanes)"
    if lanes != 1:
        raise error("invalid_argument", f"{what}: {name}: vector types are not supported")
    if code in (_DL_INT, _DL_UINT) and bits in (8, 16, 32, 64):
        return np.dtype(f"{'i' if code == _DL_INT else 'u'}{bits // 8}")
    if code == _DL_FLOAT and bits in (16, 32, 64):
        return np.dtype(f"f{bits // 8}")
    if code == _DL_COMPLEX and bits in (64, 128):
        return np.dtype(f"c{bits // 8}")
    if code == _DL_BOOL and bits == 8:
        return np.dtype(np.bool_)
    if code == _DL_BFLOAT and bits == 16:
        return "bfloat16"
    raise error("invalid_argument", f"{what}: {name} is not supported")


def _dlpack(obj, what):
    try:
        try:
            capsule = obj.__dlpack__(max_version=(1, 0))
        except TypeError:  # a producer older than DLPack 1.0 (no max_version)
            capsule = obj.__dlpack__()
    except (BufferError, RuntimeError, ValueError, TypeError) as e:  # e.g. a tensor that requires grad
        raise error("invalid_argument", f"{what}: __dlpack__() refused: {e}") from e
    if _capsule_valid(capsule, b"dltensor_versioned"):
        m = _DLManagedTensorVersioned.from_address(_capsule_pointer(capsule, b"dltensor_versioned"))
        t, read_only = m.dl_tensor, bool(m.flags & _DL_READ_ONLY)
    elif _capsule_valid(capsule, b"dltensor"):
        m = _DLManagedTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
        t, read_only = m.dl_tensor, False
    else:
        raise error("invalid_argument", f"{what}: __dlpack__() returned no DLPack capsule")
    dev_type, dev_id = t.device.device_type, t.device.device_id
    device = _DL_HOST.get(dev_type) or _DL_GPU.get(dev_type)
    if device is None:
        raise error("unavailable", f"{what}: memory of a {_DL_NAMES.get(dev_type, f'DLPack device type {dev_type}')} "
                                   "device; ckpt reads host, CUDA and ROCm memory")
    if read_only:
        raise error("invalid_argument", f"{what}: the producer exports it read-only; restart() writes into it")
    dt = _dl_dtype(t.dtype, what)
    shape = tuple(t.shape[i] for i in range(t.ndim))
    itemsize = 2 if isinstance(dt, str) else dt.itemsize
    alloc = None
    if t.strides:  # in elements (NULL: C-contiguous)
        strides = tuple(t.strides[i] for i in range(t.ndim))
        alloc, why = _box_of(shape, [s * itemsize for s in strides], itemsize)
        if why is not None:
            raise _refuse_strides(what, shape, strides, " elements",
                                  f"{why} (strides in bytes: {tuple(s * itemsize for s in strides)})")
    code, trailing, attr = (BYTES, (2,), "bfloat16") if isinstance(dt, str) else storage(dt, what)
    ptr = (t.data or 0) + t.byte_offset
    # The capsule is kept, unconsumed, while ckpt may read the memory: the producer's guarantee that it
    # stays valid; dropping it runs the producer's deleter (the capsule's destructor does).
    return Memory(ptr, shape, code, trailing, attr, dt, device, dev_id, capsule, "dlpack", alloc)


def _cuda_array_interface(obj, what):
    cai = obj.__cuda_array_interface__
    shape = tuple(int(n) for n in cai["shape"])
    dt = np.dtype(cai["typestr"])
    ptr, read_only = cai["data"]
    if cai.get("mask") is not None:
        raise error("invalid_argument", f"{what}: a masked CUDA array; protect its data and mask as two arrays")
    if read_only:
        raise error("invalid_argument", f"{what}: exported read-only; restart() writes into it")
    strides = cai.get("strides")  # in bytes (None: C-contiguous)
    alloc = None
    if strides is not None:
        alloc, why = _box_of(shape, strides, dt.itemsize)
        if why is not None:
            raise _refuse_strides(what, shape, strides, "", why)
    code, trailing, attr = storage(dt, what)
    return Memory(ptr or 0, shape, code, trailing, attr, dt, "cuda", -1, None, "cuda_array_interface", alloc)


def describe(obj, what):
    """The Memory of `obj`: a numpy array, else (device arrays first) a DLPack producer, else an object with
    __cuda_array_interface__. `what` starts the messages ("protect('u')")."""
    if isinstance(obj, np.ndarray):
        return _numpy(obj, what)
    if hasattr(obj, "__dlpack__"):
        return _dlpack(obj, what)
    if hasattr(obj, "__cuda_array_interface__"):
        return _cuda_array_interface(obj, what)
    if isinstance(obj, (int, float, complex, bool, np.generic)):
        raise error("invalid_argument",
                    f"{what}: a Python or numpy scalar ({type(obj).__name__}) cannot be written by restart(); protect "
                    "a 0-d array (np.zeros((), np.float64)) and update it in place (t[()] = 1.5, t += dt)")
    raise error("invalid_argument", f"{what}: a {type(obj).__name__}; ckpt takes numpy arrays and device arrays "
                                    "(DLPack or __cuda_array_interface__), C-contiguous or a row-major box of one")


def host_readable(ptr, nbytes):
    """Whether the first and last byte at `ptr` can be read by this process (the kernel answers, through a
    pipe: EFAULT for device memory, unmapped or PROT_NONE pages), without touching them from Python."""
    if nbytes == 0:
        return True
    r, w = os.pipe()
    try:
        for addr in (ptr, ptr + nbytes - 1):
            try:
                os.write(w, (ctypes.c_char * 1).from_address(addr))
                os.read(r, 1)
            except OSError:
                return False
        return True
    finally:
        os.close(r)
        os.close(w)


def stream_handle(stream, what):
    """The cudaStream_t (an integer, or None for the default stream) of `stream`: None, an integer, an object
    with __cuda_stream__ (the CUDA stream protocol: (version, handle)), a PyTorch stream (.cuda_stream), a
    CuPy stream (.ptr), a numba stream (.handle), or a ctypes.c_void_p."""
    if stream is None:
        return None
    if isinstance(stream, bool):
        raise error("invalid_argument", f"{what}: stream must be a CUDA stream or None, not a bool")
    if isinstance(stream, ctypes.c_void_p):
        return stream.value
    handle = None
    if isinstance(stream, (int, np.integer)):
        handle = int(stream)
    elif hasattr(stream, "__cuda_stream__"):
        handle = stream.__cuda_stream__()[1]
    elif hasattr(stream, "cuda_stream"):
        handle = stream.cuda_stream
    elif hasattr(stream, "ptr"):
        handle = stream.ptr
    elif hasattr(stream, "handle"):
        h = stream.handle
        handle = h.value if isinstance(h, ctypes.c_void_p) else h
    if handle is None and not isinstance(stream, (int, np.integer)):
        if any(hasattr(stream, a) for a in ("__cuda_stream__", "cuda_stream", "ptr", "handle")):
            return None  # the default stream, as the object says
        raise error("invalid_argument", f"{what}: stream {stream!r} is not a CUDA stream (an integer handle, an "
                                        "object with __cuda_stream__, .cuda_stream, .ptr or .handle) or None")
    try:
        handle = int(handle)
    except (TypeError, ValueError):
        raise error("invalid_argument", f"{what}: stream {stream!r} gives no integer handle") from None
    if handle < 0 or handle >= 1 << 64:
        raise error("invalid_argument", f"{what}: stream handle {handle} is not an address")
    return handle or None
