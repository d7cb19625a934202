"""Properly quantized inputs, as a DeepSeek-V3 style fp8 checkpoint and activation quantizer
produce them: bf16-like data (float32 rounded to bfloat16) quantized per block with
scale = absmax / 448 (the float8_e4m3fn maximum; absmax clamped to at least 1e-4, as
DeepGEMM's per_token_cast_to_fp8 does), q = float8_e4m3fn(x / scale).

a: activations, one scale per 1 x 128 block (per token and per 128 columns of K);
b: weights, one scale per 128 x 128 block. The magnitude varies by block (a factor 2^u,
u uniform in [-2, 2], per block) so that every scale matters: a kernel that applies the wrong
block's scale, or none, fails. A last partial block (K or N not a multiple of 128) is
quantized over its valid elements only."""

import torch

BLOCK = 128
FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def quantize_1x128(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x float32 [M, K] -> (float8_e4m3fn [M, K], float32 scales [M, ceil(K/128)])."""
    M, K = x.shape
    kb = _cdiv(K, BLOCK)
    xb = torch.nn.functional.pad(x, (0, kb * BLOCK - K)).view(M, kb, BLOCK)
    scale = xb.abs().amax(dim=-1).clamp_min(1e-4) / FP8_MAX
    q = (xb / scale[..., None]).clamp(-FP8_MAX, FP8_MAX).to(FP8)
    return q.view(M, kb * BLOCK)[:, :K].contiguous(), scale.contiguous()


def quantize_128x128(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """w float32 [N, K] -> (float8_e4m3fn [N, K], float32 scales [ceil(N/128), ceil(K/128)])."""
    N, K = w.shape
    nb, kb = _cdiv(N, BLOCK), _cdiv(K, BLOCK)
    wb = torch.nn.functional.pad(w, (0, kb * BLOCK - K, 0, nb * BLOCK - N)).view(
        nb, BLOCK, kb, BLOCK
    )
    scale = wb.abs().amax(dim=(1, 3)).clamp_min(1e-4) / FP8_MAX
    q = (wb / scale[:, None, :, None]).clamp(-FP8_MAX, FP8_MAX).to(FP8)
    return q.view(nb * BLOCK, kb * BLOCK)[:N, :K].contiguous(), scale.contiguous()


def _block_gain(rows: int, cols: int, gen: torch.Generator) -> torch.Tensor:
    """A factor 2^u, u ~ U[-2, 2], per block of a [rows, cols] grid of blocks."""
    u = torch.rand((rows, cols), generator=gen, device=gen.device) * 4.0 - 2.0
    return torch.exp2(u)


def make_inputs(axes: dict[str, int], generator: torch.Generator) -> list:
    M, N, K = axes["M"], axes["N"], axes["K"]
    dev = generator.device
    kb, nb = _cdiv(K, BLOCK), _cdiv(N, BLOCK)
    x = torch.randn((M, K), generator=generator, device=dev)
    x = x * _block_gain(M, kb, generator).repeat_interleave(BLOCK, dim=1)[:, :K]
    w = torch.randn((N, K), generator=generator, device=dev) * 0.02
    w = (
        w
        * _block_gain(nb, kb, generator)
        .repeat_interleave(BLOCK, dim=0)
        .repeat_interleave(BLOCK, dim=1)[:N, :K]
    )
    a, a_scale = quantize_1x128(x.to(torch.bfloat16).float())
    b, b_scale = quantize_128x128(w.to(torch.bfloat16).float())
    return [a, a_scale, b, b_scale]
