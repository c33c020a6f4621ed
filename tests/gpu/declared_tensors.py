"""Tensor maps against the caller's tensors on a real GPU (tmaguard.declared). One case per process:

  declared_tensors.py view right|shape [declare [dlpack]]
      A Triton kernel copies q through a host TensorDescriptor with TMA loads. q is a transposed view of a contiguous
      (H, S, D) bf16 tensor, seen as (S, H, D). 'right' builds the descriptor from q's real strides, 'shape' from its
      shape as if it were contiguous (FA #2665's bug class: in bounds, accepted by the driver, wrong memory). With
      'declare' the launch runs inside tmaguard.declared(q=q, out=out) ('dlpack': q seen through __dlpack__ alone).
      Prints
      'VIEW map=... declared=... launched=... correct=... max_err=...'.
  declared_tensors.py spill [declare]
      A Triton kernel stores a (32, 256) uint8 tile at column 256 through a descriptor over buf[:, :466] of a zeroed
      (32, 512) buffer (Triton #11583). Prints 'SPILL declared=... launched=... past_extent=N' (bytes written at
      columns >= 466, which the view does not hold).
  declared_tensors.py stack NAME
      A real PyTorch stack (cuBLAS, cuBLASLt fp8, grouped GEMM, SDPA flash / cuDNN / efficient, a training step, flex
      attention, a Triton TMA matmul) with its tensors declared: every aten op's CUDA tensor arguments (a dispatch
      mode), or the kernel's own tensors where no aten op launches it. tmaguard.torch.watch() is on. Prints
      'STACK name=... status=ok watched=[...]'.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import tmaguard  # noqa: E402
import tmaguard.torch  # noqa: E402

DEV = "cuda"


class OnlyDLPack:
    """A tensor seen through __dlpack__ alone (as JAX or CuPy arrays are)."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, stream=None):
        return self.t.__dlpack__()


def view_case(which, declare, dlpack=False):
    import triton
    import triton.language as tl
    from triton.tools.tensor_descriptor import TensorDescriptor

    @triton.jit
    def copy_rows(src, dst, BS: tl.constexpr):
        s, h = tl.program_id(0), tl.program_id(1)
        dst.store([s * BS, h, 0], src.load([s * BS, h, 0]))

    H, S, D, BS = 4, 256, 64, 64
    torch.manual_seed(0)
    q = torch.randn(H, S, D, device=DEV, dtype=torch.bfloat16).transpose(0, 1)  # (S, H, D), strides (D, S*D, 1)
    out = torch.zeros(S, H, D, device=DEV, dtype=torch.bfloat16)
    strides = list(q.stride()) if which == "right" else [H * D, D, 1]  # 'shape': as if q were contiguous
    src = TensorDescriptor(q, list(q.shape), strides, [BS, 1, D])
    dst = TensorDescriptor.from_tensor(out, [BS, 1, D])
    launched, error = 1, ""
    try:
        if declare:
            with tmaguard.declared(q=OnlyDLPack(q) if dlpack else q, out=out):
                copy_rows[(S // BS, H)](src, dst, BS)
        else:
            copy_rows[(S // BS, H)](src, dst, BS)
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001  a launch tmaguard refused (reject mode)
        launched, error = 0, f"{type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
    err = (out.float() - q.float()).abs().max().item()
    print(f"VIEW map={which} declared={int(declare)} launched={launched} correct={torch.equal(out, q)} "
          f"max_err={err:.4f} error={error!r}", flush=True)


def spill_case(declare):
    import triton
    import triton.language as tl
    from triton.tools.tensor_descriptor import TensorDescriptor

    @triton.jit
    def store_tile(out_desc, BM: tl.constexpr, BN: tl.constexpr, COL: tl.constexpr):
        out_desc.store([0, COL], tl.full([BM, BN], 171, tl.uint8))

    buf = torch.zeros(32, 512, device=DEV, dtype=torch.uint8)
    view = buf[:, :466]
    desc = TensorDescriptor.from_tensor(view, [32, 256])
    launched, error = 1, ""
    try:
        if declare:
            with tmaguard.declared(out=view):
                store_tile[(1,)](desc, 32, 256, 256)
        else:
            store_tile[(1,)](desc, 32, 256, 256)
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001
        launched, error = 0, f"{type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
    past = int((buf[:, 466:] != 0).sum().item())
    inside = int((buf[:, 256:466] == 171).sum().item())
    print(f"SPILL declared={int(declare)} launched={launched} inside={inside} past_extent={past} error={error!r}",
          flush=True)


class DeclareArguments(torch.utils._python_dispatch.TorchDispatchMode):
    """Declares every CUDA tensor argument of each aten op (at most 16, tmaguard's per-thread table) around it."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        leaves = torch.utils._pytree.tree_leaves((args, kwargs))
        tensors = [t for t in leaves if isinstance(t, torch.Tensor) and t.is_cuda and t.numel() > 0][:16]
        with tmaguard.declared(**{f"{func.__name__[:20]}.{i}": t for i, t in enumerate(tensors)}):
            return func(*args, **kwargs)


def cublas():
    for m, n, k in ((4096, 4096, 4096), (8192, 1024, 2048), (128, 8192, 4096)):
        a = torch.randn(m, k, device=DEV, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=DEV, dtype=torch.bfloat16)
        with DeclareArguments():
            for _ in range(2):
                a @ b
                a @ b.t().contiguous().t()
                a[:, : k // 2] @ b[: k // 2]
    x = torch.randn(16, 512, 1024, device=DEV, dtype=torch.bfloat16)
    w = torch.randn(1024, 1024, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    with DeclareArguments():
        F.linear(x, w).sum().backward()
        torch.bmm(x, x.transpose(1, 2))


def cublas_fp8():
    m, n, k = 4096, 4096, 4096
    a = torch.randn(m, k, device=DEV).to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device=DEV).to(torch.float8_e4m3fn).t()
    one = torch.tensor(1.0, device=DEV)
    sa, sb = torch.ones(m, 1, device=DEV), torch.ones(1, n, device=DEV)
    with DeclareArguments():
        for _ in range(2):
            torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)


def grouped_mm():
    groups, m, n, k = 8, 512, 1024, 768
    a = torch.randn(groups * m, k, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(groups, n, k, device=DEV, dtype=torch.bfloat16).transpose(-2, -1)
    offs = torch.arange(m, groups * m + 1, m, device=DEV, dtype=torch.int32)
    a3 = torch.randn(groups, m, k, device=DEV, dtype=torch.bfloat16)
    with DeclareArguments():
        for _ in range(2):
            torch._grouped_mm(a, b, offs=offs)
            torch._grouped_mm(a3, b)


def sdpa():
    from torch.nn.attention import SDPBackend, sdpa_kernel
    for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION):
        qkv = torch.randn(2, 1024, 3, 8, 128, device=DEV, dtype=torch.bfloat16, requires_grad=True)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # views of one fused buffer, (B, H, S, D)
        with sdpa_kernel(backend), DeclareArguments():
            for _ in range(2):
                F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()


def training_step():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch_step
    sys.argv = [sys.argv[0], "5"]
    with DeclareArguments():
        torch_step.main()


def flex():
    from torch.nn.attention.flex_attention import flex_attention
    fn = torch.compile(flex_attention)
    q, k, v = (torch.randn(2, 8, 1024, 64, device=DEV, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    fn(q, k, v).sum().backward()  # compiled outside the declarations, then run inside them
    for _ in range(2):
        with tmaguard.declared(q=q, k=k, v=v):
            fn(q, k, v).sum().backward()


def triton_matmul():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import triton_tma
    from triton.tools.tensor_descriptor import TensorDescriptor
    M = N = K = 2048
    a = torch.randn(M, K, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(N, K, device=DEV, dtype=torch.bfloat16)
    c = torch.empty(M, N, device=DEV, dtype=torch.bfloat16)
    for _ in range(3):
        with tmaguard.declared(a=a, b=b, c=c):
            triton_tma.matmul_tma[(M // 128, N // 128)](TensorDescriptor.from_tensor(a, [128, 64]),
                                                        TensorDescriptor.from_tensor(b, [128, 64]),
                                                        TensorDescriptor.from_tensor(c, [128, 128]), K, 128, 128, 64)
    torch.cuda.synchronize()
    ref = a.float() @ b.float().T
    assert ((c.float() - ref).norm() / ref.norm()).item() < 1e-2


STACKS = {f.__name__: f for f in (cublas, cublas_fp8, grouped_mm, sdpa, training_step, flex, triton_matmul)}


def main():
    what = sys.argv[1]
    if what == "view":
        view_case(sys.argv[2], "declare" in sys.argv[3:], "dlpack" in sys.argv[3:])
    elif what == "spill":
        spill_case("declare" in sys.argv[2:])
    elif what == "stack":
        name = sys.argv[2]  # a stack may rewrite sys.argv (training_step runs torch_step.main())
        watched = tmaguard.torch.watch()
        STACKS[name]()
        torch.cuda.synchronize()
        print(f"STACK name={name} status=ok watched={watched}", flush=True)
    elif what == "list":
        print(" ".join(STACKS))


if __name__ == "__main__":
    main()
