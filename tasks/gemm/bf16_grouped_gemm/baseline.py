"""What a user runs today: torch._grouped_mm(a, b.transpose(-2, -1), offs=offs): CUTLASS
grouped GEMM kernels on NVIDIA sm_90/sm_100 (one launch for all groups); on ROCm it is a
for-loop of hipBLASLt GEMMs unless ROCM_ALLOW_GROUP_GEMM_CK=1 (pytorch#161366), a weak
baseline there; on CPU torch 2.13 runs it too. Where _grouped_mm is missing or refuses the
shapes, a loop of torch.matmul over the groups (one host sync for the offsets)."""

import torch


def _loop(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    out = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    start = 0
    for g, end in enumerate(offs.tolist()):
        if end > start:
            torch.matmul(a[start:end], b[g].t(), out=out[start:end])
        start = end
    return out


def run(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    if hasattr(torch, "_grouped_mm"):
        try:
            return torch._grouped_mm(a, b.transpose(-2, -1), offs=offs)
        except (RuntimeError, NotImplementedError):
            pass
    return _loop(a, b, offs)
