"""A correct, deliberately naive all-gather: every rank writes its x into its own slot of a
zero-filled [W·T, H] buffer and all-reduces the whole buffer (x + 0 is exact in bfloat16), so
each rank moves 2(W − 1)/W·S bytes instead of (W − 1)/W·S and pays for a reduction it does not
need. Beat it with a real gather: a ring or direct copies from peer-mapped buffers (CUDA
IPC, symmetric memory, copy engines), one pass over memory."""

import torch
import torch.distributed as dist


def run(x: torch.Tensor):
    W, rank = dist.get_world_size(), dist.get_rank()
    T = x.shape[0]
    buf = torch.zeros((W * T,) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device)
    buf[rank * T : (rank + 1) * T] = x
    dist.all_reduce(buf, op=dist.ReduceOp.SUM)
    return buf
