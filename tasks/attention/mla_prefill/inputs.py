"""MLA prefill's packed variable-length batch (FlashAttention varlen convention), after the
up-projection: q and k [T, H, DQK] (each head's nope dims then the shared rope dims), v
[T, H, DV]. The lengths are the ladder L·(1 + i mod K) for i < B in a drawn order (the work is
fixed by the axes, the layout random per seed). The softmax scale, a one-element float32
tensor (read on the device, as vLLM passes its k and v scales), is drawn per call in
[DQK^-0.5, 2·DQK^-0.5]: the models' scales lie there (DeepSeek-V3's is DQK^-0.5 times YaRN's
mscale², 1.87), and a kernel must take the one it is given."""

import torch


def make_inputs(axes, generator):
    B, L, K, H, DQK, DV = (axes[a] for a in ("B", "L", "K", "H", "DQK", "DV"))
    dev = generator.device
    steps = torch.arange(B, device=dev) % K + 1
    order = torch.randperm(B, generator=generator, device=dev)
    lengths = (steps[order] * L).to(torch.int32)
    cu_seqlens = torch.zeros(B + 1, dtype=torch.int32, device=dev)
    cu_seqlens[1:] = torch.cumsum(lengths, 0)
    T = L * ((B // K) * K * (K + 1) // 2 + (B % K) * (B % K + 1) // 2)
    q = torch.empty(T, H, DQK, dtype=torch.bfloat16, device=dev).normal_(generator=generator)
    k = torch.empty(T, H, DQK, dtype=torch.bfloat16, device=dev).normal_(generator=generator)
    v = torch.empty(T, H, DV, dtype=torch.bfloat16, device=dev).normal_(generator=generator)
    scale = (1.0 + torch.rand(1, generator=generator, device=dev)) * DQK**-0.5
    return [q, k, v, cu_seqlens, scale]
