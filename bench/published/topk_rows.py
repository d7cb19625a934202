"""Published-kernel bench set (bench/published/README.md): softmax top-k routing with several
rows per program, as SGLang's Triton MoE routing packs them, as a candidate for
tasks/moe/route_topk_softmax.

After sgl-project/sglang's fused top-k routing kernels (Apache-2.0): ROWS token rows per
program as one [ROWS, E] tile, K rounds of a row-wise argmax on the logits (ties to the lowest
expert), the chosen logits' softmax as the weights. ROWS and the warps are chosen by
@triton.autotune over six configurations (key: tokens and experts). No code copied."""

import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"ROWS": 1}, num_warps=1),
        triton.Config({"ROWS": 2}, num_warps=1),
        triton.Config({"ROWS": 4}, num_warps=2),
        triton.Config({"ROWS": 8}, num_warps=4),
        triton.Config({"ROWS": 16}, num_warps=4),
        triton.Config({"ROWS": 32}, num_warps=8),
    ],
    key=["T", "E"],
)
@triton.jit
def _topk_rows(
    x_ptr,
    w_ptr,
    id_ptr,
    T,
    E,
    stride_x,
    stride_w,
    stride_id,
    K: tl.constexpr,
    ROWS: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_E)
    ok = rows < T
    x = tl.load(
        x_ptr + rows[:, None] * stride_x + cols[None, :],
        mask=ok[:, None] & (cols[None, :] < E),
        other=float("-inf"),
    )
    slots = tl.arange(0, BLOCK_K)
    logit = tl.full((ROWS, BLOCK_K), float("-inf"), dtype=tl.float32)
    ids = tl.zeros((ROWS, BLOCK_K), dtype=tl.int32)
    for j in range(K):
        best = tl.max(x, axis=1)
        best_id = tl.min(tl.where(x == best[:, None], cols[None, :], BLOCK_E), axis=1)
        logit = tl.where(slots[None, :] == j, best[:, None], logit)
        ids = tl.where(slots[None, :] == j, best_id[:, None], ids)
        x = tl.where(cols[None, :] == best_id[:, None], float("-inf"), x)
    e = tl.exp(logit - tl.max(logit, axis=1)[:, None])
    w = e / tl.sum(e, axis=1)[:, None]
    keep = ok[:, None] & (slots[None, :] < K)
    tl.store(w_ptr + rows[:, None] * stride_w + slots[None, :], w, mask=keep)
    tl.store(id_ptr + rows[:, None] * stride_id + slots[None, :], ids, mask=keep)


def run(router_logits: torch.Tensor, top_k: int):
    x = router_logits.contiguous()
    T, E = x.shape
    weights = torch.empty((T, top_k), device=x.device, dtype=torch.float32)
    ids = torch.empty((T, top_k), device=x.device, dtype=torch.int32)
    if T:

        def grid(meta):
            return (triton.cdiv(T, meta["ROWS"]),)

        _topk_rows[grid](
            x,
            weights,
            ids,
            T,
            E,
            x.stride(0),
            weights.stride(0),
            ids.stride(0),
            K=top_k,
            BLOCK_E=triton.next_power_of_2(E),
            BLOCK_K=triton.next_power_of_2(top_k),
        )
    return weights, ids
