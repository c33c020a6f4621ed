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

from tmaguard import _declare

FA4_MODULE = "flash_attn.cute.interface"
FA4_FUNCTIONS = ("_flash_attn_fwd", "_flash_attn_bwd")


def declaring(fn):
    """`fn` with its tensor arguments declared for each call, by parameter name. The signature is read once: a call
    costs the C extension's one pass over its arguments and one library call in and out (what is no PyTorch-like
    tensor, or cannot be read, as a fake or meta tensor under torch.compile's tracing, is left undeclared and the
    call runs as it would without tmaguard)."""
    if getattr(fn, "__tmaguard_declaring__", False):
        return fn
    api = _declare._functions()
    if api is None:
        return fn
    params = inspect.signature(fn).parameters.values()
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    names = []
    for p in params:  # the names of positional arguments in order, up to *args
        if p.kind not in positional:
            break
        names.append(p.name)
    names = tuple(names)
    keywords = frozenset(p.name for p in params if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                               inspect.Parameter.KEYWORD_ONLY))
    call_declared = api.call_declared

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return call_declared(fn, names, keywords, args, kwargs)

    wrapper.__tmaguard_declaring__ = True
    return wrapper


def watch(module=FA4_MODULE, functions=FA4_FUNCTIONS):
    """Wraps `functions` of `module` (FA4's by default); returns the names wrapped ([] when the module cannot be
    imported or tmaguard is not preloaded). Calling it twice wraps nothing twice."""
    if not _declare.active():
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
