"""SwiGLU's activation then per-token-group (1×128) fp8 quantization, in float32.

x [T, 2I] holds gate = x[:, :I] and up = x[:, I:]; y = silu(gate) · up = gate · sigmoid(gate) · up
(float32, not rounded to bfloat16); per group of 128 consecutive columns of y:
scale = max(absmax(y_group), 1e-10) / 448, q = clamp(y / scale, -448, 448), then rounded to
float8_e4m3fn (nearest, ties to even).

Returns the *unrounded* q (float32, in fp8 units) and the scales; check.py dequantizes the
candidate's fp8 output with the candidate's scales and compares with q · scale = y."""

import torch

FP8_MAX = 448.0
GROUP = 128


def run(x: torch.Tensor):
    xf = x.float()
    gate, up = xf.chunk(2, dim=-1)
    y = gate * torch.sigmoid(gate) * up
    T, inter = y.shape
    g = y.reshape(T, inter // GROUP, GROUP)
    scale = g.abs().amax(dim=-1).clamp_min(1e-10) / FP8_MAX
    q = (g / scale.unsqueeze(-1)).clamp(-FP8_MAX, FP8_MAX).view(T, inter)
    return q, scale
