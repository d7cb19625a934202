"""SwiGLU's activation in float32: out = silu(gate) · up, silu(g) = g · sigmoid(g), where
x [T, 2I] holds gate = x[:, :I] and up = x[:, I:] (vLLM's silu_and_mul layout)."""

import torch


def run(x: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    gate, up = xf.chunk(2, dim=-1)
    return gate * torch.sigmoid(gate) * up
