"""A paged KV cache with ragged context lengths whose total is exactly B·L, and Q query tokens
per sequence (its last Q tokens, already in the cache: the drafts being verified).

Lengths come in pairs L + d, L - d with d drawn uniformly from [-(3L//4), 3L//4] (an odd
batch's last sequence has length L), in a drawn order: every length lies in [L - 3L//4,
L + 3L//4], the sum (so the bytes a kernel must read) is fixed by the axes. Each sequence owns
MP = ceil((L + 3L//4) / P) pages of a pool of B·MP pages, at page ids drawn as a random
permutation of the pool; block_table[b, j] is the page holding tokens j·P .. j·P+P-1 of
sequence b. Entries past ceil(len/P) are valid page ids whose contents are garbage."""

import torch


def make_inputs(axes, generator):
    B, L, P, HQ, HKV, D, Q = (axes[a] for a in ("B", "L", "P", "HQ", "HKV", "D", "Q"))
    dev = generator.device
    spread = max(0, min(3 * L // 4, L - Q))  # every sequence holds at least its Q queries
    d = torch.randint(-spread, spread + 1, (B // 2,), generator=generator, device=dev)
    lens = torch.cat([L + d, L - d, torch.full((B % 2,), L, device=dev, dtype=d.dtype)])
    lens = lens[torch.randperm(B, generator=generator, device=dev)].to(torch.int32)
    MP = (L + 3 * L // 4 + P - 1) // P
    block_table = (
        torch.randperm(B * MP, generator=generator, device=dev).to(torch.int32).view(B, MP)
    )
    q = torch.empty(B, Q, HQ, D, dtype=torch.bfloat16, device=dev).normal_(generator=generator)
    k_cache = torch.empty(B * MP, P, HKV, D, dtype=torch.bfloat16, device=dev).normal_(
        generator=generator
    )
    v_cache = torch.empty(B * MP, P, HKV, D, dtype=torch.bfloat16, device=dev).normal_(
        generator=generator
    )
    return [q, k_cache, v_cache, block_table, lens]
