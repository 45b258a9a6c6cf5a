"""Fake device arrays for the tests of ckpt.Runtime without a GPU: host memory (a numpy array) that says it
is on a CUDA device, through DLPack (__dlpack__ / __dlpack_device__, the capsule numpy itself makes, with
its device field rewritten) or through __cuda_array_interface__. A CPU build of libckpt reads every
pointer as host memory, so these round-trip; what they test is the Python layer: which device and device
id it sees, which producers and types it takes or refuses, that it keeps the producer's capsule until it
lets go of the array, and which stream it hands to the C API. Whether copies are really ordered on a CUDA
stream only a GPU can show (docs/api-python.md, "What a GPU still has to prove").

The DLPack structures are declared here again (not taken from ckpt._arrays), so that a wrong layout in the
package is not hidden by the same mistake in its test."""
import ctypes
import mmap
import weakref

import numpy as np

KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_OPENCL, KDL_METAL, KDL_ROCM, KDL_CUDA_MANAGED = 1, 2, 3, 4, 8, 10, 13
KDL_BFLOAT = 4


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_is_valid.restype = ctypes.c_int
_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _tensor_of(capsule):
    if _is_valid(capsule, b"dltensor_versioned"):
        return DLManagedTensorVersioned.from_address(_get_pointer(capsule, b"dltensor_versioned")).dl_tensor
    return DLManagedTensor.from_address(_get_pointer(capsule, b"dltensor")).dl_tensor


class FakeDLPackArray:
    """`host` exported through DLPack as memory of device (device_type, device_id). legacy: answers only the
    pre-1.0 protocol (no max_version; an unversioned "dltensor" capsule). data_ptr: another address to
    report (e.g. memory the host cannot read). dl_dtype: (code, bits) to report instead of host's type.
    dlpack_calls records the keyword arguments of every __dlpack__ call; exports holds a weak reference to
    the object each capsule keeps alive: it dies when the consumer lets go of the capsule."""

    def __init__(self, host, device_type=KDL_CUDA, device_id=0, legacy=False, data_ptr=None, dl_dtype=None):
        self.host = host
        self.device_type, self.device_id = device_type, device_id
        self.legacy, self.data_ptr, self.dl_dtype = legacy, data_ptr, dl_dtype
        self.dlpack_calls = []
        self.exports = []

    def __dlpack_device__(self):
        return (self.device_type, self.device_id)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        self.dlpack_calls.append({"stream": stream, "max_version": max_version})
        if self.legacy and max_version is not None:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        view = self.host.view()  # held by the capsule only: its weak reference tells when it is released
        self.exports.append(weakref.ref(view))
        capsule = view.__dlpack__() if max_version is None else view.__dlpack__(max_version=max_version)
        t = _tensor_of(capsule)
        t.device.device_type, t.device.device_id = self.device_type, self.device_id
        if self.data_ptr is not None:
            t.data, t.byte_offset = self.data_ptr, 0
        if self.dl_dtype is not None:
            t.dtype.code, t.dtype.bits = self.dl_dtype
        return capsule

    def live_exports(self):
        return sum(1 for w in self.exports if w() is not None)


class FakeCudaArray:
    """`host` exported through __cuda_array_interface__ (version 3) as CUDA memory; data_ptr, strides,
    typestr and read_only override what is reported."""

    def __init__(self, host, data_ptr=None, strides=None, typestr=None, read_only=False):
        self.host = host
        self.data_ptr, self.strides, self.typestr, self.read_only = data_ptr, strides, typestr, read_only

    @property
    def __cuda_array_interface__(self):
        ptr = self.host.__array_interface__["data"][0] if self.data_ptr is None else self.data_ptr
        return {"shape": self.host.shape, "typestr": self.typestr or self.host.dtype.str,
                "data": (ptr, self.read_only), "version": 3, "strides": self.strides, "stream": 1}


class Stream:
    """Stream objects as the libraries spell them: kind "cupy" (.ptr), "torch" (.cuda_stream), "numba"
    (.handle, a ctypes.c_void_p) or "protocol" (__cuda_stream__() -> (version, handle))."""

    def __init__(self, kind, handle):
        self.kind = kind
        if kind == "cupy":
            self.ptr = handle
        elif kind == "torch":
            self.cuda_stream = handle
        elif kind == "numba":
            self.handle = ctypes.c_void_p(handle)
        elif kind == "protocol":
            self.__cuda_stream__ = lambda: (0, handle)

    def __repr__(self):
        return f"Stream({self.kind!r})"


class Unreadable:
    """A page the process may not read (PROT_NONE), standing for GPU memory on a machine whose libckpt has
    no GPU device: its address, and close() to unmap it."""

    def __init__(self):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                              ctypes.c_long]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self._libc = libc
        self.address = libc.mmap(None, mmap.PAGESIZE, 0,  # PROT_NONE
                                 mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
        assert self.address not in (None, ctypes.c_void_p(-1).value), "mmap failed"

    def close(self):
        self._libc.munmap(self.address, mmap.PAGESIZE)
