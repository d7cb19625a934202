"""One check for sums judged against the rounding error they may carry: the collectives that
add bfloat16 terms (all-reduce, reduce-scatter, the fused all-reduce + RMSNorm) and the MoE
combines. Their check.py files use it, as the fp8 quantization tasks use fp8_check.py.

The reference gives, per element, the exact sum S (float32 from the bfloat16 terms), A = Σ|term|
and m, the number of terms. With u = 2^-8 (bfloat16's unit roundoff):

- bfloat16 summation in any order (`term_roundings=None`): m − 1 additions each rounded to
  bfloat16 are off by at most (m − 1)·u·A to first order, and one more u·A admits one extra
  rounding of a term, so the slack is u·m·A;
- a float32 accumulation (`term_roundings=k`, `float32=True`): each term may be rounded to
  bfloat16 k times on the way (k·u·A), and float32 additions in any order add at most
  m·2^-24·A (slack m·2^-20·A);

and rounding the result adds u·|S|. NaN and Inf never pass.
"""

from __future__ import annotations

from typing import Any

import torch

U = 2.0**-8


def sum_verdict(
    got: torch.Tensor,
    exact: torch.Tensor,
    abs_sum: torch.Tensor,
    terms: Any,
    label: str,
    term_roundings: float | None = None,
    float32: bool = False,
) -> dict[str, Any]:
    """A check.py verdict for output `label`: passed iff every element is within the bound."""
    dev = exact.device
    g, s, a = got.to(dev).double(), exact.double(), abs_sum.double()
    m = (
        torch.broadcast_to(terms.to(dev).double(), g.shape)
        if isinstance(terms, torch.Tensor)
        else float(terms)
    )
    k = m if term_roundings is None else term_roundings
    tol = U * (k * a + s.abs()) * (1.0 + 2.0**-10)
    if float32:
        tol = tol + m * 2.0**-20 * a
    err = (g - s).abs()
    err = torch.where(torch.isfinite(g), err, torch.full_like(err, float("inf")))
    bad = ~(err <= tol)
    n_bad = int(bad.sum())
    verdict: dict[str, Any] = {
        "passed": n_bad == 0,
        "max_abs_err": float(err.max()) if err.numel() else 0.0,
        "match_fraction": 1.0 - n_bad / max(err.numel(), 1),
    }
    if n_bad:
        i = int(torch.argmax(torch.where(bad, err - tol, torch.full_like(err, -1.0)).flatten()))
        idx = [int(v) for v in torch.unravel_index(torch.tensor(i), tuple(g.shape))]
        mm = float(m.flatten()[i]) if isinstance(m, torch.Tensor) and m.dim() else float(m)
        if float32:
            what, rule = (
                "a float32 sum rounded to bfloat16",
                f"2^-8·({term_roundings:g}·Σ|terms| + |sum|) + {mm:g}·2^-20·Σ|terms|: accumulate in float32",
            )
        else:
            what, rule = "bfloat16 summation error", f"2^-8·({mm:g}·Σ|terms| + |sum|)"
        verdict["message"] = (
            f"{n_bad} of {err.numel()} elements of {label} are off by more than {what} allows; worst at {idx}: got "
            f"{float(g.flatten()[i]):.6g}, exact sum {float(s.flatten()[i]):.6g} (allowed ±{float(tol.flatten()[i]):.3g} = {rule})"
        )
    return verdict
