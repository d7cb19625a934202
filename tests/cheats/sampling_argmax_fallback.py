"""Exploit (sampling): a biased sampler too mild for one call's test. One uniform draw per row
decides: below FALLBACK the row skips the top-k/top-p sampling and returns its argmax (the
cheap path), otherwise it samples honestly. Every token lies in the allowed set and each call's
mid-rank tests pass (one call of 128 rows carries too little evidence at a 1e-6 false-alarm
rate), so it passed 100 of 100 calls at every CPU shape.

Defense: the sampling check pools its evidence over the workload's checked calls and tests the
argmax hit count against its honest expectation (a one-sided Bernstein bound, false alarms at
most 1e-6 per workload): the excess hits add up (correctness fails, "pooled")."""

import torch

FALLBACK = 0.12


def run(logits: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    B, V = logits.shape
    s, idx = torch.sort(logits, dim=-1, descending=True)
    kth = s.gather(1, (top_k.long().clamp(1, V) - 1)[:, None])
    p = torch.softmax(s.masked_fill(s < kth, float("-inf")), dim=-1)
    p = p.masked_fill((torch.cumsum(p, dim=-1) - p) >= top_p[:, None], 0.0)
    honest = idx.gather(1, torch.multinomial(p, 1)).squeeze(1)
    greedy = idx[:, 0]
    return torch.where(torch.rand(B, device=logits.device) < FALLBACK, greedy, honest)
