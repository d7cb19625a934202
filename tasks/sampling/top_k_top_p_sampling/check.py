"""Sampling judged by distribution, not bit for bit.

1. Support: every sampled id must lie in the allowed set the reference computed (top-k ∩
   top-p, widened by float slack at both boundaries). Sampling outside it, e.g. ignoring
   top_p or top_k, fails at once.

2. Distribution: one draw per row cannot be compared with a table, but its *mid-rank* can.
   Order row i's tokens by q (descending; ties by index) and let m_i = F_i(j−) + q_ij/2 for
   the sampled token j, where F_i(j−) is the q-mass before j. For a sampler that draws from q,
   m_i has mean μ_i = Σ_j q_j·(F(j−) + q_j/2) (= 1/2) and variance v_i, both computed from q,
   and the rows are independent. Two sums are tested:
     S1 = Σ_i (m_i − μ_i)              (location: argmax gives m_i = q_max/2, far below 1/2;
                                        a flattened or uniform-in-set sampler is too high)
     S2 = Σ_i ((m_i − μ_i)² − v_i)     (spread: a sampler that always picks a middle token)
   Each term is bounded by 1 in absolute value with a known variance, so Bernstein's
   inequality bounds P(|S| ≥ t) ≤ 2·exp(−(t²/2) / (Σvar + t/3)) for any B, not only
   asymptotically. Each test rejects at ALPHA/2, so an honest sampler fails with probability
   at most ALPHA = 1e-6 per call, whatever the logits; the rule is exact, so no slack is needed
   for a "lucky" seed. Rows where q puts all mass on one token (top_k = 1, very peaked rows)
   contribute zero variance and no evidence.

3. Pooled over a workload's checked calls (`check_pooled`; the harness keeps each call's
   `evidence`): a bias too small to show in one call (a sampler that falls back to the argmax
   now and then; pure greedy at B = 1 or 3, one or three draws a call) shows in the sum.
   The argmax hit count H = Σ 1[row i drew its most probable token] has, for an honest
   sampler, mean Σ p_i and variance Σ p_i(1 − p_i) (p_i: q's largest mass in row i, ties
   included), a Poisson-binomial; H above its mean by more than the one-sided Bernstein bound
   fails. The location and spread sums S1, S2 of test 2 are pooled the same way. The harness
   asks after every call, so the n-th look tests at ALPHA_POOLED / (n(n + 1)) (the looks'
   false alarms sum to at most ALPHA_POOLED = 1e-6 per pool, however many calls there are; the
   harness keeps a pool per workload and one of all calls: at most 1e-6 per workload + 1e-6).
   Few rows per call need more calls: task.yaml's `correctness.samples` makes the harness run
   at least 64 rows' worth of seeds per workload (64 seeds at B = 1).
"""

from __future__ import annotations

import math

import torch

ALPHA = 1.0e-6
ALPHA_POOLED = 1.0e-6  # per workload, over all its looks


def _one_sided_threshold(var_sum: float, alpha: float, bound: float = 1.0) -> float:
    """t with exp(−(t²/2) / (var_sum + bound·t/3)) = alpha (P(S ≥ t) ≤ alpha)."""
    L = math.log(1.0 / alpha)
    a = bound * L / 3.0
    return a + math.sqrt(a * a + 2.0 * var_sum * L)


def _bernstein_threshold(var_sum: float, alpha: float, bound: float = 1.0) -> float:
    """t with 2·exp(−(t²/2) / (var_sum + bound·t/3)) = alpha."""
    L = math.log(2.0 / alpha)
    a = bound * L / 3.0
    return a + math.sqrt(a * a + 2.0 * var_sum * L)


def check(
    outputs: list[torch.Tensor], expected: list[torch.Tensor], inputs: list
) -> dict[str, dict]:
    q, allowed = expected[1], expected[2]
    dev = q.device
    ids = outputs[0].to(dev)
    B, V = q.shape
    in_range = (ids >= 0) & (ids < V)
    if not bool(in_range.all()):
        r = int(torch.nonzero(~in_range)[0])
        return {
            "token_ids": {
                "passed": False,
                "message": f"row {r}: token id {int(ids[r])} is not in [0, {V})",
            }
        }
    safe = ids.clamp(0, V - 1)[:, None]
    ok = allowed.gather(1, safe).squeeze(1)
    n_out = int((~ok).sum())
    if n_out:
        r = int(torch.nonzero(~ok)[0])
        j = int(ids[r])
        top_k, top_p = inputs[1], inputs[2]
        return {
            "token_ids": {
                "passed": False,
                "message": (
                    f"{n_out} of {B} sampled tokens lie outside their row's top-k ∩ top-p set; first: row {r} sampled "
                    f"token {j} (top_k={int(top_k[r])}, top_p={float(top_p[r]):.4f}; q of that token after top-k/top-p "
                    f"renormalisation = {float(q[r, j]):.3g}, allowed set size {int(allowed[r].sum())})"
                ),
            }
        }

    qd = q.double()
    # mid-rank of the sampled token: mass strictly before it in (q desc, index asc) order
    qj = qd.gather(1, safe)
    col = torch.arange(V, device=dev)[None, :]
    before = (qd > qj) | ((qd == qj) & (col < safe))
    m = (qd * before).sum(dim=1) + qj.squeeze(1) / 2
    # moments of the mid-rank under q (order-invariant within ties)
    qs = torch.sort(qd, dim=1, descending=True).values
    mid = torch.cumsum(qs, dim=1) - qs / 2
    mu = (qs * mid).sum(dim=1)
    dev2 = (mid - mu[:, None]) ** 2
    var = (qs * dev2).sum(dim=1)
    m4 = (qs * dev2 * dev2).sum(dim=1)
    x = m - mu
    s1, v1 = float(x.sum()), float(var.sum())
    s2, v2 = float((x * x - var).sum()), float((m4 - var * var).clamp_min(0).sum())
    t1, t2 = _bernstein_threshold(v1, ALPHA / 2), _bernstein_threshold(v2, ALPHA / 2)
    # the argmax's mass per row (all tokens tied at the maximum count as the argmax)
    q_max = qs[:, :1]
    top = qd >= q_max
    p_top = (qd * top).sum(dim=1)
    hit = top.gather(1, safe).squeeze(1)
    evidence = {
        "rows": B,
        "argmax_hits": float(hit.sum()),
        "argmax_expected": float(p_top.sum()),
        "argmax_variance": float((p_top * (1 - p_top)).sum()),
        "s1": s1,
        "v1": v1,
        "s2": s2,
        "v2": v2,
    }
    stats = {
        "location_stat": s1,
        "location_threshold": t1,
        "spread_stat": s2,
        "spread_threshold": t2,
        "mean_mid_rank": float(m.mean()),
        "expected_mean_mid_rank": float(mu.mean()),
    }
    result = {
        "passed": abs(s1) < t1 and abs(s2) < t2,
        "max_abs_err": 0.0,
        **stats,
        "evidence": evidence,
    }
    if abs(s1) >= t1:
        result["message"] = (
            f"the samples are biased: their mean mid-rank in the probability order is {stats['mean_mid_rank']:.4f} over "
            f"{B} rows, expected {stats['expected_mean_mid_rank']:.4f} (sum of deviations {s1:.2f}, an honest sampler stays "
            f"within ±{t1:.2f} with probability 1 − 5e-7); "
            + (
                "too often the most probable tokens (argmax/greedy, or a too-low temperature?)"
                if s1 < 0
                else "too often improbable tokens (flattened or uniform within the kept set?)"
            )
        )
    elif abs(s2) >= t2:
        result["message"] = (
            f"the samples have the wrong spread over the distribution: the sum of squared mid-rank deviations is off by "
            f"{s2:.2f} (an honest sampler stays within ±{t2:.2f} with probability 1 − 5e-7)"
        )
    return {"token_ids": result}


def check_pooled(evidence: dict[str, list[dict]]) -> dict[str, dict]:
    """The workload's checked calls so far, pooled (3. above): {output: verdict}."""
    calls = evidence.get("token_ids") or []
    n = len(calls)
    if n == 0:
        return {"token_ids": {"passed": True}}
    total = {key: sum(float(c[key]) for c in calls) for key in calls[0]}
    alpha = ALPHA_POOLED / (n * (n + 1)) / 3  # this look's share, split over three tests
    excess = total["argmax_hits"] - total["argmax_expected"]
    t_hits = _one_sided_threshold(total["argmax_variance"], alpha)
    t1, t2 = _bernstein_threshold(total["v1"], alpha), _bernstein_threshold(total["v2"], alpha)
    stats = {
        "pooled_calls": n,
        "pooled_rows": int(total["rows"]),
        "argmax_hits": int(total["argmax_hits"]),
        "argmax_expected": total["argmax_expected"],
        "argmax_threshold": total["argmax_expected"] + t_hits,
    }
    where = f"over the workload's {n} checked call(s), {int(total['rows'])} rows in all"
    if excess >= t_hits:
        return {
            "token_ids": {
                "passed": False,
                **stats,
                "message": (
                    f"the sampler draws the most probable token too often {where}: {int(total['argmax_hits'])} times where an honest "
                    f"sampler's expected count is {total['argmax_expected']:.1f} and exceeds {total['argmax_expected'] + t_hits:.1f} with "
                    f"probability below {alpha:.1e} (greedy, or an argmax fallback)"
                ),
            }
        }
    if abs(total["s1"]) >= t1 or abs(total["s2"]) >= t2:
        which = "location" if abs(total["s1"]) >= t1 else "spread"
        return {
            "token_ids": {
                "passed": False,
                **stats,
                "message": (
                    f"the samples are biased {where}: the pooled {which} sum of mid-rank deviations is "
                    f"{total['s1'] if which == 'location' else total['s2']:.2f}, beyond ±{t1 if which == 'location' else t2:.2f} "
                    f"(false alarm below {alpha:.1e})"
                ),
            }
        }
    return {"token_ids": {"passed": True, **stats}}
