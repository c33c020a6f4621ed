"""Declaring the tensors a call hands to its kernels (include/tmaguard/declare.h), from Python.

    with tmaguard.declared(q=q, k=k, v=v, out=o):
        out = attention(q, k, v, out=o)

Inside the block every tensor map whose global address lies in a declared tensor must walk that tensor's own
elements; one built from a view's shape as if it were contiguous is reported as map-tensor-mismatch and acted on by
the mode. Without tmaguard preloaded the block does nothing. A tensor is any object with data_ptr(), shape,
stride() (in elements) and element_size() (PyTorch), or with __cuda_array_interface__ or __array_interface__
(CuPy, Numba, NumPy), or with __dlpack__ (JAX, CuPy, TensorFlow: the capsule is read, not consumed).

A block costs one call into the library on entry and one on exit (tmaguard_declare_tensors, then
tmaguard_end_declaration_to: the outer block's declarations come back at once). The calls are made by the C extension
installed beside the preloaded library (LIBDIR/tmaguard/python/_speedups.abi3.so, CPython 3.8 and later), or through
ctypes where it cannot be loaded (backend() says which).
"""
import ctypes
import importlib.machinery
import importlib.util
import os

_MAX_RANK = 8  # TMAGUARD_MAX_RANK
_MAX_DECLARED = 16  # TMAGUARD_MAX_DECLARED
_api = None  # the backend: _speedups (the C extension) or _CtypesBackend; None without tmaguard
_backend_name = None
_looked = False


def _library_path(address):
    """The file mapped at `address` in this process (/proc/self/maps), or None."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split(None, 5)
                lo, hi = (int(x, 16) for x in fields[0].split("-"))
                if lo <= address < hi and len(fields) == 6:
                    return fields[5].strip()
    except (OSError, ValueError):
        pass
    return None


def _load_speedups(library):
    """The C extension installed beside `library` (LIBDIR/tmaguard/python/), or None where it cannot be loaded."""
    if not library:
        return None
    return _load_extension(os.path.join(os.path.dirname(library), "tmaguard", "python", "_speedups.abi3.so"))


def _load_extension(path):
    """The C extension at `path`, or None where it cannot be loaded."""
    if not os.path.isfile(path):
        return None
    try:
        loader = importlib.machinery.ExtensionFileLoader("tmaguard._speedups", path)
        spec = importlib.util.spec_from_file_location("tmaguard._speedups", path, loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        return module
    except (ImportError, OSError):  # another Python implementation, or a damaged file: ctypes does the same work
        return None


def _functions():
    """The backend that declares to the preloaded library, or None without it."""
    global _api, _backend_name, _looked
    if not _looked:
        _looked = True
        try:
            process = ctypes.CDLL(None)
            declare, end = process.tmaguard_declare_tensors, process.tmaguard_end_declaration_to
        except (OSError, AttributeError):
            return None
        declare.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
        declare.restype = ctypes.c_int
        end.argtypes, end.restype = [ctypes.c_int], None
        addresses = [ctypes.cast(f, ctypes.c_void_p).value for f in (declare, end)]
        speedups = _load_speedups(_library_path(addresses[0]))
        if speedups is not None:
            speedups.bind(addresses[0], addresses[1], metadata)
            _api, _backend_name = speedups, "speedups"
        else:
            _api, _backend_name = _CtypesBackend(declare, end), "ctypes"
    return _api


def active():
    """Whether declarations reach tmaguard (the library is preloaded into this process)."""
    return _functions() is not None


def backend():
    """How declarations reach the library: "speedups" (the C extension), "ctypes", or None without tmaguard."""
    _functions()
    return _backend_name


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


class _Tensor(ctypes.Structure):  # declare.h's tmaguard_tensor
    _fields_ = [("name", ctypes.c_char_p), ("data", ctypes.c_void_p), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("rank", ctypes.c_int), ("element_size", ctypes.c_int)]


def _torch_like(value):
    return hasattr(value, "data_ptr") and hasattr(value, "stride") and hasattr(value, "element_size")


class _CtypesBackend:
    """What the C extension does, in Python: the same two library calls per block, the metadata read here."""

    def __init__(self, declare, end):
        self._declare, self.end = declare, end

    def _declare_entries(self, entries):
        entries = [(n, m) for n, m in entries if len(m[1]) <= _MAX_RANK]  # the library would refuse it: undeclared
        array = (_Tensor * max(len(entries), 1))()
        keep = []
        for slot, (name, (data, shape, strides, size)) in zip(array, entries):
            shape_arr = (ctypes.c_int64 * max(len(shape), 1))(*shape)
            stride_arr = (ctypes.c_int64 * max(len(shape), 1))(*strides)
            keep += [shape_arr, stride_arr]
            slot.name, slot.data, slot.rank, slot.element_size = name.encode("utf-8", "replace"), data, len(shape), size
            slot.shape, slot.strides = shape_arr, stride_arr
        depth = ctypes.c_int(0)
        self._declare(array, len(entries), ctypes.byref(depth))
        return depth.value

    def declare(self, tensors):
        return self._declare_entries([(n, metadata(t)) for n, t in tensors.items() if t is not None])

    def declare_call(self, names, keywords, args, kwargs):
        named = list(zip(names, args)) + [(k, v) for k, v in (kwargs or {}).items() if k in keywords]
        entries = []
        for name, value in named:
            if _torch_like(value):
                try:
                    entries.append((name, metadata(value)))
                except Exception:  # noqa: BLE001 -- a fake or meta tensor: the call runs as it would without tmaguard
                    pass
        return self._declare_entries(entries)

    def call_declared(self, fn, names, keywords, args, kwargs):
        depth = self.declare_call(names, keywords, args, kwargs)
        try:
            return fn(*args, **kwargs)
        finally:
            self.end(depth)


class declared:
    """Declares these tensors (keyword: the name findings use) for the calling thread for the block's duration. A
    value of None is skipped; blocks nest (the inner one adds to the outer one's tensors, and its exit restores
    them)."""

    __slots__ = ("_tensors", "_depth")

    def __init__(self, **tensors):
        self._tensors = tensors
        self._depth = None

    def __enter__(self):
        api = _api if _looked else _functions()
        if api is not None:
            self._depth = api.declare(self._tensors)

    def __exit__(self, *exc):
        if self._depth is not None:
            _api.end(self._depth)
            self._depth = None
        return False
