"""Packed variable-length batch whose lengths total exactly B·S, each at least W.

Lengths come in pairs S + d, S - d with d drawn uniformly from [-m, m], m = min(S - W, S // 2)
(an odd batch's last sequence has length S), in a drawn order. Since every sequence is at
least W long, the number of attended (query, key) pairs, B·(S·W − W(W−1)/2), is fixed by the
axes. Sinks are drawn uniformly in [-1, 5]: from negligible to dominant next to ≤ W keys.
`window` is passed as the workload's W."""

import torch


def make_inputs(axes, generator):
    B, S, W, HQ, HKV, D = (axes[a] for a in ("B", "S", "W", "HQ", "HKV", "D"))
    dev = generator.device
    m = max(0, min(S - W, S // 2))
    d = torch.randint(-m, m + 1, (B // 2,), generator=generator, device=dev)
    lens = torch.cat([S + d, S - d, torch.full((B % 2,), S, device=dev, dtype=d.dtype)])
    lens = lens[torch.randperm(B, generator=generator, device=dev)]
    cu_seqlens = torch.zeros(B + 1, dtype=torch.int32, device=dev)
    cu_seqlens[1:] = torch.cumsum(lens, 0)
    q = torch.empty(B * S, HQ, D, dtype=torch.bfloat16, device=dev).normal_(generator=generator)
    k = torch.empty(B * S, HKV, D, dtype=torch.bfloat16, device=dev).normal_(generator=generator)
    v = torch.empty(B * S, HKV, D, dtype=torch.bfloat16, device=dev).normal_(generator=generator)
    sinks = torch.empty(HQ, dtype=torch.float32, device=dev).uniform_(
        -1.0, 5.0, generator=generator
    )
    return [q, k, v, sinks, cu_seqlens, W]
