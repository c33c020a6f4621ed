#!/usr/bin/env python3
"""Captures the descriptors Triton builds on the device (tl.make_tensor_descriptor): the kernel writes them into the
global scratch buffer its allocator hands out, one copy per program; after the kernel they are read back. Prints one
golden line per distinct descriptor (tests/data/device_built_h200.txt's format) and a SCRATCH summary line.

  python3 triton_device_desc.py
"""
import torch
import triton
import triton.language as tl

scratch = []


def alloc(size, alignment, stream):
    t = torch.empty(size, dtype=torch.int8, device="cuda")
    scratch.append(t)
    return t


@triton.jit
def scale_kernel(a_ptr, b_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    a = tl.make_tensor_descriptor(a_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    b = tl.make_tensor_descriptor(b_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    x = a.load([pid * BM, 0])
    b.store([pid * BM, 0], x * 2)


def capture(dtype, api_dtype, esize, M, N, BM, BN):
    scratch.clear()
    a = torch.randn(M, N, device="cuda").to(dtype)
    b = torch.empty_like(a)
    programs = M // BM
    scale_kernel[(programs,)](a, b, M, N, BM=BM, BN=BN)
    torch.cuda.synchronize()
    ok = torch.equal(b[:, :BN].float(), (a[:, :BN].float() * 2))
    raw = bytes(scratch[-1].cpu().numpy().tobytes())
    lines, seen = [], set()
    for off in range(0, len(raw) - 127, 128):
        w = raw[off:off + 128]
        if w in seen or not any(w):
            continue
        seen.add(w)
        addr = int.from_bytes(w[0:8], "little")
        which = "a" if addr == a.data_ptr() else "b" if addr == b.data_ptr() else "?"
        sw = (int.from_bytes(w[8:12], "little") >> 13) & 3  # Triton's choice of swizzle, as stored
        lines.append(f"tiled rc=0 dtype={api_dtype} rank=2 addr={addr:#x} dims={N},{M} strides={N * esize} "
                     f"box={BN},{BM} es=1,1 il=0 sw={sw} l2=0 oob=0 form=device "
                     f"source=triton-{triton.__version__}_make_tensor_descriptor_{which}_program_copy_at_{off} "
                     f"map={w.hex()}")
    print(f"SCRATCH dtype={dtype} bytes={len(raw)} programs={programs} distinct={len(seen)} kernel_correct={ok}",
          flush=True)
    return lines


def main():
    triton.set_allocator(alloc)
    out = []
    out += capture(torch.bfloat16, 9, 2, 256, 128, 32, 64)
    out += capture(torch.float32, 7, 4, 64, 64, 16, 32)
    out += capture(torch.float16, 6, 2, 128, 256, 64, 64)
    print("\n".join(out))


if __name__ == "__main__":
    main()
