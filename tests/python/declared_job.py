"""A Python job that declares a transposed view with tmaguard.declared and launches maps of it through ctypes (the
test client's library, libtg_client.so, against the stand-in driver). tests/processes/test_tensors.cpp runs it preloaded.

    python3 declared_job.py LIBTG_CLIENT CASE [ctypes]
    CASE: right | shape | past (declared around the launch) | undeclared (the shape-built map, nothing declared) |
          ended (declared, the block left, then the shape-built map) | absent (no tmaguard: the block is a no-op) |
          nested (q declared by an outer block, an inner block declares and leaves another tensor, then the
          shape-built map) | watched (a function wrapped by tmaguard.torch.watch() gets q as its first argument and
          makes the shape-built launch) | watched_fake (the same with q's data_ptr() raising, as a fake tensor's does)
    ctypes: the helper declares through ctypes, as where its C extension cannot be loaded
"""
import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import tmaguard  # noqa: E402


class View:
    """q as PyTorch shows a transposed view: (B, S, H, D) = (2, 128, 4, 64) bf16 over a (B, H, S, D) buffer."""
    shape = (2, 128, 4, 64)

    def data_ptr(self):
        return 0x7f0000000000

    def stride(self):
        return (32768, 64, 8192, 1)

    def element_size(self):
        return 2


def launch(lib, scenario):
    argv = [b"tg_client", b"getproc", b"launch", scenario.encode()]
    return lib.tg_client_run(len(argv), (ctypes.c_char_p * len(argv))(*argv))


class FakeView(View):
    def data_ptr(self):
        raise RuntimeError("Cannot access data pointer of Tensor that doesn't have storage")


def watched_call(lib, q):
    """A module function with FA4's first parameters, wrapped by watch(), launching the shape-built map of q."""
    import types
    import tmaguard.torch

    module = types.ModuleType("declared_job_attention")

    def _flash_attn_fwd(q, k=None, v=None, softmax_scale=None, out=None):
        return launch(lib, "q_shape")

    module._flash_attn_fwd = _flash_attn_fwd
    sys.modules[module.__name__] = module
    print(f"WATCHED {tmaguard.torch.watch(module.__name__)}", flush=True)
    return module._flash_attn_fwd(q, softmax_scale=0.5)


def main():
    lib = ctypes.CDLL(sys.argv[1])
    case = sys.argv[2]
    if sys.argv[3:] == ["ctypes"]:
        tmaguard._declare._load_speedups = lambda library: None
    q = View()
    print(f"DECLARED active={tmaguard._declare.active()} backend={tmaguard._declare.backend()}", flush=True)
    if case in ("right", "shape", "past", "absent"):
        with tmaguard.declared(q=q, unused=None):
            rc = launch(lib, "q_" + ("shape" if case == "absent" else case))
    elif case == "undeclared":
        rc = launch(lib, "q_shape")
    elif case == "ended":
        with tmaguard.declared(q=q):
            pass
        rc = launch(lib, "q_shape")
    elif case == "nested":
        with tmaguard.declared(q=q):
            with tmaguard.declared(other=View()):
                pass
            rc = launch(lib, "q_shape")
    elif case == "watched":
        rc = watched_call(lib, q)
    elif case == "watched_fake":
        rc = watched_call(lib, FakeView())
    else:
        raise SystemExit(f"unknown case {case}")
    sys.exit(rc)


if __name__ == "__main__":
    main()
