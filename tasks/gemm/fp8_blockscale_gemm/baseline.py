"""What a user runs today for a DeepSeek-V3 style fp8 linear layer.

NVIDIA: torch._scaled_mm with blockwise scaling (cuBLASLt's 1x128 x 128x128 block-scaled fp8
GEMM, CUDA 12.9+, sm_90/sm_100): scale_a must be [M, K/128] column-major (outer-dim-major)
and scale_b is passed as b_scale.t() for b.t(). On torch 2.11 + an H200, cuBLAS refuses
M not a multiple of 16 (CUBLAS_STATUS_NOT_SUPPORTED at M = 1 and 77, measured), so rows are
padded to a multiple of 16 (zeros with scale 1) and the extra rows dropped.
If that fails: DeepGEMM's fp8_gemm_nt where importable; else a torch composition.
AMD (MI300 is float8_e4m3fnuz; these inputs are OCP e4m3fn) and CPU: the composition,
dequantize to bfloat16 (in float32, rounded once) and torch.matmul (hipBLASLt / oneDNN)."""

import torch

_SCALED_MM_OK = True
_DEEP_GEMM_OK = True


def _dequant(a, a_scale, b, b_scale):
    M, K = a.shape
    N = b.shape[0]
    A = (a.float() * a_scale.repeat_interleave(128, dim=1)[:, :K]).to(torch.bfloat16)
    B = (
        b.float() * b_scale.repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)[:N, :K]
    ).to(torch.bfloat16)
    return A, B


def _scaled_mm(a, a_scale, b, b_scale):
    M, K = a.shape
    pad = -M % 16
    if pad:
        a = torch.cat([a, torch.zeros((pad, K), dtype=a.dtype, device=a.device)])
        a_scale = torch.cat(
            [
                a_scale,
                torch.ones((pad, a_scale.shape[1]), dtype=a_scale.dtype, device=a_scale.device),
            ]
        )
    scale_a = a_scale.t().contiguous().t()  # [M, K/128], column-major
    y = torch._scaled_mm(a, b.t(), scale_a=scale_a, scale_b=b_scale.t(), out_dtype=torch.bfloat16)
    return y[:M] if pad else y


def _deep_gemm(a, a_scale, b, b_scale):
    import deep_gemm

    y = torch.empty((a.shape[0], b.shape[0]), dtype=torch.bfloat16, device=a.device)
    deep_gemm.fp8_gemm_nt((a, a_scale), (b, b_scale), y)
    return y


IMPL = "torch"  # which implementation the last call used (the result's baseline_impl)


def _torch(a, a_scale, b, b_scale):
    A, B = _dequant(a, a_scale, b, b_scale)
    return torch.matmul(A, B.t())


def _has_deep_gemm() -> bool:
    """Whether deep_gemm imports here: a plain import (the arena's scan notes importlib in any
    bundled file as in a candidate's)."""
    try:
        import deep_gemm  # noqa: F401
    except Exception:  # noqa: BLE001 - a broken install is an absent one
        return False
    return True


IMPLS = {
    "cublaslt": _scaled_mm,
    "deepgemm": _deep_gemm if _has_deep_gemm() else None,
    "torch": _torch,
}


def run(
    a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor, b_scale: torch.Tensor
) -> torch.Tensor:
    global _SCALED_MM_OK, _DEEP_GEMM_OK, IMPL
    if a.device.type == "cuda" and torch.version.hip is None:
        if _SCALED_MM_OK:
            try:
                out = _scaled_mm(a, a_scale, b, b_scale)
                IMPL = "cublaslt"
                return out
            except (RuntimeError, TypeError):
                _SCALED_MM_OK = False
        if _DEEP_GEMM_OK:
            try:
                out = _deep_gemm(a, a_scale, b, b_scale)
                IMPL = "deepgemm"
                return out
            except Exception:  # noqa: BLE001 - not installed, or this shape unsupported
                _DEEP_GEMM_OK = False
    IMPL = "torch"
    return _torch(a, a_scale, b, b_scale)
