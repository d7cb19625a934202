"""residual_out judged against the rounding error any summation order may make; out judged
as the RMSNorm of the residual_out the candidate returned.

residual_out: reference.run_all returns, per rank, the exact S = Σ_q x_q + residual (float32,
accumulated from the bfloat16 inputs), A = Σ|term| and m = W + 1, the number of terms. With
u = 2^-8 (bfloat16's unit roundoff), m − 1 additions in any order (a ring, a tree, in-switch
NVLS, one-shot), each rounded to bfloat16, are off by at most (m − 1)·u·A (to first order),
and rounding the result adds u·|S|; one more u·A of slack admits one extra rounding of a
term. So an element passes iff

    |got − S| ≤ u·(m·A + |S|)·(1 + 2^-10)

(float64 arithmetic). An fp32-accumulating kernel lands within half an ulp of S; NCCL's bf16
all-reduce followed by a bf16 add lands inside the bound; a dropped, doubled or
fp8-compressed contribution, or another rank's residual, does not. NaN/Inf never pass.

out: recomputed from the candidate's own residual_out ro (float32): ro·rsqrt(mean(ro²) + eps)
·weight, elementwise within atol = rtol = 1e-2 as norm/add_rmsnorm (a kernel may normalise
its float32 sum instead of the rounded ro: that moves each element by ≤ 2^-8 relative).
Judging against the candidate's ro, not the reference's, keeps the two outputs consistent
while ro may differ from the reference by the summation error allowed above."""

import torch

from core.harness.sum_check import sum_verdict  # the bound, shared by every summing task


def check(outputs, expected, inputs):
    from core.harness.compare import compare

    out, residual_out = outputs[0], outputs[1]
    exact, abs_sum, terms = expected[1], expected[2], int(expected[3])
    weight, eps = inputs[2], float(inputs[3])
    res = sum_verdict(residual_out, exact, abs_sum, terms, "residual_out")
    if not res["passed"]:
        return {
            "residual_out": res,
            "out": {"passed": False, "message": "not judged: residual_out is wrong"},
        }
    ro = residual_out.to(exact.device).float()
    want = (
        ro
        * torch.rsqrt(ro.pow(2).mean(dim=-1, keepdim=True) + eps)
        * weight.to(exact.device).float()
    )
    v = compare(out.to(exact.device), want, 1.0e-2, 1.0e-2, 1.0)
    v = {
        k: v[k]
        for k in ("passed", "message", "max_abs_err", "max_rel_err", "match_fraction")
        if k in v
    }
    if not v["passed"]:
        v["message"] = "out is not RMSNorm(residual_out)·weight of your residual_out: " + v.get(
            "message", ""
        )
    return {"residual_out": res, "out": v}
