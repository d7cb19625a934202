"""A portable starting point: one Triton program per ROWS token rows (1 on a GPU; 16 on the
CPU, where the interpreter pays per program). Each row is a [BLOCK_G, BLOCK_GS] tile (group ×
expert within the group, masked), flattened to BLOCK_G·BLOCK_GS columns; the group scores are
the sum of each group's two largest sigmoid(x) + bias, KG rounds of argmax keep the groups,
and K rounds of argmax over the kept experts choose the ids (every argmax takes the lowest
index on ties). Correct for any T, E, G (E/G ≥ 2), KG, K; not tuned (default warps, several
passes over the tile, padded groups)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _grouped_topk_kernel(
    x_ptr,
    bias_ptr,
    w_ptr,
    id_ptr,
    factor,
    stride_x,
    stride_w,
    stride_id,
    T,
    G,
    GS,
    K: tl.constexpr,
    KG: tl.constexpr,
    ROWS: tl.constexpr,
    BLOCK_G: tl.constexpr,
    BLOCK_GS: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < T
    BLOCK: tl.constexpr = BLOCK_G * BLOCK_GS
    col = tl.arange(0, BLOCK)
    g_of = col // BLOCK_GS
    j_of = col % BLOCK_GS
    col_ok = (g_of < G) & (j_of < GS)
    expert = tl.where(col_ok, g_of * GS + j_of, BLOCK)  # padding lanes get an id no expert has
    ok = row_ok[:, None] & col_ok[None, :]
    x = tl.load(x_ptr + rows[:, None] * stride_x + expert[None, :], mask=ok, other=0.0)
    s = 1.0 / (1.0 + tl.exp(-x))
    b = tl.load(bias_ptr + expert, mask=col_ok, other=0.0)
    u = tl.where(ok, s + b[None, :], float("-inf"))  # [ROWS, BLOCK]
    # group score: the sum of the two largest u of each group
    u3 = tl.reshape(u, (ROWS, BLOCK_G, BLOCK_GS))
    j = tl.arange(0, BLOCK_GS)
    first = tl.max(u3, axis=2)
    first_j = tl.min(tl.where(u3 == first[:, :, None], j[None, None, :], BLOCK_GS), axis=2)
    second = tl.max(tl.where(j[None, None, :] == first_j[:, :, None], float("-inf"), u3), axis=2)
    g = tl.arange(0, BLOCK_G)
    gscore = tl.where(g[None, :] < G, first + second, float("-inf"))  # [ROWS, BLOCK_G]
    kept = tl.zeros((ROWS, BLOCK_G), dtype=tl.int32)
    for _ in range(KG):
        best = tl.max(gscore, axis=1)
        best_g = tl.min(tl.where(gscore == best[:, None], g[None, :], BLOCK_G), axis=1)
        hit = g[None, :] == best_g[:, None]
        kept = tl.where(hit, 1, kept)
        gscore = tl.where(hit, float("-inf"), gscore)
    kept_cols = tl.reshape(
        tl.broadcast_to(kept[:, :, None], (ROWS, BLOCK_G, BLOCK_GS)), (ROWS, BLOCK)
    )
    u = tl.where(kept_cols != 0, u, float("-inf"))
    slots = tl.arange(0, BLOCK_K)
    weights = tl.zeros((ROWS, BLOCK_K), dtype=tl.float32)
    ids = tl.zeros((ROWS, BLOCK_K), dtype=tl.int32)
    for i in range(K):
        best = tl.max(u, axis=1)
        best_e = tl.min(tl.where(u == best[:, None], expert[None, :], BLOCK), axis=1)
        pick = expert[None, :] == best_e[:, None]
        chosen_s = tl.sum(tl.where(pick, s, 0.0), axis=1)
        weights = tl.where(slots[None, :] == i, chosen_s[:, None], weights)
        ids = tl.where(slots[None, :] == i, best_e[:, None], ids)
        u = tl.where(pick, float("-inf"), u)
    weights = weights / tl.sum(weights, axis=1)[:, None] * factor
    mask = row_ok[:, None] & (slots[None, :] < K)
    tl.store(w_ptr + rows[:, None] * stride_w + slots[None, :], weights, mask=mask)
    tl.store(id_ptr + rows[:, None] * stride_id + slots[None, :], ids, mask=mask)


def run(router_logits, e_score_correction_bias, top_k, n_group, topk_group, routed_scaling_factor):
    x = router_logits.contiguous()
    bias = e_score_correction_bias.contiguous()
    T, E = x.shape
    gs = E // n_group
    weights = torch.empty((T, top_k), device=x.device, dtype=torch.float32)
    ids = torch.empty((T, top_k), device=x.device, dtype=torch.int32)
    rows = 16 if x.device.type == "cpu" else 1
    if T > 0:
        _grouped_topk_kernel[(triton.cdiv(T, rows),)](
            x,
            bias,
            weights,
            ids,
            float(routed_scaling_factor),
            x.stride(0),
            weights.stride(0),
            ids.stride(0),
            T,
            n_group,
            gs,
            K=top_k,
            KG=topk_group,
            ROWS=rows,
            BLOCK_G=triton.next_power_of_2(n_group),
            BLOCK_GS=triton.next_power_of_2(gs),
            BLOCK_K=triton.next_power_of_2(top_k),
        )
    return weights, ids
