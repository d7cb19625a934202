"""Published-kernel bench set (bench/published/README.md): neox-style RoPE as FlagGems writes
it, as a candidate for tasks/elementwise/rope.

After FlagOpen/FlagGems, src/flag_gems/fused/rotary_embedding.py (Apache-2.0): programs over
(token, block of heads), cos and sin gathered by position, both halves rotated in float32 and
written back in place. The heads per program and the warps are chosen by @triton.autotune over
six configurations (key: heads and head size); the autotuner restores the rotated tensor after
each trial (`restore_value`), since the kernel writes its input. Rewritten for this task's
signature; no code copied."""

import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_H": 1}, num_warps=1),
        triton.Config({"BLOCK_H": 2}, num_warps=2),
        triton.Config({"BLOCK_H": 4}, num_warps=4),
        triton.Config({"BLOCK_H": 8}, num_warps=4),
        triton.Config({"BLOCK_H": 16}, num_warps=8),
        triton.Config({"BLOCK_H": 32}, num_warps=8),
    ],
    key=["H", "HALF"],
    restore_value=["x_ptr"],
)
@triton.jit
def _rope_heads(
    x_ptr,
    pos_ptr,
    cache_ptr,
    H,
    stride_t,
    stride_h,
    stride_c,
    HALF,
    BLOCK_H: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    token = tl.program_id(0).to(tl.int64)
    heads = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)[:, None]
    cols = tl.arange(0, BLOCK_D)[None, :]
    pos = tl.load(pos_ptr + token)
    cmask = cols < HALF
    cos = tl.load(cache_ptr + pos * stride_c + cols, mask=cmask, other=0.0).to(tl.float32)
    sin = tl.load(cache_ptr + pos * stride_c + HALF + cols, mask=cmask, other=0.0).to(tl.float32)
    m = cmask & (heads < H)
    p = x_ptr + token * stride_t + heads * stride_h + cols
    x1 = tl.load(p, mask=m, other=0.0).to(tl.float32)
    x2 = tl.load(p + HALF, mask=m, other=0.0).to(tl.float32)
    tl.store(p, (x1 * cos - x2 * sin).to(x_ptr.dtype.element_ty), mask=m)
    tl.store(p + HALF, (x2 * cos + x1 * sin).to(x_ptr.dtype.element_ty), mask=m)


def _apply(x: torch.Tensor, positions: torch.Tensor, cache: torch.Tensor) -> None:
    T, H, d = x.shape
    half = d // 2
    if T and H:

        def grid(meta):
            return (T, triton.cdiv(H, meta["BLOCK_H"]))

        _rope_heads[grid](
            x,
            positions,
            cache,
            H,
            x.stride(0),
            x.stride(1),
            cache.stride(0),
            half,
            BLOCK_D=triton.next_power_of_2(half),
        )


def run(positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, cos_sin_cache: torch.Tensor):
    cache = cos_sin_cache.contiguous()
    _apply(q, positions, cache)
    _apply(k, positions, cache)
    return q, k
