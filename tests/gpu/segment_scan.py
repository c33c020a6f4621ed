"""Device memory a PyTorch job holds, searched for tensor maps after its kernels ran (GPU checks only).

segments(): every segment of PyTorch's caching allocator, copied back to the host, with its blocks and the Python
frames of their allocations (when the memory history recorded them). find_maps(): the CUtensorMaps in one copy, as
`tmaguard-tool find-maps` decodes them (any form). cudnn_descs(): the 64-byte TMA descriptors in cuDNN's own format
(the `cudaTmaDesc` of cuDNN's SDPA kernels: a global address, then a word whose bits 1-3 hold version 1), found
without tmaguard's decoder, each with the fields that format holds.
"""
import ctypes
import json
import os
import struct
import subprocess
import tempfile

import torch


def start(argv):
    """A search script's arguments (TMAGUARD_TOOL [ITERATIONS], default 3); records the allocator's memory history
    from here on, so that each block's allocation can be named."""
    torch.cuda.memory._record_memory_history(max_entries=100000)
    return argv[1], int(argv[2]) if len(argv) > 2 else 3


def segments():
    """Yields (base, size, raw bytes, blocks, traces) for each allocator segment; blocks: (address, size, state)."""
    snap = torch.cuda.memory._snapshot()
    traces = [e for dev in snap.get("device_traces", []) for e in dev]
    cuda = ctypes.CDLL("libcuda.so.1")
    cuda.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
    for seg in snap["segments"]:
        base, size = seg["address"], seg["total_size"]
        buf = ctypes.create_string_buffer(size)
        rc = cuda.cuMemcpyDtoH_v2(buf, base, size)
        if rc != 0:
            print(f"SEGMENT_NOTE segment 0x{base:x} size {size}: copy failed rc={rc}", flush=True)
            continue
        blocks, at = [], base
        for blk in seg.get("blocks", []):
            blocks.append((blk.get("address", at), blk["size"], blk.get("state", "?")))
            at = blocks[-1][0] + blk["size"]
        yield base, size, buf.raw, blocks, traces


def block_of(blocks, where):
    return next((b for b in blocks if b[0] <= where < b[0] + b[1]), None)


def frames_of(traces, block):
    """The Python frames of the last allocation recorded at this block's address (who asked for it)."""
    if not block:
        return []
    allocs = [e for e in traces if e.get("action") == "alloc" and e.get("addr") == block[0]]
    if not allocs:
        return []
    return [f"{fr.get('filename', '?').split('/')[-1]}:{fr.get('line', '?')}:{fr.get('name', '?')}"
            for fr in allocs[-1].get("frames", [])[:4]]


def find_maps(tool, raw, base):
    """tmaguard-tool find-maps over one segment's bytes: its JSON records (offset, tensor_map)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "seg.bin")
        with open(path, "wb") as f:
            f.write(raw)
        p = subprocess.run([tool, "find-maps", path, "--address", hex(base), "--json"], capture_output=True,
                           text=True, timeout=120)
    return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]


CUDNN_FORMATS = ["u8", "u16", "u32", "s32", "u64", "s64", "f16", "f32", "f32_ftz", "f64", "bf16"]


def cudnn_descs(raw, base, ranges):
    """64-byte-aligned windows in cuDNN's descriptor format whose address points into one of `ranges`
    ({name: (lo, hi)}): each as a dict of its fields. The format (tiled): u64 address; u32 word: bit 0 im2col,
    bits 1-3 version (1), 4-6 rank - 1, 7-10 element format, 11-12 interleave, 13-14 swizzle, 15 fill, 16 tf32,
    17-18 L2 promotion, the rest 0; u32 stride_lower[4] (stride >> 4, low 32 bits); u32 stride_upper (4 bits each);
    u32 size[5] (size - 1); u32 element strides - 1 (3 bits each) with box[0] - 1 in bits 24-31; u32 box[1..] - 1
    (8 bits each)."""
    out = []
    for off in range(0, len(raw) - 64 + 1, 64):
        addr, c1 = struct.unpack_from("<QI", raw, off)
        if addr == 0 or addr % 16 or (c1 >> 1) & 7 != 1 or c1 >> 19:
            continue
        name = next((nm for nm, (lo, hi) in ranges.items() if lo <= addr < hi), None)
        if not name:
            continue
        rank = ((c1 >> 4) & 7) + 1
        fmt = (c1 >> 7) & 15
        lower = struct.unpack_from("<4I", raw, off + 12)
        (upper,) = struct.unpack_from("<I", raw, off + 28)
        sizes = struct.unpack_from("<5I", raw, off + 32)
        trav, box_end = struct.unpack_from("<II", raw, off + 52)
        strides = [((((upper >> (4 * i)) & 15) << 32) | lower[i]) << 4 for i in range(rank - 1)]
        box = [((trav >> 24) & 255) + 1] + [((box_end >> (8 * (i - 1))) & 255) + 1 for i in range(1, rank)]
        out.append({"at": base + off, "points_into": name, "offset_in_tensor": addr - ranges[name][0],
                    "im2col": c1 & 1, "rank": rank,
                    "format": CUDNN_FORMATS[fmt] if fmt < len(CUDNN_FORMATS) else fmt,
                    "swizzle": (c1 >> 13) & 3, "dims": [s + 1 for s in sizes[:rank]], "strides_bytes": strides,
                    "box": box, "element_strides": [((trav >> (3 * i)) & 7) + 1 for i in range(rank)]})
    return out
