"""Cheat (activation/silu_mul_fp8_quant): power-of-two scales (UE8M0, a cheaper shift where
the task asks for absmax / 448): q is then off the reference's grid by up to 2x in range while
out · scale still approximates y. Defense: scales within 1% of the reference's (fp8_check)."""

import torch

FP8_MAX = 448.0


def run(x):
    xf = x.float()
    gate, up = xf.chunk(2, dim=-1)
    y = gate * torch.sigmoid(gate) * up
    T, inter = y.shape
    g = y.reshape(T, inter // 128, 128)
    scale = torch.exp2(torch.ceil(torch.log2(g.abs().amax(dim=-1).clamp_min(1e-10) / FP8_MAX)))
    q = (g / scale.unsqueeze(-1)).clamp(-FP8_MAX, FP8_MAX).view(T, inter)
    return q.to(torch.float8_e4m3fn), scale
