"""A PyTorch job whose custom autograd.Function launches an FA4-shaped backward kernel from its backward(), through
cuda-bindings (which releases the GIL around the driver call), on the autograd engine's own device thread. The kernel
(tests/gpu/fa4_kernels.cu, FlashAttention-4 SM100 backward's name and map signature) TMA-stores dK = 2K and dV = 4V.

    python3 callsite_autograd.py CUBIN healthy|dk_bad

Prints "AUTOGRAD dk=correct|wrong dv=correct|wrong thread=<name>" and exits 0 when the job ran. scripts/gpu-check's
`callsite` section runs it under tmaguard and checks that the violation names this file, FA4Bwd.backward and the
line marked LAUNCH.
"""
import ctypes
import sys
import threading

import torch
from cuda.bindings import driver as cu

NAME = b"kernel_cutlass_kernel_flash_attncuteflash_bwd_sm100FlashAttentionBackwardSm100_object_at__tmaguard_0"
B, S, H, D = 2, 256, 4, 128
TILE_S, THREADS, SMEM = 128, 128, 128 * 64 * 2 + 1024
BF16 = cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16


def ok(result):
    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"driver call failed: {err}")
    return rest[0] if len(rest) == 1 else rest


def tensor_map(t, seqlen_contiguous=False):
    """The map of a (b, s, h, d) bf16 tensor, K-major {d, s, h, b}; or the same memory seqlen-contiguous."""
    dims, strides = [D, S, H, B], [2 * H * D, 2 * D, 2 * S * H * D]
    if seqlen_contiguous:
        dims, strides = [S, D, H, B], [2 * S, 2 * S * D, 2 * S * H * D]
    u64 = lambda xs: [cu.cuuint64_t(x) for x in xs]  # noqa: E731 (cuda-bindings takes its own integer types in lists)
    u32 = lambda xs: [cu.cuuint32_t(x) for x in xs]  # noqa: E731
    return ok(cu.cuTensorMapEncodeTiled(BF16, 4, t.data_ptr(), u64(dims), u64(strides), u32([64, 128, 1, 1]),
                                        u32([1, 1, 1, 1]), cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
                                        cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
                                        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE))


class Kernel:
    def __init__(self, cubin):
        torch.zeros(1, device="cuda")  # PyTorch's context (the primary one) is current on this thread from here on
        with open(cubin, "rb") as f:
            self.image = f.read()
        self.module = ok(cu.cuModuleLoadData(self.image))
        self.function = ok(cu.cuModuleGetFunction(self.module, NAME))


def launch(stream, params, extra):
    ok(cu.cuLaunchKernel(FA4Bwd.kernel.function, S // TILE_S, H, B, THREADS, 1, 1, SMEM, stream, params, extra))  # LAUNCH


class FA4Bwd(torch.autograd.Function):
    kernel = None
    bad = False
    seen_thread = None

    @staticmethod
    def forward(ctx, q, k, v):
        ctx.save_for_backward(q, k, v)
        return (q.float().sum() + k.float().sum() + v.float().sum()).reshape(1)

    @staticmethod
    def backward(ctx, grad):
        q, k, v = ctx.saved_tensors
        FA4Bwd.seen_thread = threading.current_thread().name
        dk = torch.full_like(k, float("nan"))
        dv = torch.full_like(v, float("nan"))
        maps = [tensor_map(q), tensor_map(k), tensor_map(v), tensor_map(q),
                tensor_map(dv), tensor_map(dk, seqlen_contiguous=FA4Bwd.bad)]
        held = [ctypes.create_string_buffer(bytes(ctypes.string_at(m.getPtr(), 128)), 128) for m in maps]
        seqlen, scale, tail = ctypes.c_int(S), ctypes.c_float(1.0), ctypes.c_longlong(0)
        order = [seqlen, held[0], held[1], held[2], scale, held[3], held[4], held[5], tail]
        args = (ctypes.c_void_p * len(order))(*[ctypes.addressof(a) for a in order])
        raw_stream = torch.cuda.current_stream().cuda_stream
        as_tuple = ((S, maps[0], maps[1], maps[2], 1.0, maps[3], maps[4], maps[5], 0),
                    (ctypes.c_int, None, None, None, ctypes.c_float, None, None, None, ctypes.c_longlong))
        # cuda-bindings versions differ in the argument types they take: the first form it accepts launches (a refused
        # form raises TypeError while its arguments are converted, before the driver is called)
        errors = []
        for params, stream, extra in ((ctypes.addressof(args), cu.CUstream(raw_stream), 0),
                                      (ctypes.addressof(args), raw_stream, 0),
                                      (as_tuple, cu.CUstream(raw_stream), 0),
                                      (ctypes.addressof(args), cu.CUstream(raw_stream), None)):
            try:
                launch(stream, params, extra)
                break
            except TypeError as e:
                errors.append(str(e))
        else:
            raise TypeError(f"cuda-bindings took none of the launch forms: {errors}")
        torch.cuda.current_stream().synchronize()
        return None, dk, dv


def main():
    FA4Bwd.kernel = Kernel(sys.argv[1])
    FA4Bwd.bad = sys.argv[2] == "dk_bad"
    gen = torch.Generator(device="cuda").manual_seed(7)
    q, k, v = (torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(3))
    k.requires_grad_(True)
    v.requires_grad_(True)
    FA4Bwd.apply(q, k, v).sum().backward()
    torch.cuda.synchronize()
    dk_ok = torch.equal(k.grad, (k.detach().float() * 2).to(torch.bfloat16))
    dv_ok = torch.equal(v.grad, (v.detach().float() * 4).to(torch.bfloat16))
    print(f"AUTOGRAD dk={'correct' if dk_ok else 'wrong'} dv={'correct' if dv_ok else 'wrong'} "
          f"thread={FA4Bwd.seen_thread} main={threading.current_thread().name}", flush=True)


if __name__ == "__main__":
    main()
