"""After Liger-Kernel's RoPE forward (linkedin/Liger-Kernel, src/liger_kernel/ops/rope.py,
BSD 2-Clause): one program per token rotates every head of q and of k in place, the heads as a
2-D tile (the head count and half the head size padded to powers of two), the first and second
halves loaded as two tiles and rotated in float32 (neox layout). Liger gathers the token's
cos/sin rows before the launch; here the program reads them from the cache at the token's
position. Written here for the task's signature; no code copied."""

import triton
import triton.language as tl


@triton.jit
def _rope_token(
    pos_ptr,
    q_ptr,
    k_ptr,
    cache_ptr,
    n_qh,
    n_kh,
    HALF: tl.constexpr,
    PAD_QH: tl.constexpr,
    PAD_KH: tl.constexpr,
    PAD_HALF: tl.constexpr,
):
    t = tl.program_id(0).to(tl.int64)
    pos = tl.load(pos_ptr + t)
    c = tl.arange(0, PAD_HALF)
    cos = tl.load(cache_ptr + pos * 2 * HALF + c, mask=c < HALF, other=0)
    sin = tl.load(cache_ptr + pos * 2 * HALF + HALF + c, mask=c < HALF, other=0)
    qh = tl.arange(0, PAD_QH)[:, None]
    keep_q = (qh < n_qh) & (c[None, :] < HALF)
    q_row = q_ptr + t * n_qh * 2 * HALF + qh * 2 * HALF + c[None, :]
    q1 = tl.load(q_row, mask=keep_q, other=0).to(tl.float32)
    q2 = tl.load(q_row + HALF, mask=keep_q, other=0).to(tl.float32)
    tl.store(q_row, (q1 * cos[None, :] - q2 * sin[None, :]).to(q_ptr.dtype.element_ty), mask=keep_q)
    tl.store(
        q_row + HALF,
        (q2 * cos[None, :] + q1 * sin[None, :]).to(q_ptr.dtype.element_ty),
        mask=keep_q,
    )
    kh = tl.arange(0, PAD_KH)[:, None]
    keep_k = (kh < n_kh) & (c[None, :] < HALF)
    k_row = k_ptr + t * n_kh * 2 * HALF + kh * 2 * HALF + c[None, :]
    k1 = tl.load(k_row, mask=keep_k, other=0).to(tl.float32)
    k2 = tl.load(k_row + HALF, mask=keep_k, other=0).to(tl.float32)
    tl.store(k_row, (k1 * cos[None, :] - k2 * sin[None, :]).to(k_ptr.dtype.element_ty), mask=keep_k)
    tl.store(
        k_row + HALF,
        (k2 * cos[None, :] + k1 * sin[None, :]).to(k_ptr.dtype.element_ty),
        mask=keep_k,
    )


def run(positions, q, k, cos_sin_cache):
    T, n_qh, d = q.shape
    n_kh = k.shape[1]
    half = d // 2
    _rope_token[(T,)](
        positions,
        q,
        k,
        cos_sin_cache,
        n_qh,
        n_kh,
        HALF=half,
        PAD_QH=triton.next_power_of_2(n_qh),
        PAD_KH=triton.next_power_of_2(n_kh),
        PAD_HALF=triton.next_power_of_2(half),
        num_warps=4,
    )
    return q, k
