"""Best first (task.yaml `baselines:`): Liger's fused gate-up SwiGLU kernel (bfloat16 y),
then the per-token-group quantization in torch; else F.silu(gate) * up (two kernels), then
the same quantization. The quantization: one absmax kernel per group (vector_norm with
ord=inf in float32), the scale, y / scale clamped and cast to float8_e4m3fn. The fused
production kernels (vLLM's silu_mul_per_token_group_quant_fp8, aiter's act_and_mul + quant)
need vLLM or aiter builds that are not on the measured image (task.yaml says why).
`IMPL` names the one the last call used (the result's baseline_impl)."""

import os

import torch
import torch.nn.functional as F

try:
    from liger_kernel.ops.swiglu import swiglu_fused_gate_up_forward as _liger_swiglu
except Exception:  # noqa: BLE001 - not installed, or its Triton cannot load here
    _liger_swiglu = None

GROUP = 128
FP8 = torch.float8_e4m3fn
FP8_MAX = torch.finfo(FP8).max
IMPL = "torch"


def _quant(y: torch.Tensor):
    T, inter = y.shape
    g = y.view(T, inter // GROUP, GROUP)
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
    return q.view(T, inter), scale


def _liger(x: torch.Tensor):
    return _quant(_liger_swiglu(x)[1])


def _torch(x: torch.Tensor):
    inter = x.shape[-1] // 2
    return _quant(F.silu(x[:, :inter]) * x[:, inter:])


def _gpu(x: torch.Tensor) -> bool:
    """A GPU, or a simulated one (`sim:` devices set ARENA_SIM_GPU in the candidate's process):
    Liger's kernels are Triton, which the simulator counts in its interpreter, so `sim:h200`
    predicts the kernel the H200 runs and was measured with."""
    return x.is_cuda or bool(os.environ.get("ARENA_SIM_GPU"))


IMPLS = {"liger": _liger if _liger_swiglu else None, "torch": _torch}


def run(x: torch.Tensor):
    global IMPL
    IMPL = "liger" if _gpu(x) and _liger_swiglu is not None else "torch"
    return IMPLS[IMPL](x)
