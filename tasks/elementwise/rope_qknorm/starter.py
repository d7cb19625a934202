"""A portable starting point: one Triton program per token; it loads the token's cos/sin row
once, then for q and for k takes all heads as a [heads, d/2] pair of tiles (first and second
half of each head), computes each head's mean square from both halves, normalises, applies
the weight and rotates, math in float32, and writes back into q and k in place. Correct for
any T, head counts and even d; not tuned (one token per program, default warps)."""

import triton
import triton.language as tl


@triton.jit
def _norm_rope_heads(
    x_ptr,
    w_ptr,
    row,
    n_heads,
    stride_t,
    stride_h,
    cos,
    sin,
    eps,
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
    ms = (tl.sum(x1 * x1, axis=1) + tl.sum(x2 * x2, axis=1)) / (2 * HALF)
    rstd = (1.0 / tl.sqrt(ms + eps))[:, None]
    w1 = tl.load(w_ptr + cols, mask=cols < HALF, other=0.0).to(tl.float32)
    w2 = tl.load(w_ptr + HALF + cols, mask=cols < HALF, other=0.0).to(tl.float32)
    n1 = x1 * rstd * w1
    n2 = x2 * rstd * w2
    tl.store(p1, (n1 * cos - n2 * sin).to(x_ptr.dtype.element_ty), mask=mask)
    tl.store(p1 + HALF, (n2 * cos + n1 * sin).to(x_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _qknorm_rope_kernel(
    pos_ptr,
    q_ptr,
    k_ptr,
    qw_ptr,
    kw_ptr,
    cache_ptr,
    Hq,
    Hkv,
    HALF,
    eps,
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
    _norm_rope_heads(
        q_ptr, qw_ptr, row, Hq, stride_qt, stride_qh, cos, sin, eps, HALF, BLOCK_HQ, BLOCK_D
    )
    _norm_rope_heads(
        k_ptr, kw_ptr, row, Hkv, stride_kt, stride_kh, cos, sin, eps, HALF, BLOCK_HKV, BLOCK_D
    )


def run(positions, q, k, q_weight, k_weight, cos_sin_cache, eps):
    T, Hq, d = q.shape
    Hkv = k.shape[1]
    assert q.stride(-1) == 1 and k.stride(-1) == 1, (
        "written in place: the last dimension must be contiguous"
    )
    cache = cos_sin_cache.contiguous()
    half = d // 2
    _qknorm_rope_kernel[(T,)](
        positions,
        q,
        k,
        q_weight.contiguous(),
        k_weight.contiguous(),
        cache,
        Hq,
        Hkv,
        half,
        eps,
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
