"""A portable starting point: one Triton program per ROWS token rows (1 on a GPU; 16 on the
CPU, where the interpreter pays per program), each row of E logits in one block (BLOCK_E =
next power of two ≥ E, masked with -inf), then K rounds of argmax (ties to the lowest
index) on the logits, weights exp(x - max) renormalised over the K. Correct for any T, E,
K; not tuned (default warps, no packing of rows per warp)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _topk_softmax_kernel(
    x_ptr,
    w_ptr,
    id_ptr,
    E,
    stride_x,
    stride_w,
    stride_id,
    T,
    K: tl.constexpr,
    ROWS: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_E)
    row_ok = rows < T
    x = tl.load(
        x_ptr + rows[:, None] * stride_x + cols[None, :],
        mask=row_ok[:, None] & (cols[None, :] < E),
        other=float("-inf"),
    )
    row_max = tl.max(x, axis=1)
    slots = tl.arange(0, BLOCK_K)
    weights = tl.zeros((ROWS, BLOCK_K), dtype=tl.float32)
    ids = tl.zeros((ROWS, BLOCK_K), dtype=tl.int32)
    for j in range(K):
        best = tl.max(x, axis=1)
        # the lowest index among the maxima: ties go to the lowest expert id
        best_id = tl.min(tl.where(x == best[:, None], cols[None, :], BLOCK_E), axis=1)
        weights = tl.where(slots[None, :] == j, tl.exp(best - row_max)[:, None], weights)
        ids = tl.where(slots[None, :] == j, best_id[:, None], ids)
        x = tl.where(cols[None, :] == best_id[:, None], float("-inf"), x)
    weights = weights / tl.sum(weights, axis=1)[:, None]  # unused slots hold 0
    mask = row_ok[:, None] & (slots[None, :] < K)
    tl.store(w_ptr + rows[:, None] * stride_w + slots[None, :], weights, mask=mask)
    tl.store(id_ptr + rows[:, None] * stride_id + slots[None, :], ids, mask=mask)


def run(router_logits: torch.Tensor, top_k: int):
    x = router_logits.contiguous()
    T, E = x.shape
    weights = torch.empty((T, top_k), device=x.device, dtype=torch.float32)
    ids = torch.empty((T, top_k), device=x.device, dtype=torch.int32)
    rows = 16 if x.device.type == "cpu" else 1
    if T > 0:
        _topk_softmax_kernel[(triton.cdiv(T, rows),)](
            x,
            weights,
            ids,
            E,
            x.stride(0),
            weights.stride(0),
            ids.stride(0),
            T,
            K=top_k,
            ROWS=rows,
            BLOCK_E=triton.next_power_of_2(E),
            BLOCK_K=triton.next_power_of_2(top_k),
        )
    return weights, ids
