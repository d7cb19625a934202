"""A bfloat16 sum judged against the rounding error any summation order may make.

reference.run_all returns, per rank, the exact sum S (float32, accumulated from the bfloat16
inputs), A = Σ|term| and m, the number of terms. With u = 2^-8 (bfloat16's unit roundoff), m − 1
additions in any order (a ring, a tree, in-switch NVLS, one-shot), each rounded to bfloat16,
are off by at most (m − 1)·u·A (to first order), and rounding the result adds u·|S|; one more
u·A of slack admits one extra rounding of a term. So an element passes iff

    |got − S| ≤ u·(m·A + |S|)·(1 + 2^-10)

(float64 arithmetic). An fp32-accumulating kernel lands within half an ulp of S; NCCL's bf16
ring lands well inside the bound; a dropped, doubled or fp8-compressed contribution, or a
chunk from the wrong rank, does not. NaN/Inf never pass."""

import torch

U = 2.0 ** -8


def sum_verdict(got: torch.Tensor, exact: torch.Tensor, abs_sum: torch.Tensor, terms, label: str) -> dict:
    dev = exact.device
    g, s, a = got.to(dev).double(), exact.double(), abs_sum.double()
    m = terms.to(dev).double() if isinstance(terms, torch.Tensor) else float(terms)
    tol = U * (m * a + s.abs()) * (1.0 + 2.0 ** -10)
    err = (g - s).abs()
    err = torch.where(torch.isfinite(g), err, torch.full_like(err, float("inf")))
    bad = ~(err <= tol)
    n_bad = int(bad.sum())
    verdict = {"passed": n_bad == 0, "max_abs_err": float(err.max()) if err.numel() else 0.0,
               "match_fraction": 1.0 - n_bad / max(err.numel(), 1)}
    if n_bad:
        i = int(torch.argmax(torch.where(bad, err - tol, torch.full_like(err, -1.0)).flatten()))
        idx = list(torch.unravel_index(torch.tensor(i), tuple(g.shape)))
        idx = [int(v) for v in idx]
        mm = float(m.flatten()[i]) if isinstance(m, torch.Tensor) and m.dim() else float(m)
        verdict["message"] = (
            f"{n_bad} of {err.numel()} elements of {label} are off by more than bfloat16 summation error allows; "
            f"worst at {idx}: got {float(g.flatten()[i]):.6g}, exact sum {float(s.flatten()[i]):.6g} "
            f"(allowed ±{float(tol.flatten()[i]):.3g} = 2^-8·({mm:g}·Σ|terms| + |sum|))"
        )
    return verdict


def check(outputs, expected, inputs):
    exact, abs_sum, terms = expected[0], expected[1], expected[2]
    return {"out": sum_verdict(outputs[0], exact, abs_sum, int(terms), "out")}
