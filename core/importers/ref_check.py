"""The checks every converted task's reference gets at import, at each workload run there: it
runs, its outputs are finite, and no lazy output passes the task's own correctness rule
against it (all zeros, a constant, or one of the inputs handed back). A workload that fails
them is not written; a task whose own visible workload fails them is not converted: a task
that a cheat passes is a defect of the task, and the import says so rather than ship it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Rule:
    atol: float
    rtol: float
    min_match: float = 1.0


class BrokenWorkload(Exception):
    """The reference cannot serve at this workload; `kind` is the report's category
    (`reference_raises`, `reference_nonfinite`, `degenerate`)."""

    def __init__(self, kind: str, reason: str):
        super().__init__(reason)
        self.kind, self.reason = kind, reason


def check_outputs(outputs: Sequence[Any], inputs: Sequence[Any], rule: Rule, where: str) -> None:
    """Raise BrokenWorkload where an output is not a finite tensor or a lazy output passes."""
    import torch

    for k, out in enumerate(outputs):
        name = f"output {k}" if len(outputs) > 1 else "output"
        if not isinstance(out, torch.Tensor):
            raise BrokenWorkload(
                "reference_outputs", f"{name} at {where} is a {type(out).__name__}, not a tensor"
            )
        if out.is_floating_point() and not bool(torch.isfinite(out.float()).all()):
            raise BrokenWorkload(
                "reference_nonfinite",
                f"the reference's {name} has NaN or Inf at {where}: no candidate can pass there (NaN and Inf never pass here)",
            )
        lazy = lazy_passes(out, inputs, rule)
        if lazy:
            raise BrokenWorkload(
                "degenerate",
                f"{lazy} passes the correctness rule (atol {rule.atol:g}, rtol {rule.rtol:g}) for the reference's {name} at {where}: "
                "a candidate that computes nothing would pass",
            )


def lazy_passes(want: Any, inputs: Sequence[Any], rule: Rule) -> str | None:
    """The first lazy output that passes against `want`, named; None where each fails."""
    import torch

    if want.numel() == 0:
        return None
    ref = want.detach()
    tries: list[tuple[str, Any]] = [("an all-zeros output", torch.zeros_like(ref))]
    if ref.numel() > 1:  # a one-element output (a loss) is its own constant
        flat = ref.double()
        mean = float(flat.mean())
        value: float | int | bool = (
            mean
            if ref.is_floating_point()
            else (mean >= 0.5 if ref.dtype == torch.bool else round(mean))
        )
        tries.append(("a constant output (the expected mean)", torch.full_like(ref, value)))
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.shape == ref.shape and x.data_ptr() != ref.data_ptr():
            tries.append((f"input {i} handed back", x.detach().to(ref.dtype)))
    for what, got in tries:
        if passes(got, ref, rule):
            return what
    return None


def passes(got: Any, want: Any, rule: Rule) -> bool:
    """compare.compare's verdict alone (core/harness/compare.py), without its report: NaN/Inf
    in `got` never pass, at most (1 - min_match) of the elements may miss."""
    import torch

    work = torch.float64 if want.dtype == torch.float64 else torch.float32
    g, w = got.to(work), want.to(work)
    ok = (g - w).abs() <= rule.atol + rule.rtol * w.abs()  # NaN and Inf compare False
    n = w.numel()
    allowed = max((1 - rule.min_match) * n, 1.0 if rule.min_match < 1 else 0.0)
    return n - int(ok.sum()) <= allowed + 1e-9
