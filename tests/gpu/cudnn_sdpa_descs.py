"""What cuDNN's SDPA kernels keep in device memory. Runs scaled_dot_product_attention forward and backward on the
cuDNN backend, then copies every segment of PyTorch's caching allocator back to the host (cuDNN's workspace comes from
it) and searches it twice: for CUtensorMaps (`tmaguard-tool find-maps`, any form) and for 64-byte descriptors in
cuDNN's own format (segment_scan.cudnn_descs), each pointing into one of the attention's tensors. Prints
'CUDNN_MAP ...' / 'CUDNN_DESC ...' per descriptor found and one 'CUDNN_SUMMARY ...'.

    python3 cudnn_sdpa_descs.py TMAGUARD_TOOL [ITERATIONS]
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import segment_scan  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402


def main():
    tool, iters = segment_scan.start(sys.argv)
    q, k, v = (torch.randn(2, 8, 1024, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn(2, 8, 1024, 128, device="cuda", dtype=torch.bfloat16)
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        for _ in range(iters):
            for t in (q, k, v):
                t.grad = None
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            out.backward(dout)
    torch.cuda.synchronize()
    tensors = {"q": q, "k": k, "v": v, "out": out, "dout": dout, "dq": q.grad, "dk": k.grad, "dv": v.grad}
    ranges = {n: (t.data_ptr(), t.data_ptr() + t.untyped_storage().nbytes()) for n, t in tensors.items()}
    maps, descs, scanned, n_segments = [], [], 0, 0
    for base, size, raw, blocks, traces in segment_scan.segments():
        n_segments += 1
        scanned += size
        for rec in segment_scan.find_maps(tool, raw, base):
            addr = int(rec["tensor_map"]["address"], 16)
            into = next((n for n, (lo, hi) in ranges.items() if lo <= addr < hi), "none")
            maps.append(into)
            print(f"CUDNN_MAP at=0x{base + rec['offset']:x} points_into={into} dims={rec['tensor_map']['dims']} "
                  f"encoder={rec['tensor_map']['encoder']}", flush=True)
        for d in segment_scan.cudnn_descs(raw, base, ranges):
            blk = segment_scan.block_of(blocks, d["at"])
            d["block_size"] = blk[1] if blk else 0
            d["frames"] = segment_scan.frames_of(traces, blk)
            descs.append(d)
            print(f"CUDNN_DESC {json.dumps(d)}", flush=True)
    count = {}
    for d in descs:
        count[d["points_into"]] = count.get(d["points_into"], 0) + 1
    print(f"CUDNN_SUMMARY segments={n_segments} bytes_scanned={scanned} tensor_maps={len(maps)} "
          f"cudnn_format_descs={len(descs)} points_into={json.dumps(count, sort_keys=True)} "
          f"out_sum={float(out.float().sum()):.4f}", flush=True)


if __name__ == "__main__":
    main()
