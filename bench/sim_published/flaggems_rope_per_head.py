"""After FlagGems' apply_rotary_pos_emb (FlagOpen/FlagGems,
src/flag_gems/fused/rotary_embedding.py, Apache-2.0): a 2-D grid of (token, head) programs, one
launch for q and one for k, each program rotating one head vector in float32 (neox halves) with
the cos/sin of the token's position read from the cache. Written here for the task's signature
(in place); no code copied."""

import triton
import triton.language as tl


@triton.jit
def _rope_head(pos_ptr, x_ptr, cache_ptr, n_heads, HALF: tl.constexpr, PAD_HALF: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    pos = tl.load(pos_ptr + t)
    c = tl.arange(0, PAD_HALF)
    keep = c < HALF
    cos = tl.load(cache_ptr + pos * 2 * HALF + c, mask=keep, other=0)
    sin = tl.load(cache_ptr + pos * 2 * HALF + HALF + c, mask=keep, other=0)
    row = x_ptr + (t * n_heads + h) * 2 * HALF + c
    x1 = tl.load(row, mask=keep, other=0).to(tl.float32)
    x2 = tl.load(row + HALF, mask=keep, other=0).to(tl.float32)
    tl.store(row, (x1 * cos - x2 * sin).to(x_ptr.dtype.element_ty), mask=keep)
    tl.store(row + HALF, (x2 * cos + x1 * sin).to(x_ptr.dtype.element_ty), mask=keep)


def run(positions, q, k, cos_sin_cache):
    T, n_qh, d = q.shape
    n_kh = k.shape[1]
    half, pad = d // 2, triton.next_power_of_2(d // 2)
    _rope_head[(T, n_qh)](positions, q, cos_sin_cache, n_qh, HALF=half, PAD_HALF=pad, num_warps=1)
    _rope_head[(T, n_kh)](positions, k, cos_sin_cache, n_kh, HALF=half, PAD_HALF=pad, num_warps=1)
    return q, k
