"""tmaguard for PyTorch jobs: declare FlashAttention-4's tensors around each of its calls, with no change to user code.

    import tmaguard.torch
    tmaguard.torch.watch()   # before the first attention call

watch() wraps flash_attn.cute.interface's forward and backward functions (when that module is importable) so that
every tensor argument of a call is declared under its parameter's name (q, k, v, out, dout, lse, dq, dk, dv) for the
call's duration (tmaguard.declared). Without tmaguard preloaded it wraps nothing.
"""
import functools
import importlib
import inspect

from tmaguard._declare import active, declared, metadata

FA4_MODULE = "flash_attn.cute.interface"
FA4_FUNCTIONS = ("_flash_attn_fwd", "_flash_attn_bwd")


def _is_tensor(value):
    return hasattr(value, "data_ptr") and hasattr(value, "stride") and hasattr(value, "element_size")


def _readable(value):
    """Whether a tensor argument's metadata can be read: a fake or meta tensor (torch.compile's tracing) has no data
    pointer, and the call it is passed to must run as it would without tmaguard."""
    try:
        metadata(value)
        return True
    except Exception:  # noqa: BLE001 -- whatever the tensor type raises, the wrapped call is not ours to break
        return False


def declaring(fn):
    """`fn` with its tensor arguments declared for each call, by parameter name."""
    if getattr(fn, "__tmaguard_declaring__", False):
        return fn
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            bound = signature.bind_partial(*args, **kwargs)
        except TypeError:
            return fn(*args, **kwargs)  # the function's own error, unchanged
        tensors = {name: value for name, value in bound.arguments.items() if _is_tensor(value) and _readable(value)}
        with declared(**tensors):
            return fn(*args, **kwargs)

    wrapper.__tmaguard_declaring__ = True
    return wrapper


def watch(module=FA4_MODULE, functions=FA4_FUNCTIONS):
    """Wraps `functions` of `module` (FA4's by default); returns the names wrapped ([] when the module cannot be
    imported or tmaguard is not preloaded). Calling it twice wraps nothing twice."""
    if not active():
        return []
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return []
    wrapped = []
    for name in functions:
        fn = getattr(mod, name, None)
        if callable(fn):
            setattr(mod, name, declaring(fn))
            wrapped.append(name)
    return wrapped
