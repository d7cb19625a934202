"""A correct, deliberately naive all-reduce: all-gather every rank's whole buffer (each rank
receives (W − 1)·S bytes instead of the 2(W − 1)/W·S of a ring), then sum the W copies
locally in float32 and round once. Beat it with a reduce-scatter + all-gather schedule, a
one-shot or two-shot kernel over peer-mapped buffers (CUDA IPC / symmetric memory, NVLS
multimem on NVSwitch), and no extra passes over memory."""

import torch
import torch.distributed as dist


def run(x: torch.Tensor):
    W = dist.get_world_size()
    x = x.contiguous()
    # [W·T, H]: gloo's all_gather_into_tensor takes only the concatenated layout
    gathered = torch.empty((W * x.shape[0],) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(gathered, x)
    gathered = gathered.view((W,) + tuple(x.shape))
    return gathered.float().sum(dim=0).to(x.dtype)
