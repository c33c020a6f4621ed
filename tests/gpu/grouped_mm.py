"""PyTorch's CUTLASS 3.x grouped GEMM (torch._grouped_mm, SM90): its kernel takes one Params struct holding the
tensor maps. Runs the 2D x 3D form (one matrix of stacked rows, one weight per group, the MoE shape) a number of
times and compares with a per-group matmul. Prints 'GROUPED_MM form=... max_rel_err=... correct=0|1'."""
import sys

import torch


GROUPS, M, N, K = 4, 256, 512, 384


def inputs():
    """The 2D x 3D operands: a (groups * m, k), b (groups, k, n) and the group ends."""
    torch.manual_seed(0)
    a = torch.randn(GROUPS * M, K, device="cuda", dtype=torch.bfloat16)
    # the weight stored (groups, n, k) and viewed (groups, k, n): K contiguous, as the kernel wants it
    b = torch.randn(GROUPS, N, K, device="cuda", dtype=torch.bfloat16).transpose(-2, -1)
    offs = torch.arange(M, GROUPS * M + 1, M, device="cuda", dtype=torch.int32)
    return a, b, offs


def run(a, b, offs, iters):
    out = None
    for _ in range(iters):
        out = torch._grouped_mm(a, b, offs=offs)
    torch.cuda.synchronize()
    return out


def main():
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    groups, m, n, k = GROUPS, M, N, K
    a, b, offs = inputs()
    out = run(a, b, offs, iters)
    ref = torch.cat([a[g * m:(g + 1) * m].float() @ b[g].float() for g in range(groups)])
    err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
    print(f"GROUPED_MM form=2d_3d groups={groups} m={m} n={n} k={k} iters={iters} max_rel_err={err:.2e} "
          f"correct={int(err < 2e-2)}", flush=True)


if __name__ == "__main__":
    main()
