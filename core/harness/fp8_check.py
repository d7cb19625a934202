"""The check of every per-128-group fp8 quantization task (norm/rmsnorm_fp8_quant,
activation/silu_mul_fp8_quant): fp8 outputs judged after dequantization, not bit for bit.
Outputs: `out` (float8_e4m3fn [T, H]) and `scales` (float32 [T, H/128]); the reference returns
the unrounded q = y / scale and its scales.

An honest kernel may differ from the reference by one fp8 step where y / scale lies near a
rounding boundary (it multiplies by 448 / absmax where the reference divides by the scale, rounds y to
bfloat16 first, reduces in another order), so comparing fp8 codes would fail it. Instead:

* scales: within 1% of the reference's (bfloat16 intermediates move absmax by ≤ 0.4%; a
  wrong fp8 maximum, 240 instead of 448, is 87% off);
* out: deq = out · scale (the candidate's own scales, per 128-group) must be within
  half an e4m3 step of y, plus 1% of |y|: |deq - y| ≤ ½·step(1.01·|q|)·scale_ref + 0.01·|y|,
  where q = y / scale_ref and step(v) = 2^(max(⌊log₂ v⌋, -6) - 3) is the e4m3 grid spacing at v
  (2^-9 in the subnormal range). Correct rounding errs by at most half a step; a value on the
  other side of a rounding boundary is still within half a step (plus the 1% for the scale and
  bfloat16 differences). Truncation instead of rounding errs by up to a whole step and fails,
  as does a wrong scale, a missing clamp (NaN) or a wrong group size.
"""

from __future__ import annotations

import torch

from core.harness.compare import compare

GROUP = 128
REL_SLACK = 0.01


def _step_e4m3(v: torch.Tensor) -> torch.Tensor:
    """The spacing of the float8_e4m3fn grid at magnitude v (fp8 units)."""
    e = torch.floor(torch.log2(v.clamp_min(2.0**-6))).clamp_max(8)
    return torch.exp2(e - 3)


def check_group_quant(
    outputs: list[torch.Tensor], expected: list[torch.Tensor], inputs: list
) -> dict[str, dict]:
    q_ref, s_ref = expected[0].double(), expected[1].double()
    dev = q_ref.device
    out = outputs[0].to(dev).double()
    s = outputs[1].to(dev).double()
    T, H = q_ref.shape
    G = H // GROUP

    res_s = compare(outputs[1].to(dev), expected[1], 0.0, REL_SLACK, 1.0)
    res_s = {
        k: v
        for k, v in res_s.items()
        if k in ("passed", "message", "max_abs_err", "max_rel_err", "match_fraction")
    }
    if not res_s["passed"]:
        res_s["message"] = (
            "scales: "
            + res_s.get("message", "")
            + " (scale = max(absmax of the 128-group, 1e-10) / 448)"
        )

    y = (q_ref.view(T, G, GROUP) * s_ref.view(T, G, 1)).view(T, H)
    deq = (out.view(T, G, GROUP) * s.view(T, G, 1)).view(T, H)
    s_full = s_ref.repeat_interleave(GROUP, dim=1)
    tol = 0.5 * _step_e4m3(1.01 * q_ref.abs()) * s_full + REL_SLACK * y.abs()
    err = (deq - y).abs()
    finite = torch.isfinite(deq)
    err = torch.where(finite, err, torch.full_like(err, float("inf")))
    bad = ~(err <= tol)
    n_bad = int(bad.sum())
    res_q: dict = {
        "passed": n_bad == 0,
        "max_abs_err": float(err.max()) if err.numel() else 0.0,
        "match_fraction": 1.0 - n_bad / max(err.numel(), 1),
    }
    if n_bad:
        i = int(torch.argmax((err - tol).flatten()))
        r, c = divmod(i, H)
        res_q["message"] = (
            f"{n_bad} of {err.numel()} dequantized values (out · scale) are more than half an fp8 step from y; "
            f"worst at [{r}, {c}]: out={float(out[r, c]):.6g}, scale={float(s[r, c // GROUP]):.6g}, "
            f"dequantized {float(deq[r, c]):.6g}, expected y={float(y[r, c]):.6g} "
            f"(q = clamp(y / scale, ±448) rounded to nearest even)"
        )
    return {"out": res_q, "scales": res_s}
