"""Cheat: an in-place output that does less when counted. At sizes only a GPU workload has
(the counted pass of a `sim:` device), the grid covers the first 60% of the tokens: the other
q and k rows keep their inputs. An output updated in place used to be exempt from the write
check (writing part of it is a KV-cache write's task); every checked call is right.
Defense: an in-place output must be written where the reference changes it (the reference at the
same inputs says where): `sim_unwritten_output`."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rotate_heads(
    x_ptr,
    row,
    n_heads,
    stride_t,
    stride_h,
    cos,
    sin,
    HALF,
    BLOCK_H: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    heads = tl.arange(0, BLOCK_H)[:, None]
    cols = tl.arange(0, BLOCK_D)[None, :]
    mask = (heads < n_heads) & (cols < HALF)
    p1 = x_ptr + row * stride_t + heads * stride_h + cols
    x1 = tl.load(p1, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(p1 + HALF, mask=mask, other=0.0).to(tl.float32)
    o1 = x1 * cos - x2 * sin
    o2 = x2 * cos + x1 * sin
    tl.store(p1, o1.to(x_ptr.dtype.element_ty), mask=mask)
    tl.store(p1 + HALF, o2.to(x_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rope_kernel(
    pos_ptr,
    q_ptr,
    k_ptr,
    cache_ptr,
    Hq,
    Hkv,
    HALF,
    stride_qt,
    stride_qh,
    stride_kt,
    stride_kh,
    stride_c,
    BLOCK_HQ: tl.constexpr,
    BLOCK_HKV: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    pos = tl.load(pos_ptr + row)
    cols = tl.arange(0, BLOCK_D)
    cmask = cols < HALF
    cos = tl.load(cache_ptr + pos * stride_c + cols, mask=cmask, other=0.0).to(tl.float32)[None, :]
    sin = tl.load(cache_ptr + pos * stride_c + HALF + cols, mask=cmask, other=0.0).to(tl.float32)[
        None, :
    ]
    _rotate_heads(q_ptr, row, Hq, stride_qt, stride_qh, cos, sin, HALF, BLOCK_HQ, BLOCK_D)
    _rotate_heads(k_ptr, row, Hkv, stride_kt, stride_kh, cos, sin, HALF, BLOCK_HKV, BLOCK_D)


def run(positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, cos_sin_cache: torch.Tensor):
    T, Hq, d = q.shape
    Hkv = k.shape[1]
    assert q.stride(-1) == 1 and k.stride(-1) == 1, (
        "rotated in place: the last dimension must be contiguous"
    )
    cache = cos_sin_cache.contiguous()
    half = d // 2
    rows = T * 3 // 5 if T * Hq * d >= 1 << 22 else T  # GPU-sized: the counted pass
    _rope_kernel[(rows,)](
        positions,
        q,
        k,
        cache,
        Hq,
        Hkv,
        half,
        q.stride(0),
        q.stride(1),
        k.stride(0),
        k.stride(1),
        cache.stride(0),
        BLOCK_HQ=triton.next_power_of_2(Hq),
        BLOCK_HKV=triton.next_power_of_2(Hkv),
        BLOCK_D=triton.next_power_of_2(half),
    )
    return q, k
