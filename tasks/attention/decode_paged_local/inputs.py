"""A paged KV cache where each sequence attends to a local span of its context, with exact
totals so the FLOP and byte formulas count the keys read.

C = 1, sliding window: lengths as in decode_paged_gqa (pairs L ± d, d ≤ 3L/4, Σ = B·L); each
sequence attends its last min(n, W) tokens: starts = max(0, n − W). Workloads keep W ≤ L/4
(every sequence longer than the window: B·W keys) or W ≥ 7L/4 (none is: B·L keys).
C = 2, chunked local attention (Llama-4): W is the chunk; each sequence has q whole chunks
before its own (q drawn in [0, (7L/4 − W) // W]) and a_b tokens in its current chunk, a_b in
pairs W/2 ± d (Σ a_b = B·(W // 2)): n = q·W + a_b, starts = q·W.
span = W, the most tokens any sequence attends (the window or the chunk), passed as an int.
Sinks (SK = 1): one logit per query head ~ N(0, 1), as gpt-oss learns; SK = 2: −inf (no sink).
Pages: every sequence owns MP = ceil(7L/4 / P) pages at random pool positions."""

import torch


def _pairs(center, spread, B, generator, dev):
    d = torch.randint(-spread, spread + 1, (B // 2,), generator=generator, device=dev)
    v = torch.cat([center + d, center - d, torch.full((B % 2,), center, device=dev, dtype=d.dtype)])
    return v[torch.randperm(B, generator=generator, device=dev)]


def make_inputs(axes, generator):
    B, L, P, HQ, HKV, D, W, C, SK = (
        axes[a] for a in ("B", "L", "P", "HQ", "HKV", "D", "W", "C", "SK")
    )
    dev = generator.device
    cap = L + 3 * L // 4
    if C == 1:
        lens = _pairs(L, 3 * L // 4, B, generator, dev)
        starts = (lens - W).clamp(min=0)
    else:
        inside = _pairs(W // 2, max(W // 2 - 1, 0), B, generator, dev).clamp(min=1)
        whole = torch.randint(0, max(cap - W, 0) // W + 1, (B,), generator=generator, device=dev)
        starts = whole * W
        lens = starts + inside
    MP = (cap + P - 1) // P
    block_table = (
        torch.randperm(B * MP, generator=generator, device=dev).to(torch.int32).view(B, MP)
    )
    q = torch.empty(B, HQ, D, dtype=torch.bfloat16, device=dev).normal_(generator=generator)
    k_cache = torch.empty(B * MP, P, HKV, D, dtype=torch.bfloat16, device=dev).normal_(
        generator=generator
    )
    v_cache = torch.empty(B * MP, P, HKV, D, dtype=torch.bfloat16, device=dev).normal_(
        generator=generator
    )
    if SK == 1:
        sinks = torch.randn(HQ, generator=generator, device=dev)
    else:
        sinks = torch.full((HQ,), float("-inf"), device=dev)
    return [
        q,
        k_cache,
        v_cache,
        block_table,
        lens.to(torch.int32),
        starts.to(torch.int32),
        sinks,
        W,
    ]
