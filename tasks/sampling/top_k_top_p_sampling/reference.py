"""The distribution a top-k ∩ top-p sampler must draw from, in float64 (FlashInfer's
top_k_top_p_sampling_from_logits with filter_apply_order="top_k_first", vLLM's sampler):

1. p = softmax(logits) (temperature 1).
2. top-k: keep tokens whose logit ≥ the k-th largest logit of the row (ties at the k-th
   value are all kept); renormalise: pk.
3. top-p on pk: keep token j iff the pk-mass of tokens strictly more probable than j is
   < top_p (the smallest set of most probable tokens reaching top_p; ties at the boundary are
   all kept); renormalise: q.

Returns (ids, q, allowed): ids is -1 everywhere (no sampler can match it elementwise, so
without check.py every candidate fails rather than an argmax passing); q float32 [B, V] is
the target distribution; allowed bool [B, V] is the set a sampled token must lie in: the
kept set widened by float slack (logit within 1e-5 relative of the k-th largest, mass above
< top_p + 1e-3) so an honest float32 kernel is never failed on a boundary token."""

import torch

TOP_P_SLACK = 1.0e-3
TOP_K_SLACK = 1.0e-5


def _mass_above(w: torch.Tensor) -> torch.Tensor:
    """Per element, the sum of the row's elements strictly greater than it."""
    s, _ = torch.sort(w, dim=-1)
    cum = torch.cumsum(s, dim=-1)
    pos = torch.searchsorted(s, w.contiguous(), right=True) - 1  # last index with s <= w
    return cum[:, -1:] - torch.gather(cum, 1, pos)


def run(logits: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor):
    x = logits.double()
    B, V = x.shape
    k = top_k.long().clamp(1, V)
    kth = torch.sort(x, dim=-1, descending=True).values.gather(1, (k - 1)[:, None])
    in_k = x >= kth
    in_k_slack = x >= kth - TOP_K_SLACK * (1.0 + kth.abs())
    p = torch.softmax(x, dim=-1)
    pk = torch.where(in_k, p, torch.zeros_like(p))
    pk = pk / pk.sum(dim=-1, keepdim=True)
    above = _mass_above(pk)
    tp = top_p.double()[:, None]
    keep = in_k & (above < tp)
    q = torch.where(keep, pk, torch.zeros_like(pk))
    q = q / q.sum(dim=-1, keepdim=True)
    # the slack set: boundary tokens of a float32 computation (pk of the wider top-k set)
    pk_s = torch.where(in_k_slack, p, torch.zeros_like(p))
    pk_s = pk_s / pk_s.sum(dim=-1, keepdim=True)
    allowed = keep | (in_k_slack & (_mass_above(pk_s) < tp + TOP_P_SLACK))
    ids = torch.full((B,), -1, dtype=torch.int64, device=logits.device)
    return ids, q.float(), allowed
