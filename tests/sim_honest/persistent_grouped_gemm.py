"""Honest: a persistent grouped GEMM for tasks/gemm/bf16_grouped_gemm, scheduled as the Triton
tutorial's grouped GEMM is (python/tutorials/08-grouped-gemm.py): one program per SM, each
walking every group's tiles in turn with a stride of the program count. The tile index and the
running count of tiles and rows are carried from one group to the next, and a `while` reads
them: a loop that skipped groups (a counting pass's sample) would do other work than the GPU
(core/harness/sim/steering.py). Written for this repository's tests; no code copied."""

import torch
import triton
import triton.language as tl


@triton.jit
def _grouped_tiles(
    a_ptr,
    b_ptr,
    offs_ptr,
    out_ptr,
    E,
    N,
    K,
    PROGRAMS: tl.constexpr,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
):
    tile = tl.program_id(0)
    tiles_n = tl.cdiv(N, BN)
    seen = 0
    first = 0
    for g in range(0, E):
        last = tl.load(offs_ptr + g)
        tiles = tl.cdiv(last - first, BM) * tiles_n
        while tile >= seen and tile < seen + tiles:
            local = tile - seen
            rm = first + (local // tiles_n) * BM + tl.arange(0, BM)
            rn = (local % tiles_n) * BN + tl.arange(0, BN)
            rk = tl.arange(0, BK)
            acc = tl.zeros([BM, BN], dtype=tl.float32)
            for k in range(0, K, BK):
                a = tl.load(
                    a_ptr + rm[:, None] * K + (k + rk)[None, :],
                    mask=(rm[:, None] < last) & ((k + rk)[None, :] < K),
                    other=0.0,
                )
                b = tl.load(
                    b_ptr + g * N * K + rn[None, :] * K + (k + rk)[:, None],
                    mask=(rn[None, :] < N) & ((k + rk)[:, None] < K),
                    other=0.0,
                )
                acc = tl.dot(a, b, acc)
            tl.store(
                out_ptr + rm[:, None] * N + rn[None, :],
                acc.to(out_ptr.dtype.element_ty),
                mask=(rm[:, None] < last) & (rn[None, :] < N),
            )
            tile += PROGRAMS
        seen += tiles
        first = last


def run(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    E, N, _ = b.shape
    out = torch.empty((M, N), dtype=a.dtype, device=a.device)
    programs = 132  # an H200's SMs (the tutorial asks the device)
    _grouped_tiles[(programs,)](a, b, offs, out, E, N, K, PROGRAMS=programs, BM=64, BN=64, BK=32)
    return out
