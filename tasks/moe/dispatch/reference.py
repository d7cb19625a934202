"""DeepEP normal-mode dispatch in one process (no torch.distributed).

Rank r holds experts r·E_l .. (r + 1)·E_l − 1 (E_l = E / W). Source rank s sends token t to
rank r once if any of its K experts lives on r. Rank r receives, in the canonical order
(source rank ascending, then token index ascending), one row per (s, t) sent to it: the fp8
row and its scales, the token's top-K ids mapped to r's local ids (−1 where the expert is not
on r), the weights (0 where the id is −1), and the token's index t in its source rank.
Outputs are padded to the worst case W·T rows; rows at or beyond the received count are zero
here and free for a candidate (check.py ignores them). recv_x is returned as bfloat16 holding
the fp8 values exactly (check.py converts it back bit for bit)."""

import torch


def run_all(inputs_by_rank: list[list]) -> list:
    W = len(inputs_by_rank)
    x0, s0, idx0, w0, E = inputs_by_rank[0]
    T, H = x0.shape
    G, K = s0.shape[1], idx0.shape[1]
    El = E // W
    dev = x0.device
    results = []
    for r in range(W):
        xs, ss, ids, ws, srcs, counts = [], [], [], [], [], []
        for x, scale, topk_idx, topk_w, _ in inputs_by_rank:
            local = topk_idx - r * El
            on_r = (local >= 0) & (local < El)
            tok = on_r.any(dim=1).nonzero().flatten()
            counts.append(tok.numel())
            xs.append(x.view(torch.uint8)[tok])
            ss.append(scale[tok])
            ids.append(torch.where(on_r, local, torch.full_like(local, -1))[tok])
            ws.append(torch.where(on_r, topk_w, torch.zeros_like(topk_w))[tok])
            srcs.append(tok.to(torch.int32))
        n = sum(counts)
        recv_x = torch.zeros(W * T, H, dtype=torch.uint8, device=dev)
        recv_x[:n] = torch.cat(xs)
        recv_scale = torch.zeros(W * T, G, dtype=torch.float32, device=dev)
        recv_scale[:n] = torch.cat(ss)
        recv_idx = torch.full((W * T, K), -1, dtype=torch.int64, device=dev)
        recv_idx[:n] = torch.cat(ids)
        recv_w = torch.zeros(W * T, K, dtype=torch.float32, device=dev)
        recv_w[:n] = torch.cat(ws)
        recv_src = torch.full((W * T,), -1, dtype=torch.int32, device=dev)
        recv_src[:n] = torch.cat(srcs)
        prefix = torch.cumsum(torch.tensor(counts, dtype=torch.int64, device=dev), 0).to(
            torch.int32
        )
        live = recv_idx[:n]
        per_expert = torch.bincount(live[live >= 0], minlength=El).to(torch.int32)
        # recv_x as bfloat16 (fp8 values are exact in bfloat16): the validator cannot test fp8 for NaN
        results.append(
            (
                recv_x.view(torch.float8_e4m3fn).to(torch.bfloat16),
                recv_scale,
                recv_idx,
                recv_w,
                recv_src,
                prefix,
                per_expert,
            )
        )
    return results
