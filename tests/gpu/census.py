"""One real workload per run, for the coverage census (scripts/gpu-census runs each under tmaguard's inspect mode).

  census.py WORKLOAD SEGMENTS_JSON

Writes the PyTorch caching allocator's segments (address, size) to SEGMENTS_JSON at the end, so the census can tell
a tensor map found inside a structure that points at real tensor memory from a false decode. Prints
'CENSUS workload=... status=ok' or 'status=unavailable: reason' (an API this PyTorch does not have)."""
import json
import sys

import torch
import torch.nn.functional as F

DEV = "cuda"


def cublas_bf16():
    for m, n, k in ((4096, 4096, 4096), (8192, 1024, 2048), (128, 8192, 4096)):
        a = torch.randn(m, k, device=DEV, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=DEV, dtype=torch.bfloat16)
        for _ in range(3):
            a @ b
            a @ b.t().contiguous().t()
    x = torch.randn(16, 512, 1024, device=DEV, dtype=torch.bfloat16)
    w = torch.randn(1024, 1024, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    F.linear(x, w).sum().backward()
    torch.bmm(x, x.transpose(1, 2))


def cublas_fp8():
    m, n, k = 4096, 4096, 4096
    a = torch.randn(m, k, device=DEV).to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device=DEV).to(torch.float8_e4m3fn).t()  # column-major K x N
    one = torch.tensor(1.0, device=DEV)
    for _ in range(3):
        torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)  # tensor-wise: cuBLAS
    sa = torch.ones(m, 1, device=DEV)
    sb = torch.ones(1, n, device=DEV)
    for _ in range(3):
        torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)  # row-wise: CUTLASS


def grouped_mm():
    groups, m, n, k = 8, 512, 1024, 768
    a = torch.randn(groups * m, k, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(groups, n, k, device=DEV, dtype=torch.bfloat16).transpose(-2, -1)
    offs = torch.arange(m, groups * m + 1, m, device=DEV, dtype=torch.int32)
    for _ in range(3):
        torch._grouped_mm(a, b, offs=offs)
    a3 = torch.randn(groups, m, k, device=DEV, dtype=torch.bfloat16)
    torch._grouped_mm(a3, b)  # 3D x 3D (batched)


def _sdpa(backend):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, k, v = (torch.randn(2, 8, 1024, 128, device=DEV, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    with sdpa_kernel(backend):
        for _ in range(3):
            F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()


def sdpa_cudnn():
    from torch.nn.attention import SDPBackend
    _sdpa(SDPBackend.CUDNN_ATTENTION)


def sdpa_flash():
    from torch.nn.attention import SDPBackend
    _sdpa(SDPBackend.FLASH_ATTENTION)


def flex_attention():
    from torch.nn.attention.flex_attention import flex_attention as flex
    fn = torch.compile(flex)
    q, k, v = (torch.randn(2, 8, 1024, 64, device=DEV, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    for _ in range(3):
        fn(q, k, v).sum().backward()


def inductor_tma():
    # a fresh compile cache: autotuning (every candidate, the persistent TMA templates included) runs in this process
    import os
    import tempfile
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="tg-census-")
    import torch._inductor.config as cfg
    cfg.triton.enable_persistent_tma_matmul = True
    cfg.max_autotune_gemm_backends = "TRITON"
    fn = torch.compile(lambda x, y: x @ y, mode="max-autotune-no-cudagraphs")
    a = torch.randn(2048, 2048, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(2048, 2048, device=DEV, dtype=torch.bfloat16)
    for _ in range(3):
        fn(a, b)


def triton_device():
    import triton
    import triton.language as tl

    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device=DEV))

    @triton.jit
    def scale2(x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
        xd = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
        yd = tl.make_tensor_descriptor(y_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
        pm, pn = tl.program_id(0) * BM, tl.program_id(1) * BN
        yd.store([pm, pn], xd.load([pm, pn]) * 2)

    x = torch.randn(1024, 1024, device=DEV, dtype=torch.bfloat16)
    y = torch.empty_like(x)
    for _ in range(3):
        scale2[(8, 8)](x, y, 1024, 1024, BM=128, BN=128)
    torch.cuda.synchronize()
    assert torch.equal(y, x * 2)


def triton_host():
    import os
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import triton_tma
    sys.argv = [sys.argv[0], "20", "2048"]
    triton_tma.main()


def torch_misc():
    # elementwise, reductions, normalisation, foreach optimizer steps: large by-value parameters, no tensor maps
    model = torch.nn.Sequential(*[torch.nn.Linear(512, 512) for _ in range(8)]).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), foreach=True)
    x = torch.randn(64, 512, device=DEV)
    for _ in range(3):
        y = F.layer_norm(model(x), (512,)).softmax(-1)
        (y.sum() + y.amax(0).mean() + torch.cumsum(y, 0).mean()).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
    torch.cat([x, x]).index_select(0, torch.arange(8, device=DEV)).sort(dim=-1)


WORKLOADS = {f.__name__: f for f in (cublas_bf16, cublas_fp8, grouped_mm, sdpa_cudnn, sdpa_flash, flex_attention,
                                     inductor_tma, triton_host, triton_device, torch_misc)}


def main():
    name = sys.argv[1]
    if name == "list":
        print(" ".join(WORKLOADS))
        return
    segments_path = sys.argv[2]
    torch.manual_seed(0)
    status = "ok"
    try:
        WORKLOADS[name]()
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001  an API or backend this stack does not offer
        status = f"unavailable: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    segs = [{"address": s["address"], "size": s["total_size"]} for s in torch.cuda.memory_snapshot()]
    with open(segments_path, "w") as f:
        json.dump({"workload": name, "status": status, "torch": torch.__version__, "segments": segs}, f)
    print(f"CENSUS workload={name} status={status}", flush=True)


if __name__ == "__main__":
    main()
