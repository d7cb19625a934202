"""DeepEP normal-mode combine in one process (no torch.distributed): every held row goes back
to its source rank and the copies of a token are summed, without weights.

For source rank s and token t: out_s[t] = Σ over ranks r holding (s, t) of x_r[row], summed
in float32 (order-independent up to float32 rounding), 0 for a token no rank holds. Returned
per rank: the exact sum (float32), and for check.py Σ|terms| and the number of terms per
token ([T, 1])."""

import torch


def run_all(inputs_by_rank: list[list]) -> list:
    W = len(inputs_by_rank)
    x0 = inputs_by_rank[0][0]
    T, H = x0.shape[0] // W, x0.shape[1]
    dev = x0.device
    out = torch.zeros(W, T, H, dtype=torch.float32, device=dev)
    absum = torch.zeros_like(out)
    terms = torch.zeros(W, T, 1, dtype=torch.float32, device=dev)
    for x, src, prefix in inputs_by_rank:
        prefix = prefix.long()
        n = int(prefix[-1])
        source = torch.repeat_interleave(
            torch.arange(W, device=dev), torch.diff(prefix, prepend=prefix.new_zeros(1))
        )
        flat = source * T + src[:n].long()
        rows = x[:n].float()
        out.view(W * T, H).index_add_(0, flat, rows)
        absum.view(W * T, H).index_add_(0, flat, rows.abs())
        terms.view(W * T, 1).index_add_(0, flat, torch.ones(n, 1, device=dev))
    return [(out[s], absum[s], terms[s]) for s in range(W)]
