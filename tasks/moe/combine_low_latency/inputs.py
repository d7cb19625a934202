"""The expert side of a finished low-latency dispatch, for one rank, drawn from this rank's
own seed: which tokens each local expert holds (moe/dispatch_low_latency's slot layout),
their expert outputs, and the routing weight of each (token, expert) pair.

Local expert e holds token s·T + t (source rank s, index t) with probability K/E,
independently (uniform routing, S = 1), or with probability min(1, 8·K/E) for hot experts
(each local expert is hot with probability 1/16, S = 2). The held tokens fill slots
0 .. count_e − 1 in a random order (as atomic arrival produces); slots ≥ count_e hold garbage
(random rows, weights and in-range token ids): a kernel must use recv_count. Weights are
drawn from U[0.01, 1)."""

import torch


def make_inputs(axes, generator):
    T, M, H, K, E, S, W = (
        axes["T"],
        axes["M"],
        axes["H"],
        axes["K"],
        axes["E"],
        axes["S"],
        axes["W"],
    )
    gen, dev = generator, generator.device
    El, n_tok = E // W, W * T
    p = torch.full((El,), K / E, device=dev)
    if S == 2:
        hot = torch.rand(El, generator=gen, device=dev) < 1.0 / 16
        p = torch.where(hot, torch.clamp(8.0 * p, max=1.0), p)
    held = torch.rand(El, n_tok, generator=gen, device=dev) < p[:, None]
    counts = held.sum(dim=1)
    keys = torch.where(
        held,
        torch.rand(El, n_tok, generator=gen, device=dev),
        torch.full((El, n_tok), 2.0, device=dev),
    )
    order = torch.argsort(keys, dim=1)  # held tokens first, in random order
    recv_src = torch.randint(0, n_tok, (El, W * M), generator=gen, device=dev, dtype=torch.int32)
    valid = torch.arange(n_tok, device=dev)[None, :] < counts[:, None]
    head = recv_src[:, :n_tok]
    head[valid] = order[valid].to(torch.int32)
    x = torch.randn(El, W * M, H, generator=gen, device=dev).to(torch.bfloat16)
    weights = torch.rand(El, W * M, generator=gen, device=dev) * 0.99 + 0.01
    return [x, recv_src, counts.to(torch.int32), weights, T]
