"""The receiving side of a finished normal-mode dispatch, for one rank, drawn from this
rank's own seed: which tokens of each source rank this rank holds, in moe/dispatch's
canonical order, and the expert outputs for them.

Rank r holds token t of source rank s with probability p, independently: p = 1 − (1 − 1/W)^K
(the chance that a token's K uniformly routed experts touch r; S = 1), or p drawn per rank
from U[0.05, 1] (S = 2: imbalanced load, as hot experts cause). Rows from source s are its
held tokens in ascending order, sources in rank order; recv_rank_prefix is the inclusive prefix
sum of the per-source counts. Rows at and beyond n = recv_rank_prefix[W − 1] are garbage (random
x, random in-range token indices), as in a reused worst-case buffer: a kernel must use the
counts."""

import torch


def make_inputs(axes, generator):
    T, H, K, S, W = axes["T"], axes["H"], axes["K"], axes["S"], axes["W"]
    gen, dev = generator, generator.device
    if S == 2:
        p = 0.05 + 0.95 * float(torch.rand(1, generator=gen, device=dev))
    else:
        p = 1.0 - (1.0 - 1.0 / W) ** K
    held = torch.rand(W, T, generator=gen, device=dev) < p  # [source, token]
    counts = held.sum(dim=1)
    tokens = held.nonzero()[:, 1].to(torch.int32)  # source-major, ascending
    n = tokens.numel()
    x = torch.randn(W * T, H, generator=gen, device=dev).to(torch.bfloat16)
    src = torch.randint(0, T, (W * T,), generator=gen, device=dev, dtype=torch.int32)
    src[:n] = tokens
    prefix = torch.cumsum(counts, 0).to(torch.int32)
    return [x, src, prefix]
