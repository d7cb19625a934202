"""A correct, deliberately naive starting point: all-gather every rank's whole x (each rank
receives (W − 1)·S bytes), sum the W copies and the residual in float32, round the
residual stream to bfloat16 once, and normalise it in float32 in plain torch (several
passes over memory). Beat it with one kernel that reads the peers' x directly (one-shot over
peer-mapped buffers for decode sizes, reduce-scatter + norm + all-gather for larger T) and
fuses the add and the norm into the reduction."""

import torch
import torch.distributed as dist


def run(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float):
    W = dist.get_world_size()
    x = x.contiguous()
    # [W·T, H]: gloo's all_gather_into_tensor takes only the concatenated layout
    gathered = torch.empty((W * x.shape[0],) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(gathered, x)
    gathered = gathered.view((W,) + tuple(x.shape))
    residual_out = (gathered.float().sum(dim=0) + residual.float()).to(residual.dtype)
    r = residual_out.float()
    out = r * torch.rsqrt(r.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.float()
    return out.to(x.dtype), residual_out
