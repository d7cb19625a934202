"""After the Triton tutorial's grouped GEMM (triton-lang/triton,
python/tutorials/08-grouped-gemm.py, MIT): a persistent kernel, as many programs as the GPU has
multiprocessors, that walks the tiles of every group in turn with a stride of the program count
(each group's row count read from the offsets on the device), 128 x 128 tiles with 64-wide K
steps, 4 warps. Written here for the task's ragged groups (rows offs[g-1] .. offs[g] of a times
b[g]ᵀ); no code copied."""

import torch
import triton
import triton.language as tl


@triton.jit
def _grouped(
    a_ptr,
    b_ptr,
    offs_ptr,
    y_ptr,
    n_groups,
    N,
    K,
    n_programs,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
):
    tile = tl.program_id(0)
    tiles_n = tl.cdiv(N, BN)
    seen = 0
    start_row = 0
    for g in range(0, n_groups):
        end_row = tl.load(offs_ptr + g)
        rows = end_row - start_row
        tiles = tl.cdiv(rows, BM) * tiles_n
        while tile >= seen and tile < seen + tiles:
            local = tile - seen
            rm = start_row + (local // tiles_n) * BM + tl.arange(0, BM)
            rn = (local % tiles_n) * BN + tl.arange(0, BN)
            rk = tl.arange(0, BK)
            acc = tl.zeros([BM, BN], dtype=tl.float32)
            for k in range(0, K, BK):
                a = tl.load(
                    a_ptr + rm[:, None].to(tl.int64) * K + (k + rk)[None, :],
                    mask=(rm[:, None] < end_row) & ((k + rk)[None, :] < K),
                    other=0,
                )
                b = tl.load(
                    b_ptr + (g * N).to(tl.int64) * K + rn[None, :] * K + (k + rk)[:, None],
                    mask=(rn[None, :] < N) & ((k + rk)[:, None] < K),
                    other=0,
                )
                acc = tl.dot(a, b, acc)
            tl.store(
                y_ptr + rm[:, None].to(tl.int64) * N + rn[None, :],
                acc.to(y_ptr.dtype.element_ty),
                mask=(rm[:, None] < end_row) & (rn[None, :] < N),
            )
            tile += n_programs
        seen += tiles
        start_row = end_row


def run(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    E, N, _ = b.shape
    y = torch.empty((M, N), dtype=a.dtype, device=a.device)
    programs = 132  # the H200's multiprocessors (the tutorial asks the device)
    _grouped[(programs,)](a, b, offs, y, E, N, K, programs, BM=128, BN=128, BK=64, num_warps=4)
    return y
