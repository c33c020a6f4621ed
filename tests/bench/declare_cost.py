"""What declaring tensors costs a Python job: a `with tmaguard.declared(...)` block and a call wrapped by
tmaguard.torch.watch(), with tmaguard preloaded (through its C extension, and through ctypes) against the same code
without it. Prints one line per figure; asserts nothing about time (ctest runs it short, as a smoke test).

    python3 declare_cost.py LIBTMAGUARD FAKE_DRIVER_DIR [--blocks N] [--runs R] [--torch]

FAKE_DRIVER_DIR is the stand-in driver's folder, or - for the machine's own driver (a GPU host).

Each figure is measured in a process of its own (LD_PRELOAD set or not), R runs of N blocks or calls, and the best
and the median run are printed in microseconds per block or call. The tensors are tensor-like objects (data_ptr(),
shape, stride(), element_size()), or with --torch PyTorch tensors on the GPU. The wrapped functions have
FlashAttention-4's signatures (flash_attn/cute/interface.py: _flash_attn_fwd with q, k, v and out; _flash_attn_bwd
with q, k, v, out, dout, lse, dq, dk, dv passed as FA4's own backward passes them) and do nothing.
"""
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))


class Tensor:
    """A tensor as PyTorch shows one."""

    def __init__(self, data, shape, strides):
        self._data, self.shape, self._strides = data, shape, strides

    def data_ptr(self):
        return self._data

    def stride(self):
        return self._strides

    def element_size(self):
        return 2


def make_tensors(n, torch_tensors):
    if torch_tensors:
        import torch
        base = torch.empty((2, 1024, 8, 128), dtype=torch.bfloat16, device="cuda")
        return [torch.empty_like(base) for _ in range(n)]
    return [Tensor(0x7f0000000000 + (i << 24), (2, 1024, 8, 128), (1048576, 1024, 128, 1)) for i in range(n)]


# FA4's signatures, abridged to the parameters a call passes (the rest keep their defaults)
def _flash_attn_fwd(q, k, v, cu_seqlens_q=None, cu_seqlens_k=None, seqused_q=None, seqused_k=None, page_table=None,
                    softmax_scale=None, causal=False, softcap=None, window_size_left=None, window_size_right=None,
                    learnable_sink=None, num_splits=1, pack_gqa=None, out=None, lse=None, return_lse=False):
    return out


def _flash_attn_bwd(q, k, v, out, dout, lse, softmax_scale=None, causal=False, softcap=0.0, window_size_left=None,
                    window_size_right=None, m_block_size=64, n_block_size=128, num_threads=256, pack_gqa=False,
                    num_stages_Q=2, num_stages_dO=2, SdP_swapAB=False, dKV_swapAB=False, dQ_swapAB=False,
                    AtomLayoutMSdP=2, AtomLayoutNdKV=2, AtomLayoutMdQ=2, V_in_regs=False, cu_seqlens_q=None,
                    cu_seqlens_k=None, seqused_q=None, seqused_k=None, deterministic=False, dq=None, dk=None, dv=None):
    return dq, dk, dv


def passing(fn):
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


def timed(fn, n, runs):
    """Per-call microseconds of each of `runs` runs of `n` calls of fn."""
    out = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        fn(n)
        out.append((time.perf_counter_ns() - start) / n / 1000.0)
    return out


def child(kind, blocks, runs, torch_tensors):
    """Measures one figure in this process and prints its runs as JSON."""
    import tmaguard
    import tmaguard.torch as tt
    if kind.endswith("_ctypes"):
        tmaguard._declare._load_speedups = lambda library: None
    t = make_tensors(9, torch_tensors)
    q, k, v, o, do, lse, dq, dk = t[:8]
    if kind.startswith("block4"):
        def loop(n):
            for _ in range(n):
                with tmaguard.declared(q=q, k=k, v=v, out=o):
                    pass
    elif kind.startswith("block8"):
        def loop(n):
            for _ in range(n):
                with tmaguard.declared(q=q, k=k, v=v, out=o, dout=do, lse=lse, dq=dq, dk=dk):
                    pass
    elif kind == "reads":  # what the extension asks of each tensor, asked from Python: the tensor type's own share
        def loop(n):
            for _ in range(n):
                q.data_ptr(), q.shape, q.stride(), q.element_size()
    elif kind.startswith("read_"):  # one of them alone
        read = {"read_data_ptr": lambda: q.data_ptr(), "read_shape": lambda: q.shape, "read_stride": lambda: q.stride(),
                "read_element_size": lambda: q.element_size(), "read_dtype": lambda: q.dtype,
                "read_nothing": lambda: None}[kind]

        def loop(n):
            for _ in range(n):
                read()
    elif kind.startswith("fwd") or kind.startswith("bwd"):
        fwd, bwd = _flash_attn_fwd, _flash_attn_bwd
        if kind.endswith("_wrapper"):  # a wrapper that declares nothing: what any *args, **kwargs wrapper costs
            fwd, bwd = passing(fwd), passing(bwd)
        elif "plain" not in kind:
            fwd, bwd = tt.declaring(fwd), tt.declaring(bwd)
        dv = t[8]
        if kind.startswith("fwd"):
            def loop(n):
                for _ in range(n):
                    fwd(q, k, v, None, None, None, None, None, 0.125, True, None, None, None, None, 1, None, out=o)
        else:
            def loop(n):
                for _ in range(n):
                    bwd(q, k, v, o, do, lse, 0.125, True, dq=dq, dk=dk, dv=dv)
    else:
        raise SystemExit(f"declare_cost: unknown figure {kind}")
    loop(1000)  # warm: the library initialised, the extension loaded, the code paths taken once
    print(json.dumps({"runs": timed(loop, blocks, runs), "backend": tmaguard._declare.backend()}))


def measure(kind, preload, lib, fake, blocks, runs, torch_tensors):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if preload:
        env.update(LD_PRELOAD=lib, TMAGUARD_MODE="log", TMAGUARD_LOG="/dev/null")
        if fake != "-":  # "-": the real driver
            env["LD_LIBRARY_PATH"] = fake + ":" + env.get("LD_LIBRARY_PATH", "")
    cmd = [sys.executable, os.path.abspath(__file__), "--child", kind, str(blocks), str(runs)]
    if torch_tensors:
        cmd.append("--torch")
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"declare_cost: {kind} failed ({out.returncode}): {out.stderr.strip()[-2000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    want = ("ctypes" if kind.endswith("_ctypes") else "speedups") if preload else None
    if result["backend"] != want:
        raise SystemExit(f"declare_cost: {kind} declared through {result['backend']}, not {want}")
    return min(result["runs"]), statistics.median(result["runs"])


def main(argv):
    if argv[:1] == ["--child"]:
        child(argv[1], int(argv[2]), int(argv[3]), "--torch" in argv)
        return
    import argparse
    parser = argparse.ArgumentParser(description="what declaring tensors costs a Python job")
    parser.add_argument("lib")
    parser.add_argument("fake_driver_dir")
    parser.add_argument("--blocks", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--torch", action="store_true")
    a = parser.parse_args(argv)
    lib, fake, blocks, runs, torch_tensors = a.lib, a.fake_driver_dir, a.blocks, a.runs, a.torch
    what = "torch tensors on the GPU" if torch_tensors else "tensor-like objects"
    print(f"declare_cost: {what}, {runs} runs of {blocks} blocks or calls per figure, us per block or call "
          f"(best / median run)")
    rows = []

    def fig(label, kind, preload):
        best, median = measure(kind, preload, lib, fake, blocks, runs, torch_tensors)
        rows.append((label, best, median))
        print(f"  {label:<54} {best:8.3f} {median:8.3f}", flush=True)
        return best

    bare4 = fig("declared(4 tensors) without tmaguard", "block4", False)
    fast4 = fig("declared(4 tensors), C extension", "block4", True)
    slow4 = fig("declared(4 tensors), ctypes", "block4_ctypes", True)
    bare8 = fig("declared(8 tensors) without tmaguard", "block8", False)
    fast8 = fig("declared(8 tensors), C extension", "block8", True)
    plain_f = fig("FA4 forward signature, unwrapped", "fwd_plain", True)
    fwd = fig("FA4 forward signature, watched (4 tensors)", "fwd", True)
    fwd_c = fig("FA4 forward signature, watched, ctypes", "fwd_ctypes", True)
    plain_b = fig("FA4 backward signature, unwrapped", "bwd_plain", True)
    bwd = fig("FA4 backward signature, watched (9 tensors)", "bwd", True)
    wrap_b = fig("FA4 backward signature, a wrapper declaring nothing", "bwd_wrapper", True)
    fig("one tensor's data_ptr(), shape, stride(), element_size() from Python", "reads", False)
    if torch_tensors:  # each read alone, and a tensor's dtype (the extension reads its itemsize there)
        nothing = fig("  a loop calling a lambda that reads nothing", "read_nothing", False)
        for read in ("data_ptr", "shape", "stride", "element_size", "dtype"):
            best, median = measure("read_" + read, False, lib, fake, blocks, runs, torch_tensors)
            print(f"  {'  ' + read + ', less the empty lambda':<54} {best - nothing:8.3f} {median - nothing:8.3f}")
    print("declare_cost: what tmaguard adds (best runs)")
    print(f"  a declared block of 4 tensors                 {fast4 - bare4:7.3f} us   (ctypes: {slow4 - bare4:.3f})")
    print(f"  each further tensor                           {((fast8 - bare8) - (fast4 - bare4)) / 4:7.3f} us")
    print(f"  a watched FA4 forward call                    {fwd - plain_f:7.3f} us   (ctypes: {fwd_c - plain_f:.3f})")
    print(f"  a watched FA4 backward call                   {bwd - plain_b:7.3f} us   (a wrapper alone: "
          f"{wrap_b - plain_b:.3f})")


if __name__ == "__main__":
    main(sys.argv[1:])
