"""Best first (task.yaml `baselines:`): Liger's fused add + RMSNorm Triton kernel (one
kernel writes the sum and the normalised row); else the torch composition: a bf16 add
(computed in float32, rounded once) and torch.nn.functional.rms_norm, two kernels and an
extra round trip of the residual. `IMPL` names the one the last call used."""

import os

import torch
import torch.nn.functional as F

try:
    from liger_kernel.ops.fused_add_rms_norm import fused_add_rms_norm_forward as _liger_add_rms
except Exception:  # noqa: BLE001 - not installed, or its Triton cannot load here
    _liger_add_rms = None

IMPL = "torch"


def _liger(x, residual, weight, eps):
    out, residual_out = _liger_add_rms(x, residual, weight, eps, 0.0, "gemma")[:2]
    return out, residual_out


def _torch(x, residual, weight, eps):
    residual_out = x + residual
    out = F.rms_norm(residual_out, (residual_out.shape[-1],), weight, eps)
    return out, residual_out


def _gpu(x: torch.Tensor) -> bool:
    """A GPU, or a simulated one (`sim:` devices set ARENA_SIM_GPU in the candidate's process):
    Liger's kernels are Triton, which the simulator counts in its interpreter, so `sim:h200`
    predicts the kernel the H200 runs and was measured with."""
    return x.is_cuda or bool(os.environ.get("ARENA_SIM_GPU"))


IMPLS = {"liger": _liger if _liger_add_rms else None, "torch": _torch}


def run(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float):
    global IMPL
    IMPL = "liger" if _gpu(x) and _liger_add_rms is not None else "torch"
    return IMPLS[IMPL](x, residual, weight, eps)
