"""After vLLM's unfused Triton path for RMSNorm followed by per-token-group fp8 quantization
(vllm-project/vllm: a row RMSNorm kernel, then `_per_token_group_quant_fp8` in
vllm/model_executor/layers/quantization/utils/fp8_utils.py, Apache-2.0): the norm writes y in
bfloat16 (one program per row, the whole row in a block), then one program per group of 128
reads y, takes its absmax and writes the fp8 values and the scale. Written here for the task's
signature; no code copied."""

import torch
import triton
import triton.language as tl

GROUP = 128


@triton.jit
def _rms_row(x_ptr, w_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    keep = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=keep, other=0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=keep, other=0).to(tl.float32)
    tl.store(y_ptr + row * n_cols + cols, (x * rstd * w).to(tl.bfloat16), mask=keep)


@triton.jit
def _group_quant(y_ptr, q_ptr, s_ptr, GROUP: tl.constexpr):
    g = tl.program_id(0).to(tl.int64)
    offs = g * GROUP + tl.arange(0, GROUP)
    y = tl.load(y_ptr + offs).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(y), axis=0), 1e-10) / 448.0
    tl.store(q_ptr + offs, tl.clamp(y / scale, -448.0, 448.0).to(q_ptr.dtype.element_ty))
    tl.store(s_ptr + g, scale)


def run(x: torch.Tensor, weight: torch.Tensor, eps: float):
    rows, cols = x.shape
    y = torch.empty((rows, cols), dtype=torch.bfloat16, device=x.device)
    block = triton.next_power_of_2(cols)
    _rms_row[(rows,)](x, weight, y, cols, eps, BLOCK=block, num_warps=8 if block >= 2048 else 4)
    q = torch.empty((rows, cols), dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty((rows, cols // GROUP), dtype=torch.float32, device=x.device)
    _group_quant[(rows * (cols // GROUP),)](y, q, scales, GROUP=GROUP, num_warps=1)
    return q, scales
