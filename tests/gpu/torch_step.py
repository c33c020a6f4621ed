"""A short PyTorch bf16 training step: linear layers (cuBLAS), scaled_dot_product_attention forward and backward,
AdamW. Prints 'TORCH ms_per_step=... losses=... checksum=...'."""
import hashlib
import sys
import time

import torch
import torch.nn.functional as F


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    torch.manual_seed(0)
    dev = "cuda"
    big = len(sys.argv) > 2 and sys.argv[2] == "big"
    B, S, H, D = (8, 4096, 16, 128) if big else (4, 1024, 8, 128)
    E = H * D
    qkv = torch.nn.Linear(E, 3 * E, device=dev, dtype=torch.bfloat16)
    proj = torch.nn.Linear(E, E, device=dev, dtype=torch.bfloat16)
    params = list(qkv.parameters()) + list(proj.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3)
    x = torch.randn(B, S, E, device=dev, dtype=torch.bfloat16)
    target = torch.randn(B, S, E, device=dev, dtype=torch.bfloat16)

    def step():
        q, k, v = qkv(x).view(B, S, 3, H, D).permute(2, 0, 3, 1, 4)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = proj(o.transpose(1, 2).reshape(B, S, E))
        loss = F.mse_loss(y.float(), target.float())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    losses = [step().item() for _ in range(3)]
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1e3 / steps
    losses.append(loss.item())
    h = hashlib.sha256()
    for p in params:
        h.update(p.detach().cpu().view(torch.int16).numpy().tobytes())
    print(f"TORCH ms_per_step={ms:.3f} losses={','.join(f'{l:.6f}' for l in losses)} checksum={h.hexdigest()[:16]}")


if __name__ == "__main__":
    main()
