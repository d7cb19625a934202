"""Order-free judgement of group-limited routing (DeepSeek-V3 noaux_tc): the ids come from at
most KG groups that are a top-KG set of group scores, they are a top-K set of the selection
scores within the kept groups (ties to the lowest index), and each weight matches its own
id (unbiased sigmoid, renormalised over the chosen set, times the factor)."""

import torch

from core.harness.compare import compare

WEIGHT_ATOL, WEIGHT_RTOL = 1.0e-5, 1.0e-4
SELECT_ATOL = 2.0e-6  # float32 sigmoid + bias and the two-term group sum round by ~1e-7


def _first(mask):
    return int(mask.nonzero()[0])


def _tie_broken(values, chosen, allowed, low):
    """Rows where an equal value outside the choice has a lower index than one inside it."""
    n = values.shape[1]
    idx = torch.arange(n, device=values.device).expand_as(values)
    at_low = (values == low[:, None]) & allowed
    last_in = torch.where(chosen & at_low, idx, -1).max(1).values
    first_out = torch.where(~chosen & at_low, idx, n).min(1).values
    return first_out < last_in, first_out, last_in


def _check_ids(ids, u, k, G, KG):
    T, E = u.shape
    gsize = E // G
    bad = ((ids < 0) | (ids >= E)).any(1)
    if bad.any():
        t = _first(bad)
        return f"row {t}: expert id outside [0, {E}): {ids[t].tolist()}"
    srt = ids.sort(dim=1).values
    if k > 1 and (srt[:, 1:] == srt[:, :-1]).any():
        t = _first((srt[:, 1:] == srt[:, :-1]).any(1))
        return f"row {t}: an expert id repeats: {ids[t].tolist()}"
    chosen = torch.zeros(T, E, dtype=torch.bool, device=u.device).scatter_(1, ids, True)
    group_scores = u.view(T, G, gsize).topk(2, dim=-1).values.sum(-1)
    used = chosen.view(T, G, gsize).any(-1)
    n_used = used.sum(1)
    if (n_used > KG).any():
        t = _first(n_used > KG)
        return f"row {t}: the ids {sorted(ids[t].tolist())} span {int(n_used[t])} groups; only topk_group = {KG} groups may be kept"
    # The kept groups: those the ids use, filled up to KG with the best remaining groups.
    priority = torch.where(used, torch.full_like(group_scores, float("inf")), group_scores)
    kept_idx = torch.sort(priority, dim=1, descending=True, stable=True).indices[:, :KG]
    kept = torch.zeros(T, G, dtype=torch.bool, device=u.device).scatter_(1, kept_idx, True)
    if KG < G:
        low = group_scores.masked_fill(~kept, float("inf")).min(1).values
        high = group_scores.masked_fill(kept, float("-inf")).max(1).values
        wrong = low < high - SELECT_ATOL
        if wrong.any():
            t = _first(wrong)
            best = torch.sort(group_scores[t], descending=True, stable=True).indices[:KG].tolist()
            return (
                f"row {t}: wrong groups: the ids use group(s) {used[t].nonzero().flatten().tolist()}, but the top-{KG} "
                f"groups by (sum of the two largest sigmoid + bias) are {sorted(best)}"
            )
        tie, lo_g, hi_g = _tie_broken(group_scores, kept, torch.ones_like(kept), low)
        if tie.any():
            t = _first(tie)
            return f"row {t}: group tie broken the wrong way: groups {int(lo_g[t])} and {int(hi_g[t])} score equally; the lower index must be kept"
    allowed = kept.repeat_interleave(gsize, dim=1)
    low = u.masked_fill(~chosen, float("inf")).min(1).values
    high = u.masked_fill(chosen | ~allowed, float("-inf")).max(1).values
    wrong = low < high - SELECT_ATOL
    if wrong.any():
        t = _first(wrong)
        best = (
            torch.sort(u[t].masked_fill(~allowed[t], float("-inf")), descending=True, stable=True)
            .indices[:k]
            .tolist()
        )
        return (
            f"row {t}: not the top-{k} experts of the kept groups by sigmoid(logit) + bias: chose {sorted(ids[t].tolist())}, "
            f"expected {sorted(best)}"
        )
    tie, lo_e, hi_e = _tie_broken(u, chosen, allowed, low)
    if tie.any():
        t = _first(tie)
        return f"row {t}: tie broken the wrong way: experts {int(lo_e[t])} and {int(hi_e[t])} score equally; the lower index must be chosen"
    return None


def check(outputs, expected, inputs):
    weights, ids = outputs
    logits, bias, k, G, KG, factor = inputs
    x = logits.double()
    s = torch.sigmoid(x)
    u = s + bias.double().to(x.device)
    ids = ids.to(x.device).long()
    problem = _check_ids(ids, u, int(k), int(G), int(KG))
    if problem:
        return {
            "topk_ids": {"passed": False, "message": problem},
            "topk_weights": {
                "passed": False,
                "message": f"not judged, topk_ids is wrong: {problem}",
            },
        }
    sc = s.gather(1, ids)
    want = sc / sc.sum(1, keepdim=True) * float(factor)
    return {
        "topk_ids": {"passed": True},
        "topk_weights": compare(weights.to(x.device), want, WEIGHT_ATOL, WEIGHT_RTOL, 1.0),
    }
