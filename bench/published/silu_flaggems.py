"""Published-kernel bench set (bench/published/README.md): silu_and_mul as FlagGems writes it,
as a candidate for tasks/activation/silu_mul.

After FlagOpen/FlagGems, src/flag_gems/fused/silu_and_mul.py (Apache-2.0): x promoted to
float32, silu(x) = x / (1 + exp(-x)), times y, stored in the output dtype. FlagGems generates a
pointwise kernel over 2-D tiles; here the tile shape is chosen by @triton.autotune over six
configurations (key: the row and column counts). Rewritten for this task's signature; no code
copied."""

import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 1, "BLOCK_N": 1024}, num_warps=4),
        triton.Config({"BLOCK_M": 1, "BLOCK_N": 2048}, num_warps=8),
        triton.Config({"BLOCK_M": 4, "BLOCK_N": 512}, num_warps=4),
        triton.Config({"BLOCK_M": 8, "BLOCK_N": 256}, num_warps=4),
        triton.Config({"BLOCK_M": 16, "BLOCK_N": 128}, num_warps=4),
        triton.Config({"BLOCK_M": 2, "BLOCK_N": 4096}, num_warps=16),
    ],
    key=["n_rows", "n_cols"],
)
@triton.jit
def _silu_and_mul_tiles(
    x_ptr, out_ptr, n_rows, n_cols, stride_x, stride_o, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr
):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    keep = (rows < n_rows) & (cols < n_cols)
    gate = tl.load(x_ptr + rows * stride_x + cols, mask=keep, other=0).to(tl.float32)
    up = tl.load(x_ptr + rows * stride_x + n_cols + cols, mask=keep, other=0).to(tl.float32)
    act = gate / (1.0 + tl.exp(-gate)) * up
    tl.store(out_ptr + rows * stride_o + cols, act.to(out_ptr.dtype.element_ty), mask=keep)


def run(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    rows, width = x.shape
    half = width // 2
    out = torch.empty((rows, half), dtype=x.dtype, device=x.device)
    if rows and half:

        def grid(meta):
            return (triton.cdiv(rows, meta["BLOCK_M"]), triton.cdiv(half, meta["BLOCK_N"]))

        _silu_and_mul_tiles[grid](x, out, rows, half, x.stride(0), out.stride(0))
    return out
