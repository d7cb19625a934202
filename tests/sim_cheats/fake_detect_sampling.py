"""Cheat: tell the counting pass from a real run, on a task whose outputs its own check.py judges
(sampling: the counted call's values are never compared, so a pure-PyTorch candidate is counted on
fake tensors alone). Handed fake tensors, it returns zeros (written, so the unwritten-output check
is satisfied) and is counted for that one fill; on real tensors it samples as vLLM's torch
fallback does, so every correctness check passes.
Defense: the impossibility floor applies to predicted times: a count that missed the work
predicts a time below 90% of the spec roofline, and the result is flagged."""

import torch


def run(logits, top_k, top_p):
    B, V = logits.shape
    if type(logits).__name__ == "FakeTensor":
        return torch.zeros(B, dtype=torch.int64)
    s, idx = torch.sort(logits, dim=-1, descending=True)
    k = top_k.long().clamp(1, V)
    kth = s.gather(1, (k - 1)[:, None])
    s = s.masked_fill(s < kth, float("-inf"))
    p = torch.softmax(s, dim=-1)
    above = torch.cumsum(p, dim=-1) - p
    p = p.masked_fill(above >= top_p[:, None], 0.0)
    return idx.gather(1, torch.multinomial(p, 1)).squeeze(1)
