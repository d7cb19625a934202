"""Best first (task.yaml `baselines:`): Liger's fused gate-up SwiGLU kernel (one Triton
kernel over the [T, 2I] rows: silu of the gate in float32, rounded to bfloat16, times up);
else the torch composition F.silu on the gate half, times the up half (two kernels).
`IMPL` names the one the last call used (the result's baseline_impl)."""

import os

import torch
import torch.nn.functional as F

try:
    from liger_kernel.ops.swiglu import swiglu_fused_gate_up_forward as _liger_swiglu
except Exception:  # noqa: BLE001 - not installed, or its Triton cannot load here
    _liger_swiglu = None

IMPL = "torch"


def _liger(x: torch.Tensor) -> torch.Tensor:
    return _liger_swiglu(x)[1]


def _torch(x: torch.Tensor) -> torch.Tensor:
    inter = x.shape[-1] // 2
    return F.silu(x[:, :inter]) * x[:, inter:]


def _gpu(x: torch.Tensor) -> bool:
    """A GPU, or a simulated one (`sim:` devices set ARENA_SIM_GPU in the candidate's process):
    Liger's kernels are Triton, which the simulator counts in its interpreter, so `sim:h200`
    predicts the kernel the H200 runs and was measured with."""
    return x.is_cuda or bool(os.environ.get("ARENA_SIM_GPU"))


IMPLS = {"liger": _liger if _liger_swiglu else None, "torch": _torch}


def run(x: torch.Tensor) -> torch.Tensor:
    global IMPL
    IMPL = "liger" if _gpu(x) and _liger_swiglu is not None else "torch"
    return IMPLS[IMPL](x)
