"""Expert-parallel combine on torch.distributed.all_to_all_single (NCCL on NVIDIA, RCCL on
AMD, gloo on CPU), the portable path without DeepEP: the send splits are the handle's
per-source counts, the receive splits come from a count exchange (a host sync), each row
travels with its token index packed as bytes, and the source rank sums the copies in float32
with index_add_."""

import torch
import torch.distributed as dist


def run(x: torch.Tensor, recv_src_idx: torch.Tensor, recv_rank_prefix: torch.Tensor):
    W = dist.get_world_size()
    T, H = x.shape[0] // W, x.shape[1]
    dev = x.device
    prefix = recv_rank_prefix.to(torch.int64)
    send_counts = torch.diff(prefix, prepend=prefix.new_zeros(1))
    n = int(prefix[-1])
    send = torch.cat(
        [
            x[:n].contiguous().view(torch.uint8),
            recv_src_idx[:n].contiguous().view(n, 1).view(torch.uint8),
        ],
        dim=1,
    )
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)
    in_splits, out_splits = send_counts.tolist(), recv_counts.tolist()
    m = sum(out_splits)
    recv = torch.empty((m, send.shape[1]), dtype=torch.uint8, device=dev)
    dist.all_to_all_single(recv, send, out_splits, in_splits)
    rows = recv[:, : 2 * H].contiguous().view(torch.bfloat16)
    tok = recv[:, 2 * H :].contiguous().view(torch.int32).flatten().long()
    out = torch.zeros((T, H), dtype=torch.float32, device=dev)
    out.index_add_(0, tok, rows.float())
    return out.to(torch.bfloat16)
