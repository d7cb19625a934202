"""What vLLM/SGLang run unfused, best first (task.yaml `baselines:`): FlashInfer's rmsnorm
over the [T·H, d] head rows of q and of k, then its apply_rope_with_cos_sin_cache_inplace;
Liger's Triton RMSNorm over the head rows and its RoPE kernel (in place); else the torch
composition: F.rms_norm per head (bfloat16 out), then the rotation in float32, copied back
into q and k. `IMPL` names the one the last call used (the result's baseline_impl)."""

import os

import torch
import torch.nn.functional as F

try:
    from flashinfer.norm import rmsnorm as _fi_rmsnorm
    from flashinfer.rope import apply_rope_with_cos_sin_cache_inplace as _fi_rope
except Exception:  # noqa: BLE001 - not installed, or no GPU build
    _fi_rmsnorm = _fi_rope = None
try:
    from liger_kernel.ops.rms_norm import rms_norm_forward as _liger_rms
    from liger_kernel.ops.rope import rope_forward as _liger_rope
except Exception:  # noqa: BLE001 - not installed, or its Triton cannot load here
    _liger_rms = _liger_rope = None

IMPL = "torch"


def _flashinfer(positions, q, k, q_weight, k_weight, cos_sin_cache, eps):
    T, Hq, d = q.shape
    Hkv = k.shape[1]
    q.copy_(_fi_rmsnorm(q.view(T * Hq, d), q_weight, eps).view(T, Hq, d))
    k.copy_(_fi_rmsnorm(k.view(T * Hkv, d), k_weight, eps).view(T, Hkv, d))
    _fi_rope(positions, q.view(T, Hq * d), k.view(T, Hkv * d), d, cos_sin_cache, is_neox=True)
    return q, k


def _liger(positions, q, k, q_weight, k_weight, cos_sin_cache, eps):
    T, Hq, d = q.shape
    Hkv = k.shape[1]
    # "gemma" casting: x·rstd·w in float32, rounded once to bfloat16 (as F.rms_norm does).
    qn = _liger_rms(q.view(T * Hq, d), q_weight, eps, 0.0, "gemma", False)[0].view(1, T, Hq, d)
    kn = _liger_rms(k.view(T * Hkv, d), k_weight, eps, 0.0, "gemma", False)[0].view(1, T, Hkv, d)
    rows = cos_sin_cache.index_select(0, positions)
    cos, sin = rows[:, : d // 2].contiguous()[None], rows[:, d // 2 :].contiguous()[None]
    _liger_rope(qn.transpose(1, 2), kn.transpose(1, 2), cos, sin, rotary_dim=d)
    q.copy_(qn.view(T, Hq, d))
    k.copy_(kn.view(T, Hkv, d))
    return q, k


def _torch(positions, q, k, q_weight, k_weight, cos_sin_cache, eps):
    d = q.shape[-1]
    cos, sin = cos_sin_cache.index_select(0, positions)[:, None, :].split(d // 2, dim=-1)
    for x, w in ((q, q_weight), (k, k_weight)):
        n1, n2 = F.rms_norm(x, (d,), w, eps).float().split(d // 2, dim=-1)
        x[..., : d // 2].copy_(torch.addcmul(n1 * cos, n2, sin, value=-1.0))
        x[..., d // 2 :].copy_(torch.addcmul(n2 * cos, n1, sin))
    return q, k


def _gpu(x: torch.Tensor) -> bool:
    """A GPU, or a simulated one (`sim:` devices set ARENA_SIM_GPU in the candidate's process):
    Liger's kernels are Triton, which the simulator counts in its interpreter, so `sim:h200`
    predicts the kernel the H200 runs and was measured with."""
    return x.is_cuda or bool(os.environ.get("ARENA_SIM_GPU"))


IMPLS = {
    "flashinfer": _flashinfer if _fi_rope else None,
    "liger": _liger if _liger_rope else None,
    "torch": _torch,
}


def run(positions, q, k, q_weight, k_weight, cos_sin_cache, eps):
    global IMPL
    for name, fn in IMPLS.items():
        if fn is not None and (name == "torch" or q.is_cuda or (name == "liger" and _gpu(q))):
            IMPL = name
            return fn(positions, q, k, q_weight, k_weight, cos_sin_cache, eps)
