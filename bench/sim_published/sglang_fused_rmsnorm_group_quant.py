"""After SGLang's fused RMSNorm + per-token-group quantization (sgl-project/sglang, the fused
norm-quant Triton kernels in python/sglang/srt/layers/quantization/, Apache-2.0): one program
per row holds the whole row as a [H / 128, 128] tile, computes the mean square in float32, then
each group's absmax along the tile's second axis, and writes the fp8 row and its H / 128 scales
in one pass. Written here for the task's signature; no code copied."""

import torch
import triton
import triton.language as tl

GROUP = 128


@triton.jit
def _rms_group_quant(
    x_ptr, w_ptr, q_ptr, s_ptr, n_cols, n_groups, eps, GROUPS: tl.constexpr, GROUP: tl.constexpr
):
    row = tl.program_id(0).to(tl.int64)
    gi = tl.arange(0, GROUPS)[:, None]
    ci = tl.arange(0, GROUP)[None, :]
    keep = gi < n_groups
    offs = gi * GROUP + ci
    x = tl.load(x_ptr + row * n_cols + offs, mask=keep, other=0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(tl.sum(x * x, axis=1), axis=0) / n_cols + eps)
    w = tl.load(w_ptr + offs, mask=keep, other=0).to(tl.float32)
    y = x * rstd * w
    scale = tl.maximum(tl.max(tl.abs(y), axis=1), 1e-10) / 448.0
    q = tl.clamp(y / scale[:, None], -448.0, 448.0)
    tl.store(q_ptr + row * n_cols + offs, q.to(q_ptr.dtype.element_ty), mask=keep)
    g1 = tl.arange(0, GROUPS)
    tl.store(s_ptr + row * n_groups + g1, scale, mask=g1 < n_groups)


def run(x: torch.Tensor, weight: torch.Tensor, eps: float):
    rows, cols = x.shape
    groups = cols // GROUP
    q = torch.empty((rows, cols), dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty((rows, groups), dtype=torch.float32, device=x.device)
    block = triton.next_power_of_2(groups)
    _rms_group_quant[(rows,)](
        x,
        weight,
        q,
        scales,
        cols,
        groups,
        eps,
        GROUPS=block,
        GROUP=GROUP,
        num_warps=8 if cols >= 2048 else 4,
    )
    return q, scales
