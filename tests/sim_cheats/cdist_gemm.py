"""Cheat (bf16_gemm, pure PyTorch): the product computed through `torch.cdist` (x·w = (|x|² + |w|²
− |x − w|²) / 2), an op without a FLOP formula: it used to be billed by its bytes alone, a GEMM
for the price of a copy.
Defense: an op that computes and has no formula is one whose cost the model does not know:
`sim_unknown_op`, never billed as bytes."""

import torch


def run(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    xf, wf = x.float(), w.float()
    d2 = torch.cdist(xf, wf).square()
    dot = ((xf * xf).sum(1, keepdim=True) + (wf * wf).sum(1)[None, :] - d2) / 2
    return dot.to(x.dtype)
