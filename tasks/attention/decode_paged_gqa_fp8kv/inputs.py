"""A paged fp8 KV cache with ragged context lengths whose total is exactly B·L.

Lengths come in pairs L + d, L - d with d drawn uniformly from [-(3L//4), 3L//4] (an odd
batch's last sequence has length L), in a drawn order: every length lies in [L - 3L//4,
L + 3L//4], the sum (so the bytes a kernel must read) is fixed by the axes. Each sequence owns
MP = ceil((L + 3L//4) / P) pages of a pool of B·MP pages, at page ids drawn as a random
permutation of the pool; block_table[b, j] is the page holding tokens j·P .. j·P+P-1 of
sequence b. Entries past ceil(len/P) are valid page ids whose contents are garbage. The cache
holds float8_e4m3fn values of N(0, 1)·24 (about 5 e4m3 binades used) with per-tensor scales
k_scale and v_scale drawn in [1/32, 1/16], so dequantized keys and values are of unit order."""

import torch


def make_inputs(axes, generator):
    B, L, P, HQ, HKV, D = (axes[a] for a in ("B", "L", "P", "HQ", "HKV", "D"))
    dev = generator.device
    spread = 3 * L // 4
    d = torch.randint(-spread, spread + 1, (B // 2,), generator=generator, device=dev)
    lens = torch.cat([L + d, L - d, torch.full((B % 2,), L, device=dev, dtype=d.dtype)])
    lens = lens[torch.randperm(B, generator=generator, device=dev)].to(torch.int32)
    MP = (L + spread + P - 1) // P
    block_table = (
        torch.randperm(B * MP, generator=generator, device=dev).to(torch.int32).view(B, MP)
    )
    q = torch.empty(B, HQ, D, dtype=torch.bfloat16, device=dev).normal_(generator=generator)
    k_cache = (torch.randn(B * MP, P, HKV, D, generator=generator, device=dev) * 24).to(
        torch.float8_e4m3fn
    )
    v_cache = (torch.randn(B * MP, P, HKV, D, generator=generator, device=dev) * 24).to(
        torch.float8_e4m3fn
    )
    scales = 1.0 / (16.0 + 16.0 * torch.rand((2, 1), generator=generator, device=dev))
    return [q, k_cache, v_cache, block_table, lens, scales[0].clone(), scales[1].clone()]
