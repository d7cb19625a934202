"""Packed variable-length batch (FlashAttention varlen convention).

The lengths are the ladder L·(1 + i mod K) for i < B, in an order drawn from the generator:
the multiset of lengths (so the work, the FLOP count and the timing) is fixed by the axes, the
order (which sequence is long, where it starts in the packed tensors) is random per seed."""

import torch


def make_inputs(axes, generator):
    B, L, K, HQ, HKV, D = (axes[a] for a in ("B", "L", "K", "HQ", "HKV", "D"))
    dev = generator.device
    steps = torch.arange(B, device=dev) % K + 1
    order = torch.randperm(B, generator=generator, device=dev)
    lengths = (steps[order] * L).to(torch.int32)
    cu_seqlens = torch.zeros(B + 1, dtype=torch.int32, device=dev)
    cu_seqlens[1:] = torch.cumsum(lengths, 0)
    T = L * ((B // K) * K * (K + 1) // 2 + (B % K) * (B % K + 1) // 2)
    q = torch.empty(T, HQ, D, dtype=torch.bfloat16, device=dev).normal_(generator=generator)
    k = torch.empty(T, HKV, D, dtype=torch.bfloat16, device=dev).normal_(generator=generator)
    v = torch.empty(T, HKV, D, dtype=torch.bfloat16, device=dev).normal_(generator=generator)
    return [q, k, v, cu_seqlens]
