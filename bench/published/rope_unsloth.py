"""Published-kernel bench set (bench/published/README.md): neox-style RoPE as Unsloth writes
it, as a candidate for tasks/elementwise/rope.

After unslothai/unsloth, unsloth/kernels/rope_embedding.py, `_rope_embedding` (Apache-2.0): a
grid of (token, group of ROPE_GROUP_SIZE = 4 heads); each program loads the token's cos and sin
halves once and rotates its heads' halves in float32, in place; q and k in two launches.
Rewritten for this task's signature (positions into a [P, d] cos|sin cache); no code copied."""

import torch
import triton
import triton.language as tl

ROPE_GROUP_SIZE = 4


@triton.jit
def _rope_group(
    x_ptr,
    pos_ptr,
    cache_ptr,
    n_heads,
    stride_t,
    stride_h,
    stride_c,
    HALF,
    GROUP: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    token = tl.program_id(0).to(tl.int64)
    first = tl.program_id(1) * GROUP
    pos = tl.load(pos_ptr + token)
    cols = tl.arange(0, BLOCK_D)
    cmask = cols < HALF
    cos = tl.load(cache_ptr + pos * stride_c + cols, mask=cmask, other=0.0).to(tl.float32)
    sin = tl.load(cache_ptr + pos * stride_c + HALF + cols, mask=cmask, other=0.0).to(tl.float32)
    for h in range(GROUP):
        head = first + h
        m = cmask & (head < n_heads)
        p = x_ptr + token * stride_t + head * stride_h + cols
        x1 = tl.load(p, mask=m, other=0.0).to(tl.float32)
        x2 = tl.load(p + HALF, mask=m, other=0.0).to(tl.float32)
        tl.store(p, (x1 * cos - x2 * sin).to(x_ptr.dtype.element_ty), mask=m)
        tl.store(p + HALF, (x2 * cos + x1 * sin).to(x_ptr.dtype.element_ty), mask=m)


def _apply(x: torch.Tensor, positions: torch.Tensor, cache: torch.Tensor) -> None:
    T, H, d = x.shape
    half = d // 2
    if T and H:
        _rope_group[(T, triton.cdiv(H, ROPE_GROUP_SIZE))](
            x,
            positions,
            cache,
            H,
            x.stride(0),
            x.stride(1),
            cache.stride(0),
            half,
            GROUP=ROPE_GROUP_SIZE,
            BLOCK_D=triton.next_power_of_2(half),
        )


def run(positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, cos_sin_cache: torch.Tensor):
    cache = cos_sin_cache.contiguous()
    _apply(q, positions, cache)
    _apply(k, positions, cache)
    return q, k
