"""A portable starting point: one Triton program per row, streaming the row in BLOCK-sized
chunks, with no sort:

Each program takes ROWS rows as a [ROWS, BLOCK] tile (ROWS = 1 on a GPU); a row that fits
one block is loaded once and kept in registers, a longer one is streamed by every pass:
1. the row max m (for a stable softmax);
2. the k-th largest logit, by bisection over the 32-bit ordered integer keys of the float32
   logits (32 passes counting keys ≥ mid; exact, ties at the k-th value all kept);
3. the top-k mass Z_k = Σ exp(l − m) over kept tokens;
4. the top-p threshold, by bisection over the same keys: the largest key t such that the
   mass of tokens with key ≥ t reaches top_p · Z_k (the smallest most-probable set; ties kept);
5. the draw: u · Z_p with u uniform from torch.rand on the host, found by a running
   cumulative sum in index order (tl.cumsum per chunk).

Correct for any B and V; slow (about 70 passes over each row) and not tuned: production
kernels (FlashInfer) use rejection sampling with pivots, or a radix select, and spread a
128k-token row over a whole block of threads."""

import torch
import triton
import triton.language as tl


@triton.jit
def _key(x):
    """float32 -> int32 keys with the same order (negative floats have their magnitude bits flipped)."""
    b = x.to(tl.int32, bitcast=True)
    return b ^ ((b >> 31) & 0x7FFFFFFF)


@triton.jit
def _chunk(base, start, cols, rmask, V):
    """Columns [start, start + BLOCK) of the rows: the logits (-inf past V), their keys, the mask."""
    msk = rmask[:, None] & (start + cols < V)
    x = tl.load(base + start + cols, mask=msk, other=-float("inf"))
    return x, _key(x).to(tl.int64), msk


@triton.jit
def _sample_kernel(
    logits_ptr,
    topk_ptr,
    topp_ptr,
    u_ptr,
    out_ptr,
    B,
    V,
    stride,
    ROWS: tl.constexpr,
    BLOCK: tl.constexpr,
    ONE_BLOCK: tl.constexpr,
):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    rmask = rows < B
    base = logits_ptr + rows.to(tl.int64)[:, None] * stride  # [ROWS, 1]
    k = tl.load(topk_ptr + rows, mask=rmask, other=1)
    top_p = tl.load(topp_ptr + rows, mask=rmask, other=1.0)
    u = tl.load(u_ptr + rows, mask=rmask, other=0.0)
    cols = tl.arange(0, BLOCK)[None, :]
    # A row that fits one block (ONE_BLOCK: V <= BLOCK) is loaded once and kept in registers;
    # a longer one is streamed again by every pass below.
    if ONE_BLOCK:
        x, key, msk = _chunk(base, 0, cols, rmask, V)

    # 1. the row max, kept per column and reduced once after the loop: a loop-carried
    # `m = max(m, tl.max(x))` used more than once after it fails Triton 3.6's compile for
    # NVIDIA GPUs (TritonGPUOptimizeThreadLocality: "loopResult.hasOneUse()").
    m = tl.full((ROWS, BLOCK), -float("inf"), tl.float32)
    for start in range(0, V, BLOCK):
        if not ONE_BLOCK:
            x, key, msk = _chunk(base, start, cols, rmask, V)
        m = tl.maximum(m, x)
    m = tl.max(m, axis=1)
    kmax = _key(m).to(tl.int64)

    # 2. the k-th largest key: the largest t with count(key >= t) >= k (33 halvings of 2^32)
    lo = tl.full((ROWS,), -2147483648, tl.int64)
    hi = kmax
    for _ in range(33):
        mid = lo + (hi - lo + 1) // 2
        cnt = tl.zeros((ROWS,), tl.int32)
        for start in range(0, V, BLOCK):
            if not ONE_BLOCK:
                x, key, msk = _chunk(base, start, cols, rmask, V)
            cnt += tl.sum(((key >= mid[:, None]) & msk).to(tl.int32), axis=1)
        ge = cnt >= k
        lo = tl.where(ge, mid, lo)
        hi = tl.where(ge, hi, mid - 1)
    tk = lo

    # 3. the top-k mass
    zk = tl.zeros((ROWS,), tl.float32)
    for start in range(0, V, BLOCK):
        if not ONE_BLOCK:
            x, key, msk = _chunk(base, start, cols, rmask, V)
        zk += tl.sum(tl.where((key >= tk[:, None]) & msk, tl.exp(x - m[:, None]), 0.0), axis=1)

    # 4. the top-p threshold: the largest t >= tk with mass(key >= t) >= top_p * zk
    lo = tk
    hi = kmax
    for _ in range(33):
        mid = lo + (hi - lo + 1) // 2
        mass = tl.zeros((ROWS,), tl.float32)
        for start in range(0, V, BLOCK):
            if not ONE_BLOCK:
                x, key, msk = _chunk(base, start, cols, rmask, V)
            mass += tl.sum(
                tl.where((key >= mid[:, None]) & msk, tl.exp(x - m[:, None]), 0.0), axis=1
            )
        ge = (mass >= top_p * zk) | (top_p >= 1.0)
        lo = tl.where(ge, mid, lo)
        hi = tl.where(ge, hi, mid - 1)
    tp = tl.where(top_p >= 1.0, tk, lo)

    zp = tl.zeros((ROWS,), tl.float32)
    for start in range(0, V, BLOCK):
        if not ONE_BLOCK:
            x, key, msk = _chunk(base, start, cols, rmask, V)
        zp += tl.sum(tl.where((key >= tp[:, None]) & msk, tl.exp(x - m[:, None]), 0.0), axis=1)

    # 5. the draw: the first kept index whose running mass exceeds u * zp
    target = (u * zp)[:, None]
    running = tl.zeros((ROWS,), tl.float32)
    chosen = tl.full((ROWS,), -1, tl.int32)
    last = tl.full((ROWS,), -1, tl.int32)
    BIG: tl.constexpr = 2147483647
    for start in range(0, V, BLOCK):
        if not ONE_BLOCK:
            x, key, msk = _chunk(base, start, cols, rmask, V)
        idx = start + cols
        keep = (key >= tp[:, None]) & msk
        w = tl.where(keep, tl.exp(x - m[:, None]), 0.0)
        c = running[:, None] + tl.cumsum(w, axis=1)
        cand = tl.min(tl.where(keep & (c > target), idx, BIG), axis=1)
        chosen = tl.where((chosen < 0) & (cand < BIG), cand, chosen)
        last = tl.maximum(last, tl.max(tl.where(keep, idx, -1), axis=1))
        running += tl.sum(w, axis=1)
    chosen = tl.where(chosen < 0, last, chosen)  # u·zp at the very top, lost to rounding
    tl.store(out_ptr + rows, chosen.to(tl.int64), mask=rmask)


def run(logits: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor):
    B, V = logits.shape
    logits = logits.contiguous().float()
    u = torch.rand((B,), device=logits.device, dtype=torch.float32)
    out = torch.empty((B,), device=logits.device, dtype=torch.int64)
    # ROWS rows per program share each instruction: 1 on a GPU (one row per program), 128 under
    # the CPU interpreter, whose cost is per instruction, not per element, while a row fits one
    # block. Vocabulary-sized rows on the CPU (a sim: device counting at GPU size) take the
    # GPU's layout, so the configuration predicted is the one a GPU runs.
    ROWS = 128 if logits.device.type == "cpu" and V <= 8192 else 1
    # A [ROWS, BLOCK] tile stays within Triton's 2^20 elements per tensor.
    BLOCK = min(triton.next_power_of_2(V), 8192 if ROWS > 1 else 4096)
    _sample_kernel[(triton.cdiv(B, ROWS),)](
        logits,
        top_k.contiguous(),
        top_p.contiguous(),
        u,
        out,
        B,
        V,
        logits.stride(0),
        ROWS=ROWS,
        BLOCK=BLOCK,
        ONE_BLOCK=V <= BLOCK,
    )
    return out
