#!/usr/bin/env python3
"""Writes tests/data/cute_dsl_golden.txt: tensor maps in the form CuTe DSL's generated host code writes them.

CuTe DSL never calls cuTensorMapEncode*: its host code fills the 16 x i64 descriptor itself. This script transcribes
that code, qword by qword, from the CuteExpandOps pass dumps in NVIDIA/cutlass (examples/python/CuTeDSL), e.g.
  hopper/dense_gemm/dense_gemm_005_CuteExpandOps.mlir        (f16, rank 3, box 64x128, 128B swizzle: w2 0x46322)
  blackwell/fmha_bwd/fmha_bwd_005_CuteExpandOps.mlir         (f16, rank 4, box 64x128x1x1, 128B swizzle: w2 0x46332)
which, for every TMA atom, do:
  store 0 to qwords 0..15
  q0 = ((addr udiv 16) and (2^53 - 1)) shl 4
  q1 = 2 or (rank-1) shl 4 or dtype shl 7 or swizzle shl 13 or (l2 = 2) shl 17 or large shl 21
       or ((stride0 udiv 16) shl 32)                 large = (dim0 * bits / 8 + sum_i>=1 (dim_i - 1) * stride_i) >= 2^17
  q2 = ((stride1 udiv 16) and 0xffffffff) or ((stride2 udiv 16) shl 32)
  q3 = ((stride3 udiv 16) and 0xffffffff) or ((stride0 lshr 36) and 15) shl 32 or ((stride1 lshr 36) and 15) shl 36
       or ((stride2 lshr 36) and 15) shl 40 or (stride3 lshr 36) shl 44
  q4 = ((dim0 - 1) and 0xffffffff) or ((dim1 - 1) shl 32);  q5 likewise dims 2, 3;  q6 = (dim4 - 1) or (box0 - 1) shl 56
  q7 = (box1 - 1) or (box2 - 1) shl 8 or (box3 - 1) shl 16 or (box4 - 1) shl 24
Unused dims and boxes are 1, unused strides 0. The dtype codes seen in the dumps: f16 6, bf16 10, f32 7 (tf32: 7 with
bit 16), u8 0; swizzle codes 128B 3, 64B 2, none 0 (32B, code 1, follows the same field).
The C++ side (tests/core/test_forms.cpp) decodes every line and re-encodes it with encode_in_form(kCuteDsl); this
file is an independent transcription, so the two can disagree.

  python3 tests/data/gen_cute_dsl_golden.py > tests/data/cute_dsl_golden.txt
"""
import random

M64 = (1 << 64) - 1
HW = {"u8": (0, 0, 1, False), "f16": (6, 6, 2, False), "bf16": (9, 10, 2, False), "f32": (7, 7, 4, False),
      "tf32": (11, 7, 4, True)}  # name -> (CUtensorMapDataType, hardware code, bytes, tf32 bit)


def cute_fill(addr, hw, esize, tf32, dims, strides, box, swizzle, l2=2):
    rank = len(dims)
    d = list(dims) + [1] * (5 - rank)
    s = list(strides) + [0] * (4 - len(strides))
    b = list(box) + [1] * (5 - rank)
    q = [0] * 16
    q[0] = ((addr // 16) & ((1 << 53) - 1)) << 4
    span = d[0] * esize * 8 // 8 + sum((d[i] - 1) * s[i - 1] for i in range(1, 5))
    large = 1 if span >= 131072 else 0
    q[1] = (2 | (rank - 1) << 4 | hw << 7 | (1 << 16 if tf32 else 0) | swizzle << 13 | l2 << 17 | large << 21
            | ((s[0] // 16) << 32)) & M64
    q[2] = ((s[1] // 16) & 0xffffffff) | (((s[2] // 16) << 32) & M64)
    q[3] = (((s[3] // 16) & 0xffffffff) | ((s[0] >> 36) & 15) << 32 | ((s[1] >> 36) & 15) << 36
            | ((s[2] >> 36) & 15) << 40 | ((s[3] >> 36) << 44)) & M64
    q[4] = ((d[0] - 1) & 0xffffffff) | (((d[1] - 1) << 32) & M64)
    q[5] = ((d[2] - 1) & 0xffffffff) | (((d[3] - 1) << 32) & M64)
    q[6] = ((d[4] - 1) & 0xffffffff) | (((b[0] - 1) << 56) & M64)
    q[7] = (b[1] - 1) | (b[2] - 1) << 8 | (b[3] - 1) << 16 | (b[4] - 1) << 24
    return b"".join(x.to_bytes(8, "little") for x in q), large


def line(name, addr, dims, strides, box, swizzle, source):
    api, hw, esize, tf32 = HW[name]
    raw, large = cute_fill(addr, hw, esize, tf32, dims, strides, box, swizzle)
    return (f"tiled rc=0 dtype={api} rank={len(dims)} addr={addr:#x} dims={','.join(map(str, dims))} "
            f"strides={','.join(map(str, strides)) or '-'} box={','.join(map(str, box))} "
            f"es={','.join('1' * len(dims))} il=0 sw={swizzle} l2=2 oob=0 large={large} form=cute-dsl "
            f"source={source} map={raw.hex()}")


def bshd(b, s, h, d, esize=2):
    """torch (b, s, h, d) contiguous, as a TMA map: dims {d, s, h, b}, byte strides of dims 1..3."""
    return [d, s, h, b], [esize * h * d, esize * d, esize * s * h * d]


def main():
    out = ["# tensor maps in CuTe DSL's host-fill form (see gen_cute_dsl_golden.py for the formulas and the dumps "
           "they come from)"]
    # The dumps' own atoms.
    out.append(line("f16", 0x7f3a52000000, [1024, 512, 1], [2048, 1048576], [64, 128, 1], 3,
                    "hopper/dense_gemm/dense_gemm_005_CuteExpandOps.mlir"))
    out.append(line("f16", 0x7f3a52000000, [64, 32, 1], [128, 4096], [64, 128, 1], 3,
                    "hopper/dense_gemm/dense_gemm_005_CuteExpandOps.mlir"))
    dims, strides = bshd(2, 512, 4, 128)
    out.append(line("f16", 0x7f3a60000000, dims, strides, [64, 128, 1, 1], 3,
                    "blackwell/fmha_bwd/fmha_bwd_005_CuteExpandOps.mlir"))
    # FlashAttention-4's backward atoms (flash_bwd_sm100.py) for every head dim of its configuration table.
    src = "formulas;FA4_flash_bwd_sm100_atoms"
    for hd, inner, sw in ((64, 32, 2), (96, 16, 1), (128, 64, 3), (192, 32, 2), (256, 64, 3)):
        for name in ("bf16", "f16"):
            for s in (128, 4096):
                dims, strides = bshd(2, s, 4, hd)
                out.append(line(name, 0x7f0000000000 + hd * 0x100000, dims, strides, [inner, 128, 1, 1], sw, src))
                # the same memory seen seqlen-contiguous: a transposed dK
                t_dims = [dims[1], dims[0], dims[2], dims[3]]
                t_strides = [2 * s, 2 * s * hd, strides[2]]
                out.append(line(name, 0x7f0000000000 + hd * 0x100000, t_dims, t_strides, [inner, 128, 1, 1], sw, src))
    # Other ranks, types and swizzles, from a fixed seed.
    rng = random.Random(20261201)
    for _ in range(48):
        name = rng.choice(["u8", "f16", "bf16", "f32", "tf32"])
        esize = HW[name][2]
        rank = rng.randint(1, 5)
        sw = rng.choice([0, 1, 2, 3])
        span = {0: 256, 1: 32, 2: 64, 3: 128}[sw]
        inner = rng.choice([x for x in (4, 8, 16, 32, 64, 128, 256)
                            if x * esize % 16 == 0 and (sw == 0 or x * esize <= span)])
        dims = [rng.choice([inner, 2 * inner, 1024, 4096])]
        strides = []
        row = dims[0] * esize
        for _ in range(rank - 1):
            dims.append(rng.choice([1, 3, 64, 512, 8192] if row < (1 << 24) else [1, 3, 8]))
            pad = rng.choice([0, 16, 128])
            strides.append(row + pad)
            row = strides[-1] * dims[-1]
        assert all(s < (1 << 40) for s in strides)
        box = [inner] + [min(dims[i], rng.choice([1, 2, 8, 64, 128, 256])) for i in range(1, rank)]
        tile = esize
        for x in box:
            tile *= x
        if tile > 233472:
            box = [inner] + [1] * (rank - 1)
        addr = 0x7f0000000000 + rng.randrange(1 << 30) * 512
        out.append(line(name, addr, dims, strides, box, sw, "formulas;seeded"))
    print("\n".join(out))


if __name__ == "__main__":
    main()
