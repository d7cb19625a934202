"""The correctness rule: |out - ref| <= atol + rtol * |ref| for at least min_match of the
elements; NaN and Inf in the output never pass. A rule that tolerates a share of outliers
(min_match < 1) tolerates at least one element: at the small sizes of the CPU workloads 0.1% of
640 elements rounds to none, which turned a single bf16 rounding outlier of a correct kernel
into a failure."""

from __future__ import annotations

from typing import Any

import torch


def compare(
    out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float, min_match: float
) -> dict[str, Any]:
    if tuple(out.shape) != tuple(ref.shape):
        return {
            "passed": False,
            "message": f"shape {tuple(out.shape)} != expected {tuple(ref.shape)}",
        }
    work = torch.float64 if ref.dtype == torch.float64 else torch.float32
    got = out.to(work)
    want = ref.to(work)
    n = got.numel()
    if n == 0:
        return {"passed": True, "match_fraction": 1.0, "max_abs_err": 0.0, "max_rel_err": 0.0}
    nonfinite = int((~torch.isfinite(got)).sum())
    diff = (got - want).abs()
    diff = torch.where(torch.isfinite(got), diff, torch.full_like(diff, float("inf")))
    ok = diff <= atol + rtol * want.abs()
    match = float(ok.sum()) / n
    outliers = n - int(ok.sum())
    allowed = max((1 - min_match) * n, 1.0 if min_match < 1 else 0.0)
    worst = int(torch.argmax(torch.nan_to_num(diff, nan=float("inf"), posinf=float("inf"))))
    rel = diff / want.abs().clamp_min(atol if atol > 0 else 1e-12)
    result = {
        "passed": nonfinite == 0 and outliers <= allowed + 1e-9,
        "match_fraction": match,
        "max_abs_err": float(diff.flatten()[worst]),
        "max_rel_err": float(torch.nan_to_num(rel, posinf=float("inf")).max()),
        "nonfinite": nonfinite,
        "worst": {
            "index": list(_unravel(worst, tuple(got.shape))),
            "got": float(got.flatten()[worst]),
            "expected": float(want.flatten()[worst]),
        },
    }
    if nonfinite:
        result["message"] = f"{nonfinite} NaN/Inf value(s) in the output"
    elif not result["passed"]:
        result["message"] = (
            f"{(1 - match) * 100:.3g}% of elements outside atol={atol:g}, rtol={rtol:g} "
            f"(allowed {(1 - min_match) * 100:.3g}%); worst at {result['worst']['index']}: "
            f"got {result['worst']['got']:.6g}, expected {result['worst']['expected']:.6g}"
        )
    return result


def _unravel(index: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    coords = []
    for dim in reversed(shape):
        coords.append(index % dim)
        index //= dim
    return tuple(reversed(coords))
