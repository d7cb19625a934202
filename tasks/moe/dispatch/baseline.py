"""Expert-parallel dispatch on torch.distributed.all_to_all_single (NCCL on NVIDIA, RCCL on
AMD, gloo on CPU), the portable path serving stacks fall back to without DeepEP: compute each
token's destination ranks, exchange the per-rank counts (a host sync, as DeepEP's normal mode
also waits for the count), send every (token, destination) row packed as bytes (fp8 row,
scales, top-K ids and weights, token index; fp8 travels as uint8, which every backend
copies) with computed splits, and unpack locally."""

import torch
import torch.distributed as dist


def run(
    x: torch.Tensor,
    x_scale: torch.Tensor,
    topk_idx: torch.Tensor,
    topk_weights: torch.Tensor,
    num_experts: int,
):
    W, r = dist.get_world_size(), dist.get_rank()
    T, H = x.shape
    G, K = x_scale.shape[1], topk_idx.shape[1]
    El = num_experts // W
    dev = x.device
    dest = topk_idx // El  # [T, K]
    in_rank = (dest.unsqueeze(-1) == torch.arange(W, device=dev)).any(dim=1)  # [T, W]
    pairs = in_rank.t().nonzero()  # (dest, token), dest-major, tokens ascending
    tok = pairs[:, 1]
    send_counts = in_rank.sum(dim=0).to(torch.int64)
    rows = torch.cat(
        [
            x.contiguous().view(torch.uint8),
            x_scale.contiguous().view(torch.uint8),
            topk_idx.contiguous().view(torch.uint8),
            topk_weights.contiguous().view(torch.uint8),
            torch.arange(T, device=dev, dtype=torch.int32).view(T, 1).view(torch.uint8),
        ],
        dim=1,
    )
    send = rows[tok].contiguous()
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)
    in_splits, out_splits = send_counts.tolist(), recv_counts.tolist()
    n = sum(out_splits)
    recv = torch.empty((n, rows.shape[1]), dtype=torch.uint8, device=dev)
    dist.all_to_all_single(recv, send, out_splits, in_splits)

    o = 0
    rx = recv[:, o : o + H]
    o += H
    rs = recv[:, o : o + 4 * G].contiguous().view(torch.float32)
    o += 4 * G
    ri = recv[:, o : o + 8 * K].contiguous().view(torch.int64)
    o += 8 * K
    rw = recv[:, o : o + 4 * K].contiguous().view(torch.float32)
    o += 4 * K
    rt = recv[:, o : o + 4].contiguous().view(torch.int32).flatten()
    local = ri - r * El
    on_r = (local >= 0) & (local < El)
    local = torch.where(on_r, local, torch.full_like(local, -1))

    recv_x = torch.zeros((W * T, H), dtype=torch.uint8, device=dev)
    recv_x[:n] = rx
    recv_scale = torch.zeros((W * T, G), dtype=torch.float32, device=dev)
    recv_scale[:n] = rs
    recv_idx = torch.full((W * T, K), -1, dtype=torch.int64, device=dev)
    recv_idx[:n] = local
    recv_w = torch.zeros((W * T, K), dtype=torch.float32, device=dev)
    recv_w[:n] = torch.where(on_r, rw, torch.zeros_like(rw))
    recv_src = torch.full((W * T,), -1, dtype=torch.int32, device=dev)
    recv_src[:n] = rt
    prefix = torch.cumsum(recv_counts, 0).to(torch.int32)
    per_expert = torch.bincount(local[local >= 0], minlength=El).to(torch.int32)
    return (
        recv_x.view(torch.float8_e4m3fn),
        recv_scale,
        recv_idx,
        recv_w,
        recv_src,
        prefix,
        per_expert,
    )
