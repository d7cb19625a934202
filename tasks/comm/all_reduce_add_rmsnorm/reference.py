"""All-reduce fused with residual add + RMSNorm, in one process. For rank r:
S_r = Σ_q x_q + residual_r, accumulated in float32 from the bfloat16 inputs;
residual_out_r = bf16(S_r); out_r = residual_out_r · rsqrt(mean(residual_out_r²) + eps) · weight_r
(float32 over the bfloat16-rounded residual_out, as vLLM's fused_add_rms_norm).
Returned per rank: out (float32), S_r (float32, unrounded), and for check.py Σ|terms| and the
number of terms W + 1."""

import torch


def run_all(inputs_by_rank: list[list]) -> list:
    W = len(inputs_by_rank)
    x0 = inputs_by_rank[0][0]
    total = torch.zeros(x0.shape, dtype=torch.float32, device=x0.device)
    abs_total = torch.zeros_like(total)
    for x, *_ in inputs_by_rank:
        xf = x.float()
        total += xf
        abs_total += xf.abs()
    terms = torch.tensor(W + 1, dtype=torch.int64)
    result = []
    for x, residual, weight, eps in inputs_by_rank:
        s = total + residual.float()
        a = abs_total + residual.float().abs()
        r = s.to(x.dtype).float()
        out = r * torch.rsqrt(r.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.float()
        result.append((out, s, a, terms))
    return result
