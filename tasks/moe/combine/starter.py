"""A correct, deliberately naive combine: every rank scatters its held rows into a
zero-filled staging buffer [W, T, H] at (source rank, token), exchanges the whole buffer
with an equal-split all_to_all_single (W·T·H elements per rank whatever the counts), and
sums the W slices it receives in float32. Beat it by sending only the held rows, writing
them straight into the source rank's buffer (peer-mapped memory), and reducing as they
arrive."""

import torch
import torch.distributed as dist


def run(x: torch.Tensor, recv_src_idx: torch.Tensor, recv_rank_prefix: torch.Tensor):
    W = dist.get_world_size()
    T, H = x.shape[0] // W, x.shape[1]
    dev = x.device
    prefix = recv_rank_prefix.to(torch.int64)
    n = int(prefix[-1])
    source = torch.repeat_interleave(
        torch.arange(W, device=dev), torch.diff(prefix, prepend=prefix.new_zeros(1))
    )
    staging = torch.zeros((W, T, H), dtype=x.dtype, device=dev)
    staging.view(W * T, H)[source * T + recv_src_idx[:n].long()] = x[:n]
    back = torch.empty_like(staging)
    dist.all_to_all_single(back, staging)  # back[q] = what rank q held of my tokens
    return back.float().sum(dim=0).to(x.dtype)
