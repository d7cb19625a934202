"""MoE expert rows in DeepGEMM's contiguous layout (m_grouped_fp8_gemm_nt_contiguous), fp8
with block scales, as DeepEP's normal-mode dispatch hands them to the experts.

a [128·B, K] is split into B blocks of 128 rows; every block belongs to one expert, an
expert's blocks are consecutive, and only the expert's last block may hold padding rows (at
its end). m_indices [128·B] int32 gives each row's expert, or -1 for a padding row; the first
row of every block is a real row. Padding rows hold quantized garbage (as in a reused buffer),
never zeros.

Routing, vectorised: exactly H = min(B, E - E // 8) experts get blocks (at least one expert is
always empty for E >= 8), each at least one; the other B - H blocks go to the used experts by
a multinomial draw in which the hot experts (the first max(1, H // 16) of them) weigh S times
the others (S = 1 uniform). An expert's last block holds 1 to 128 real rows (uniform).

Quantization as gemm/fp8_blockscale_gemm: bf16-like data, scale = block absmax / 448 (absmax
clamped to 1e-4), float8_e4m3fn; a per 1×128, b per 128×128 block of each expert, with random
per-block gains 2^u, u ~ U[-2, 2], so every scale matters."""

import torch

BLOCK = 128
FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def group_sizes(total: int, E: int, S: int, gen: torch.Generator) -> torch.Tensor:
    """int64 [E]: `total` units spread over exactly min(total, E - E // 8) groups."""
    dev = gen.device
    H = min(total, E - E // 8)
    used = torch.randperm(E, generator=gen, device=dev)[:H]
    weights = torch.ones(H, device=dev)
    weights[: max(1, H // 16)] = float(S)
    counts_used = torch.ones(H, dtype=torch.int64, device=dev)
    if total > H:
        extra = torch.multinomial(weights, total - H, replacement=True, generator=gen)
        counts_used += torch.bincount(extra, minlength=H)
    counts = torch.zeros(E, dtype=torch.int64, device=dev)
    counts[used] = counts_used
    return counts


def _gain(shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    return torch.exp2(torch.rand(shape, generator=gen, device=gen.device) * 4.0 - 2.0)


def make_inputs(axes: dict[str, int], generator: torch.Generator) -> list:
    B, E, N, K, S = axes["B"], axes["E"], axes["N"], axes["K"], axes["S"]
    gen, dev = generator, generator.device
    M = BLOCK * B
    kb, nb = _cdiv(K, BLOCK), _cdiv(N, BLOCK)

    blocks = group_sizes(B, E, S, gen)  # [E] blocks per expert
    expert_of_block = torch.repeat_interleave(torch.arange(E, device=dev), blocks)  # [B]
    last_block = torch.cumsum(blocks, 0) - 1  # [E], -1 for empty
    real_in_last = torch.randint(1, BLOCK + 1, (E,), generator=gen, device=dev)
    is_last = torch.arange(B, device=dev) == last_block[expert_of_block]
    real = torch.where(
        is_last, real_in_last[expert_of_block], torch.full_like(expert_of_block, BLOCK)
    )
    pos = torch.arange(BLOCK, device=dev)
    m_indices = (
        torch.where(pos[None, :] < real[:, None], expert_of_block[:, None], -1)
        .reshape(M)
        .to(torch.int32)
    )

    # a: 1x128 blocks
    x = torch.randn((M, kb * BLOCK), generator=gen, device=dev) * _gain(
        (M, kb), gen
    ).repeat_interleave(BLOCK, 1)
    x[:, K:] = 0.0
    x = x.to(torch.bfloat16).float().view(M, kb, BLOCK)
    a_scale = x.abs().amax(-1).clamp_min(1e-4) / FP8_MAX
    a = (
        (x / a_scale[..., None])
        .clamp(-FP8_MAX, FP8_MAX)
        .to(FP8)
        .view(M, kb * BLOCK)[:, :K]
        .contiguous()
    )

    # b: 128x128 blocks per expert
    w = torch.randn((E, nb * BLOCK, kb * BLOCK), generator=gen, device=dev) * 0.02
    w = w * _gain((E, nb, kb), gen).repeat_interleave(BLOCK, 1).repeat_interleave(BLOCK, 2)
    w[:, N:, :] = 0.0
    w[:, :, K:] = 0.0
    w = w.to(torch.bfloat16).float().view(E, nb, BLOCK, kb, BLOCK)
    b_scale = w.abs().amax(dim=(2, 4)).clamp_min(1e-4) / FP8_MAX
    b = (w / b_scale[:, :, None, :, None]).clamp(-FP8_MAX, FP8_MAX).to(FP8)
    b = b.view(E, nb * BLOCK, kb * BLOCK)[:, :N, :K].contiguous()
    return [a, a_scale.contiguous(), b, b_scale.contiguous(), m_indices]
