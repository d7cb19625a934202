"""After the fused per-head q/k RMSNorm + RoPE kernels of SGLang and vLLM (sgl-project/sglang
and vllm-project/vllm, `fused_qk_norm_rope`, Apache-2.0): one launch, one program per (token,
head) over q's heads then k's, each normalising its head vector in float32 with its weight and
rotating it (neox halves) before one store in place; no intermediate is written. Written here
in Triton for the task's signature; no code copied."""

import triton
import triton.language as tl


@triton.jit
def _qknorm_rope(
    pos_ptr,
    q_ptr,
    k_ptr,
    qw_ptr,
    kw_ptr,
    cache_ptr,
    n_qh,
    n_kh,
    eps,
    HALF: tl.constexpr,
):
    t = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    pos = tl.load(pos_ptr + t)
    c = tl.arange(0, HALF)
    cos = tl.load(cache_ptr + pos * 2 * HALF + c)
    sin = tl.load(cache_ptr + pos * 2 * HALF + HALF + c)
    is_q = h < n_qh
    if is_q:
        row = q_ptr + (t * n_qh + h) * 2 * HALF + c
        w_ptr = qw_ptr
    else:
        row = k_ptr + (t * n_kh + (h - n_qh)) * 2 * HALF + c
        w_ptr = kw_ptr
    x1 = tl.load(row).to(tl.float32)
    x2 = tl.load(row + HALF).to(tl.float32)
    rstd = tl.rsqrt((tl.sum(x1 * x1, axis=0) + tl.sum(x2 * x2, axis=0)) / (2 * HALF) + eps)
    n1 = x1 * rstd * tl.load(w_ptr + c).to(tl.float32)
    n2 = x2 * rstd * tl.load(w_ptr + HALF + c).to(tl.float32)
    tl.store(row, (n1 * cos - n2 * sin).to(q_ptr.dtype.element_ty))
    tl.store(row + HALF, (n2 * cos + n1 * sin).to(q_ptr.dtype.element_ty))


def run(positions, q, k, q_weight, k_weight, cos_sin_cache, eps):
    T, n_qh, d = q.shape
    n_kh = k.shape[1]
    _qknorm_rope[(T, n_qh + n_kh)](
        positions,
        q,
        k,
        q_weight,
        k_weight,
        cos_sin_cache,
        n_qh,
        n_kh,
        eps,
        HALF=d // 2,
        num_warps=1,
    )
    return q, k
