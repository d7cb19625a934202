"""Fused residual add + RMSNorm in float32, as vLLM's fused_add_rms_norm defines it:
residual_out = bf16(x + residual); out = residual_out · rsqrt(mean(residual_out²) + eps) · weight,
where the norm reads the bf16-rounded residual_out."""

import torch


def run(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float):
    summed = x.float() + residual.float()
    r = summed.to(x.dtype).float()  # the norm sees the residual stream as stored (bf16)
    rstd = torch.rsqrt(r.pow(2).mean(dim=-1, keepdim=True) + eps)
    out = r * rstd * weight.float()
    return out, summed
