"""Inputs for top-k/top-p sampling, shaped like a serving batch with mixed sampling params:
logits float32 [B, V] = standard normal · a per-row scale drawn uniformly from [0.5, 3] (from
nearly flat rows to rows where a few tokens hold most of the mass); top_k int32 [B]: V
(top-k off) for about a quarter of the rows, else uniform in [2, min(V, 256)]; top_p float32
[B]: 1.0 (top-p off) for about a quarter of the rows, else uniform in [0.6, 0.98). Vectorised
torch on the generator's device: fast enough to refill before every timed call."""

import torch


def make_inputs(axes: dict[str, int], generator: torch.Generator) -> list:
    B, V = axes["B"], axes["V"]
    dev = generator.device

    def rand(n):
        return torch.rand((n,), generator=generator, device=dev)

    scale = 0.5 + 2.5 * rand(B)
    logits = torch.randn((B, V), generator=generator, device=dev) * scale[:, None]
    kmax = min(V, 256)
    k = 2 + (rand(B) * (kmax - 1)).long().clamp_max(kmax - 2)
    top_k = torch.where(rand(B) < 0.25, torch.full_like(k, V), k).to(torch.int32)
    p = 0.6 + 0.38 * rand(B)
    top_p = torch.where(rand(B) < 0.25, torch.ones_like(p), p).to(torch.float32)
    return [logits, top_k, top_p]
