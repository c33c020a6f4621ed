"""Declaring the tensors a call hands to its kernels (include/tmaguard/declare.h), from Python.

    with tmaguard.declared(q=q, k=k, v=v, out=o):
        out = attention(q, k, v, out=o)

Inside the block every tensor map whose global address lies in a declared tensor must walk that tensor's own
elements; one built from a view's shape as if it were contiguous is reported as map-tensor-mismatch and acted on by
the mode. Without tmaguard preloaded the block does nothing. A tensor is any object with data_ptr(), shape,
stride() (in elements) and element_size() (PyTorch), or with __cuda_array_interface__ or __array_interface__
(CuPy, Numba, NumPy), or with __dlpack__ (JAX, CuPy, TensorFlow: the capsule is read, not consumed).
"""
import contextlib
import ctypes
import threading

_MAX_RANK = 8  # TMAGUARD_MAX_RANK
_api = None
_looked = False
_local = threading.local()  # each thread's stack of declared blocks: lists of (name, tensor metadata)


def _functions():
    """tmaguard_declare_tensor and tmaguard_end_declaration of the preloaded library, or None without it."""
    global _api, _looked
    if not _looked:
        _looked = True
        try:
            process = ctypes.CDLL(None)
            declare, end = process.tmaguard_declare_tensor, process.tmaguard_end_declaration
        except (OSError, AttributeError):
            return None
        declare.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int64),
                            ctypes.POINTER(ctypes.c_int64), ctypes.c_int]
        declare.restype = ctypes.c_int
        end.argtypes, end.restype = [], None
        _api = (declare, end)
    return _api


def active():
    """Whether declarations reach tmaguard (the library is preloaded into this process)."""
    return _functions() is not None


def _interface_metadata(iface):
    """(data pointer, shape, strides in elements, element size) of an array interface dict."""
    data = iface["data"][0] if isinstance(iface.get("data"), tuple) else iface.get("data")
    shape = tuple(int(n) for n in iface["shape"])
    size = int(iface["typestr"][2:])
    strides = iface.get("strides")
    if strides is None:  # C-contiguous
        strides, step = [], 1
        for n in reversed(shape):
            strides.insert(0, step)
            step *= max(n, 1)
    else:
        if any(int(s) % size for s in strides):
            raise ValueError("a stride that is not a whole number of elements")
        strides = [int(s) // size for s in strides]
    return int(data or 0), shape, tuple(strides), size


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):  # dlpack.h's DLTensor, the first member of DLManagedTensor(Versioned)
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


def _dlpack_metadata(tensor):
    """(data pointer, shape, strides in elements, element size) of an object with __dlpack__ (JAX, CuPy, TensorFlow,
    MLX...). The capsule is read and left unconsumed: its own destructor releases the tensor, as the protocol says
    for a capsule nobody took."""
    capsule = tensor.__dlpack__()
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.argtypes, get.restype = [ctypes.py_object, ctypes.c_char_p], ctypes.c_void_p
    valid = ctypes.pythonapi.PyCapsule_IsValid
    valid.argtypes, valid.restype = [ctypes.py_object, ctypes.c_char_p], ctypes.c_int
    if valid(capsule, b"dltensor"):
        address = get(capsule, b"dltensor")
    elif valid(capsule, b"dltensor_versioned"):  # DLManagedTensorVersioned: version (8 bytes), manager, deleter, flags
        address = get(capsule, b"dltensor_versioned") + 8 + 3 * ctypes.sizeof(ctypes.c_void_p)
    else:
        raise TypeError("__dlpack__() returned no DLPack capsule")
    t = _DLTensor.from_address(address)
    size = t.dtype.bits * t.dtype.lanes // 8
    if size == 0:
        raise ValueError("an element of less than one byte")
    shape = tuple(t.shape[i] for i in range(t.ndim))
    if t.strides:
        strides = tuple(t.strides[i] for i in range(t.ndim))
    else:  # NULL strides: C-contiguous
        strides, step = [], 1
        for n in reversed(shape):
            strides.insert(0, step)
            step *= max(n, 1)
        strides = tuple(strides)
    return (t.data or 0) + t.byte_offset, shape, strides, size


def metadata(tensor):
    """(data pointer, shape, strides in elements, element size) of a tensor-like object."""
    if hasattr(tensor, "data_ptr") and hasattr(tensor, "stride") and hasattr(tensor, "element_size"):
        return (int(tensor.data_ptr()), tuple(int(n) for n in tensor.shape), tuple(int(s) for s in tensor.stride()),
                int(tensor.element_size()))
    for attr in ("__cuda_array_interface__", "__array_interface__"):
        iface = getattr(tensor, attr, None)
        if isinstance(iface, dict):
            return _interface_metadata(iface)
    if hasattr(tensor, "__dlpack__"):
        return _dlpack_metadata(tensor)
    raise TypeError(f"{type(tensor).__name__} has neither data_ptr()/stride()/element_size(), an array interface nor "
                    "__dlpack__")


def _declare_all(entries):
    declare, end = _functions()
    end()
    for name, (data, shape, strides, size) in entries:
        rank = len(shape)
        if rank > _MAX_RANK:
            continue  # tmaguard would refuse it; the map is judged as undeclared
        shape_arr = (ctypes.c_int64 * max(rank, 1))(*shape)
        stride_arr = (ctypes.c_int64 * max(rank, 1))(*strides)
        declare(name.encode("utf-8", "replace")[:31], data, rank, shape_arr, stride_arr, size)


@contextlib.contextmanager
def declared(**tensors):
    """Declares these tensors (keyword: the name findings use) for the calling thread for the block's duration. A
    value of None is skipped; blocks nest (the inner one adds to the outer one's tensors)."""
    if _functions() is None:
        yield
        return
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    mine = [(name, metadata(t)) for name, t in tensors.items() if t is not None]
    stack.append(mine)
    try:
        _declare_all([e for block in stack for e in block])
        yield
    finally:
        stack.pop()
        _declare_all([e for block in stack for e in block])
