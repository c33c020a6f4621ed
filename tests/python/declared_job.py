"""A Python job that declares a transposed view with tmaguard.declared and launches maps of it through ctypes (the
test client's library, libtg_client.so, against the stand-in driver). tests/shim/test_tensors.cpp runs it preloaded.

    python3 declared_job.py LIBTG_CLIENT CASE
    CASE: right | shape | past (declared around the launch) | undeclared (the shape-built map, nothing declared) |
          ended (declared, the block left, then the shape-built map) | absent (no tmaguard: the block is a no-op)
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


def main():
    lib = ctypes.CDLL(sys.argv[1])
    case = sys.argv[2]
    q = View()
    print(f"DECLARED active={tmaguard._declare.active()}", flush=True)
    if case in ("right", "shape", "past", "absent"):
        with tmaguard.declared(q=q, unused=None):
            rc = launch(lib, "q_" + ("shape" if case == "absent" else case))
    elif case == "undeclared":
        rc = launch(lib, "q_shape")
    elif case == "ended":
        with tmaguard.declared(q=q):
            pass
        rc = launch(lib, "q_shape")
    else:
        raise SystemExit(f"unknown case {case}")
    sys.exit(rc)


if __name__ == "__main__":
    main()
