"""MoE expert rows in torch._grouped_mm's ragged layout: a [M, K] holds the rows routed to
the experts, sorted by expert; offs [E] int32 holds the cumulative row counts (group g owns
rows offs[g-1] .. offs[g] - 1, offs[E - 1] = M).

Routing, vectorised (no Python loop over rows): exactly H = min(M, E - E // 8) groups are
non-empty (a random choice of groups; with E >= 8 at least one group is always empty, and
more when M < E), each gets one row, and the other M - H rows go to the non-empty groups by a
multinomial draw where the first max(1, H // 16) of them (the hot experts) weigh S times the
others: S = 1 is uniform routing, S = 50 sends ~77% of the rows of a 128-expert layer to 7
hot experts."""

import torch


def group_sizes(total: int, E: int, S: int, gen: torch.Generator) -> torch.Tensor:
    """int64 [E]: `total` units spread over exactly min(total, E - E // 8) groups."""
    dev = gen.device
    H = min(total, E - E // 8)
    used = torch.randperm(E, generator=gen, device=dev)[:H]
    weights = torch.ones(H, device=dev)
    weights[: max(1, H // 16)] = float(S)
    counts_used = torch.ones(H, dtype=torch.int64, device=dev)
    if total > H:
        extra = torch.multinomial(weights, total - H, replacement=True, generator=gen)
        counts_used += torch.bincount(extra, minlength=H)
    counts = torch.zeros(E, dtype=torch.int64, device=dev)
    counts[used] = counts_used
    return counts


def make_inputs(axes: dict[str, int], generator: torch.Generator) -> list:
    M, E, N, K, S = axes["M"], axes["E"], axes["N"], axes["K"], axes["S"]
    dev = generator.device
    counts = group_sizes(M, E, S, generator)
    offs = torch.cumsum(counts, 0).to(torch.int32)
    a = torch.randn((M, K), generator=generator, device=dev).to(torch.bfloat16)
    b = (torch.randn((E, N, K), generator=generator, device=dev) * 0.02).to(torch.bfloat16)
    return [a, b, offs]
