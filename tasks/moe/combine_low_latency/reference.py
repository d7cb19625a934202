"""DeepEP low-latency combine (weighted) in one process: every valid slot's expert output,
times its routing weight, goes back to its token's source rank and is summed there.

For source rank s and token t: out_s[t] = Σ over ranks r, local experts e and slots
i < count_e with recv_src[e, i] = s·T + t of weights[e, i]·x[e, i], in float32
(order-independent up to float32 rounding), 0 for a token no expert holds. Returned per rank:
the exact sum (float32), and for check.py Σ|weight·x| and the number of terms per token
([T, 1])."""

import torch


def run_all(inputs_by_rank: list[list]) -> list:
    W = len(inputs_by_rank)
    x0, _, _, _, T = inputs_by_rank[0]
    El, slots, H = x0.shape
    dev = x0.device
    out = torch.zeros(W * T, H, dtype=torch.float32, device=dev)
    absum = torch.zeros_like(out)
    terms = torch.zeros(W * T, 1, dtype=torch.float32, device=dev)
    for x, recv_src, recv_count, weights, _ in inputs_by_rank:
        valid = torch.arange(slots, device=dev)[None, :] < recv_count.long()[:, None]
        tok = recv_src[valid].long()
        rows = x[valid].float() * weights[valid][:, None]
        out.index_add_(0, tok, rows)
        absum.index_add_(0, tok, rows.abs())
        terms.index_add_(0, tok, torch.ones(tok.numel(), 1, device=dev))
    return [
        (out[s * T : (s + 1) * T], absum[s * T : (s + 1) * T], terms[s * T : (s + 1) * T])
        for s in range(W)
    ]
