#!/usr/bin/env python3
"""Tensor maps built on the device, for the device-map audit (README: Device maps).

  python3 device_maps.py triton CASE [ITERS]   a Triton kernel that builds two descriptors with
                                               tl.make_tensor_descriptor (a's load map, out's store map), 8 programs:
        healthy      out = a, row-major: prints TRITON ... correct=1
        beyond       out's descriptor says 64x the rows out has (only the real rows are stored): a map that reaches
                     past its allocation (run with PYTORCH_NO_CUDA_MEMORY_CACHING=1 so that out is an allocation of
                     its own)
        transposed   out's store map sees out transposed (the kernel stores the block transposed): a layout only a
                     user rule knows is wrong
  python3 device_maps.py inductor [ITERS]      Inductor's persistent TMA matmul template (max-autotune)
  python3 device_maps.py sdpa [ITERS]          torch SDPA forward+backward (whatever backend the GPU picks; cuDNN's
                                               descriptors are not CUtensorMaps)
"""
import sys

import torch


def triton_case(case, iters):
    import triton
    import triton.language as tl

    scratch = []

    def alloc(size, alignment, stream):
        t = torch.empty(size, dtype=torch.int8, device="cuda")
        scratch.append(t)
        return t

    triton.set_allocator(alloc)

    @triton.jit
    def device_desc_kernel(a_ptr, out_ptr, M, OUT_ROWS, N: tl.constexpr, BM: tl.constexpr, TRANSPOSED: tl.constexpr):
        pid = tl.program_id(0)
        a = tl.make_tensor_descriptor(a_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, N])
        x = a.load([pid * BM, 0])
        if TRANSPOSED:
            out = tl.make_tensor_descriptor(out_ptr, shape=[N, M], strides=[M, 1], block_shape=[N, BM])
            out.store([0, pid * BM], tl.trans(x))
        else:
            out = tl.make_tensor_descriptor(out_ptr, shape=[OUT_ROWS, N], strides=[N, 1], block_shape=[BM, N])
            out.store([pid * BM, 0], x)

    M, N, BM = 1024, 64, 128
    a = torch.randn(M, N, device="cuda").to(torch.bfloat16)
    out = torch.empty(N, M, device="cuda", dtype=torch.bfloat16) if case == "transposed" else torch.empty_like(a)
    rows = 64 * M if case == "beyond" else M
    for _ in range(iters):
        device_desc_kernel[(M // BM,)](a, out, M, rows, N=N, BM=BM, TRANSPOSED=(case == "transposed"))
    torch.cuda.synchronize()
    ref = a.t() if case == "transposed" else a
    print(f"TRITON case={case} iters={iters} correct={int(torch.equal(out, ref))} scratch_bytes="
          f"{scratch[-1].numel() if scratch else 0}", flush=True)


def inductor(iters):
    # A fresh compile cache, so that autotuning runs (and with it every candidate, the persistent TMA templates
    # included) in this process rather than a cached winner alone.
    import os
    import tempfile
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="tg-inductor-")
    import torch._inductor.config as cfg
    cfg.max_autotune_gemm_backends = "TRITON"
    cfg.triton.enable_persistent_tma_matmul = True
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    f = torch.compile(lambda x, y: x @ y, mode="max-autotune-no-cudagraphs")
    for _ in range(iters):
        c = f(a, b)
    torch.cuda.synchronize()
    err = (c.float() - (a.float() @ b.float())).abs().max().item()
    print(f"INDUCTOR iters={iters} max_err={err:.4f} correct={int(err < 2.0)}", flush=True)


def sdpa(iters):
    q, k, v = (torch.randn(4, 16, 1024, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    for _ in range(iters):
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        o.sum().backward()
    torch.cuda.synchronize()
    print(f"SDPA iters={iters} grad_finite={int(bool(torch.isfinite(q.grad).all()))}", flush=True)


def main():
    what = sys.argv[1]
    if what == "triton":
        triton_case(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 6)
    elif what == "inductor":
        inductor(int(sys.argv[2]) if len(sys.argv) > 2 else 6)
    elif what == "sdpa":
        sdpa(int(sys.argv[2]) if len(sys.argv) > 2 else 6)
    else:
        sys.exit("unknown workload")


if __name__ == "__main__":
    main()
