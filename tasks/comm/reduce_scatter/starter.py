"""A correct, deliberately naive reduce-scatter: all-reduce a copy of the whole [W·T, H]
buffer and keep this rank's chunk, moving 2(W − 1)/W·S bytes per rank where (W − 1)/W·S
suffice and reducing W chunks where one is needed. Beat it with a real reduce-scatter: a
ring, or a direct schedule where each rank pulls its chunk from every peer (peer-mapped
buffers, NVLS multimem.ld_reduce) and sums once in float32."""

import torch
import torch.distributed as dist


def run(x: torch.Tensor):
    W, rank = dist.get_world_size(), dist.get_rank()
    T = x.shape[0] // W
    buf = x.clone()
    dist.all_reduce(buf, op=dist.ReduceOp.SUM)
    return buf[rank * T : (rank + 1) * T].contiguous()
