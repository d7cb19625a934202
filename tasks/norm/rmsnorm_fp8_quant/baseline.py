"""Best first (task.yaml `baselines:`): Liger's Triton RMSNorm (bfloat16 out), then the
per-token-group quantization in torch; else torch.nn.functional.rms_norm, then the same
quantization (one absmax kernel per group via vector_norm(ord=inf), the scale, one
division written as fp8). The fused production kernels (vLLM's rms_norm_per_block_quant, aiter's
rmsnorm + quant) need vLLM or aiter builds that are not on the measured image.
`IMPL` names the one the last call used (the result's baseline_impl)."""

import os

import torch
import torch.nn.functional as F

try:
    from liger_kernel.ops.rms_norm import rms_norm_forward as _liger_rms
except Exception:  # noqa: BLE001 - not installed, or its Triton cannot load here
    _liger_rms = None

GROUP = 128
FP8 = torch.float8_e4m3fn
FP8_MAX = torch.finfo(FP8).max
IMPL = "torch"


def _quant(y: torch.Tensor):
    T, H = y.shape
    g = y.view(T, H // GROUP, GROUP)
    scale = (
        torch.linalg.vector_norm(g, float("inf"), dim=-1, dtype=torch.float32)
        .clamp_min_(1e-10)
        .div_(FP8_MAX)
    )
    # One pass: the quotient is computed in float32 and stored as fp8. No clamp is needed:
    # |y| / (absmax / 448) is at most 448 up to rounding, and float8_e4m3fn rounds anything
    # below 480 to at most 448.
    q = torch.empty(g.shape, dtype=FP8, device=y.device)
    torch.div(g, scale.unsqueeze(-1), out=q)
    return q.view(T, H), scale


def _liger(x, weight, eps):
    return _quant(_liger_rms(x, weight, eps, 0.0, "gemma", False)[0])


def _torch(x, weight, eps):
    return _quant(F.rms_norm(x, (x.shape[-1],), weight, eps))


def _gpu(x: torch.Tensor) -> bool:
    """A GPU, or a simulated one (`sim:` devices set ARENA_SIM_GPU in the candidate's process):
    Liger's kernels are Triton, which the simulator counts in its interpreter, so `sim:h200`
    predicts the kernel the H200 runs and was measured with."""
    return x.is_cuda or bool(os.environ.get("ARENA_SIM_GPU"))


IMPLS = {"liger": _liger if _liger_rms else None, "torch": _torch}


def run(x: torch.Tensor, weight: torch.Tensor, eps: float):
    global IMPL
    IMPL = "liger" if _gpu(x) and _liger_rms is not None else "torch"
    return IMPLS[IMPL](x, weight, eps)
