"""The weighted combine judged as a float32 accumulation, rounded once to bfloat16.

reference.run_all returns, per rank, the exact per-token sum S = Σ w·x (float32), A = Σ|w·x|
and m, the number of (expert, token) terms that come back ([T, 1]). The sum must be
accumulated in float32 (as DeepEP's combine does); each term may be rounded to bfloat16 at
most twice on the way (its product, and a per-rank partial sum sent as bfloat16: 2u·A,
u = 2^-8), float32 accumulation in any order adds at most m·2^-24·A (slack 2^-20), and
rounding the result adds u·|S|. So an element passes iff

    |got − S| ≤ u·(2·A + |S|)·(1 + 2^-10) + m·2^-20·A

(float64 arithmetic): a token no expert holds (m = 0) must be exactly 0. Summing in bfloat16
may exceed it; a dropped, doubled, unweighted or misplaced term, or a garbage slot beyond
recv_count fails. NaN/Inf never pass."""

import torch

U = 2.0 ** -8


def sum_verdict(got: torch.Tensor, exact: torch.Tensor, abs_sum: torch.Tensor, terms, label: str) -> dict:
    dev = exact.device
    g, s, a = got.to(dev).double(), exact.double(), abs_sum.double()
    m = torch.broadcast_to(terms.to(dev).double(), g.shape) if isinstance(terms, torch.Tensor) else float(terms)
    tol = U * (2.0 * a + s.abs()) * (1.0 + 2.0 ** -10) + m * 2.0 ** -20 * a
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
            f"{n_bad} of {err.numel()} elements of {label} are off by more than a float32 sum rounded to bfloat16 allows; "
            f"worst at {idx}: got {float(g.flatten()[i]):.6g}, exact sum {float(s.flatten()[i]):.6g} "
            f"(allowed ±{float(tol.flatten()[i]):.3g} = 2^-8·(2·Σ|terms| + |sum|) + {mm:g}·2^-20·Σ|terms|: accumulate in float32)"
        )
    return verdict


def check(outputs, expected, inputs):
    return {"combined_x": sum_verdict(outputs[0], expected[0], expected[1], expected[2], "combined_x")}
