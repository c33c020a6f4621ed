"""Where torch._grouped_mm keeps its per-group tensor maps. Runs PyTorch's CUTLASS grouped GEMM (the 2D x 3D MoE
form of grouped_mm.py), then copies every segment of PyTorch's caching allocator back to the host and lists the
tensor maps in them with `tmaguard-tool find-maps`: for each, the allocator block it sits in (its state and size,
and the Python frames of the allocation when the memory history has them) and which input or output tensor its
global address points into. Run without tmaguard (what is there), and under it (what the device audit saw is in the
census). Prints 'GROUPED_MAPS ...' per map found and one 'GROUPED_MAPS_SUMMARY ...'.

    python3 grouped_mm_maps.py TMAGUARD_TOOL [ITERATIONS]
"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grouped_mm  # noqa: E402  (the same operands and calls)
import segment_scan  # noqa: E402


def main():
    tool, iters = segment_scan.start(sys.argv)
    a, b, offs = grouped_mm.inputs()
    out = grouped_mm.run(a, b, offs, iters)
    tensors = {"a": a, "b": b, "out": out, "offs": offs}
    ranges = {name: (t.data_ptr(), t.data_ptr() + t.untyped_storage().nbytes()) for name, t in tensors.items()}

    found, scanned, n_segments = [], 0, 0
    for base, size, raw, blocks, traces in segment_scan.segments():
        n_segments += 1
        scanned += size
        # Decoder-free: 64-byte-aligned words holding an address inside a, b or out (a map's first word is its
        # global address), with the 128 bytes from there, whatever tmaguard makes of them.
        for off in range(0, size - 128 + 1, 64):
            (word,) = struct.unpack_from("<Q", raw, off)
            name = next((nm for nm, (lo, hi) in ranges.items() if nm != "offs" and lo <= word < hi), None)
            if name:
                print(f"GROUPED_RAW at=0x{base + off:x} points_into={name} bytes={raw[off:off + 128].hex()}",
                      flush=True)
        for rec in segment_scan.find_maps(tool, raw, base):
            where = base + rec["offset"]
            blk = segment_scan.block_of(blocks, where)
            addr = int(rec["tensor_map"]["address"], 16)
            points_into = next((name for name, (lo, hi) in ranges.items() if lo <= addr < hi), "none")
            found.append(rec)
            print(f"GROUPED_MAPS map_at=0x{where:x} block=0x{blk[0] if blk else 0:x}+{where - blk[0] if blk else 0} "
                  f"block_size={blk[1] if blk else 0} block_state={blk[2] if blk else '?'} "
                  f"dims={rec['tensor_map']['dims']} encoder={rec['tensor_map']['encoder']} "
                  f"address=0x{addr:x} points_into={points_into} frames={segment_scan.frames_of(traces, blk)}",
                  flush=True)
    into = {}
    for rec in found:
        addr = int(rec["tensor_map"]["address"], 16)
        name = next((nm for nm, (lo, hi) in ranges.items() if lo <= addr < hi), "none")
        into[name] = into.get(name, 0) + 1
    print(f"GROUPED_MAPS_SUMMARY segments={n_segments} bytes_scanned={scanned} maps={len(found)} "
          f"points_into={json.dumps(into, sort_keys=True)}", flush=True)


if __name__ == "__main__":
    main()
