"""The best torch composition: a bf16 add (computed in float32, rounded once) and
torch.nn.functional.rms_norm, two kernels and an extra round trip of the residual."""

import torch
import torch.nn.functional as F


def run(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float):
    residual_out = x + residual
    out = F.rms_norm(residual_out, (residual_out.shape[-1],), weight, eps)
    return out, residual_out
